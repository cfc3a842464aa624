//! fp8 (e4m3) GEMM `C = scale · A @ B` with bf16 output through
//! `tlx::ops::gemm_fp8`, checked against an f64 CPU reference. The kernel,
//! `src/ops/gemm_fp8.rs`, is the persistent warp-specialized `pipe!` kernel
//! of `hopper_gemm_pipe.rs` on 8-bit inputs: wgmma reads fp8 operands
//! K-major only, so B arrives as its transpose `[N, K]` and the consumers
//! multiply by `local_trans` of its stage buffer, a `[K, N]` view of the
//! same bytes (TLX's idiom); K steps by 32 per instruction
//! (`m64n256k32.f32.e4m3.e4m3`).
//!
//! `cargo run --release --example hopper_gemm_fp8`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    // Not multiples of the tiles; rows stay multiples of 16 bytes for TMA.
    let (m, n, k) = match Size::for_device(device) {
        Size::Gpu => (1000, 1040, 528),
        Size::Interpreter => (200, 304, 272),
    };
    let mut rng = Rng::fresh("hopper_gemm_fp8");
    // Small integers: exact in e4m3 and in their products, and sums small
    // enough (|C| <= 4K) that wgmma's fp8 accumulation, which keeps fewer
    // mantissa bits than f32 (its "fast accumulation"), loses nothing, so
    // the check sees data movement, not that rounding.
    let mut random = |len: usize| -> Vec<F8E4M3> {
        rng.uniform_vec(len, -2.5, 2.5)
            .into_iter()
            .map(|x| F8E4M3::from_f32(x.round()))
            .collect()
    };
    let (a, bt) = (random(m * k), random(n * k));
    let (da, dbt) = (device.upload(&a)?, device.upload(&bt)?);
    let dc = device.upload(&vec![bf16::NAN; m * n])?;
    // A power of two: the scaled sums stay exact before bf16 rounding.
    let scale = 0.5;
    tlx::ops::gemm_fp8(device, &da, &dbt, &dc, (m, n, k), scale)?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let want: Vec<f64> = common::matmul_f64(
        (m, n, k),
        |i, p| f64::from(a[i * k + p].to_f32()),
        |p, j| f64::from(bt[j * k + p].to_f32()),
    )
    .into_iter()
    .map(|x| x * f64::from(scale))
    .collect();
    // Exact sums, rounded once to bf16 (2^-8 relative).
    common::verdict(
        "hopper_gemm_fp8",
        &format!("{m}x{n}x{k}:"),
        common::max_rel_error(&got, &want, 1.0),
        8e-3,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_gemm_fp8", run)
}
