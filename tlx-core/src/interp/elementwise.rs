//! Elementwise ops on whole tiles: constants, binary and unary arithmetic,
//! comparisons, select, fma, casts and bitcasts, with the GPU's rounding
//! (one rounding to the element type per op) and wrapping integers.

use crate::ir::{BinaryOp, CmpPred, Elem, Literal, ScalarType, UnaryOp};
use crate::numeric::{
    f64_to_int_sat, float_from_bits, float_to_bits, float_to_int_sat, i64_to_float, int_from_bits,
    round_f32, round_f64, wrap_int,
};

use super::error::{Fault, FaultResult};
use super::value::{check_lanes, Data, Ptr, Repr};

fn same_len(a: &Data, b: &Data) -> FaultResult<()> {
    if a.len() == b.len() {
        Ok(())
    } else {
        Err(Fault::malformed(format!(
            "operands have {} and {} elements",
            a.len(),
            b.len()
        )))
    }
}

fn mismatch(what: &str) -> Fault {
    Fault::malformed(format!("{what}: operand element types do not fit the op"))
}

/// A literal splatted to `numel` elements of type `elem`.
pub(crate) fn constant(lit: Literal, elem: Elem, numel: usize) -> FaultResult<Data> {
    let Elem::Scalar(ty) = elem else {
        return Err(Fault::malformed("a constant cannot be a pointer"));
    };
    Ok(match (Repr::of_scalar(ty), lit) {
        (Repr::Bool, Literal::Bool(b)) => Data::Bool(vec![b; numel]),
        (Repr::Bool, Literal::Int(i)) => Data::Bool(vec![i != 0; numel]),
        (Repr::Int, Literal::Int(i)) => Data::Int(vec![wrap_int(ty, i); numel]),
        (Repr::Int, Literal::Bool(b)) => Data::Int(vec![i64::from(b); numel]),
        (Repr::Int, Literal::Float(f)) => Data::Int(vec![f64_to_int_sat(ty, f); numel]),
        (Repr::Float, Literal::Float(f)) => Data::Float(vec![round_f64(ty, f); numel]),
        (Repr::Float, Literal::Int(i)) => Data::Float(vec![i64_to_float(ty, i); numel]),
        (Repr::Float, Literal::Bool(b)) => Data::Float(vec![f32::from(u8::from(b)); numel]),
        (Repr::F64, Literal::Float(f)) => Data::F64(vec![f; numel]),
        // `as` rounds to nearest even, as `cvt.rn.f64.s64` does.
        (Repr::F64, Literal::Int(i)) => Data::F64(vec![i as f64; numel]),
        (Repr::F64, Literal::Bool(b)) => Data::F64(vec![f64::from(u8::from(b)); numel]),
        _ => return Err(Fault::malformed("literal does not fit its type")),
    })
}

/// IEEE `maximum`/`minimum`: NaN if either is NaN, and -0 < +0.
fn float_max(a: f32, b: f32) -> f32 {
    // Exact both ways: the result is an operand or NaN.
    f64_max(f64::from(a), f64::from(b)) as f32
}

fn float_min(a: f32, b: f32) -> f32 {
    f64_min(f64::from(a), f64::from(b)) as f32
}

fn f64_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            b
        } else {
            a
        }
    } else if a > b {
        a
    } else {
        b
    }
}

fn f64_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

pub(crate) fn float_combine(op: BinaryOp) -> Option<fn(f32, f32) -> f32> {
    Some(match op {
        BinaryOp::Add => |a, b| a + b,
        BinaryOp::Sub => |a, b| a - b,
        BinaryOp::Mul => |a, b| a * b,
        BinaryOp::Max => float_max,
        BinaryOp::Min => float_min,
        _ => return None,
    })
}

fn float_binary(op: BinaryOp, ty: ScalarType, a: &[f32], b: &[f32]) -> FaultResult<Vec<f32>> {
    let wide = |f: fn(f64, f64) -> f64| -> Vec<f32> {
        if ty == ScalarType::F32 {
            a.iter()
                .zip(b)
                .map(|(&x, &y)| f(f64::from(x), f64::from(y)) as f32)
                .collect()
        } else {
            a.iter()
                .zip(b)
                .map(|(&x, &y)| round_f64(ty, f(f64::from(x), f64::from(y))))
                .collect()
        }
    };
    Ok(match op {
        // f32 division is correctly rounded in f32 itself; the f64 route is
        // for the narrow types, where it rounds exactly once.
        // The fast division is within 2 ulp of this on the GPU.
        BinaryOp::Div | BinaryOp::DivFull if ty == ScalarType::F32 => {
            a.iter().zip(b).map(|(&x, &y)| x / y).collect()
        }
        BinaryOp::Div => wide(|x, y| x / y),
        // fmod is exact, so no rounding is involved.
        BinaryOp::Rem => a.iter().zip(b).map(|(&x, &y)| x % y).collect(),
        _ => {
            let f = float_combine(op).ok_or_else(|| mismatch("bitwise op on floats"))?;
            if ty == ScalarType::F32 {
                a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
            } else {
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| round_f32(ty, f(x, y)))
                    .collect()
            }
        }
    })
}

