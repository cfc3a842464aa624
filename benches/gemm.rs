//! GEMM written as a user writes it in the block language (Triton's tutorial
//! matmul: grouped program order, one block-level `dot` per K step, the
//! configurations compiled at build time), against cuBLAS measured in the
//! same process on the same buffers.
//!
//! `cargo bench --bench gemm` (prints a table; skips without a GPU). Shapes:
//! the TLX paper's H100 GEMMs GH1-GH7 and 4096^3, bf16 in and out with f32
//! accumulation (f16 on a subset). Every configuration's output is checked
//! against cuBLAS's (NaN-poisoned first) before it is timed; the fastest
//! correct configuration per shape is reported. `TLX_BENCH_ONLY=GH4` runs
//! the shapes whose name starts with that. Ours and cuBLAS are timed as
//! `scripts/triton_gemm_anchor.py` times upstream Triton (`timing`:
//! `do_bench`'s procedure, 25 ms of warm-up, 200 ms of runs queued back to
//! back, the L2 flushed before each, median): at the GPU's power cap a
//! burst of synchronized runs reads several percent faster than a sustained
//! run (docs/bench-log/2026-11.md, session 30).

// Each example brings its own copy of `examples/common`, as it does when built alone.
#![allow(clippy::duplicate_mod)]

mod timing;

#[path = "../examples/hopper_gemm_cluster.rs"]
#[allow(dead_code)]
mod hopper_gemm_cluster;
#[path = "../examples/hopper_gemm_pipe.rs"]
#[allow(dead_code)]
mod hopper_gemm_pipe;
#[path = "../examples/hopper_gemm_pipelined.rs"]
#[allow(dead_code)]
mod hopper_gemm_pipelined;
#[path = "../examples/hopper_gemm_ws.rs"]
#[allow(dead_code)]
mod hopper_gemm_ws;

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use half::{bf16, f16};
use timing::median_ms;
use tlx::prelude::*;

/// The tutorial kernel, generic over nothing but its tile configuration:
/// one program per `[BLOCK_M, BLOCK_N]` tile of `C`, programs ordered in
/// groups of `GROUP_M` tile rows so that neighbours share A and B in L2.
macro_rules! matmul_kernel {
    ($name:ident, $t:ident) => {
        // `NW` and `NS` only name the warp and stage counts of a configuration.
        #[tlx::kernel(configs = [
            (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, NW = 8, NS = 4, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 64, NW = 8, NS = 4, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, NW = 4, NS = 5, num_warps = NW, num_stages = NS),
            (BLOCK_M = 64, BLOCK_N = 256, BLOCK_K = 64, NW = 4, NS = 4, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 32, NW = 8, NS = 7, num_warps = NW, num_stages = NS),
            (BLOCK_M = 256, BLOCK_N = 128, BLOCK_K = 64, NW = 8, NS = 4, num_warps = NW, num_stages = NS),
        ])]
        fn $name<
            const BLOCK_M: usize,
            const BLOCK_N: usize,
            const BLOCK_K: usize,
            const NW: usize,
            const NS: usize,
        >(
            a: Ptr<$t>,
            b: Ptr<$t>,
            c: Ptr<$t>,
            m: i32,
            n: i32,
            k: i32,
            stride_am: i32,
            stride_bk: i32,
            stride_cm: i32,
        ) {
            // What Triton infers by specializing on arguments divisible by
            // 16, said explicitly: aligned bases and strides.
            let (a, b, c) = (multiple_of(a, 16), multiple_of(b, 16), multiple_of(c, 16));
            let stride_am = multiple_of(stride_am, 8);
            let stride_bk = multiple_of(stride_bk, 8);
            let stride_cm = multiple_of(stride_cm, 8);
            let (m, n, k) = (multiple_of(m, 8), multiple_of(n, 8), multiple_of(k, 8));
            let group_m = 8;
            let pid = program_id(0);
            let num_pid_m = cdiv(m, BLOCK_M);
            let num_pid_n = cdiv(n, BLOCK_N);
            let num_pid_in_group = group_m * num_pid_n;
            let group_id = pid / num_pid_in_group;
            let first_pid_m = group_id * group_m;
            let group_size_m = minimum(num_pid_m - first_pid_m, group_m);
            let pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m;
            let pid_n = (pid % num_pid_in_group) / group_size_m;
            let offs_am = pid_m * BLOCK_M + arange(0, BLOCK_M);
            let offs_bn = pid_n * BLOCK_N + arange(0, BLOCK_N);
            let rows_ok = offs_am[(.., None)] < m;
            let cols_ok = offs_bn[(None, ..)] < n;
            let offs_k = arange(0, BLOCK_K);
            let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
            for kk in 0..cdiv(k, BLOCK_K) {
                let ks = kk * BLOCK_K + offs_k;
                let a_tile = load(
                    a + offs_am[(.., None)] * stride_am + ks[(None, ..)],
                    mask = rows_ok & (ks[(None, ..)] < k),
                    other = 0.0,
                );
                let b_tile = load(
                    b + ks[(.., None)] * stride_bk + offs_bn[(None, ..)],
                    mask = (ks[(.., None)] < k) & cols_ok,
                    other = 0.0,
                );
                acc = dot(a_tile, b_tile, acc);
            }
            store(
                c + offs_am[(.., None)] * stride_cm + offs_bn[(None, ..)],
                acc.to($t),
                mask = rows_ok & cols_ok,
            );
        }
    };
}

