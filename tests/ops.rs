//! `tlx::ops` against f64 references on fresh random inputs, outputs
//! poisoned first: `gemm` through both of its kernels (TMA where the rows
//! allow, masked pointers where not), the row-wise ops over rows
//! shorter and longer than one block, in f32 and bf16, and `attention` over
//! views into larger buffers (its full coverage is the `hopper_fa_fwd` and
//! `hopper_fa_bwd` examples), `gemm_fp8`, and Blackwell's `gemm_tcgen05`,
//! `gemm_mxfp8` and `gemm_nvfp4` (on another GPU their typed error). On the interpreter
//! in CI; on the GPU (autotuned) where there is one. Bad shapes are typed
//! errors.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

fn bf16s(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|x| bf16::from_f32(*x)).collect()
}

fn widen(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| f64::from(x.to_f32())).collect()
}

/// Largest error relative to the largest reference magnitude; NaN (an
/// element left poisoned) counts as infinitely wrong.
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f64, |m, w| m.max(w.abs()));
    got.iter().zip(want).fold(0f64, |m, (g, w)| {
        let e = (g - w).abs();
        if e.is_nan() {
            f64::INFINITY
        } else {
            m.max(e / scale)
        }
    })
}

/// A bf16 GEMM entry of `tlx::ops`.
type Gemm = fn(
    &Device,
    &Buffer<bf16>,
    &Buffer<bf16>,
    &Buffer<bf16>,
    (usize, usize, usize),
) -> Result<(), Error>;

fn gemm_agrees(dev: &Device, mnk: (usize, usize, usize)) {
    gemm_with_agrees(dev, "gemm", tlx::ops::gemm, mnk);
}

/// `gemm_tcgen05`, Blackwell's kernel: on a GPU that is not a Blackwell
/// one, the typed error that says so.
fn gemm_tcgen05_agrees(dev: &Device, mnk: (usize, usize, usize)) {
    let tcgen05: Gemm = tlx::ops::gemm_tcgen05;
    if let Some((major, _)) = dev.compute_capability() {
        if major != 10 {
            let x = dev.alloc::<bf16>(mnk.0 * mnk.2).expect("alloc");
            let y = dev.alloc::<bf16>(mnk.2 * mnk.1).expect("alloc");
            let z = dev.alloc::<bf16>(mnk.0 * mnk.1).expect("alloc");
            let err = tcgen05(dev, &x, &y, &z, mnk).expect_err("sm_100a only");
            assert!(matches!(err, Error::NoMatchingPtx { .. }), "{err}");
            return;
        }
    }
    gemm_with_agrees(dev, "gemm_tcgen05", tcgen05, mnk);
}

