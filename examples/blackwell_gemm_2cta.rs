//! Warp-specialized bf16 GEMM `C = A @ B` for Blackwell whose programs work
//! in **pairs** (2-CTA MMAs, TLX's `blackwell_gemm_2cta` tutorial): the two
//! programs of a cluster compute one 256 x 256 tile of `C`, each holding
//! its 128 rows of A and its half of B in its own shared memory, and the
//! pair's even program issues one `cta_group::2` MMA per K step for both
//! (`async_dot(.., two_ctas = true)`), which reads both programs' operands
//! and accumulates into both programs' tensor memory. Each program's B
//! tile is half as wide as a one-program MMA of the same N would need.
//!
//! Per program: a one-warp producer loads its A and B tiles with TMA into a
//! ring; a one-warp MMA task waits for its own stage, tells the even
//! program ("arrive remote, wait local"), and in the even program waits
//! until both programs' stages are in, then multiplies; each MMA's
//! completion releases the stage in both programs. The epilogue (one warp
//! group) reads its program's accumulator in column slices and stores it.
//!
//! `blackwell_gemm_2cta_clc` is the same pairs made persistent by cluster
//! launch control: the even program asks for the whole cluster's next
//! tile, both programs' three tasks read the answer.
//!
//! Built for `sm_100a`. On a GPU that is not a Blackwell one it says so
//! and runs on the CPU interpreter, as it does with no GPU.
//!
//! `cargo run --release --example blackwell_gemm_2cta`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a", num_warps = 4, ctas_per_cga = 2, configs = [
    (BM = 128, BN = 256, HALF_N = 128, BK = 64, NUM_STAGES = 3, EPI_N = 64),
])]
pub fn blackwell_gemm_2cta<
    const BM: usize,
    const BN: usize,
    const HALF_N: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const EPI_N: usize,
>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, HALF_N>,
    c_desc: TensorDesc<bf16, BM, EPI_N>,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    // This program's half of the pair's B tile (`HALF_N = BN / 2` columns).
    let b_bufs = local_alloc([BK, HALF_N], bf16, NUM_STAGES);
    let c_bufs = local_alloc([BM, EPI_N], bf16, 2);
    let acc = local_alloc([BM, BN], f32, 1, storage = "tmem");
    // This program's copies landed.
    let full = alloc_barriers(NUM_STAGES, 1);
    // The even program's: both programs' stages landed (one arrival each).
    let ready = alloc_barriers(NUM_STAGES, 2);
    // The MMA that read the stage completed (arrives in both programs).
    let empty = alloc_barriers(NUM_STAGES, 1);
    let acc_full = alloc_barriers(1, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let even = rank == 0;
    let off_m = program_id(0) / 2 * (2 * BM) + rank * BM;
    let off_n = program_id(1) * BN;
    let k_tiles = cdiv(k, BK);
    async_tasks! {
        // The epilogue: this program's 128 rows of the pair's tile.
        task(default) {
            barrier_wait(local_view(acc_full, 0), 0);
            for j in 0..BN / EPI_N {
                let part = local_load(local_slice(local_view(acc, 0), [0, j * EPI_N], [BM, EPI_N]));
                async_descriptor_store_wait(1);
                let out = local_view(c_bufs, j % 2);
                local_store(out, part.to(bf16));
                async_descriptor_store(c_desc, out, [off_m, off_n + j * EPI_N]);
            }
            async_descriptor_store_wait(0);
        }
        // The producer: this program's rows of A and half of B.
        task(num_warps = 1) {
            for kk in 0..k_tiles {
                let slot = kk % NUM_STAGES;
                barrier_wait(local_view(empty, slot), (kk / NUM_STAGES) % 2 ^ 1);
                let bar = local_view(full, slot);
                barrier_expect_bytes(bar, (BM * BK + BK * HALF_N) * size_of(dtype_of(a_desc)));
                async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                async_descriptor_load(b_desc, local_view(b_bufs, slot), [kk * BK, off_n + rank * HALF_N], bar);
            }
        }
        // The MMA task: the even program's issues for the pair.
        task(num_warps = 1) {
            for kk in 0..k_tiles {
                let slot = kk % NUM_STAGES;
                let phase = (kk / NUM_STAGES) % 2;
                barrier_wait(local_view(full, slot), phase);
                barrier_arrive(local_view(ready, slot), 1, remote_cta_rank = 0);
                barrier_wait(local_view(ready, slot), phase, pred = even);
                async_dot(
                    local_view(a_bufs, slot),
                    local_view(b_bufs, slot),
                    local_view(acc, 0),
                    use_acc = kk > 0,
                    mbarriers = [local_view(empty, slot)],
                    two_ctas = true,
                );
            }
            tcgen05_commit(local_view(acc_full, 0), two_ctas = true);
        }
    }
    // The even program writes this one's accumulator and arrives on its
    // barriers until both are here.
    cluster_barrier();
}

/// The same pairs, persistent through cluster launch control (TLX's
/// `PAIR_CTA` CLC GEMM): the launch covers every pair tile, and each
/// running pair takes the tiles of pairs that have not started. Program 0
/// of the pair asks for the whole cluster, the answer reaches both, and the
/// three tasks of both programs release the context (six consumers). The
/// accumulator is reused tile after tile, so the even program's MMA waits
/// until both programs' epilogues have read the last one.
#[tlx::kernel(arch = "sm_100a", num_warps = 4, ctas_per_cga = 2, configs = [
    (BM = 128, BN = 256, HALF_N = 128, BK = 64, NUM_STAGES = 3, EPI_N = 64),
])]
pub fn blackwell_gemm_2cta_clc<
    const BM: usize,
    const BN: usize,
    const HALF_N: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const EPI_N: usize,
