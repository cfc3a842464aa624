//! Blackwell's fifth-generation tensor cores: MMAs issued by one thread
//! into tensor memory, and the commit that arrives on a barrier when they
//! are done.

use super::rules::{bool_scalar, one_barrier, one_buffer};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces, SyncScope};
use crate::ir::types::{ScalarType, SharedMemoryType, TensorMemoryType, Type};

/// `async_dot(a, b, acc, use_acc, mbarriers)` with `acc` a buffer in tensor
/// memory (`tcgen05.mma`): `acc = a @ b` (`+ acc` when the i1 `use_acc`
/// holds), issued by one thread and finished asynchronously; each barrier
/// after `use_acc` (zero or more) gets one arrival when it (and every MMA
/// this thread issued before) completes.
pub(super) const TCGEN05_MMA: PrimDef = PrimDef {
    name: "tcgen05_mma",
    signature: PrimSignature::new(&["a", "b", "acc", "use_acc", "mbarriers"], &[], 0).variadic(),
    surface: Surface::custom(&["a", "b", "acc", "use_acc", "mbarriers"], 3),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared).with(MemorySpace::Tensor),
        writes: MemorySpaces::only(MemorySpace::Tensor),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: tcgen05_mma,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn tcgen05_mma(t: &Typing) -> Result<(), String> {
    let acc = match t.operand("acc")? {
        Type::TensorMemory(m) if m.buffers() == 1 => m,
        other => {
            return Err(format!(
                "the accumulator is one tensor-memory buffer, not {other}"
            ))
        }
    };
    let a = one_buffer(t.operand("a")?, "`async_dot`'s a")?;
    let b = one_buffer(t.operand("b")?, "`async_dot`'s b")?;
    mma_shapes(a, b, acc)?;
    bool_scalar(t.operand("use_acc")?, "`use_acc`")?;
    t.rest("mbarriers")?
        .iter()
        .try_for_each(|b| one_barrier(b, "`async_dot`'s mbarriers"))
}

/// `tcgen05_commit(bar)`: one arrival on `bar` when every `tcgen05` MMA
/// this thread issued so far has completed.
pub(super) const TCGEN05_COMMIT: PrimDef = PrimDef {
    name: "tcgen05_commit",
    signature: PrimSignature::new(&["bar"], &[], 0),
    surface: Surface::custom(&["bar"], 1),
    effects: Effects {
        async_role: Some(AsyncRole::Starts),
        sync: Some(SyncScope::Cta),
        ..Effects::PURE
    },
    rule: |t| one_barrier(t.operand("bar")?, "`tcgen05_commit`"),
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// The shapes and types of a `tcgen05` MMA: `a` `[128, K]` and `b` `[K, N]`
/// of one 16-bit float type in shared memory, K a multiple of 16, into an
/// f32 `[128, N]` accumulator.
fn mma_shapes(
    a: &SharedMemoryType,
    b: &SharedMemoryType,
    acc: &TensorMemoryType,
) -> Result<(), String> {
    let ([m, k], [k2, n]) = (a.shape(), b.shape()) else {
        return Err("`async_dot`'s a and b are matrices".into());
    };
    if k != k2 {
        return Err(format!(
            "inner dimensions differ: a is {:?}, b is {:?}; a's columns (K) must equal b's rows",
            a.shape(),
            b.shape()
        ));
    }
    if a.elem() != b.elem() || !matches!(a.elem(), ScalarType::F16 | ScalarType::BF16) {
        return Err(format!(
            "a holds {} and b holds {}: a tensor-memory `async_dot` takes f16 or bf16 operands of one type",
            a.elem(),
            b.elem()
        ));
    }
    if k % 16 != 0 {
        return Err(format!(
            "K = {k}: `tcgen05` MMAs step K by 16, so K must be a multiple of 16"
        ));
    }
    if acc.elem() != ScalarType::F32 || acc.shape() != [*m, *n] || n % 16 != 0 {
        return Err(format!(
            "a [{m}, {k}] x [{k}, {n}] product accumulates into an f32 [{m}, {n}] tensor-memory buffer with N a multiple of 16, not {}",
            Type::TensorMemory(acc.clone())
        ));
    }
    Ok(())
}
