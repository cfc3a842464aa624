//! `C = A Bᵀ` in mxfp8 with bf16 output on Blackwell (sm_100a): e4m3
//! operands with one ue8m0 exponent per 32 elements along K (OCP
//! microscaling, as cuBLASLt's and torch's mxfp8 `_scaled_mm` take them),
//! the kernel of TLX's `blackwell_gemm_ws_mxfp8` tutorial: a one-warp TMA
//! producer loading each stage's A and B tiles and their scale atoms, a
//! one-warp MMA task copying the stage's scales into tensor memory
//! (`tmem_copy`) and issuing `async_dot_scaled` into one of two
//! tensor-memory accumulators, and an epilogue warp group storing C with TMA.
//! Not run on Blackwell silicon here: `ptxas` assembles it and the
//! interpreter runs it in CI. Elsewhere (an H100) the launch is the typed
//! error `NoMatchingPtx`.

use crate::prelude::*;
use crate::PtrArg;

#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [
    (BM = 128, BN = 128, BK = 128, NUM_STAGES = 3, NUM_ACC = 2, EPI_N = 64, GROUP_M = 8),
])]
fn blackwell_gemm_mxfp8<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NUM_STAGES: usize,
    const NUM_ACC: usize,
    const EPI_N: usize,
    const GROUP_M: usize,
>(
    a_desc: TensorDesc<f8e4m3, BM, BK>,
    b_desc: TensorDesc<f8e4m3, BN, BK>,
    // The scales' atoms: two rows of 256 bytes each, atom (row block, K block)
    // at rows 2 * (row_block * k_blocks + k_block).
    sa_desc: TensorDesc<u8, 2, 256>,
    sb_desc: TensorDesc<u8, 2, 256>,
    c_desc: TensorDesc<bf16, BM, EPI_N>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], f8e4m3, NUM_STAGES);
    let b_bufs = local_alloc([BN, BK], f8e4m3, NUM_STAGES);
    let sa_bufs = local_alloc([2, 256], u8, NUM_STAGES);
    let sb_bufs = local_alloc([2, 256], u8, NUM_STAGES);
    let c_bufs = local_alloc([BM, EPI_N], bf16, 2);
    let acc = local_alloc([BM, BN], f32, NUM_ACC, storage = "tmem");
    // Each stage's scales in tensor memory until the MMA reading them is done.
    let sa_tmem = local_alloc([BM, BK / 32], u8, NUM_STAGES, storage = "tmem");
    let sb_tmem = local_alloc([BN, BK / 32], u8, NUM_STAGES, storage = "tmem");
    let full = alloc_barriers(NUM_STAGES, 1);
    let empty = alloc_barriers(NUM_STAGES, 1);
    let acc_full = alloc_barriers(NUM_ACC, 1);
    let acc_empty = alloc_barriers(NUM_ACC, 1);
    let k_tiles = cdiv(k, BK);
    let tiles_m = cdiv(m, BM);
    let tiles_n = cdiv(n, BN);
    let num_tiles = tiles_m * tiles_n;
    let first = program_id(0);
    let stride = num_programs(0);
    fn tile_origin(tile: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
        let first_m = tile / (GROUP_M * tiles_n) * GROUP_M;
        let rows = minimum(tiles_m - first_m, GROUP_M);
        (
            (first_m + tile % rows) * BM,
            (tile % (GROUP_M * tiles_n)) / rows * BN,
        )
    }
    async_tasks! {
        // The epilogue: one warp group, a row of the tile per thread.
        task(default) {
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let t = (tile - first) / stride;
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
            }
            async_descriptor_store_wait(0);
        }
        // The producer: A, B and both scale atoms per stage.
        task(num_warps = 1) {
            for tile in (first..num_tiles).step_by(stride) {
                let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                let done = (tile - first) / stride * k_tiles;
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(empty, slot), (it / NUM_STAGES) % 2 ^ 1);
                    let bar = local_view(full, slot);
                    barrier_expect_bytes(bar, BM * BK + BN * BK + 2 * 512);
                    async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                    async_descriptor_load(b_desc, local_view(b_bufs, slot), [off_n, kk * BK], bar);
                    let sa_row = 2 * (off_m / BM * k_tiles + kk);
                    let sb_row = 2 * (off_n / BN * k_tiles + kk);
                    async_descriptor_load(sa_desc, local_view(sa_bufs, slot), [sa_row, 0], bar);
                    async_descriptor_load(sb_desc, local_view(sb_bufs, slot), [sb_row, 0], bar);
                }
            }
        }
        // The MMA issuer.
        task(num_warps = 1) {
            for tile in (first..num_tiles).step_by(stride) {
                let t = (tile - first) / stride;
                let buf = t % NUM_ACC;
                let done = t * k_tiles;
                barrier_wait(local_view(acc_empty, buf), (t / NUM_ACC) % 2 ^ 1);
                for kk in 0..k_tiles {
                    let it = done + kk;
                    let slot = it % NUM_STAGES;
                    barrier_wait(local_view(full, slot), (it / NUM_STAGES) % 2);
                    // In order with the MMA that follows (same thread).
                    tmem_copy(local_view(sa_bufs, slot), local_view(sa_tmem, slot));
                    tmem_copy(local_view(sb_bufs, slot), local_view(sb_tmem, slot));
                    async_dot_scaled(
                        local_view(a_bufs, slot),
                        local_trans(local_view(b_bufs, slot)),
                        local_view(acc, buf),
                        local_view(sa_tmem, slot),
                        local_view(sb_tmem, slot),
                        use_acc = kk > 0,
                        mbarriers = [local_view(empty, slot)],
                    );
                }
                tcgen05_commit(local_view(acc_full, buf));
            }
        }
    }
}

