//! Axis analysis along the last dimension of integer and pointer tensors:
//! how many consecutive elements form an arithmetic run of step 1
//! (contiguity) or are equal (constancy), in aligned groups, and what power
//! of two divides the first element of each group (divisibility: elements
//! for integers, bytes for pointers). Loads and stores use contiguity to
//! decide which register groups may be one vector access, and divisibility
//! to know, without a run-time test, that the vectors are aligned.

use std::collections::HashMap;
use tlx_core::ir::{BinaryOp, Block, CmpPred, Elem, Kernel, OpKind, ScalarType, ValueId};

/// Facts about a value along its last dimension; both are powers of two and hold
/// for every aligned group of that many elements.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AxisInfo {
    pub contiguity: usize,
    pub constancy: usize,
    pub divisibility: usize,
}

const UNKNOWN: AxisInfo = AxisInfo {
    contiguity: 1,
    constancy: 1,
    divisibility: 1,
};

/// The divisibility of zero, and the cap on every other.
const MAX_DIVISIBILITY: usize = 1 << 20;

pub fn analyze(kernel: &Kernel) -> HashMap<ValueId, AxisInfo> {
    let mut facts = HashMap::new();
    walk(kernel, &kernel.body, &mut facts);
    facts
}

fn last_dim(kernel: &Kernel, v: ValueId) -> usize {
    kernel.type_of(v).shape().last().copied().unwrap_or(1)
}

fn walk(kernel: &Kernel, block: &Block, facts: &mut HashMap<ValueId, AxisInfo>) {
    for op in &block.ops {
        // A `for` induction variable is `lower + i * step`.
        if let OpKind::For {
            lower, step, body, ..
        } = &op.kind
        {
            if let Some(iv) = body.args.first() {
                let d = |v: &ValueId| facts.get(v).map_or(1, |a| a.divisibility);
                let info = AxisInfo {
                    divisibility: d(lower).min(d(step)),
                    ..UNKNOWN
                };
                facts.insert(*iv, info);
            }
        }
        for nested in op.kind.blocks() {
            walk(kernel, nested, facts);
        }
        let Some(&result) = op.results.first() else {
            continue;
        };
        let get = |v: &ValueId| facts.get(v).copied().unwrap_or(UNKNOWN);
        let last = last_dim(kernel, result);
        let info = match &op.kind {
            OpKind::Constant(_) | OpKind::Splat(_) => AxisInfo {
                contiguity: 1,
                constancy: last,
                divisibility: 1,
            },
            OpKind::Arange { .. } => AxisInfo {
                contiguity: last,
                constancy: 1,
                divisibility: 1,
            },
            OpKind::Broadcast(v) if last_dim(kernel, *v) != last => AxisInfo {
                contiguity: 1,
                constancy: last,
                divisibility: 1,
            },
            // An address steps by the element size, not by one.
            OpKind::Cast(v) if kernel.type_of(*v).elem().pointee().is_some() => AxisInfo {
                contiguity: 1,
                ..get(v)
            },
            OpKind::Broadcast(v) | OpKind::Cast(v) => get(v),
            OpKind::ExpandDims { value, axis } if *axis < kernel.type_of(*value).rank() => {
                get(value)
            }
            OpKind::AddPtr { ptr, offset } => add_info(get(ptr), get(offset)),
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } => add_info(get(lhs), get(rhs)),
            OpKind::Binary {
                op: BinaryOp::Sub,
                lhs,
                rhs,
            } => {
                let (a, b) = (get(lhs), get(rhs));
                AxisInfo {
                    contiguity: a.contiguity.min(b.constancy),
                    constancy: a.constancy.min(b.constancy),
                    divisibility: 1,
                }
            }
            OpKind::Binary { lhs, rhs, .. } => AxisInfo {
                contiguity: 1,
                constancy: get(lhs).constancy.min(get(rhs).constancy),
                divisibility: 1,
            },
            _ => UNKNOWN,
        };
        let divisibility = divisibility(kernel, &op.kind, facts, info.contiguity);
        facts.insert(
            result,
            AxisInfo {
                divisibility,
                ..info
            },
        );
    }
}

/// The largest power of two dividing `v` (capped), for literals and starts.
fn pow2_factor(v: i64) -> usize {
    if v == 0 {
        MAX_DIVISIBILITY
    } else {
        (1usize << v.trailing_zeros().min(20)).min(MAX_DIVISIBILITY)
    }
}

/// The divisibility of a value re-grouped by `contiguity`: a group start inside
/// one of its old, longer groups is only as divisible as the new group length.
fn regrouped(info: AxisInfo, contiguity: usize, unit: usize) -> usize {
    if info.contiguity > contiguity {
        info.divisibility.min(contiguity * unit)
    } else {
        info.divisibility
    }
}

