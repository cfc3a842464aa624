//! The program and its grid: the SM's cycle counter and programmatic
//! dependent launch (`griddepcontrol`).

use super::rules::no_results;
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface};
use crate::ir::def::{Effects, MemorySpace, MemorySpaces};
use crate::ir::types::{ScalarType, Type};

/// `clock64()`: this SM's 64-bit cycle counter (i64), for timing a stretch
/// of a kernel. Volatile: two reads are two instructions, in program order.
/// The interpreter's cycles are the ops the task has run.
pub(super) const CLOCK64: PrimDef = PrimDef {
    name: "clock64",
    signature: PrimSignature::new(&[], &[], 1),
    surface: Surface::generic(&[], |_| Ok(vec![Type::scalar(ScalarType::I64)])),
    effects: Effects {
        volatile: true,
        ..Effects::PURE
    },
    rule: |t| match t.results {
        [r] if **r == Type::scalar(ScalarType::I64) => Ok(()),
        _ => Err("`clock64` gives one i64 scalar".into()),
    },
    protocol: Protocol::KEPT,
    lowering: Lowering::Asm {
        asm: "mov.u64 $0, %clock64;",
        result: "i64",
        constraints: "=l,~{memory}",
    },
    interp: Interp::Custom,
};

/// `gdc_wait()` (Triton's name; PTX `griddepcontrol.wait`): in a kernel
/// launched as a programmatic dependent (`launch_pdl = true`), waits until
/// the grids it depends on (the kernel before it on the stream) have
/// completed and their memory is visible; otherwise returns at once, as it
/// always does on the interpreter, which runs one grid at a time. Global
/// accesses after the wait may read what the grids before wrote: none moves
/// above it.
pub(super) const GDC_WAIT: PrimDef = PrimDef {
    name: "gdc_wait",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], no_results),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        writes: MemorySpaces::only(MemorySpace::Global),
        volatile: true,
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    // Between grids, not between this grid's threads.
    protocol: Protocol::Dropped,
    lowering: Lowering::Asm {
        asm: "griddepcontrol.wait;",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Nothing,
};

/// `gdc_launch_dependents()` (`griddepcontrol.launch_dependents`): once
/// every program of this grid has run it (or exited), the next kernel on
/// the stream, if launched with `launch_pdl`, may start. Where it runs
/// decides when the next kernel starts: kept in place.
pub(super) const GDC_LAUNCH_DEPENDENTS: PrimDef = PrimDef {
    name: "gdc_launch_dependents",
    signature: PrimSignature::NONE,
    surface: Surface::generic(&[], no_results),
    effects: Effects {
        volatile: true,
        ..Effects::PURE
    },
    rule: |_| Ok(()),
    // Between grids, not between this grid's threads.
    protocol: Protocol::Dropped,
    lowering: Lowering::Asm {
        asm: "griddepcontrol.launch_dependents;",
        result: "void",
        constraints: "~{memory}",
    },
    interp: Interp::Nothing,
};
