//! The timeline family's lowering: `trace_event` (put in by
//! `tlx_core::instrument::timeline` when a kernel is built with
//! timelines), and the track each warp sets up in the entry block. The
//! layout of the buffer is the instrumentation module's.
//!
//! The waits' events sit in the hottest loops, where the attention
//! consumers hold every register they may: the first version (count and
//! track in registers, a two-word record of timer, clock and SM per event)
//! made ptxas spill there (72 bytes in the forward at head dim 128) and
//! cost 6% with nothing recorded (H100). So nothing of it stays in
//! registers between events (docs/timelines.md has the spills before and
//! after; one block of predicated PTX per event, tried too, spilled far
//! more): each warp's next-record and end
//! pointers live in shared memory (`StaticShared::timeline_counters`, set
//! in the entry block), a wait's record is one word (`%clock` and the
//! site), and the SM and the timer are read where it costs nothing (at the
//! warp's start and the program's and tasks' events).

use std::fmt::Write as _;

use super::{no_lowering, Operands};
use crate::error::{malformed, Result};
use crate::lower::Lowerer;
use tlx_core::instrument::{
    timeline_words_left_free, TIMELINE_HEADER_WORDS, TIMELINE_TRAILER_WORDS,
};
use tlx_core::ir::Prim;

/// Bytes of a warp's pointers in shared memory: the next record, the end.
pub(crate) const TIMELINE_SLOT_BYTES: usize = 16;

impl<'k> Lowerer<'k> {
    pub(super) fn lower_timeline_prim(&mut self, named: &Operands<'k>) -> Result<()> {
        match named.prim() {
            Prim::TraceEvent => {
                let buffer = self.register(named.arg("buffer")?)?;
                let capacity = self.register(named.arg("capacity")?)?;
                let site = named.imm("site")?;
                let wide = named.imm("wide")? != 0;
                self.trace_event(&buffer, &capacity, site, wide)
            }
            other => Err(no_lowering(other)),
        }
    }

    fn trace_event(&mut self, buffer: &str, capacity: &str, site: i64, wide: bool) -> Result<()> {
        let slots = self
            .facts
            .static_shared
            .timeline_counters
            .ok_or_else(|| malformed("`trace_event` without its counters"))?;
        self.start_timeline_track(buffer, capacity, slots);
        // A launch that records nothing (no buffer) left the end at 0.
        self.on_first_thread("true", |l| {
            let clock = l.f.asm("i32", "mov.u32 $0, %clock;", "=r", &[]);
            let timer = wide.then(|| l.f.asm("i64", "mov.u64 $0, %globaltimer;", "=l", &[]));
            let next_slot = l.timeline_slot(slots);
            let end_slot = l.smem_ptr_plus(&next_slot, 8);
            let at = l.f.inst(format!(
                "load volatile i64, ptr addrspace(3) {next_slot}, align 8"
            ));
            let end = l.f.inst(format!(
                "load volatile i64, ptr addrspace(3) {end_slot}, align 8"
            ));
            let bytes = if wide { 16 } else { 8 };
            let after = l.f.inst(format!("add i64 {at}, {bytes}"));
            // Every record but a task's or the program's end leaves the
            // words those need (the instrumentation's layout).
            let free = 8 * timeline_words_left_free(site as usize, wide);
            let needs = if free == 0 {
                after.clone()
            } else {
                l.f.inst(format!("add i64 {at}, {}", bytes + free))
            };
            let fits = l.f.inst(format!("icmp ule i64 {needs}, {end}"));
            let full = l.f.fresh("trace_full");
            let record = l.f.fresh("trace_record");
            let done = l.f.fresh("trace_done");
            l.f.stmt(format!("br i1 {fits}, label %{record}, label %{full}"));
            l.enter_block(&record);
            let clock = l.f.inst(format!("zext i32 {clock} to i64"));
            let tag = ((site as u64 + 1) << 32) | if wide { 1 << 63 } else { 0 };
            let word = l.f.inst(format!("or i64 {clock}, {}", tag as i64));
            let ptr = l.f.inst(format!("inttoptr i64 {at} to ptr addrspace(1)"));
            l.f.stmt(format!("store i64 {word}, ptr addrspace(1) {ptr}, align 8"));
            if let Some(timer) = &timer {
                let second =
                    l.f.inst(format!("getelementptr i64, ptr addrspace(1) {ptr}, i64 1"));
                l.f.stmt(format!(
                    "store i64 {timer}, ptr addrspace(1) {second}, align 8"
                ));
            }
            l.f.stmt(format!(
                "store volatile i64 {after}, ptr addrspace(3) {next_slot}, align 8"
            ));
            l.f.stmt(format!("br label %{done}"));
            // The count of events that found the track full is the
            // trailer's first word, at the end.
            l.enter_block(&full);
            let live = l.f.inst(format!("icmp ne i64 {end}, 0"));
            l.when(&live, |l| {
                let dropped = l.f.inst(format!("inttoptr i64 {end} to ptr addrspace(1)"));
                l.f.stmt(format!(
                    "atomicrmw add ptr addrspace(1) {dropped}, i64 1 monotonic, align 8"
                ));
            });
            l.f.stmt(format!("br label %{done}"));
            l.enter_block(&done);
        });
        Ok(())
    }

