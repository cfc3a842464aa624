//! `tlx::ops::grouped_gemm` (contiguous layout) against an f64 reference on
//! fresh random inputs with skewed group sizes: empty groups, groups smaller
//! than a tile, and a total that is a multiple of nothing; on the
//! interpreter (CI) and on the GPU where there is one. The output is
//! poisoned first, so a row no group wrote shows.

use tlx::ops::{Fp8Scales, GroupedKernel as Kernel};
use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// `sum over p < k of term(p)` in f64 and the sum of the terms'
/// magnitudes, which bounds the rounding a bf16 result may carry.
fn dot_f64(k: usize, term: impl Fn(usize) -> f64) -> (f64, f64) {
    (0..k)
        .map(term)
        .fold((0.0, 0.0), |(sum, scale), x| (sum + x, scale + x.abs()))
}

fn bf16_vec(v: Vec<f32>) -> Vec<bf16> {
    v.into_iter().map(bf16::from_f32).collect()
}

fn grouped_matches_reference(dev: &Device, sizes: &[usize], n: usize, k: usize, kernel: Kernel) {
    let experts = sizes.len();
    let m_total: usize = sizes.iter().sum();
    let mut offsets = vec![0i32];
    for s in sizes {
        offsets.push(offsets.last().copied().unwrap_or(0) + *s as i32);
    }
    let mut rng = fresh_rng();
    let a = bf16_vec(rng.vec(m_total * k, 1.0));
    let b = bf16_vec(rng.vec(experts * k * n, 1.0));
    let (da, db) = (dev.upload(&a).expect("a"), dev.upload(&b).expect("b"));
    let dc = dev.upload(&vec![bf16::NAN; m_total * n]).expect("c");
    let doff = dev.upload(&offsets).expect("offsets");
    let shape = (m_total, n, k, experts);
    tlx::ops::grouped_gemm_with(dev, (&da, &db, &dc), &doff, shape, kernel).expect("launch");
    let got = dc.download().expect("download");
    for e in 0..experts {
        for row in offsets[e] as usize..offsets[e + 1] as usize {
            for j in 0..n {
                let (want, scale) = dot_f64(k, |p| {
                    f64::from(a[row * k + p].to_f32()) * f64::from(b[(e * k + p) * n + j].to_f32())
                });
                let g = f64::from(got[row * n + j].to_f32());
                // bf16 output: half an ulp is up to 2^-8 of the value.
                assert!(
                    (g - want).abs() <= 8e-3 * scale.max(1e-3),
                    "expert {e} row {row} col {j}: got {g}, want {want}"
                );
            }
        }
    }
}

#[test]
fn grouped_gemm_on_the_interpreter() {
    let dev = Device::cpu();
    grouped_matches_reference(&dev, &[0, 7, 45, 0, 20, 1], 40, 48, Kernel::Auto);
}

/// `k` a multiple of the K block and `n` of 8: the tensor-core (TMA)
/// kernels, one program per tile and persistent.
#[test]
fn grouped_gemm_tma_on_the_interpreter() {
    let dev = Device::cpu();
    let sizes = [0, 7, 45, 0, 20, 1, 33];
    grouped_matches_reference(&dev, &sizes, 40, 64, Kernel::PerTile);
    grouped_matches_reference(
        &dev,
        &[0, 7, 130, 0, 20, 1, 33],
        40,
        128,
        Kernel::Persistent,
    );
}

#[test]
fn grouped_gemm_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    let sizes = [0, 300, 5, 0, 1000, 129, 64, 0, 1];
    grouped_matches_reference(&dev, &sizes[..8], 520, 264, Kernel::Auto);
    for kernel in [Kernel::Auto, Kernel::PerTile, Kernel::Persistent] {
        grouped_matches_reference(&dev, &sizes, 520, 256, kernel);
    }
}

