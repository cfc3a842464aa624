//! `cp.async` copies from global into shared memory by groups.

use super::rules::{no_results, non_negative, one_buffer, same};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces, SyncScope};
use crate::ir::types::{Elem, ScalarType, Type};

/// `async_load(ptrs, buffer, mask)`: a `cp.async` copy of the elements
/// `ptrs` point at into `buffer` (masked-off ones read zero), in this
/// thread's open group.
pub(super) const ASYNC_LOAD: PrimDef = PrimDef {
    name: "async_load",
    signature: PrimSignature::new(&["ptrs", "buffer", "mask"], &[], 0),
    surface: Surface::custom(&["ptrs", "buffer", "mask", "other"], 2),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        writes: MemorySpaces::only(MemorySpace::Shared),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: async_load,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn async_load(t: &Typing) -> Result<(), String> {
    let m = one_buffer(t.operand("buffer")?, "`async_load`")?;
    let ptrs = Type::tensor(Elem::global_ptr(m.elem()), m.shape().to_vec());
    same(t.operand("ptrs")?, &ptrs, "the pointer tensor")?;
    let mask = Type::tensor(ScalarType::Bool.into(), m.shape().to_vec());
    same(t.operand("mask")?, &mask, "the mask")
}

/// `async_load_commit_group()`: closes the open group of `async_load`s.
pub(super) const ASYNC_LOAD_COMMIT_GROUP: PrimDef = PrimDef {
    name: "async_load_commit_group",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], no_results),
    effects: Effects {
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// `async_load_wait_group(pendings)`: until at most `pendings` committed
/// groups are in flight; the copies before them are then visible to the
/// whole task (and to the async proxy, for `async_dot`).
pub(super) const ASYNC_LOAD_WAIT_GROUP: PrimDef = PrimDef {
    name: "async_load_wait_group",
    signature: PrimSignature::new(&[], &["pendings"], 0),
    surface: Surface::custom(&["pendings"], 1),
    effects: Effects {
        async_role: Some(AsyncRole::Completes),
        sync: Some(SyncScope::Cta),
        ..Effects::PURE
    },
    rule: |t| non_negative(t.imm("pendings")?, "pendings"),
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};