/// What divides the first element of every group of `contiguity` elements of
/// the result of `kind`.
fn divisibility(
    kernel: &Kernel,
    kind: &OpKind,
    facts: &HashMap<ValueId, AxisInfo>,
    contiguity: usize,
) -> usize {
    let get = |v: &ValueId| facts.get(v).copied().unwrap_or(UNKNOWN);
    let int = |v: &ValueId| regrouped(get(v), contiguity, 1);
    match kind {
        OpKind::Constant(tlx_core::ir::Literal::Int(v)) => pow2_factor(*v),
        OpKind::Arange { start, .. } => pow2_factor(*start),
        OpKind::Splat(v) | OpKind::Broadcast(v) | OpKind::Cast(v)
            if kernel.type_of(*v).elem().is_integral() =>
        {
            get(v).divisibility
        }
        OpKind::ExpandDims { value, .. } => int(value),
        OpKind::MultipleOf { value, factor } => get(value).divisibility.max(*factor as usize),
        OpKind::Binary {
            op: BinaryOp::Add | BinaryOp::Sub,
            lhs,
            rhs,
        } => int(lhs).min(int(rhs)),
        OpKind::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } => int(lhs).saturating_mul(int(rhs)).min(MAX_DIVISIBILITY),
        OpKind::AddPtr { ptr, offset } => {
            let bytes = kernel
                .type_of(*ptr)
                .elem()
                .pointee()
                .map_or(1, |s| s.size_bytes());
            let base = regrouped(get(ptr), contiguity, bytes);
            base.min(int(offset).saturating_mul(bytes))
        }
        _ => 1,
    }
}

/// How a boolean mask behaves inside every aligned group of `n` elements along
/// the last dimension, which decides how cheaply a vector access can test that
/// the group's mask is uniform.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MaskRun {
    /// Equal across the group: nothing to test.
    Uniform,
    /// Monotone across the group (false then true, or true then false): uniform
    /// exactly when its first and last elements agree.
    Monotone { rising: bool },
    /// Anything else: every element has to be compared with the first.
    General,
}

/// Classifies mask `v` of `kernel` over aligned groups of `n`; `def` gives the
/// pure op defining a value.
pub fn mask_run<'k>(
    kernel: &Kernel,
    facts: &HashMap<ValueId, AxisInfo>,
    def: &impl Fn(ValueId) -> Option<&'k OpKind>,
    v: ValueId,
    n: usize,
) -> MaskRun {
    let get = |v: &ValueId| facts.get(v).copied().unwrap_or(UNKNOWN);
    if get(&v).constancy >= n {
        return MaskRun::Uniform;
    }
    match def(v) {
        Some(OpKind::Compare { pred, lhs, rhs }) => {
            let (a, b) = (get(lhs), get(rhs));
            // `run < constant` falls along the run; `constant < run` rises.
            let falls = match pred {
                CmpPred::Lt | CmpPred::Le => true,
                CmpPred::Gt | CmpPred::Ge => false,
                CmpPred::Eq | CmpPred::Ne => return MaskRun::General,
            };
            // A run of narrow integers may wrap around inside a group.
            let wide = |v: &ValueId| match kernel.type_of(*v).elem() {
                Elem::Ptr(..) => true,
                Elem::Scalar(s) => matches!(
                    s,
                    ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::F32
                ),
            };
            // A group's run starts at a multiple of n, so a bound that is a
            // multiple of n too falls between groups for `<` and `>=` (not for
            // `<=`, which splits the group starting at the bound).
            let bound_between_groups = |run: &AxisInfo, bound: &AxisInfo, between: bool| {
                between && run.divisibility >= n && bound.divisibility >= n
            };
            let integers = !matches!(kernel.type_of(*lhs).elem(), Elem::Ptr(..));
            if a.constancy >= n && b.constancy >= n {
                MaskRun::Uniform
            } else if !wide(lhs) || !wide(rhs) {
                MaskRun::General
            } else if a.contiguity >= n && b.constancy >= n {
                let between = integers && matches!(pred, CmpPred::Lt | CmpPred::Ge);
                if bound_between_groups(&a, &b, between) {
                    MaskRun::Uniform
                } else {
                    MaskRun::Monotone { rising: !falls }
                }
            } else if a.constancy >= n && b.contiguity >= n {
                let between = integers && matches!(pred, CmpPred::Gt | CmpPred::Le);
                if bound_between_groups(&b, &a, between) {
                    MaskRun::Uniform
                } else {
                    MaskRun::Monotone { rising: falls }
                }
            } else {
                MaskRun::General
            }
        }
        Some(OpKind::Binary {
            op: BinaryOp::And | BinaryOp::Or,
            lhs,
            rhs,
        }) => match (
            mask_run(kernel, facts, def, *lhs, n),
            mask_run(kernel, facts, def, *rhs, n),
        ) {
            (MaskRun::Uniform, other) | (other, MaskRun::Uniform) => other,
            // Both rising (or both falling) stays monotone; mixed ones make windows.
            (x, y) if x == y => x,
            _ => MaskRun::General,
        },
        // Both keep the last dimension's groups (a broadcast or new axis there makes
        // the mask constant along it, or the last dimension 1 so that n is 1).
        Some(OpKind::Broadcast(inner) | OpKind::ExpandDims { value: inner, .. }) => {
            mask_run(kernel, facts, def, *inner, n)
        }
        _ => MaskRun::General,
    }
}

