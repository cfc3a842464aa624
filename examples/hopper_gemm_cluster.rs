//! The cooperative warp-specialized bf16 GEMM of `hopper_gemm_ws.rs` on
//! clusters of two programs (TLX's `ctas_per_cga = 2`) that share B: the
//! two programs of a cluster compute vertically adjacent 128x256 tiles of
//! C, which need the same 64x256 B tile at each K step, so each loads only
//! its half of it with TMA and multicasts it into both programs' buffers
//! (`multicast_targets = [rank, peer]`), halving B's traffic from L2.
//!
//! A multicast writes into the peer's shared memory, so a stage may be
//! refilled only when it is free in both programs: each consumer warp group
//! releases a stage in its own program and in the peer's
//! (`barrier_arrive(.., remote_cta_rank = peer)`, "arrive remote, wait
//! local"), so each `empty` barrier counts four arrivals, and a producer
//! that waited on its own knows the stage is free in both. The peer's
//! barriers must be initialized before anyone arrives on them:
//! `fence_mbarrier_init_cluster()` then `cluster_barrier()` at the start.
//! Each program's `full` barrier expects the whole stage (its A halves and
//! both halves of B), half of which the peer's copy brings.
//!
//! Measured (`benches/gemm.rs`, BENCHMARKS.md): 0.65-0.76x cuBLAS on an
//! H100 in sessions 7-8, where every remote arrival was compiled as a
//! release at cluster scope, which ptxas builds from a GPU-wide memory
//! barrier; since session 31 an arrival that publishes no remote store is
//! the plain `shared::cluster` one, and this kernel runs at 0.98-1.03x
//! cuBLAS on GH1-GH6 (H200), the fastest of the bench's kernels at
//! GH1-GH4.
//!
//! `cargo run --release --example hopper_gemm_cluster`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_90a", num_warps = 4, ctas_per_cga = 2, configs = [
    (BM = 128, BN = 256, B_HALF = 128, BK = 64, NUM_STAGES = 3, GROUP_M = 8),
])]
pub fn hopper_gemm_cluster<
    const BM: usize,
    const BN: usize,
    const B_HALF: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<bf16, 64, BK>,
    // Each program copies half of B's tile (`B_HALF` = `BN / 2` columns).
    b_desc: TensorDesc<bf16, BK, B_HALF>,
    c_desc: TensorDesc<bf16, 64, BN>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([64, BK], bf16, 2 * NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let c_bufs = local_alloc([64, BN], bf16, 2);
    let full = alloc_barriers(NUM_STAGES, 1);
    // A stage is free in both programs: both programs' two consumer groups.
    let empty = alloc_barriers(NUM_STAGES, 4);
    // The peer arrives on `empty` and its copies complete on `full`.
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let peer = rank ^ 1;
    let k_tiles = cdiv(k, BK);
    // The cluster's tiles: 2 * BM rows (one BM half per program) by BN.
    let tiles_m = cdiv(m, 2 * BM);
    let tiles_n = cdiv(n, BN);
    let num_tiles = tiles_m * tiles_n;
    let first = program_id(0) / 2;
    let stride = num_programs(0) / 2;
    // A cluster tile's first row and column, GROUP_M tile rows at a time.
    fn tile_origin(tile: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
        let first_m = tile / (GROUP_M * tiles_n) * GROUP_M;
        let rows = minimum(tiles_m - first_m, GROUP_M);
        (
            (first_m + tile % rows) * (2 * BM),
            (tile % (GROUP_M * tiles_n)) / rows * BN,
        )
    }
    async_tasks! {
        task(default, num_regs = 40) {
            for tile in (first..num_tiles).step_by(stride) {
                let (pair_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let off_m = pair_m + rank * BM;
                let done = (tile - first) / stride * k_tiles;
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    let phase = (it / NUM_STAGES) % 2;
                    barrier_wait(local_view(empty, slot), phase ^ 1);
                    let bar = local_view(full, slot);
                    barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(dtype_of(a_desc)));
                    async_descriptor_load(a_desc, local_view(a_bufs, 2 * slot), [off_m, kk * BK], bar);
                    async_descriptor_load(a_desc, local_view(a_bufs, 2 * slot + 1), [off_m + 64, kk * BK], bar);
                    // My half of B lands in the peer's stage too, which `empty` says is free.
                    let half = local_slice(local_view(b_bufs, slot), [0, rank * B_HALF], [BK, B_HALF]);
                    async_descriptor_load(b_desc, half, [kk * BK, off_n + rank * B_HALF], bar,
                        multicast_targets = [rank, peer]);
                }
            }
        }
        task(num_warps = 4, num_regs = 232, replicate = 2) {
            let half = async_task_replica_id();
            let out = local_view(c_bufs, half);
            for tile in (first..num_tiles).step_by(stride) {
                let (pair_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let off_m = pair_m + rank * BM;
                let done = (tile - first) / stride * k_tiles;
                let mut acc = zeros([64, BN], f32);
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(full, slot), (it / NUM_STAGES) % 2);
                    acc = async_dot(local_view(a_bufs, 2 * slot + half), local_view(b_bufs, slot), acc);
                    acc = async_dot_wait(1, acc);
                    let done_with = local_view(empty, (it + NUM_STAGES - 1) % NUM_STAGES);
                    barrier_arrive(done_with, pred = it > 0);
                    barrier_arrive(done_with, 1, remote_cta_rank = peer, pred = it > 0);
                }
                acc = async_dot_wait(0, acc);
                async_descriptor_store_wait(0);
                local_store(out, acc.to(bf16));
                async_descriptor_store(c_desc, out, [off_m + half * 64, off_n]);
            }
            async_descriptor_store_wait(0);
        }
    }
    // Neither program of the cluster leaves while the other may still
    // arrive on its barriers or copy into its buffers.
    cluster_barrier();
}

/// `C = A @ B` for row-major bf16 matrices, on `device`, on clusters of two
/// programs that share B.
pub fn gemm(
    device: &Device,
    a: &Buffer<bf16>,
    b: &Buffer<bf16>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    let a_desc = TensorDesc::matrix(a, m, k)?;
    let b_desc = TensorDesc::matrix(b, k, n)?;
    let c_desc = TensorDesc::matrix(c, m, n)?;
    // One cluster per two SMs (the interpreter's count: one cluster), each
    // looping over cluster tiles of 256x256.
    let tiles = m.div_ceil(256) * n.div_ceil(256);
    let clusters = tiles.min((device.multiprocessor_count() as usize / 2).max(1));
    let (m, n, k) = (m as i32, n as i32, k as i32);
    hopper_gemm_cluster::<128, 256, 128, 64, 3, 8>::launch(
        device,
        (2 * clusters) as u32,
        &a_desc,
        &b_desc,
        &c_desc,
        m,
        n,
        k,
    )
}

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    // Not multiples of the tiles, so TMA's zero fill and clipping matter:
    // the second program of a cluster may have no rows left at all.
    let mnk = match Size::for_device(device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (392, 600, 136),
    };
    common::check_bf16_gemms(device, "hopper_gemm_cluster", mnk, &[("", gemm)])
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_gemm_cluster", run)
}
