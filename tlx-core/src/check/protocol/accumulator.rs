//! `async_dot` results in flight: the value `async_dot` returns is complete
//! only after an `async_dot_wait` that covers it (`pendings = 0`, or one
//! that leaves fewer groups in flight than were issued after it). Until
//! then it may only feed another `async_dot` as its accumulator, travel
//! through a loop or branch, or be waited for: any other use reads
//! registers the tensor cores are still writing. Tracked statically, to a
//! fixed point over loop-carried values; a wait with `pendings > 0` leaves
//! its result in flight unless at least `pendings` later `async_dot`s were
//! surely issued after it (groups retire in order): those of the wait's
//! block and, when the value comes from an enclosing block, those of every
//! block in between on the way to the wait; for a value carried around a
//! `for` loop, those after it in the previous iteration.

use std::collections::HashMap;

use crate::ir::{Block, Kernel, Op, OpKind, Prim, SrcLoc, ValueId};

use super::{Finding, Rule};

/// Every use of an `async_dot` result before its wait.
pub(crate) fn check(kernel: &Kernel) -> Vec<Finding> {
    let mut flight = InFlight::default();
    loop {
        flight.changed = false;
        flight.block(&kernel.body, None, &mut Vec::new());
        if !flight.changed {
            break;
        }
    }
    let mut findings = Vec::new();
    flight.uses(&kernel.body, &mut findings);
    findings
}

/// A block that holds the one being walked, and the index of its op that
/// holds it (a loop, a branch).
type Enclosing<'k> = (&'k Block, usize);

/// Values in flight, each with the `async_dot` it comes from.
#[derive(Default)]
struct InFlight {
    origin: HashMap<ValueId, SrcLoc>,
    changed: bool,
}

