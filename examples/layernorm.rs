//! Fused LayerNorm forward over bf16 rows: statistics in f32, one program per
//! row, the row streamed in blocks (it may be far wider than one block).
//!
//! `cargo run --release --example layernorm`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8)])]
fn layernorm<const BLOCK: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    mean_out: Ptr<f32>,
    rstd_out: Ptr<f32>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    let row = program_id(0);
    let x_row = x + row * stride;
    let y_row = y + row * stride;
    // One pass for both moments, shifted by the row's first element so that a
    // large mean does not cancel the variance.
    let shift = load(x_row).to(f32);
    let mut sum1 = zeros([BLOCK], f32);
    let mut sum2 = zeros([BLOCK], f32);
    // The first pass asks L2 to keep the row: the second pass reads it again.
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let mask = cols < n;
        let v = load(x_row + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let v = select(mask, v - shift, 0.0);
        sum1 += v;
        sum2 += v * v;
    }
    let count = n.to(f32);
    let mean_shifted = sum(sum1, axis = 0) / count;
    let var = sum(sum2, axis = 0) / count - mean_shifted * mean_shifted;
    let mean = mean_shifted + shift;
    let rstd = rsqrt(maximum(var, 0.0) + eps);
    store(mean_out + row, mean);
    store(rstd_out + row, rstd);
    // Backwards, so that the blocks read last, the likeliest to be still in
    // L2, are read first; this is the row's last use, and y is not read back.
    let blocks = cdiv(n, BLOCK);
    for i in 0..blocks {
        let cols = (blocks - 1 - i) * BLOCK + arange(0, BLOCK);
        let mask = cols < n;
        let w = load(weight + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let b = load(bias + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let v = load(x_row + cols, mask = mask, eviction_policy = "evict_first").to(f32);
        store(
            y_row + cols,
            ((v - mean) * rstd * w + b).to(bf16),
            mask = mask,
            cache_modifier = ".cs",
        );
    }
}

/// Checks the kernel against a CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let size = Size::for_device(device);
    let (rows, cols) = match size {
        Size::Gpu => (1152, 16384 + 3),
        Size::Interpreter => (24, 5000),
    };
    let eps = 1e-5_f32;
    let mut rng = Rng::fresh("layernorm");
    let to_bf16 = |v: Vec<f32>| v.into_iter().map(bf16::from_f32).collect::<Vec<_>>();
    // A non-zero mean per row, to exercise the shifted moments.
    let x: Vec<bf16> = to_bf16(
        rng.normal_vec(rows * cols)
            .iter()
            .enumerate()
            .map(|(i, v)| v * 2.0 + (i / cols) as f32 * 0.25)
            .collect(),
    );
    let w = to_bf16(rng.uniform_vec(cols, 0.5, 1.5));
    let b = to_bf16(rng.uniform_vec(cols, -0.5, 0.5));
    let (dx, dw, db) = (device.upload(&x)?, device.upload(&w)?, device.upload(&b)?);
    let dy = device.upload(&vec![bf16::NAN; rows * cols])?;
    let dmean = device.upload(&vec![f32::NAN; rows])?;
    let drstd = device.upload(&vec![f32::NAN; rows])?;
    layernorm::<4096>::launch(
        device,
        rows as u32,
        &dx,
        &dy,
        &dw,
        &db,
        &dmean,
        &drstd,
        cols as i32,
        cols as i32,
        eps,
    )?;

    let mut want_y = Vec::with_capacity(rows * cols);
    let mut want_mean = Vec::with_capacity(rows);
    let mut want_rstd = Vec::with_capacity(rows);
    for r in x.chunks(cols) {
        let v: Vec<f64> = r.iter().map(|e| e.to_f64()).collect();
        let mean = v.iter().sum::<f64>() / cols as f64;
        let var = v.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps as f64).sqrt();
        want_mean.push(mean);
        want_rstd.push(rstd);
        want_y.extend(
            v.iter()
                .enumerate()
                .map(|(j, e)| (e - mean) * rstd * w[j].to_f64() + b[j].to_f64()),
        );
    }
    let got_y: Vec<f32> = dy.download()?.iter().map(|e| e.to_f32()).collect();
    common::verdict(
        "layernorm",
        "mean:",
        common::max_rel_error(&dmean.download()?, &want_mean, 1.0),
        1e-4,
    )?;
    common::verdict(
        "layernorm",
        "rstd:",
        common::max_rel_error(&drstd.download()?, &want_rstd, 1e-6),
        1e-4,
    )?;
    // bf16 output: 8 significant bits, so half an ulp is 2^-8 relative; floor 1.0 for values near zero.
    common::verdict(
        "layernorm",
        &format!("{rows}x{cols} y:"),
        common::max_rel_error(&got_y, &want_y, 1.0),
        1.0 / 128.0,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("layernorm", run)
}
