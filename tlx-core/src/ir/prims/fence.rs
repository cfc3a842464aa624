//! Fences: orderings of one thread's memory accesses that no barrier
//! gives, between proxies (generic stores before TMA or wgmma reads) and
//! between threads of the GPU or the system.

use super::rules::no_results;
use super::{Choice, Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface};
use crate::ir::def::{Effects, MemorySpace, MemorySpaces, SyncScope};

/// `fence_async_shared()`: orders generic-proxy shared-memory accesses
/// before later async-proxy ones (TMA, wgmma). The interpreter has one
/// proxy, its accesses already in program order; it notes the fence, for
/// the async-proxy reads of what a peer's `remote_shmem_store` wrote
/// (rule `proxy-fence`).
pub(super) const FENCE_ASYNC_SHARED: PrimDef = PrimDef {
    name: "fence_async_shared",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], no_results),
    effects: Effects {
        sync: Some(SyncScope::Cta),
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    protocol: Protocol::KEPT,
    lowering: Lowering::Asm {
        asm: "fence.proxy.async.shared::cta;",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Custom,
};

/// `fence(scope)` (TLX's newer spelling): with `"async_shared"`, the same
/// as `fence_async_shared()`; with `"gpu"` or `"sys"`, a memory fence
/// (`fence.acq_rel`) that orders this thread's earlier loads and stores
/// before its later ones as every thread of the GPU (or of the system, the
/// host and other GPUs included) observes them: a publication through plain
/// stores and a flag. The interpreter's memory is sequentially consistent:
/// it orders every access already. No access moves across it. The memory
/// fences neither wait nor arrive: nothing of the synchronization
/// protocol, so the checker drops them (one under a data-dependent `if` is
/// fine); it keeps `"async_shared"`, as `fence_async_shared()`.
pub(super) const FENCE: PrimDef = PrimDef {
    name: "fence",
    signature: PrimSignature::new(&[], &["scope"], 0).with_choices(&[Choice {
        immediate: "scope",
        options: &[
            ("async_shared", "fence.proxy.async.shared::cta"),
            ("gpu", "fence.acq_rel.gpu"),
            ("sys", "fence.acq_rel.sys"),
        ],
    }]),
    surface: Surface::generic(&["scope"], no_results),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global).with(MemorySpace::Shared),
        writes: MemorySpaces::only(MemorySpace::Global).with(MemorySpace::Shared),
        volatile: true,
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    protocol: Protocol::KeptWhen {
        immediate: "scope",
        word: "async_shared",
    },
    lowering: Lowering::Asm {
        asm: "{scope};",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Custom,
};
