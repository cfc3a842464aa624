//! Timelines: `TLX_TRACE=<file>`, or [`capture`] around launches. An
//! interpreted launch gives each task of each program and its waits on the
//! scheduler's clock of task steps; a GPU launch of a kernel built with
//! timelines (`timeline = true`, or `TLX_TRACE` set when it was built)
//! gives each task replica, the program and every barrier wait, from
//! `%globaltimer`, on one track per SM and warp. The file is Chrome trace
//! JSON (Perfetto, chrome://tracing), rewritten after every recorded launch.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use tlx_core::instrument::{
    decode_timeline, SliceKind, Timeline, TIMELINE_HEADER_WORDS, TIMELINE_TRAILER_WORDS,
};
use tlx_core::interp::{Trace, TraceKind};
use tlx_core::ir::ScalarType;

use crate::backend::{Arg, Backend, Launch};
use crate::buffer::Buffer;
use crate::check;
use crate::device::Device;
use crate::error::Error;
use crate::spec::TimelineSliceSpec;
use crate::value::ScalarValue;

/// The clock a launch's timeline is on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The interpreter's: one tick per task step of a program.
    TaskSteps,
    /// The GPU's `%globaltimer`.
    Nanoseconds,
}

/// One slice of a launch's timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// The row it is drawn on: `program (0, 0, 0) task 1` on the
    /// interpreter, `SM 12 · warp 4` on the GPU.
    pub track: String,
    /// The task (`default task`, `task 1`, `program`) or the wait
    /// (`wait: mbarrier (line 40)`).
    pub name: String,
    /// The program, a task (replica), or a wait.
    pub kind: SliceKind,
    /// The program it belongs to.
    pub program: [u32; 3],
    /// From the launch's first recorded event, on its clock.
    pub start: u64,
    /// Its end, on the same clock.
    pub end: u64,
}

/// One launch's timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchTimeline {
    /// The kernel's name.
    pub kernel: String,
    /// What `start` and `end` count.
    pub clock: Clock,
    /// By track, then start.
    pub slices: Vec<Slice>,
    /// GPU events that did not fit the buffer (counted, not recorded).
    pub dropped: u64,
    /// GPU slices whose start was recorded and whose end was not (a wait
    /// whose end found the buffer full, or a kernel that stopped early),
    /// left out.
    pub unclosed: u64,
}

/// Launches recorded into the `TLX_TRACE` file, at most this many per
/// kernel (`TLX_TRACE_LAUNCHES` to change it): later ones (a benchmark's
/// timed loop) run untraced, as fast as a kernel built with timelines runs
/// when nothing records.
const LAUNCHES_PER_KERNEL: usize = 4;

/// What the `TLX_TRACE` file holds so far.
static FILE_LAUNCHES: Mutex<Vec<LaunchTimeline>> = Mutex::new(Vec::new());

thread_local! {
    /// The launches [`capture`] is collecting on this thread, if it runs.
    static CAPTURED: RefCell<Option<Vec<LaunchTimeline>>> = const { RefCell::new(None) };
}

/// Runs `f` and returns, with its result, the timeline of every launch it
/// made on this thread (whether or not `TLX_TRACE` is set): on the GPU,
/// of kernels built with timelines only.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<LaunchTimeline>) {
    let outer = CAPTURED.with(|c| c.borrow_mut().replace(Vec::new()));
    let result = f();
    let captured = CAPTURED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (result, captured.unwrap_or_default())
}

/// The file `TLX_TRACE` names, if it is set: read once, at the first
/// launch, so that launches (every GPU launch asks) read no environment.
fn requested() -> Option<&'static Path> {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    FILE.get_or_init(|| {
        std::env::var_os("TLX_TRACE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .as_deref()
}