    /// The shared slot of the warp of the thread running this, from
    /// `%tid.x` read in place. A constant where the context's first warp is
    /// known looks cheaper but moved ptxas to spill hundreds of bytes in
    /// the attention kernels at head dim 256 and in the backward.
    fn timeline_slot(&mut self, slots: usize) -> String {
        let tid = self.f.asm("i32", "mov.u32 $0, %tid.x;", "=r", &[]);
        let warp = self.f.inst(format!("lshr i32 {tid}, 5"));
        let bytes = self
            .f
            .inst(format!("mul i32 {warp}, {TIMELINE_SLOT_BYTES}"));
        let offset = self.f.inst(format!("add i32 {bytes}, {slots}"));
        self.smem_ptr(&offset)
    }

    /// Once per kernel, in the entry block: each warp finds its track (the
    /// program's index, x fastest, times the program's warps, plus its
    /// warp), puts its next-record and end pointers in its shared slot
    /// (every lane storing the same; the end is 0 without a buffer), and,
    /// with a buffer, has lane 0 write the header's timer, clock and SM.
    fn start_timeline_track(&mut self, buffer: &str, capacity: &str, slots: usize) {
        if self.threads.timeline_started {
            return;
        }
        self.threads.timeline_started = true;
        let program = self.program_index(true);
        let warp = self.threads.program_warp.clone();
        let p = |l: &mut Self, rhs: String| l.f.prologue_inst(rhs);
        let first = p(
            self,
            format!("mul i64 {program}, {}", self.kernel.total_warps()),
        );
        let warp64 = p(self, format!("zext i32 {warp} to i64"));
        let track = p(self, format!("add i64 {first}, {warp64}"));
        let cap = p(self, format!("zext i32 {capacity} to i64"));
        let stride = p(
            self,
            format!(
                "add i64 {cap}, {}",
                TIMELINE_HEADER_WORDS + TIMELINE_TRAILER_WORDS
            ),
        );
        let track_word = p(self, format!("mul i64 {track}, {stride}"));
        let header = p(
            self,
            format!("getelementptr i64, ptr addrspace(1) {buffer}, i64 {track_word}"),
        );
        let header_at = p(self, format!("ptrtoint ptr addrspace(1) {header} to i64"));
        let next = p(
            self,
            format!("add i64 {header_at}, {}", 8 * TIMELINE_HEADER_WORDS),
        );
        let records = p(self, format!("mul i64 {cap}, 8"));
        let records_end = p(self, format!("add i64 {next}, {records}"));
        let live = p(self, format!("icmp ne i32 {capacity}, 0"));
        // Without a buffer, no record fits and no count is kept.
        let end = p(self, format!("select i1 {live}, i64 {records_end}, i64 0"));
        let bytes = p(self, format!("mul i32 {warp}, {TIMELINE_SLOT_BYTES}"));
        let offset = p(self, format!("add i32 {bytes}, {slots}"));
        let next_slot = p(
            self,
            format!("getelementptr i8, ptr addrspace(3) @global_smem, i32 {offset}"),
        );
        let end_slot = p(
            self,
            format!("getelementptr i8, ptr addrspace(3) {next_slot}, i32 8"),
        );
        // The header: lane 0 of each warp, only with a buffer.
        let timer = self
            .f
            .prologue_inst("call i64 asm sideeffect \"mov.u64 $0, %globaltimer;\", \"=l\"()");
        let clock = self
            .f
            .prologue_inst("call i32 asm sideeffect \"mov.u32 $0, %clock;\", \"=r\"()");
        let sm = self
            .f
            .prologue_inst("call i32 asm sideeffect \"mov.u32 $0, %smid;\", \"=r\"()");
        let clock64 = p(self, format!("zext i32 {clock} to i64"));
        let sm64 = p(self, format!("zext i32 {sm} to i64"));
        let sm_high = p(self, format!("shl i64 {sm64}, 32"));
        let clock_sm = p(self, format!("or i64 {clock64}, {sm_high}"));
        let lane0 = p(self, format!("icmp eq i32 {}, 0", self.threads.lane));
        let write = p(self, format!("and i1 {lane0}, {live}"));
        let write32 = p(self, format!("zext i1 {write} to i32"));
        let _ = writeln!(
            self.f.prologue,
            "  store volatile i64 {next}, ptr addrspace(3) {next_slot}, align 8\n  \
             store volatile i64 {end}, ptr addrspace(3) {end_slot}, align 8\n  \
             call void asm sideeffect \"{{ .reg .pred p; setp.ne.u32 p, $0, 0; \
             @p st.global.v2.u64 [$1], {{$2, $3}}; }}\", \"r,l,l,l,~{{memory}}\"\
             (i32 {write32}, ptr addrspace(1) {header}, i64 {timer}, i64 {clock_sm})"
        );
    }
}
