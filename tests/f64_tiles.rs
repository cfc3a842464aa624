//! `f64` tiles and scalars: loads and stores, IEEE arithmetic (each op
//! correctly rounded, so GPU, interpreter and plain Rust agree bit for
//! bit), `fma`, `sqrt`, rounding functions, comparisons, casts to and from
//! the other types, promotion of f32 and integers, reductions, scans,
//! shared memory and `atomic_add`. On the interpreter in CI and on the GPU
//! where there is one; outputs are poisoned first.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

const N: usize = 256;

#[tlx::kernel(num_warps = 4)]
fn f64_elementwise(
    x: Ptr<f64>,
    y: Ptr<f64>,
    narrow: Ptr<f32>,
    scale: f64,
    out: Ptr<f64>,
    rounded: Ptr<f64>,
    casts: Ptr<i32>,
    halves: Ptr<f16>,
) {
    let i = arange(0, 256);
    let a = load(x + i);
    let b = load(y + i);
    // f32 (here an f32 sum with an i32) promotes to f64, as in Triton.
    let wide = load(narrow + i) + i;
    let r = fma(a, b, wide) / (abs(b) + 1.0) - sqrt(abs(a)) * scale;
    store(out + i, select(a > b, r, maximum(r, a)));
    let (before, _) = cumsum(a, axis = 0);
    store(out + 256 + i, before + a);
    store(rounded + i, floor(a * 8.0));
    store(rounded + 256 + i, ceil(a * 8.0));
    store(rounded + 512 + i, round(a * 8.0));
    store(rounded + 768 + i, trunc(a * 8.0));
    store(casts + i, (a * 1000.0).to(i32));
    store(halves + i, a.to(f16));
}

#[tlx::kernel(num_warps = 4)]
fn f64_reductions(x: Ptr<f64>, sums: Ptr<f64>, maxes: Ptr<f64>, total: Ptr<f64>) {
    let rows = arange(0, 16);
    let cols = arange(0, 16);
    let tile = load(x + rows[(.., None)] * 16 + cols[(None, ..)]);
    // Through shared memory and back.
    let buf = local_alloc([16, 16], f64, 1);
    local_store(local_view(buf, 0), tile);
    let back = local_load(local_view(buf, 0));
    store(sums + rows, sum(back, axis = 1));
    store(maxes + cols, max(back, axis = 0));
    atomic_add(total + rows * 0, sum(back, axis = 1));
}

/// TMA moves f64 blocks like any other (Triton's block-level descriptors).
#[tlx::kernel(num_warps = 4)]
fn f64_descriptors(src: TensorDesc<f64, 16, 32>, dst: TensorDesc<f64, 16, 32>) {
    let row = program_id(0) * 16;
    dst.store([row, 0], src.load([row, 0]) * 2.0f64 - 0.125);
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn elementwise_agrees(dev: &Device) {
    let mut rng = fresh_rng();
    let x: Vec<f64> = rng
        .vec(N, 4.0)
        .iter()
        .map(|&v| f64::from(v) / 3.0)
        .collect();
    let y: Vec<f64> = rng
        .vec(N, 4.0)
        .iter()
        .map(|&v| f64::from(v) * 1.1)
        .collect();
    let narrow = rng.vec(N, 2.0);
    let scale = 0.7;
    let up64 = |v: &[f64]| dev.upload(v).expect("upload");
    let (xb, yb, nb) = (up64(&x), up64(&y), dev.upload(&narrow).expect("upload"));
    let out = up64(&vec![f64::NAN; 2 * N]);
    let rounded = up64(&vec![f64::NAN; 4 * N]);
    let casts = dev.upload(&vec![i32::MIN; N]).expect("upload");
    let halves = dev.upload(&vec![f16::NAN; N]).expect("upload");
    f64_elementwise::launch(
        dev, 1u32, &xb, &yb, &nb, scale, &out, &rounded, &casts, &halves,
    )
    .expect("launch");
    let mut want = Vec::with_capacity(2 * N);
    for i in 0..N {
        let (a, b) = (x[i], y[i]);
        let wide = f64::from(narrow[i] + i as f32);
        let r = a.mul_add(b, wide) / (b.abs() + 1.0) - a.abs().sqrt() * scale;
        let max = if r.is_nan() || a.is_nan() {
            f64::NAN
        } else {
            r.max(a)
        };
        want.push(if a > b { r } else { max });
    }
    // Hillis-Steele order, as the GPU scans: compare by value, not bits.
    let mut running = 0.0;
    let prefix: Vec<f64> = x
        .iter()
        .map(|&a| {
            running += a;
            running
        })
        .collect();
    let got = out.download().expect("download");
    assert_eq!(bits(&got[..N]), bits(&want), "elementwise f64");
    for (i, (g, w)) in got[N..].iter().zip(&prefix).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
            "cumsum[{i}]: {g} vs {w}"
        );
    }
    let got = rounded.download().expect("download");
    let scaled: Vec<f64> = x.iter().map(|a| a * 8.0).collect();
    let funcs: [fn(f64) -> f64; 4] = [f64::floor, f64::ceil, f64::round_ties_even, f64::trunc];
    for (k, f) in funcs.iter().enumerate() {
        let want: Vec<f64> = scaled.iter().map(|&v| f(v)).collect();
        assert_eq!(
            bits(&got[k * N..(k + 1) * N]),
            bits(&want),
            "rounding function {k}"
        );
    }
    let want: Vec<i32> = x.iter().map(|a| (a * 1000.0) as i32).collect();
    assert_eq!(casts.download().expect("download"), want, "f64 to i32");
    let want: Vec<u16> = x.iter().map(|&a| f16::from_f64(a).to_bits()).collect();
    let got: Vec<u16> = halves
        .download()
        .expect("download")
        .iter()
        .map(|h| h.to_bits())
        .collect();
    assert_eq!(got, want, "f64 to f16, rounded once");
}

