//! A cluster's programs reaching each other's shared memory: remote views
//! (`mapa`), synchronous and asynchronous distributed shared-memory stores,
//! TMA multicast, the fence that publishes barrier initializations to
//! the cluster, and Blackwell's cluster launch control (a persistent
//! program taking the work of a cluster that has not started).

use super::rules::{block_offsets, i32_scalar, one_barrier, one_buffer, remote_buffer, same};
use super::tma::block_copy;
use super::{Choice, Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces, SyncScope};
use crate::ir::types::{ScalarType, Type};

/// `remote_view(buffer, rank)`: the same buffer or mbarrier in program
/// `rank` of the cluster (PTX `mapa`); a remote type, which only stores and
/// arrivals take. `mapa` is address arithmetic, as a view is.
pub(super) const REMOTE_VIEW: PrimDef = PrimDef {
    name: "remote_view",
    signature: PrimSignature::new(&["buffer", "remote_cta_rank"], &[], 1),
    surface: Surface::custom(&["buffer", "remote_cta_rank"], 2),
    effects: Effects::PURE,
    rule: remote_view,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn remote_view(t: &Typing) -> Result<(), String> {
    i32_scalar(t.operand("remote_cta_rank")?, "the remote CTA rank")?;
    let local = t.operand("buffer")?;
    let remote = match local {
        Type::SharedMemory(_) => {
            Type::SharedMemory(one_buffer(local, "`remote_view`")?.to_remote())
        }
        Type::Barriers(b) => {
            one_barrier(local, "`remote_view`")?;
            Type::Barriers(b.to_remote())
        }
        other => {
            return Err(format!(
                "`remote_view` takes one buffer or barrier, not {other}"
            ))
        }
    };
    same(t.result()?, &remote, "the remote view")
}

/// `remote_shmem_store(dst, value)`: writes a register tensor into a remote
/// buffer (`st.shared::cluster`), synchronously.
pub(super) const REMOTE_SHMEM_STORE: PrimDef = PrimDef {
    name: "remote_shmem_store",
    signature: PrimSignature::new(&["dst", "value"], &[], 0),
    // `remote_cta_rank` may be left out when `dst` (and `barrier`) are
    // remote views already.
    surface: Surface::custom(&["dst", "src", "remote_cta_rank"], 2),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Shared),
        ..Effects::PURE
    },
    rule: remote_store,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// `async_remote_shmem_store(dst, value, barrier)`: the same as an
/// asynchronous store whose bytes complete on `barrier`, a remote view of a
/// barrier of the same peer (`st.async ... complete_tx::bytes`).
pub(super) const ASYNC_REMOTE_SHMEM_STORE: PrimDef = PrimDef {
    name: "async_remote_shmem_store",
    signature: PrimSignature::new(&["dst", "value", "barrier"], &[], 0),
    surface: Surface::custom(&["dst", "src", "remote_cta_rank", "barrier"], 2),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Shared),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: remote_store,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn remote_store(t: &Typing) -> Result<(), String> {
    let user = t.user();
    let m = remote_buffer(t.operand("dst")?, &user)?;
    let expected = Type::tensor(m.elem().into(), m.shape().to_vec());
    same(t.operand("value")?, &expected, "the stored tensor")?;
    if let Ok(barrier) = t.operand("barrier") {
        match barrier {
            Type::Barriers(b) if b.count() == 1 && b.remote() => {}
            other => {
                return Err(format!(
                    "{user} completes on a remote view of one barrier of the same peer, not {other}"
                ))
            }
        }
    }
    Ok(())
}

