//! Reductions along one axis (sum, max, min, argmax, argmin) and scans (TLE's
//! cumsum, cumprod, cummax, cummin). Float sums accumulate in f32 and round
//! to the element type once (f16/bf16/fp8); integer sums wrap; max/min
//! propagate NaN.

use crate::ir::{BinaryOp, ReduceKind, ScalarType};
use crate::numeric::{round_f32, wrap_int};

use super::elementwise::{f64_combine, float_combine, int_combine};
use super::error::{Fault, FaultResult};
use super::value::{Data, Tensor};

/// The tile seen as `[outer, axis, inner]` around `axis`.
fn split_at_axis(shape: &[usize], axis: usize) -> FaultResult<(usize, usize, usize)> {
    if axis >= shape.len() {
        return Err(Fault::malformed(format!(
            "axis {axis} of a rank-{} tile",
            shape.len()
        )));
    }
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    Ok((outer, shape[axis], inner))
}

/// Applies `f` to each line along the axis, gathered contiguously.
fn map_lines<T: Copy, A>(
    v: &[T],
    (outer, len, inner): (usize, usize, usize),
    mut f: impl FnMut(&[T]) -> A,
) -> Vec<A> {
    let mut line = Vec::with_capacity(len);
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            line.clear();
            line.extend((0..len).map(|k| v[base + k * inner + i]));
            out.push(f(&line));
        }
    }
    out
}

/// Folds each line along the axis with `step(acc, x, position)`, starting at the first element.
fn fold_lines<T: Copy, A: Copy>(
    v: &[T],
    dims: (usize, usize, usize),
    init: impl Fn(T) -> A,
    step: impl Fn(A, T, usize) -> A,
) -> Vec<A> {
    map_lines(v, dims, |line| {
        let mut acc = init(line[0]);
        for (k, &x) in line.iter().enumerate().skip(1) {
            acc = step(acc, x, k);
        }
        acc
    })
}

/// A float sum added as a balanced tree, the way the GPU's shuffle and
/// shared-memory steps do: a running sum of thousands of same-signed values
/// drifts by about 1e-4, a tree by far less.
fn tree_sum<T: Copy + std::ops::Add<Output = T>>(line: &[T], zero: T) -> T {
    match line.len() {
        0 => zero,
        1 => line[0],
        n => tree_sum(&line[..n / 2], zero) + tree_sum(&line[n / 2..], zero),
    }
}

/// What a float reduction gives: values of the element type, or indices.
enum Reduced<T> {
    Values(Vec<T>),
    Indices(Vec<i64>),
}

/// A float type's operations the reductions need (f32 or f64).
#[derive(Copy, Clone)]
struct FloatOps<T> {
    zero: T,
    nan: T,
    max: fn(T, T) -> T,
    min: fn(T, T) -> T,
}

const F32_OPS: FloatOps<f32> = FloatOps {
    zero: 0.0,
    nan: f32::NAN,
    max: f32::max,
    min: f32::min,
};

const F64_OPS: FloatOps<f64> = FloatOps {
    zero: 0.0,
    nan: f64::NAN,
    max: f64::max,
    min: f64::min,
};

fn float_reduce<T: Copy + PartialOrd + std::ops::Add<Output = T>>(
    kind: ReduceKind,
    v: &[T],
    dims: (usize, usize, usize),
    ops: FloatOps<T>,
) -> Reduced<T> {
    // NaN is the only value unequal to itself; max and min propagate it.
    #[allow(clippy::eq_op)]
    let either_nan = |a: T, x: T| a != a || x != x;
    let indices = |pairs: Vec<(T, usize)>| {
        Reduced::Indices(pairs.into_iter().map(|(_, i)| i as i64).collect())
    };
    match kind {
        ReduceKind::Sum => Reduced::Values(map_lines(v, dims, |line| tree_sum(line, ops.zero))),
        ReduceKind::Max => Reduced::Values(fold_lines(
            v,
            dims,
            |x| x,
            |a, x, _| {
                if either_nan(a, x) {
                    ops.nan
                } else {
                    (ops.max)(a, x)
                }
            },
        )),
        ReduceKind::Min => Reduced::Values(fold_lines(
            v,
            dims,
            |x| x,
            |a, x, _| {
                if either_nan(a, x) {
                    ops.nan
                } else {
                    (ops.min)(a, x)
                }
            },
        )),
        ReduceKind::Argmax => indices(fold_lines(
            v,
            dims,
            |x| (x, 0usize),
            |(b, bi), x, k| if x > b { (x, k) } else { (b, bi) },
        )),
        ReduceKind::Argmin => indices(fold_lines(
            v,
            dims,
            |x| (x, 0usize),
            |(b, bi), x, k| if x < b { (x, k) } else { (b, bi) },
        )),
    }
}