matmul_kernel!(matmul_bf16, bf16);
matmul_kernel!(matmul_f16, f16);

/// The same GEMM with Triton's tensor descriptors, as Triton's Hopper
/// tutorials write it: `desc.load([row, col])` for the operand tiles (TMA
/// zero-fills past the edges, so no masks); `C` by a masked pointer store
/// or, with `TS = 1`, by `c_desc.store` (TMA clips at the edges).
macro_rules! matmul_descriptor_kernel {
    ($name:ident, $t:ident) => {
        #[tlx::kernel(configs = [
            (BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 64, NW = 8, NS = 4, TS = 0, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, NW = 8, NS = 4, TS = 0, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 32, NW = 8, NS = 8, TS = 0, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 64, NW = 8, NS = 4, TS = 1, num_warps = NW, num_stages = NS),
            (BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 32, NW = 8, NS = 8, TS = 1, num_warps = NW, num_stages = NS),
        ])]
        fn $name<
            const BLOCK_M: usize,
            const BLOCK_N: usize,
            const BLOCK_K: usize,
            const NW: usize,
            const NS: usize,
            const TS: usize,
        >(
            a_desc: TensorDesc<$t, BLOCK_M, BLOCK_K>,
            b_desc: TensorDesc<$t, BLOCK_K, BLOCK_N>,
            c: Ptr<$t>,
            c_desc: TensorDesc<$t, BLOCK_M, BLOCK_N>,
            m: i32,
            n: i32,
            k: i32,
            stride_cm: i32,
        ) {
            let c = multiple_of(c, 16);
            let stride_cm = multiple_of(stride_cm, 8);
            let group_m = 8;
            let pid = program_id(0);
            let num_pid_m = cdiv(m, BLOCK_M);
            let num_pid_n = cdiv(n, BLOCK_N);
            let num_pid_in_group = group_m * num_pid_n;
            let group_id = pid / num_pid_in_group;
            let first_pid_m = group_id * group_m;
            let group_size_m = minimum(num_pid_m - first_pid_m, group_m);
            let pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m;
            let pid_n = (pid % num_pid_in_group) / group_size_m;
            let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
            for kk in 0..cdiv(k, BLOCK_K) {
                let a_tile = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K]);
                let b_tile = b_desc.load([kk * BLOCK_K, pid_n * BLOCK_N]);
                acc = dot(a_tile, b_tile, acc);
            }
            if TS == 1 {
                c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to($t));
            } else {
                let offs_cm = pid_m * BLOCK_M + arange(0, BLOCK_M);
                let offs_cn = pid_n * BLOCK_N + arange(0, BLOCK_N);
                store(
                    c + offs_cm[(.., None)] * stride_cm + offs_cn[(None, ..)],
                    acc.to($t),
                    mask = (offs_cm[(.., None)] < m) & (offs_cn[(None, ..)] < n),
                );
            }
        }
    };
}

