//! The pipeline rings as the rest of the lowering sees them: where a
//! ring's slots are, who fills them and how a slot holds its tile
//! (`pipeline.rs` plans and fills them, `dot`, wgmma and the TMA rings of
//! `descriptor.rs` read them). A leaf, so that the `Lowerer`'s state can
//! name a ring without its module importing the pipeliner.

use crate::layout::{LinearLayout, OffsetBases};
use tlx_core::ir::SharedMemoryType;

/// A load the loop body reads from its ring instead of global memory.
#[derive(Clone, Debug)]
pub struct RingRead {
    /// Byte offset of the ring in the pipeline area, and of each slot in it.
    pub ring_offset: usize,
    pub slot_bytes: usize,
    /// The slot of the current iteration (i32), set at the top of each iteration.
    pub read_slot: String,
    pub fill: RingFill,
}

/// Who fills a ring's slots, and how a slot holds the tile.
#[derive(Clone, Debug)]
pub enum RingFill {
    /// Every thread, with `cp.async`.
    Threads(ThreadCopies),
    /// The first thread, with TMA: the block of a descriptor load, in the
    /// placement wgmma reads (a `dot` operand, multiplied in place). Slot
    /// `s` completes on the mbarrier at byte `barriers + 8 * s` of the
    /// pipeline area.
    Tma {
        block: SharedMemoryType,
        bytes: usize,
        barriers: usize,
    },
}

/// How every thread copies its part of a tile into a slot.
#[derive(Clone, Debug)]
pub struct ThreadCopies {
    pub layout: LinearLayout,
    /// Elements per copy (one `cp.async` of `chunk * elem_bytes` bytes).
    pub chunk: usize,
    /// How a slot holds the tile: `None`, each thread's chunks side by side,
    /// read back by the thread that copied them; or a placement the whole CTA
    /// reads (a wgmma operand, multiplied in place), as the byte offsets this
    /// ring's layout takes in it.
    pub placement: Option<OffsetBases>,
}

impl RingRead {
    /// Whether the whole CTA reads a slot in place as a wgmma operand.
    pub fn is_operand(&self) -> bool {
        match &self.fill {
            RingFill::Threads(copies) => copies.placement.is_some(),
            RingFill::Tma { .. } => true,
        }
    }
}

/// The module constant holding the byte offset where the rings start:
/// after all scratch, which is known once the whole kernel is lowered, when
/// `lower_kernel` defines it (LLVM folds the loads of it away).
pub const RING_BASE_SYMBOL: &str = "@tlx_ring_base";