fn int_reduce(
    kind: ReduceKind,
    ty: ScalarType,
    v: &[i64],
    dims: (usize, usize, usize),
) -> Vec<i64> {
    let first_index = |pairs: Vec<(i64, usize)>| pairs.into_iter().map(|(_, i)| i as i64).collect();
    match kind {
        ReduceKind::Sum => fold_lines(v, dims, |x| x, |a: i64, x, _| a.wrapping_add(x))
            .into_iter()
            .map(|s| wrap_int(ty, s))
            .collect(),
        ReduceKind::Max => fold_lines(v, dims, |x| x, |a: i64, x, _| a.max(x)),
        ReduceKind::Min => fold_lines(v, dims, |x| x, |a: i64, x, _| a.min(x)),
        ReduceKind::Argmax => first_index(fold_lines(
            v,
            dims,
            |x| (x, 0),
            |(b, bi), x, k| {
                if x > b {
                    (x, k)
                } else {
                    (b, bi)
                }
            },
        )),
        ReduceKind::Argmin => first_index(fold_lines(
            v,
            dims,
            |x| (x, 0),
            |(b, bi), x, k| {
                if x < b {
                    (x, k)
                } else {
                    (b, bi)
                }
            },
        )),
    }
}

/// Reduction of `value` (element type `ty`) along `axis`.
pub(crate) fn reduce(
    value: &Tensor,
    ty: ScalarType,
    axis: usize,
    kind: ReduceKind,
) -> FaultResult<Data> {
    let dims = split_at_axis(&value.shape, axis)?;
    if dims.1 == 0 {
        return Err(Fault::malformed("reduction over an empty axis"));
    }
    Ok(match &value.data {
        // f32 sums round to the element type once, at the end.
        Data::Float(v) => match float_reduce(kind, v, dims, F32_OPS) {
            Reduced::Values(x) => Data::Float(x.into_iter().map(|s| round_f32(ty, s)).collect()),
            Reduced::Indices(i) => Data::Int(i),
        },
        Data::F64(v) => match float_reduce(kind, v, dims, F64_OPS) {
            Reduced::Values(x) => Data::F64(x),
            Reduced::Indices(i) => Data::Int(i),
        },
        Data::Int(v) => Data::Int(int_reduce(kind, ty, v, dims)),
        Data::Bool(v) => {
            let ints: Vec<i64> = v.iter().map(|&b| i64::from(b)).collect();
            match kind {
                ReduceKind::Max | ReduceKind::Min => Data::Bool(
                    int_reduce(kind, ty, &ints, dims)
                        .into_iter()
                        .map(|x| x != 0)
                        .collect(),
                ),
                ReduceKind::Argmax | ReduceKind::Argmin => {
                    Data::Int(int_reduce(kind, ty, &ints, dims))
                }
                ReduceKind::Sum => return Err(Fault::malformed("sum of bools")),
            }
        }
        Data::Ptr(_) | Data::Handle(_) => return Err(Fault::malformed("reduction of pointers")),
    })
}

/// Exclusive prefixes by `combine` along `axis` (from the end when
/// `reverse`) and the totals.
fn scan<T: Copy>(
    v: &[T],
    (outer, len, inner): (usize, usize, usize),
    reverse: bool,
    identity: T,
    combine: impl Fn(T, T) -> T,
) -> (Vec<T>, Vec<T>) {
    let mut prefix = vec![identity; v.len()];
    let mut totals = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            // The line in scan order, scanned as the GPU does it (Hillis and
            // Steele: at step s each element takes in the one s before it), so
            // that float results round the same way on both.
            let at = |step: usize| {
                let k = if reverse { len - 1 - step } else { step };
                base + k * inner + i
            };
            let mut running: Vec<T> = (0..len).map(|step| v[at(step)]).collect();
            let mut shift = 1;
            while shift < len {
                let before = running.clone();
                for pos in 0..len {
                    // The first `shift` take in the identity, as on the GPU
                    // (where `0 + -0.0` makes the zero positive).
                    let earlier = if pos >= shift {
                        before[pos - shift]
                    } else {
                        identity
                    };
                    running[pos] = combine(earlier, before[pos]);
                }
                shift *= 2;
            }
            for pos in 1..len {
                prefix[at(pos)] = running[pos - 1];
            }
            totals.push(running.last().copied().unwrap_or(identity));
        }
    }
    (prefix, totals)
}

