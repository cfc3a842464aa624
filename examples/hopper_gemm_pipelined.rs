//! Software-pipelined bf16 GEMM `C = A @ B` with TLX primitives and no warp
//! specialization, as in TLX's Hopper tutorial: every thread issues
//! `cp.async` copies (`async_load`) of A and B tiles into a ring of
//! `NUM_STAGES` shared buffers, `NUM_STAGES - 1` tiles ahead, one commit
//! group per tile; `async_dot` multiplies a tile in place on the tensor cores
//! while the next ones land, keeping one wgmma group in flight so that a
//! slot is refilled only once the group reading it is done. Masks zero-fill
//! the edges, so any M, N, K work.
//!
//! `cargo run --release --example hopper_gemm_pipelined`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_90a", configs = [
    (BM = 128, BN = 256, BK = 64, NUM_STAGES = 3, num_warps = 8),
])]
pub fn hopper_gemm_pipelined<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<bf16>,
    m: i32,
    n: i32,
    k: i32,
) {
    let (a, b) = (multiple_of(a, 16), multiple_of(b, 16));
    let (n, k) = (multiple_of(n, 8), multiple_of(k, 8));
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let rows = program_id(0) * BM + arange(0, BM);
    let cols = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let k_tiles = cdiv(k, BK);
    // Tile `t` of A and B into slot `t % NUM_STAGES`, as one commit group;
    // tiles past K (and rows and columns past M and N) read zeros.
    for t in 0..NUM_STAGES - 1 {
        let ks = t * BK + rk;
        let slot = t % NUM_STAGES;
        async_load(
            a + rows[(.., None)] * k + ks[(None, ..)],
            local_view(a_bufs, slot),
            mask = (rows[(.., None)] < m) & (ks[(None, ..)] < k),
        );
        async_load(
            b + ks[(.., None)] * n + cols[(None, ..)],
            local_view(b_bufs, slot),
            mask = (ks[(.., None)] < k) & (cols[(None, ..)] < n),
        );
        async_load_commit_group();
    }
    let mut acc = zeros([BM, BN], f32);
    for i in 0..k_tiles {
        // Tile i has landed once at most NUM_STAGES - 2 newer groups are pending.
        async_load_wait_group(NUM_STAGES - 2);
        let slot = i % NUM_STAGES;
        acc = async_dot(local_view(a_bufs, slot), local_view(b_bufs, slot), acc);
        // Tile i - 1's group is done: its slot takes tile i + NUM_STAGES - 1.
        acc = async_dot_wait(1, acc);
        let t = i + NUM_STAGES - 1;
        let ks = t * BK + rk;
        let next = t % NUM_STAGES;
        async_load(
            a + rows[(.., None)] * k + ks[(None, ..)],
            local_view(a_bufs, next),
            mask = (rows[(.., None)] < m) & (ks[(None, ..)] < k),
        );
        async_load(
            b + ks[(.., None)] * n + cols[(None, ..)],
            local_view(b_bufs, next),
            mask = (ks[(.., None)] < k) & (cols[(None, ..)] < n),
        );
        async_load_commit_group();
    }
    acc = async_dot_wait(0, acc);
    async_load_wait_group(0);
    let mask = (rows[(.., None)] < m) & (cols[(None, ..)] < n);
    store(
        c + rows[(.., None)] * n + cols[(None, ..)],
        acc.to(bf16),
        mask = mask,
    );
}

/// `C = A @ B` for row-major bf16 matrices (N and K multiples of 8), on `device`.
pub fn gemm(
    device: &Device,
    a: &Buffer<bf16>,
    b: &Buffer<bf16>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    let grid = ((m as u32).div_ceil(128), (n as u32).div_ceil(256), 1);
    let (m, n, k) = (m as i32, n as i32, k as i32);
    hopper_gemm_pipelined::<128, 256, 64, 3>::launch(device, grid, a, b, c, m, n, k)
}

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let mnk = match Size::for_device(device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (200, 296, 136),
    };
    common::check_bf16_gemms(device, "hopper_gemm_pipelined", mnk, &[("", gemm)])
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_gemm_pipelined", run)
}