/// The masked layout: `counts[e]` of `m_max` rows per expert, counts from 0
/// to past `m_max` (clamped); rows past an expert's count stay poisoned.
fn masked_matches_reference(
    dev: &Device,
    counts: &[i32],
    (m_max, n, k): (usize, usize, usize),
    kernel: Kernel,
) {
    let experts = counts.len();
    let mut rng = fresh_rng();
    let a = bf16_vec(rng.vec(experts * m_max * k, 1.0));
    let b = bf16_vec(rng.vec(experts * k * n, 1.0));
    let (da, db) = (dev.upload(&a).expect("a"), dev.upload(&b).expect("b"));
    let dc = dev
        .upload(&vec![bf16::NAN; experts * m_max * n])
        .expect("c");
    let dcounts = dev.upload(counts).expect("counts");
    let shape = (m_max, n, k, experts);
    tlx::ops::grouped_gemm_masked_with(dev, (&da, &db, &dc), &dcounts, shape, kernel)
        .expect("launch");
    let got = dc.download().expect("download");
    for (e, &count) in counts.iter().enumerate() {
        let used = (count.max(0) as usize).min(m_max);
        for r in 0..m_max {
            let row = e * m_max + r;
            for j in 0..n {
                let g = got[row * n + j].to_f32();
                if r >= used {
                    assert!(g.is_nan(), "expert {e} row {r} past its count was written");
                    continue;
                }
                let (want, scale) = dot_f64(k, |p| {
                    f64::from(a[row * k + p].to_f32()) * f64::from(b[(e * k + p) * n + j].to_f32())
                });
                assert!(
                    (f64::from(g) - want).abs() <= 8e-3 * scale.max(1e-3),
                    "expert {e} row {r} col {j}: got {g}, want {want}"
                );
            }
        }
    }
}

#[test]
fn masked_grouped_gemm_on_the_interpreter() {
    let counts = [0, 5, 40, 33, -2, 1];
    masked_matches_reference(&Device::cpu(), &counts, (33, 40, 48), Kernel::Auto);
}

#[test]
fn masked_grouped_gemm_tma_on_the_interpreter() {
    let counts = [0, 5, 40, 33, -2, 1];
    masked_matches_reference(&Device::cpu(), &counts, (33, 40, 64), Kernel::PerTile);
    masked_matches_reference(&Device::cpu(), &counts, (33, 40, 64), Kernel::Persistent);
}

#[test]
fn masked_grouped_gemm_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    let counts = [0, 64, 1, 200, 17, 0, 130, 9];
    masked_matches_reference(&dev, &counts, (130, 520, 264), Kernel::Auto);
    // The TMA kernels, with 128-row tiles and (m_max <= 64) 64-row ones.
    for kernel in [Kernel::Auto, Kernel::PerTile, Kernel::Persistent] {
        masked_matches_reference(&dev, &counts, (130, 520, 256), kernel);
        masked_matches_reference(&dev, &[0, 64, 1, 70, 17, 0, 30, 9], (64, 264, 128), kernel);
    }
}

/// The general layout: every group its own buffers and sizes (one empty,
/// one of a single row, K and N differing), through the addresses table.
fn general_matches_reference(dev: &Device, shapes: &[(usize, usize, usize)]) {
    let mut rng = fresh_rng();
    let hosts: Vec<(Vec<bf16>, Vec<bf16>)> = shapes
        .iter()
        .map(|&(m, n, k)| (bf16_vec(rng.vec(m * k, 1.0)), bf16_vec(rng.vec(k * n, 1.0))))
        .collect();
    let bufs: Vec<_> = hosts
        .iter()
        .zip(shapes)
        .map(|((a, b), &(m, n, _))| {
            let c = dev.upload(&vec![bf16::NAN; (m * n).max(1)]).expect("c");
            (dev.upload(a).expect("a"), dev.upload(b).expect("b"), c)
        })
        .collect();
    let problems: Vec<tlx::ops::GroupProblem<'_>> = bufs
        .iter()
        .zip(shapes)
        .map(|((a, b, c), &shape)| tlx::ops::GroupProblem { a, b, c, shape })
        .collect();
    tlx::ops::grouped_gemm_general(dev, &problems).expect("launch");
    for (g, (((a, b), (_, _, c)), &(m, n, k))) in hosts.iter().zip(&bufs).zip(shapes).enumerate() {
        let got = c.download().expect("download");
        for i in 0..m {
            for j in 0..n {
                let (want, scale) = dot_f64(k, |p| {
                    f64::from(a[i * k + p].to_f32()) * f64::from(b[p * n + j].to_f32())
                });
                let v = f64::from(got[i * n + j].to_f32());
                assert!(
                    (v - want).abs() <= 8e-3 * scale.max(1e-3),
                    "group {g} ({i}, {j}): got {v}, want {want}"
                );
            }
        }
    }
}