matmul_descriptor_kernel!(matmul_descriptor_bf16, bf16);
matmul_descriptor_kernel!(matmul_descriptor_f16, f16);

/// The element types the bench runs, with their kernel and cuBLAS call.
trait GemmElement: tlx::Element + Copy {
    const NAME: &'static str;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    fn nan() -> Self;
    /// Launches configuration `config` of the kernel; `None` if it has none.
    fn launch(
        dev: &Device,
        config: usize,
        bufs: (&Buffer<Self>, &Buffer<Self>, &Buffer<Self>),
        shape: (usize, usize, usize),
    ) -> Option<Result<(), Error>>;
}

/// The candidates: the block-language kernel's configurations
/// (`BLOCK_M x BLOCK_N x BLOCK_K`, warps, stages), then the TLX-style
/// kernels of `examples/hopper_gemm_ws.rs`, `hopper_gemm_pipelined.rs`,
/// `hopper_gemm_pipe.rs` and `hopper_gemm_cluster.rs` (bf16 only), then the
/// block-language kernel with tensor descriptors, and `tlx::ops::gemm`
/// (which autotunes among its own descriptor kernel's configurations).
/// Labels of TLX-layer kernels start with "TLX"; the others are
/// block-level `dot`.
const CONFIGS: [&str; 18] = [
    "128x128x64 w8 s4",
    "128x256x64 w8 s4",
    "128x128x64 w4 s5",
    "64x256x64 w4 s4",
    "128x256x32 w8 s7",
    "256x128x64 w8 s4",
    "TLX ws 128x256x64 s3",
    "TLX pipelined 128x256x64 s3",
    "TLX pipe! 128x256x64 s3",
    "TLX ping-pong 64x256x64 s4",
    "TLX ws autotuned",
    "TLX ws cluster 2x1 multicast B 128x256x64 s3",
    "desc 128x256x64 w8 s4",
    "desc 128x128x64 w8 s4",
    "desc 128x256x32 w8 s8",
    "desc 128x256x64 w8 s4, TMA store",
    "desc 128x256x32 w8 s8, TMA store",
    "tlx::ops::gemm (autotuned)",
];

/// Launches one configuration of `kernel` over an `(m, n, k)` problem: one
/// program per output tile, row-major operands with no padding.
macro_rules! launch_tile {
    ($kernel:ident, $dev:expr, $shape:expr, ($a:expr, $b:expr, $c:expr), $bm:literal, $bn:literal, $bk:literal, $nw:literal, $ns:literal) => {{
        let (m, n, k) = $shape;
        let grid = (m.div_ceil($bm) * n.div_ceil($bn)) as u32;
        let (m, n, k) = (m as i32, n as i32, k as i32);
        $kernel::<$bm, $bn, $bk, $nw, $ns>::launch($dev, grid, $a, $b, $c, m, n, k, k, n, n)
    }};
}

/// [`launch_tile!`] for the descriptor kernel: A and B as row-major
/// matrices seen through tensor descriptors.
macro_rules! launch_descriptor_tile {
    ($kernel:ident, $dev:expr, $shape:expr, ($a:expr, $b:expr, $c:expr), $bm:literal, $bn:literal, $bk:literal, $nw:literal, $ns:literal, $ts:literal) => {{
        let (m, n, k) = $shape;
        let grid = (m.div_ceil($bm) * n.div_ceil($bn)) as u32;
        (|| {
            let a_desc = TensorDesc::matrix($a, m, k)?;
            let b_desc = TensorDesc::matrix($b, k, n)?;
            let c_desc = TensorDesc::matrix($c, m, n)?;
            let (m, n, k) = (m as i32, n as i32, k as i32);
            $kernel::<$bm, $bn, $bk, $nw, $ns, $ts>::launch(
                $dev, grid, &a_desc, &b_desc, $c, &c_desc, m, n, k, n,
            )
        })()
    }};
}