fn gemm_with_agrees(dev: &Device, name: &str, gemm: Gemm, (m, n, k): (usize, usize, usize)) {
    let mut rng = fresh_rng();
    let a = bf16s(&rng.vec(m * k, 1.0));
    let b = bf16s(&rng.vec(k * n, 1.0));
    let (da, db) = (
        dev.upload(&a).expect("upload"),
        dev.upload(&b).expect("upload"),
    );
    let dc = dev.upload(&vec![bf16::NAN; m * n]).expect("upload");
    gemm(dev, &da, &db, &dc, (m, n, k)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (a, b) = (widen(&a), widen(&b));
    let want: Vec<f64> = (0..m * n)
        .map(|x| (0..k).map(|p| a[x / n * k + p] * b[p * n + x % n]).sum())
        .collect();
    let err = relative_error(&widen(&dc.download().expect("download")), &want);
    assert!(err < 1e-2, "{name} {m}x{n}x{k}: relative error {err}");
}

fn rows_agree(dev: &Device, rows: usize, cols: usize) {
    let mut rng = fresh_rng();
    // A large offset: layer_norm must not lose the variance to it.
    let x: Vec<f32> = rng.vec(rows * cols, 2.0).iter().map(|v| v + 30.0).collect();
    let w = rng.vec(cols, 1.0);
    let bias = rng.vec(cols, 1.0);
    let up = |v: &[f32]| dev.upload(v).expect("upload");
    let poisoned = || dev.upload(&vec![f32::NAN; rows * cols]).expect("upload");
    let (dx, dw, db) = (up(&x), up(&w), up(&bias));
    let (soft, rms, layer) = (poisoned(), poisoned(), poisoned());
    tlx::ops::softmax(dev, &dx, &soft, rows, cols).expect("softmax");
    tlx::ops::rms_norm(dev, &dx, &dw, &rms, (rows, cols), 1e-6).expect("rms_norm");
    tlx::ops::layer_norm(dev, &dx, (&dw, &db), &layer, (rows, cols), 1e-5).expect("layer_norm");
    let mut want = (Vec::new(), Vec::new(), Vec::new());
    for row in x.chunks(cols) {
        let r: Vec<f64> = row.iter().map(|v| f64::from(*v)).collect();
        let top = r.iter().copied().fold(f64::MIN, f64::max);
        let total: f64 = r.iter().map(|v| (v - top).exp()).sum();
        want.0.extend(r.iter().map(|v| (v - top).exp() / total));
        let ms = r.iter().map(|v| v * v).sum::<f64>() / cols as f64;
        let scale = 1.0 / (ms + 1e-6).sqrt();
        want.1
            .extend(r.iter().zip(&w).map(|(v, g)| v * scale * f64::from(*g)));
        let mean = r.iter().sum::<f64>() / cols as f64;
        let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        let affine = r.iter().zip(w.iter().zip(&bias));
        want.2
            .extend(affine.map(|(v, (g, h))| (v - mean) * rstd * f64::from(*g) + f64::from(*h)));
    }
    let got = |b: &Buffer<f32>| -> Vec<f64> {
        b.download()
            .expect("download")
            .iter()
            .map(|v| f64::from(*v))
            .collect()
    };
    for (name, buffer, want) in [
        ("softmax", &soft, &want.0),
        ("rms_norm", &rms, &want.1),
        ("layer_norm", &layer, &want.2),
    ] {
        let err = relative_error(&got(buffer), want);
        assert!(err < 1e-4, "{name} {rows}x{cols}: relative error {err}");
    }
}

/// bf16 rows: the same ops, rounded once at the end.
fn bf16_softmax_agrees(dev: &Device, rows: usize, cols: usize) {
    let x = bf16s(&fresh_rng().vec(rows * cols, 3.0));
    let dx = dev.upload(&x).expect("upload");
    let dy = dev.upload(&vec![bf16::NAN; rows * cols]).expect("upload");
    tlx::ops::softmax(dev, &dx, &dy, rows, cols).expect("softmax");
    let mut want = Vec::new();
    for r in widen(&x).chunks(cols) {
        let top = r.iter().copied().fold(f64::MIN, f64::max);
        let total: f64 = r.iter().map(|v| (v - top).exp()).sum();
        want.extend(r.iter().map(|v| (v - top).exp() / total));
    }
    let err = relative_error(&widen(&dy.download().expect("download")), &want);
    assert!(
        err < 1e-2,
        "bf16 softmax {rows}x{cols}: relative error {err}"
    );
}

/// Causal grouped-query attention with ragged lengths, the tensors views at
/// an offset into larger buffers and no log-sum-exp asked for.
fn attention_agrees(dev: &Device) {
    let mut rng = fresh_rng();
    let p = tlx::ops::Attention::new(1, 4, 70, 64)
        .kv_heads(2)
        .seq_kv(90)
        .causal(true)
        .scale(0.1);
    let d = p.head_dim;
    let (q, k, v) = (
        bf16s(&rng.vec(p.q_len(), 1.0)),
        bf16s(&rng.vec(p.kv_len(), 1.0)),
        bf16s(&rng.vec(p.kv_len(), 1.0)),
    );
    // Each tensor 8 elements (16 bytes, TMA's alignment) into its buffer.
    let padded = |t: &[bf16]| {
        let mut all = vec![bf16::NAN; 8];
        all.extend_from_slice(t);
        dev.upload(&all).expect("upload")
    };
    let (qb, kb, vb) = (padded(&q), padded(&k), padded(&v));
    let ob = dev.upload(&vec![bf16::NAN; p.q_len() + 8]).expect("upload");
    let [qv, kv, vv, ov] = [&qb, &kb, &vb, &ob].map(|b| b.slice(8..).expect("view"));
    tlx::ops::attention(dev, &qv, &kv, &vv, &ov, None, &p).expect("attention");
    let (q, k, v) = (widen(&q), widen(&k), widen(&v));
    let mut want = Vec::with_capacity(p.q_len());
    for h in 0..p.heads {
        let kvh = h / (p.heads / p.kv_heads);
        for i in 0..p.seq_q {
            let row = |t: &[f64], j: usize| t[(kvh * p.seq_kv + j) * d..][..d].to_vec();
            let query = &q[(h * p.seq_q + i) * d..][..d];
            let seen = (i + 1).min(p.seq_kv);
            let scores: Vec<f64> = (0..seen)
                .map(|j| {
                    row(&k, j)
                        .iter()
                        .zip(query)
                        .map(|(a, b)| a * b)
                        .sum::<f64>()
                        * 0.1
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            want.extend(
                (0..d).map(|c| (0..seen).map(|j| weights[j] * row(&v, j)[c]).sum::<f64>() / total),
            );
        }
    }
    let got = widen(&ob.download().expect("download")[8..]);
    let err = relative_error(&got, &want);
    assert!(err < 2e-2, "attention {p}: relative error {err}");
}

/// fp8 products of small integers (exact in e4m3, and their sums in fp8
/// wgmma's accumulator), scaled by a power of two: exact up to bf16 rounding.
fn gemm_fp8_agrees(dev: &Device, (m, n, k): (usize, usize, usize)) {
    let mut rng = fresh_rng();
    let mut ints =
        |len: usize| -> Vec<f32> { rng.vec(len, 2.5).into_iter().map(f32::round).collect() };
    let (a, bt) = (ints(m * k), ints(n * k));
    let fp8 = |v: &[f32]| -> Vec<F8E4M3> { v.iter().map(|&x| F8E4M3::from_f32(x)).collect() };
    let (da, dbt) = (
        dev.upload(&fp8(&a)).expect("upload"),
        dev.upload(&fp8(&bt)).expect("upload"),
    );
    let dc = dev.upload(&vec![bf16::NAN; m * n]).expect("upload");
    tlx::ops::gemm_fp8(dev, &da, &dbt, &dc, (m, n, k), 0.25).expect("gemm_fp8");
    let want: Vec<f64> = (0..m * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            0.25 * (0..k)
                .map(|p| f64::from(a[i * k + p] * bt[j * k + p]))
                .sum::<f64>()
        })
        .collect();
    let err = relative_error(&widen(&dc.download().expect("download")), &want);
    assert!(err < 1e-2, "gemm_fp8 {m}x{n}x{k}: relative error {err}");
}

/// The block-scaled GEMMs `tlx::ops` has (Blackwell's).
#[derive(Clone, Copy, Debug)]
enum Scaled {
    Mxfp8,
    Nvfp4,
}

/// Scaled operands spanning several binades per row against the f64
/// product of their dequantized values; on a GPU that is not a Blackwell
/// one, the typed error that says so.
fn gemm_scaled_agrees(dev: &Device, form: Scaled, (m, n, k): (usize, usize, usize)) {
    let mut rng = fresh_rng();
    let mut values = |rows: usize| -> Vec<f32> {
        let v = rng.vec(rows * k, 1.0);
        v.iter()
            .enumerate()
            .map(|(i, x)| x * ((i / 32 % 7) as f32 - 3.0).exp2())
            .collect()
    };
    let (a, b) = (values(m), values(n));
    fn scale_atoms<T: Copy + Default>(
        s: &[T],
        shape: (usize, usize),
        per_tile: usize,
        one: T,
    ) -> Vec<T> {
        tlx::mx::swizzle_scales_padded(s, shape, per_tile, one).expect("atoms")
    }
    let dc = dev.upload(&vec![bf16::NAN; m * n]).expect("upload");
    let (run, fa, fb) = match form {
        Scaled::Mxfp8 => {
            let q = |v: &[f32], rows| {
                let (codes, scales) = tlx::mx::quantize_mxfp8(v, rows, k).expect("blocks");
                let f: Vec<f64> = codes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| f64::from(c.to_f32() * tlx::mx::ue8m0_to_f32(scales[i / 32])))
                    .collect();
                (codes, scale_atoms(&scales, (rows, k / 32), 4, 127u8), f)
            };
            let ((qa, sa, fa), (qb, sb, fb)) = (q(&a, m), q(&b, n));
            let up = |v: &[F8E4M3]| dev.upload(v).expect("upload");
            let up_s = |v: &[u8]| dev.upload(v).expect("upload");
            let (da, dsa, db, dsb) = (up(&qa), up_s(&sa), up(&qb), up_s(&sb));
            let run = tlx::ops::gemm_mxfp8(dev, (&da, &dsa), (&db, &dsb), &dc, (m, n, k));
            (run, fa, fb)
        }
        Scaled::Nvfp4 => {
            let q = |v: &[f32], rows| {
                let (packed, scales) = tlx::mx::quantize_nvfp4(v, rows, k).expect("blocks");
                let f: Vec<f64> = (0..rows * k)
                    .map(|i| {
                        let code = packed[i / 2] >> (4 * (i % 2));
                        f64::from(tlx::mx::e2m1_to_f32(code) * scales[i / 16].to_f32())
                    })
                    .collect();
                (
                    packed,
                    scale_atoms(&scales, (rows, k / 16), 8, F8E4M3::from_f32(1.0)),
                    f,
                )
            };
            let ((qa, sa, fa), (qb, sb, fb)) = (q(&a, m), q(&b, n));
            let up = |v: &[u8]| dev.upload(v).expect("upload");
            let up_s = |v: &[F8E4M3]| dev.upload(v).expect("upload");
            let (da, dsa, db, dsb) = (up(&qa), up_s(&sa), up(&qb), up_s(&sb));
            let run = tlx::ops::gemm_nvfp4(dev, (&da, &dsa), (&db, &dsb), &dc, (m, n, k));
            (run, fa, fb)
        }
    };
    if let Some((major, _)) = dev.compute_capability() {
        if major != 10 {
            let err = run.expect_err("sm_100a only");
            assert!(matches!(err, tlx::Error::NoMatchingPtx { .. }), "{err}");
            return;
        }
    }
    run.unwrap_or_else(|e| panic!("{form:?}: {e}"));
    let want: Vec<f64> = (0..m * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            (0..k).map(|p| fa[i * k + p] * fb[j * k + p]).sum::<f64>()
        })
        .collect();
    let err = relative_error(&widen(&dc.download().expect("download")), &want);
    assert!(err < 1e-2, "{form:?} {m}x{n}x{k}: relative error {err}");
}