/// [`float_combine`] for f64.
pub(crate) fn f64_combine(op: BinaryOp) -> Option<fn(f64, f64) -> f64> {
    Some(match op {
        BinaryOp::Add => |a, b| a + b,
        BinaryOp::Sub => |a, b| a - b,
        BinaryOp::Mul => |a, b| a * b,
        BinaryOp::Max => f64_max,
        BinaryOp::Min => f64_min,
        _ => return None,
    })
}

/// f64 arithmetic: every op is IEEE's, correctly rounded, as on the GPU.
fn f64_binary(op: BinaryOp, a: &[f64], b: &[f64]) -> FaultResult<Vec<f64>> {
    let f: fn(f64, f64) -> f64 = match op {
        BinaryOp::Div => |x, y| x / y,
        BinaryOp::Rem => |x, y| x % y,
        _ => f64_combine(op).ok_or_else(|| mismatch("bitwise op on floats"))?,
    };
    Ok(a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect())
}

fn int_bits(ty: ScalarType) -> i64 {
    (ty.size_bytes() * 8) as i64
}

/// The shift amount as the unsigned value of its type (negative amounts are huge).
fn shift_amount(ty: ScalarType, s: i64) -> u64 {
    (s as u64) & (u64::MAX >> (64 - int_bits(ty)))
}

/// One integer op on canonical values, before wrapping; `None` for division by zero.
pub(crate) fn int_combine(op: BinaryOp, ty: ScalarType, a: i64, b: i64) -> Option<i64> {
    let bits = int_bits(ty) as u64;
    Some(match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        // `DivFull` is f32-only (the verifier sees to it); as `Div` here.
        BinaryOp::Div | BinaryOp::DivFull if b == 0 => return None,
        BinaryOp::Rem if b == 0 => return None,
        BinaryOp::Div | BinaryOp::DivFull => a.wrapping_div(b),
        BinaryOp::Rem => a.wrapping_rem(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        BinaryOp::Xor => a ^ b,
        // Shifts by the width or more give 0 (or the sign), as PTX's shl/shr clamp.
        BinaryOp::Shl => {
            let s = shift_amount(ty, b);
            if s >= bits {
                0
            } else {
                a.wrapping_shl(s as u32)
            }
        }
        // Canonical values are the mathematical ones (unsigned types are
        // non-negative), so the wide product is exact in i128.
        BinaryOp::MulHi => ((i128::from(a) * i128::from(b)) >> bits) as i64,
        BinaryOp::Shr => {
            let s = shift_amount(ty, b).min(bits - 1);
            if ty.is_signed_int() {
                a >> s
            } else if shift_amount(ty, b) >= bits {
                0
            } else {
                ((a as u64) >> s) as i64
            }
        }
    })
}

fn int_binary(op: BinaryOp, ty: ScalarType, a: &[i64], b: &[i64]) -> FaultResult<Vec<i64>> {
    let mut out = Vec::with_capacity(a.len());
    for (element, (&x, &y)) in a.iter().zip(b).enumerate() {
        let r = int_combine(op, ty, x, y).ok_or(Fault::DivisionByZero { element })?;
        out.push(wrap_int(ty, r));
    }
    Ok(out)
}

fn bool_binary(op: BinaryOp, a: &[bool], b: &[bool]) -> FaultResult<Vec<bool>> {
    let f: fn(bool, bool) -> bool = match op {
        BinaryOp::And | BinaryOp::Min => |x, y| x && y,
        BinaryOp::Or | BinaryOp::Max => |x, y| x || y,
        BinaryOp::Xor => |x, y| x != y,
        _ => return Err(mismatch("arithmetic on bool")),
    };
    Ok(a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect())
}

/// `lhs op rhs` for operands of element type `ty` and equal shapes.
pub(crate) fn binary(op: BinaryOp, ty: ScalarType, lhs: &Data, rhs: &Data) -> FaultResult<Data> {
    same_len(lhs, rhs)?;
    Ok(match (lhs, rhs) {
        (Data::Float(a), Data::Float(b)) => Data::Float(float_binary(op, ty, a, b)?),
        (Data::F64(a), Data::F64(b)) => Data::F64(f64_binary(op, a, b)?),
        (Data::Int(a), Data::Int(b)) => Data::Int(int_binary(op, ty, a, b)?),
        (Data::Bool(a), Data::Bool(b)) => Data::Bool(bool_binary(op, a, b)?),
        _ => return Err(mismatch("binary op")),
    })
}

