//! Persistent warp-specialized bf16 GEMM `C = A @ B` in the style of TLX's
//! Hopper tutorial: one program per SM loops over output tiles in grouped
//! order; the default task (one warp group, few registers) is the
//! producer, loading A and B tiles with TMA into a ring of `NUM_STAGES`
//! shared buffers guarded by `full`/`empty` mbarriers; two consumer warp
//! groups (a replicated task with most of the registers) each multiply their
//! half of the A tile by the B tile with `async_dot`, keep one wgmma group
//! in flight, and release a stage once the group reading it is done; the
//! result goes out through shared memory and a TMA store. TMA zero-fills
//! tiles read past the edges and clips those written, so any M, N, K work.
//!
//! `cargo run --release --example hopper_gemm_ws`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
    (BM = 128, BN = 256, BK = 64, NUM_STAGES = 3, GROUP_M = 8),
])]
pub fn hopper_gemm_ws<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<bf16, 64, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c_desc: TensorDesc<bf16, 64, BN>,
    m: i32,
    n: i32,
    k: i32,
) {
    // Per stage: A as two 64-row halves (one per consumer), and B.
    let a_bufs = local_alloc([64, BK], bf16, 2 * NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    // Each consumer's output tile, stored by TMA (which clips it at the edges).
    let c_bufs = local_alloc([64, BN], bf16, 2);
    // `full`: the producer's expect-bytes arrival plus the copies' bytes;
    // `empty`: one arrival per consumer warp group.
    let full = alloc_barriers(NUM_STAGES, 1);
    let empty = alloc_barriers(NUM_STAGES, 2);
    let k_tiles = cdiv(k, BK);
    let tiles_m = cdiv(m, BM);
    let tiles_n = cdiv(n, BN);
    let num_tiles = tiles_m * tiles_n;
    let first = program_id(0);
    let stride = num_programs(0);
    // A tile's first row and column, GROUP_M tile rows at a time so that
    // neighbouring programs share A and B tiles in L2.
    fn tile_origin(tile: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
        let first_m = tile / (GROUP_M * tiles_n) * GROUP_M;
        let rows = minimum(tiles_m - first_m, GROUP_M);
        (
            (first_m + tile % rows) * BM,
            (tile % (GROUP_M * tiles_n)) / rows * BN,
        )
    }
    async_tasks! {
        task(default, num_regs = 40) {
            // Persistent: this program's tiles, in `tile_origin`'s order.
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                // The ring position continues from this program's earlier tiles.
                let done = (tile - first) / stride * k_tiles;
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    // The first pass over the ring finds every stage free.
                    barrier_wait(local_view(empty, slot), (it / NUM_STAGES) % 2 ^ 1);
                    let bar = local_view(full, slot);
                    barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(dtype_of(a_desc)));
                    async_descriptor_load(a_desc, local_view(a_bufs, 2 * slot), [off_m, kk * BK], bar);
                    async_descriptor_load(a_desc, local_view(a_bufs, 2 * slot + 1), [off_m + 64, kk * BK], bar);
                    async_descriptor_load(b_desc, local_view(b_bufs, slot), [kk * BK, off_n], bar);
                }
            }
        }
        task(num_warps = 4, num_regs = 232, replicate = 2) {
            let half = async_task_replica_id();
            let out = local_view(c_bufs, half);
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let done = (tile - first) / stride * k_tiles;
                let mut acc = zeros([64, BN], f32);
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(full, slot), (it / NUM_STAGES) % 2);
                    acc = async_dot(local_view(a_bufs, 2 * slot + half), local_view(b_bufs, slot), acc);
                    // The group before this one is done: its stage is free again.
                    acc = async_dot_wait(1, acc);
                    barrier_arrive(local_view(empty, (it + NUM_STAGES - 1) % NUM_STAGES), pred = it > 0);
                }
                acc = async_dot_wait(0, acc);
                // The previous tile's store has finished reading the buffer.
                async_descriptor_store_wait(0);
                local_store(out, acc.to(bf16));
                async_descriptor_store(c_desc, out, [off_m + half * 64, off_n]);
            }
            async_descriptor_store_wait(0);
        }
    }
}

