//! Triton's block-level tensor-descriptor loads and stores
//! (`desc.load([o0, o1])`, `desc.store([o0, o1], v)`): a TMA copy of the
//! descriptor's block into shared memory, completing on an mbarrier, then
//! read into registers; or registers stored into shared memory and copied
//! out by TMA. The block lands in the placement the
//! runtime encoded the descriptor for (`TmaBox`: the NVMMA swizzle of the
//! block's rows), which is also what wgmma reads, so a pipelined loop whose
//! `dot` multiplies such loads keeps them in ring slots instead (see
//! `pipeline.rs`) and nothing passes through registers.

use super::analysis::pipeline::loaded_descriptor;
use super::analysis::storage::BlockPlacement;
use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::pipeline::LoopPipeline;
use super::prims::tma::TmaDirection;
use super::rings::{RingFill, RingRead};
use tlx_core::ir::{Elem, StoreReduce, TensorDescriptorType, ValueId};

/// A descriptor's block placed at the start of the scratch (on its
/// alignment), with the descriptor's and the offsets' registers.
struct ScratchBlock {
    block: BlockPlacement,
    /// Shared byte offsets of the block's first byte and of the first
    /// (8-aligned) byte after it.
    data_at: usize,
    after: usize,
    desc: String,
    coords: Vec<String>,
}

impl<'k> Lowerer<'k> {
    /// Places `desc`'s block in the scratch, with `extra` bytes after it (8
    /// aligned), and reads the registers a TMA copy of it needs.
    fn scratch_block(
        &mut self,
        desc: ValueId,
        offsets: &[ValueId],
        extra: usize,
    ) -> Result<ScratchBlock> {
        let block = BlockPlacement::of(self.descriptor_type(desc)?)?;
        let base = self.scratch(0);
        let data_at = base.div_ceil(block.align()) * block.align();
        let after = data_at + block.bytes.div_ceil(8) * 8;
        self.use_shared(after + extra - base);
        self.shared.shared_align = self.shared.shared_align.max(block.align());
        Ok(ScratchBlock {
            block,
            data_at,
            after,
            desc: self.register(desc)?,
            coords: self.registers(offsets)?,
        })
    }

    /// The descriptor type of `v`.
    pub(super) fn descriptor_type(&self, v: ValueId) -> Result<&'k TensorDescriptorType> {
        super::analysis::pipeline::descriptor_type(self.kernel, v)
    }

    /// `desc.load(offsets)`: nothing to do when a pipeline keeps the block in
    /// a ring slot (its `dot` reads the slot). Otherwise the block is copied into the
    /// scratch with an mbarrier of its own after it, waited for by every
    /// thread and read into registers; the barrier is invalidated before the
    /// scratch is used again.
    pub(super) fn lower_descriptor_load(
        &mut self,
        desc: ValueId,
        offsets: &[ValueId],
        result: ValueId,
    ) -> Result<()> {
        if self.ring_reads.contains_key(&result) {
            return Ok(());
        }
        let d = self.descriptor_type(desc)?;
        let ScratchBlock {
            block,
            data_at,
            after: bar_at,
            desc: desc_reg,
            coords,
        } = self.scratch_block(desc, offsets, 8)?;
        // Earlier readers of the scratch are done before the barrier is made.
        self.barrier();
        self.init_barriers(bar_at, 1, 1);
        let bar = self.shared_address(&bar_at.to_string());
        let dst = self.shared_address(&data_at.to_string());
        self.expect_bytes("true", &bar, &block.bytes.to_string());
        let load = TmaDirection::Load {
            barrier: &bar,
            multicast: None,
        };
        self.tma_block("true", &block.buffer, (&desc_reg, &dst), load, &coords);
        self.wait_parity(&bar, "0", "true");
        let shape = block.buffer.shape().to_vec();
        let layout = self.default_layout(&shape)?;
        let elem = Elem::Scalar(d.elem());
        let regs = self.load_placed_at(&layout, elem, &block.placement, &data_at.to_string())?;
        // Every thread has passed the wait before the barrier is retired.
        self.barrier();
        self.invalidate_barriers(&[bar]);
        let layout = layout.reshaped(d.block_shape());
        self.define_value(result, Tensor { layout, regs });
        Ok(())
    }

    /// `desc.store(offsets, value)`: the tile is stored into the scratch in
    /// the block's placement, fenced for the async proxy and copied out by
    /// TMA from the first thread, which waits for the copy to complete
    /// before every thread goes on (so the scratch may be reused and later
    /// loads of the program see the values).
    pub(super) fn lower_descriptor_store(
        &mut self,
        desc: ValueId,
        value: ValueId,
        offsets: &[ValueId],
    ) -> Result<()> {
        let d = self.descriptor_type(desc)?;
        let ScratchBlock {
            block,
            data_at,
            desc: desc_reg,
            coords,
            ..
        } = self.scratch_block(desc, offsets, 0)?;
        let tile = self.tensor(value)?;
        let matrix = Tensor {
            layout: tile.layout.reshaped(block.buffer.shape()),
            regs: tile.regs,
        };
        // Earlier readers of the scratch are done before it is written.
        self.barrier();
        let elem = Elem::Scalar(d.elem());
        self.store_placed_at(&matrix, elem, &block.placement, &data_at.to_string())?;
        self.fence_async_shared();
        self.barrier();
        let src = self.shared_address(&data_at.to_string());
        self.tma_block(
            "true",
            &block.buffer,
            (&desc_reg, &src),
            TmaDirection::Store(StoreReduce::None),
            &coords,
        );
        self.on_first_thread("true", |l| {
            l.f.asm("void", "cp.async.bulk.wait_group 0;", "~{memory}", &[]);
        });
        self.barrier();
        Ok(())
    }
}

