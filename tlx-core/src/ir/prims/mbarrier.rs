//! Synchronization inside a program: mbarriers (allocation, waits on a
//! phase, arrivals, expected transaction bytes) and the hardware's named
//! barriers.

use super::rules::{bool_scalar, i32_scalar, one_barrier, one_barrier_anywhere, positive};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces, SyncScope};
use crate::ir::types::Type;

/// Synchronizes the threads of a program.
const SYNCS: Effects = Effects {
    sync: Some(SyncScope::Cta),
    ..Effects::PURE
};

/// `alloc_barriers(num, arrive_count)`: initialized mbarriers
/// (`mbarrier.init` writes the barrier words).
pub(super) const ALLOC_BARRIERS: PrimDef = PrimDef {
    name: "alloc_barriers",
    signature: PrimSignature::new(&[], &["arrive_count"], 1),
    surface: Surface::custom(&["num_barriers", "arrive_count"], 1),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Shared),
        ..SYNCS
    },
    rule: alloc_barriers,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn alloc_barriers(t: &Typing) -> Result<(), String> {
    positive(t.imm("arrive_count")?, "the arrive count")?;
    match t.result()? {
        Type::Barriers(b) if b.count() >= 1 => Ok(()),
        other => Err(format!("`alloc_barriers` makes barriers, not {other}")),
    }
}

/// `barrier_wait(bar, phase, pred)`: until the phase of that parity completed.
pub(super) const BARRIER_WAIT: PrimDef = PrimDef {
    name: "barrier_wait",
    signature: PrimSignature::new(&["bar", "phase", "pred"], &[], 0),
    surface: Surface::custom(&["bar", "phase", "pred"], 2),
    effects: Effects {
        async_role: Some(AsyncRole::Completes),
        ..SYNCS
    },
    rule: barrier_wait_or_expect,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// `barrier_arrive(bar, count, pred)`, on this program's barrier or (a
/// remote view) a peer's.
pub(super) const BARRIER_ARRIVE: PrimDef = PrimDef {
    name: "barrier_arrive",
    signature: PrimSignature::new(&["bar", "pred"], &["arrive_count"], 0),
    surface: Surface::custom(&["bar", "arrive_count", "remote_cta_rank", "pred"], 1),
    effects: SYNCS,
    rule: barrier_arrive,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn barrier_arrive(t: &Typing) -> Result<(), String> {
    // The one barrier operation a peer may do remotely.
    one_barrier_anywhere(t.operand("bar")?, "`barrier_arrive`")?;
    positive(t.imm("arrive_count")?, "the arrive count")?;
    bool_scalar(t.operand("pred")?, "the predicate")
}

/// `barrier_expect_bytes(bar, bytes, pred)`: arrives once and announces the
/// bytes asynchronous copies will complete on the barrier's phase.
pub(super) const BARRIER_EXPECT_BYTES: PrimDef = PrimDef {
    name: "barrier_expect_bytes",
    signature: PrimSignature::new(&["bar", "bytes", "pred"], &[], 0),
    surface: Surface::custom(&["bar", "bytes", "pred"], 2),
    effects: SYNCS,
    rule: barrier_wait_or_expect,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn barrier_wait_or_expect(t: &Typing) -> Result<(), String> {
    let [bar, second, pred] = t.args.operands() else {
        return Err(format!("{} takes three operands", t.user()));
    };
    one_barrier(bar, &t.user())?;
    i32_scalar(second, "the second operand")?;
    bool_scalar(pred, "the predicate")
}

/// `named_barrier_wait(id, num_threads)`: hardware barrier `id`.
pub(super) const NAMED_BARRIER_WAIT: PrimDef = PrimDef {
    name: "named_barrier_wait",
    signature: PrimSignature::new(&["bar_id"], &["num_threads"], 0),
    surface: Surface::custom(&["bar_id", "num_threads"], 2),
    effects: SYNCS,
    rule: named_barrier,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// `named_barrier_arrive(id, num_threads)`.
pub(super) const NAMED_BARRIER_ARRIVE: PrimDef = PrimDef {
    name: "named_barrier_arrive",
    ..NAMED_BARRIER_WAIT
};

/// The id is a run-time value (PTX takes a register): the interpreter
/// checks its range.
fn named_barrier(t: &Typing) -> Result<(), String> {
    i32_scalar(t.operand("bar_id")?, "the barrier id")?;
    let threads = t.imm("num_threads")?;
    if threads <= 0 || threads % 32 != 0 {
        return Err(format!(
            "{threads} threads is not a positive multiple of 32 \
             (a named barrier counts whole warps)"
        ));
    }
    Ok(())
}