/// The ping-pong schedule (CUTLASS's and TLX's name): each consumer warp
/// group owns whole 64x256 output tiles, alternating with the other, and
/// two named barriers order their main loops so that one group's epilogue
/// overlaps the other's multiplications instead of both contending for the
/// tensor cores at once. The producer fills one 4-stage ring for both, in
/// tile order; a stage is released by the group that used it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
    (BM = 64, BN = 256, BK = 64, NUM_STAGES = 4, GROUP_M = 8),
])]
pub fn hopper_gemm_pingpong<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c_desc: TensorDesc<bf16, BM, BN>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let c_bufs = local_alloc([BM, BN], bf16, 2);
    let full = alloc_barriers(NUM_STAGES, 1);
    // One group uses (and releases) each stage.
    let empty = alloc_barriers(NUM_STAGES, 1);
    let k_tiles = cdiv(k, BK);
    let tiles_m = cdiv(m, BM);
    let tiles_n = cdiv(n, BN);
    let num_tiles = tiles_m * tiles_n;
    let first = program_id(0);
    let stride = num_programs(0);
    // A tile's first row and column, GROUP_M tile rows at a time so that
    // neighbouring programs share A and B tiles in L2.
    fn tile_origin(tile: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
        let first_m = tile / (GROUP_M * tiles_n) * GROUP_M;
        let rows = minimum(tiles_m - first_m, GROUP_M);
        (
            (first_m + tile % rows) * BM,
            (tile % (GROUP_M * tiles_n)) / rows * BN,
        )
    }
    async_tasks! {
        task(default, num_regs = 40) {
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let done = (tile - first) / stride * k_tiles;
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(empty, slot), (it / NUM_STAGES) % 2 ^ 1);
                    let bar = local_view(full, slot);
                    barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(dtype_of(a_desc)));
                    async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                    async_descriptor_load(b_desc, local_view(b_bufs, slot), [kk * BK, off_n], bar);
                }
            }
        }
        task(num_warps = 4, num_regs = 232, replicate = 2) {
            let me = async_task_replica_id();
            let out = local_view(c_bufs, me);
            // This group's tiles: every other one of the program's.
            for tile in (first + me * stride..num_tiles).step_by(2 * stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let done = (tile - first) / stride * k_tiles;
                // My turn on the tensor cores: after the other group's main
                // loop (group 0 starts the very first one).
                if (tile != first) | (me == 1) {
                    named_barrier_wait(8 + me, 256);
                }
                let mut acc = zeros([BM, BN], f32);
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(full, slot), (it / NUM_STAGES) % 2);
                    acc = async_dot(local_view(a_bufs, slot), local_view(b_bufs, slot), acc);
                    acc = async_dot_wait(1, acc);
                    barrier_arrive(local_view(empty, (it + NUM_STAGES - 1) % NUM_STAGES), pred = kk > 0);
                }
                acc = async_dot_wait(0, acc);
                barrier_arrive(local_view(empty, (done + k_tiles - 1) % NUM_STAGES));
                // The other group's turn.
                named_barrier_arrive(9 - me, 256);
                async_descriptor_store_wait(0);
                local_store(out, acc.to(bf16));
                async_descriptor_store(c_desc, out, [off_m, off_n]);
            }
            async_descriptor_store_wait(0);
        }
    }
}

/// `C = A @ B` for row-major bf16 matrices, on `device`.
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
    // One program per SM (the interpreter's count: 1), each looping over tiles.
    let tiles = m.div_ceil(128) * n.div_ceil(256);
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    hopper_gemm_ws::<128, 256, 64, 3, 8>::launch(device, grid, &a_desc, &b_desc, &c_desc, m, n, k)
}

/// [`gemm`] with the ping-pong schedule.
pub fn gemm_pingpong(
    device: &Device,
    a: &Buffer<bf16>,
    b: &Buffer<bf16>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    let a_desc = TensorDesc::matrix(a, m, k)?;
    let b_desc = TensorDesc::matrix(b, k, n)?;
    let c_desc = TensorDesc::matrix(c, m, n)?;
    // Two tiles per program at least, one for each consumer group.
    let tiles = m.div_ceil(64) * n.div_ceil(256);
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    hopper_gemm_pingpong::<64, 256, 64, 4, 8>::launch(
        device, grid, &a_desc, &b_desc, &c_desc, m, n, k,
    )
}

/// [`gemm`] with the schedule the autotuner finds fastest for this shape
/// on this GPU (timed on first use, then remembered; see `tlx::autotune`).
pub fn gemm_tuned(
    device: &Device,
    a: &Buffer<bf16>,
    b: &Buffer<bf16>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    let key = format!("{m}x{n}x{k} bf16");
    let schedules = ["cooperative", "ping-pong"];
    tlx::autotune(device, "hopper_gemm_ws", &key, &schedules, |i| match i {
        0 => gemm(device, a, b, c, (m, n, k)),
        _ => gemm_pingpong(device, a, b, c, (m, n, k)),
    })?;
    Ok(())
}

/// Checks both schedules against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    // Not multiples of the tiles, so TMA's zero fill and clipping matter
    // (rows stay multiples of 16 bytes, as TMA requires of strides).
    let mnk = match Size::for_device(device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (520, 600, 136),
    };
    let schedules: [(&str, common::Bf16Gemm); 2] =
        [("cooperative ", gemm), ("ping-pong ", gemm_pingpong)];
    common::check_bf16_gemms(device, "hopper_gemm_ws", mnk, &schedules)
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_gemm_ws", run)
}
