//! What a `dot` operand costs when its loads cannot be copied with
//! `cp.async` (a run-time stride on the contiguous dimension, or a
//! transposed operand): Triton's tutorial matmul with every stride a
//! run-time argument, against the same kernel with the contiguous strides
//! written as 1 (the fast path), in the same run. f16 in, f32 out.
//!
//! `cargo bench --bench dot_staging` (on the GPU; on the interpreter it
//! says so and runs a small size).

use tlx::prelude::*;
use tlx::BenchSpec;

macro_rules! tutorial_matmul {
    ($name:ident, $a_at:tt, $b_at:tt) => {
        #[tlx::kernel(configs = [
                    (BLOCK_M = 64, BLOCK_N = 64, BLOCK_K = 32, num_warps = 4),
                    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, num_warps = 8, num_stages = 3),
                ])]
        fn $name<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
            a: Ptr<f16>,
            b: Ptr<f16>,
            c: Ptr<f32>,
            m: i32,
            n: i32,
            k: i32,
            stride_am: i32,
            stride_ak: i32,
            stride_bk: i32,
            stride_bn: i32,
        ) {
            let rows = (program_id(0) * BLOCK_M + arange(0, BLOCK_M))[(.., None)];
            let cols = (program_id(1) * BLOCK_N + arange(0, BLOCK_N))[(None, ..)];
            let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
            for k0 in (0..k).step_by(BLOCK_K) {
                let ks = (k0 + arange(0, BLOCK_K))[(None, ..)];
                let ks_col = (k0 + arange(0, BLOCK_K))[(.., None)];
                let a_tile = load(a + $a_at, mask = (rows < m) & (ks < k), other = 0.0);
                let b_tile = load(b + $b_at, mask = (ks_col < k) & (cols < n), other = 0.0);
                acc = dot(a_tile, b_tile, acc);
            }
            store(c + rows * n + cols, acc, mask = (rows < m) & (cols < n));
        }
    };
}

// Row-major A and B: run-time strides everywhere, or the contiguous ones 1.
tutorial_matmul!(
    runtime_strides,
    (rows * stride_am + ks * stride_ak),
    (ks_col * stride_bk + cols * stride_bn)
);
tutorial_matmul!(
    unit_strides,
    (rows * stride_am + ks),
    (ks_col * stride_bk + cols)
);
// B stored transposed ([N, K], K contiguous): the fast path for B is K-major.
tutorial_matmul!(
    b_transposed,
    (rows * stride_am + ks),
    (ks_col + cols * stride_bn)
);

type Launch =
    fn(&Device, Grid, &Buffer<f16>, &Buffer<f16>, &Buffer<f32>, [i32; 7]) -> Result<(), Error>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::new();
    let sizes: &[usize] = if !dev.is_gpu() {
        println!("no GPU: timing the interpreter at a small size (not a GPU result)");
        &[130]
    } else {
        &[1000, 2048, 4096, 8192]
    };
    println!("| size | tile | kernel | ms | TFLOP/s | vs unit strides |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for &s in sizes {
        let a = dev.upload(&vec![f16::from_f32(0.5); s * s])?;
        let b = dev.upload(&vec![f16::from_f32(0.25); s * s])?;
        let c = dev.alloc::<f32>(s * s)?;
        let si = s as i32;
        for tile in [64usize, 128] {
            let grid = Grid::from((s.div_ceil(tile) as u32, s.div_ceil(tile) as u32, 1));
            let kernels: [(&str, Launch, [i32; 7]); 3] = [
                (
                    "unit strides",
                    if tile == 64 {
                        |d, g, a, b, c, x| {
                            unit_strides::<64, 64, 32>::launch(
                                d, g, a, b, c, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                            )
                        }
                    } else {
                        |d, g, a, b, c, x| {
                            unit_strides::<128, 128, 64>::launch(
                                d, g, a, b, c, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                            )
                        }
                    },
                    [si, si, si, si, 1, si, 1],
                ),
                (
                    "run-time strides",
                    if tile == 64 {
                        |d, g, a, b, c, x| {
                            runtime_strides::<64, 64, 32>::launch(
                                d, g, a, b, c, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                            )
                        }
                    } else {
                        |d, g, a, b, c, x| {
                            runtime_strides::<128, 128, 64>::launch(
                                d, g, a, b, c, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                            )
                        }
                    },
                    [si, si, si, si, 1, si, 1],
                ),
                (
                    "B transposed",
                    if tile == 64 {
                        |d, g, a, b, c, x| {
                            b_transposed::<64, 64, 32>::launch(
                                d, g, a, b, c, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                            )
                        }
                    } else {
                        |d, g, a, b, c, x| {
                            b_transposed::<128, 128, 64>::launch(
                                d, g, a, b, c, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                            )
                        }
                    },
                    [si, si, si, si, 1, 1, si],
                ),
            ];
            let mut unit_ms = 0.0;
            for (name, launch, args) in kernels {
                let ms = dev.bench(BenchSpec::default(), || {
                    launch(&dev, grid, &a, &b, &c, args)
                })?;
                // Every element is 0.5 * 0.25 * s: a wrong kernel shows.
                let got = c.download()?;
                let want = 0.125 * s as f32;
                if got.iter().any(|&v| (v - want).abs() > 1e-3 * want) {
                    return Err(format!("{name} at {s}: wrong result").into());
                }
                if name == "unit strides" {
                    unit_ms = ms;
                }
                let tflops = 2.0 * (s as f64).powi(3) / (f64::from(ms) * 1e-3) / 1e12;
                println!(
                    "| {s} | {tile} | {name} | {ms:.3} | {tflops:.1} | {:.2} |",
                    unit_ms / ms
                );
            }
        }
    }
    Ok(())
}
