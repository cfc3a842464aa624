//! Software pipelining of `for` loops (`num_stages`): a global load in the
//! loop body whose address and mask depend only on the induction variable and
//! on values from before the loop is issued `num_stages - 1` iterations ahead
//! with `cp.async`, into a ring of shared-memory slots, and read back from
//! its slot when the iteration reaches it. The loads of later iterations are
//! then in flight while this one computes, without registers held for them.
//!
//! Each thread copies and later reads the same bytes (chunk `c` of thread `t`
//! sits at `slot + (c * threads + t) * chunk_bytes`), so no barrier is needed:
//! `cp.async.wait_group` makes a thread's own copies visible to it. A slot is
//! overwritten one iteration after its last read, by the thread that read it.
//! Elements the mask turns off are zero-filled and replaced by `other` on
//! reading. Tiles whose first addresses are not aligned to the copy size are
//! loaded element by element into the slot instead (correct, not fast).
//!
//! Operands of a `dot` that runs on wgmma are the exception: their slots hold
//! the tile in the swizzled placement wgmma reads, every thread copying its
//! chunks to where they belong there, and the `dot` multiplies the slot in
//! place (nothing is read back into registers). The whole CTA reads such a
//! slot, asynchronously: each iteration waits for its own copies, fences them
//! for the async proxy and meets the other warps at a barrier before it
//! issues the next copies, which therefore run `num_stages - 2` iterations
//! ahead, so that the slot they overwrite was read by a wgmma group that
//! every warp group has already waited for (one group stays in flight).
//!
//! A wgmma operand that is a descriptor load (`desc.load([..])`) gets the
//! same kind of ring, filled by TMA from the first thread instead and
//! completing on a per-slot mbarrier that every thread waits on (see
//! `descriptor.rs`); the loop carries the ring round's parity for it.

use super::analysis::axis::MaskRun;
use super::analysis::pipeline::{
    is_copy_size, plan_loop, yielded, Candidate, LoopPlan, PlanInputs,
};
use super::error::Result;
use super::lower::{Lowerer, Tensor, SHARED_BYTES_LIMIT};
use super::memory::{load_qualifiers, vector_len, word_type, words_of};
use super::rings::{RingFill, RingRead, ThreadCopies, RING_BASE_SYMBOL};
use super::scalar::{from_bits, mem_bytes};
use super::CodegenError;
use crate::layout::SharedLayout;
use std::collections::HashMap;
use tlx_core::ir::{Block, CacheModifier, EvictionPolicy, Op, OpKind, ValueId};

/// The most shared memory the rings of one kernel may take, in bytes: leaves
/// room for reduction and layout-conversion scratch under sm_90's 227 KB.
const RING_BYTES_LIMIT: usize = 128 << 10;

/// What a pipelined loop needs across its lowering.
pub struct LoopPipeline<'k> {
    pub(super) stages: usize,
    /// Iterations the copies run ahead: `stages - 1`, or `stages - 2` when
    /// some ring is read by the whole CTA (see the module doc).
    distance: usize,
    /// Placements of the loads that feed wgmma operands, by load result.
    pub(super) operand_placements: HashMap<ValueId, SharedLayout>,
    /// Ring bytes in use before this loop: its rings are free again after it.
    ring_mark: usize,
    pub(super) candidates: Vec<Candidate<'k>>,
    /// Ring geometry of each taken load (by its result), in candidate order.
    pub(super) rings: Vec<(ValueId, RingRead)>,
}

