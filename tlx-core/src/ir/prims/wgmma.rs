//! Hopper's warpgroup MMAs: `async_dot` on the tensor cores and the wait
//! that makes its accumulator readable.

use super::rules::{non_negative, one_buffer, same};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces};
use crate::ir::types::{ScalarType, Type};

/// `async_dot(a, b, acc)`: `acc + a @ b` on the tensor cores (wgmma), `a` a
/// buffer or a register tensor, `b` a buffer; the result may be read only
/// after an `async_dot_wait` that covers it. (`async_dot` with `acc` in
/// tensor memory is `tcgen05_mma`.)
pub(super) const ASYNC_DOT: PrimDef = PrimDef {
    name: "async_dot",
    signature: PrimSignature::new(&["a", "b", "acc"], &[], 1),
    surface: Surface::custom(&["a", "b", "acc", "use_acc", "mbarriers", "two_ctas"], 3),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared),
        async_role: Some(AsyncRole::Starts),
        cross_thread: true,
        async_reads: true,
        ..Effects::PURE
    },
    rule: async_dot,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn async_dot(t: &Typing) -> Result<(), String> {
    let b = one_buffer(t.operand("b")?, "`async_dot`'s b")?;
    let a = t.operand("a")?;
    let (a_elem, a_shape) = match a {
        Type::SharedMemory(_) => {
            let a = one_buffer(a, "`async_dot`'s a")?;
            (a.elem(), a.shape().to_vec())
        }
        Type::Tensor(_) => match a.elem().scalar() {
            Some(s) => (s, a.shape().to_vec()),
            None => return Err("`async_dot`'s a holds pointers".into()),
        },
        other => return Err(format!("`async_dot`'s a is {other}")),
    };
    let [m, k] = a_shape[..] else {
        return Err("`async_dot`'s a is not a matrix".into());
    };
    let [k2, n] = b.shape()[..] else {
        return Err("`async_dot`'s b is not a matrix".into());
    };
    if k != k2 {
        return Err(format!(
            "inner dimensions differ: a is {a_shape:?}, b is {:?}; \
             a's columns (K) must equal b's rows",
            b.shape()
        ));
    }
    if a_elem != b.elem() {
        return Err(format!(
            "a holds {a_elem} and b holds {}; both operands must have one element type",
            b.elem()
        ));
    }
    let acc_elem = if a_elem.is_float() {
        ScalarType::F32
    } else {
        ScalarType::I32
    };
    let acc = Type::tensor(acc_elem.into(), vec![m, n]);
    same(t.operand("acc")?, &acc, "the accumulator")?;
    same(t.result()?, &acc, "the result")
}

/// `async_dot_wait(pendings, acc)`: until at most `pendings` `async_dot`
/// groups are in flight; gives `acc` back, now complete.
pub(super) const ASYNC_DOT_WAIT: PrimDef = PrimDef {
    name: "async_dot_wait",
    signature: PrimSignature::new(&["acc"], &["pendings"], 1),
    surface: Surface::custom(&["pendings", "acc"], 2),
    effects: Effects {
        async_role: Some(AsyncRole::Completes),
        ..Effects::PURE
    },
    rule: async_dot_wait,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn async_dot_wait(t: &Typing) -> Result<(), String> {
    non_negative(t.imm("pendings")?, "pendings")?;
    same(t.result()?, t.operand("acc")?, "the result")
}
