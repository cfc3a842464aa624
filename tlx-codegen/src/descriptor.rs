//! Triton's block-level tensor-descriptor loads (`desc.load([o0, o1])`): a
//! TMA copy of the descriptor's block into shared memory, completing on an
//! mbarrier, then read into registers. The block lands in the placement the
//! runtime encoded the descriptor for (`TmaBox`: the NVMMA swizzle of the
//! block's rows), which is also what wgmma reads, so a pipelined loop whose
//! `dot` multiplies such loads keeps them in ring slots instead (see
//! `pipeline.rs`) and nothing passes through registers.

use super::lower::{malformed, Lowerer, Result, Tensor};
use super::prims::{buffer_layout, period};
use tlx_core::ir::{
    shared_swizzle, without_leading_ones, Elem, SharedMemoryType, TensorDescriptorType, Type,
    ValueId,
};
use tlx_core::layout::SharedLayout;

/// The buffer a descriptor's block lands in: the block's matrix (leading
/// unit dimensions left out) in TMA's swizzle for it.
pub(super) fn block_buffer(desc: &TensorDescriptorType) -> SharedMemoryType {
    let shape = without_leading_ones(desc.block_shape()).to_vec();
    let swizzle = shared_swizzle(desc.elem(), desc.block_shape());
    SharedMemoryType::new(desc.elem(), shape, 1, swizzle, true)
}

/// Where a block lands in shared memory, and the bytes TMA counts for it
/// (the whole box, clipped or not).
pub(super) struct BlockPlacement {
    pub buffer: SharedMemoryType,
    pub placement: SharedLayout,
    pub bytes: usize,
}

impl BlockPlacement {
    pub fn of(desc: &TensorDescriptorType) -> Result<BlockPlacement> {
        let buffer = block_buffer(desc);
        let placement = buffer_layout(&buffer)?;
        let bytes = desc.block_shape().iter().product::<usize>() * desc.elem().size_bytes();
        Ok(BlockPlacement {
            buffer,
            placement,
            bytes,
        })
    }

    /// The alignment TMA (128 bytes) and the swizzle (its period, as it
    /// applies to absolute addresses) want for the block's first byte.
    pub fn align(&self) -> usize {
        period(self.buffer.swizzle()).max(128)
    }
}

impl<'k> Lowerer<'k> {
    /// The descriptor type of `v`.
    pub(super) fn descriptor_type(&self, v: ValueId) -> Result<&'k TensorDescriptorType> {
        match self.ty(v) {
            Type::TensorDescriptor(d) => Ok(d),
            other => Err(malformed(format!(
                "{v} is {other}, not a tensor descriptor"
            ))),
        }
    }

    /// `desc.load(offsets)` outside a ring: the block is copied into the
    /// scratch with an mbarrier of its own after it, waited for by every
    /// thread and read into registers; the barrier is invalidated before the
    /// scratch is used again.
    pub(super) fn lower_descriptor_load(
        &mut self,
        desc: ValueId,
        offsets: &[ValueId],
        result: ValueId,
    ) -> Result<()> {
        let d = self.descriptor_type(desc)?;
        let block = BlockPlacement::of(d)?;
        let base = self.scratch(0);
        let data_at = base.div_ceil(block.align()) * block.align();
        let bar_at = data_at + block.bytes.div_ceil(8) * 8;
        self.use_shared(bar_at + 8 - base);
        self.shared_align = self.shared_align.max(block.align());
        let desc_reg = self.register(desc)?;
        let coords = offsets
            .iter()
            .map(|&v| self.register(v))
            .collect::<Result<Vec<_>>>()?;
        // Earlier readers of the scratch are done before the barrier is made.
        self.barrier();
        self.init_barriers(bar_at, 1, 1);
        let bar = self.shared_address(&bar_at.to_string());
        let dst = self.shared_address(&data_at.to_string());
        self.expect_bytes(&bar, block.bytes);
        self.tma_block(&block.buffer, &desc_reg, &dst, Some(&bar), None, &coords);
        self.wait_parity(&bar, "0", "true");
        let shape = block.buffer.shape().to_vec();
        let layout = self.default_layout(&shape)?;
        let elem = Elem::Scalar(d.elem());
        let regs = self.load_placed_at(&layout, elem, &block.placement, &data_at.to_string())?;
        // Every thread has passed the wait before the barrier is retired.
        self.barrier();
        self.invalidate_barrier(&bar);
        let layout = layout.reshaped(d.block_shape());
        self.define_value(result, Tensor { layout, regs });
        Ok(())
    }

    /// From the first thread: arrives on `bar` announcing `bytes` of
    /// asynchronous copies for its current phase.
    pub(super) fn expect_bytes(&mut self, bar: &str, bytes: usize) {
        self.on_first_thread("true", |l| {
            l.f.asm(
                "void",
                &format!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {bytes};"),
                "r,~{memory}",
                &[("i32", bar)],
            );
        });
    }

    /// From the first thread: retires the mbarrier at `bar`, so that its
    /// bytes may hold something else (every wait on it is over).
    pub(super) fn invalidate_barrier(&mut self, bar: &str) {
        self.on_first_thread("true", |l| {
            l.f.asm(
                "void",
                "mbarrier.inval.shared::cta.b64 [$0];",
                "r,~{memory}",
                &[("i32", bar)],
            );
        });
    }
}
