//! What code generation decides before it emits: analyses of the whole
//! kernel with typed results, which emission reads and never changes. They
//! run in the order [`KernelFacts::analyze`] lists, each reading the kernel
//! and none reading another's result:
//!
//! 1. uses: which values some op reads;
//! 2. [`axis`]: contiguity, constancy and divisibility along the last
//!    dimension, for vector widths and alignment;
//! 3. access widths: the widest element each shape is loaded or stored at,
//!    which sets its default layout's vector;
//! 4. [`storage`]: where `local_alloc` buffers, mbarriers and device-made
//!    descriptors live.
//!
//! [`mma`] maps a `dot` onto the tensor cores from its types and shape.
//!
//! [`pipeline`] plans one `for` loop's software pipeline (which loads get
//! rings, which `dot` operands stay in shared memory for wgmma, how far
//! ahead the copies run). It reads the kernel, these facts and the warps of
//! the context the loop is lowered in (a loop in a task body is planned for
//! each replica's warps), so the lowering calls it at the loop; it returns a
//! [`pipeline::LoopPlan`] that emission follows.
//!
//! Decided during emission still: the layout of loads that a use wanted in
//! another layout (`lower_kernel`'s rounds, which learn from emitted
//! conversions), barrier subsumption (`SyncState`, a peephole over the text
//! just emitted) and the scratch offsets of each op.

pub(crate) mod axis;
pub(crate) mod mma;
pub(crate) mod pipeline;
pub(crate) mod storage;

use crate::error::Result;
use axis::AxisInfo;
use std::collections::{HashMap, HashSet};
use storage::{descriptor_slots, plan_static_shared, StaticShared};
use tlx_core::ir::{Block, Kernel, Named, OpKind, Prim, ScalarType, Type, ValueId};

/// Analyses of the whole kernel, run before emission; read-only after.
pub(crate) struct KernelFacts {
    /// Values some op reads (an atomic whose old values none reads reduces).
    pub(crate) used: HashSet<ValueId>,
    pub(crate) axis: HashMap<ValueId, AxisInfo>,
    /// Elements per thread vector along the last dim, per shape (from the widest access).
    pub(crate) vector_of_shape: HashMap<Vec<usize>, usize>,
    /// The kernel stores into its peers' shared memory
    /// (`remote_shmem_store`): remote arrivals release, and waits acquire,
    /// at cluster scope.
    pub(crate) stores_into_peers: bool,
    /// Each device-made descriptor's slot in the program's global scratch.
    pub(crate) descriptor_slots: HashMap<ValueId, usize>,
    /// Where the kernel's `local_alloc` buffers and mbarriers live.
    pub(crate) static_shared: StaticShared,
    /// The kernel's `tcgen05` ops span pairs of programs (`two_ctas`): its
    /// tensor memory is allocated, and its MMAs issued, with `cta_group::2`.
    pub(crate) pair_mma: bool,
}

impl KernelFacts {
    pub(crate) fn analyze(kernel: &Kernel) -> Result<KernelFacts> {
        let mut vector_of_shape: HashMap<Vec<usize>, usize> = HashMap::new();
        collect_access_widths(kernel, &kernel.body, &mut vector_of_shape);
        let mut uses = HashMap::new();
        count_uses(&kernel.body, &mut uses);
        Ok(KernelFacts {
            used: uses.into_keys().collect(),
            axis: axis::analyze(kernel),
            vector_of_shape,
            stores_into_peers: kernel.uses_prim(Prim::RemoteShmemStore),
            descriptor_slots: descriptor_slots(kernel),
            static_shared: plan_static_shared(kernel)?,
            pair_mma: uses_pair_mma(&kernel.body),
        })
    }
}

/// The PTX ISA the kernel needs, as the NVPTX target's feature: 8.6 (the
/// first with `sm_100a`) unless an op needs later, as nvfp4's
/// `kind::mxf4nvf4` MMAs need 8.7.
pub(crate) fn ptx_features(kernel: &Kernel) -> &'static str {
    fn nvfp4(kernel: &Kernel, block: &Block) -> bool {
        block.ops.iter().any(|op| {
            let here = match &op.kind {
                OpKind::Prim {
                    prim: prim @ Prim::Tcgen05MmaScaled,
                    args,
                    imms,
                } => Named::new(*prim, args, imms)
                    .get("a_scale")
                    .is_ok_and(|&s| {
                        matches!(kernel.type_of(s), Type::TensorMemory(m) if m.elem() == ScalarType::F8E4M3)
                    }),
                _ => false,
            };
            here || op.kind.blocks().into_iter().any(|b| nvfp4(kernel, b))
        })
    }
    if nvfp4(kernel, &kernel.body) {
        "+ptx87"
    } else {
        "+ptx86"
    }
}

/// Whether an op of `block` is a `tcgen05` MMA or commit with `two_ctas`
/// (the frontend makes every one of a kernel agree).
fn uses_pair_mma(block: &Block) -> bool {
    block.ops.iter().any(|op| {
        let pair = match &op.kind {
            OpKind::Prim {
                prim: prim @ (Prim::Tcgen05Mma | Prim::Tcgen05Commit),
                args,
                imms,
            } => Named::new(*prim, args, imms).imm("two_ctas") == Ok(1),
            _ => false,
        };
        pair || op.kind.blocks().into_iter().any(uses_pair_mma)
    })
}

/// Widest element accessed by a load or store of each shape -> elements per 16 bytes.
fn collect_access_widths(kernel: &Kernel, block: &Block, out: &mut HashMap<Vec<usize>, usize>) {
    for op in &block.ops {
        for b in op.kind.blocks() {
            collect_access_widths(kernel, b, out);
        }
        let ptr = match &op.kind {
            OpKind::Load { ptr, .. } | OpKind::Store { ptr, .. } => *ptr,
            OpKind::Prim {
                prim: tlx_core::ir::Prim::AsyncLoad,
                args,
                ..
            } if !args.is_empty() => args[0],
            _ => continue,
        };
        let ty = kernel.type_of(ptr);
        let bytes = ty.elem().pointee().map_or(4, |s| s.size_bytes()).max(1);
        let vector = 16 / bytes;
        let entry = out.entry(ty.shape().to_vec()).or_insert(vector);
        *entry = (*entry).min(vector);
    }
}

/// Counts the uses of each value by the ops of `block` and their nested blocks.
pub(crate) fn count_uses(block: &Block, uses: &mut HashMap<ValueId, usize>) {
    for op in &block.ops {
        for v in op.kind.operands() {
            *uses.entry(v).or_default() += 1;
        }
        for b in op.kind.blocks() {
            count_uses(b, uses);
        }
    }
}