>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, HALF_N>,
    c_desc: TensorDesc<bf16, BM, EPI_N>,
    m: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, HALF_N], bf16, NUM_STAGES);
    let c_bufs = local_alloc([BM, EPI_N], bf16, 2);
    let acc = local_alloc([BM, BN], f32, 1, storage = "tmem");
    let full = alloc_barriers(NUM_STAGES, 1);
    let ready = alloc_barriers(NUM_STAGES, 2);
    let empty = alloc_barriers(NUM_STAGES, 1);
    let acc_full = alloc_barriers(1, 1);
    // The even program's: both epilogues have read the accumulators.
    let acc_empty = alloc_barriers(1, 2);
    let clc = clc_create_context(6);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let even = rank == 0;
    let tiles_m = cdiv(m, 2 * BM);
    let k_tiles = cdiv(k, BK);
    async_tasks! {
        // The epilogue, which also asks for the pair's next tile.
        task(default) {
            let mut pid = program_id(0);
            let mut t = 0;
            let mut p_producer = 1;
            let mut p_consumer = 0;
            while pid != -1 {
                clc_producer(clc, p_producer);
                p_producer ^= 1;
                let tile = pid / 2;
                let off_m = tile % tiles_m * (2 * BM) + rank * BM;
                let off_n = tile / tiles_m * BN;
                barrier_wait(local_view(acc_full, 0), t % 2);
                for j in 0..BN / EPI_N {
                    let part = local_load(local_slice(local_view(acc, 0), [0, j * EPI_N], [BM, EPI_N]));
                    async_descriptor_store_wait(1);
                    let out = local_view(c_bufs, j % 2);
                    local_store(out, part.to(bf16));
                    async_descriptor_store(c_desc, out, [off_m, off_n + j * EPI_N]);
                }
                barrier_arrive(local_view(acc_empty, 0), 1, remote_cta_rank = 0);
                t += 1;
                pid = clc_consumer(clc, p_consumer);
                p_consumer ^= 1;
            }
            async_descriptor_store_wait(0);
        }
        // The producer.
        task(num_warps = 1) {
            let mut pid = program_id(0);
            let mut it = 0;
            let mut p_consumer = 0;
            while pid != -1 {
                let tile = pid / 2;
                let off_m = tile % tiles_m * (2 * BM) + rank * BM;
                let off_n = tile / tiles_m * BN;
                for kk in 0..k_tiles {
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(empty, slot), (it / NUM_STAGES) % 2 ^ 1);
                    let bar = local_view(full, slot);
                    barrier_expect_bytes(bar, (BM * BK + BK * HALF_N) * size_of(dtype_of(a_desc)));
                    async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                    async_descriptor_load(b_desc, local_view(b_bufs, slot), [kk * BK, off_n + rank * HALF_N], bar);
                    it += 1;
                }
                pid = clc_consumer(clc, p_consumer);
                p_consumer ^= 1;
            }
        }
        // The MMA task: the even program's issues for the pair.
        task(num_warps = 1) {
            let mut pid = program_id(0);
            let mut t = 0;
            let mut it = 0;
            let mut p_consumer = 0;
            while pid != -1 {
                barrier_wait(local_view(acc_empty, 0), t % 2 ^ 1, pred = even);
                for kk in 0..k_tiles {
                    let slot = it % NUM_STAGES;
                    let phase = (it / NUM_STAGES) % 2;
                    barrier_wait(local_view(full, slot), phase);
                    barrier_arrive(local_view(ready, slot), 1, remote_cta_rank = 0);
                    barrier_wait(local_view(ready, slot), phase, pred = even);
                    async_dot(
                        local_view(a_bufs, slot),
                        local_view(b_bufs, slot),
                        local_view(acc, 0),
                        use_acc = kk > 0,
                        mbarriers = [local_view(empty, slot)],
                        two_ctas = true,
                    );
                    it += 1;
                }
                tcgen05_commit(local_view(acc_full, 0), two_ctas = true);
                t += 1;
                pid = clc_consumer(clc, p_consumer);
                p_consumer ^= 1;
            }
        }
    }
    cluster_barrier();
}

/// `C = A @ B` for row-major bf16 matrices, on `device`: a pair of
/// programs per 256 x 256 tile.
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
    let grid = (2 * m.div_ceil(256) as u32, n.div_ceil(256) as u32);
    blackwell_gemm_2cta::<128, 256, 128, 64, 3, 64>::launch(
        device, grid, &a_desc, &b_desc, &c_desc, k as i32,
    )
}

/// The same through `blackwell_gemm_2cta_clc`: a pair of programs per
/// tile in the launch, fewer running.
pub fn gemm_clc(
    device: &Device,
    a: &Buffer<bf16>,
    b: &Buffer<bf16>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    let a_desc = TensorDesc::matrix(a, m, k)?;
    let b_desc = TensorDesc::matrix(b, k, n)?;
    let c_desc = TensorDesc::matrix(c, m, n)?;
    let tiles = m.div_ceil(256) * n.div_ceil(256);
    blackwell_gemm_2cta_clc::<128, 256, 128, 64, 3, 64>::launch(
        device,
        2 * tiles as u32,
        &a_desc,
        &b_desc,
        &c_desc,
        m as i32,
        k as i32,
    )
}

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_gemm_2cta");
    // Not multiples of the tiles, so TMA's zero fill and clipping matter.
    let mnk = match Size::for_device(&device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (392, 520, 136),
    };
    common::check_bf16_gemms(
        &device,
        "blackwell_gemm_2cta",
        mnk,
        &[("", gemm), ("persistent (CLC) ", gemm_clc)],
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_gemm_2cta", run)
}