/// Whether a launch of `kernel` is to be recorded: inside [`capture`], or
/// with `TLX_TRACE` set while the file has room for another of its launches.
pub(crate) fn recording(kernel: &str) -> bool {
    if CAPTURED.with(|c| c.borrow().is_some()) {
        return true;
    }
    requested().is_some() && {
        let launches = FILE_LAUNCHES.lock().unwrap_or_else(|p| p.into_inner());
        let limit = env_count("TLX_TRACE_LAUNCHES").unwrap_or(LAUNCHES_PER_KERNEL);
        launches.iter().filter(|l| l.kernel == kernel).count() < limit
    }
}

/// Hands one launch's timeline to [`capture`] and to the `TLX_TRACE` file.
pub(crate) fn record(launch: LaunchTimeline) -> Result<(), Error> {
    let launch = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(captured) => {
            captured.push(launch.clone());
            launch
        }
        None => launch,
    });
    let Some(path) = requested() else {
        return Ok(());
    };
    let mut launches = FILE_LAUNCHES.lock().unwrap_or_else(|p| p.into_inner());
    if launch.dropped > 0 {
        eprintln!(
            "tlx: the timeline of `{}` dropped {} events: its buffer holds a fixed number per warp \
             (`TLX_TRACE_EVENTS` words; the tasks' and the program's ends are always kept)",
            launch.kernel, launch.dropped
        );
    }
    // With nothing dropped, only a kernel that stopped leaves slices open.
    if launch.unclosed > 0 && launch.dropped == 0 {
        eprintln!(
            "tlx: the timeline of `{}` has {} slices that started and never ended (left out): \
             did the kernel stop early?",
            launch.kernel, launch.unclosed
        );
    }
    launches.push(launch);
    write_file(path, &launches)
}

fn write_file(path: &Path, launches: &[LaunchTimeline]) -> Result<(), Error> {
    std::fs::write(path, chrome_trace(launches)).map_err(|e| Error::InvalidEnv {
        var: "TLX_TRACE",
        message: format!("cannot write the trace to {}: {e}", path.display()),
    })
}

/// An interpreted launch's slices as a timeline.
pub(crate) fn interpreted(kernel: &str, trace: &Trace) -> LaunchTimeline {
    let slices = trace
        .events()
        .into_iter()
        .map(|e| {
            let [x, y, z] = e.program;
            let (name, kind) = match e.kind {
                TraceKind::Task => (e.task.clone(), SliceKind::Task),
                TraceKind::Wait(label) => (label, SliceKind::Wait),
            };
            Slice {
                track: format!("program ({x}, {y}, {z}) {}", e.task),
                name,
                kind,
                program: e.program,
                start: e.start,
                end: e.end,
            }
        })
        .collect();
    LaunchTimeline {
        kernel: kernel.to_string(),
        clock: Clock::TaskSteps,
        slices,
        dropped: 0,
        unclosed: 0,
    }
}

/// Bytes of records one GPU launch may take; a track gets an equal share,
/// between `MIN_WORDS` and `MAX_WORDS` record words (a wait's event takes
/// one, a task's two; `TLX_TRACE_EVENTS` to change the most).
const BUFFER_BYTES: usize = 64 << 20;
const MIN_WORDS: usize = 16;
const MAX_WORDS: usize = 8 << 10;

/// A count from the environment; none when unset, and when not a count
/// (said on stderr, with the default that stands).
fn env_count(var: &str) -> Option<usize> {
    let text = std::env::var(var).ok()?;
    let count = text.trim().parse().ok();
    if count.is_none() {
        eprintln!("tlx: {var}={text} is not a count of events or launches; the default stands");
    }
    count
}

/// The record buffer of a GPU launch of a kernel built with timelines.
pub(crate) struct GpuTimeline {
    buffer: Buffer<i64>,
    capacity: u32,
    /// What each pair of the kernel's sites marks.
    slices: &'static [TimelineSliceSpec],
}