/// The exclusive prefixes by `combine` (same shape; its identity first) and
/// the totals (axis dropped): TLE's cumsum for `Add`, and the scans behind
/// `cumprod`, `cummax` and `cummin`. Floats combine in f32 and round once.
pub(crate) fn scan_exclusive(
    value: &Tensor,
    ty: ScalarType,
    axis: usize,
    reverse: bool,
    combine: BinaryOp,
) -> FaultResult<(Data, Data)> {
    let dims = split_at_axis(&value.shape, axis)?;
    Ok(match &value.data {
        Data::Float(v) => {
            let f = float_combine(combine).ok_or_else(bit_scan)?;
            // Exact: the identities are 0, 1 and the infinities.
            let identity = float_scan_identity(combine) as f32;
            let (prefix, totals) = scan(v, dims, reverse, identity, f);
            let round =
                |xs: Vec<f32>| Data::Float(xs.into_iter().map(|x| round_f32(ty, x)).collect());
            (round(prefix), round(totals))
        }
        Data::F64(v) => {
            let f = f64_combine(combine).ok_or_else(bit_scan)?;
            let identity = float_scan_identity(combine);
            let (prefix, totals) = scan(v, dims, reverse, identity, f);
            (Data::F64(prefix), Data::F64(totals))
        }
        Data::Int(v) => {
            let identity = match combine {
                BinaryOp::Mul => 1,
                BinaryOp::Max => int_range(ty).0,
                BinaryOp::Min => int_range(ty).1,
                _ => 0,
            };
            let step = |a, b| int_combine(combine, ty, a, b).map_or(a, |r| wrap_int(ty, r));
            let (prefix, totals) = scan(v, dims, reverse, identity, step);
            (Data::Int(prefix), Data::Int(totals))
        }
        _ => return Err(Fault::malformed("a scan of a non-numeric tile")),
    })
}

fn bit_scan() -> Fault {
    Fault::malformed("a scan by a bit operation")
}

/// What a float scan by `combine` starts from.
fn float_scan_identity(combine: BinaryOp) -> f64 {
    match combine {
        BinaryOp::Mul => 1.0,
        BinaryOp::Max => f64::NEG_INFINITY,
        BinaryOp::Min => f64::INFINITY,
        _ => 0.0,
    }
}

