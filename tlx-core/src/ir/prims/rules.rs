//! Typing-rule helpers the primitive families share: "one buffer", "one
//! barrier", "an i32 scalar", with the messages the verifier and the
//! frontend show.

use crate::ir::types::{ScalarType, SharedMemoryType, Type};

/// One i32 offset per dimension of a descriptor's block.
pub(super) fn block_offsets(block: &[usize], offsets: &[&Type]) -> Result<(), String> {
    if offsets.len() != block.len() {
        return Err(format!(
            "{} offsets for a {}-d descriptor",
            offsets.len(),
            block.len()
        ));
    }
    offsets
        .iter()
        .try_for_each(|t| scalar_of(t, ScalarType::I32, "an offset"))
}

pub(super) fn scalar_of(t: &Type, s: ScalarType, what: &str) -> Result<(), String> {
    same(t, &Type::scalar(s), what)
}

pub(super) fn same(t: &Type, expected: &Type, what: &str) -> Result<(), String> {
    if t == expected {
        Ok(())
    } else {
        Err(format!("{what} is {t}, expected {expected}"))
    }
}

pub(super) fn positive(n: i64, what: &str) -> Result<(), String> {
    if (1..1 << 20).contains(&n) {
        Ok(())
    } else {
        Err(format!("{what} {n} is not in 1..2^20"))
    }
}

pub(super) fn non_negative(n: i64, what: &str) -> Result<(), String> {
    if (0..64).contains(&n) {
        Ok(())
    } else {
        Err(format!("{what} {n} is not in 0..64"))
    }
}

/// What a primitive that takes only this program's own buffers and
/// barriers says of a remote view.
pub(super) fn local(t: &Type, user: &str) -> Result<(), String> {
    if t.is_remote() {
        return Err(format!(
            "{user} cannot take a remote view ({t}): only `barrier_arrive` and the remote \
             stores reach a peer program's shared memory"
        ));
    }
    Ok(())
}

pub(super) fn one_buffer<'t>(t: &'t Type, user: &str) -> Result<&'t SharedMemoryType, String> {
    local(t, user)?;
    match t {
        Type::SharedMemory(m) if m.buffers() == 1 => Ok(m),
        Type::SharedMemory(m) => Err(format!(
            "{user} takes one buffer, not all {} of an allocation: pick one with `local_view(buffers, i)`",
            m.buffers()
        )),
        other => Err(format!("{user} takes a shared buffer, not {other}")),
    }
}

/// The element type and shape of one buffer, in shared or tensor memory
/// (what `local_load` gives and `local_store` takes).
pub(super) fn buffer_contents(t: &Type, user: &str) -> Result<(ScalarType, Vec<usize>), String> {
    match t {
        Type::TensorMemory(m) if m.elem().size_bytes() == 1 => Err(format!(
            "{user} of block scales: only `async_dot_scaled` reads them, in their own layout; fill them with `tmem_copy` from shared memory"
        )),
        Type::TensorMemory(m) if m.buffers() == 1 => Ok((m.elem(), m.shape().to_vec())),
        Type::TensorMemory(m) => Err(format!(
            "{user} takes one buffer, not all {} of an allocation: pick one with `local_view(buffers, i)`",
            m.buffers()
        )),
        _ => one_buffer(t, user).map(|m| (m.elem(), m.shape().to_vec())),
    }
}

/// One buffer of a peer program (a `remote_view`).
pub(super) fn remote_buffer<'t>(t: &'t Type, user: &str) -> Result<&'t SharedMemoryType, String> {
    match t {
        Type::SharedMemory(m) if m.buffers() == 1 && m.remote() => Ok(m),
        other => Err(format!(
            "{user} writes a remote view of one buffer (`remote_view(local_view(bufs, i), rank)`), not {other}"
        )),
    }
}

pub(super) fn one_barrier(t: &Type, user: &str) -> Result<(), String> {
    local(t, user)?;
    one_barrier_anywhere(t, user)
}

/// One barrier, of this program or (a remote view) of a peer.
pub(super) fn one_barrier_anywhere(t: &Type, user: &str) -> Result<(), String> {
    match t {
        Type::Barriers(b) if b.count() == 1 => Ok(()),
        Type::Barriers(b) => Err(format!(
            "{user} takes one barrier, not all {} of an allocation: pick one with `local_view(bars, i)`",
            b.count()
        )),
        other => Err(format!("{user} takes a barrier, not {other}")),
    }
}

pub(super) fn i32_scalar(t: &Type, what: &str) -> Result<(), String> {
    scalar_of(t, ScalarType::I32, what)
}

pub(super) fn bool_scalar(t: &Type, what: &str) -> Result<(), String> {
    scalar_of(t, ScalarType::Bool, what)
}

/// The result types of a primitive with none.
pub(super) fn no_results(_: &super::Named<&Type>) -> Result<Vec<Type>, String> {
    Ok(vec![])
}
