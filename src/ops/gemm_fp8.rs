//! `C = scale · A Bᵀ` in fp8 (e4m3) with bf16 output on Hopper: a
//! persistent warp-specialized kernel (a TMA producer task filling a `pipe!`
//! of stages, two consumer warp groups on `wgmma` `m64n256k32` with f32
//! accumulators, a TMA-store epilogue). wgmma reads fp8 operands K-major
//! only, so B arrives as its transpose `[N, K]` (as cuBLASLt's and torch's
//! `_scaled_mm` take it) and the consumers multiply by `local_trans` of its
//! stage buffer, a `[K, N]` view of the same bytes (TLX's idiom).

use crate::prelude::*;
use crate::PtrArg;

#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
    (BM = 128, BN = 256, BK = 128, NUM_STAGES = 3, GROUP_M = 8),
])]
fn hopper_gemm_fp8<
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
    scale: f32,
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
                local_store(out, (acc * scale).to(bf16));
                async_descriptor_store(c_desc, out, [off_m + half * 64, off_n]);
            }
            async_descriptor_store_wait(0);
        }
    }
}

/// `c = scale · (a @ b_tᵀ)`: `a` `[m, k]` and `b_t` `[n, k]` (B transposed,
/// K-major) row-major e4m3, `c` `[m, n]` row-major bf16, written (not
/// accumulated into). `scale` is the product of the operands' dequantization
/// scales. Sums accumulate in f32 on wgmma's fp8 path, which keeps fewer
/// mantissa bits than f32 additions (cuBLASLt's "fast accumulation").
///
/// TMA moves the rows, so `k` must be a multiple of 16 and `n` of 8, and
/// each tensor start on a 16-byte boundary. Hopper GPUs (`sm_90a`) and the
/// CPU interpreter.
///
/// ```
/// use tlx::prelude::*;
///
/// let dev = Device::cpu();
/// let (m, n, k) = (64, 32, 48);
/// let a = dev.upload(&vec![F8E4M3::from_f32(2.0); m * k])?;
/// let b_t = dev.upload(&vec![F8E4M3::from_f32(0.5); n * k])?;
/// let c = dev.alloc::<bf16>(m * n)?;
/// tlx::ops::gemm_fp8(&dev, &a, &b_t, &c, (m, n, k), 0.25)?;
/// assert_eq!(c.download()?[0].to_f32(), 12.0);
/// # Ok::<(), tlx::Error>(())
/// ```
pub fn gemm_fp8(
    device: &Device,
    a: &(impl PtrArg<F8E4M3> + ?Sized),
    b_t: &(impl PtrArg<F8E4M3> + ?Sized),
    c: &(impl PtrArg<bf16> + ?Sized),
    (m, n, k): (usize, usize, usize),
    scale: f32,
) -> Result<(), Error> {
    const OP: &str = "gemm_fp8";
    super::extents(OP, &[("m", m), ("k", k)])?;
    super::extents(OP, &[("n", n), ("k", k)])?;
    super::extents(OP, &[("m", m), ("n", n)])?;
    if k % 16 != 0 || n % 8 != 0 {
        return Err(Error::InvalidShape {
            op: OP,
            reason: format!(
                "k = {k} and n = {n}: TMA moves rows of whole 16-byte units, so k must be a \
                 multiple of 16 and n of 8 (pad the matrices with zeros)"
            ),
        });
    }
    super::holds(OP, "a", a, m * k)?;
    super::holds(OP, "b_t", b_t, n * k)?;
    super::holds(OP, "c", c, m * n)?;
    let matrix = |rows: usize, cols: usize| ([rows, cols], [cols, 1]);
    let (shape, strides) = matrix(m, k);
    let a_desc = TensorDesc::over(a, &shape, &strides)?;
    let (shape, strides) = matrix(n, k);
    let bt_desc = TensorDesc::over(b_t, &shape, &strides)?;
    let (shape, strides) = matrix(m, n);
    let c_desc = TensorDesc::over(c, &shape, &strides)?;
    // Persistent: one program per SM, or per tile when there are fewer.
    let tiles = m.div_ceil(128) * n.div_ceil(256);
    let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
    let (m, n, k) = (m as i32, n as i32, k as i32);
    hopper_gemm_fp8::<128, 256, 128, 3, 8>::launch(
        device, grid, &a_desc, &bt_desc, &c_desc, scale, m, n, k,
    )
}
