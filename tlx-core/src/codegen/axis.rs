//! Axis analysis along the last dimension of integer and pointer tensors:
//! how many consecutive elements form an arithmetic run of step 1
//! (contiguity) or are equal (constancy), in aligned groups. Loads and stores
//! use contiguity to decide which register groups may be one vector access.

use crate::ir::{BinaryOp, Block, CmpPred, Elem, Kernel, OpKind, ScalarType, ValueId};
use std::collections::HashMap;

/// Facts about a value along its last dimension; both are powers of two and hold
/// for every aligned group of that many elements.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AxisInfo {
    pub contiguity: usize,
    pub constancy: usize,
}

const UNKNOWN: AxisInfo = AxisInfo {
    contiguity: 1,
    constancy: 1,
};

pub fn analyze(kernel: &Kernel) -> HashMap<ValueId, AxisInfo> {
    let mut facts = HashMap::new();
    walk(kernel, &kernel.body, &mut facts);
    facts
}

fn last_dim(kernel: &Kernel, v: ValueId) -> usize {
    kernel.type_of(v).shape.last().copied().unwrap_or(1)
}

fn walk(kernel: &Kernel, block: &Block, facts: &mut HashMap<ValueId, AxisInfo>) {
    for op in &block.ops {
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
            },
            OpKind::Arange { .. } => AxisInfo {
                contiguity: last,
                constancy: 1,
            },
            OpKind::Broadcast(v) if last_dim(kernel, *v) != last => AxisInfo {
                contiguity: 1,
                constancy: last,
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
                }
            }
            OpKind::Binary { lhs, rhs, .. } => AxisInfo {
                contiguity: 1,
                constancy: get(lhs).constancy.min(get(rhs).constancy),
            },
            _ => UNKNOWN,
        };
        facts.insert(result, info);
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
            let wide = |v: &ValueId| match kernel.type_of(*v).elem {
                Elem::Ptr(_) => true,
                Elem::Scalar(s) => matches!(
                    s,
                    ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::F32
                ),
            };
            if a.constancy >= n && b.constancy >= n {
                MaskRun::Uniform
            } else if !wide(lhs) || !wide(rhs) {
                MaskRun::General
            } else if a.contiguity >= n && b.constancy >= n {
                MaskRun::Monotone { rising: !falls }
            } else if a.constancy >= n && b.contiguity >= n {
                MaskRun::Monotone { rising: falls }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, KernelOptions, Literal, ParamKind, Type};

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
        let ptrs_ty = Type::tensor(Elem::Ptr(ScalarType::F32), vec![128]);
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

    /// `cols` (arange plus a splat) against splat `n`/`lo`, combined as asked.
    fn masks_of(build: impl Fn(&mut Builder, ValueId, ValueId, ValueId) -> ValueId) -> MaskRun {
        let mut b = Builder::new("k", KernelOptions::default());
        let n = b.add_param("n", ParamKind::Scalar(ScalarType::I32));
        let idx = Type::tensor(Elem::Scalar(ScalarType::I32), vec![64]);
        let ar = b.push1(OpKind::Arange { start: 0, end: 64 }, idx.clone());
        let ns = b.push1(OpKind::Splat(n), idx.clone());
        let lo = b.push1(OpKind::Constant(Literal::Int(3)), idx);
        let mask = build(&mut b, ar, ns, lo);
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
        assert_eq!(masks_of(|b, c, n, _| cmp(b, CmpPred::Lt, c, n)), falling);
        assert_eq!(masks_of(|b, c, n, _| cmp(b, CmpPred::Gt, n, c)), falling);
        assert_eq!(masks_of(|b, c, _, lo| cmp(b, CmpPred::Ge, c, lo)), rising);
        assert_eq!(
            masks_of(|b, _, n, lo| cmp(b, CmpPred::Lt, lo, n)),
            MaskRun::Uniform
        );
        assert_eq!(
            masks_of(|b, c, n, _| cmp(b, CmpPred::Ne, c, n)),
            MaskRun::General
        );
        assert_eq!(
            masks_of(|b, c, n, lo| {
                let below = cmp(b, CmpPred::Lt, c, n);
                let above = cmp(b, CmpPred::Lt, c, lo);
                and(b, below, above)
            }),
            falling
        );
        // lo <= c < n: false, true, false can happen inside one group.
        assert_eq!(
            masks_of(|b, c, n, lo| {
                let below = cmp(b, CmpPred::Lt, c, n);
                let above = cmp(b, CmpPred::Ge, c, lo);
                and(b, below, above)
            }),
            MaskRun::General
        );
    }
}