impl<'k> Lowerer<'k> {
    /// Plans the pipeline of a `for` body and issues the copies of its first
    /// `stages - 1` iterations; `None` when the loop is not pipelined.
    pub fn start_pipeline(
        &mut self,
        body: &'k Block,
        bounds: &LoopBounds,
    ) -> Result<Option<LoopPipeline<'k>>> {
        let inputs = PlanInputs {
            kernel: self.kernel,
            facts: &self.facts,
            defined_before: &self.held.defs,
            arch: self.arch,
            num_warps: self.num_warps,
        };
        let Some(plan) = plan_loop(&inputs, body)? else {
            return Ok(None);
        };
        let Some(&iv) = body.args.first() else {
            return Ok(None);
        };
        self.sync
            .wgmma_in_flight
            .extend(plan.in_flight.iter().copied());
        for &(load, run) in &plan.uncopyable {
            self.note_uncopyable_operand(load, run, "loaded into registers each iteration");
        }
        let LoopPlan {
            stages,
            distance,
            candidates,
            operand_placements,
            ..
        } = plan;
        // Operand rings are what the loop is for: a configuration whose
        // stages do not fit is the user's to change, not a silent fallback.
        let operand_bytes: usize = operand_placements
            .values()
            .map(|p| p.bytes.div_ceil(1024) * 1024 * stages)
            .sum();
        let needed = self.shared.ring_bytes.div_ceil(1024) * 1024 + operand_bytes;
        if needed > SHARED_BYTES_LIMIT as usize {
            return Err(CodegenError::SharedMemoryExceeded {
                needed: needed as u32,
                limit: SHARED_BYTES_LIMIT,
            });
        }
        // The rings may reuse scratch bytes that other warps still read.
        self.barrier();
        self.shared.pipelines_open += 1;
        let mut pipe = LoopPipeline {
            stages,
            distance,
            operand_placements,
            ring_mark: self.shared.ring_bytes,
            candidates,
            rings: Vec::new(),
        };
        self.start_tma_rings(&mut pipe)?;
        // The first `distance` iterations' copies, as a loop of their own:
        // unrolled, each would repeat the address code (and build time).
        let pre = self.current_block.clone();
        let head = self.f.fresh("prefetch_head");
        let issue = self.f.fresh("prefetch");
        let done = self.f.fresh("prefetch_end");
        self.f.stmt(format!("br label %{head}"));
        self.enter_block(&head);
        let latch_hole = self.placeholder();
        let d = self
            .f
            .inst(format!("phi i32 [ 0, %{pre} ], [ {latch_hole} ]"));
        let more = self.f.inst(format!("icmp ult i32 {d}, {}", pipe.distance));
        self.f
            .stmt(format!("br i1 {more}, label %{issue}, label %{done}"));
        self.enter_block(&issue);
        let lower = bounds.lower.clone();
        let ahead = bounds.ahead_of(self, &lower, &d)?;
        self.issue_copies(&mut pipe, iv, &ahead, &d, true)?;
        let next = self.f.inst(format!("add i32 {d}, 1"));
        self.fill_latch(&latch_hole, &next);
        // LLVM leaves this loop alone; the metadata reaches ptxas as
        // `.pragma "nounroll"`, so that it stays one copy in SASS too.
        let (id, disable) = (self.f.fresh(""), self.f.fresh(""));
        self.f
            .declare(format!("!{id} = distinct !{{!{id}, !{disable}}}"));
        self.f
            .declare(format!("!{disable} = !{{!\"llvm.loop.unroll.disable\"}}"));
        self.f.stmt(format!("br label %{head}, !llvm.loop !{id}"));
        self.enter_block(&done);
        // With no ring the loop above only commits empty groups: harmless.
        if pipe.rings.is_empty() {
            self.shared.pipelines_open -= 1;
            return Ok(None);
        }
        self.shared.ring_peak = self.shared.ring_peak.max(self.shared.ring_bytes);
        Ok(Some(pipe))
    }

    /// At the top of an iteration whose slot is `slot` (in the `phase`-th
    /// round of the ring, mod 2): issues the copies of the iteration
    /// `distance` ahead into the slot it will read, waits for this
    /// iteration's copies (commit groups complete in order, TMA copies on
    /// their slot's mbarrier) and points its loads at `slot`. With rings the
    /// whole CTA reads, the wait comes first, then the proxy fence and the
    /// barrier, then the copies.
    pub fn advance_pipeline(
        &mut self,
        pipe: &mut LoopPipeline<'k>,
        iv: ValueId,
        bounds: &LoopBounds,
        iv_reg: &str,
        (slot, phase): (&str, &str),
    ) -> Result<()> {
        let (s, d) = (pipe.stages, pipe.distance);
        let ahead = bounds.ahead_of(self, iv_reg, &d.to_string())?;
        let moved = self.f.inst(format!("add i32 {slot}, {d}"));
        let wraps = self.f.inst(format!("icmp uge i32 {moved}, {s}"));
        let wrapped = self.f.inst(format!("sub i32 {moved}, {s}"));
        let write = self
            .f
            .inst(format!("select i1 {wraps}, i32 {wrapped}, i32 {moved}"));
        let wait = |l: &mut Self, pending: usize| {
            let text = format!("cp.async.wait_group {pending};");
            l.f.asm("void", &text, "~{memory}", &[]);
        };
        if pipe.operand_placements.is_empty() {
            self.issue_copies(pipe, iv, &ahead, &write, false)?;
            wait(self, d);
        } else {
            // Copies by every thread are waited for by each and fenced for
            // the async proxy; TMA copies complete on their slot's barrier.
            let by_threads = pipe
                .rings
                .iter()
                .any(|(_, r)| matches!(r.fill, RingFill::Threads(_)));
            if by_threads {
                wait(self, d - 1);
            }
            self.wait_tma_slots(pipe, slot, phase);
            if by_threads {
                self.fence_async_shared();
            }
            self.barrier();
            self.issue_copies(pipe, iv, &ahead, &write, false)?;
        }
        for (result, ring) in &pipe.rings {
            let mut ring = ring.clone();
            ring.read_slot = slot.to_string();
            self.ring_reads.insert(*result, ring);
        }
        Ok(())
    }

    /// The slot after `slot` in a ring of `stages`, and its round's parity
    /// (`phase` flipped when the ring wraps).
    pub fn next_slot(
        &mut self,
        pipe: &LoopPipeline<'k>,
        (slot, phase): (&str, &str),
    ) -> (String, String) {
        let next = self.f.inst(format!("add i32 {slot}, 1"));
        let wrap = self.f.inst(format!("icmp eq i32 {next}, {}", pipe.stages));
        let flip = self.f.inst(format!("zext i1 {wrap} to i32"));
        (
            self.f.inst(format!("select i1 {wrap}, i32 0, i32 {next}")),
            self.f.inst(format!("xor i32 {phase}, {flip}")),
        )
    }

    /// After the loop: no copy may still be writing when the program goes on,
    /// and later loops may take the rings' space. Carried results of wgmma
    /// groups left in flight (`carried[i]` holds what the body yields as
    /// `yielded[i]`) are waited for.
    pub fn finish_pipeline(
        &mut self,
        pipe: &LoopPipeline<'k>,
        body: &Block,
        carried: &mut [Tensor],
    ) {
        self.f.asm("void", "cp.async.wait_all;", "~{memory}", &[]);
        self.retire_tma_rings(pipe);
        self.shared.ring_bytes = pipe.ring_mark;
        self.shared.pipelines_open -= 1;
        for (t, v) in carried.iter_mut().zip(yielded(body)) {
            if self.sync.wgmma_in_flight.contains(&v) {
                // Pipelined dots read N-major B, so 16-bit inputs and f32
                // accumulators only.
                t.regs = self.wgmma_wait(0, tlx_core::ir::ScalarType::F32, &t.regs);
            }
        }
    }

    /// Copies of one iteration (`ahead`) into slot `slot` of every ring, as one
    /// commit group (and, for TMA rings, one mbarrier phase per slot). With
    /// `plan`, decides which pointer loads get a ring.
    fn issue_copies(
        &mut self,
        pipe: &mut LoopPipeline<'k>,
        iv: ValueId,
        ahead: &Iteration,
        slot: &str,
        plan: bool,
    ) -> Result<()> {
        let bind = Tensor {
            layout: self.scalar_layout()?,
            regs: vec![ahead.iv.clone()],
        };
        self.expect_tma_slot(pipe, slot, &ahead.valid);
        for i in 0..pipe.candidates.len() {
            let load = pipe.candidates[i].load;
            let result = load.results[0];
            let known = pipe
                .rings
                .iter()
                .find(|(r, _)| *r == result)
                .map(|(_, ring)| ring.clone());
            let was_known = known.is_some();
            if !was_known && !plan {
                continue;
            }
            let slice = std::mem::take(&mut pipe.candidates[i].slice);
            let placement = pipe.operand_placements.get(&result).cloned();
            let stages = pipe.stages;
            let taken = self.with_detached(&slice, (iv, bind.clone()), |l| match &load.kind {
                OpKind::Prim { args, .. } => match known {
                    Some(ring) => {
                        l.copy_block(&ring, args, slot, &ahead.valid)?;
                        Ok(Some(ring))
                    }
                    // Not a wgmma operand: loaded where it stands.
                    None => Ok(None),
                },
                _ => l.copy_pointer_tile(load, known, placement.as_ref(), stages, ahead, slot),
            });
            pipe.candidates[i].slice = slice;
            match (plan, taken?) {
                (true, Some(ring)) if !was_known => pipe.rings.push((result, ring)),
                // `start_pipeline` made room for every operand ring, and
                // `copy_pointer_tile` fills one however its tile lies.
                (true, None) if placement.is_some() => {
                    return Err(super::error::malformed(
                        "a wgmma operand load without a ring",
                    ))
                }
                _ => {}
            }
        }
        self.f
            .asm("void", "cp.async.commit_group;", "~{memory}", &[]);
        Ok(())
    }

    /// The `cp.async` copies of one pointer load's tile for iteration
    /// `ahead` into `slot` of its ring (`known`, or a new one if the tile can
    /// be copied in chunks and the ring fits; `None` otherwise).
    fn copy_pointer_tile(
        &mut self,
        load: &Op,
        known: Option<RingRead>,
        placement: Option<&SharedLayout>,
        stages: usize,
        ahead: &Iteration,
        slot: &str,
    ) -> Result<Option<RingRead>> {
        let OpKind::Load {
            ptr,
            mask,
            cache,
            eviction,
            ..
        } = &load.kind
        else {
            return Ok(None);
        };
        let ptrs = self.tensor(*ptr)?;
        let elem = self.ty(load.results[0]).elem();
        let bytes = mem_bytes(elem);
        let contiguity = self.facts.axis.get(ptr).map_or(1, |a| a.contiguity);
        let mut chunk = vector_len(&ptrs.layout, contiguity, bytes);
        if let Some(placed) = placement {
            chunk = chunk.min(placed.contiguous_run(&ptrs.layout, bytes)?);
        }
        let ring = match known {
            Some(ring) => ring,
            None => {
                let (slot_bytes, ring_offset, limit) = match placement {
                    None => (
                        ptrs.layout.num_regs() * bytes * self.threads(),
                        self.shared.ring_bytes,
                        RING_BYTES_LIMIT,
                    ),
                    // Slots start on a swizzle period, as wgmma reads them.
                    Some(placed) => (
                        placed.bytes.div_ceil(1024) * 1024,
                        self.shared.ring_bytes.div_ceil(1024) * 1024,
                        SHARED_BYTES_LIMIT as usize,
                    ),
                };
                let ring_bytes = slot_bytes * stages;
                if ring_offset + ring_bytes > limit {
                    return Ok(None);
                }
                if !is_copy_size(chunk * bytes) {
                    // A wgmma operand has no registers to fall back to: its
                    // slot is filled element by element instead.
                    if placement.is_none() {
                        return Ok(None);
                    }
                    self.note_uncopyable_operand(
                        load,
                        contiguity * bytes,
                        "copied into shared memory element by element",
                    );
                    chunk = 1;
                }
                let offsets = match placement {
                    Some(placed) => Some(placed.compose(&ptrs.layout)?),
                    None => None,
                };
                self.shared.ring_bytes = ring_offset + ring_bytes;
                RingRead {
                    ring_offset,
                    slot_bytes,
                    read_slot: String::new(),
                    fill: RingFill::Threads(ThreadCopies {
                        layout: ptrs.layout.clone(),
                        chunk,
                        placement: offsets,
                    }),
                }
            }
        };
        let RingFill::Threads(copies) = &ring.fill else {
            return Err(super::error::malformed("a pointer load with a TMA ring"));
        };
        let masks = self.access_masks(*mask, &copies.layout, copies.chunk)?;
        let base = self.ring_slot_base(&ring, slot);
        let copy = TileCopy {
            copies,
            base: &base,
            ptrs: &ptrs.regs,
            masks: masks.as_ref().map(|(m, run)| (m.as_slice(), *run)),
            valid: &ahead.valid,
            bytes,
            align: self.known_alignment(*ptr),
        };
        self.copy_tile(&copy, *cache, *eviction);
        Ok(Some(ring))
    }

    /// Says why the `dot` operand `load` is not copied with `cp.async`
    /// (`how`: what is done instead): its addresses give `run_bytes`
    /// contiguous bytes along the last dimension, or its shared-memory
    /// placement takes fewer.
    fn note_uncopyable_operand(&mut self, load: &Op, run_bytes: usize, how: &str) {
        let why = if run_bytes < 4 {
            format!(
                "its addresses are not known to be contiguous along the last dimension (runs of {run_bytes} byte{})",
                if run_bytes == 1 { "" } else { "s" }
            )
        } else {
            "the shared-memory layout the tensor cores read it in runs along its other dimension"
                .to_string()
        };
        self.notes.push(format!(
            "line {}: this `dot` operand is {how}, not prefetched with `cp.async`: {why}. \
             For the fast path, leave the stride of the contiguous dimension out where it is 1 by contract \
             (`a + rows * stride_am + cols`, not `+ cols * stride_ak`), and load A with K contiguous and B \
             with N contiguous",
            load.loc.line
        ));
    }

    fn threads(&self) -> usize {
        self.context.threads() as usize
    }

    /// The byte offset (i32) of the pipeline area in the shared array.
    pub fn ring_base(&mut self) -> String {
        self.f
            .inst(format!("load i32, ptr {RING_BASE_SYMBOL}, align 4"))
    }

    /// Shared byte offset (i32) of slot `slot` of `ring`.
    pub fn ring_slot_base(&mut self, ring: &RingRead, slot: &str) -> String {
        let in_slot = self.f.inst(format!("mul i32 {slot}, {}", ring.slot_bytes));
        let base = self.ring_base();
        let area = self.f.inst(format!("add i32 {in_slot}, {base}"));
        self.f.inst(format!("add i32 {area}, {}", ring.ring_offset))
    }

    /// TLX's `async_load`: the tile `ptr` points at, copied with `cp.async`
    /// into the buffer at byte `base` (an i32 operand) of the shared array in
    /// placement `placed`, masked-off elements zero-filled; the copies join
    /// this thread's open group; `at` is the `async_load`'s source location.
    pub fn async_copy_into(
        &mut self,
        ptr: ValueId,
        mask: ValueId,
        placed: &SharedLayout,
        base: &str,
        at: tlx_core::ir::SrcLoc,
    ) -> Result<()> {
        let ptrs = self.tensor(ptr)?;
        let bytes = mem_bytes(tlx_core::ir::Elem::Scalar(
            self.ty(ptr)
                .elem()
                .pointee()
                .ok_or_else(|| super::error::malformed("async_load of non-pointers"))?,
        ));
        let contiguity = self.facts.axis.get(&ptr).map_or(1, |a| a.contiguity);
        let chunk = vector_len(&ptrs.layout, contiguity, bytes)
            .min(placed.contiguous_run(&ptrs.layout, bytes)?);
        if !is_copy_size(chunk * bytes) {
            return Err(CodegenError::Misuse {
                message: format!(
                    "`async_load` of a tile whose rows give {} contiguous bytes per thread",
                    chunk * bytes
                ),
                hint: "cp.async moves 4, 8 or 16 contiguous bytes: load tiles whose last \
                       dimension is contiguous in memory (build offsets with `arange` along it, \
                       and `multiple_of` the row stride)"
                    .into(),
                at: Some(at),
            });
        }
        let copies = ThreadCopies {
            layout: ptrs.layout.clone(),
            chunk,
            placement: Some(placed.compose(&ptrs.layout)?),
        };
        let masks = self.access_masks(Some(mask), &copies.layout, chunk)?;
        let copy = TileCopy {
            copies: &copies,
            base,
            ptrs: &ptrs.regs,
            masks: masks.as_ref().map(|(m, run)| (m.as_slice(), *run)),
            valid: "true",
            bytes,
            align: self.known_alignment(ptr),
        };
        self.copy_tile(&copy, CacheModifier::None, EvictionPolicy::Normal);
        Ok(())
    }

    /// Shared byte offset of element `reg` of this thread in a slot at `base`.
    fn element_offset(
        &mut self,
        copies: &ThreadCopies,
        base: &str,
        reg: usize,
        bytes: usize,
    ) -> String {
        if let Some(offsets) = &copies.placement {
            let thread = self.thread_xor(&offsets.lanes, &offsets.warps);
            let at = self
                .f
                .inst(format!("xor i32 {thread}, {}", offsets.reg_offset(reg)));
            return self.f.inst(format!("add i32 {base}, {at}"));
        }
        let chunk_bytes = copies.chunk * bytes;
        let tid = self.thread_id();
        let own = self.f.inst(format!("mul i32 {tid}, {chunk_bytes}"));
        let (c, j) = (reg / copies.chunk, reg % copies.chunk);
        let fixed = c * self.threads() * chunk_bytes + j * bytes;
        let at = self.f.inst(format!("add i32 {base}, {own}"));
        self.f.inst(format!("add i32 {at}, {fixed}"))
    }

    /// One tile of one iteration into a slot: a zero-filling `cp.async` per
    /// chunk when every chunk is aligned and uniformly masked, else element by
    /// element through registers.
    fn copy_tile(&mut self, copy: &TileCopy, cache: CacheModifier, eviction: EvictionPolicy) {
        let TileCopy {
            copies,
            base,
            ptrs,
            masks,
            valid,
            bytes,
            align,
        } = *copy;
        let n = copies.chunk;
        let chunk_bytes = n * bytes;
        if !is_copy_size(chunk_bytes) {
            self.copy_tile_elements(copy, cache, eviction);
            return;
        }
        let ok = self.tile_vector_ok(ptrs, masks, n, bytes, align);
        let vector = self.f.fresh("ring_copy");
        let scalar = self.f.fresh("ring_copy_scalar");
        let join = self.f.fresh("ring_copy_end");
        self.f
            .stmt(format!("br i1 {ok}, label %{vector}, label %{scalar}"));
        self.f.start_block(&vector);
        // 16-byte copies may skip L1, which a tile read once does not need.
        let cop = if chunk_bytes == 16 && cache != CacheModifier::Ca {
            "cg"
        } else {
            "ca"
        };
        let on = |l: &mut Self, reg: usize| match masks {
            Some((m, _)) => l.f.inst(format!("and i1 {valid}, {}", m[reg])),
            None => valid.to_string(),
        };
        for start in (0..ptrs.len()).step_by(n) {
            let enabled = on(self, start);
            let size = self
                .f
                .inst(format!("select i1 {enabled}, i32 {chunk_bytes}, i32 0"));
            let at = self.element_offset(copies, base, start, bytes);
            let dst = self.smem_ptr(&at);
            // No L2 cache policy here: the copy with `.L2::cache_hint` assembles
            // but traps on sm_90 (measured on an H100); the eviction hint still
            // reaches the element-wise fallback.
            let text = format!("cp.async.{cop}.shared.global [$0], [$1], {chunk_bytes}, $2;");
            self.f.asm(
                "void",
                &text,
                "l,l,r,~{memory}",
                &[
                    ("ptr addrspace(3)", &dst),
                    ("ptr addrspace(1)", &ptrs[start]),
                    ("i32", &size),
                ],
            );
        }
        self.f.stmt(format!("br label %{join}"));
        self.f.start_block(&scalar);
        self.copy_tile_elements(copy, cache, eviction);
        self.f.stmt(format!("br label %{join}"));
        self.enter_block(&join);
    }

    /// `copy`'s tile moved element by element (a load into a register,
    /// masked-off elements zero, then a shared store) where `cp.async` cannot
    /// take it: addresses not aligned to the chunk, or fewer than 4
    /// contiguous bytes.
    fn copy_tile_elements(
        &mut self,
        copy: &TileCopy,
        cache: CacheModifier,
        eviction: EvictionPolicy,
    ) {
        let TileCopy {
            copies,
            base,
            ptrs,
            masks,
            valid,
            bytes,
            ..
        } = *copy;
        let on = |l: &mut Self, reg: usize| match masks {
            Some((m, _)) => l.f.inst(format!("and i1 {valid}, {}", m[reg])),
            None => valid.to_string(),
        };
        let (word, _) = words_of(1, bytes);
        let lty = word_type(word);
        let instr = load_qualifiers(cache, eviction, false);
        for (reg, ptr) in ptrs.iter().enumerate() {
            let enabled = on(self, reg);
            let w = self.load_words(&instr, ptr, &enabled, &["0".to_string()], word);
            let at = self.element_offset(copies, base, reg, bytes);
            let p = self.smem_ptr(&at);
            // A byte travels in a 16-bit register: store only the byte.
            let (value, ty) = if bytes == 1 {
                (self.f.inst(format!("trunc {lty} {} to i8", w[0])), "i8")
            } else {
                (w[0].clone(), lty)
            };
            self.f.stmt(format!(
                "store {ty} {value}, ptr addrspace(3) {p}, align {bytes}"
            ));
        }
    }

    /// The registers of a pipelined load, read from its current slot; masked-off
    /// elements become `other`.
    pub fn read_ring(&mut self, op: &'k Op, ring: RingRead) -> Result<()> {
        let OpKind::Load { mask, other, .. } = &op.kind else {
            return Err(super::error::malformed("not a load"));
        };
        let result = op.results[0];
        let copies = match &ring.fill {
            RingFill::Threads(copies) if copies.placement.is_none() => copies.clone(),
            // A wgmma operand: its `dot` multiplies the slot in place.
            _ => {
                self.ring_reads.insert(result, ring);
                return Ok(());
            }
        };
        let elem = self.ty(result).elem();
        let bytes = mem_bytes(elem);
        let n = copies.chunk;
        let (vword, words) = words_of(n, bytes);
        let wty = word_type(vword);
        let base = self.ring_slot_base(&ring, &ring.read_slot);
        let vty = if words == 1 {
            wty.to_string()
        } else {
            format!("<{words} x {wty}>")
        };
        let mut bits = Vec::with_capacity(copies.layout.num_regs());
        for start in (0..copies.layout.num_regs()).step_by(n) {
            let at = self.element_offset(&copies, &base, start, bytes);
            let p = self.smem_ptr(&at);
            let v = self.f.inst(format!(
                "load {vty}, ptr addrspace(3) {p}, align {}",
                n * bytes
            ));
            let ws: Vec<String> = if words == 1 {
                vec![v]
            } else {
                (0..words)
                    .map(|i| self.f.inst(format!("extractelement {vty} {v}, i32 {i}")))
                    .collect()
            };
            bits.extend(self.unpack(&ws, bytes, vword));
        }
        let mut regs: Vec<String> = bits
            .iter()
            .map(|b| from_bits(&mut self.f, elem, b))
            .collect();
        if let (Some(m), Some(o)) = (mask, other) {
            let ms = self.get(*m, &copies.layout)?;
            let os = self.get(*o, &copies.layout)?;
            let ty = super::emit::llvm_type(elem);
            regs = regs
                .iter()
                .zip(ms.iter().zip(&os))
                .map(|(v, (m, o))| self.f.inst(format!("select i1 {m}, {ty} {v}, {ty} {o}")))
                .collect();
        }
        self.held.values.insert(
            result,
            Tensor {
                layout: copies.layout,
                regs,
            },
        );
        Ok(())
    }
}

