//! Tiled f16 matmul `C = A @ B` with block-level `dot` on tensor cores and
//! f32 accumulation; edges handled by masks, so any M, N, K work.
//!
//! `cargo run --release --example matmul`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(configs = [
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 32, num_warps = 8),
    (BLOCK_M = 64, BLOCK_N = 64, BLOCK_K = 32, num_warps = 4, num_stages = 3),
])]
fn matmul<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a: Ptr<f16>,
    b: Ptr<f16>,
    c: Ptr<f16>,
    m: i32,
    n: i32,
    k: i32,
    stride_am: i32,
    stride_bk: i32,
    stride_cm: i32,
) {
    let offs_m = program_id(0) * BLOCK_M + arange(0, BLOCK_M);
    let offs_n = program_id(1) * BLOCK_N + arange(0, BLOCK_N);
    let offs_k = arange(0, BLOCK_K);
    let rows_ok = offs_m[(.., None)] < m;
    let cols_ok = offs_n[(None, ..)] < n;
    let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
    for k0 in (0..k).step_by(BLOCK_K) {
        let ks = k0 + offs_k;
        let a_tile = load(
            a + offs_m[(.., None)] * stride_am + ks[(None, ..)],
            mask = rows_ok & (ks[(None, ..)] < k),
            other = 0.0,
        );
        let b_tile = load(
            b + ks[(.., None)] * stride_bk + offs_n[(None, ..)],
            mask = (ks[(.., None)] < k) & cols_ok,
            other = 0.0,
        );
        acc = dot(a_tile, b_tile, acc);
    }
    store(
        c + offs_m[(.., None)] * stride_cm + offs_n[(None, ..)],
        acc.to(f16),
        mask = rows_ok & cols_ok,
    );
}

/// Checks the kernel against a CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let size = Size::for_device(device);
    // Not multiples of the tile sizes, so the masks matter.
    let (m, n, k) = match size {
        Size::Gpu => (1000, 1030, 520),
        Size::Interpreter => (130, 100, 72),
    };
    let mut rng = Rng::fresh("matmul");
    let a: Vec<f16> = rng
        .uniform_vec(m * k, -1.0, 1.0)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let b: Vec<f16> = rng
        .uniform_vec(k * n, -1.0, 1.0)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let (da, db) = (device.upload(&a)?, device.upload(&b)?);
    let dc = device.upload(&vec![f16::NAN; m * n])?;
    let grid = ((m as u32).div_ceil(64), (n as u32).div_ceil(64), 1);
    matmul::<64, 64, 32>::launch(
        device, grid, &da, &db, &dc, m as i32, n as i32, k as i32, k as i32, n as i32, n as i32,
    )?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let want = common::matmul_f64(
        (m, n, k),
        |i, p| a[i * k + p].to_f64(),
        |p, j| b[p * n + j].to_f64(),
    );
    // f16 output: half an ulp is 2^-11 relative; floor 1.0 for sums near zero.
    common::verdict(
        "matmul",
        &format!("{m}x{n}x{k}:"),
        common::max_rel_error(&got, &want, 1.0),
        2e-3,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("matmul", run)
}