impl GpuTimeline {
    /// Appends the timeline arguments to `args` (after the user's and any
    /// `check_bounds` ones): a zeroed buffer and its capacity when the
    /// launch is recorded, otherwise none (a capacity of 0).
    pub(crate) fn prepare<B: Backend>(
        device: &Device,
        backend: &B,
        launch: &Launch,
        slices: &'static [TimelineSliceSpec],
        args: &mut Vec<Arg<'_, B::Ptr>>,
    ) -> Result<Option<GpuTimeline>, Error> {
        let spec = launch.spec;
        if !recording(spec.name) {
            args.push(Arg::Scalar(ScalarValue {
                ty: ScalarType::I64,
                bits: 0,
            }));
            args.push(Arg::Scalar(ScalarValue {
                ty: ScalarType::I32,
                bits: 0,
            }));
            return Ok(None);
        }
        let tracks = launch.grid.programs() as usize * launch.config_spec.num_warps as usize;
        let per_track = BUFFER_BYTES / (tracks.max(1) * 8);
        let most = env_count("TLX_TRACE_EVENTS")
            .unwrap_or(MAX_WORDS)
            .max(MIN_WORDS);
        let fits = per_track.saturating_sub(TIMELINE_HEADER_WORDS + TIMELINE_TRAILER_WORDS);
        // Even, so that each track's header (written as one 16-byte
        // vector) stays 16-byte aligned.
        let capacity = fits.clamp(MIN_WORDS, most) / 2 * 2;
        let words = tracks * (TIMELINE_HEADER_WORDS + capacity + TIMELINE_TRAILER_WORDS);
        let buffer = device.alloc_zeros::<i64>(words)?;
        check::push_launch_buffer(backend, spec, args, &buffer)?;
        args.push(Arg::Scalar(ScalarValue {
            ty: ScalarType::I32,
            bits: capacity as u64,
        }));
        Ok(Some(GpuTimeline {
            buffer,
            capacity: capacity as u32,
            slices,
        }))
    }

    /// Reads the records back (the launch has finished) and records the
    /// timeline; a launch that failed leaves none to read.
    pub(crate) fn finish(self, launch: &Launch, ran: bool) -> Result<(), Error> {
        if !ran {
            return Ok(());
        }
        let words = self.buffer.download()?;
        let grid = launch.grid.dims();
        let programs = launch.grid.programs();
        let timeline = decode_timeline(
            &words,
            programs,
            launch.config_spec.num_warps,
            self.capacity,
        );
        record(on_tracks(launch.spec.name, grid, self.slices, &timeline))
    }
}

