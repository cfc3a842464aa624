//! GPU timelines: a kernel rewritten so that it records when each of its
//! task replicas (and the program as a whole) started and ended and when it
//! waited on a barrier, for `TLX_TRACE`. The rewrite puts a `trace_event`
//! before and after each such stretch; the first thread of the context
//! that runs it appends a record to its warp's track of a buffer the
//! launch passes (the layout below), which [`decode`] turns back into
//! slices. A kernel built without timelines has none of this.
//!
//! The buffer: one track per warp of each program (program `p`, numbered x
//! fastest as the grid is, warp `w`: track `p * warps + w`), each
//! [`HEADER_WORDS`] i64 words, `capacity` words of records and
//! [`TRAILER_WORDS`] more. The header, written by each warp as it starts:
//! `%globaltimer`, then `%clock` (low 32 bits) with `%smid` in bits 32..64;
//! the trailer's first word counts the events that found the track full.
//! A record is one word, `%clock` with `site + 1` in
//! bits 32..48 (a wait, inside the hot loops: as little as can be); the
//! program's and the tasks' events (outside them) set bit 63 and add a
//! second word, `%globaltimer`, which places the SM's clock on the common
//! timer. A zero word ends a track's records. The last [`CLOSING_WORDS`]
//! of a track's records are kept for the records that close its task's
//! and its program's slices ([`words_left_free`]): a track that fills up
//! with waits loses those waits, not the bars around them.

use std::collections::HashMap;

use crate::ir::{
    Block, Kernel, Op, OpId, OpKind, Param, ParamKind, Prim, ScalarType, SrcLoc, ValueId,
};

/// The parameters the rewrite appends, after the user's (and after
/// `check_bounds`'): the record buffer and its capacity per track.
pub const TIMELINE_BUFFER_PARAM: &str = "__tlx_timeline";
pub const TIMELINE_CAPACITY_PARAM: &str = "__tlx_timeline_capacity";
/// i64 words before and after each track's records.
pub const HEADER_WORDS: usize = 2;
pub const TRAILER_WORDS: usize = 2;
/// The words at the end of each track's records that only the records
/// closing a task's or the program's slice may take: one of each, two
/// words apiece (a warp runs at most one task replica).
pub const CLOSING_WORDS: usize = 4;
/// The bit of a record's first word that says a timer word follows.
const WIDE: u64 = 1 << 63;

/// The record words an event at `site` must leave free after its own:
/// none where it closes the program's or a task's slice (a wide event at
/// an odd site), [`CLOSING_WORDS`] for every other. The kernel records an
/// event only where that much room is left.
pub fn words_left_free(site: usize, wide: bool) -> usize {
    if wide && site % 2 == 1 {
        0
    } else {
        CLOSING_WORDS
    }
}

/// What a slice of a timeline is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SliceKind {
    /// The program, from its first op to its last.
    Program,
    /// One replica of a task of `async_tasks`.
    Task,
    /// A wait on an mbarrier, a named barrier or the cluster barrier.
    Wait,
}

/// A stretch of the kernel the rewrite marks: site `2 * i` opens slice
/// `i`, site `2 * i + 1` closes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineSlice {
    pub kind: SliceKind,
    /// What the timeline calls it: `program`, `default task`, `task 2`,
    /// `wait: mbarrier (line 40)`.
    pub label: String,
    pub loc: SrcLoc,
}

/// Rewrites `kernel` in place (see the module doc) and returns the slices
/// its sites open and close.
pub fn instrument_timeline(kernel: &mut Kernel) -> Vec<TimelineSlice> {
    let buffer = add_param(
        kernel,
        TIMELINE_BUFFER_PARAM,
        ParamKind::Ptr(ScalarType::I64),
    );
    let capacity = add_param(
        kernel,
        TIMELINE_CAPACITY_PARAM,
        ParamKind::Scalar(ScalarType::I32),
    );
    let mut rewriter = Rewriter {
        buffer,
        capacity,
        slices: Vec::new(),
    };
    let mut body = std::mem::take(&mut kernel.body);
    let loc = body.ops.first().map(|op| op.loc).unwrap_or_default();
    rewriter.block(&mut body);
    rewriter.around(&mut body.ops, 0, SliceKind::Program, "program".into(), loc);
    kernel.body = body;
    kernel.number_ops();
    rewriter.slices
}

fn add_param(kernel: &mut Kernel, name: &str, kind: ParamKind) -> ValueId {
    let value = ValueId(kernel.types.len() as u32);
    kernel.types.push(kind.value_type());
    kernel.params.push(Param {
        name: name.to_string(),
        kind,
        value,
    });
    value
}

struct Rewriter {
    buffer: ValueId,
    capacity: ValueId,
    slices: Vec<TimelineSlice>,
}