/// One tile's copy into a slot: the chunk start addresses and masks of this
/// thread, and whether the iteration runs at all.
struct TileCopy<'a> {
    copies: &'a ThreadCopies,
    base: &'a str,
    ptrs: &'a [String],
    masks: Option<(&'a [String], MaskRun)>,
    valid: &'a str,
    bytes: usize,
    /// What the axis analysis proves divides every chunk's address (bytes).
    align: usize,
}

/// One iteration of a loop, as seen from ahead of it: its induction value and
/// whether it runs.
pub struct Iteration {
    iv: String,
    valid: String,
}

/// A `for` loop's bounds, to name the iterations the pipeline prefetches.
pub struct LoopBounds {
    pub lower: String,
    pub upper: String,
    pub step: String,
    /// LLVM type of the induction variable, and whether it compares signed.
    pub ty: &'static str,
    pub signed: bool,
}

impl LoopBounds {
    /// The iteration `d` after the one whose induction value is `iv`: `iv + d *
    /// step`, and whether it is below `upper`, compared in 64 bits so that an
    /// index past the type's range reads as past the end.
    fn ahead_of(&self, l: &mut Lowerer, iv: &str, d: &str) -> Result<Iteration> {
        let ty = self.ty;
        // `d` is an i32 count, never negative.
        let d64 = l.f.inst(format!("zext i32 {d} to i64"));
        let d_ty = if ty == "i64" {
            d64.clone()
        } else {
            d.to_string()
        };
        let delta = l.f.inst(format!("mul {ty} {}, {d_ty}", self.step));
        let next = l.f.inst(format!("add {ty} {iv}, {delta}"));
        let widen = |l: &mut Lowerer, v: &str| {
            if ty == "i64" {
                v.to_string()
            } else if self.signed {
                l.f.inst(format!("sext {ty} {v} to i64"))
            } else {
                l.f.inst(format!("zext {ty} {v} to i64"))
            }
        };
        let (iv64, step64, upper64) = (widen(l, iv), widen(l, &self.step), widen(l, &self.upper));
        let delta64 = l.f.inst(format!("mul i64 {step64}, {d64}"));
        let next64 = l.f.inst(format!("add i64 {iv64}, {delta64}"));
        let cmp = if self.signed { "slt" } else { "ult" };
        let valid = l.f.inst(format!("icmp {cmp} i64 {next64}, {upper64}"));
        Ok(Iteration { iv: next, valid })
    }
}