fn float_unary(op: UnaryOp, ty: ScalarType, v: &[f32]) -> FaultResult<Vec<f32>> {
    if op == UnaryOp::Sqrt && ty != ScalarType::F32 {
        // Correctly rounded in f64, then rounded once to the narrow type.
        return Ok(v
            .iter()
            .map(|&x| round_f64(ty, f64::from(x).sqrt()))
            .collect());
    }
    let f: fn(f32) -> f32 = match op {
        UnaryOp::Neg => |x| -x,
        UnaryOp::Abs => f32::abs,
        UnaryOp::Floor => f32::floor,
        UnaryOp::Ceil => f32::ceil,
        // The GPU's `ex2.approx.ftz` flushes subnormal results to zero.
        UnaryOp::Exp => |x| flush_subnormal(x.exp()),
        UnaryOp::Exp2 => |x| flush_subnormal(x.exp2()),
        UnaryOp::Log => f32::ln,
        UnaryOp::Log2 => f32::log2,
        UnaryOp::Sqrt => f32::sqrt,
        UnaryOp::Rsqrt => |x| 1.0 / x.sqrt(),
        UnaryOp::Sin => f32::sin,
        UnaryOp::Cos => f32::cos,
        UnaryOp::Tanh => f32::tanh,
        UnaryOp::Round => f32::round_ties_even,
        UnaryOp::Trunc => f32::trunc,
        UnaryOp::Not => return Err(mismatch("not on floats")),
    };
    Ok(if ty == ScalarType::F32 {
        v.iter().map(|&x| f(x)).collect()
    } else {
        v.iter().map(|&x| round_f32(ty, f(x))).collect()
    })
}

/// `op value` elementwise for an operand of element type `ty`.
pub(crate) fn unary(op: UnaryOp, ty: ScalarType, value: &Data) -> FaultResult<Data> {
    Ok(match value {
        Data::Float(v) => Data::Float(float_unary(op, ty, v)?),
        Data::F64(v) => {
            // The exact operations only: PTX has no f64 approximations.
            let f: fn(f64) -> f64 = match op {
                UnaryOp::Neg => |x| -x,
                UnaryOp::Abs => f64::abs,
                UnaryOp::Floor => f64::floor,
                UnaryOp::Ceil => f64::ceil,
                UnaryOp::Round => f64::round_ties_even,
                UnaryOp::Trunc => f64::trunc,
                UnaryOp::Sqrt => f64::sqrt,
                _ => return Err(mismatch("transcendental on f64")),
            };
            Data::F64(v.iter().map(|&x| f(x)).collect())
        }
        Data::Int(v) => {
            let f: fn(i64) -> i64 = match op {
                UnaryOp::Neg => i64::wrapping_neg,
                UnaryOp::Not => |x| !x,
                UnaryOp::Abs => i64::wrapping_abs,
                UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => |x| x,
                _ => return Err(mismatch("transcendental on integers")),
            };
            Data::Int(v.iter().map(|&x| wrap_int(ty, f(x))).collect())
        }
        Data::Bool(v) if op == UnaryOp::Not => Data::Bool(v.iter().map(|&x| !x).collect()),
        _ => return Err(mismatch("unary op")),
    })
}

fn compare_with<T: Copy>(
    pred: CmpPred,
    a: &[T],
    b: &[T],
    cmp: fn(T, T) -> Option<std::cmp::Ordering>,
) -> Vec<bool> {
    use std::cmp::Ordering::*;
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let ord = cmp(x, y);
            match pred {
                CmpPred::Eq => ord == Some(Equal),
                // Unordered (NaN) operands compare not-equal, as Triton's `!=`.
                CmpPred::Ne => ord != Some(Equal),
                CmpPred::Lt => ord == Some(Less),
                CmpPred::Le => matches!(ord, Some(Less | Equal)),
                CmpPred::Gt => ord == Some(Greater),
                CmpPred::Ge => matches!(ord, Some(Greater | Equal)),
            }
        })
        .collect()
}