impl InFlight {
    fn mark(&mut self, v: ValueId, origin: SrcLoc) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.origin.entry(v) {
            slot.insert(origin);
            self.changed = true;
        }
    }

    /// `inits`: the loop's initial values, when `block` is a `for` body;
    /// `enclosing`: the blocks around `block`, outermost first.
    fn block<'k>(
        &mut self,
        block: &'k Block,
        inits: Option<&[ValueId]>,
        enclosing: &mut Vec<Enclosing<'k>>,
    ) {
        for (at, op) in block.ops.iter().enumerate() {
            enclosing.push((block, at));
            match &op.kind {
                OpKind::For { inits, body, .. } => self.block(body, Some(inits), enclosing),
                kind => {
                    for nested in kind.blocks() {
                        self.block(nested, None, enclosing);
                    }
                }
            }
            enclosing.pop();
            match &op.kind {
                OpKind::Prim {
                    prim: Prim::AsyncDot,
                    ..
                } => {
                    if let Some(&r) = op.results.first() {
                        self.mark(r, op.loc);
                    }
                }
                OpKind::Prim {
                    prim: Prim::AsyncDotWait,
                    args,
                    imms,
                } if imms.first().is_some_and(|&p| p > 0) => {
                    let pendings = imms[0] as usize;
                    let covered = args.first().is_some_and(|&a| {
                        let carried = inits.and_then(|inits| carried_from(block, inits, a));
                        let after = match carried {
                            Some((init, yielded)) => {
                                // The first iteration waits for the init,
                                // later ones for the previous yield.
                                let first = if self.origin.contains_key(&init) {
                                    issued_after(block, None, at, &[])
                                } else {
                                    usize::MAX
                                };
                                first.min(issued_after(block, Some((yielded, true)), at, &[]))
                            }
                            None => issued_after(block, Some((a, false)), at, enclosing),
                        };
                        after >= pendings
                    });
                    let origin = args.first().and_then(|a| self.origin.get(a).copied());
                    if let (Some(origin), Some(&r), false) = (origin, op.results.first(), covered) {
                        self.mark(r, origin);
                    }
                }
                OpKind::For { .. } | OpKind::While { .. } | OpKind::If { .. } => {
                    for group in op.kind.carried_values(&op.results) {
                        let origin = group.iter().find_map(|v| self.origin.get(v).copied());
                        if let Some(origin) = origin {
                            for v in group {
                                self.mark(v, origin);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The uses that read an in-flight value.
    fn uses(&self, block: &Block, findings: &mut Vec<Finding>) {
        for op in &block.ops {
            for nested in op.kind.blocks() {
                self.uses(nested, findings);
            }
            for (i, v) in op.kind.operands().into_iter().enumerate() {
                let Some(&origin) = self.origin.get(&v) else {
                    continue;
                };
                if allowed(op, i) {
                    continue;
                }
                findings.push(Finding {
                    rule: Rule::AccumulatorBeforeWait,
                    at: op.loc,
                    message: format!(
                        "this reads the result of the `async_dot` at line {} before an \
                         `async_dot_wait` completes it: the tensor cores may still be writing it",
                        origin.line
                    ),
                    hint: "wait first: `let acc = async_dot_wait(0, acc);` (pendings 0 covers \
                           every `async_dot` issued before it), then use `acc`"
                        .to_owned(),
                });
                break;
            }
        }
    }
}

/// How many `async_dot`s `block` surely issues after the one that gives
/// `value` and before op `at`: those at the block's own level (nested loops
/// and branches may add more, never fewer). A wait leaving fewer than that
/// in flight covers `value` (FA's `S_j` issued before `O += P V`, then
/// `async_dot_wait(1, s)`). When `value` comes from one of the `enclosing`
/// blocks (outermost first), those each block between it and `block`
/// issues before the op that leads on to the wait count too (a branch that
/// issues one more product and then waits for the older one). Zero when
/// `value` comes from no `async_dot` there. With `yielded`, `value` is what
/// a `for` body yields for the carried argument waited for: the
/// `async_dot` after it to the end of the body (the previous iteration's)
/// count too. `None` counts every one before `at`.
fn issued_after(
    block: &Block,
    value: Option<(ValueId, bool)>,
    at: usize,
    enclosing: &[Enclosing<'_>],
) -> usize {
    let is_async_dot = |op: &Op| {
        matches!(
            op.kind,
            OpKind::Prim {
                prim: Prim::AsyncDot,
                ..
            }
        )
    };
    let count = |ops: &[Op]| ops.iter().filter(|op| is_async_dot(op)).count();
    let before = &block.ops[..at.min(block.ops.len())];
    let Some((value, yielded)) = value else {
        return count(before);
    };
    let origin = |ops: &[Op]| {
        ops.iter()
            .rposition(|op| is_async_dot(op) && op.results.first() == Some(&value))
    };
    if !yielded {
        if let Some(d) = origin(before) {
            return count(&before[d + 1..]);
        }
        let mut issued = count(before);
        for &(outer, holder) in enclosing.iter().rev() {
            let before = &outer.ops[..holder];
            match origin(before) {
                Some(d) => return issued + count(&before[d + 1..]),
                None => issued += count(before),
            }
        }
        return 0;
    }
    // Issued in the previous iteration, before everything of this one.
    origin(&block.ops).map_or(0, |d| count(&block.ops[d + 1..]) + count(before))
}

/// For a carried argument `arg` of a `for` body (the counter is argument
/// 0): its initial value and the value the body yields for it.
fn carried_from(body: &Block, inits: &[ValueId], arg: ValueId) -> Option<(ValueId, ValueId)> {
    let i = body.args.iter().skip(1).position(|&a| a == arg)?;
    let Some(OpKind::Yield(values)) = body.ops.last().map(|op| &op.kind) else {
        return None;
    };
    Some((*inits.get(i)?, *values.get(i)?))
}

/// Uses that leave a value in flight: the accumulator of the next
/// `async_dot`, a wait, a loop's init, a yield.
fn allowed(op: &Op, operand: usize) -> bool {
    match &op.kind {
        OpKind::Prim {
            prim: Prim::AsyncDot,
            ..
        } => operand == 2,
        OpKind::Prim {
            prim: Prim::AsyncDotWait,
            ..
        } => true,
        OpKind::Yield(_) => true,
        // Operands 0..3 of `for` are its bounds; the rest are inits.
        OpKind::For { .. } => operand >= 3,
        OpKind::While { .. } => true,
        _ => false,
    }
}
