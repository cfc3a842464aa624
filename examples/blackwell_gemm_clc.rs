//! Persistent warp-specialized bf16 GEMM `C = A @ B` for Blackwell whose
//! programs take their tiles by **cluster launch control**, in the style of
//! TLX's `blackwell_gemm_clc` tutorial: the launch covers every tile, and
//! each running program, when it starts a tile, asks the hardware for the
//! tile of a program that has not started yet (`clc_producer`), which then
//! never starts. Load balance comes from the hardware's scheduler, with no
//! counter in global memory and no fixed stride.
//!
//! The tasks are `blackwell_gemm_ws`'s (a TMA producer warp, an MMA warp
//! issuing `tcgen05` MMAs into two tensor-memory accumulators, an epilogue
//! warp group), and each learns its next tile from the same answer
//! (`clc_consumer`, three consumers per tile); the epilogue also asks.
//!
//! Built for `sm_100a`. On a GPU that is not a Blackwell one (an H100, say)
//! it says so and runs on the CPU interpreter, as it does with no GPU,
//! where programs start as OS threads free up and every tile must still be
//! done exactly once.
//!
//! `cargo run --release --example blackwell_gemm_clc`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [
    (BM = 128, BN = 256, BK = 64, NUM_STAGES = 3, NUM_ACC = 2, EPI_N = 64, GROUP_M = 8),
])]
pub fn blackwell_gemm_clc<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const NUM_ACC: usize,
    const EPI_N: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c_desc: TensorDesc<bf16, BM, EPI_N>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let c_bufs = local_alloc([BM, EPI_N], bf16, 2);
    let acc = local_alloc([BM, BN], f32, NUM_ACC, storage = "tmem");
    let full = alloc_barriers(NUM_STAGES, 1);
    let empty = alloc_barriers(NUM_STAGES, 1);
    let acc_full = alloc_barriers(NUM_ACC, 1);
    let acc_empty = alloc_barriers(NUM_ACC, 1);
    // Three tasks read each answer: the epilogue, the producer, the MMA task.
    let clc = clc_create_context(3);
    let k_tiles = cdiv(k, BK);
    let tiles_m = cdiv(m, BM);
    let tiles_n = cdiv(n, BN);
    fn tile_origin(tile: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
        let first_m = tile / (GROUP_M * tiles_n) * GROUP_M;
        let rows = minimum(tiles_m - first_m, GROUP_M);
        (
            (first_m + tile % rows) * BM,
            (tile % (GROUP_M * tiles_n)) / rows * BN,
        )
    }
    async_tasks! {
        // The epilogue, which also asks for the next tile as it starts one.
        task(default) {
            let mut tile = program_id(0);
            let mut t = 0;
            let mut p_producer = 1;
            let mut p_consumer = 0;
            while tile != -1 {
                clc_producer(clc, p_producer);
                p_producer ^= 1;
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let buf = t % NUM_ACC;
                barrier_wait(local_view(acc_full, buf), (t / NUM_ACC) % 2);
                let tile_acc = local_view(acc, buf);
                for j in 0..BN / EPI_N {
                    let part = local_load(local_slice(tile_acc, [0, j * EPI_N], [BM, EPI_N]));
                    async_descriptor_store_wait(1);
                    let out = local_view(c_bufs, j % 2);
                    local_store(out, part.to(bf16));
                    async_descriptor_store(c_desc, out, [off_m, off_n + j * EPI_N]);
                }
                barrier_arrive(local_view(acc_empty, buf));
                t += 1;
                tile = clc_consumer(clc, p_consumer);
                p_consumer ^= 1;
            }
            async_descriptor_store_wait(0);
        }
        // The producer.
        task(num_warps = 1) {
            let mut tile = program_id(0);
            let mut it = 0;
            let mut p_consumer = 0;
            while tile != -1 {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                for kk in 0..k_tiles {
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(empty, slot), (it / NUM_STAGES) % 2 ^ 1);
                    let bar = local_view(full, slot);
                    barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(dtype_of(a_desc)));
                    async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                    async_descriptor_load(b_desc, local_view(b_bufs, slot), [kk * BK, off_n], bar);
                    it += 1;
                }
                tile = clc_consumer(clc, p_consumer);
                p_consumer ^= 1;
            }
        }
        // The MMA issuer.
        task(num_warps = 1) {
            let mut tile = program_id(0);
            let mut t = 0;
            let mut it = 0;
            let mut p_consumer = 0;
            while tile != -1 {
                let buf = t % NUM_ACC;
                barrier_wait(local_view(acc_empty, buf), (t / NUM_ACC) % 2 ^ 1);
                for kk in 0..k_tiles {
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(full, slot), (it / NUM_STAGES) % 2);
                    async_dot(
                        local_view(a_bufs, slot),
                        local_view(b_bufs, slot),
                        local_view(acc, buf),
                        use_acc = kk > 0,
                        mbarriers = [local_view(empty, slot)],
                    );
                    it += 1;
                }
                tcgen05_commit(local_view(acc_full, buf));
                t += 1;
                tile = clc_consumer(clc, p_consumer);
                p_consumer ^= 1;
            }
        }
    }
}

/// `C = A @ B` for row-major bf16 matrices, on `device`: one program per
/// tile, of which only as many start as the device holds at once.
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
    let tiles = (m.div_ceil(128) * n.div_ceil(256)) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    blackwell_gemm_clc::<128, 256, 64, 3, 2, 64, 8>::launch(
        device, tiles, &a_desc, &b_desc, &c_desc, m, n, k,
    )
}

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_gemm_clc");
    // Not multiples of the tiles, so TMA's zero fill and clipping matter;
    // more tiles than the interpreter's threads, so programs take others'.
    let mnk = match Size::for_device(&device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (392, 520, 136),
    };
    common::check_bf16_gemms(&device, "blackwell_gemm_clc", mnk, &[("", gemm)])
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_gemm_clc", run)
}
