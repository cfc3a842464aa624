//! `C = A B` for row-major bf16 or f16 matrices, accumulated in f32: the
//! block-level kernel Triton's Hopper tutorial writes (tensor-descriptor
//! loads that the compiler keeps in a TMA-filled ring wgmma reads in place,
//! a TMA store of C; cuBLAS's speed on the H100, see BENCHMARKS.md), or,
//! where TMA cannot take the rows (a row not a multiple of 16 bytes, a base
//! off a 16-byte boundary), the same kernel over masked pointer loads. On
//! Blackwell (sm_100) it runs `gemm_blackwell`'s kernel instead, where TMA
//! takes the rows.

use crate::prelude::*;
use crate::{Element, PtrArg};

/// Element types [`gemm`] multiplies: `bf16` and `f16`.
pub trait GemmElement: Element + sealed::Sealed {}

impl GemmElement for bf16 {}
impl GemmElement for f16 {}

mod sealed {
    use crate::{Device, Error, PtrArg};

    /// The kernels of one element type.
    pub trait Sealed: crate::Element {
        fn launch(
            device: &Device,
            operands: (&impl PtrArg<Self>, &impl PtrArg<Self>, &impl PtrArg<Self>),
            shape: (usize, usize, usize),
        ) -> Result<(), Error>;

        /// Blackwell's kernel (`tcgen05` MMAs into tensor memory).
        fn launch_tcgen05(
            device: &Device,
            operands: (&impl PtrArg<Self>, &impl PtrArg<Self>, &impl PtrArg<Self>),
            shape: (usize, usize, usize),
        ) -> Result<(), Error>;
    }
}

/// `c = a @ b` with `a` `[m, k]`, `b` `[k, n]` and `c` `[m, n]`, row-major
/// and contiguous; `c` is written, not accumulated into.
///
/// ```
/// use tlx::prelude::*;
///
/// let dev = Device::cpu();
/// let (m, n, k) = (64, 48, 32);
/// let a = dev.upload(&vec![bf16::from_f32(0.5); m * k])?;
/// let b = dev.upload(&vec![bf16::from_f32(0.25); k * n])?;
/// let c = dev.alloc::<bf16>(m * n)?;
/// tlx::ops::gemm(&dev, &a, &b, &c, (m, n, k))?;
/// assert_eq!(c.download()?[0].to_f32(), 4.0);
/// # Ok::<(), tlx::Error>(())
/// ```
pub fn gemm<T: GemmElement>(
    device: &Device,
    a: &impl PtrArg<T>,
    b: &impl PtrArg<T>,
    c: &impl PtrArg<T>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    const OP: &str = "gemm";
    super::gemm_extents(OP, "m", (m, n, k))?;
    super::holds(OP, "a", a, m * k)?;
    super::holds(OP, "b", b, k * n)?;
    super::holds(OP, "c", c, m * n)?;
    // Blackwell: tcgen05 MMAs into tensor memory, where TMA takes the rows.
    let blackwell = matches!(device.compute_capability(), Some((10, _)));
    if blackwell && k % 8 == 0 && n % 8 == 0 {
        match T::launch_tcgen05(device, (a, b, c), (m, n, k)) {
            // A base off a 16-byte boundary: the kernels below.
            Err(Error::TensorMap(_)) => {}
            other => return other,
        }
    }
    T::launch(device, (a, b, c), (m, n, k))
}

/// [`gemm`]'s Blackwell kernel (sm_100a), which `gemm` itself runs on such
/// GPUs where TMA takes the rows (`k` and `n` multiples of 8, 16-byte
/// aligned bases): persistent and warp-specialized, `tcgen05` MMAs into two
/// tensor-memory accumulators (TLX's Blackwell tutorial GEMM). Call it
/// directly to run it on the CPU interpreter; on a GPU that is not a
/// Blackwell one it is `Error::NoMatchingPtx`. Not run on Blackwell silicon
/// here.
pub fn gemm_tcgen05<T: GemmElement>(
    device: &Device,
    a: &impl PtrArg<T>,
    b: &impl PtrArg<T>,
    c: &impl PtrArg<T>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    const OP: &str = "gemm_tcgen05";
    super::gemm_extents(OP, "m", (m, n, k))?;
    super::holds(OP, "a", a, m * k)?;
    super::holds(OP, "b", b, k * n)?;
    super::holds(OP, "c", c, m * n)?;
    T::launch_tcgen05(device, (a, b, c), (m, n, k))
}

