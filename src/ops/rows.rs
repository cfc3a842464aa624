//! Row-wise ops over `[rows, cols]` tensors, one program per row, any
//! number of columns (the row is walked in blocks): [`softmax`],
//! [`rms_norm`] and [`layer_norm`], in f32, bf16 or f16, computed in f32.

use crate::prelude::*;
use crate::{Element, PtrArg};

/// Element types the row-wise ops take: `f32`, `bf16` and `f16`.
pub trait RowElement: Element + sealed::Sealed {}

impl RowElement for f32 {}
impl RowElement for bf16 {}
impl RowElement for f16 {}

mod sealed {
    use crate::{Device, Error, PtrArg};

    /// What one row-wise op is asked to do.
    pub enum Row<'a, P> {
        Softmax,
        RmsNorm {
            weight: &'a P,
            eps: f32,
        },
        LayerNorm {
            weight: &'a P,
            bias: &'a P,
            eps: f32,
        },
    }

    /// The kernels of one element type.
    pub trait Sealed: crate::Element {
        fn launch<P: PtrArg<Self>>(
            device: &Device,
            op: Row<'_, P>,
            operands: (&P, &P),
            shape: (usize, usize),
        ) -> Result<(), Error>;
    }
}

use sealed::Row;

/// Checks a `[rows, cols]` op's operands; `params` are its per-column
/// vectors (weight, bias).
fn check<T: Element, P: PtrArg<T>>(
    op: &'static str,
    (x, y): (&P, &P),
    params: &[(&str, &P)],
    (rows, cols): (usize, usize),
) -> Result<(), Error> {
    let n = super::extents(op, &[("rows", rows), ("cols", cols)])?;
    super::holds(op, "x", x, n)?;
    super::holds(op, "y", y, n)?;
    for (name, p) in params {
        super::holds(op, name, *p, cols)?;
    }
    Ok(())
}

/// `y = softmax(x)` along each row of `[rows, cols]` (row-major,
/// contiguous): `exp(x - max) / sum(exp(x - max))`.
pub fn softmax<T: RowElement, P: PtrArg<T>>(
    device: &Device,
    x: &P,
    y: &P,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    check("softmax", (x, y), &[], (rows, cols))?;
    T::launch(device, Row::Softmax, (x, y), (rows, cols))
}

