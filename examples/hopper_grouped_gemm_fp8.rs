//! fp8 grouped GEMM for a mixture-of-experts layer with
//! `tlx::ops::grouped_gemm_fp8`: the tokens routed to each expert sorted into
//! one e4m3 `[m_total, k]` tensor with a dequantization scale per row, each
//! expert's weights transposed (`[n, k]`, K-major as fp8 wgmma reads them)
//! with a scale per output column, bf16 out, and the group offsets on the
//! device (the host never reads them). Group sizes skewed as a router's
//! are (busy experts, empty ones, ones smaller than a tile); checked against
//! an f64 reference of the dequantized product.
//!
//! `cargo run --release --features ops-grouped --example hopper_grouped_gemm_fp8`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

/// Tokens per expert: about `1 / (e + 1)` of the busiest's share, every
/// third expert empty.
fn group_sizes(rng: &mut Rng, experts: usize, busiest: usize) -> Vec<usize> {
    (0..experts)
        .map(|e| {
            if e % 3 == 2 {
                return 0;
            }
            (busiest as f32 / (e + 1) as f32 * rng.uniform(0.5, 1.0)) as usize
        })
        .collect()
}

/// Checks the op against an f64 reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let (experts, busiest, n, k) = match Size::for_device(device) {
        Size::Gpu => (12, 3000, 1024, 1024),
        Size::Interpreter => (5, 140, 40, 32),
    };
    let mut rng = Rng::fresh("hopper_grouped_gemm_fp8");
    let sizes = group_sizes(&mut rng, experts, busiest);
    let m_total: usize = sizes.iter().sum();
    let mut offsets = vec![0i32];
    for s in &sizes {
        offsets.push(offsets[offsets.len() - 1] + *s as i32);
    }
    // Whole numbers: Hopper's fp8 tensor cores add their products with
    // fewer bits than f32 (DeepSeek-V3's report measures about 14), so sums of
    // fractions over K = 1024 drift by ~1e-2 of a small result (measured on
    // an H100: 1.4e-2); whole-number sums stay exact, and the check sees
    // only the kernel (scales applied in f32, one bf16 rounding).
    let to_fp8 = |v: Vec<f32>| -> Vec<F8E4M3> {
        v.into_iter().map(|x| F8E4M3::from_f32(x.round())).collect()
    };
    let a = to_fp8(rng.uniform_vec(m_total * k, -3.0, 3.0));
    let b_t = to_fp8(rng.uniform_vec(experts * n * k, -3.0, 3.0));
    let scale_a = rng.uniform_vec(m_total, 0.01, 0.02);
    let scale_b = rng.uniform_vec(experts * n, 0.01, 0.02);
    let (da, db) = (device.upload(&a)?, device.upload(&b_t)?);
    let (dsa, dsb) = (device.upload(&scale_a)?, device.upload(&scale_b)?);
    let dc = device.upload(&vec![bf16::NAN; m_total * n])?;
    let doff = device.upload(&offsets)?;
    let shape = (m_total, n, k, experts);
    tlx::ops::grouped_gemm_fp8(device, (&da, &dsa), (&db, &dsb), &dc, &doff, shape)?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let mut want = vec![0.0f64; m_total * n];
    for e in 0..experts {
        let rows = offsets[e] as usize..offsets[e + 1] as usize;
        let part = common::matmul_f64(
            (rows.len(), n, k),
            |i, p| f64::from(a[(rows.start + i) * k + p].to_f32()),
            |p, j| f64::from(b_t[(e * n + j) * k + p].to_f32()),
        );
        for (i, row) in rows.clone().enumerate() {
            for j in 0..n {
                let scale = f64::from(scale_a[row]) * f64::from(scale_b[e * n + j]);
                want[row * n + j] = part[i * n + j] * scale;
            }
        }
    }
    // bf16 output: half an ulp is up to 2^-8 of the value; the floor keeps
    // sums near zero (a typical one is about 0.0002 * sqrt(k) * 2) in scale.
    common::verdict(
        "hopper_grouped_gemm_fp8",
        &format!("{experts} experts, sizes {sizes:?}, n {n}, k {k}, rowwise scales:"),
        common::max_rel_error(&got, &want, 0.01),
        1e-2,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_grouped_gemm_fp8", run)
}
