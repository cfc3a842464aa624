//! `C = A Bᵀ` in mxfp8 or nvfp4 with bf16 output on Blackwell (sm_100a):
//! e4m3 operands with one ue8m0 exponent per 32 elements along K (OCP
//! microscaling, as cuBLASLt's and torch's mxfp8 `_scaled_mm` take them), or
//! e2m1 operands packed two per byte with one ue4m3 scale per 16 (NVIDIA's
//! nvfp4). One kernel for both, TLX's `blackwell_gemm_ws_mxfp8` tutorial,
//! tiles of 128 elements of K: a one-warp TMA
//! producer loading each stage's A and B tiles and their scale atoms, a
//! one-warp MMA task copying the stage's scales into tensor memory
//! (`tmem_copy`) and issuing `async_dot_scaled` into one of two
//! tensor-memory accumulators, and an epilogue warp group storing C with TMA.
//! Not run on Blackwell silicon here: `ptxas` assembles it and the
//! interpreter runs it in CI. Elsewhere (an H100) the launch is the typed
//! error `NoMatchingPtx`.

use crate::prelude::*;
use crate::{Element, PtrArg};

/// The warp-specialized scaled GEMM of one form: `$elem` operand bytes,
/// `$scale` scales, `$bk` bytes of K per tile, `$blocks` scale blocks per
/// tile row, `$srows` 256-byte rows of scale atoms per tile of 128 rows.
macro_rules! scaled_gemm_kernel {
    ($name:ident, $elem:ident, $scale:ident, $bk:tt, $blocks:tt, $srows:tt) => {
        #[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [
            (BM = 128, BN = 128, BK = $bk, SROWS = $srows, NUM_STAGES = 3, NUM_ACC = 2, EPI_N = 64, GROUP_M = 8),
        ])]
        fn $name<
            const BM: usize,
            const BN: usize,
            const BK: usize,
            const SROWS: usize,
            const NUM_STAGES: usize,
            const NUM_ACC: usize,
            const EPI_N: usize,
            const GROUP_M: usize,
        >(
            a_desc: TensorDesc<$elem, BM, BK>,
            b_desc: TensorDesc<$elem, BN, BK>,
            // A tile's scale atoms: SROWS rows of 256 bytes (two per atom), tile
            // (row block, K tile) at rows SROWS * (row_block * k_tiles + k_tile).
            sa_desc: TensorDesc<$scale, SROWS, 256>,
            sb_desc: TensorDesc<$scale, SROWS, 256>,
            c_desc: TensorDesc<bf16, BM, EPI_N>,
            m: i32,
            n: i32,
            k: i32,
        ) {
            let a_bufs = local_alloc([BM, BK], $elem, NUM_STAGES);
            let b_bufs = local_alloc([BN, BK], $elem, NUM_STAGES);
            let sa_bufs = local_alloc([SROWS, 256], $scale, NUM_STAGES);
            let sb_bufs = local_alloc([SROWS, 256], $scale, NUM_STAGES);
            let c_bufs = local_alloc([BM, EPI_N], bf16, 2);
            let acc = local_alloc([BM, BN], f32, NUM_ACC, storage = "tmem");
            // Each stage's scales in tensor memory until the MMA reading them is done.
            let sa_tmem = local_alloc([BM, $blocks], $scale, NUM_STAGES, storage = "tmem");
            let sb_tmem = local_alloc([BN, $blocks], $scale, NUM_STAGES, storage = "tmem");
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
                            barrier_expect_bytes(bar, BM * BK + BN * BK + 2 * SROWS * 256);
                            async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                            async_descriptor_load(b_desc, local_view(b_bufs, slot), [off_n, kk * BK], bar);
                            let sa_row = SROWS * (off_m / BM * k_tiles + kk);
                            let sb_row = SROWS * (off_n / BN * k_tiles + kk);
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
    };
}

scaled_gemm_kernel!(blackwell_gemm_mxfp8, f8e4m3, u8, 128, 4, 2);
scaled_gemm_kernel!(blackwell_gemm_nvfp4, u8, f8e4m3, 64, 8, 4);

/// `c = a @ bᵀ` (bf16) for mxfp8 `a` `[m, k]` and `b` `[n, k]` (row-major
/// e4m3 values), each with its scales: the `[rows, k / 32]` ue8m0
/// exponents as atoms, rows padded to a multiple of 128 and blocks to a
/// multiple of 4 (cuBLAS's and torchao's swizzled layout;
/// `tlx::mx::swizzle_scales_padded(scales, (rows, k / 32), 4, 127)`). `k` must be a multiple of 32. Blackwell only (sm_100a; the CPU
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
    let plan = Scaled::check("gemm_mxfp8", 1, 32, (m, n, k))?;
    plan.holds((a, a_scales), (b, b_scales), c)?;
    let ad = TensorDesc::over(a, &[m, k], &[k, 1])?;
    let bd = TensorDesc::over(b, &[n, k], &[k, 1])?;
    let [sad, sbd] = plan.scale_descriptors(a_scales, b_scales);
    let cd = TensorDesc::over(c, &[m, n], &[n, 1])?;
    let (grid, (mi, ni, ki)) = plan.launch_shape(device);
    blackwell_gemm_mxfp8::<128, 128, 128, 2, 3, 2, 64, 8>::launch(
        device, grid, &ad, &bd, &sad?, &sbd?, &cd, mi, ni, ki,
    )
}

