//! The timeline family's lowering: `trace_event` (put in by
//! `tlx_core::instrument::timeline` when a kernel is built with
//! timelines). The first thread of the context reads `%globaltimer`,
//! `%clock` and `%smid` and appends a record to its warp's track; a
//! counter per thread (a stack slot LLVM keeps in a register) says where.
//! The layout of the buffer is the instrumentation module's.

use std::fmt::Write as _;

use super::{no_lowering, Operands};
use crate::error::Result;
use crate::lower::Lowerer;
use tlx_core::instrument::TIMELINE_RECORD_WORDS;
use tlx_core::ir::Prim;

impl<'k> Lowerer<'k> {
    pub(super) fn lower_timeline_prim(&mut self, named: &Operands<'k>) -> Result<()> {
        match named.prim() {
            Prim::TraceEvent => {
                let buffer = self.register(named.arg("buffer")?)?;
                let capacity = self.register(named.arg("capacity")?)?;
                let site = named.imm("site")?;
                self.trace_event(&buffer, &capacity, site);
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }

    fn trace_event(&mut self, buffer: &str, capacity: &str, site: i64) {
        let (counter, track) = self.timeline_track();
        let words = TIMELINE_RECORD_WORDS;
        self.on_first_thread("true", |l| {
            let timer = l.f.asm("i64", "mov.u64 $0, %globaltimer;", "=l", &[]);
            let clock = l.f.asm("i32", "mov.u32 $0, %clock;", "=r", &[]);
            let sm = l.f.asm("i32", "mov.u32 $0, %smid;", "=r", &[]);
            let n = l.f.inst(format!("load i32, ptr {counter}, align 4"));
            let next = l.f.inst(format!("add i32 {n}, 1"));
            l.f.stmt(format!("store i32 {next}, ptr {counter}, align 4"));
            // A launch that records nothing passes no buffer.
            let live = l.f.inst(format!("icmp ne i32 {capacity}, 0"));
            l.when(&live, |l| {
                let cap = l.f.inst(format!("zext i32 {capacity} to i64"));
                let per_track = l.f.inst(format!("add i64 {cap}, 1"));
                let header = l.f.inst(format!("mul i64 {track}, {per_track}"));
                let header_word = l.f.inst(format!("mul i64 {header}, {words}"));
                let count = l.f.inst(format!("zext i32 {next} to i64"));
                l.store_word(buffer, &header_word, &count);
                let room = l.f.inst(format!("icmp ult i32 {n}, {capacity}"));
                l.when(&room, |l| {
                    let index = l.f.inst(format!("zext i32 {n} to i64"));
                    let after = l.f.inst(format!("add i64 {header}, 1"));
                    let record = l.f.inst(format!("add i64 {after}, {index}"));
                    let word = l.f.inst(format!("mul i64 {record}, {words}"));
                    l.store_word(buffer, &word, &timer);
                    let clock = l.f.inst(format!("zext i32 {clock} to i64"));
                    let sm = l.f.inst(format!("zext i32 {sm} to i64"));
                    let sm = l.f.inst(format!("shl i64 {sm}, 48"));
                    let tagged = l.f.inst(format!("or i64 {clock}, {}", site << 32));
                    let meta = l.f.inst(format!("or i64 {tagged}, {sm}"));
                    let next_word = l.f.inst(format!("add i64 {word}, 1"));
                    l.store_word(buffer, &next_word, &meta);
                });
            });
        });
    }

    /// `buffer[word] = value`, i64 words.
    fn store_word(&mut self, buffer: &str, word: &str, value: &str) {
        let at = self.f.inst(format!(
            "getelementptr i64, ptr addrspace(1) {buffer}, i64 {word}"
        ));
        self.f
            .stmt(format!("store i64 {value}, ptr addrspace(1) {at}, align 8"));
    }

    /// This thread's event counter and its warp's track (program index,
    /// x fastest, times the program's warps, plus its warp), made in the
    /// entry block at the first event.
    fn timeline_track(&mut self) -> (String, String) {
        if let Some(known) = &self.threads.timeline {
            return known.clone();
        }
        let counter = self.f.prologue_inst("alloca i32, align 4");
        let _ = writeln!(self.f.prologue, "  store i32 0, ptr {counter}, align 4");
        let mut program = "0".to_string();
        for d in ["z", "y", "x"] {
            let extent =
                self.f
                    .prologue_call("i32", &format!("llvm.nvvm.read.ptx.sreg.nctaid.{d}"), &[]);
            let index =
                self.f
                    .prologue_call("i32", &format!("llvm.nvvm.read.ptx.sreg.ctaid.{d}"), &[]);
            let extent = self.f.prologue_inst(format!("zext i32 {extent} to i64"));
            let index = self.f.prologue_inst(format!("zext i32 {index} to i64"));
            let scaled = self.f.prologue_inst(format!("mul i64 {program}, {extent}"));
            program = self.f.prologue_inst(format!("add i64 {scaled}, {index}"));
        }
        let warps = self.kernel.total_warps();
        let first = self.f.prologue_inst(format!("mul i64 {program}, {warps}"));
        let warp = self
            .f
            .prologue_inst(format!("zext i32 {} to i64", self.threads.program_warp));
        let track = self.f.prologue_inst(format!("add i64 {first}, {warp}"));
        let known = (counter, track);
        self.threads.timeline = Some(known.clone());
        known
    }
}
