//! Ready-made kernels an application calls without writing one: [`gemm`]
//! (on Blackwell through [`gemm_tcgen05`]; and [`gemm_fp8`], and on
//! Blackwell [`gemm_mxfp8`] and [`gemm_nvfp4`]), [`attention`] (and its backward), [`softmax`],
//! [`rms_norm`] and [`layer_norm`]. Each takes tlx buffers,
//! views or cudarc slices ([`PtrArg`]) holding row-major,
//! contiguous tensors, checks the shape against what they hold
//! ([`Error::InvalidShape`] otherwise), and
//! launches the configuration the call-site autotuner picks for the shape on
//! this GPU (the first one on the CPU interpreter, where the ops run too).
//! Outputs must not overlap inputs: autotuning runs each configuration on
//! the call's own arguments.
//!
//! Each family is a feature of the `tlx` crate, off by default since its
//! kernels are compiled with the crate: `ops-gemm` (`gemm`, `gemm_fp8`, `gemm_mxfp8`, `gemm_nvfp4`),
//! `ops-rows` (`softmax`, `rms_norm`, `layer_norm`), `ops-attention`
//! (`attention`, `attention_backward`), `ops-dist` (the kernels across the
//! ranks of a mesh in [`dist`]), `ops-grouped` (the `grouped_gemm*` family,
//! bf16 and fp8), or `ops`
//! for all of them.
//!
//! ```
//! # fn main() -> Result<(), tlx::Error> {
//! # #[cfg(feature = "ops-rows")] {
//! use tlx::prelude::*;
//!
//! let dev = Device::cpu();
//! let (rows, cols) = (4, 300);
//! let x = dev.upload(&vec![0.5f32; rows * cols])?;
//! let y = dev.alloc::<f32>(rows * cols)?;
//! tlx::ops::softmax(&dev, &x, &y, rows, cols)?;
//! let p = y.download()?;
//! assert!((p[..cols].iter().sum::<f32>() - 1.0).abs() < 1e-5);
//! # }
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "ops-attention")]
mod attention;
#[cfg(feature = "ops-dist")]
pub mod dist;
#[cfg(feature = "ops-gemm")]
mod gemm;
#[cfg(feature = "ops-gemm")]
mod gemm_blackwell;
#[cfg(feature = "ops-gemm")]
mod gemm_fp8;
#[cfg(feature = "ops-gemm")]
mod gemm_scaled;
#[cfg(feature = "ops-grouped")]
mod grouped;
#[cfg(feature = "ops-dist")]
mod reshard;
#[cfg(feature = "ops-rows")]
mod rows;

#[cfg(feature = "ops-attention")]
pub use attention::{
    attention, attention_backward, Attention, AttentionElement, AttentionGrads, AttentionSaved,
    AttentionWorkspace,
};
#[cfg(feature = "ops-gemm")]
pub use gemm::{gemm, gemm_tcgen05, GemmElement};
#[cfg(feature = "ops-gemm")]
pub use gemm_fp8::gemm_fp8;
#[cfg(feature = "ops-gemm")]
pub use gemm_scaled::{gemm_mxfp8, gemm_nvfp4};
#[cfg(feature = "ops-grouped")]
pub use grouped::{
    grouped_gemm, grouped_gemm_fp8, grouped_gemm_fp8_masked, grouped_gemm_fp8_masked_with,
    grouped_gemm_fp8_with, grouped_gemm_general, grouped_gemm_masked, grouped_gemm_masked_with,
    grouped_gemm_with, Fp8Scales, GroupProblem, GroupedKernel,
};
#[cfg(feature = "ops-rows")]
pub use rows::{layer_norm, rms_norm, softmax, RowElement};

use crate::Error;
#[cfg(any(
    feature = "ops-gemm",
    feature = "ops-rows",
    feature = "ops-attention",
    feature = "ops-grouped"
))]
use crate::{args::KernelArg, Element, PtrArg};

/// The largest extent a kernel indexes with its i32 arithmetic.
const MAX_EXTENT: usize = i32::MAX as usize;

/// Checks that `value` holds at least `needed` elements; `what` names it.
#[cfg(any(
    feature = "ops-gemm",
    feature = "ops-rows",
    feature = "ops-attention",
    feature = "ops-grouped"
))]
fn holds<T: Element>(
    op: &'static str,
    what: &str,
    value: &(impl PtrArg<T> + ?Sized),
    needed: usize,
) -> Result<(), Error> {
    let len = match value.kernel_arg() {
        KernelArg::Ptr(p) => p.len(),
        _ => 0,
    };
    if len < needed {
        return Err(Error::InvalidShape {
            op,
            reason: format!("`{what}` holds {len} elements, but the shape needs {needed}"),
        });
    }
    Ok(())
}

/// The extents of `C[m, n] = A[m, k] @ B[k, n]`: each at least 1 and
/// every operand within the kernels' i32 indexing; `m_name` names the
/// rows in messages.
#[cfg(any(feature = "ops-gemm", feature = "ops-dist"))]
fn gemm_extents(
    op: &'static str,
    m_name: &str,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    extents(op, &[(m_name, m), ("k", k)])?;
    extents(op, &[("k", k), ("n", n)])?;
    extents(op, &[(m_name, m), ("n", n)])?;
    Ok(())
}

/// Checks that every extent is at least 1 and that their product fits the
/// kernels' i32 indexing; returns the product.
fn extents(op: &'static str, dims: &[(&str, usize)]) -> Result<usize, Error> {
    let invalid = |reason: String| Err(Error::InvalidShape { op, reason });
    if let Some((name, _)) = dims.iter().find(|(_, d)| *d == 0) {
        return invalid(format!("`{name}` is 0; every extent must be at least 1"));
    }
    let product = dims
        .iter()
        .try_fold(1usize, |p, (_, d)| p.checked_mul(*d))
        .filter(|&p| p <= MAX_EXTENT);
    match product {
        Some(p) => Ok(p),
        None => invalid(format!(
            "{dims:?} spans more than 2^31 - 1 elements, beyond the kernels' 32-bit indexing; \
             split the work into smaller calls"
        )),
    }
}
