//! Software pipelining's decisions for one `for` loop (`num_stages`), made
//! before its code is emitted: which loads of the body can be issued ahead
//! (their pointer and mask, or descriptor offsets, depend only on the
//! induction variable and on values from before the loop), which of them
//! feed a wgmma `dot` and so get a ring in the swizzled placement the
//! instruction reads, how many iterations ahead the copies run, and which
//! `dot` groups may stay in flight into the next iteration. `pipeline.rs`
//! emits what the [`LoopPlan`] says.

use super::axis::AxisInfo;
use super::mma::WgmmaPlan;
use super::storage::BlockPlacement;
use super::{count_uses, KernelFacts};
use crate::error::Result;
use crate::layout::SharedLayout;
use crate::scalar::mem_bytes;
use std::collections::{HashMap, HashSet};
use tlx_core::ir::{
    Arch, Block, CacheModifier, Kernel, Literal, Op, OpKind, Prim, TensorDescriptorType, Type,
    ValueId,
};

/// A load the pipeliner can take, with the body ops its address and mask need.
pub(crate) struct Candidate<'k> {
    pub(crate) load: &'k Op,
    pub(crate) slice: Vec<&'k Op>,
}

/// What a loop's pipeline is to be.
pub(crate) struct LoopPlan<'k> {
    pub(crate) stages: usize,
    /// Iterations the copies run ahead: `stages - 1`, or `stages - 2` when
    /// some ring is read by the whole CTA (wgmma operands: one group of
    /// instructions stays in flight and must have read its slot).
    pub(crate) distance: usize,
    pub(crate) candidates: Vec<Candidate<'k>>,
    /// Placements of the loads that feed wgmma operands, by load result.
    pub(crate) operand_placements: HashMap<ValueId, SharedLayout>,
    /// `dot` results whose wgmma group may stay in flight until the next
    /// iteration (or the loop's end) waits for it: only carried onwards.
    pub(crate) in_flight: Vec<ValueId>,
    /// `dot` operand loads `cp.async` cannot copy, with the contiguous
    /// bytes their addresses give: they stay register loads the `dot`
    /// stages itself (the lowering says so in a note).
    pub(crate) uncopyable: Vec<(&'k Op, usize)>,
}

/// What planning a loop reads beyond its body: the kernel, the facts found
/// before emission, the values defined before the loop, and the warps of
/// the context the loop runs in.
pub(crate) struct PlanInputs<'a, 'k> {
    pub(crate) kernel: &'k Kernel,
    pub(crate) facts: &'a KernelFacts,
    pub(crate) defined_before: &'a HashMap<ValueId, &'k Op>,
    pub(crate) arch: Arch,
    pub(crate) num_warps: u32,
}

/// The plan for the loop whose body is `body`, or `None` when it is not
/// pipelined (fewer than two stages, or no load it can issue ahead).
pub(crate) fn plan_loop<'k>(
    inputs: &PlanInputs<'_, 'k>,
    body: &'k Block,
) -> Result<Option<LoopPlan<'k>>> {
    let stages = inputs.kernel.options.num_stages as usize;
    let Some(&iv) = body.args.first() else {
        return Ok(None);
    };
    let candidates = candidates(body, iv);
    if stages < 2 || candidates.is_empty() {
        return Ok(None);
    }
    let mut plan = LoopPlan {
        stages,
        distance: stages - 1,
        candidates,
        operand_placements: HashMap::new(),
        in_flight: Vec::new(),
        uncopyable: Vec::new(),
    };
    // Operand rings need a stage for the wgmma group in flight.
    if stages >= 3 {
        inputs.place_operands(body, &mut plan)?;
    }
    plan.distance -= usize::from(!plan.operand_placements.is_empty());
    Ok(Some(plan))
}