/// Elementwise comparison; a bool tile.
pub(crate) fn compare(pred: CmpPred, lhs: &Data, rhs: &Data) -> FaultResult<Data> {
    same_len(lhs, rhs)?;
    Ok(Data::Bool(match (lhs, rhs) {
        (Data::Float(a), Data::Float(b)) => compare_with(pred, a, b, |x: f32, y| x.partial_cmp(&y)),
        (Data::F64(a), Data::F64(b)) => compare_with(pred, a, b, |x: f64, y| x.partial_cmp(&y)),
        (Data::Int(a), Data::Int(b)) => compare_with(pred, a, b, |x: i64, y| Some(x.cmp(&y))),
        (Data::Bool(a), Data::Bool(b)) => compare_with(pred, a, b, |x: bool, y| Some(x.cmp(&y))),
        (Data::Ptr(a), Data::Ptr(b)) => compare_with(pred, a, b, |x, y| {
            Some((x.buffer.0, x.byte_offset).cmp(&(y.buffer.0, y.byte_offset)))
        }),
        _ => return Err(mismatch("compare")),
    }))
}

/// `cond ? on_true : on_false` per element (`cond` may be a single element).
pub(crate) fn select(cond: &[bool], on_true: &Data, on_false: &Data) -> FaultResult<Data> {
    same_len(on_true, on_false)?;
    let n = on_true.len();
    check_lanes(cond.len(), n, "select condition")?;
    let lane = |i: usize| if cond.len() == 1 { cond[0] } else { cond[i] };
    fn pick<T: Copy>(n: usize, lane: impl Fn(usize) -> bool, t: &[T], f: &[T]) -> Vec<T> {
        (0..n).map(|i| if lane(i) { t[i] } else { f[i] }).collect()
    }
    Ok(match (on_true, on_false) {
        (Data::Float(t), Data::Float(f)) => Data::Float(pick(n, lane, t, f)),
        (Data::F64(t), Data::F64(f)) => Data::F64(pick(n, lane, t, f)),
        (Data::Int(t), Data::Int(f)) => Data::Int(pick(n, lane, t, f)),
        (Data::Bool(t), Data::Bool(f)) => Data::Bool(pick(n, lane, t, f)),
        (Data::Ptr(t), Data::Ptr(f)) => Data::Ptr(pick(n, lane, t, f)),
        _ => return Err(mismatch("select")),
    })
}

/// `a * b + c` rounded once to `ty`.
pub(crate) fn fma(ty: ScalarType, a: &Data, b: &Data, c: &Data) -> FaultResult<Data> {
    same_len(a, b)?;
    same_len(a, c)?;
    Ok(match (a, b, c) {
        (Data::Float(a), Data::Float(b), Data::Float(c)) => Data::Float(if ty == ScalarType::F32 {
            (0..a.len()).map(|i| a[i].mul_add(b[i], c[i])).collect()
        } else {
            (0..a.len())
                .map(|i| {
                    round_f64(
                        ty,
                        f64::from(a[i]).mul_add(f64::from(b[i]), f64::from(c[i])),
                    )
                })
                .collect()
        }),
        (Data::F64(a), Data::F64(b), Data::F64(c)) => {
            Data::F64((0..a.len()).map(|i| a[i].mul_add(b[i], c[i])).collect())
        }
        (Data::Int(a), Data::Int(b), Data::Int(c)) => Data::Int(
            (0..a.len())
                .map(|i| wrap_int(ty, a[i].wrapping_mul(b[i]).wrapping_add(c[i])))
                .collect(),
        ),
        _ => return Err(mismatch("fma")),
    })
}

