//! The persistent warp-specialized bf16 GEMM of `hopper_gemm_ws.rs`, with
//! its hand-managed `full`/`empty` mbarriers replaced by a TLE typed pipe:
//! `pipe!(capacity, a = .., b = ..)` owns the stage buffers and barriers, the
//! producer `acquire`s a stage, fills its fields with TMA and `commit`s it
//! (the pipe announces the copies' bytes), and each consumer warp group
//! `wait`s, multiplies its half of the A tile (`local_slice`) and
//! `release`s. Stage and phase come from the iteration number on both sides,
//! so they cannot disagree; the pipe lowers to the same mbarrier operations.
//!
//! `cargo run --release --example hopper_gemm_pipe`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
    (BM = 128, BN = 256, BK = 64, NUM_STAGES = 3, GROUP_M = 8),
])]
pub fn hopper_gemm_pipe<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c_desc: TensorDesc<bf16, 64, BN>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let c_bufs = local_alloc([64, BN], bf16, 2);
    // The stages and their barriers, as one typed pipe.
    let tiles = pipe!(capacity = NUM_STAGES, a = a_bufs, b = b_bufs);
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
            let writer = tiles.writer();
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let done = (tile - first) / stride * k_tiles;
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = writer.acquire(it);
                    async_descriptor_load(a_desc, slot.a, [off_m, kk * BK]);
                    async_descriptor_load(b_desc, slot.b, [kk * BK, off_n]);
                    // Announces the copies' bytes: the readers wait for them.
                    writer.commit(it);
                }
            }
        }
        task(num_warps = 4, num_regs = 232, replicate = 2) {
            let half = async_task_replica_id();
            let reader = tiles.reader();
            let out = local_view(c_bufs, half);
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let done = (tile - first) / stride * k_tiles;
                let mut acc = zeros([64, BN], f32);
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let ready = reader.wait(it);
                    let a_half = local_slice(ready.a, [half * 64, 0], [64, BK]);
                    acc = async_dot(a_half, ready.b, acc);
                    // The group before this one is done: release its stage.
                    acc = async_dot_wait(1, acc);
                    if it > 0 {
                        reader.release(it - 1);
                    }
                }
                acc = async_dot_wait(0, acc);
                async_descriptor_store_wait(0);
                local_store(out, acc.to(bf16));
                async_descriptor_store(c_desc, out, [off_m + half * 64, off_n]);
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
    hopper_gemm_pipe::<128, 256, 64, 3, 8>::launch(device, grid, &a_desc, &b_desc, &c_desc, m, n, k)
}

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    // Not multiples of the tiles, so TMA's zero fill and clipping matter
    // (rows stay multiples of 16 bytes, as TMA requires of strides).
    let mnk = match Size::for_device(device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (520, 600, 136),
    };
    common::check_bf16_gemms(device, "hopper_gemm_pipe", mnk, &[("", gemm)])
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_gemm_pipe", run)
}