/// The body ops (in body order) that `roots` depend on, if every one is an
/// address op (pure, with no data moved between threads, so it can be redone
/// ahead of the loop) and no loop-carried value other than the induction variable
/// `iv` is reached; values from outside the loop are free.
fn address_slice<'k>(body: &'k Block, roots: &[ValueId], iv: ValueId) -> Option<Vec<&'k Op>> {
    let producer: HashMap<ValueId, usize> = body
        .ops
        .iter()
        .enumerate()
        .flat_map(|(i, op)| op.results.iter().map(move |r| (*r, i)))
        .collect();
    let carried: HashSet<ValueId> = body.args.iter().copied().filter(|a| *a != iv).collect();
    let mut needed = HashSet::new();
    let mut stack: Vec<ValueId> = roots.to_vec();
    while let Some(v) = stack.pop() {
        if carried.contains(&v) {
            return None;
        }
        let Some(&i) = producer.get(&v) else {
            continue;
        };
        if !needed.insert(i) {
            continue;
        }
        let op = &body.ops[i];
        if !op.kind.effects().is_thread_local_pure() {
            return None;
        }
        stack.extend(op.kind.operands());
    }
    let mut order: Vec<usize> = needed.into_iter().collect();
    order.sort_unstable();
    Some(order.into_iter().map(|i| &body.ops[i]).collect())
}

/// The loads of `body` a pipeline can prefetch: top-level, non-volatile
/// tensor loads whose pointer and mask are address slices, and descriptor
/// loads whose offsets are.
fn candidates<'k>(body: &'k Block, iv: ValueId) -> Vec<Candidate<'k>> {
    body.ops
        .iter()
        .filter_map(|op| {
            let roots: Vec<ValueId> = match &op.kind {
                OpKind::Load {
                    ptr,
                    mask,
                    volatile: false,
                    cache:
                        CacheModifier::None
                        | CacheModifier::Ca
                        | CacheModifier::Cg
                        | CacheModifier::Cs,
                    ..
                } => std::iter::once(*ptr).chain(*mask).collect(),
                OpKind::Prim {
                    prim: Prim::DescriptorLoad,
                    args,
                    ..
                } => args.clone(),
                _ => return None,
            };
            let slice = address_slice(body, &roots, iv)?;
            Some(Candidate { load: op, slice })
        })
        .collect()
}