/// `c = a @ bᵀ` (bf16) for mxfp8 `a` `[m, k]` and `b` `[n, k]` (row-major
/// e4m3 values), each with its scales: the `[rows, k / 32]` ue8m0
/// exponents in `tlx::mx::swizzle_scales`' atoms, rows padded to a multiple
/// of 128 and blocks to a multiple of 4 (cuBLAS's and torchao's swizzled
/// layout). `k` must be a multiple of 32. Blackwell only (sm_100a; the CPU
/// interpreter runs it too): on other GPUs `Error::NoMatchingPtx`.
///
/// ```
/// use tlx::prelude::*;
///
/// let dev = Device::cpu();
/// let (m, n, k) = (128, 128, 128);
/// let (a, sa) = tlx::mx::quantize_mxfp8(&vec![0.75; m * k], m, k)?;
/// let (b, sb) = tlx::mx::quantize_mxfp8(&vec![0.5; n * k], n, k)?;
/// let (sa, sb) = (tlx::mx::swizzle_scales(&sa, m, 4)?, tlx::mx::swizzle_scales(&sb, n, 4)?);
/// let (a, sa, b, sb) = (dev.upload(&a)?, dev.upload(&sa)?, dev.upload(&b)?, dev.upload(&sb)?);
/// let c = dev.alloc::<bf16>(m * n)?;
/// tlx::ops::gemm_mxfp8(&dev, (&a, &sa), (&b, &sb), &c, (m, n, k))?;
/// assert_eq!(c.download()?[0].to_f32(), 48.0);
/// # Ok::<(), tlx::Error>(())
/// ```
pub fn gemm_mxfp8(
    device: &Device,
    (a, a_scales): (&impl PtrArg<F8E4M3>, &impl PtrArg<u8>),
    (b, b_scales): (&impl PtrArg<F8E4M3>, &impl PtrArg<u8>),
    c: &impl PtrArg<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    const OP: &str = "gemm_mxfp8";
    super::gemm_extents(OP, "m", (m, n, k))?;
    if k % 32 != 0 {
        return Err(Error::InvalidShape {
            op: OP,
            reason: format!("k = {k}: a multiple of 32 (whole scale blocks)"),
        });
    }
    super::holds(OP, "a", a, m * k)?;
    super::holds(OP, "b", b, n * k)?;
    super::holds(OP, "c", c, m * n)?;
    let k_tiles = k.div_ceil(128);
    let atoms = |rows: usize| rows.div_ceil(128) * k_tiles * 2;
    super::holds(OP, "a's scales", a_scales, atoms(m) * 256)?;
    super::holds(OP, "b's scales", b_scales, atoms(n) * 256)?;
    let a_desc = TensorDesc::over(a, &[m, k], &[k, 1])?;
    let b_desc = TensorDesc::over(b, &[n, k], &[k, 1])?;
    let sa_desc = TensorDesc::over(a_scales, &[atoms(m), 256], &[256, 1])?;
    let sb_desc = TensorDesc::over(b_scales, &[atoms(n), 256], &[256, 1])?;
    let c_desc = TensorDesc::over(c, &[m, n], &[n, 1])?;
    let tiles = m.div_ceil(128) * n.div_ceil(128);
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    blackwell_gemm_mxfp8::<128, 128, 128, 3, 2, 64, 8>::launch(
        device, grid, &a_desc, &b_desc, &sa_desc, &sb_desc, &c_desc, m, n, k,
    )
}
