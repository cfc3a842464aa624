//! Where the primitives' storage lives, decided from types alone, before
//! or apart from emission: the static shared plan (each `local_alloc`
//! buffer and `alloc_barriers` mbarrier at the start of the dynamic shared
//! array, tensor-memory columns, the slot `tcgen05.alloc` writes to), each
//! shared buffer's element placement, where a descriptor's block lands in
//! shared memory, and each `make_tensor_descriptor`'s slot in the global
//! scratch. Reads no lowering: [`super::KernelFacts`], the lowering and
//! the pipeline planner read it. With timelines, also the warps' record
//! pointers.

use std::collections::HashMap;

use crate::error::{malformed, Result};
use crate::layout::{self, SharedLayout};
use crate::CodegenError;
use tlx_core::ir::{
    shared_swizzle, without_leading_ones, Block, Kernel, OpKind, Prim, SharedMemoryType, Swizzle,
    TensorDescriptorType, Type, ValueId,
};

/// Where each `local_alloc` and `alloc_barriers` result lives.
#[derive(Clone, Debug, Default)]
pub struct StaticShared {
    pub(crate) offsets: HashMap<ValueId, usize>,
    /// Each tensor-memory allocation's first column.
    pub(crate) tmem_columns: HashMap<ValueId, usize>,
    /// With tensor memory: the shared byte offset of the slot its address
    /// arrives in, and the columns the kernel's buffers take.
    pub(crate) tmem_slot: Option<(usize, usize)>,
    /// With timelines: where the warps' record pointers start (16 bytes a
    /// warp, see `prims/timeline.rs`).
    pub(crate) timeline_counters: Option<usize>,
    /// Bytes the allocations take (scratch starts after them).
    pub bytes: usize,
    /// The alignment the shared array needs for them.
    pub align: usize,
}

/// Bytes between consecutive buffers of an allocation: swizzled buffers
/// start on a swizzle period, as TMA and wgmma apply the pattern to
/// absolute addresses.
pub(crate) fn buffer_stride(m: &SharedMemoryType) -> usize {
    let bytes = m.shape().iter().product::<usize>() * m.elem().size_bytes();
    bytes.div_ceil(m.swizzle().alignment_bytes()) * m.swizzle().alignment_bytes()
}

pub(crate) fn layout_swizzle(swizzle: Swizzle) -> Option<layout::Swizzle> {
    match swizzle {
        Swizzle::None => None,
        Swizzle::Bytes32 => Some(layout::Swizzle::B32),
        Swizzle::Bytes64 => Some(layout::Swizzle::B64),
        Swizzle::Bytes128 => Some(layout::Swizzle::B128),
    }
}

/// The placement of one buffer's elements (for a `local_trans` view, the
/// stored matrix's placement with the flat-index bits of rows and columns
/// exchanged).
pub(crate) fn buffer_layout(m: &SharedMemoryType) -> Result<SharedLayout> {
    let eb = m.elem().size_bytes();
    let stored: Vec<usize> = if m.transposed() {
        m.shape().iter().rev().copied().collect()
    } else {
        m.shape().to_vec()
    };
    let layout = match layout_swizzle(m.swizzle()) {
        Some(s) => SharedLayout::nvmma(&stored, eb, s)?,
        None => SharedLayout::row_major(&stored, eb)?,
    };
    if m.transposed() {
        return Ok(layout.transposed()?);
    }
    Ok(layout)
}

/// The buffer a descriptor's block lands in: the block's matrix (leading
/// unit dimensions left out) in TMA's swizzle for it.
fn block_buffer(desc: &TensorDescriptorType) -> SharedMemoryType {
    let shape = without_leading_ones(desc.block_shape()).to_vec();
    let swizzle = shared_swizzle(desc.elem(), desc.block_shape());
    SharedMemoryType::new(desc.elem(), shape, 1, swizzle, true)
}

/// Where a block lands in shared memory, and the bytes TMA counts for it
/// (the whole box, clipped or not).
pub(crate) struct BlockPlacement {
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
        self.buffer.swizzle().alignment_bytes().max(128)
    }
}