impl<'k> PlanInputs<'_, 'k> {
    /// Finds the loads of `body` whose only use is as an operand of one
    /// wgmma `dot` (whose other operand is such a load too) and gives each
    /// the placement the operand takes. Masked-off elements must read as
    /// zero, since the copies zero-fill them and nothing replaces them on
    /// the way to wgmma.
    fn place_operands(&self, body: &'k Block, plan: &mut LoopPlan<'k>) -> Result<()> {
        let ty = |v: ValueId| self.kernel.type_of(v);
        let mut uses: HashMap<ValueId, usize> = HashMap::new();
        count_uses(body, &mut uses);
        let in_body: HashMap<ValueId, &Op> = body
            .ops
            .iter()
            .flat_map(|op| op.results.iter().map(move |r| (*r, op)))
            .collect();
        let zero_filled = |load: &Op| match &load.kind {
            OpKind::Load { other: None, .. } | OpKind::Prim { .. } => true,
            OpKind::Load { other: Some(o), .. } => self.is_zero_constant(*o, &in_body),
            _ => false,
        };
        let candidates = &plan.candidates;
        let load_of = |v: ValueId| candidates.iter().find(|c| c.load.results[0] == v);
        let taken = |v: ValueId| {
            load_of(v)
                .filter(|c| uses.get(&v) == Some(&1) && zero_filled(c.load))
                .is_some()
        };
        for op in &body.ops {
            let OpKind::Dot { a, b, acc, .. } = &op.kind else {
                continue;
            };
            let (ta, tb, tc) = (ty(*a), ty(*b), ty(*acc));
            let (Some(sa), Some(sb), Some(sc)) =
                (ta.elem().scalar(), tb.elem().scalar(), tc.elem().scalar())
            else {
                continue;
            };
            if ta.rank() != 2 || tb.rank() != 2 || !taken(*a) || !taken(*b) {
                continue;
            }
            // An operand `cp.async` cannot copy stays a register load that
            // the `dot` stages itself: measured 1.45x faster than filling
            // its slots element by element (docs/bench-log/2026-12.md, `dot_staging`).
            let narrow: Vec<(&'k Op, usize)> = [*a, *b]
                .iter()
                .filter_map(|v| {
                    let load = load_of(*v)?.load;
                    let run = self.contiguous_bytes(load)?;
                    (!is_copy_size(run.min(16))).then_some((load, run))
                })
                .collect();
            if !narrow.is_empty() {
                plan.uncopyable.extend(narrow);
                continue;
            }
            let shape = (ta.shape()[0], tb.shape()[1], ta.shape()[1]);
            let Some(mma) = WgmmaPlan::new(self.arch, (sa, sb, sc), shape, self.num_warps) else {
                continue;
            };
            // TMA lands a descriptor's block in its own placement only.
            let lands_as = |v: ValueId, wanted: &SharedLayout| -> Result<bool> {
                match load_of(v).and_then(|c| loaded_descriptor(c.load)) {
                    Some(desc) => Ok(BlockPlacement::of(descriptor_type(self.kernel, desc)?)?
                        .placement
                        == *wanted),
                    None => Ok(true),
                }
            };
            if !lands_as(*a, &mma.a)? || !lands_as(*b, &mma.b)? {
                continue;
            }
            plan.operand_placements.insert(*a, mma.a.clone());
            plan.operand_placements.insert(*b, mma.b.clone());
            // A result only carried to the next iteration may stay in flight.
            let result = op.results[0];
            if uses.get(&result) == Some(&1) && yielded(body).contains(&result) {
                plan.in_flight.push(result);
            }
        }
        Ok(())
    }

    /// True if `v` is a constant zero (of any numeric type), defined in the
    /// loop body (`in_body`) or before the loop.
    fn is_zero_constant(&self, v: ValueId, in_body: &HashMap<ValueId, &Op>) -> bool {
        let mut v = v;
        loop {
            let def = in_body
                .get(&v)
                .copied()
                .or_else(|| self.defined_before.get(&v).copied());
            match def.map(|op| &op.kind) {
                Some(OpKind::Splat(s) | OpKind::Broadcast(s) | OpKind::Cast(s)) => v = *s,
                Some(OpKind::Constant(Literal::Int(0))) => return true,
                Some(OpKind::Constant(Literal::Float(x))) => return *x == 0.0,
                _ => return false,
            }
        }
    }

    /// The bytes `load`'s addresses are known to run contiguously along
    /// the last dimension (`None` for a descriptor load).
    fn contiguous_bytes(&self, load: &Op) -> Option<usize> {
        let OpKind::Load { ptr, .. } = &load.kind else {
            return None;
        };
        let contiguity = self
            .facts
            .axis
            .get(ptr)
            .map_or(1, |a: &AxisInfo| a.contiguity);
        Some(contiguity * mem_bytes(self.kernel.type_of(load.results[0]).elem()))
    }
}

/// The descriptor type of `v` (the lowering asks through
/// `Lowerer::descriptor_type`).
pub(crate) fn descriptor_type(kernel: &Kernel, v: ValueId) -> Result<&TensorDescriptorType> {
    match kernel.type_of(v) {
        Type::TensorDescriptor(d) => Ok(d),
        other => Err(crate::error::malformed(format!(
            "{v} is {other}, not a tensor descriptor"
        ))),
    }
}

/// Whether one `cp.async` can copy `bytes`.
pub(crate) fn is_copy_size(bytes: usize) -> bool {
    matches!(bytes, 4 | 8 | 16)
}

/// The values `body` yields to the next iteration.
pub(crate) fn yielded(body: &Block) -> Vec<ValueId> {
    match body.ops.last().map(|op| &op.kind) {
        Some(OpKind::Yield(values)) => values.clone(),
        _ => Vec::new(),
    }
}