macro_rules! gemm_element {
    ($t:ty, $name:literal, $kernel:ident, $descriptor_kernel:ident, $tlx:expr, $pipelined:expr, $pipe:expr, $pingpong:expr, $tuned:expr, $cluster:expr) => {
        impl GemmElement for $t {
            const NAME: &'static str = $name;
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn nan() -> Self {
                <$t>::NAN
            }
            fn launch(
                dev: &Device,
                config: usize,
                (a, b, c): (&Buffer<Self>, &Buffer<Self>, &Buffer<Self>),
                (m, n, k): (usize, usize, usize),
            ) -> Option<Result<(), Error>> {
                let shape = (m, n, k);
                Some(match config {
                    0 => launch_tile!($kernel, dev, shape, (a, b, c), 128, 128, 64, 8, 4),
                    1 => launch_tile!($kernel, dev, shape, (a, b, c), 128, 256, 64, 8, 4),
                    2 => launch_tile!($kernel, dev, shape, (a, b, c), 128, 128, 64, 4, 5),
                    3 => launch_tile!($kernel, dev, shape, (a, b, c), 64, 256, 64, 4, 4),
                    4 => launch_tile!($kernel, dev, shape, (a, b, c), 128, 256, 32, 8, 7),
                    5 => launch_tile!($kernel, dev, shape, (a, b, c), 256, 128, 64, 8, 4),
                    6 => return $tlx(dev, (a, b, c), shape),
                    7 => return $pipelined(dev, (a, b, c), shape),
                    8 => return $pipe(dev, (a, b, c), shape),
                    9 => return $pingpong(dev, (a, b, c), shape),
                    10 => return $tuned(dev, (a, b, c), shape),
                    11 => return $cluster(dev, (a, b, c), shape),
                    12 => launch_descriptor_tile!(
                        $descriptor_kernel,
                        dev,
                        shape,
                        (a, b, c),
                        128,
                        256,
                        64,
                        8,
                        4,
                        0
                    ),
                    13 => launch_descriptor_tile!(
                        $descriptor_kernel,
                        dev,
                        shape,
                        (a, b, c),
                        128,
                        128,
                        64,
                        8,
                        4,
                        0
                    ),
                    14 => launch_descriptor_tile!(
                        $descriptor_kernel,
                        dev,
                        shape,
                        (a, b, c),
                        128,
                        256,
                        32,
                        8,
                        8,
                        0
                    ),
                    15 => launch_descriptor_tile!(
                        $descriptor_kernel,
                        dev,
                        shape,
                        (a, b, c),
                        128,
                        256,
                        64,
                        8,
                        4,
                        1
                    ),
                    16 => launch_descriptor_tile!(
                        $descriptor_kernel,
                        dev,
                        shape,
                        (a, b, c),
                        128,
                        256,
                        32,
                        8,
                        8,
                        1
                    ),
                    17 => tlx::ops::gemm(dev, a, b, c, shape),
                    _ => return None,
                })
            }
        }
    };
}

gemm_element!(
    bf16,
    "bf16",
    matmul_bf16,
    matmul_descriptor_bf16,
    |dev, (a, b, c), shape| Some(hopper_gemm_ws::gemm(dev, a, b, c, shape)),
    |dev, (a, b, c), shape| Some(hopper_gemm_pipelined::gemm(dev, a, b, c, shape)),
    |dev, (a, b, c), shape| Some(hopper_gemm_pipe::gemm(dev, a, b, c, shape)),
    |dev, (a, b, c), shape| Some(hopper_gemm_ws::gemm_pingpong(dev, a, b, c, shape)),
    |dev, (a, b, c), shape| Some(hopper_gemm_ws::gemm_tuned(dev, a, b, c, shape)),
    |dev, (a, b, c), shape| Some(hopper_gemm_cluster::gemm(dev, a, b, c, shape))
);
gemm_element!(
    f16,
    "f16",
    matmul_f16,
    matmul_descriptor_f16,
    |_, _, _| None,
    |_, _, _| None,
    |_, _, _| None,
    |_, _, _| None,
    |_, _, _| None,
    |_, _, _| None
);

/// xorshift64*: fresh (time-seeded) uniform inputs in [-1, 1).
struct Rng(u64);

impl Rng {
    fn fresh() -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Rng(nanos | 1)
    }

    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        bits as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Largest relative difference between `got` and `want` over a sample of