/// Rows of whole 16-byte units take the TMA kernel (descriptors made per
/// group on the device); a group of 7 columns sends all to the pointer one.
#[test]
fn general_grouped_gemm_on_the_interpreter() {
    let dev = Device::cpu();
    general_matches_reference(&dev, &[(20, 40, 48), (0, 16, 8), (1, 24, 72), (45, 8, 16)]);
    general_matches_reference(&dev, &[(20, 40, 48), (0, 16, 8), (1, 24, 72), (45, 7, 16)]);
}

#[test]
fn general_grouped_gemm_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    general_matches_reference(
        &dev,
        &[(300, 520, 264), (0, 64, 64), (1, 128, 512), (700, 96, 200)],
    );
    general_matches_reference(&dev, &[(300, 520, 264), (1, 128, 512), (700, 95, 200)]);
}

/// fp8 with rowwise scales (`grouped_gemm_fp8`, contiguous when `m_max` is
/// `None`, else masked with `sizes` as the counts): every expert's rows
/// against an f64 reference of `sa[row] * sb[e, col] * sum(a * b_t)`; rows
/// no group covers stay poisoned.
fn fp8_matches_reference(
    dev: &Device,
    sizes: &[i32],
    m_max: Option<usize>,
    (n, k): (usize, usize),
    scaling: Fp8Scales,
) {
    let experts = sizes.len();
    let used: Vec<usize> = sizes
        .iter()
        .map(|&s| (s.max(0) as usize).min(m_max.unwrap_or(usize::MAX)))
        .collect();
    let starts: Vec<usize> = match m_max {
        Some(m) => (0..experts).map(|e| e * m).collect(),
        None => used
            .iter()
            .scan(0, |at, s| {
                *at += s;
                Some(*at - s)
            })
            .collect(),
    };
    let rows = m_max.map_or(used.iter().sum(), |m| m * experts);
    let mut rng = fresh_rng();
    let fp8 =
        |v: Vec<f32>| -> Vec<F8E4M3> { v.into_iter().map(|x| F8E4M3::from_f32(4.0 * x)).collect() };
    let a = fp8(rng.vec(rows * k, 1.0));
    let b_t = fp8(rng.vec(experts * n * k, 1.0));
    let scales = |len: usize, rng: &mut rng::Rng| -> Vec<f32> {
        rng.vec(len, 1.0)
            .into_iter()
            .map(|x| 1.0 + 0.5 * x)
            .collect()
    };
    // Rowwise: one per row and one per expert's column; blockwise: one per
    // row and 128 of K, and one per 128 x 128 block of an expert's [n, k].
    let (k_blocks, n_blocks) = (k.div_ceil(128), n.div_ceil(128));
    let (sa, sb) = match scaling {
        Fp8Scales::Rowwise => (scales(rows, &mut rng), scales(experts * n, &mut rng)),
        Fp8Scales::Blockwise => (
            scales(rows * k_blocks, &mut rng),
            scales(experts * n_blocks * k_blocks, &mut rng),
        ),
    };
    let scale_of = |row: usize, e: usize, j: usize, p: usize| -> f64 {
        match scaling {
            Fp8Scales::Rowwise => f64::from(sa[row]) * f64::from(sb[e * n + j]),
            Fp8Scales::Blockwise => {
                let kb = p / 128;
                let b = (e * n_blocks + j / 128) * k_blocks + kb;
                f64::from(sa[row * k_blocks + kb]) * f64::from(sb[b])
            }
        }
    };
    let up = |v: &[F8E4M3]| dev.upload(v).expect("upload");
    let (da, db) = (up(&a), up(&b_t));
    let (dsa, dsb) = (dev.upload(&sa).expect("sa"), dev.upload(&sb).expect("sb"));
    let dc = dev.upload(&vec![bf16::NAN; rows * n]).expect("c");
    match m_max {
        Some(m) => {
            let counts = dev.upload(sizes).expect("counts");
            let shape = (m, n, k, experts);
            let (a, b) = ((&da, &dsa), (&db, &dsb));
            tlx::ops::grouped_gemm_fp8_masked_with(dev, a, b, &dc, &counts, shape, scaling)
        }
        None => {
            let mut offsets = vec![0i32];
            offsets.extend(starts.iter().zip(&used).map(|(s, u)| (s + u) as i32));
            let offsets = dev.upload(&offsets).expect("offsets");
            let shape = (rows, n, k, experts);
            let (a, b) = ((&da, &dsa), (&db, &dsb));
            tlx::ops::grouped_gemm_fp8_with(dev, a, b, &dc, &offsets, shape, scaling)
        }
    }
    .expect("launch");
    let got = dc.download().expect("download");
    let mut covered = vec![false; rows];
    for e in 0..experts {
        for row in starts[e]..starts[e] + used[e] {
            covered[row] = true;
            for j in 0..n {
                let (want, scale) = dot_f64(k, |p| {
                    f64::from(a[row * k + p].to_f32())
                        * f64::from(b_t[(e * n + j) * k + p].to_f32())
                        * scale_of(row, e, j, p)
                });
                let g = f64::from(got[row * n + j].to_f32());
                assert!(
                    (g - want).abs() <= 8e-3 * scale.max(1e-3),
                    "expert {e} row {row} col {j}: got {g}, want {want}"
                );
            }
        }
    }
    for (row, _) in covered.iter().enumerate().filter(|(_, c)| !**c) {
        assert!(
            got[row * n].to_f32().is_nan(),
            "row {row}, in no group, was written"
        );
    }
}