/// TMA rings of a pipelined loop: descriptor loads that feed a wgmma `dot`
/// get `stages` slots in the block's placement; all of them share one
/// mbarrier per slot (arrival count 1: the first thread's expect-bytes
/// arrival for every ring's block; the copies' bytes complete the phase).
/// Iteration `j` reads slot `j % stages` once the phase of parity
/// `(j / stages) % 2` completed.
impl<'k> Lowerer<'k> {
    /// Places the TMA rings of `pipe` (its wgmma operands that are
    /// descriptor loads) and initializes their barriers, before the
    /// first copies are issued.
    pub(super) fn start_tma_rings(&mut self, pipe: &mut LoopPipeline<'k>) -> Result<()> {
        let stages = pipe.stages;
        let mut rings = Vec::new();
        for c in &pipe.candidates {
            let result = c.load.results[0];
            let Some(desc) = loaded_descriptor(c.load) else {
                continue;
            };
            if !pipe.operand_placements.contains_key(&result) {
                continue;
            }
            let block = BlockPlacement::of(self.descriptor_type(desc)?)?;
            let align = block.align().max(1024);
            let slot_bytes = block.placement.bytes.div_ceil(align) * align;
            let ring_offset = self.shared.ring_bytes.div_ceil(align) * align;
            self.shared.ring_bytes = ring_offset + slot_bytes * stages;
            rings.push((result, ring_offset, slot_bytes, block));
        }
        if rings.is_empty() {
            return Ok(());
        }
        let barriers = self.shared.ring_bytes.div_ceil(8) * 8;
        self.shared.ring_bytes = barriers + 8 * stages;
        for (result, ring_offset, slot_bytes, block) in rings {
            let ring = RingRead {
                ring_offset,
                slot_bytes,
                read_slot: String::new(),
                fill: RingFill::Tma {
                    block: block.buffer,
                    bytes: block.bytes,
                    barriers,
                },
            };
            pipe.rings.push((result, ring));
        }
        // The initialization ends with a barrier: every thread may wait on
        // them from the first iteration on.
        let offsets = self.ring_barrier_offsets(barriers, stages);
        self.init_barriers_at(&offsets, 1);
        Ok(())
    }

