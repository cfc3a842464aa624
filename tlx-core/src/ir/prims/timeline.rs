//! GPU timelines (`TLX_TRACE`): the event records a kernel built with
//! timelines writes, put in by `instrument::timeline`, never by a user.

use super::rules::scalar_of;
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::Effects;
use crate::ir::types::{ScalarType, Type};

/// `trace_event(buffer, capacity, site, wide)`: the first thread of the
/// context that runs it appends one record, event `site` at `%clock` (and,
/// `wide` = 1, at `%globaltimer` too), to its warp's track of `buffer` (see
/// `instrument::timeline` for the layout), unless the track's `capacity`
/// words are full (then it only counts the event). With a `capacity` of 0
/// it writes nothing. The interpreter keeps timelines of its own and does
/// nothing here.
pub(super) const TRACE_EVENT: PrimDef = PrimDef {
    name: "trace_event",
    signature: PrimSignature::new(&["buffer", "capacity"], &["site", "wide"], 0),
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
    if !(0..0xffff).contains(&t.imm("site")?) {
        return Err(format!("site {} is not in 0..2^16 - 1", t.imm("site")?));
    }
    match t.imm("wide")? {
        0 | 1 => Ok(()),
        wide => Err(format!("`wide` is {wide}, not 0 or 1")),
    }
}