fn all_agree(dev: &Device, gemm_shapes: &[(usize, usize, usize)]) {
    for &shape in gemm_shapes {
        gemm_agrees(dev, shape);
    }
    rows_agree(dev, 3, 300);
    rows_agree(dev, 2, 5000);
    // Rows split over clusters (few rows, long rows): SLICE x K = 1024 x 16
    // and 4096 x 16 come first for these, ragged at the end.
    rows_agree(dev, 2, 9000);
    rows_agree(dev, 1, 40000);
    bf16_softmax_agrees(dev, 4, 1500);
    bf16_softmax_agrees(dev, 3, 20000);
    attention_agrees(dev);
    gemm_fp8_agrees(dev, (200, 136, 80));
    gemm_tcgen05_agrees(dev, (136, 264, 72));
    gemm_scaled_agrees(dev, Scaled::Mxfp8, (136, 200, 96));
    gemm_scaled_agrees(dev, Scaled::Nvfp4, (136, 200, 96));
}

#[test]
fn ops_on_the_interpreter() {
    // TMA rows (k and n multiples of 8) and rows it cannot take.
    all_agree(&Device::cpu(), &[(136, 264, 72), (70, 50, 30)]);
}

#[test]
fn bad_shapes_are_typed_errors() {
    let dev = Device::cpu();
    let a = dev.alloc::<bf16>(64 * 32).expect("alloc");
    let c = dev.alloc::<bf16>(64 * 64).expect("alloc");
    let short = tlx::ops::gemm(&dev, &a, &a, &c, (64, 128, 32)).expect_err("b holds 2048");
    assert!(
        matches!(short, Error::InvalidShape { op: "gemm", .. }),
        "{short}"
    );
    assert!(
        short.to_string().contains("`b` holds 2048 elements"),
        "{short}"
    );
    let empty = tlx::ops::gemm(&dev, &a, &a, &c, (0, 64, 32)).expect_err("m = 0");
    assert!(empty.to_string().contains("`m` is 0"), "{empty}");
    let x = dev.alloc::<f32>(10).expect("alloc");
    let huge = tlx::ops::softmax(&dev, &x, &x, 1 << 20, 1 << 12).expect_err("2^32 elements");
    assert!(huge.to_string().contains("32-bit indexing"), "{huge}");
    let a8 = dev.alloc::<F8E4M3>(64 * 40).expect("alloc");
    let ragged = tlx::ops::gemm_fp8(&dev, &a8, &a8, &c, (64, 64, 40), 1.0).expect_err("k = 40");
    assert!(ragged.to_string().contains("multiple of 16"), "{ragged}");
    let short = tlx::ops::gemm_fp8(&dev, &a8, &a8, &c, (64, 64, 48), 1.0).expect_err("a short");
    assert!(short.to_string().contains("`a` holds 2560"), "{short}");
    let atoms = dev.alloc::<u8>(512).expect("alloc");
    let mx = |k| tlx::ops::gemm_mxfp8(&dev, (&a8, &atoms), (&a8, &atoms), &c, (64, 64, k));
    let ragged = mx(40).expect_err("k = 40");
    assert!(ragged.to_string().contains("multiple of 32"), "{ragged}");
    let eight = dev.alloc::<u8>(8).expect("alloc");
    let few = tlx::ops::gemm_mxfp8(&dev, (&a8, &eight), (&a8, &atoms), &c, (64, 64, 32))
        .expect_err("a's scales short");
    assert!(few.to_string().contains("`a's scales` holds 8"), "{few}");
}