    /// Byte offsets (i32 operands) of the `stages` slot barriers of TMA rings
    /// whose barriers start at byte `barriers` of the pipeline area.
    fn ring_barrier_offsets(&mut self, barriers: usize, stages: usize) -> Vec<String> {
        let base = self.ring_base();
        (0..stages)
            .map(|s| self.f.inst(format!("add i32 {base}, {}", barriers + 8 * s)))
            .collect()
    }

    /// Shared address of the mbarrier of slot `slot` (an i32) of a TMA ring
    /// whose barriers start at byte `barriers` of the pipeline area.
    fn ring_barrier(&mut self, barriers: usize, slot: &str) -> String {
        let at = self.f.inst(format!("mul i32 {slot}, 8"));
        let base = self.ring_base();
        let area = self.f.inst(format!("add i32 {at}, {base}"));
        let offset = self.f.inst(format!("add i32 {area}, {barriers}"));
        self.shared_address(&offset)
    }

    /// Every thread waits until the TMA copies into `slot` completed, in
    /// the rings' round of parity `phase`.
    pub(super) fn wait_tma_slots(&mut self, pipe: &LoopPipeline<'k>, slot: &str, phase: &str) {
        if let Some((barriers, _)) = tma_barriers(pipe) {
            let bar = self.ring_barrier(barriers, slot);
            self.wait_parity(&bar, phase, "true");
        }
    }

    /// From the first thread, when `valid`: announces on slot `slot`'s
    /// barrier the bytes the TMA rings' copies of one iteration bring.
    pub(super) fn expect_tma_slot(&mut self, pipe: &LoopPipeline<'k>, slot: &str, valid: &str) {
        if let Some((barriers, bytes)) = tma_barriers(pipe) {
            let bar = self.ring_barrier(barriers, slot);
            self.expect_bytes(valid, &bar, &bytes.to_string());
        }
    }

    /// From the first thread, when `valid`: the TMA copy of one iteration's
    /// block (`desc` at `args[1..]`, lowered for that iteration) into slot
    /// `slot` of `ring`, completing on the slot's barrier (whose bytes
    /// [`Lowerer::expect_tma_slot`] announced).
    pub(super) fn copy_block(
        &mut self,
        ring: &RingRead,
        args: &[ValueId],
        slot: &str,
        valid: &str,
    ) -> Result<()> {
        let RingFill::Tma {
            block, barriers, ..
        } = &ring.fill
        else {
            return Err(malformed("a descriptor load with a cp.async ring"));
        };
        let (&desc, offsets) = args
            .split_first()
            .ok_or_else(|| malformed("a descriptor load without its descriptor"))?;
        let desc = self.register(desc)?;
        let coords = self.registers(offsets)?;
        let bar = self.ring_barrier(*barriers, slot);
        let base = self.ring_slot_base(ring, slot);
        let dst = self.shared_address(&base);
        let load = TmaDirection::Load {
            barrier: &bar,
            multicast: None,
        };
        self.tma_block(valid, block, (&desc, &dst), load, &coords);
        Ok(())
    }

    /// After the loop (every copy issued was waited for): the rings'
    /// barriers are invalidated, so that later scratch may take their bytes.
    pub(super) fn retire_tma_rings(&mut self, pipe: &LoopPipeline<'k>) {
        let Some((barriers, _)) = tma_barriers(pipe) else {
            return;
        };
        let offsets = self.ring_barrier_offsets(barriers, pipe.stages);
        let addresses: Vec<String> = offsets.iter().map(|o| self.shared_address(o)).collect();
        self.invalidate_barriers(&addresses);
    }
}

/// Where the slot barriers of `pipe`'s TMA rings start, and the bytes one
/// iteration's copies bring; `None` without TMA rings.
fn tma_barriers(pipe: &LoopPipeline) -> Option<(usize, usize)> {
    pipe.rings
        .iter()
        .filter_map(|(_, ring)| match &ring.fill {
            RingFill::Tma {
                barriers, bytes, ..
            } => Some((*barriers, *bytes)),
            RingFill::Threads(_) => None,
        })
        .reduce(|(at, a), (_, b)| (at, a + b))
}