/// Places every allocation of the kernel body, in program order.
pub(crate) fn plan_static_shared(kernel: &Kernel) -> Result<StaticShared> {
    let mut plan = StaticShared {
        align: 16,
        ..StaticShared::default()
    };
    for op in &kernel.body.ops {
        let OpKind::Prim { prim, ref args, .. } = op.kind else {
            for block in op.kind.blocks() {
                reject_nested_allocations(block)?;
            }
            continue;
        };
        let Some(&result) = op.results.first() else {
            continue;
        };
        // `reuse = other`: the bytes of an allocation placed before.
        if let (Prim::LocalAlloc, [other]) = (prim, args.as_slice()) {
            let at = plan
                .offsets
                .get(other)
                .copied()
                .ok_or_else(|| malformed("`reuse` of something that is not an allocation"))?;
            plan.offsets.insert(result, at);
            continue;
        }
        let (bytes, align) = match (prim, kernel.type_of(result)) {
            (Prim::LocalAlloc, Type::TensorMemory(m)) => {
                let (slot, columns) = plan.tmem_slot.unwrap_or((usize::MAX, 0));
                plan.tmem_columns.insert(result, columns);
                let taken = columns + m.columns() * m.buffers() as usize;
                plan.tmem_slot = Some((slot, taken));
                continue;
            }
            (Prim::LocalAlloc, Type::SharedMemory(m)) => (
                buffer_stride(m) * m.buffers() as usize,
                m.swizzle().alignment_bytes(),
            ),
            (Prim::AllocBarriers, Type::Barriers(b)) => (8 * b.count(), 8),
            _ => continue,
        };
        let at = plan.bytes.div_ceil(align) * align;
        plan.offsets.insert(result, at);
        plan.bytes = at + bytes;
        plan.align = plan.align.max(align);
    }
    // The 4-byte slot `tcgen05.alloc` writes the tensor-memory address to.
    if let Some((_, columns)) = plan.tmem_slot {
        let at = plan.bytes.div_ceil(8) * 8;
        plan.tmem_slot = Some((at, columns));
        plan.bytes = at + 8;
    }
    if has_trace_events(&kernel.body) {
        let at = plan.bytes.div_ceil(16) * 16;
        plan.timeline_counters = Some(at);
        plan.bytes = at + 16 * kernel.total_warps() as usize;
    }
    Ok(plan)
}

fn has_trace_events(block: &Block) -> bool {
    block.ops.iter().any(|op| {
        matches!(
            op.kind,
            OpKind::Prim {
                prim: Prim::TraceEvent,
                ..
            }
        ) || op.kind.blocks().into_iter().any(has_trace_events)
    })
}

fn reject_nested_allocations(block: &Block) -> Result<()> {
    for op in &block.ops {
        if let OpKind::Prim {
            prim: prim @ (Prim::LocalAlloc | Prim::AllocBarriers),
            ..
        } = op.kind
        {
            return Err(CodegenError::Misuse {
                message: format!("`{}` inside a loop, branch or task", prim.mnemonic()),
                hint: "allocate shared buffers and barriers at the top of the kernel body, \
                       before `async_tasks!`, as TLX does"
                    .into(),
                at: Some(op.loc),
            });
        }
        for nested in op.kind.blocks() {
            reject_nested_allocations(nested)?;
        }
    }
    Ok(())
}

/// Bytes of one TMA descriptor (`CUtensorMap`).
pub(crate) const DESCRIPTOR_BYTES: usize = 128;

/// The slot of each `make_tensor_descriptor` of `kernel` in a program's
/// scratch, by result, in program order.
pub(crate) fn descriptor_slots(kernel: &Kernel) -> HashMap<ValueId, usize> {
    fn walk(block: &Block, slots: &mut HashMap<ValueId, usize>) {
        for op in &block.ops {
            if let OpKind::Prim {
                prim: Prim::MakeTensorDescriptor,
                ..
            } = op.kind
            {
                if let Some(&r) = op.results.first() {
                    let next = slots.len();
                    slots.insert(r, next);
                }
            }
            for inner in op.kind.blocks() {
                walk(inner, slots);
            }
        }
    }
    let mut slots = HashMap::new();
    walk(&kernel.body, &mut slots);
    slots
}
