//! The synchronization skeleton of a kernel: the ops a skeleton run of the
//! interpreter executes. Every TLX primitive, `async_tasks` and
//! `cluster_barrier` belongs to it, with the values they need to act:
//! barriers, buffers and views, phases, predicates, byte counts, named
//! barrier ids, slice offsets, and the loop bounds, branch conditions and
//! loop-carried values of the control flow around them (a phase counter
//! carried through a loop, `k / STAGES & 1`, the persistent tile loop).
//! Data stays out: register tiles (values, pointers, accumulators), TMA
//! coordinates and what a descriptor made on the device holds, which decide
//! what a copy moves but not when it completes, and Triton's block-level
//! descriptor loads and stores, which complete within the op.
//! What is left is a backward slice, computed to a fixed point because
//! loop-carried values feed themselves.

use std::collections::HashSet;

use crate::ir::{Block, Kernel, Op, OpId, OpKind, Protocol, Type, ValueId};

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
                // What a primitive's definition says the skeleton keeps: e.g.
                // a block-level descriptor load completes within the op, and
                // what a descriptor holds decides what a copy moves, not when.
                OpKind::Prim {
                    prim, args, imms, ..
                } => match prim.def().protocol {
                    Protocol::Dropped => false,
                    Protocol::IfResultNeeded => result_needed,
                    Protocol::KeptWhen { immediate, word } => {
                        prim.signature().chosen(immediate, imms) == Some(word)
                    }
                    Protocol::Kept { data } => {
                        // A named data operand, and a variadic one's repeats.
                        let sig = prim.signature();
                        let data_from = |name: &&str| sig.operands.iter().position(|n| n == name);
                        let first_data = data.iter().filter_map(data_from).min();
                        for (i, &arg) in args.iter().enumerate() {
                            let is_data = first_data.is_some_and(|d| i >= d);
                            if !is_data && self.is_protocol_operand(arg) {
                                self.need(arg);
                            }
                        }
                        true
                    }
                },
                OpKind::AsyncTasks { .. } | OpKind::ClusterBarrier => true,
                // Terminators run with their block; their operands are
                // needed as far as the values they carry are.
                OpKind::Yield(_) | OpKind::Condition(_) => false,
                OpKind::For {
                    lower, upper, step, ..
                } if nested || result_needed => {
                    for v in [*lower, *upper, *step] {
                        self.need(v);
                    }
                    self.carried(op);
                    true
                }
                OpKind::While { cond, .. } if nested || result_needed => {
                    if let Some(OpKind::Condition(go_on)) = cond.ops.last().map(|o| &o.kind) {
                        self.need(*go_on);
                    }
                    self.carried(op);
                    true
                }
                OpKind::If { cond, .. } if nested || result_needed => {
                    self.need(*cond);
                    self.carried(op);
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

    /// A carried value is needed at every point if it is at one.
    fn carried(&mut self, op: &Op) {
        for group in op.kind.carried_values(&op.results) {
            if group.iter().any(|&v| self.needed(v)) {
                for v in group {
                    self.need(v);
                }
            }
        }
    }

    /// Whether an operand says when or where a primitive acts rather than
    /// what data it moves: every handle, and scalars.
    fn is_protocol_operand(&self, arg: ValueId) -> bool {
        match self.kernel.types.get(arg.index()) {
            Some(t @ Type::Tensor(_)) => t.is_scalar(),
            Some(_) => true,
            None => false,
        }
    }
}
