//! mxfp8 GEMM `C = A @ Bᵀ` for Blackwell through `tlx::ops::gemm_mxfp8`,
//! and its nvfp4 variant (`tlx::ops::gemm_nvfp4`: e2m1 values two per byte,
//! a ue4m3 scale per 16), whose kernel (`src/ops/gemm_scaled.rs`) is TLX's
//! `blackwell_gemm_ws_mxfp8` tutorial: A `[M, K]` and B `[N, K]` in e4m3, each 32 consecutive
//! elements of a row along K sharing one ue8m0 exponent (OCP
//! microscaling, `tlx::mx::quantize_mxfp8`), bf16 output. The tasks are
//! `blackwell_gemm_ws`'s: a one-warp producer loads each stage's A and B
//! tiles and their scales with TMA (the scales as 512-byte atoms of 128
//! rows by 4 blocks, `tlx::mx::swizzle_scales`); a one-warp MMA task copies
//! the stage's scales into tensor memory (`tmem_copy`) and issues
//! `async_dot_scaled` (`tcgen05.mma...kind::mxf8f6f4.block_scale`, one per
//! 32 elements of K) into one of two tensor-memory accumulators; the
//! default warp group stores C in column slices with TMA.
//!
//! Built for `sm_100a`, never run on Blackwell silicon here. On a GPU that
//! is not a Blackwell one (an H100, say) it says so and runs on the CPU
//! interpreter, as it does with no GPU.
//!
//! `cargo run --release --features ops-gemm --example blackwell_gemm_mxfp8`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

/// One scaled GEMM's check: its output against the f64 product of the
/// dequantized operands (`a[i * k + p]`, `b[j * k + p]`). The products are
/// exact; the f32 sums and the bf16 output round. The floor is the size of
/// a typical sum, so that cancellation to near zero does not read as a
/// large relative error.
fn check(
    what: &str,
    got: &[f32],
    (m, n, k): (usize, usize, usize),
    a: &[f64],
    b: &[f64],
) -> Outcome {
    let want = common::matmul_f64((m, n, k), |i, p| a[i * k + p], |p, j| b[j * k + p]);
    let typical = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt();
    common::verdict(
        "blackwell_gemm_mxfp8",
        &format!("{what} {m}x{n}x{k}:"),
        common::max_rel_error(got, &want, typical),
        8e-3,
    )
}

/// Checks the mxfp8 GEMM, then its nvfp4 variant, against f64 references
/// of the quantized operands on fresh random inputs spanning several
/// binades per row.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_gemm_mxfp8");
    // Not multiples of the tiles (K a multiple of 32 only).
    let (m, n, k) = match Size::for_device(&device) {
        Size::Gpu => (1000, 1040, 544),
        Size::Interpreter => (200, 264, 160),
    };
    let mut rng = Rng::fresh("blackwell_gemm_mxfp8");
    let mut random = |len: usize| -> Vec<f32> {
        let mantissas = rng.uniform_vec(len, -1.0, 1.0);
        let binades = rng.uniform_vec(len / 32, -6.0, 6.0);
        mantissas
            .iter()
            .enumerate()
            .map(|(i, v)| v * binades[i / 32].round().exp2())
            .collect()
    };
    let (a, b) = (random(m * k), random(n * k));
    let download = |c: &Buffer<bf16>| -> Result<Vec<f32>, tlx::Error> {
        Ok(c.download()?.iter().map(|v| v.to_f32()).collect())
    };

    // mxfp8: e4m3 values, a ue8m0 exponent per 32.
    let mxfp8 = |v: &[f32], rows: usize| -> Result<_, tlx::Error> {
        let (codes, scales) = tlx::mx::quantize_mxfp8(v, rows, k)?;
        let values: Vec<f64> = codes
            .iter()
            .enumerate()
            .map(|(i, c)| f64::from(c.to_f32() * tlx::mx::ue8m0_to_f32(scales[i / 32])))
            .collect();
        let atoms = tlx::mx::swizzle_scales_padded(&scales, (rows, k / 32), 4, 127u8)?;
        Ok((device.upload(&codes)?, device.upload(&atoms)?, values))
    };
    let ((da, dsa, fa), (db, dsb, fb)) = (mxfp8(&a, m)?, mxfp8(&b, n)?);
    let dc = device.upload(&vec![bf16::NAN; m * n])?;
    tlx::ops::gemm_mxfp8(&device, (&da, &dsa), (&db, &dsb), &dc, (m, n, k))?;
    check("mxfp8", &download(&dc)?, (m, n, k), &fa, &fb)?;

    // nvfp4: e2m1 values two per byte, a ue4m3 scale per 16.
    let nvfp4 = |v: &[f32], rows: usize| -> Result<_, tlx::Error> {
        let (packed, scales) = tlx::mx::quantize_nvfp4(v, rows, k)?;
        let values: Vec<f64> = (0..rows * k)
            .map(|i| {
                let code = packed[i / 2] >> (4 * (i % 2));
                f64::from(tlx::mx::e2m1_to_f32(code) * scales[i / 16].to_f32())
            })
            .collect();
        let one = F8E4M3::from_f32(1.0);
        let atoms = tlx::mx::swizzle_scales_padded(&scales, (rows, k / 16), 8, one)?;
        Ok((device.upload(&packed)?, device.upload(&atoms)?, values))
    };
    let ((da, dsa, fa), (db, dsb, fb)) = (nvfp4(&a, m)?, nvfp4(&b, n)?);
    let dc = device.upload(&vec![bf16::NAN; m * n])?;
    tlx::ops::gemm_nvfp4(&device, (&da, &dsa), (&db, &dsb), &dc, (m, n, k))?;
    check("nvfp4", &download(&dc)?, (m, n, k), &fa, &fb)
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_gemm_mxfp8", run)
}
