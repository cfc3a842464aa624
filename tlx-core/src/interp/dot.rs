//! `dot`: `acc + a @ b` on rank-2 tiles. Float inputs multiply exactly in
//! f32 (f32 inputs are first rounded to tf32 unless the precision is IEEE)
//! and accumulate in f32 in k order; i8 inputs accumulate in wrapping i32.

use crate::ir::{DotPrecision, ScalarType};
use crate::numeric::{round_f32, round_tf32_rna, wrap_int};

use super::error::{Fault, FaultResult};
use super::value::{Data, Tensor};

/// `(m, k, n)` of a well-formed dot.
fn dims(a: &Tensor, b: &Tensor, acc: &Tensor) -> FaultResult<(usize, usize, usize)> {
    match (a.shape.as_slice(), b.shape.as_slice(), acc.shape.as_slice()) {
        (&[m, k], &[k2, n], &[m2, n2]) if k == k2 && m == m2 && n == n2 => Ok((m, k, n)),
        _ => Err(Fault::malformed(format!(
            "dot of {:?} x {:?} into {:?}",
            a.shape, b.shape, acc.shape
        ))),
    }
}

/// `c[i][j] += Σ_k a[i][k] * b[k][j]`, row by row so the inner loop is contiguous.
fn matmul_accumulate<T: Copy>(
    a: &[T],
    b: &[T],
    c: &mut [T],
    (m, k, n): (usize, usize, usize),
    mul_add: impl Fn(T, T, T) -> T,
) {
    for i in 0..m {
        let c_row = &mut c[i * n..(i + 1) * n];
        for kk in 0..k {
            let a_ik = a[i * k + kk];
            let b_row = &b[kk * n..(kk + 1) * n];
            for (c_ij, &b_kj) in c_row.iter_mut().zip(b_row) {
                *c_ij = mul_add(a_ik, b_kj, *c_ij);
            }
        }
    }
}

/// `acc + a @ b`; `input_ty` is the element type of `a` and `b`, `acc_ty` the accumulator's.
pub(crate) fn dot(
    a: &Tensor,
    b: &Tensor,
    acc: &Tensor,
    input_ty: ScalarType,
    acc_ty: ScalarType,
    precision: DotPrecision,
) -> FaultResult<Data> {
    let mkn = dims(a, b, acc)?;
    match (&a.data, &b.data, &acc.data) {
        (Data::Float(av), Data::Float(bv), Data::Float(cv)) => {
            let mut c = cv.clone();
            // Products of f16/bf16/fp8 (and tf32) values are exact in f32, so
            // multiply-then-add is one rounding per step, as on tensor cores.
            if input_ty == ScalarType::F32 && precision == DotPrecision::Tf32 {
                let at: Vec<f32> = av.iter().map(|&x| round_tf32_rna(x)).collect();
                let bt: Vec<f32> = bv.iter().map(|&x| round_tf32_rna(x)).collect();
                matmul_accumulate(&at, &bt, &mut c, mkn, |x, y, s| s + x * y);
            } else {
                matmul_accumulate(av, bv, &mut c, mkn, |x, y, s| s + x * y);
            }
            if acc_ty != ScalarType::F32 {
                c.iter_mut().for_each(|x| *x = round_f32(acc_ty, *x));
            }
            Ok(Data::Float(c))
        }
        (Data::Int(av), Data::Int(bv), Data::Int(cv)) => {
            let mut c = cv.clone();
            matmul_accumulate(av, bv, &mut c, mkn, |x, y, s| {
                s.wrapping_add(x.wrapping_mul(y))
            });
            c.iter_mut().for_each(|x| *x = wrap_int(acc_ty, *x));
            Ok(Data::Int(c))
        }
        _ => Err(Fault::malformed(
            "dot operands of mixed or non-numeric types",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: Vec<usize>, data: Data) -> Tensor {
        Tensor { shape, data }
    }

    #[test]
    fn small_float_and_int_products() {
        let a = t(vec![2, 2], Data::Float(vec![1.0, 2.0, 3.0, 4.0]));
        let b = t(vec![2, 1], Data::Float(vec![5.0, 6.0]));
        let c = t(vec![2, 1], Data::Float(vec![0.5, 0.0]));
        let r = dot(
            &a,
            &b,
            &c,
            ScalarType::F16,
            ScalarType::F32,
            DotPrecision::Tf32,
        );
        assert_eq!(r, Ok(Data::Float(vec![17.5, 39.0])));
        let ai = t(vec![1, 2], Data::Int(vec![-128, 127]));
        let bi = t(vec![2, 1], Data::Int(vec![-128, 127]));
        let ci = t(vec![1, 1], Data::Int(vec![1]));
        let r = dot(
            &ai,
            &bi,
            &ci,
            ScalarType::I8,
            ScalarType::I32,
            DotPrecision::Tf32,
        );
        assert_eq!(r, Ok(Data::Int(vec![16384 + 16129 + 1])));
        assert!(dot(
            &a,
            &a,
            &c,
            ScalarType::F32,
            ScalarType::F32,
            DotPrecision::Ieee
        )
        .is_err());
    }

    #[test]
    fn tf32_rounds_f32_inputs_only_when_asked() {
        let x = 1.0 + 2f32.powi(-12);
        let a = t(vec![1, 1], Data::Float(vec![x]));
        let one = t(vec![1, 1], Data::Float(vec![1.0]));
        let zero = t(vec![1, 1], Data::Float(vec![0.0]));
        let tf32 = dot(
            &a,
            &one,
            &zero,
            ScalarType::F32,
            ScalarType::F32,
            DotPrecision::Tf32,
        );
        assert_eq!(tf32, Ok(Data::Float(vec![1.0])));
        let ieee = dot(
            &a,
            &one,
            &zero,
            ScalarType::F32,
            ScalarType::F32,
            DotPrecision::Ieee,
        );
        assert_eq!(ieee, Ok(Data::Float(vec![x])));
    }
}