/// The label of a wait op, if it is one.
fn wait_label(op: &Op) -> Option<String> {
    let what = match &op.kind {
        OpKind::Prim {
            prim: Prim::BarrierWait,
            ..
        } => "mbarrier",
        OpKind::Prim {
            prim: Prim::NamedBarrierWait,
            ..
        } => "named barrier",
        OpKind::ClusterBarrier => "cluster_barrier",
        _ => return None,
    };
    Some(format!("wait: {what} (line {})", op.loc.line))
}

impl Rewriter {
    fn event(&self, site: usize, loc: SrcLoc) -> Op {
        // The program's and the tasks' events lie outside the hot loops:
        // they also read the timer.
        let wide = self.slices[site / 2].kind != SliceKind::Wait;
        Op {
            id: OpId::default(),
            kind: OpKind::Prim {
                prim: Prim::TraceEvent,
                args: vec![self.buffer, self.capacity],
                imms: vec![site as i64, i64::from(wide)],
            },
            results: Vec::new(),
            loc,
        }
    }

    /// Opens a slice at `ops[at]` and closes it at the end of `ops` (before
    /// a terminator).
    fn around(
        &mut self,
        ops: &mut Vec<Op>,
        at: usize,
        kind: SliceKind,
        label: String,
        loc: SrcLoc,
    ) {
        let site = 2 * self.slices.len();
        self.slices.push(TimelineSlice { kind, label, loc });
        let end = match ops.last() {
            Some(last) if last.kind.is_terminator() => ops.len() - 1,
            _ => ops.len(),
        };
        ops.insert(end, self.event(site + 1, loc));
        ops.insert(at, self.event(site, loc));
    }

    fn block(&mut self, block: &mut Block) {
        let mut ops = Vec::with_capacity(block.ops.len());
        for mut op in std::mem::take(&mut block.ops) {
            if let OpKind::AsyncTasks { tasks } = &mut op.kind {
                for (index, task) in tasks.iter_mut().enumerate() {
                    self.block(&mut task.body);
                    let label = if task.default {
                        "default task".to_string()
                    } else {
                        format!("task {index}")
                    };
                    let loc = task.body.ops.first().map_or(op.loc, |o| o.loc);
                    self.around(&mut task.body.ops, 0, SliceKind::Task, label, loc);
                }
            } else {
                for nested in op.kind.blocks_mut() {
                    self.block(nested);
                }
            }
            match wait_label(&op) {
                Some(label) => {
                    let site = 2 * self.slices.len();
                    self.slices.push(TimelineSlice {
                        kind: SliceKind::Wait,
                        label,
                        loc: op.loc,
                    });
                    ops.push(self.event(site, op.loc));
                    let loc = op.loc;
                    ops.push(op);
                    ops.push(self.event(site + 1, loc));
                }
                None => ops.push(op),
            }
        }
        block.ops = ops;
    }
}

/// One slice as a GPU ran it: on which track, between which times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedSlice {
    /// Index into the slices [`instrument_timeline`] returned.
    pub slice: usize,
    /// The program (x fastest) and its warp whose first thread recorded it.
    pub program: u64,
    pub warp: u32,
    pub sm: u32,
    /// Its start and end on the `%globaltimer` scale, in nanoseconds (see
    /// [`decode`]).
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A launch's buffer, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    pub slices: Vec<TimedSlice>,
    /// Events past a track's capacity: counted, not recorded.
    pub dropped: u64,
    /// Slices opened and never closed (their track ran out of room, or
    /// the kernel stopped), left out.
    pub unclosed: u64,
}

/// One record as read back.
#[derive(Copy, Clone, Debug)]
struct Event {
    clock: u32,
    site: usize,
}

/// A point where an SM's clock and the timer were read together.
#[derive(Copy, Clone, Debug)]
struct Sync {
    clock: u32,
    timer: u64,
}

