//! fp8 (e4m3) GEMM `C = A @ B` with bf16 output: the persistent
//! warp-specialized `pipe!` kernel of `hopper_gemm_pipe.rs` on 8-bit inputs.
//! wgmma reads fp8 operands K-major only, so B arrives as its transpose
//! `[N, K]` and the consumers multiply by `local_trans` of its stage buffer,
//! a `[K, N]` view of the same bytes (TLX's idiom); K steps by 32 per
//! instruction (`m64n256k32.f32.e4m3.e4m3`).
//!
//! `cargo run --release --example hopper_gemm_fp8`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
    (BM = 128, BN = 256, BK = 128, NUM_STAGES = 3, GROUP_M = 8),
])]
pub fn hopper_gemm_fp8<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<f8e4m3, BM, BK>,
    // B^T: the [N, K] matrix, K-major, as fp8 wgmma wants its B.
    bt_desc: TensorDesc<f8e4m3, BN, BK>,
    c_desc: TensorDesc<bf16, 64, BN>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], f8e4m3, NUM_STAGES);
    let b_bufs = local_alloc([BN, BK], f8e4m3, NUM_STAGES);
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
                    async_descriptor_load(bt_desc, slot.b, [off_n, kk * BK]);
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
                    acc = async_dot(a_half, local_trans(ready.b), acc);
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

/// `C = A @ B` for row-major e4m3 `A` `[M, K]` and `B` given as its
/// transpose `[N, K]` (K-major, as cuBLASLt's fp8 GEMM takes it too), C bf16.
pub fn gemm(
    device: &Device,
    a: &Buffer<F8E4M3>,
    bt: &Buffer<F8E4M3>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    let a_desc = TensorDesc::matrix(a, m, k)?;
    let bt_desc = TensorDesc::matrix(bt, n, k)?;
    let c_desc = TensorDesc::matrix(c, m, n)?;
    let tiles = m.div_ceil(128) * n.div_ceil(256);
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    hopper_gemm_fp8::<128, 256, 128, 3, 8>::launch(
        device, grid, &a_desc, &bt_desc, &c_desc, m, n, k,
    )
}

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
    gemm(device, &da, &dbt, &dc, (m, n, k))?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let want = common::matmul_f64(
        (m, n, k),
        |i, p| f64::from(a[i * k + p].to_f32()),
        |p, j| f64::from(bt[j * k + p].to_f32()),
    );
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