/// A run plus a constant stays a run; two runs add to steps of 2 (not contiguous).
fn add_info(a: AxisInfo, b: AxisInfo) -> AxisInfo {
    AxisInfo {
        contiguity: a
            .contiguity
            .min(b.constancy)
            .max(b.contiguity.min(a.constancy)),
        constancy: a.constancy.min(b.constancy),
        divisibility: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlx_core::ir::{Builder, KernelOptions, Literal, ParamKind, Type};

    #[test]
    fn pointer_plus_arange_is_contiguous_but_pointer_plus_twice_arange_is_not() {
        let mut b = Builder::new("k", KernelOptions::default());
        let p = b.add_param("p", ParamKind::Ptr(ScalarType::F32));
        let idx = Type::tensor(Elem::Scalar(ScalarType::I32), vec![128]);
        let ar = b.push1(OpKind::Arange { start: 0, end: 128 }, idx.clone());
        let c = b.push1(OpKind::Constant(Literal::Int(64)), idx.clone());
        let off = b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: c,
                rhs: ar,
            },
            idx.clone(),
        );
        let twice = b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: ar,
                rhs: ar,
            },
            idx.clone(),
        );
        let ptrs_ty = Type::tensor(Elem::global_ptr(ScalarType::F32), vec![128]);
        let ps = b.push1(OpKind::Splat(p), ptrs_ty.clone());
        let good = b.push1(
            OpKind::AddPtr {
                ptr: ps,
                offset: off,
            },
            ptrs_ty.clone(),
        );
        let bad = b.push1(
            OpKind::AddPtr {
                ptr: ps,
                offset: twice,
            },
            ptrs_ty,
        );
        let k = b.finish();
        let facts = analyze(&k);
        assert_eq!(facts[&good].contiguity, 128);
        assert_eq!(facts[&bad].contiguity, 1);
        assert_eq!(facts[&c].constancy, 128);
    }

    #[test]
    fn promised_multiples_make_row_starts_aligned() {
        let mut b = Builder::new("k", KernelOptions::default());
        let p = b.add_param("p", ParamKind::Ptr(ScalarType::F16));
        let stride = b.add_param("stride", ParamKind::Scalar(ScalarType::I32));
        let i32s = Type::scalar(ScalarType::I32);
        let p16 = b.push1(
            OpKind::MultipleOf {
                value: p,
                factor: 16,
            },
            Type::ptr(ScalarType::F16),
        );
        let s8 = b.push1(
            OpKind::MultipleOf {
                value: stride,
                factor: 8,
            },
            i32s.clone(),
        );
        let pid = b.push1(OpKind::ProgramId { axis: 0 }, i32s.clone());
        let mul = |b: &mut Builder, lhs, rhs| {
            let op = BinaryOp::Mul;
            b.push1(
                OpKind::Binary { op, lhs, rhs },
                Type::scalar(ScalarType::I32),
            )
        };
        let promised = mul(&mut b, pid, s8);
        let unpromised = mul(&mut b, pid, stride);
        let idx = Type::tensor(Elem::Scalar(ScalarType::I32), vec![64]);
        let ar = b.push1(OpKind::Arange { start: 0, end: 64 }, idx.clone());
        let ptrs_ty = Type::tensor(Elem::global_ptr(ScalarType::F16), vec![64]);
        let tile = |b: &mut Builder, base: ValueId, row: ValueId| {
            let scalar = Type::ptr(ScalarType::F16);
            let at = b.push1(
                OpKind::AddPtr {
                    ptr: base,
                    offset: row,
                },
                scalar,
            );
            let splat = b.push1(OpKind::Splat(at), ptrs_ty.clone());
            b.push1(
                OpKind::AddPtr {
                    ptr: splat,
                    offset: ar,
                },
                ptrs_ty.clone(),
            )
        };
        let aligned = tile(&mut b, p16, promised);
        let unknown_stride = tile(&mut b, p16, unpromised);
        let unknown_base = tile(&mut b, p, promised);
        let facts = analyze(&b.finish());
        // 8 f16 elements are 16 bytes: whole 16-byte vectors.
        assert_eq!(facts[&aligned].divisibility, 16);
        assert_eq!(facts[&aligned].contiguity, 64);
        assert_eq!(facts[&unknown_stride].divisibility, 2);
        assert_eq!(facts[&unknown_base].divisibility, 1);
    }

    /// `cols` (arange) against splat `n`, `lo` (3) or 16, combined as asked.
    fn masks_of(
        build: impl Fn(&mut Builder, ValueId, ValueId, ValueId, ValueId) -> ValueId,
    ) -> MaskRun {
        let mut b = Builder::new("k", KernelOptions::default());
        let n = b.add_param("n", ParamKind::Scalar(ScalarType::I32));
        let idx = Type::tensor(Elem::Scalar(ScalarType::I32), vec![64]);
        let ar = b.push1(OpKind::Arange { start: 0, end: 64 }, idx.clone());
        let ns = b.push1(OpKind::Splat(n), idx.clone());
        let lo = b.push1(OpKind::Constant(Literal::Int(3)), idx.clone());
        let sixteen = b.push1(OpKind::Constant(Literal::Int(16)), idx);
        let mask = build(&mut b, ar, ns, lo, sixteen);
        let k = b.finish();
        let facts = analyze(&k);
        let defs: HashMap<ValueId, OpKind> = k
            .body
            .ops
            .iter()
            .filter_map(|op| Some((*op.results.first()?, op.kind.clone())))
            .collect();
        mask_run(&k, &facts, &|v| defs.get(&v), mask, 8)
    }

    fn cmp(b: &mut Builder, pred: CmpPred, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = Type::tensor(Elem::Scalar(ScalarType::Bool), vec![64]);
        b.push1(OpKind::Compare { pred, lhs, rhs }, ty)
    }

    fn and(b: &mut Builder, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = Type::tensor(Elem::Scalar(ScalarType::Bool), vec![64]);
        let op = BinaryOp::And;
        b.push1(OpKind::Binary { op, lhs, rhs }, ty)
    }

    #[test]
    fn bounds_on_a_run_are_monotone_windows_and_equalities_are_not() {
        let falling = MaskRun::Monotone { rising: false };
        let rising = MaskRun::Monotone { rising: true };
        assert_eq!(masks_of(|b, c, n, _, _| cmp(b, CmpPred::Lt, c, n)), falling);
        assert_eq!(masks_of(|b, c, n, _, _| cmp(b, CmpPred::Gt, n, c)), falling);
        assert_eq!(
            masks_of(|b, c, _, lo, _| cmp(b, CmpPred::Ge, c, lo)),
            rising
        );
        assert_eq!(
            masks_of(|b, _, n, lo, _| cmp(b, CmpPred::Lt, lo, n)),
            MaskRun::Uniform
        );
        assert_eq!(
            masks_of(|b, c, n, _, _| cmp(b, CmpPred::Ne, c, n)),
            MaskRun::General
        );
        assert_eq!(
            masks_of(|b, c, n, lo, _| {
                let below = cmp(b, CmpPred::Lt, c, n);
                let above = cmp(b, CmpPred::Lt, c, lo);
                and(b, below, above)
            }),
            falling
        );
        // lo <= c < n: false, true, false can happen inside one group.
        assert_eq!(
            masks_of(|b, c, n, lo, _| {
                let below = cmp(b, CmpPred::Lt, c, n);
                let above = cmp(b, CmpPred::Ge, c, lo);
                and(b, below, above)
            }),
            MaskRun::General
        );
    }

    #[test]
    fn a_bound_at_a_multiple_of_the_group_keeps_each_group_uniform() {
        let falling = MaskRun::Monotone { rising: false };
        // Groups of 8 start at multiples of 8, and 16 is one: c < 16 and
        // 16 > c hold for whole groups, c <= 16 splits the group at 16.
        let lt = |b: &mut Builder, c, _, _, s| cmp(b, CmpPred::Lt, c, s);
        assert_eq!(masks_of(lt), MaskRun::Uniform);
        let gt = |b: &mut Builder, c, _, _, s| cmp(b, CmpPred::Gt, s, c);
        assert_eq!(masks_of(gt), MaskRun::Uniform);
        let ge = |b: &mut Builder, c, _, _, s| cmp(b, CmpPred::Ge, c, s);
        assert_eq!(masks_of(ge), MaskRun::Uniform);
        let le = |b: &mut Builder, c, _, _, s| cmp(b, CmpPred::Le, c, s);
        assert_eq!(masks_of(le), falling);
    }
}