/// The backward's inputs and outputs, every tensor `t`: the problems these
/// tests pass are refused before a tensor is read.
fn backward_tensors<'a>(
    t: &'a dyn tlx::PtrArg<bf16>,
    lse: &'a dyn tlx::PtrArg<f32>,
) -> (
    tlx::ops::AttentionSaved<'a, bf16>,
    tlx::ops::AttentionGrads<'a, bf16>,
) {
    let saved = tlx::ops::AttentionSaved {
        q: t,
        k: t,
        v: t,
        o: t,
        lse,
        d_o: t,
    };
    let grads = tlx::ops::AttentionGrads {
        dq: t,
        dk: t,
        dv: t,
    };
    (saved, grads)
}

#[test]
fn bad_attention_problems_are_typed_errors() {
    use tlx::ops::{Attention, AttentionWorkspace};
    let dev = Device::cpu();
    let p = Attention::new(1, 4, 64, 64);
    let t = dev.alloc::<bf16>(p.q_len()).expect("alloc");
    let expect = |what: &str, result: Result<(), Error>, says: &str| {
        let e = result.expect_err(what);
        assert!(matches!(e, Error::InvalidShape { .. }), "{what}: {e}");
        assert!(e.to_string().contains(says), "{what}: {e}");
    };
    let forward = |p: &Attention, lse: Option<&dyn tlx::PtrArg<f32>>| {
        tlx::ops::attention(&dev, &t, &t, &t, &t, lse, p)
    };
    expect(
        "head dim 96",
        forward(&Attention::new(1, 4, 32, 96), None),
        "head_dim 96",
    );
    expect(
        "4 over 3",
        forward(&p.kv_heads(3), None),
        "do not split evenly",
    );
    expect(
        "longer keys",
        forward(&p.seq_kv(65), None),
        "`k` holds 16384 elements",
    );
    let short_lse = dev.alloc::<f32>(p.rows() - 1).expect("alloc");
    expect(
        "short lse",
        forward(&p, Some(&short_lse)),
        "`lse` holds 255",
    );
    expect("scale", forward(&p.scale(f32::NAN), None), "not finite");
    let small = AttentionWorkspace::new(&dev, &Attention::new(1, 4, 32, 64)).expect("workspace");
    let lse = dev.alloc::<f32>(p.rows()).expect("alloc");
    let (saved, grads) = backward_tensors(&t, &lse);
    let backward = tlx::ops::attention_backward(&dev, &saved, &grads, &small, &p);
    expect("small workspace", backward, "AttentionWorkspace::new");
    // The forward takes head dim 256; the backward does not.
    let wide = Attention::new(1, 1, 32, 256);
    let wide_t = dev.alloc::<bf16>(wide.q_len()).expect("alloc");
    let wide_lse = dev.alloc::<f32>(wide.rows()).expect("alloc");
    let (wide_saved, wide_grads) = backward_tensors(&wide_t, &wide_lse);
    let refusal = "head_dim 256 is not compiled; attention_backward takes 64, 128";
    expect(
        "workspace at head dim 256",
        AttentionWorkspace::new(&dev, &wide).map(drop),
        refusal,
    );
    expect(
        "backward at head dim 256",
        tlx::ops::attention_backward(&dev, &wide_saved, &wide_grads, &small, &wide),
        refusal,
    );
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn ops_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        all_agree(
            &dev,
            &[(1000, 1032, 520), (517, 300, 94), (1536, 1024, 512)],
        );
    }
}
