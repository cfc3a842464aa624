//! A bf16 row centred by a 16-program cluster (non-portable on the GPU: the
//! runtime opts the kernel in), with a register cap, the slice converted to
//! f32 again after the barrier (so it crosses it packed). Shared by
//! `clusters.rs` (interpreter, in CI) and `gpu_differential.rs` (GPU and
//! interpreter).

use tlx::prelude::*;

#[tlx::kernel(configs = [(SLICE = 512, K = 16)], num_warps = 2, ctas_per_cga = 16, maxnreg = 64)]
fn cluster_center<const SLICE: usize, const K: usize>(
    x: Ptr<bf16>,
    partial: Ptr<f32>,
    out: Ptr<f32>,
    n: i32,
) {
    let row = program_id(0) / K;
    let cols = cluster_cta_rank() * SLICE + arange(0, SLICE);
    let v = load(x + row * n + cols);
    store(partial + program_id(0), sum(v.to(f32), axis = 0));
    cluster_barrier();
    let mean = sum(load(partial + row * K + arange(0, K)), axis = 0) / n.to(f32);
    store(out + row * n + cols, v.to(f32) - mean);
}

/// Columns of a row: one slice per program of the cluster.
pub const ROW: usize = 16 * 512;

/// Each row of `x` (rows of [`ROW`]) minus its mean, computed on `dev`;
/// partial sums and output are poisoned with NaN first.
pub fn centre_rows(dev: &Device, x: &[bf16]) -> Result<Vec<f32>, tlx::Error> {
    let rows = x.len() / ROW;
    let dx = dev.upload(x)?;
    let partial = dev.upload(&vec![f32::NAN; rows * 16])?;
    let out = dev.upload(&vec![f32::NAN; rows * ROW])?;
    cluster_center::<512, 16>::launch(dev, (rows * 16) as u32, &dx, &partial, &out, ROW as i32)?;
    out.download()
}

/// Panics, naming `label`, where `got` is not `x` minus its row's mean (f64)
/// to a relative 1e-5.
pub fn check_centred(x: &[bf16], got: &[f32], label: &str) {
    for (r, row) in x.chunks(ROW).enumerate() {
        let mean = row.iter().map(|v| v.to_f64()).sum::<f64>() / ROW as f64;
        for (i, v) in row.iter().enumerate() {
            let want = v.to_f64() - mean;
            let g = f64::from(got[r * ROW + i]);
            let error = (g - want).abs() / want.abs().max(1.0);
            assert!(error < 1e-5, "{label}: row {r} column {i}: {g} vs {want}");
        }
    }
}