/// `fence_mbarrier_init_cluster()`: makes this program's barrier
/// initializations visible to the cluster (before a `cluster_barrier` after
/// which peers arrive on them).
pub(super) const FENCE_MBARRIER_INIT_CLUSTER: PrimDef = PrimDef {
    name: "fence_mbarrier_init_cluster",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], super::rules::no_results),
    effects: Effects {
        sync: Some(SyncScope::Cluster),
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    protocol: Protocol::KEPT,
    lowering: Lowering::Asm {
        asm: "fence.mbarrier_init.release.cluster;",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Custom,
};

/// `async_descriptor_load(..., multicast_targets = ranks)`: a TMA copy into
/// `buffer` of every program of the cluster whose bit `cta_mask` sets,
/// completing its bytes on `barrier` of each (same offsets there).
pub(super) const ASYNC_DESCRIPTOR_LOAD_MULTICAST: PrimDef = PrimDef {
    name: "async_descriptor_load_multicast",
    signature: PrimSignature::new(
        &["desc", "buffer", "barrier", "cta_mask", "offsets"],
        &[],
        0,
    )
    .variadic(),
    surface: super::tma::ASYNC_DESCRIPTOR_LOAD.surface,
    effects: super::tma::ASYNC_DESCRIPTOR_LOAD.effects,
    rule: multicast_load,
    protocol: super::tma::ASYNC_DESCRIPTOR_LOAD.protocol,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn multicast_load(t: &Typing) -> Result<(), String> {
    let d = block_copy(t)?;
    one_barrier(t.operand("barrier")?, "`async_descriptor_load`")?;
    i32_scalar(t.operand("cta_mask")?, "the multicast mask")?;
    block_offsets(d.block_shape(), t.rest("offsets")?)
}

/// `clc_try_cancel(response, bar, pred, multicast)` (Blackwell's cluster
/// launch control, `clusterlaunchcontrol.try_cancel`): when `pred` holds,
/// asks the hardware to cancel the launch of a cluster of this grid that
/// has not started, and writes the 16-byte answer (cancelled or not, and
/// the cancelled cluster's first program id) into `response`, completing
/// 16 bytes on `bar`, asynchronously. With `multicast = 1` the answer and
/// its bytes reach `response` and `bar` of every program of the cluster.
/// The answer is opaque: only `clc_query` reads it.
pub(super) const CLC_TRY_CANCEL: PrimDef = PrimDef {
    name: "clc_try_cancel",
    signature: PrimSignature::new(&["response", "bar", "pred"], &["multicast"], 0),
    surface: Surface::generic(
        &["response", "bar", "pred", "multicast"],
        super::rules::no_results,
    ),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Shared),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: clc_try_cancel,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn clc_try_cancel(t: &Typing) -> Result<(), String> {
    clc_response(t.operand("response")?, "`clc_try_cancel`")?;
    one_barrier(t.operand("bar")?, "`clc_try_cancel`")?;
    super::rules::bool_scalar(t.operand("pred")?, "`clc_try_cancel`'s predicate")?;
    match t.imm("multicast")? {
        0 | 1 => Ok(()),
        other => Err(format!("`multicast` is 0 or 1, not {other}")),
    }
}

/// `clc_query(response, dim)`: the cancelled cluster's first program id
/// along `dim` ("x", "y" or "z") from a `clc_try_cancel` answer, or -1 when
/// nothing was cancelled (`clusterlaunchcontrol.query_cancel`). Read it
/// only after a wait on the barrier the answer completed on.
pub(super) const CLC_QUERY: PrimDef = PrimDef {
    name: "clc_query",
    signature: PrimSignature::new(&["response"], &["dim"], 1).with_choices(&[Choice {
        immediate: "dim",
        options: &[("x", "x"), ("y", "y"), ("z", "z")],
    }]),
    surface: Surface::generic(&["response", "dim"], |_| {
        Ok(vec![Type::scalar(ScalarType::I32)])
    }),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared),
        ..Effects::PURE
    },
    rule: |t| {
        clc_response(t.operand("response")?, "`clc_query`")?;
        same(
            t.result()?,
            &Type::scalar(ScalarType::I32),
            "`clc_query`'s result",
        )
    },
    // Its result decides whether a persistent loop goes on.
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// The 16-byte buffer a cluster-launch-control answer lands in: one
/// `[4]` i32 shared buffer (the hardware's opaque 128 bits).
pub const CLC_RESPONSE_SHAPE: [usize; 1] = [4];

fn clc_response(t: &Type, user: &str) -> Result<(), String> {
    let m = one_buffer(t, user)?;
    if m.elem() != ScalarType::I32 || m.shape() != CLC_RESPONSE_SHAPE {
        return Err(format!(
            "{user} takes a cluster-launch-control answer, a [4] i32 shared buffer (what `clc_create_context` allocates), not {t}"
        ));
    }
    Ok(())
}