#[test]
fn fp8_grouped_gemm_on_the_interpreter() {
    let dev = Device::cpu();
    let rowwise = Fp8Scales::Rowwise;
    fp8_matches_reference(&dev, &[0, 7, 130, 0, 20, 1], None, (40, 32), rowwise);
    fp8_matches_reference(&dev, &[0, 5, 40, 33, -2, 1], Some(33), (40, 32), rowwise);
    // DeepGEMM's 128-block scales: two K blocks, two N blocks.
    let blockwise = Fp8Scales::Blockwise;
    fp8_matches_reference(&dev, &[0, 7, 130, 0, 20, 1], None, (136, 256), blockwise);
    fp8_matches_reference(&dev, &[0, 5, 40, 33, -2, 1], Some(33), (40, 256), blockwise);
}

#[test]
fn fp8_grouped_gemm_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    let sizes = [0, 300, 5, 0, 1000, 129, 64, 0];
    let counts = [0, 64, 1, 200, 17, 0, 130, 9];
    for (scaling, k) in [(Fp8Scales::Rowwise, 272), (Fp8Scales::Blockwise, 512)] {
        fp8_matches_reference(&dev, &sizes, None, (520, k), scaling);
        fp8_matches_reference(&dev, &counts, Some(130), (520, 256), scaling);
    }
}

/// What the fp8 ops refuse, with the reason.
#[test]
fn fp8_grouped_gemm_refuses_bad_shapes() {
    let dev = Device::cpu();
    let a = dev.alloc::<F8E4M3>(64 * 40).expect("a");
    let b = dev.alloc::<F8E4M3>(2 * 64 * 40).expect("b");
    let (sa, sb) = (
        dev.alloc::<f32>(64).expect("sa"),
        dev.alloc::<f32>(128).expect("sb"),
    );
    let c = dev.alloc::<bf16>(64 * 64).expect("c");
    let offsets = dev.upload(&[0i32, 30, 64]).expect("offsets");
    let run = |shape| tlx::ops::grouped_gemm_fp8(&dev, (&a, &sa), (&b, &sb), &c, &offsets, shape);
    let k_odd = run((64, 64, 40, 2)).expect_err("k = 40").to_string();
    assert!(k_odd.contains("multiple of 16"), "{k_odd}");
    let short = run((64, 64, 48, 2)).expect_err("a too short").to_string();
    assert!(short.contains("`a`"), "{short}");
    let blockwise = tlx::ops::grouped_gemm_fp8_with(
        &dev,
        (&a, &sa),
        (&b, &sb),
        &c,
        &offsets,
        (64, 64, 32, 2),
        Fp8Scales::Blockwise,
    )
    .expect_err("k = 32 blockwise")
    .to_string();
    assert!(blockwise.contains("multiple of 128"), "{blockwise}");
    // DeepSeek-V3's gate/up shape: B (256 x 4096 x 7168) passes 2^31
    // elements, which the kernel never indexes whole; refused here only for
    // the buffers given, not for its size.
    let offsets = dev.upload(&[64i32; 257]).expect("offsets");
    let shape = (64, 4096, 7168, 256);
    let big = tlx::ops::grouped_gemm_fp8(&dev, (&a, &sa), (&b, &sb), &c, &offsets, shape)
        .expect_err("small buffers")
        .to_string();
    assert!(big.contains("`a` holds") && !big.contains("2^31"), "{big}");
}