/// Conversion between element types (see `OpKind::Cast`).
pub(crate) fn cast(from: Elem, to: Elem, value: &Data) -> FaultResult<Data> {
    let (src, dst) = match (from, to) {
        (Elem::Ptr(..), Elem::Ptr(..)) => return Ok(value.clone()),
        (Elem::Ptr(..), Elem::Scalar(ScalarType::I64)) => {
            let Data::Ptr(ptrs) = value else {
                return Err(mismatch("cast"));
            };
            return Ok(Data::Int(ptrs.iter().map(|p| p.address()).collect()));
        }
        (Elem::Scalar(ScalarType::I64), Elem::Ptr(..)) => {
            let Data::Int(addresses) = value else {
                return Err(mismatch("cast"));
            };
            return Ok(Data::Ptr(
                addresses.iter().map(|&a| Ptr::from_address(a)).collect(),
            ));
        }
        (Elem::Scalar(s), Elem::Scalar(d)) => (s, d),
        _ => return Err(Fault::malformed("cast between pointers and numbers")),
    };
    Ok(match (value, Repr::of_scalar(dst)) {
        (Data::Float(v), Repr::Float) => Data::Float(if src == dst {
            v.clone()
        } else {
            v.iter().map(|&x| round_f32(dst, x)).collect()
        }),
        (Data::Float(v), Repr::Int) => {
            Data::Int(v.iter().map(|&x| float_to_int_sat(dst, x)).collect())
        }
        (Data::Float(v), Repr::Bool) => Data::Bool(v.iter().map(|&x| x != 0.0).collect()),
        (Data::Int(v), Repr::Float) => {
            Data::Float(v.iter().map(|&x| i64_to_float(dst, x)).collect())
        }
        (Data::Int(v), Repr::Int) => Data::Int(v.iter().map(|&x| wrap_int(dst, x)).collect()),
        (Data::Int(v), Repr::Bool) => Data::Bool(v.iter().map(|&x| x != 0).collect()),
        (Data::Bool(v), Repr::Float) => {
            Data::Float(v.iter().map(|&x| f32::from(u8::from(x))).collect())
        }
        (Data::Bool(v), Repr::Int) => Data::Int(v.iter().map(|&x| i64::from(x)).collect()),
        (Data::Bool(v), Repr::Bool) => Data::Bool(v.clone()),
        (Data::F64(v), Repr::F64) => Data::F64(v.clone()),
        (Data::F64(v), Repr::Float) => {
            Data::Float(v.iter().map(|&x| f64_to_narrow(dst, x)).collect())
        }
        (Data::F64(v), Repr::Int) => Data::Int(v.iter().map(|&x| f64_to_int_sat(dst, x)).collect()),
        (Data::F64(v), Repr::Bool) => Data::Bool(v.iter().map(|&x| x != 0.0).collect()),
        (Data::Float(v), Repr::F64) => Data::F64(v.iter().map(|&x| f64::from(x)).collect()),
        // `as` rounds to nearest even (every canonical value is exact in i64).
        (Data::Int(v), Repr::F64) => Data::F64(v.iter().map(|&x| x as f64).collect()),
        (Data::Bool(v), Repr::F64) => {
            Data::F64(v.iter().map(|&x| f64::from(u8::from(x))).collect())
        }
        _ => return Err(mismatch("cast")),
    })
}

/// An f64 rounded to a narrower float type `ty` as the GPU's code does:
/// once for f32, f16 and bf16; through f32 for fp8 (what `cvt` offers).
fn f64_to_narrow(ty: ScalarType, x: f64) -> f32 {
    match ty {
        ScalarType::F8E4M3 | ScalarType::F8E5M2 => round_f32(ty, x as f32),
        _ => round_f64(ty, x),
    }
}

/// The same bits read as another element type of the same size.
pub(crate) fn bitcast(from: ScalarType, to: ScalarType, value: &Data) -> FaultResult<Data> {
    if from.size_bytes() != to.size_bytes() {
        return Err(Fault::malformed(format!(
            "bitcast from {from} to {to} changes the size"
        )));
    }
    let mask = u64::MAX >> (64 - 8 * from.size_bytes());
    let bits: Vec<u64> = match value {
        Data::Float(v) => v.iter().map(|&x| float_to_bits(from, x)).collect(),
        Data::F64(v) => v.iter().map(|&x| x.to_bits()).collect(),
        Data::Int(v) => v.iter().map(|&x| (x as u64) & mask).collect(),
        Data::Bool(v) => v.iter().map(|&x| u64::from(x)).collect(),
        Data::Ptr(_) | Data::Handle(_) => return Err(Fault::malformed("bitcast of a pointer")),
    };
    Ok(match Repr::of_scalar(to) {
        Repr::Float => Data::Float(bits.iter().map(|&b| float_from_bits(to, b)).collect()),
        Repr::F64 => Data::F64(bits.iter().map(|&b| f64::from_bits(b)).collect()),
        Repr::Int => Data::Int(bits.iter().map(|&b| int_from_bits(to, b)).collect()),
        Repr::Bool => Data::Bool(bits.iter().map(|&b| b != 0).collect()),
    })
}

