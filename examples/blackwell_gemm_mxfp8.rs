//! mxfp8 GEMM `C = A @ Bᵀ` for Blackwell in the style of TLX's
//! `blackwell_gemm_ws_mxfp8` tutorial: A `[M, K]` and B `[N, K]` in e4m3,
//! each 32 consecutive elements of a row along K sharing one ue8m0 exponent
//! (OCP microscaling, `tlx::mx::quantize_mxfp8`), bf16 output. The tasks
//! are `blackwell_gemm_ws`'s: a one-warp producer loads each stage's A and B
//! tiles and their scales with TMA (the scales as 512-byte atoms of 128
//! rows by 4 blocks, `tlx::mx::swizzle_scales`); a one-warp MMA task copies
//! the stage's scales into tensor memory (`tmem_copy`) and issues
//! `async_dot_scaled` (`tcgen05.mma...kind::mxf8f6f4.block_scale`, one per
//! 32 elements of K) into one of two tensor-memory accumulators; the
//! default warp group stores C in column slices with TMA.
//!
//! Built for `sm_100a`, never run on Blackwell silicon here. On a GPU that
//! is not a Blackwell one (an H100, say) it says so and runs on the CPU
//! interpreter, as it does with no GPU.
//!
//! `cargo run --release --example blackwell_gemm_mxfp8`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [
    (BM = 128, BN = 128, BK = 128, NUM_STAGES = 3, NUM_ACC = 2, EPI_N = 64, GROUP_M = 8),
])]
pub fn blackwell_gemm_mxfp8<
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

/// mxfp8 operands on a device: e4m3 values and their scales' atoms.
pub struct Mxfp8<'a> {
    pub values: &'a Buffer<F8E4M3>,
    /// `tlx::mx::swizzle_scales` of the `[rows rounded up to 128, K / 32
    /// rounded up to 4]` exponents.
    pub scale_atoms: &'a Buffer<u8>,
}

/// `C = A @ Bᵀ` (bf16) for mxfp8 A `[m, k]` and B `[n, k]`, on `device`. K
/// must be a multiple of 32 (whole scale blocks) and of 16 bytes for TMA.
pub fn gemm(
    device: &Device,
    a: Mxfp8<'_>,
    b: Mxfp8<'_>,
    c: &Buffer<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), tlx::Error> {
    if k % 32 != 0 {
        return Err(tlx::Error::InvalidShape {
            op: "blackwell_gemm_mxfp8",
            reason: format!("K = {k}: a multiple of 32 (whole scale blocks)"),
        });
    }
    let a_desc = TensorDesc::matrix(a.values, m, k)?;
    let b_desc = TensorDesc::matrix(b.values, n, k)?;
    let k_tiles = k.div_ceil(128);
    let sa_desc = TensorDesc::matrix(a.scale_atoms, m.div_ceil(128) * k_tiles * 2, 256)?;
    let sb_desc = TensorDesc::matrix(b.scale_atoms, n.div_ceil(128) * k_tiles * 2, 256)?;
    let c_desc = TensorDesc::matrix(c, m, n)?;
    let tiles = m.div_ceil(128) * n.div_ceil(128);
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    blackwell_gemm_mxfp8::<128, 128, 128, 3, 2, 64, 8>::launch(
        device, grid, &a_desc, &b_desc, &sa_desc, &sb_desc, &c_desc, m, n, k,
    )
}

/// Quantizes `[rows, k]` values to mxfp8: the e4m3 values, the exponents
/// (`[rows, k / 32]`) and their atoms, padded to whole atoms with exponent
/// 127 (a scale of 1 for rows and blocks past the matrix, which TMA fills
/// with zeros).
fn quantize(values: &[f32], rows: usize, k: usize) -> (Vec<F8E4M3>, Vec<u8>, Vec<u8>) {
    let (codes, scales) = tlx::mx::quantize_mxfp8(values, rows, k).expect("whole blocks");
    let (padded_rows, blocks) = (rows.div_ceil(128) * 128, k.div_ceil(128) * 4);
    let mut padded = vec![127u8; padded_rows * blocks];
    for r in 0..rows {
        let row = &scales[r * (k / 32)..(r + 1) * (k / 32)];
        padded[r * blocks..r * blocks + k / 32].copy_from_slice(row);
    }
    let atoms = tlx::mx::swizzle_scales(&padded, padded_rows, blocks).expect("whole atoms");
    (codes, scales, atoms)
}

/// Checks the kernel against an f64 reference of the quantized operands on
/// fresh random inputs spanning several binades per row.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_gemm_mxfp8");
    // Not multiples of the tiles (K a multiple of 32 only).
    let (m, n, k) = match Size::for_device(&device) {
        Size::Gpu => (1000, 1040, 544),
        Size::Interpreter => (200, 264, 160),
    };
    let mut rng = Rng::fresh("blackwell_gemm_mxfp8");
    let mut random = |len: usize| -> Vec<f32> {
        let mantissas = rng.uniform_vec(len, -1.0, 1.0);
        let binades = rng.uniform_vec(len / 32, -6.0, 6.0);
        mantissas
            .iter()
            .enumerate()
            .map(|(i, v)| v * binades[i / 32].round().exp2())
            .collect()
    };
    let (a, b) = (random(m * k), random(n * k));
    let (qa, sa, atoms_a) = quantize(&a, m, k);
    let (qb, sb, atoms_b) = quantize(&b, n, k);
    let (da, db) = (device.upload(&qa)?, device.upload(&qb)?);
    let (dsa, dsb) = (device.upload(&atoms_a)?, device.upload(&atoms_b)?);
    let dc = device.upload(&vec![bf16::NAN; m * n])?;
    let operand = |values, scale_atoms| Mxfp8 {
        values,
        scale_atoms,
    };
    gemm(
        &device,
        operand(&da, &dsa),
        operand(&db, &dsb),
        &dc,
        (m, n, k),
    )?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let dequant = |q: &[F8E4M3], s: &[u8], i: usize| {
        f64::from(q[i].to_f32()) * f64::from(tlx::mx::ue8m0_to_f32(s[i / 32]))
    };
    let want = common::matmul_f64(
        (m, n, k),
        |i, p| dequant(&qa, &sa, i * k + p),
        |p, j| dequant(&qb, &sb, j * k + p),
    );
    // The products are exact; the f32 sums and the bf16 output round. The
    // floor is the size of a typical sum, so that cancellation to near zero
    // does not read as a large relative error.
    let typical = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt();
    common::verdict(
        "blackwell_gemm_mxfp8",
        &format!("{m}x{n}x{k}:"),
        common::max_rel_error(&got, &want, typical),
        8e-3,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_gemm_mxfp8", run)
}