/// The descriptor `load` reads, if it is a descriptor load.
pub(crate) fn loaded_descriptor(load: &Op) -> Option<ValueId> {
    match &load.kind {
        OpKind::Prim {
            prim: Prim::DescriptorLoad,
            args,
            ..
        } => args.first().copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[64, 64] x [64, 64]` K loop in bf16 whose operand loads have
    /// masks (`other` as given), with `num_stages = stages`.
    fn matmul(stages: u32, other: &str) -> Kernel {
        let source = format!(
            r#"
#[tlx::kernel(num_warps = 4, num_stages = {stages})]
fn mm(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, k: i32) {{
    let rows = arange(0, 64);
    let mut acc = zeros([64, 64], f32);
    for k0 in (0..k).step_by(64) {{
        let ks = k0 + arange(0, 64);
        let ta = load(a + rows.expand_dims(1) * k + ks.expand_dims(0), mask = ks.expand_dims(0) < k, other = {other});
        let tb = load(b + ks.expand_dims(1) * 64 + rows.expand_dims(0), mask = ks.expand_dims(1) < k, other = {other});
        acc = dot(ta, tb, acc);
    }}
    store(c + rows.expand_dims(1) * 64 + rows.expand_dims(0), acc);
}}
"#
        );
        let mut kernels = tlx_frontend::compile_str(&source)
            .unwrap_or_else(|e| panic!("the test kernel lowers:\n{e}"));
        kernels.remove(0)
    }

    fn loop_body(kernel: &Kernel) -> &Block {
        kernel
            .body
            .ops
            .iter()
            .find_map(|op| match &op.kind {
                OpKind::For { body, .. } => Some(body),
                _ => None,
            })
            .expect("the kernel has a loop")
    }

    fn plan_of(kernel: &Kernel) -> Option<LoopPlan<'_>> {
        let facts = KernelFacts::analyze(kernel).expect("the facts");
        let defined_before = kernel
            .body
            .ops
            .iter()
            .flat_map(|op| op.results.iter().map(move |r| (*r, op)))
            .collect();
        let inputs = PlanInputs {
            kernel,
            facts: &facts,
            defined_before: &defined_before,
            arch: Arch::Sm90a,
            num_warps: 4,
        };
        plan_loop(&inputs, loop_body(kernel)).expect("planning succeeds")
    }

    #[test]
    fn wgmma_operands_get_rings_and_the_dot_stays_in_flight() {
        let kernel = matmul(3, "0.0");
        let plan = plan_of(&kernel).expect("the loop is pipelined");
        assert_eq!(plan.candidates.len(), 2);
        assert_eq!(plan.operand_placements.len(), 2);
        // One stage goes to the wgmma group in flight.
        assert_eq!((plan.stages, plan.distance), (3, 1));
        assert_eq!(plan.in_flight.len(), 1);
        assert!(plan.uncopyable.is_empty());
    }

    #[test]
    fn two_stages_prefetch_into_registers_only() {
        let kernel = matmul(2, "0.0");
        let plan = plan_of(&kernel).expect("the loop is pipelined");
        assert!(plan.operand_placements.is_empty() && plan.in_flight.is_empty());
        assert_eq!(plan.distance, 1);
    }

    #[test]
    fn operands_padded_with_nonzero_are_not_multiplied_in_place() {
        // The copies zero-fill masked-off elements; a 1.0 must be put back
        // in registers, so the `dot` cannot read the slot as it lies.
        let kernel = matmul(3, "1.0");
        let plan = plan_of(&kernel).expect("the loop is pipelined");
        assert!(plan.operand_placements.is_empty());
        assert_eq!(plan.distance, 2);
    }

    #[test]
    fn one_stage_is_no_pipeline() {
        assert!(plan_of(&matmul(1, "0.0")).is_none());
    }
}