/// elements (relative to the largest magnitude of `want`, as bf16 outputs
/// round each element to 8 bits).
fn max_rel_diff<T: GemmElement>(got: &[T], want: &[T]) -> f64 {
    let step = (want.len() / 1_000_003).max(1);
    let scale = want
        .iter()
        .step_by(step)
        .map(|w| w.to_f32().abs() as f64)
        .fold(1e-30, f64::max);
    got.iter()
        .zip(want)
        .step_by(step)
        .map(|(g, w)| {
            let (g, w) = (g.to_f32() as f64, w.to_f32() as f64);
            if g.is_finite() {
                (g - w).abs() / scale
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

struct Row {
    shape: String,
    dtype: &'static str,
    cublas: f64,
    ours: f64,
    config: String,
    error: f64,
    /// The fastest block-level `dot` configuration (no TLX primitives).
    block: f64,
    block_config: String,
}

fn run_shape<T: GemmElement>(
    dev: &Device,
    blas: &CudaBlas,
    name: &str,
    (m, n, k): (usize, usize, usize),
) -> Result<Row, Box<dyn std::error::Error>>
where
    CudaBlas: Gemm<T>,
{
    let mut rng = Rng::fresh();
    let a: Vec<T> = (0..m * k).map(|_| T::from_f32(rng.uniform())).collect();
    let b: Vec<T> = (0..k * n).map(|_| T::from_f32(rng.uniform())).collect();
    let (da, db) = (dev.upload(&a)?, dev.upload(&b)?);
    drop((a, b));
    let mut reference = dev.upload(&vec![T::nan(); m * n])?;
    let tflops = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
    // Row-major C = A B is column-major C^T = B^T A^T.
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: T::from_f32(1.0),
        lda: n as i32,
        ldb: k as i32,
        beta: T::from_f32(0.0),
        ldc: n as i32,
    };
    // cuBLAS's own errors are kept aside: the timer's closures speak tlx's.
    let mut blas_error = None;
    let mut cublas_call = |c: &mut Buffer<T>| -> Result<(), Error> {
        let (sa, sb) = (da.cuda_slice()?, db.cuda_slice()?);
        // SAFETY: the configuration's dimensions and leading dimensions
        // describe buffers of exactly m*k, k*n and m*n elements.
        if let Err(e) = unsafe { blas.gemm(cfg, sb, sa, c.cuda_slice_mut()?) } {
            blas_error = Some(e);
        }
        Ok(())
    };
    cublas_call(&mut reference)?;
    let cublas_ms = median_ms(dev, || cublas_call(&mut reference))?;
    if let Some(e) = blas_error {
        return Err(format!("cuBLAS failed on {name}: {e}").into());
    }
    let want = reference.download()?;
    let out = dev.alloc::<T>(m * n)?;
    let mut best: Option<(f64, String, f64)> = None;
    let mut best_block: Option<(f64, String)> = None;
    for (i, label) in CONFIGS.iter().enumerate() {
        let poisoned = dev.upload(&vec![T::nan(); m * n])?;
        let Some(first) = T::launch(dev, i, (&da, &db, &poisoned), (m, n, k)) else {
            continue;
        };
        first?;
        let error = max_rel_diff(&poisoned.download()?, &want);
        if error > 2e-2 {
            println!(
                "  {name} {} {label}: WRONG (max rel diff {error:.2e}), not timed",
                T::NAME
            );
            continue;
        }
        let ms = median_ms(dev, || {
            T::launch(dev, i, (&da, &db, &out), (m, n, k)).unwrap_or(Ok(()))
        })?;
        println!(
            "  {name} {} {label}: {:.1} TFLOP/s ({:.2}x cuBLAS), max rel diff {error:.1e}",
            T::NAME,
            tflops(ms),
            cublas_ms / ms
        );
        if best.as_ref().is_none_or(|(b, _, _)| ms < *b) {
            best = Some((ms, label.to_string(), error));
        }
        if !label.starts_with("TLX") && best_block.as_ref().is_none_or(|(b, _)| ms < *b) {
            best_block = Some((ms, label.to_string()));
        }
    }
    let (block_ms, block_config) = best_block.unwrap_or((f64::INFINITY, "none correct".into()));
    let (ms, config, error) = best.unwrap_or((f64::INFINITY, "none correct".into(), f64::NAN));
    Ok(Row {
        shape: format!("{name} {m}x{n}x{k}"),
        dtype: T::NAME,
        cublas: tflops(cublas_ms),
        ours: tflops(ms),
        config,
        error,
        block: tflops(block_ms),
        block_config,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: the GEMM benchmark needs a GPU ({e})");
            return Ok(());
        }
    };
    println!("device: {}", dev.name());
    let blas = CudaBlas::new(dev.cuda_stream()?.clone())?;
    let only = std::env::var("TLX_BENCH_ONLY").unwrap_or_default();
    let shapes = [
        ("GH1", (8192, 8192, 1024)),
        ("GH2", (8192, 8192, 2048)),
        ("GH3", (8192, 8192, 4096)),
        ("GH4", (8192, 8192, 8192)),
        ("GH5", (8192, 8192, 16384)),
        ("GH6", (2304, 12800, 32768)),
        ("GH7", (2285568, 256, 256)),
        ("4096^3", (4096, 4096, 4096)),
    ];
    let mut rows = Vec::new();
    for (name, shape) in shapes {
        if !name.starts_with(&only) {
            continue;
        }
        rows.push(run_shape::<bf16>(&dev, &blas, name, shape)?);
        if matches!(name, "GH4" | "4096^3") {
            rows.push(run_shape::<f16>(&dev, &blas, name, shape)?);
        }
    }
    println!();
    println!(
        "| shape | dtype | cuBLAS TFLOP/s | tlx TFLOP/s | ratio | best config | max rel diff | block-level dot | ratio | its config |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let (mut log_sum, mut block_log_sum, mut counted) = (0.0, 0.0, 0);
    for r in &rows {
        let (ratio, block_ratio) = (r.ours / r.cublas, r.block / r.cublas);
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.2}x | {} | {:.1e} | {:.0} | {:.2}x | {} |",
            r.shape,
            r.dtype,
            r.cublas,
            r.ours,
            ratio,
            r.config,
            r.error,
            r.block,
            block_ratio,
            r.block_config
        );
        let gh1_6 = ["GH1", "GH2", "GH3", "GH4", "GH5", "GH6"];
        if r.dtype == "bf16" && gh1_6.iter().any(|g| r.shape.starts_with(g)) {
            log_sum += ratio.ln();
            block_log_sum += block_ratio.ln();
            counted += 1;
        }
    }
    if counted > 0 {
        let mean = |sum: f64| (sum / counted as f64).exp();
        println!(
            "geometric mean over GH1-GH6 (bf16): {:.2}x cuBLAS (best of all), {:.2}x (block-level `dot`)",
            mean(log_sum),
            mean(block_log_sum)
        );
    }
    if "fp8".starts_with(&only) || only.is_empty() {
        fp8_8192(&dev)?;
    }
    Ok(())
}

/// The fp8 (e4m3) TLX GEMM at 8192^3, bf16 out. cuBLAS's fp8 GEMM is not
/// reachable through cudarc here: compare with `torch._scaled_mm` from
/// `../shared/anchors.py`, run in the same sitting.
fn fp8_8192(dev: &Device) -> Result<(), Box<dyn std::error::Error>> {
    let (m, n, k) = (8192, 8192, 8192);
    let mut rng = Rng::fresh();
    let mut random = |len: usize| -> Vec<F8E4M3> {
        (0..len)
            .map(|_| F8E4M3::from_f32(2.0 * rng.uniform()))
            .collect()
    };
    let (a, bt) = (dev.upload(&random(m * k))?, dev.upload(&random(n * k))?);
    let c = dev.upload(&vec![bf16::NAN; m * n])?;
    tlx::ops::gemm_fp8(dev, &a, &bt, &c, (m, n, k), 1.0)?;
    let finite = c.download()?.iter().step_by(4099).all(|v| v.is_finite());
    let ms = median_ms(dev, || tlx::ops::gemm_fp8(dev, &a, &bt, &c, (m, n, k), 1.0))?;
    let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
    println!(
        "fp8 e4m3 8192^3 (TLX pipe!, bf16 out): {tflops:.1} TFLOP/s, outputs finite: {finite}"
    );
    Ok(())
}