/// Turns the words of a launch's buffer (`programs * warps` tracks of
/// `capacity` record words) back into slices. Times: each SM's `%clock`
/// (which the waits record alone) is put on the `%globaltimer` scale by a
/// line fitted through the points where a warp on that SM read both (as
/// it started, and at each program and task event); the timer's common
/// origin lines the SMs up, the clock keeps each one's spacing to the
/// cycle, and a coarse timer's ticks average out.
pub fn decode(words: &[i64], programs: u64, warps: u32, capacity: u32) -> Timeline {
    let stride = HEADER_WORDS + capacity as usize + TRAILER_WORDS;
    let mut timeline = Timeline::default();
    let mut tracks: Vec<(u64, u32, u32, Vec<Event>)> = Vec::new();
    let mut syncs: HashMap<u32, Vec<Sync>> = HashMap::new();
    for track in 0..programs * u64::from(warps) {
        let Some(base) = usize::try_from(track)
            .ok()
            .and_then(|t| t.checked_mul(stride))
        else {
            break;
        };
        let Some(header) = words.get(base..base + HEADER_WORDS) else {
            break;
        };
        if header[0] == 0 {
            continue;
        }
        let sm = (header[1] as u64 >> 32) as u32;
        let trailer = base + HEADER_WORDS + capacity as usize;
        timeline.dropped += words.get(trailer).map_or(0, |d| d.max(&0).unsigned_abs());
        let sync = |clock: u64, timer: i64| Sync {
            clock: clock as u32,
            timer: timer as u64,
        };
        let points = syncs.entry(sm).or_default();
        points.push(sync(header[1] as u64, header[0]));
        let records = words.get(base + HEADER_WORDS..trailer).unwrap_or(&[]);
        let mut events = Vec::new();
        let mut i = 0;
        while let Some(&word) = records.get(i) {
            let word = word as u64;
            if word == 0 {
                break;
            }
            if word & WIDE != 0 {
                match records.get(i + 1) {
                    Some(&timer) => points.push(sync(word, timer)),
                    None => break,
                }
                i += 1;
            }
            i += 1;
            let site = ((word >> 32) & 0xffff) as usize;
            if site == 0 {
                continue;
            }
            events.push(Event {
                clock: word as u32,
                site: site - 1,
            });
        }
        tracks.push((
            track / u64::from(warps),
            (track % u64::from(warps)) as u32,
            sm,
            events,
        ));
    }
    let scales: HashMap<u32, SmScale> = syncs
        .iter()
        .filter_map(|(&sm, points)| SmScale::fit(points).map(|s| (sm, s)))
        .collect();
    for (program, warp, sm, events) in tracks {
        let Some(scale) = scales.get(&sm) else {
            continue;
        };
        let mut open: Vec<(usize, u64)> = Vec::new();
        for e in events {
            let at = scale.ns(e.clock);
            let slice = e.site / 2;
            if e.site % 2 == 0 {
                open.push((slice, at));
                continue;
            }
            // Close the innermost matching slice; those opened inside it
            // and never closed are dropped.
            let Some(depth) = open.iter().rposition(|(s, _)| *s == slice) else {
                continue;
            };
            timeline.unclosed += (open.len() - depth - 1) as u64;
            open.truncate(depth + 1);
            if let Some((slice, start)) = open.pop() {
                timeline.slices.push(TimedSlice {
                    slice,
                    program,
                    warp,
                    sm,
                    start_ns: start,
                    end_ns: at.max(start),
                });
            }
        }
        timeline.unclosed += open.len() as u64;
    }
    timeline
        .slices
        .sort_by_key(|s| (s.sm, s.warp, s.start_ns, std::cmp::Reverse(s.end_ns)));
    timeline
}

/// An SM's clock put on the timer's scale: `timer = origin + (clock -
/// clock0) * ns_per_cycle`, the clock unwrapped around `clock0`.
struct SmScale {
    clock0: u32,
    origin: f64,
    ns_per_cycle: f64,
}

/// SM clocks run at 1 to 3 cycles a nanosecond; a fit outside that, or
/// from points a few microseconds apart, says more about the timer's ticks.
const NOMINAL_NS_PER_CYCLE: f64 = 1.0 / 1.755;

impl SmScale {
    fn ns(&self, clock: u32) -> u64 {
        let cycles = cycles_since(clock, self.clock0);
        (self.origin + cycles * self.ns_per_cycle).max(0.0).round() as u64
    }

    /// A least-squares line through `points`, or the nominal rate through
    /// their mean when they span too little to fit one.
    fn fit(points: &[Sync]) -> Option<SmScale> {
        let first = points.iter().min_by_key(|p| p.timer)?;
        let clock0 = first.clock;
        let n = points.len() as f64;
        let xs: Vec<f64> = points
            .iter()
            .map(|p| cycles_since(p.clock, clock0))
            .collect();
        let ys: Vec<f64> = points
            .iter()
            .map(|p| p.timer.wrapping_sub(first.timer) as f64)
            .collect();
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let span = ys.iter().cloned().fold(0.0, f64::max);
        let fitted = (sxx > 0.0 && span >= 4_000.0).then(|| sxy / sxx);
        let slope = fitted
            .filter(|s| (0.3..=1.0).contains(s))
            .unwrap_or(NOMINAL_NS_PER_CYCLE);
        Some(SmScale {
            clock0,
            origin: first.timer as f64 + my - slope * mx,
            ns_per_cycle: slope,
        })
    }
}

/// Cycles from `clock0` to `clock` on a 32-bit counter that may have
/// wrapped, either way (a coarse timer may put a later clock first).
fn cycles_since(clock: u32, clock0: u32) -> f64 {
    f64::from(clock.wrapping_sub(clock0) as i32)
}

#[cfg(test)]
mod tests;