/// `c = a @ bᵀ` (bf16) for nvfp4 `a` `[m, k]` and `b` `[n, k]`: e2m1 values
/// packed two per byte, low nibble first (`tlx::mx::quantize_nvfp4`), rows
/// of `k / 2` bytes, each with its `[rows, k / 16]` ue4m3 scales as atoms
/// (rows padded to a multiple of 128, blocks to a multiple of 8:
/// `tlx::mx::swizzle_scales_padded(scales, (rows, k / 16), 8, one)`). `k` must be a multiple of 32. Blackwell only,
/// as [`gemm_mxfp8`].
pub fn gemm_nvfp4(
    device: &Device,
    (a, a_scales): (&impl PtrArg<u8>, &impl PtrArg<F8E4M3>),
    (b, b_scales): (&impl PtrArg<u8>, &impl PtrArg<F8E4M3>),
    c: &impl PtrArg<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    let plan = Scaled::check("gemm_nvfp4", 2, 16, (m, n, k))?;
    plan.holds((a, a_scales), (b, b_scales), c)?;
    let kb = k / 2;
    let ad = TensorDesc::over(a, &[m, kb], &[kb, 1])?;
    let bd = TensorDesc::over(b, &[n, kb], &[kb, 1])?;
    let [sad, sbd] = plan.scale_descriptors(a_scales, b_scales);
    let cd = TensorDesc::over(c, &[m, n], &[n, 1])?;
    let (grid, (mi, ni, ki)) = plan.launch_shape(device);
    blackwell_gemm_nvfp4::<128, 128, 64, 4, 3, 2, 64, 8>::launch(
        device, grid, &ad, &bd, &sad?, &sbd?, &cd, mi, ni, ki,
    )
}

/// A scaled GEMM's shape: 128x128 tiles of 128 elements of K, `per_byte`
/// operand elements per byte and one scale per `block` of K.
struct Scaled {
    op: &'static str,
    per_byte: usize,
    block: usize,
    mnk: (usize, usize, usize),
}

impl Scaled {
    fn check(
        op: &'static str,
        per_byte: usize,
        block: usize,
        (m, n, k): (usize, usize, usize),
    ) -> Result<Scaled, Error> {
        super::gemm_extents(op, "m", (m, n, k))?;
        if k % 32 != 0 {
            return Err(Error::InvalidShape {
                op,
                reason: format!("k = {k}: a multiple of 32 (whole scale blocks and 16-byte rows)"),
            });
        }
        Ok(Scaled {
            op,
            per_byte,
            block,
            mnk: (m, n, k),
        })
    }

    /// Rows of 256 bytes of scale atoms an operand of `rows` rows has.
    fn atom_rows(&self, rows: usize) -> usize {
        let (.., k) = self.mnk;
        rows.div_ceil(128) * k.div_ceil(128) * (128 / self.block) * 128 / 256
    }

    fn holds<E: Element, S: Element>(
        &self,
        (a, a_scales): (&impl PtrArg<E>, &impl PtrArg<S>),
        (b, b_scales): (&impl PtrArg<E>, &impl PtrArg<S>),
        c: &impl PtrArg<bf16>,
    ) -> Result<(), Error> {
        let (op, (m, n, k)) = (self.op, self.mnk);
        super::holds(op, "a", a, m * k / self.per_byte)?;
        super::holds(op, "b", b, n * k / self.per_byte)?;
        super::holds(op, "c", c, m * n)?;
        super::holds(op, "a's scales", a_scales, self.atom_rows(m) * 256)?;
        super::holds(op, "b's scales", b_scales, self.atom_rows(n) * 256)
    }

    fn scale_descriptors<'a, S: Element>(
        &self,
        a_scales: &'a impl PtrArg<S>,
        b_scales: &'a impl PtrArg<S>,
    ) -> [Result<TensorDesc<'a, S>, Error>; 2] {
        let (m, n, _) = self.mnk;
        [
            TensorDesc::over(a_scales, &[self.atom_rows(m), 256], &[256, 1]),
            TensorDesc::over(b_scales, &[self.atom_rows(n), 256], &[256, 1]),
        ]
    }

    /// The persistent grid (at most one program per SM) and the kernel's
    /// `m`, `n` and K in bytes.
    fn launch_shape(&self, device: &Device) -> (u32, (i32, i32, i32)) {
        let (m, n, k) = self.mnk;
        let tiles = m.div_ceil(128) * n.div_ceil(128);
        let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
        (grid, (m as i32, n as i32, (k / self.per_byte) as i32))
    }
}
