//! mxfp8 GEMM `C = A @ Bᵀ` for Blackwell through `tlx::ops::gemm_mxfp8`,
//! whose kernel (`src/ops/gemm_mxfp8.rs`) is TLX's `blackwell_gemm_ws_mxfp8`
//! tutorial: A `[M, K]` and B `[N, K]` in e4m3, each 32 consecutive
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
//! `cargo run --release --example blackwell_gemm_mxfp8`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

/// Quantizes `[rows, k]` values to mxfp8: the e4m3 values, the exponents
/// (`[rows, k / 32]`) and their atoms, padded to whole atoms with exponent
/// 127 (a scale of 1 for rows and blocks past the matrix, which TMA fills
/// with zeros).
fn quantize(values: &[f32], rows: usize, k: usize) -> (Vec<F8E4M3>, Vec<u8>, Vec<u8>) {
    let (codes, scales) = tlx::mx::quantize_mxfp8(values, rows, k).expect("whole blocks");
    let (padded_rows, blocks) = (rows.div_ceil(128) * 128, k.div_ceil(128) * 4);
    let mut padded = vec![127u8; padded_rows * blocks];
    for r in 0..rows {
        let row = &scales[r * (k / 32)..(r + 1) * (k / 32)];
        padded[r * blocks..r * blocks + k / 32].copy_from_slice(row);
    }
    let atoms = tlx::mx::swizzle_scales(&padded, padded_rows, blocks).expect("whole atoms");
    (codes, scales, atoms)
}

/// Checks the kernel against an f64 reference of the quantized operands on
/// fresh random inputs spanning several binades per row.
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
    let (qa, sa, atoms_a) = quantize(&a, m, k);
    let (qb, sb, atoms_b) = quantize(&b, n, k);
    let (da, db) = (device.upload(&qa)?, device.upload(&qb)?);
    let (dsa, dsb) = (device.upload(&atoms_a)?, device.upload(&atoms_b)?);
    let dc = device.upload(&vec![bf16::NAN; m * n])?;
    tlx::ops::gemm_mxfp8(&device, (&da, &dsa), (&db, &dsb), &dc, (m, n, k))?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let dequant = |q: &[F8E4M3], s: &[u8], i: usize| {
        f64::from(q[i].to_f32()) * f64::from(tlx::mx::ue8m0_to_f32(s[i / 32]))
    };
    let want = common::matmul_f64(
        (m, n, k),
        |i, p| dequant(&qa, &sa, i * k + p),
        |p, j| dequant(&qb, &sb, j * k + p),
    );
    // The products are exact; the f32 sums and the bf16 output round. The
    // floor is the size of a typical sum, so that cancellation to near zero
    // does not read as a large relative error.
    let typical = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt();
    common::verdict(
        "blackwell_gemm_mxfp8",
        &format!("{m}x{n}x{k}:"),
        common::max_rel_error(&got, &want, typical),
        8e-3,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_gemm_mxfp8", run)
}