/// The smallest and largest values of an integer type.
fn int_range(ty: ScalarType) -> (i64, i64) {
    let bits = ty.size_bytes() * 8;
    if ty.is_signed_int() {
        (-(1i64 << (bits - 1)), ((1u64 << (bits - 1)) - 1) as i64)
    } else if bits == 64 {
        (0, i64::MAX)
    } else {
        (0, (1i64 << bits) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Tensor {
        // [[3, 9, 9], [7, 1, 7]]
        Tensor {
            shape: vec![2, 3],
            data: Data::Int(vec![3, 9, 9, 7, 1, 7]),
        }
    }

    #[test]
    fn int_reductions_along_both_axes() {
        let t = grid();
        let r = |axis, kind| reduce(&t, ScalarType::I32, axis, kind);
        assert_eq!(r(1, ReduceKind::Sum), Ok(Data::Int(vec![21, 15])));
        assert_eq!(r(0, ReduceKind::Sum), Ok(Data::Int(vec![10, 10, 16])));
        assert_eq!(r(1, ReduceKind::Argmax), Ok(Data::Int(vec![1, 0])));
        assert_eq!(r(0, ReduceKind::Argmin), Ok(Data::Int(vec![0, 1, 1])));
        assert_eq!(r(0, ReduceKind::Max), Ok(Data::Int(vec![7, 9, 9])));
        assert_eq!(r(1, ReduceKind::Min), Ok(Data::Int(vec![3, 1])));
        assert!(r(2, ReduceKind::Sum).is_err());
    }

    #[test]
    fn float_sums_add_as_a_tree_and_do_not_drift() {
        // 4096 copies of 1.1: a tree of equal halves is exact, while a running
        // f32 sum drifts by about 1e-4 relative.
        let t = Tensor {
            shape: vec![4096, 2],
            data: Data::Float(vec![1.1; 8192]),
        };
        let Ok(Data::Float(sums)) = reduce(&t, ScalarType::F32, 0, ReduceKind::Sum) else {
            panic!("sum failed")
        };
        let exact = 4096.0 * f64::from(1.1f32);
        for s in sums {
            assert_eq!(f64::from(s), exact);
        }
        let running: f32 = (0..4096).fold(0.0, |a, _| a + 1.1f32);
        assert!((f64::from(running) - exact).abs() / exact > 1e-6);
    }

    #[test]
    fn f16_sums_round_once() {
        // 2048 + 1 + 1 in f16 step by step stays 2048; accumulated in f32 it is 2050.
        let t = Tensor {
            shape: vec![3],
            data: Data::Float(vec![2048.0, 1.0, 1.0]),
        };
        assert_eq!(
            reduce(&t, ScalarType::F16, 0, ReduceKind::Sum),
            Ok(Data::Float(vec![2050.0]))
        );
        let n = Tensor {
            shape: vec![3],
            data: Data::Float(vec![1.0, f32::NAN, 5.0]),
        };
        let Ok(Data::Float(m)) = reduce(&n, ScalarType::F32, 0, ReduceKind::Max) else {
            panic!("max failed")
        };
        assert!(m[0].is_nan());
        assert_eq!(
            reduce(&n, ScalarType::F32, 0, ReduceKind::Argmax),
            Ok(Data::Int(vec![2]))
        );
    }

    #[test]
    fn cumsum_is_exclusive_in_both_directions() {
        let t = grid();
        let cumsum =
            |t: &Tensor, ty, axis, reverse| scan_exclusive(t, ty, axis, reverse, BinaryOp::Add);
        let (p, tot) = cumsum(&t, ScalarType::I32, 1, false).expect("ints");
        assert_eq!(p, Data::Int(vec![0, 3, 12, 0, 7, 8]));
        assert_eq!(tot, Data::Int(vec![21, 15]));
        let (p, tot) = cumsum(&t, ScalarType::I32, 1, true).expect("ints");
        assert_eq!(p, Data::Int(vec![18, 9, 0, 8, 7, 0]));
        assert_eq!(tot, Data::Int(vec![21, 15]));
        let (p, tot) = cumsum(&t, ScalarType::I32, 0, false).expect("ints");
        assert_eq!(p, Data::Int(vec![0, 0, 0, 3, 9, 9]));
        assert_eq!(tot, Data::Int(vec![10, 10, 16]));
    }

    #[test]
    fn scans_start_from_their_combines_identity() {
        let t = grid();
        let by = |combine, reverse| {
            scan_exclusive(&t, ScalarType::I32, 1, reverse, combine).expect("ints")
        };
        let (p, tot) = by(BinaryOp::Max, false);
        assert_eq!(
            p,
            Data::Int(vec![i64::from(i32::MIN), 3, 9, i64::from(i32::MIN), 7, 7])
        );
        assert_eq!(tot, Data::Int(vec![9, 7]));
        let (p, tot) = by(BinaryOp::Min, true);
        assert_eq!(
            p,
            Data::Int(vec![9, 9, i64::from(i32::MAX), 1, 7, i64::from(i32::MAX)])
        );
        assert_eq!(tot, Data::Int(vec![3, 1]));
        let (p, tot) = by(BinaryOp::Mul, false);
        assert_eq!(p, Data::Int(vec![1, 3, 27, 1, 7, 7]));
        assert_eq!(tot, Data::Int(vec![243, 49]));
        let u8s = Tensor {
            shape: vec![3],
            data: Data::Int(vec![5, 200, 7]),
        };
        let (p, _) = scan_exclusive(&u8s, ScalarType::U8, 0, false, BinaryOp::Min).expect("u8");
        assert_eq!(p, Data::Int(vec![255, 5, 5]));
    }
}