/// `y = x / sqrt(mean(x^2) + eps) * weight` along each row of
/// `[rows, cols]`; `weight` has `cols` elements.
pub fn rms_norm<T: RowElement, P: PtrArg<T>>(
    device: &Device,
    x: &P,
    weight: &P,
    y: &P,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<(), Error> {
    check("rms_norm", (x, y), &[("weight", weight)], (rows, cols))?;
    T::launch(device, Row::RmsNorm { weight, eps }, (x, y), (rows, cols))
}

/// `y = (x - mean) / sqrt(var + eps) * weight + bias` along each row of
/// `[rows, cols]` (biased variance, as in PyTorch); `weight` and `bias`
/// have `cols` elements.
pub fn layer_norm<T: RowElement, P: PtrArg<T>>(
    device: &Device,
    x: &P,
    (weight, bias): (&P, &P),
    y: &P,
    (rows, cols): (usize, usize),
    eps: f32,
) -> Result<(), Error> {
    let params = [("weight", weight), ("bias", bias)];
    check("layer_norm", (x, y), &params, (rows, cols))?;
    let op = Row::LayerNorm { weight, bias, eps };
    T::launch(device, op, (x, y), (rows, cols))
}

macro_rules! row_kernels {
    ($t:ident, $softmax:ident, $rms:ident, $layer:ident) => {
        /// Softmax. A row of one block is read once and kept in registers;
        /// a longer one in two passes: a running maximum and a sum rescaled
        /// to it per lane, combined at the end (the row asked to stay in L2
        /// for the second pass), then the normalized values.
        #[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)], key = [cols])]
        fn $softmax<const BLOCK: usize>(x: Ptr<$t>, y: Ptr<$t>, cols: i32) {
            let (xr, yr) = (x + program_id(0) * cols, y + program_id(0) * cols);
            if cols <= BLOCK {
                let c = arange(0, BLOCK);
                let mask = c < cols;
                let v = load(xr + c, mask = mask, other = 0.0).to(f32);
                let v = select(mask, v, -3.0e38);
                let e = exp(v - max(v, axis = 0));
                // One division per row, a multiply per element.
                let inv = 1.0 / sum(e, axis = 0);
                store(yr + c, (e * inv).to($t), mask = mask);
            } else {
                // Finite, so that lanes no column reaches never meet inf - inf.
                let lowest = -3.0e38;
                let mut m = full([BLOCK], lowest, f32);
                let mut s = zeros([BLOCK], f32);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_last",
                    );
                    let v = select(mask, v.to(f32), lowest);
                    let top = maximum(m, v);
                    s = s * exp(m - top) + select(mask, exp(v - top), 0.0);
                    m = top;
                }
                let row_max = max(m, axis = 0);
                let inv = 1.0 / sum(s * exp(m - row_max), axis = 0);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_first",
                    );
                    store(yr + c, (exp(v.to(f32) - row_max) * inv).to($t), mask = mask);
                }
            }
        }

        /// RMSNorm: the mean square, then the scaled row; one read of a row
        /// of one block, two of a longer one.
        #[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)], key = [cols])]
        fn $rms<const BLOCK: usize>(x: Ptr<$t>, w: Ptr<$t>, y: Ptr<$t>, cols: i32, eps: f32) {
            let (xr, yr) = (x + program_id(0) * cols, y + program_id(0) * cols);
            if cols <= BLOCK {
                let c = arange(0, BLOCK);
                let mask = c < cols;
                let v = load(xr + c, mask = mask, other = 0.0).to(f32);
                let scale = rsqrt(sum(v * v, axis = 0) / cols.to(f32) + eps);
                let g = load(w + c, mask = mask, other = 0.0).to(f32);
                store(yr + c, (v * scale * g).to($t), mask = mask);
            } else {
                let mut squares = zeros([BLOCK], f32);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let v = load(
                        xr + c,
                        mask = c < cols,
                        other = 0.0,
                        eviction_policy = "evict_last",
                    );
                    let v = v.to(f32);
                    squares += v * v;
                }
                let scale = rsqrt(sum(squares, axis = 0) / cols.to(f32) + eps);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_first",
                    );
                    let g = load(w + c, mask = mask, other = 0.0).to(f32);
                    store(yr + c, (v.to(f32) * scale * g).to($t), mask = mask);
                }
            }
        }

        /// LayerNorm: both moments in one pass, shifted by the row's first
        /// element so that a large mean does not cancel the variance; one
        /// read of a row of one block, two of a longer one.
        #[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)], key = [cols])]
        fn $layer<const BLOCK: usize>(
            x: Ptr<$t>,
            w: Ptr<$t>,
            b: Ptr<$t>,
            y: Ptr<$t>,
            cols: i32,
            eps: f32,
        ) {
            let (xr, yr) = (x + program_id(0) * cols, y + program_id(0) * cols);
            let shift = load(xr).to(f32);
            let count = cols.to(f32);
            if cols <= BLOCK {
                let c = arange(0, BLOCK);
                let mask = c < cols;
                let v = load(xr + c, mask = mask, other = 0.0).to(f32);
                let d = select(mask, v - shift, 0.0);
                let mean_shifted = sum(d, axis = 0) / count;
                let var = sum(d * d, axis = 0) / count - mean_shifted * mean_shifted;
                let rstd = rsqrt(maximum(var, 0.0) + eps);
                let g = load(w + c, mask = mask, other = 0.0).to(f32);
                let h = load(b + c, mask = mask, other = 0.0).to(f32);
                store(
                    yr + c,
                    ((d - mean_shifted) * rstd * g + h).to($t),
                    mask = mask,
                );
            } else {
                let mut sum1 = zeros([BLOCK], f32);
                let mut sum2 = zeros([BLOCK], f32);
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_last",
                    );
                    let d = select(mask, v.to(f32) - shift, 0.0);
                    sum1 += d;
                    sum2 += d * d;
                }
                let mean_shifted = sum(sum1, axis = 0) / count;
                let var = sum(sum2, axis = 0) / count - mean_shifted * mean_shifted;
                let rstd = rsqrt(maximum(var, 0.0) + eps);
                let mean = mean_shifted + shift;
                for off in (0..cols).step_by(BLOCK) {
                    let c = off + arange(0, BLOCK);
                    let mask = c < cols;
                    let v = load(
                        xr + c,
                        mask = mask,
                        other = 0.0,
                        eviction_policy = "evict_first",
                    );
                    let g = load(w + c, mask = mask, other = 0.0).to(f32);
                    let h = load(b + c, mask = mask, other = 0.0).to(f32);
                    store(
                        yr + c,
                        ((v.to(f32) - mean) * rstd * g + h).to($t),
                        mask = mask,
                    );
                }
            }
        }

        impl sealed::Sealed for $t {
            fn launch<P: PtrArg<Self>>(
                device: &Device,
                op: Row<'_, P>,
                (x, y): (&P, &P),
                (rows, cols): (usize, usize),
            ) -> Result<(), Error> {
                let grid = rows as u32;
                let cols = cols as i32;
                match op {
                    Row::Softmax => $softmax::autotune(device, |_| grid, x, y, cols).map(|_| ()),
                    Row::RmsNorm { weight, eps } => {
                        $rms::autotune(device, |_| grid, x, weight, y, cols, eps).map(|_| ())
                    }
                    Row::LayerNorm { weight, bias, eps } => {
                        $layer::autotune(device, |_| grid, x, weight, bias, y, cols, eps)
                            .map(|_| ())
                    }
                }
            }
        }
    };
}

row_kernels!(f32, softmax_f32, rms_norm_f32, layer_norm_f32);
row_kernels!(bf16, softmax_bf16, rms_norm_bf16, layer_norm_bf16);
row_kernels!(f16, softmax_f16, rms_norm_f16, layer_norm_f16);
