//! Cluster synchronization: every program of a cluster must reach each
//! `cluster_barrier()` together, or the ones that arrived wait forever (and
//! on the GPU, hang). So a barrier may not sit under control flow whose
//! outcome differs between the programs of one cluster: an `if` or loop that
//! depends on `program_id` along a clustered axis, on `cluster_cta_rank()`,
//! or on memory. An early `return` counts too: the frontend lowers it to a
//! flag guarding the rest of the kernel, which this analysis sees as an `if`.
//!
//! The analysis marks the values that may differ within a cluster
//! ("varying") to a fixed point over loops, then looks for barriers under
//! varying control. `program_id(axis) / c`, with `c` a multiple of the
//! cluster's size along `axis`, is the cluster's own index and so uniform.

use crate::ir::{BinaryOp, Block, Kernel, Literal, Op, OpKind, SrcLoc, ValueId};
use std::collections::{HashMap, HashSet};

/// A `cluster_barrier()` that not every program of a cluster may reach.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{line}:{col}: `cluster_barrier()` may be reached by some programs of a cluster and not \
     others: an enclosing {construct} (or an earlier `return`) depends on the program",
    line = barrier.line,
    col = barrier.col
)]
pub struct ClusterSyncError {
    /// The barrier.
    pub barrier: SrcLoc,
    /// The innermost control-flow op that makes it conditional.
    pub control: SrcLoc,
    /// `if`, `for` loop or `while` loop.
    pub construct: &'static str,
}

/// Checks that every `cluster_barrier()` of `kernel` is reached by all the
/// programs of a cluster alike.
pub fn check_cluster_sync(kernel: &Kernel) -> Result<(), ClusterSyncError> {
    let mut defs = HashMap::new();
    collect_defs(&kernel.body, &mut defs);
    let mut analysis = Uniformity {
        cluster: kernel.options.cluster,
        defs,
        varying: HashSet::new(),
    };
    loop {
        let before = analysis.varying.len();
        analysis.mark(&kernel.body);
        if analysis.varying.len() == before {
            break;
        }
    }
    analysis.find_barriers(&kernel.body, None)
}

fn collect_defs<'k>(block: &'k Block, defs: &mut HashMap<ValueId, &'k Op>) {
    for op in &block.ops {
        for r in &op.results {
            defs.insert(*r, op);
        }
        for inner in op.kind.blocks() {
            collect_defs(inner, defs);
        }
    }
}

/// The values `Yield` or `Condition` ends `block` with.
fn terminator(block: &Block) -> &[ValueId] {
    match block.ops.last().map(|op| &op.kind) {
        Some(OpKind::Yield(values)) => values,
        Some(OpKind::Condition(v)) => std::slice::from_ref(v),
        _ => &[],
    }
}

struct Uniformity<'k> {
    cluster: [u32; 3],
    defs: HashMap<ValueId, &'k Op>,
    varying: HashSet<ValueId>,
}

impl<'k> Uniformity<'k> {
    fn is_varying(&self, v: &ValueId) -> bool {
        self.varying.contains(v)
    }

    fn any_varying(&self, values: &[ValueId]) -> bool {
        values.iter().any(|v| self.is_varying(v))
    }

    fn set(&mut self, values: &[ValueId], varying: bool) {
        if varying {
            self.varying.extend(values.iter().copied());
        }
    }

    /// `program_id(axis) / c` with `c` a multiple of the cluster along `axis`.
    fn is_cluster_index(&self, lhs: ValueId, rhs: ValueId) -> bool {
        let (Some(l), Some(r)) = (self.defs.get(&lhs), self.defs.get(&rhs)) else {
            return false;
        };
        match (&l.kind, &r.kind) {
            (OpKind::ProgramId { axis }, OpKind::Constant(Literal::Int(c))) => {
                let size = i64::from(self.cluster[usize::from(*axis).min(2)]);
                *c > 0 && c % size == 0
            }
            _ => false,
        }
    }

