//! GPU timelines (`TLX_TRACE`): the event records a kernel built with
//! timelines writes, put in by `instrument::timeline`, never by a user.

use super::rules::scalar_of;
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::Effects;
use crate::ir::types::{ScalarType, Type};

/// `trace_event(buffer, capacity, site)`: the first thread of the context
/// that runs it appends one record, event `site` at `%globaltimer`, to its
/// warp's track of `buffer` (see `instrument::timeline` for the layout),
/// unless `capacity` records are there already (then it only counts the
/// event). With a `capacity` of 0 it writes nothing. The interpreter keeps
/// timelines of its own and does nothing here.
pub(super) const TRACE_EVENT: PrimDef = PrimDef {
    name: "trace_event",
    signature: PrimSignature::new(&["buffer", "capacity"], &["site"], 0),
    // Not a call of the kernel language: the instrumentation adds it.
    surface: Surface::custom(&[], 0),
    // What it writes, only the host reads.
    effects: Effects {
        host: true,
        volatile: true,
        ..Effects::PURE
    },
    rule: trace_event,
    protocol: Protocol::Dropped,
    lowering: Lowering::Custom,
    interp: Interp::Nothing,
};

fn trace_event(t: &Typing) -> Result<(), String> {
    let buffer = t.operand("buffer")?;
    let words = Type::ptr(ScalarType::I64);
    if *buffer != words {
        return Err(format!("the buffer is {buffer}, expected {words}"));
    }
    scalar_of(t.operand("capacity")?, ScalarType::I32, "the capacity")?;
    match t.imm("site")? {
        0..=0xffff => Ok(()),
        site => Err(format!("site {site} is not in 0..2^16")),
    }
}