fn reductions_agree(dev: &Device) {
    let mut rng = fresh_rng();
    let x: Vec<f64> = rng
        .vec(N, 1.0)
        .iter()
        .map(|&v| f64::from(v) + 1e-9)
        .collect();
    let xb = dev.upload(&x).expect("upload");
    let sums = dev.upload(&[f64::NAN; 16]).expect("upload");
    let maxes = dev.upload(&[f64::NAN; 16]).expect("upload");
    let total = dev.upload(&[0.25f64]).expect("upload");
    f64_reductions::launch(dev, 1u32, &xb, &sums, &maxes, &total).expect("launch");
    let row_sums: Vec<f64> = x.chunks(16).map(|r| r.iter().sum()).collect();
    let col_maxes: Vec<f64> = (0..16)
        .map(|c| (0..16).map(|r| x[r * 16 + c]).fold(f64::MIN, f64::max))
        .collect();
    let close = |g: f64, w: f64| (g - w).abs() <= 1e-13 * (1.0 + w.abs());
    let got = sums.download().expect("download");
    assert!(
        got.iter().zip(&row_sums).all(|(g, w)| close(*g, *w)),
        "{got:?} vs {row_sums:?}"
    );
    assert_eq!(bits(&maxes.download().expect("download")), bits(&col_maxes));
    let want_total = 0.25 + row_sums.iter().sum::<f64>();
    let got_total = total.download().expect("download")[0];
    assert!(
        close(got_total, want_total),
        "atomic_add: {got_total} vs {want_total}"
    );
}

fn descriptors_agree(dev: &Device) {
    // 40 rows: the last block reaches past the end (read as zeros, not written).
    let (rows, cols) = (40, 32);
    let x: Vec<f64> = fresh_rng()
        .vec(rows * cols, 3.0)
        .iter()
        .map(|&v| f64::from(v) / 7.0)
        .collect();
    let src = dev.upload(&x).expect("upload");
    let dst = dev.upload(&vec![f64::NAN; rows * cols]).expect("upload");
    let desc = |b| TensorDesc::new(b, &[rows, cols], &[cols, 1]).expect("descriptor");
    f64_descriptors::launch(dev, 3u32, &desc(&src), &desc(&dst)).expect("launch");
    let want: Vec<f64> = x.iter().map(|v| v * 2.0 - 0.125).collect();
    assert_eq!(
        bits(&dst.download().expect("download")),
        bits(&want),
        "TMA of f64"
    );
}

#[test]
fn f64_on_the_interpreter() {
    let dev = Device::cpu();
    elementwise_agrees(&dev);
    reductions_agree(&dev);
    descriptors_agree(&dev);
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn f64_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        elementwise_agrees(&dev);
        reductions_agree(&dev);
        descriptors_agree(&dev);
    }
}