/// A decoded GPU timeline as slices on tracks: one per SM and warp, and
/// where programs on one SM overlap in time (several resident at once),
/// one per SM, warp and resident program.
fn on_tracks(
    kernel: &str,
    grid: [u32; 3],
    specs: &[TimelineSliceSpec],
    timeline: &Timeline,
) -> LaunchTimeline {
    let origin = timeline
        .slices
        .iter()
        .map(|s| s.start_ns)
        .min()
        .unwrap_or(0);
    // Each (SM, warp, program)'s span, to place programs that overlap on
    // lanes of their own.
    let mut spans: BTreeMap<(u32, u32), BTreeMap<u64, (u64, u64)>> = BTreeMap::new();
    for s in &timeline.slices {
        let span = spans
            .entry((s.sm, s.warp))
            .or_default()
            .entry(s.program)
            .or_insert((s.start_ns, s.end_ns));
        span.0 = span.0.min(s.start_ns);
        span.1 = span.1.max(s.end_ns);
    }
    let mut lane_of: HashMap<(u32, u32, u64), usize> = HashMap::new();
    for (&(sm, warp), programs) in &spans {
        let mut order: Vec<(&u64, &(u64, u64))> = programs.iter().collect();
        order.sort_by_key(|(_, span)| **span);
        let mut lane_ends: Vec<u64> = Vec::new();
        for (&program, &(start, end)) in order {
            let lane = match lane_ends.iter().position(|&e| e <= start) {
                Some(free) => free,
                None => {
                    lane_ends.push(0);
                    lane_ends.len() - 1
                }
            };
            lane_ends[lane] = end;
            lane_of.insert((sm, warp, program), lane);
        }
    }
    let program_of = |linear: u64| {
        let (x, rest) = (
            linear % u64::from(grid[0].max(1)),
            linear / u64::from(grid[0].max(1)),
        );
        let (y, z) = (
            rest % u64::from(grid[1].max(1)),
            rest / u64::from(grid[1].max(1)),
        );
        [x as u32, y as u32, z as u32]
    };
    let slices = timeline
        .slices
        .iter()
        .map(|s| {
            let lane = lane_of
                .get(&(s.sm, s.warp, s.program))
                .copied()
                .unwrap_or(0);
            let mut track = format!("SM {:3} · warp {:2}", s.sm, s.warp);
            if lane > 0 {
                let _ = write!(track, " · #{}", lane + 1);
            }
            let spec = specs.get(s.slice);
            Slice {
                track,
                name: spec.map_or("?", |p| p.label).to_string(),
                kind: spec.map_or(SliceKind::Task, |p| p.kind),
                program: program_of(s.program),
                start: s.start_ns - origin,
                end: s.end_ns - origin,
            }
        })
        .collect();
    LaunchTimeline {
        kernel: kernel.to_string(),
        clock: Clock::Nanoseconds,
        slices,
        dropped: timeline.dropped,
        unclosed: timeline.unclosed,
    }
}

/// Says once, at the first GPU launch of a kernel built without timelines
/// while `TLX_TRACE` is set, how to get one.
pub(crate) fn note_untimed_gpu_launch(kernel: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    if requested().is_none() {
        return;
    }
    SAID.call_once(|| {
        eprintln!(
            "tlx: `{kernel}` was built without timelines, so TLX_TRACE records none of its GPU \
             launches: build with TLX_TRACE set (`TLX_TRACE=out.json cargo run ...` does both) \
             or give the kernel `timeline = true`"
        );
    });
}

/// Chrome trace JSON for `launches`: a process per launch, a thread per
/// track, a complete event per slice; task steps are shown as
/// microseconds, nanoseconds as they are.
fn chrome_trace(launches: &[LaunchTimeline]) -> String {
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let mut lines: Vec<String> = Vec::new();
    for (pid, launch) in launches.iter().enumerate() {
        let (device, scale) = match launch.clock {
            Clock::TaskSteps => ("interpreter, task steps", 1.0),
            Clock::Nanoseconds => ("GPU", 1e-3),
        };
        lines.push(format!(
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":{}}}}}",
            json_string(&format!("launch {pid}: {} ({device})", launch.kernel))
        ));
        let mut tracks: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &launch.slices {
            let next = tracks.len();
            tracks.entry(&s.track).or_insert(next);
        }
        // Thread ids in track order, which Perfetto sorts rows by.
        for (tid, name) in tracks.keys().enumerate() {
            lines.push(format!(
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
                json_string(name)
            ));
        }
        let tid_of: HashMap<&str, usize> =
            tracks.keys().enumerate().map(|(i, t)| (*t, i)).collect();
        for s in &launch.slices {
            let category = match s.kind {
                SliceKind::Program => "program",
                SliceKind::Task => "task",
                SliceKind::Wait => "wait",
            };
            let [x, y, z] = s.program;
            lines.push(format!(
                "{{\"ph\":\"X\",\"name\":{},\"cat\":\"{category}\",\"pid\":{pid},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"program\":\"({x}, {y}, {z})\"}}}}",
                json_string(&s.name),
                tid_of.get(s.track.as_str()).copied().unwrap_or(0),
                s.start as f64 * scale,
                (s.end - s.start) as f64 * scale
            ));
        }
    }
    out.push_str(&lines.join(",\n"));
    out.push_str("\n]}\n");
    out
}

fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