    /// One pass over `block`, marking what may differ within a cluster.
    fn mark(&mut self, block: &'k Block) {
        for op in &block.ops {
            match &op.kind {
                OpKind::ProgramId { axis } => {
                    let clustered = self.cluster[usize::from(*axis).min(2)] > 1;
                    self.set(&op.results, clustered);
                }
                // What memory holds may differ between the programs.
                kind if matches!(kind, OpKind::ClusterCtaRank)
                    || !kind.effects().reads.is_empty() =>
                {
                    self.set(&op.results, true)
                }
                OpKind::Binary {
                    op: BinaryOp::Div,
                    lhs,
                    rhs,
                } if self.is_cluster_index(*lhs, *rhs) => {}
                OpKind::For {
                    lower,
                    upper,
                    step,
                    inits,
                    body,
                } => {
                    let control = self.any_varying(&[*lower, *upper, *step]);
                    if let Some((iv, carried)) = body.args.split_first() {
                        self.set(std::slice::from_ref(iv), control);
                        self.carry(inits, carried, terminator(body), control);
                    }
                    self.mark(body);
                    let varying: Vec<bool> = (0..op.results.len())
                        .map(|i| {
                            control || body.args.get(i + 1).is_some_and(|a| self.is_varying(a))
                        })
                        .collect();
                    self.set_each(&op.results, &varying);
                }
                OpKind::While { inits, cond, body } => {
                    let control = self.any_varying(terminator(cond));
                    self.carry(inits, &cond.args, terminator(body), control);
                    self.carry(inits, &body.args, terminator(body), control);
                    self.mark(cond);
                    self.mark(body);
                    let varying: Vec<bool> = (0..op.results.len())
                        .map(|i| control || cond.args.get(i).is_some_and(|a| self.is_varying(a)))
                        .collect();
                    self.set_each(&op.results, &varying);
                }
                OpKind::If {
                    cond,
                    then_block,
                    else_block,
                } => {
                    self.mark(then_block);
                    self.mark(else_block);
                    let control = self.is_varying(cond);
                    let (then_values, else_values) =
                        (terminator(then_block), terminator(else_block));
                    let varying: Vec<bool> = (0..op.results.len())
                        .map(|i| {
                            control
                                || then_values.get(i).is_some_and(|v| self.is_varying(v))
                                || else_values.get(i).is_some_and(|v| self.is_varying(v))
                        })
                        .collect();
                    self.set_each(&op.results, &varying);
                }
                OpKind::AsyncTasks { tasks } => {
                    for task in tasks {
                        self.mark(&task.body);
                    }
                }
                kind => {
                    let varying = self.any_varying(&kind.operands());
                    self.set(&op.results, varying);
                }
            }
        }
    }

    /// Loop-carried block args: varying when their initial or yielded value
    /// is, or when the loop's trip count is.
    fn carry(&mut self, inits: &[ValueId], args: &[ValueId], yields: &[ValueId], control: bool) {
        for (i, arg) in args.iter().enumerate() {
            let varying = control
                || inits.get(i).is_some_and(|v| self.is_varying(v))
                || yields.get(i).is_some_and(|v| self.is_varying(v));
            self.set(std::slice::from_ref(arg), varying);
        }
    }

    fn set_each(&mut self, values: &[ValueId], varying: &[bool]) {
        for (v, &is) in values.iter().zip(varying) {
            self.set(std::slice::from_ref(v), is);
        }
    }

    /// The first barrier under varying control; `under` is the innermost
    /// varying control-flow op enclosing `block`.
    fn find_barriers(
        &self,
        block: &Block,
        under: Option<(SrcLoc, &'static str)>,
    ) -> Result<(), ClusterSyncError> {
        for op in &block.ops {
            let (control, blocks): (bool, Vec<&Block>) = match &op.kind {
                OpKind::ClusterBarrier => {
                    if let Some((control, construct)) = under {
                        return Err(ClusterSyncError {
                            barrier: op.loc,
                            control,
                            construct,
                        });
                    }
                    continue;
                }
                OpKind::If {
                    cond,
                    then_block,
                    else_block,
                } => (self.is_varying(cond), vec![then_block, else_block]),
                OpKind::For {
                    lower,
                    upper,
                    step,
                    body,
                    ..
                } => (self.any_varying(&[*lower, *upper, *step]), vec![body]),
                OpKind::While { cond, body, .. } => {
                    (self.any_varying(terminator(cond)), vec![cond, body])
                }
                // Every program runs every task: the region itself is uniform.
                OpKind::AsyncTasks { tasks } => {
                    for task in tasks {
                        self.find_barriers(&task.body, under)?;
                    }
                    continue;
                }
                _ => continue,
            };
            let construct = match op.kind {
                OpKind::If { .. } => "`if`",
                OpKind::For { .. } => "`for` loop",
                _ => "`while` loop",
            };
            let inner = if control {
                Some((op.loc, construct))
            } else {
                under
            };
            for b in blocks {
                self.find_barriers(b, inner)?;
            }
        }
        Ok(())
    }
}