/// `x`, or a zero of its sign when it is subnormal.
fn flush_subnormal(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    fn ints(d: FaultResult<Data>) -> Vec<i64> {
        match d {
            Ok(Data::Int(v)) => v,
            other => panic!("expected ints, got {other:?}"),
        }
    }

    fn floats(d: FaultResult<Data>) -> Vec<f32> {
        match d {
            Ok(Data::Float(v)) => v,
            other => panic!("expected floats, got {other:?}"),
        }
    }

    fn bools(d: FaultResult<Data>) -> Vec<bool> {
        match d {
            Ok(Data::Bool(v)) => v,
            other => panic!("expected bools, got {other:?}"),
        }
    }

    #[test]
    fn integer_ops_wrap_and_follow_c() {
        let a = Data::Int(vec![i64::from(i32::MAX), -7, 7, -8]);
        let b = Data::Int(vec![1, 2, -2, 1]);
        assert_eq!(
            ints(binary(BinaryOp::Add, I32, &a, &b)),
            vec![i64::from(i32::MIN), -5, 5, -7]
        );
        assert_eq!(ints(binary(BinaryOp::Div, I32, &a, &b))[1..], [-3, -3, -8]);
        assert_eq!(ints(binary(BinaryOp::Rem, I32, &a, &b))[1..], [-1, 1, 0]);
        assert_eq!(
            ints(binary(BinaryOp::Mul, I32, &a, &b)),
            vec![i64::from(i32::MAX), -14, -14, -8]
        );
        let big = Data::Int(vec![i64::from(i32::MAX)]);
        assert_eq!(ints(binary(BinaryOp::Mul, I32, &big, &big)), vec![1]);
        assert_eq!(
            ints(binary(BinaryOp::Max, I32, &a, &b)),
            vec![i64::from(i32::MAX), 2, 7, 1]
        );
        assert_eq!(
            ints(binary(BinaryOp::Min, I32, &a, &b)),
            vec![1, -7, -2, -8]
        );
        assert_eq!(ints(binary(BinaryOp::And, I32, &a, &b))[1], -7 & 2);
        assert_eq!(ints(binary(BinaryOp::Or, I32, &a, &b))[1], -7 | 2);
        assert_eq!(ints(binary(BinaryOp::Xor, I32, &a, &b))[1], -7 ^ 2);
        let zero = Data::Int(vec![1, 0, 1, 1]);
        assert_eq!(
            binary(BinaryOp::Div, I32, &a, &zero),
            Err(Fault::DivisionByZero { element: 1 })
        );
        assert_eq!(
            binary(BinaryOp::Rem, I32, &a, &zero),
            Err(Fault::DivisionByZero { element: 1 })
        );
        let u = Data::Int(vec![0, 255]);
        assert_eq!(
            ints(binary(BinaryOp::Sub, U8, &u, &Data::Int(vec![1, 0]))),
            vec![255, 255]
        );
    }

    #[test]
    fn shifts_clamp_at_the_width() {
        let a = Data::Int(vec![-16, -16, 1, 1]);
        let s = Data::Int(vec![2, 40, 31, 32]);
        assert_eq!(ints(binary(BinaryOp::Shr, I32, &a, &s)), vec![-4, -1, 0, 0]);
        assert_eq!(
            ints(binary(BinaryOp::Shl, I32, &a, &s)),
            vec![-64, 0, i64::from(i32::MIN), 0]
        );
        let u = Data::Int(vec![0xffff_fff0, 0xffff_fff0]);
        assert_eq!(
            ints(binary(BinaryOp::Shr, U32, &u, &Data::Int(vec![4, 32]))),
            vec![0x0fff_ffff, 0]
        );
    }

    #[test]
    fn float_ops_round_to_the_element_type() {
        let a = Data::Float(vec![1.0, 2048.0, f32::NAN]);
        let b = Data::Float(vec![2f32.powi(-11), 1.0, 1.0]);
        // f16: 1 + 2^-11 ties to 1; 2048 + 1 ties to 2048.
        assert_eq!(
            floats(binary(BinaryOp::Add, F16, &a, &b))[..2],
            [1.0, 2048.0]
        );
        assert_eq!(
            floats(binary(BinaryOp::Add, F32, &a, &b))[..2],
            [1.0 + 2f32.powi(-11), 2049.0]
        );
        assert!(floats(binary(BinaryOp::Max, F32, &a, &b))[2].is_nan());
        assert!(floats(binary(BinaryOp::Min, F32, &a, &b))[2].is_nan());
        assert_eq!(floats(binary(BinaryOp::Sub, F32, &a, &b))[1], 2047.0);
        assert_eq!(floats(binary(BinaryOp::Mul, BF16, &a, &b))[1], 2048.0);
        let third = floats(binary(
            BinaryOp::Div,
            F16,
            &Data::Float(vec![1.0]),
            &Data::Float(vec![3.0]),
        ));
        assert_eq!(third[0], half::f16::from_f64(1.0 / 3.0).to_f32());
        assert_eq!(
            floats(binary(
                BinaryOp::Rem,
                F32,
                &Data::Float(vec![-7.5]),
                &Data::Float(vec![2.0])
            )),
            vec![-1.5]
        );
        assert!(binary(BinaryOp::Shl, F32, &a, &b).is_err());
    }

    #[test]
    fn unary_ops() {
        let v = Data::Float(vec![4.0, -2.5]);
        assert_eq!(
            floats(unary(UnaryOp::Sqrt, F32, &Data::Float(vec![4.0]))),
            vec![2.0]
        );
        assert_eq!(
            floats(unary(UnaryOp::Rsqrt, F32, &Data::Float(vec![4.0]))),
            vec![0.5]
        );
        assert_eq!(floats(unary(UnaryOp::Neg, F32, &v)), vec![-4.0, 2.5]);
        assert_eq!(floats(unary(UnaryOp::Abs, F32, &v)), vec![4.0, 2.5]);
        assert_eq!(floats(unary(UnaryOp::Floor, F32, &v)), vec![4.0, -3.0]);
        assert_eq!(floats(unary(UnaryOp::Ceil, F32, &v)), vec![4.0, -2.0]);
        assert_eq!(
            floats(unary(UnaryOp::Exp2, F32, &Data::Float(vec![3.0]))),
            vec![8.0]
        );
        assert_eq!(
            floats(unary(UnaryOp::Log2, F32, &Data::Float(vec![8.0]))),
            vec![3.0]
        );
        let e = floats(unary(UnaryOp::Exp, F16, &Data::Float(vec![1.0])))[0];
        assert_eq!(e, half::f16::from_f32(std::f32::consts::E).to_f32());
        assert!((floats(unary(UnaryOp::Log, F32, &Data::Float(vec![1.0])))[0]).abs() < 1e-7);
        assert!((floats(unary(UnaryOp::Sin, F32, &Data::Float(vec![0.0])))[0]).abs() < 1e-7);
        assert_eq!(
            floats(unary(UnaryOp::Cos, F32, &Data::Float(vec![0.0]))),
            vec![1.0]
        );
        assert_eq!(
            ints(unary(
                UnaryOp::Neg,
                I32,
                &Data::Int(vec![i64::from(i32::MIN)])
            )),
            vec![i64::from(i32::MIN)]
        );
        assert_eq!(
            ints(unary(UnaryOp::Not, U8, &Data::Int(vec![0x0f]))),
            vec![0xf0]
        );
        assert_eq!(
            ints(unary(UnaryOp::Abs, I8, &Data::Int(vec![-128, -3]))),
            vec![-128, 3]
        );
        assert_eq!(
            bools(unary(UnaryOp::Not, Bool, &Data::Bool(vec![true]))),
            vec![false]
        );
        assert!(unary(UnaryOp::Exp, I32, &Data::Int(vec![1])).is_err());
    }

    #[test]
    fn comparisons_treat_nan_as_unordered() {
        let a = Data::Float(vec![1.0, f32::NAN, 2.0]);
        let b = Data::Float(vec![1.0, f32::NAN, 1.0]);
        assert_eq!(
            bools(compare(CmpPred::Eq, &a, &b)),
            vec![true, false, false]
        );
        assert_eq!(bools(compare(CmpPred::Ne, &a, &b)), vec![false, true, true]);
        assert_eq!(
            bools(compare(CmpPred::Lt, &a, &b)),
            vec![false, false, false]
        );
        assert_eq!(
            bools(compare(CmpPred::Le, &a, &b)),
            vec![true, false, false]
        );
        assert_eq!(
            bools(compare(CmpPred::Gt, &a, &b)),
            vec![false, false, true]
        );
        assert_eq!(bools(compare(CmpPred::Ge, &a, &b)), vec![true, false, true]);
        let i = Data::Int(vec![-1, 3]);
        let j = Data::Int(vec![0, 3]);
        assert_eq!(bools(compare(CmpPred::Lt, &i, &j)), vec![true, false]);
    }

    #[test]
    fn select_and_fma() {
        let t = Data::Int(vec![1, 2, 3]);
        let f = Data::Int(vec![-1, -2, -3]);
        assert_eq!(ints(select(&[true, false, true], &t, &f)), vec![1, -2, 3]);
        assert_eq!(ints(select(&[false], &t, &f)), vec![-1, -2, -3]);
        assert!(select(&[true, false], &t, &f).is_err());
        // f32 fma rounds once: (1 + 2^-23)^2 - 1 keeps the 2^-46 term.
        let x = 1.0 + f32::EPSILON;
        let r = floats(fma(
            F32,
            &Data::Float(vec![x]),
            &Data::Float(vec![x]),
            &Data::Float(vec![-1.0]),
        ));
        assert_eq!(r[0], 2.0 * f32::EPSILON + f32::EPSILON * f32::EPSILON);
        assert_eq!(
            ints(fma(
                I32,
                &Data::Int(vec![3]),
                &Data::Int(vec![4]),
                &Data::Int(vec![5])
            )),
            vec![17]
        );
    }

    #[test]
    fn casts_between_every_kind() {
        let f = Data::Float(vec![-2.7, 300.5, f32::NAN, 0.0]);
        assert_eq!(
            ints(cast(Elem::Scalar(F32), Elem::Scalar(I32), &f)),
            vec![-2, 300, 0, 0]
        );
        assert_eq!(
            ints(cast(Elem::Scalar(F32), Elem::Scalar(U8), &f)),
            vec![0, 255, 0, 0]
        );
        assert_eq!(
            ints(cast(Elem::Scalar(F32), Elem::Scalar(I8), &f)),
            vec![-2, 127, 0, 0]
        );
        assert_eq!(
            bools(cast(Elem::Scalar(F32), Elem::Scalar(Bool), &f)),
            vec![true, true, true, false]
        );
        let h = floats(cast(
            Elem::Scalar(F32),
            Elem::Scalar(F16),
            &Data::Float(vec![0.1]),
        ));
        assert_eq!(h[0], half::f16::from_f32(0.1).to_f32());
        let b = floats(cast(
            Elem::Scalar(F32),
            Elem::Scalar(BF16),
            &Data::Float(vec![0.1]),
        ));
        assert_eq!(b[0], half::bf16::from_f32(0.1).to_f32());
        let e4 = floats(cast(
            Elem::Scalar(F32),
            Elem::Scalar(F8E4M3),
            &Data::Float(vec![1000.0, 0.3]),
        ));
        assert_eq!(e4, vec![448.0, 0.3125]);
        let e5 = floats(cast(
            Elem::Scalar(F16),
            Elem::Scalar(F8E5M2),
            &Data::Float(vec![0.3]),
        ));
        assert_eq!(e5, vec![0.3125]);
        let up = floats(cast(
            Elem::Scalar(F8E4M3),
            Elem::Scalar(F32),
            &Data::Float(vec![0.3125]),
        ));
        assert_eq!(up, vec![0.3125]);
        let i = Data::Int(vec![-1, 300]);
        assert_eq!(
            ints(cast(Elem::Scalar(I32), Elem::Scalar(U8), &i)),
            vec![255, 44]
        );
        assert_eq!(
            ints(cast(Elem::Scalar(I32), Elem::Scalar(I64), &i)),
            vec![-1, 300]
        );
        assert_eq!(
            ints(cast(Elem::Scalar(I32), Elem::Scalar(U32), &i)),
            vec![0xffff_ffff, 300]
        );
        assert_eq!(
            floats(cast(Elem::Scalar(I32), Elem::Scalar(F16), &i)),
            vec![-1.0, 300.0]
        );
        assert_eq!(
            bools(cast(Elem::Scalar(I32), Elem::Scalar(Bool), &i)),
            vec![true, true]
        );
        let t = Data::Bool(vec![true, false]);
        assert_eq!(
            ints(cast(Elem::Scalar(Bool), Elem::Scalar(I32), &t)),
            vec![1, 0]
        );
        assert_eq!(
            floats(cast(Elem::Scalar(Bool), Elem::Scalar(F32), &t)),
            vec![1.0, 0.0]
        );
        assert!(cast(Elem::global_ptr(F32), Elem::Scalar(I64), &f).is_err());
    }

    #[test]
    fn bitcasts_keep_bits() {
        let f = Data::Float(vec![1.0]);
        assert_eq!(ints(bitcast(F32, I32, &f)), vec![0x3f80_0000]);
        assert!(bitcast(F16, U8, &f).is_err());
        assert_eq!(
            floats(bitcast(I32, F32, &Data::Int(vec![0x3f80_0000]))),
            vec![1.0]
        );
        assert_eq!(
            floats(bitcast(U8, F8E4M3, &Data::Int(vec![0x38]))),
            vec![1.0]
        );
        assert_eq!(
            ints(bitcast(F32, U32, &Data::Float(vec![-0.0]))),
            vec![0x8000_0000]
        );
    }

    #[test]
    fn constants_take_the_result_type() {
        assert_eq!(
            floats(constant(Literal::Float(0.1), Elem::Scalar(F16), 2)),
            vec![half::f16::from_f64(0.1).to_f32(); 2]
        );
        assert_eq!(
            ints(constant(Literal::Int(-1), Elem::Scalar(U8), 1)),
            vec![255]
        );
        assert_eq!(
            bools(constant(Literal::Bool(true), Elem::Scalar(Bool), 1)),
            vec![true]
        );
        assert!(constant(Literal::Int(0), Elem::global_ptr(F32), 1).is_err());
    }
}
