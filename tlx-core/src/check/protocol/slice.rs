//! The synchronization skeleton of a kernel: the ops a skeleton run of the
//! interpreter executes. Every TLX primitive, `async_tasks` and
//! `cluster_barrier` belongs to it, with the values they need to act:
//! barriers, buffers and views, phases, predicates, byte counts, named
//! barrier ids, slice offsets, and the loop bounds, branch conditions and
//! loop-carried values of the control flow around them (a phase counter
//! carried through a loop, `k / STAGES & 1`, the persistent tile loop).
//! Data stays out: register tiles (values, pointers, accumulators) and TMA
//! coordinates, which decide what a copy moves but not when it completes.
//! What is left is a backward slice, computed to a fixed point because
//! loop-carried values feed themselves.

use std::collections::HashSet;

use crate::ir::{Block, Kernel, OpId, OpKind, Prim, Type, ValueId};

/// The ops to execute and the values they need.
#[derive(Debug, Default)]
pub(crate) struct Skeleton {
    pub(crate) keep: HashSet<OpId>,
    pub(crate) needed: HashSet<ValueId>,
}

impl Skeleton {
    /// Whether the kernel synchronizes at all (else there is nothing to check).
    pub(crate) fn is_empty(&self) -> bool {
        self.keep.is_empty()
    }
}

/// The skeleton of `kernel`.
pub(crate) fn skeleton(kernel: &Kernel) -> Skeleton {
    let mut slice = Slicer {
        kernel,
        skeleton: Skeleton::default(),
        changed: true,
    };
    while slice.changed {
        slice.changed = false;
        slice.block(&kernel.body);
    }
    slice.skeleton
}

struct Slicer<'k> {
    kernel: &'k Kernel,
    skeleton: Skeleton,
    changed: bool,
}

impl Slicer<'_> {
    fn need(&mut self, v: ValueId) {
        self.changed |= self.skeleton.needed.insert(v);
    }

    fn needed(&self, v: ValueId) -> bool {
        self.skeleton.needed.contains(&v)
    }

    fn keep(&mut self, op: OpId) {
        self.changed |= self.skeleton.keep.insert(op);
    }

    /// Walks `block`; whether it keeps any op.
    fn block(&mut self, block: &Block) -> bool {
        let mut any = false;
        for op in &block.ops {
            let nested = op
                .kind
                .blocks()
                .into_iter()
                .fold(false, |any, b| self.block(b) | any);
            let result_needed = op.results.iter().any(|&r| self.needed(r));
            let keep = match &op.kind {
                OpKind::Prim { prim, args, .. } => {
                    for (i, &arg) in args.iter().enumerate() {
                        if self.is_protocol_operand(*prim, i, arg) {
                            self.need(arg);
                        }
                    }
                    true
                }
                OpKind::AsyncTasks { .. } | OpKind::ClusterBarrier => true,
                // Terminators run with their block; their operands are
                // needed as far as the values they carry are.
                OpKind::Yield(_) | OpKind::Condition(_) => false,
                OpKind::For {
                    lower,
                    upper,
                    step,
                    inits,
                    body,
                } if nested || result_needed => {
                    for v in [*lower, *upper, *step] {
                        self.need(v);
                    }
                    // Carried value i: init i, body argument i + 1 (after the
                    // counter), the body's yield i and result i.
                    let yields = yielded(body);
                    for (i, &init) in inits.iter().enumerate() {
                        let group = [
                            Some(init),
                            body.args.get(i + 1).copied(),
                            yields.get(i).copied(),
                            op.results.get(i).copied(),
                        ];
                        self.carried(&group);
                    }
                    true
                }
                OpKind::While { inits, cond, body } if nested || result_needed => {
                    if let Some(go_on) = condition(cond) {
                        self.need(go_on);
                    }
                    let yields = yielded(body);
                    for (i, &init) in inits.iter().enumerate() {
                        let group = [
                            Some(init),
                            cond.args.get(i).copied(),
                            body.args.get(i).copied(),
                            yields.get(i).copied(),
                            op.results.get(i).copied(),
                        ];
                        self.carried(&group);
                    }
                    true
                }
                OpKind::If {
                    cond,
                    then_block,
                    else_block,
                } if nested || result_needed => {
                    self.need(*cond);
                    let (then_yields, else_yields) = (yielded(then_block), yielded(else_block));
                    for (i, &r) in op.results.iter().enumerate() {
                        let group = [
                            Some(r),
                            then_yields.get(i).copied(),
                            else_yields.get(i).copied(),
                        ];
                        self.carried(&group);
                    }
                    true
                }
                OpKind::For { .. } | OpKind::While { .. } | OpKind::If { .. } => false,
                _ if result_needed => {
                    for v in op.kind.operands() {
                        self.need(v);
                    }
                    true
                }
                _ => false,
            };
            if keep {
                self.keep(op.id);
            }
            any |= keep || nested;
        }
        any
    }

    /// Values that are one carried value at different points: if one is
    /// needed, all are.
    fn carried(&mut self, group: &[Option<ValueId>]) {
        if group.iter().flatten().any(|&v| self.needed(v)) {
            for &v in group.iter().flatten() {
                self.need(v);
            }
        }
    }

    /// Whether operand `index` of `prim` says when or where it acts rather
    /// than what data it moves.
    fn is_protocol_operand(&self, prim: Prim, index: usize, arg: ValueId) -> bool {
        let tma = matches!(
            prim,
            Prim::AsyncDescriptorLoad
                | Prim::AsyncDescriptorLoadMulticast
                | Prim::AsyncDescriptorStore
        );
        if tma && index + 1 >= prim.signature().operands.len() {
            return false;
        }
        match self.kernel.types.get(arg.index()) {
            Some(t @ Type::Tensor(_)) => t.is_scalar(),
            Some(_) => true,
            None => false,
        }
    }
}

fn yielded(block: &Block) -> Vec<ValueId> {
    match block.ops.last().map(|op| &op.kind) {
        Some(OpKind::Yield(values)) => values.clone(),
        _ => Vec::new(),
    }
}

fn condition(block: &Block) -> Option<ValueId> {
    match block.ops.last().map(|op| &op.kind) {
        Some(OpKind::Condition(v)) => Some(*v),
        _ => None,
    }
}