macro_rules! gemm_kernels {
    ($t:ident, $desc:ident, $desc_config:ident, $ptr:ident, $ptr_config:ident, $tcgen05:ident) => {
        /// The TMA kernel: descriptor loads into a pipelined ring, a TMA store.
        #[tlx::kernel(
            configs = [
                (BM = 128, BN = 256, BK = 64, NW = 8, NS = 4, num_warps = NW, num_stages = NS),
                (BM = 128, BN = 128, BK = 64, NW = 8, NS = 4, num_warps = NW, num_stages = NS),
                (BM = 128, BN = 256, BK = 32, NW = 8, NS = 8, num_warps = NW, num_stages = NS),
            ],
            key = [m, n, k],
        )]
        fn $desc<const BM: usize, const BN: usize, const BK: usize, const NW: usize, const NS: usize>(
            a: TensorDesc<$t, BM, BK>,
            b: TensorDesc<$t, BK, BN>,
            c: TensorDesc<$t, BM, BN>,
            m: i32,
            n: i32,
            k: i32,
        ) {
            let (pid_m, pid_n) = grouped(program_id(0), cdiv(m, BM), cdiv(n, BN));
            let mut acc = zeros([BM, BN], f32);
            for kk in 0..cdiv(k, BK) {
                acc = dot(a.load([pid_m * BM, kk * BK]), b.load([kk * BK, pid_n * BN]), acc);
            }
            c.store([pid_m * BM, pid_n * BN], acc.to($t));

            // Tiles in groups of 8 rows of tiles, so that neighbouring
            // programs share A's rows and B's columns in L2.
            fn grouped(pid: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
                let per_group = 8 * tiles_n;
                let first_m = (pid / per_group) * 8;
                let rows = minimum(tiles_m - first_m, 8);
                (first_m + (pid % per_group) % rows, (pid % per_group) / rows)
            }
        }

        /// The pointer kernel, for rows TMA cannot take.
        #[tlx::kernel(
            configs = [
                (BM = 128, BN = 128, BK = 64, NW = 8, NS = 4, num_warps = NW, num_stages = NS),
                (BM = 64, BN = 128, BK = 32, NW = 4, NS = 3, num_warps = NW, num_stages = NS),
            ],
            key = [m, n, k],
        )]
        fn $ptr<const BM: usize, const BN: usize, const BK: usize, const NW: usize, const NS: usize>(
            a: Ptr<$t>,
            b: Ptr<$t>,
            c: Ptr<$t>,
            m: i32,
            n: i32,
            k: i32,
        ) {
            let pid = program_id(0);
            let tiles_n = cdiv(n, BN);
            let (pid_m, pid_n) = (pid / tiles_n, pid % tiles_n);
            let rm = pid_m * BM + arange(0, BM);
            let rn = pid_n * BN + arange(0, BN);
            let rows_ok = rm[(.., None)] < m;
            let cols_ok = rn[(None, ..)] < n;
            let mut acc = zeros([BM, BN], f32);
            for kk in 0..cdiv(k, BK) {
                let ks = kk * BK + arange(0, BK);
                let a_tile = load(
                    a + rm[(.., None)] * k + ks[(None, ..)],
                    mask = rows_ok & (ks[(None, ..)] < k),
                    other = 0.0,
                );
                let b_tile = load(
                    b + ks[(.., None)] * n + rn[(None, ..)],
                    mask = (ks[(.., None)] < k) & cols_ok,
                    other = 0.0,
                );
                acc = dot(a_tile, b_tile, acc);
            }
            store(c + rm[(.., None)] * n + rn[(None, ..)], acc.to($t), mask = rows_ok & cols_ok);
        }

        impl sealed::Sealed for $t {
            fn launch(
                device: &Device,
                (a, b, c): (&impl PtrArg<Self>, &impl PtrArg<Self>, &impl PtrArg<Self>),
                (m, n, k): (usize, usize, usize),
            ) -> Result<(), Error> {
                let (mi, ni, ki) = (m as i32, n as i32, k as i32);
                let tiles = |bm: usize, bn: usize| (m.div_ceil(bm) * n.div_ceil(bn)) as u32;
                // TMA takes rows of whole 16-byte units starting on one.
                if k % 8 == 0 && n % 8 == 0 {
                    let descriptors = (
                        TensorDesc::over(a, &[m, k], &[k, 1]),
                        TensorDesc::over(b, &[k, n], &[n, 1]),
                        TensorDesc::over(c, &[m, n], &[n, 1]),
                    );
                    if let (Ok(ad), Ok(bd), Ok(cd)) = descriptors {
                        let grid = |cfg: &$desc_config| tiles(cfg.BM, cfg.BN);
                        let tuned = $desc::autotune(device, grid, &ad, &bd, &cd, mi, ni, ki);
                        match tuned {
                            // A base off a 16-byte boundary: the pointer kernel.
                            Err(Error::TensorMap(_)) => {}
                            other => return other.map(|_| ()),
                        }
                    }
                }
                let grid = |cfg: &$ptr_config| tiles(cfg.BM, cfg.BN);
                $ptr::autotune(device, grid, a, b, c, mi, ni, ki).map(|_| ())
            }

            fn launch_tcgen05(
                device: &Device,
                operands: (&impl PtrArg<Self>, &impl PtrArg<Self>, &impl PtrArg<Self>),
                shape: (usize, usize, usize),
            ) -> Result<(), Error> {
                super::gemm_blackwell::$tcgen05(device, operands, shape)
            }
        }
    };
}

gemm_kernels!(
    bf16,
    gemm_descriptor_bf16,
    GemmDescriptorBf16Config,
    gemm_pointer_bf16,
    GemmPointerBf16Config,
    launch_bf16
);
gemm_kernels!(
    f16,
    gemm_descriptor_f16,
    GemmDescriptorF16Config,
    gemm_pointer_f16,
    GemmPointerF16Config,
    launch_f16
);
