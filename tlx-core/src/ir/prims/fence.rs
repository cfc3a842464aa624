//! Fences: orderings of one thread's memory accesses that no barrier
//! gives, between proxies (generic stores before TMA or wgmma reads) and
//! between threads of the GPU or the system.

use super::rules::no_results;
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface};
use crate::ir::def::{Effects, SyncScope};

/// `fence_async_shared()`: orders generic-proxy shared-memory accesses
/// before later async-proxy ones (TMA, wgmma). The interpreter has one
/// proxy: its accesses are already in program order.
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
    interp: Interp::Nothing,
};
