//! The interpreter against the GPU: the same kernels on the same random
//! inputs, results compared elementwise. Exact where the GPU is exact
//! (integer ops, casts, loads and stores, f32 add/mul, cumsum); a few ulp
//! where it uses approximate instructions (exp) or reorders sums.
//! Skips with a message when no GPU is present.

use tlx::prelude::*;
use tlx::testing::gpu_or_skip;

#[path = "common/cluster_center.rs"]
mod cluster_center;
#[path = "common/rng.rs"]
mod rng;
#[path = "common/warp_specialized.rs"]
mod warp_specialized;

use rng::{fresh_rng, Rng};

#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn casts<const BLOCK: usize>(
    x: Ptr<f32>,
    h: Ptr<f16>,
    b: Ptr<bf16>,
    q: Ptr<f8e4m3>,
    r: Ptr<f8e5m2>,
    i: Ptr<i32>,
    n: i32,
) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask);
    store(h + offs, v.to(f16), mask = mask);
    store(b + offs, v.to(bf16), mask = mask);
    store(q + offs, v.to(f8e4m3), mask = mask);
    store(r + offs, v.to(f8e5m2), mask = mask);
    store(i + offs, (v * 1000.0).to(i32), mask = mask);
}

#[tlx::kernel(configs = [(BLOCK = 1024)], num_warps = 8)]
fn row_stats<const BLOCK: usize>(
    x: Ptr<f32>,
    softmax_out: Ptr<f32>,
    argmax_out: Ptr<i32>,
    scan_out: Ptr<i32>,
    n: i32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let v = load(x + row * n + cols, mask = mask, other = f32::NEG_INFINITY);
    let e = exp(v - max(v, axis = 0));
    store(
        softmax_out + row * n + cols,
        e / sum(e, axis = 0),
        mask = mask,
    );
    store(argmax_out + row, argmax(v, axis = 0));
    let (excl, total) = cumsum((v > 0.0).to(i32), axis = 0);
    store(scan_out + row * (n + 1) + cols, excl, mask = mask);
    store(scan_out + row * (n + 1) + n, total);
}

// 64x64: wgmma on sm_90a; 32x32 (too few rows for a warp group per 4
// warps): mma.sync with ldmatrix fragments.
#[tlx::kernel(configs = [(BM = 64, BN = 64, BK = 32), (BM = 32, BN = 32, BK = 32)])]
fn tile_matmul<const BM: usize, const BN: usize, const BK: usize>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<f32>,
    k: i32,
) {
    let rm = arange(0, BM);
    let rn = arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let at = load(a + rm[(.., None)] * k + (k0 + rk)[(None, ..)]);
        let bt = load(b + (k0 + rk)[(.., None)] * BN + rn[(None, ..)]);
        acc = dot(at, bt, acc);
    }
    store(c + rm[(.., None)] * BN + rn[(None, ..)], acc);
}

/// 32x64 @ 64x32 on `mma.sync` for the other element kinds: f32 inputs as
/// tf32 (m16n8k8) and i8 (m16n8k32), fragments loaded with `ldmatrix`.
#[tlx::kernel(configs = [(T = 32, K = 64)])]
fn small_dots<const T: usize, const K: usize>(
    af: Ptr<f32>,
    bf: Ptr<f32>,
    cf: Ptr<f32>,
    ai: Ptr<i8>,
    bi: Ptr<i8>,
    ci: Ptr<i32>,
) {
    let rows = arange(0, T);
    let ks = arange(0, K);
    let a_at = rows[(.., None)] * K + ks[(None, ..)];
    let b_at = ks[(.., None)] * T + rows[(None, ..)];
    let c_at = rows[(.., None)] * T + rows[(None, ..)];
    store(cf + c_at, dot(load(af + a_at), load(bf + b_at)));
    store(ci + c_at, dot(load(ai + a_at), load(bi + b_at)));
}

/// A masked matmul with a pipelined K loop: on sm_90a its loads become
/// `cp.async` copies into swizzled ring slots that wgmma multiplies in place.
#[tlx::kernel(configs = [
    (BM = 128, BN = 128, BK = 64, NW = 8, num_warps = NW, num_stages = 4),
    (BM = 64, BN = 128, BK = 32, NW = 4, num_warps = NW, num_stages = 3),
])]
fn masked_matmul<const BM: usize, const BN: usize, const BK: usize, const NW: usize>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let ks = k0 + rk;
        let at = load(
            a + rm[(.., None)] * k + ks[(None, ..)],
            mask = (rm[(.., None)] < m) & (ks[(None, ..)] < k),
            other = 0.0,
        );
        let bt = load(
            b + ks[(.., None)] * n + rn[(None, ..)],
            mask = (ks[(.., None)] < k) & (rn[(None, ..)] < n),
            other = 0.0,
        );
        acc = dot(at, bt, acc);
    }
    let ok = (rm[(.., None)] < m) & (rn[(None, ..)] < n);
    store(c + rm[(.., None)] * n + rn[(None, ..)], acc, mask = ok);
}

/// Flash attention's inner step on one tile: `S = Q @ K^T` (wgmma from
/// shared memory), `P = exp2(S - rowmax(S))` in S's accumulator registers,
/// then `O = P @ V` with P as wgmma's register A.
#[tlx::kernel(arch = "sm_90a", configs = [
    (BM = 64, NW = 4, num_warps = NW),
    (BM = 128, NW = 4, num_warps = NW),
    (BM = 128, NW = 8, num_warps = NW),
])]
fn attention_tile<const BM: usize, const NW: usize>(
    q: Ptr<bf16>,
    k: Ptr<bf16>,
    v: Ptr<bf16>,
    out: Ptr<f32>,
) {
    let q_buf = local_view(local_alloc([BM, 64], bf16, 1), 0);
    let k_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let v_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let rows = arange(0, BM);
    let keys = arange(0, 64);
    let cols = arange(0, 64);
    let q_at = rows[(.., None)] * 64 + cols[(None, ..)];
    let kv_at = keys[(.., None)] * 64 + cols[(None, ..)];
    async_load(q + q_at, q_buf);
    async_load(k + kv_at, k_buf);
    async_load(v + kv_at, v_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let s = async_dot(q_buf, local_trans(k_buf), zeros([BM, 64], f32));
    let s = async_dot_wait(0, s);
    let p = exp2(s - max(s, axis = 1)[(.., None)]);
    let o = async_dot(p.to(bf16), v_buf, zeros([BM, 64], f32));
    let o = async_dot_wait(0, o);
    store(out + q_at, o);
}

// Also compiled to PTX by tlx-codegen's `async_dot_forms` test.
include!("common/reset_or_rescale.rs");
include!("common/bias_epilogue.rs");

/// `async_dot` on tf32 (`f32` buffers, k8) and s8 (k32, i32 sums) tiles,
/// both with B K-major (`local_trans` of B^T).
#[tlx::kernel(arch = "sm_90a", configs = [(T = 64, K = 64)], num_warps = 4)]
fn async_dot_kinds<const T: usize, const K: usize>(
    af: Ptr<f32>,
    btf: Ptr<f32>,
    cf: Ptr<f32>,
    ai: Ptr<i8>,
    bti: Ptr<i8>,
    ci: Ptr<i32>,
) {
    let af_buf = local_view(local_alloc([T, K], f32, 1), 0);
    let btf_buf = local_view(local_alloc([T, K], f32, 1), 0);
    let ai_buf = local_view(local_alloc([T, K], i8, 1), 0);
    let bti_buf = local_view(local_alloc([T, K], i8, 1), 0);
    let rows = arange(0, T);
    let ks = arange(0, K);
    let at = rows[(.., None)] * K + ks[(None, ..)];
    async_load(af + at, af_buf);
    async_load(btf + at, btf_buf);
    async_load(ai + at, ai_buf);
    async_load(bti + at, bti_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let c_at = rows[(.., None)] * T + rows[(None, ..)];
    let f = async_dot(af_buf, local_trans(btf_buf), zeros([T, T], f32));
    let f = async_dot_wait(0, f);
    store(cf + c_at, f);
    let i = async_dot(ai_buf, local_trans(bti_buf), zeros([T, T], i32));
    let i = async_dot_wait(0, i);
    store(ci + c_at, i);
}

/// `async_dot` with A M-major (`local_trans` of a stored `[K, M]` tile),
/// B N-major or K-major: the A half of wgmma's transpose flags.
#[tlx::kernel(arch = "sm_90a", configs = [
    (M = 64, NW = 4, num_warps = NW),
    (M = 128, NW = 8, num_warps = NW),
    (M = 128, NW = 4, num_warps = NW),
])]
fn m_major_a<const M: usize, const NW: usize>(
    at: Ptr<bf16>,
    b: Ptr<bf16>,
    bt: Ptr<bf16>,
    c: Ptr<f32>,
    c_bt: Ptr<f32>,
) {
    let at_buf = local_view(local_alloc([64, M], bf16, 1), 0);
    let b_buf = local_view(local_alloc([64, 128], bf16, 1), 0);
    let bt_buf = local_view(local_alloc([128, 64], bf16, 1), 0);
    let ks = arange(0, 64);
    let ms = arange(0, M);
    let ns = arange(0, 128);
    async_load(at + ks[(.., None)] * M + ms[(None, ..)], at_buf);
    async_load(b + ks[(.., None)] * 128 + ns[(None, ..)], b_buf);
    async_load(bt + ns[(.., None)] * 64 + ks[(None, ..)], bt_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let c_at = ms[(.., None)] * 128 + ns[(None, ..)];
    let x = async_dot(local_trans(at_buf), b_buf, zeros([M, 128], f32));
    let x = async_dot_wait(0, x);
    store(c + c_at, x);
    let y = async_dot(
        local_trans(at_buf),
        local_trans(bt_buf),
        zeros([M, 128], f32),
    );
    let y = async_dot_wait(0, y);
    store(c_bt + c_at, y);
}

#[tlx::kernel(configs = [(BLOCK = 256)])]
fn histogram<const BLOCK: usize>(x: Ptr<i32>, bins: Ptr<i32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 0);
    atomic_add(bins + (v % 16), 1, mask = mask);
}

/// The math functions beyond the basics, each in its own row of `out`.
#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn math<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let i = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = i < n;
    let v = load(x + i, mask = m);
    store(out + i, tanh(v), mask = m);
    store(out + n + i, round(v), mask = m);
    store(out + 2 * n + i, trunc(v), mask = m);
    store(out + 3 * n + i, sigmoid(v), mask = m);
    store(out + 4 * n + i, softplus(v), mask = m);
    store(out + 5 * n + i, clamp(v, -1.5, 2.0), mask = m);
    store(out + 6 * n + i, log1p(abs(v)), mask = m);
    store(out + 7 * n + i, expm1(v * 0.5), mask = m);
    store(out + 8 * n + i, erf(v * 0.25), mask = m);
    store(out + 9 * n + i, pow(abs(v) + 0.5, 1.5), mask = m);
    store(out + 10 * n + i, fdiv(v, 3.0 + v * v), mask = m);
}

/// Triton's random numbers: the four Philox words, `rand` and `randn`.
#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn random<const BLOCK: usize>(words: Ptr<u32>, floats: Ptr<f32>, n: i32, seed: i64) {
    let i = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = i < n;
    let (a, b, c, d) = randint4x(seed, i);
    store(words + i, a, mask = m);
    store(words + n + i, b, mask = m);
    store(words + 2 * n + i, c, mask = m);
    store(words + 3 * n + i, umulhi(d, a), mask = m);
    store(floats + i, rand(seed, i), mask = m);
    store(floats + n + i, randn(seed, i), mask = m);
}

/// The inclusive scans, forward and reversed, one row each.
#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn scans<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, BLOCK);
    let v = load(x + i);
    store(out + i, cumprod(v));
    store(out + BLOCK + i, cummax(v));
    store(out + 2 * BLOCK + i, cummin(v, reverse = true));
    store(
        out + 3 * BLOCK + i,
        cumprod(v.to(i32) + 3, reverse = true).to(f32),
    );
}

/// Scans along each axis of a 2-D tile, forward and reversed, and the
/// totals of each line.
#[tlx::kernel(configs = [(R = 16, C = 64)])]
fn scans_2d<const R: usize, const C: usize>(x: Ptr<f32>, out: Ptr<f32>, totals: Ptr<f32>) {
    let r = arange(0, R);
    let c = arange(0, C);
    let at = r[(.., None)] * C + c[(None, ..)];
    let v = load(x + at);
    let (down, column_totals) = cumsum(v, axis = 0);
    store(out + at, down);
    store(out + R * C + at, cummax(v, axis = 1, reverse = true));
    store(out + 2 * R * C + at, cumprod(v, axis = 0, reverse = true));
    let (_, row_totals) = cumsum(v, axis = 1);
    store(totals + c, column_totals);
    store(totals + C + r, row_totals);
}

/// `interleave`, `join` and `split`, with the size-2 dimension in registers
/// and (after `trans`) across warps.
#[tlx::kernel(configs = [(BLOCK = 512)])]
fn pairs<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, BLOCK);
    let a = load(x + i);
    let b = load(x + BLOCK + i);
    store(out + arange(0, 2 * BLOCK), interleave(a, b));
    let (even, odd) = reshape(load(x + arange(0, 2 * BLOCK)), [BLOCK, 2]).split();
    store(out + 2 * BLOCK + i, odd - even);
    let half = arange(0, BLOCK / 2);
    let rows = load(x + arange(0, 2)[(.., None)] * (BLOCK / 2) + half[(None, ..)]);
    let (first, second) = trans(rows).split();
    store(out + 3 * BLOCK + half, first * 3.0 + second);
    store(out + 3 * BLOCK + BLOCK / 2 + half, 0.0);
    let (p, q) = split(join(a * 2.0, b));
    store(out + 4 * BLOCK + i, p + q);
}

/// `reduce` with combine functions: one of a single tensor along each axis,
/// and an argmax of one's own over a (values, indices) pair.
#[tlx::kernel(configs = [(BLOCK = 64)])]
fn combines<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, iout: Ptr<i32>) {
    fn larger_magnitude(a: f32, b: f32) -> f32 {
        select(abs(b) > abs(a), b, a)
    }
    fn argmax_pair(v: f32, i: i32, w: f32, j: i32) -> (f32, i32) {
        let right = w > v;
        (select(right, w, v), select(right, j, i))
    }
    let r = arange(0, 16);
    let c = arange(0, BLOCK);
    let tile = load(x + r[(.., None)] * BLOCK + c[(None, ..)]);
    store(out + r, reduce(tile, 1, larger_magnitude));
    store(out + 16 + c, reduce(tile, 0, larger_magnitude));
    let cols = broadcast_to(c[(None, ..)], [16, BLOCK]);
    let (best, at) = reduce((tile, cols), 1, argmax_pair);
    store(out + 16 + BLOCK + r, best);
    store(iout + r, at);
}

/// `associative_scan` with combine functions, forward and reversed, along
/// either axis, and over a tuple (a linear recurrence).
#[tlx::kernel(configs = [(BLOCK = 128)])]
fn associative<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    fn latest_nonzero(a: f32, b: f32) -> f32 {
        select(b != 0.0, b, a)
    }
    fn affine(a1: f32, b1: f32, a2: f32, b2: f32) -> (f32, f32) {
        (a1 * a2, a2 * b1 + b2)
    }
    let r = arange(0, 8);
    let c = arange(0, BLOCK);
    let at = r[(.., None)] * BLOCK + c[(None, ..)];
    let tile = load(x + at);
    let sparse = select(abs(tile) < 1.0, 0.0, tile);
    store(out + at, associative_scan(sparse, 1, latest_nonzero));
    store(
        out + 8 * BLOCK + at,
        associative_scan(sparse, 0, latest_nonzero, reverse = true),
    );
    let (_, h) = associative_scan((abs(tile) * 0.1 + 0.5, tile), 1, affine);
    store(out + 16 * BLOCK + at, h);
}

/// `sort` both ways and `topk`, rows of a [4, 256] tile.
#[tlx::kernel(configs = [(BLOCK = 256)])]
fn sorts<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    let r = arange(0, 4);
    let c = arange(0, BLOCK);
    let at = r[(.., None)] * BLOCK + c[(None, ..)];
    let tile = load(x + at);
    store(out + at, sort(tile));
    store(out + 4 * BLOCK + at, sort(tile, descending = true));
    store(
        out + 8 * BLOCK + r[(.., None)] * 16 + arange(0, 16)[(None, ..)],
        topk(tile, 16),
    );
}

/// Runs `f` on the GPU and on the interpreter.
fn on_both<R>(gpu: &Device, f: impl Fn(&Device) -> Result<R, tlx::Error>) -> (R, R) {
    let on_gpu = f(gpu).expect("GPU run failed");
    let on_cpu = f(&Device::cpu()).expect("interpreter run failed");
    (on_gpu, on_cpu)
}

/// A fresh `[64, 64]` bf16 tile of values in [-2, 2).
fn bf16_tile(rng: &mut Rng) -> Vec<bf16> {
    rng.vec(64 * 64, 2.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect()
}

/// Largest `|a - b| / max(|b|, 1)`; infinite where either is NaN (an
/// element no kernel wrote).
fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(
            0.0,
            |w, d| if d.is_nan() { f32::INFINITY } else { w.max(d) },
        )
}

fn max_ulp_diff(a: &[f32], b: &[f32]) -> u32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.to_bits() as i64 - y.to_bits() as i64).unsigned_abs() as u32)
        .max()
        .unwrap_or(0)
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn casts_are_bit_identical() {
    let Some(dev) = gpu_or_skip() else { return };
    let n = 5000;
    let mut x = fresh_rng().vec(n, 600.0);
    x[0] = 1e9; // saturation
    x[1] = -1e9;
    x[2] = 0.0;
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let h = d.alloc::<f16>(n)?;
        let b = d.alloc::<bf16>(n)?;
        let q = d.alloc::<F8E4M3>(n)?;
        let r = d.alloc::<F8E5M2>(n)?;
        let i = d.alloc::<i32>(n)?;
        casts::<1024>::launch(
            d,
            n.div_ceil(1024) as u32,
            &dx,
            &h,
            &b,
            &q,
            &r,
            &i,
            n as i32,
        )?;
        Ok((
            h.download()?,
            b.download()?,
            q.download()?,
            r.download()?,
            i.download()?,
        ))
    });
    assert_eq!(g.0, c.0, "f16");
    assert_eq!(g.1, c.1, "bf16");
    assert_eq!(g.2, c.2, "fp8 e4m3");
    assert_eq!(g.3, c.3, "fp8 e5m2");
    assert_eq!(g.4, c.4, "f32 to i32");
}

/// `round`, `trunc` and `clamp` are exact on both; `tanh` is the GPU's
/// `tanh.approx.f32` (about 2^-11 relative) against a correctly rounded
/// one; `sigmoid` and `softplus` inherit the `.approx` exp and log.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn math_functions_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let n = 5000;
    let mut x = fresh_rng().vec(n, 12.0);
    x[0] = 2.5;
    x[1] = -0.5;
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 11 * n])?;
        math::<1024>::launch(d, n.div_ceil(1024) as u32, &dx, &out, n as i32)?;
        out.download()
    });
    let names = [
        "tanh", "round", "trunc", "sigmoid", "softplus", "clamp", "log1p", "expm1", "erf", "pow",
        "fdiv",
    ];
    for (row, name) in names.into_iter().enumerate() {
        let (g, c) = (&g[row * n..][..n], &c[row * n..][..n]);
        let diff = max_rel_diff(g, c);
        println!("{name}: max relative difference {diff:.1e}");
        let bound = match name {
            "round" | "trunc" | "clamp" => 0.0,
            "tanh" => 1e-3,
            // exp2/log2 of a large product: the .approx errors scale with it.
            "pow" | "expm1" => 1e-4,
            _ => 1e-5,
        };
        assert!(diff <= bound, "{name} differs by {diff}");
        if name == "fdiv" {
            // `div.full.f32`: within 2 ulp of the correctly rounded quotient.
            let ulps = max_ulp_diff(g, c);
            println!("fdiv: max {ulps} ulp apart");
            assert!(
                ulps <= 2,
                "fdiv is {ulps} ulp from the correctly rounded quotient"
            );
        }
    }
}

/// The Philox words, `umulhi` and `rand` are integer and exact float math:
/// bit-identical. `randn` goes through the GPU's `.approx` log, sin and cos.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn random_numbers_agree() {
    const POISON: u32 = 0xa5a5_a5a5;
    let Some(dev) = gpu_or_skip() else { return };
    let n = 5000;
    let seed = fresh_rng().0 as i64;
    let (g, c) = on_both(&dev, |d| {
        let words = d.upload(&vec![POISON; 4 * n])?;
        let floats = d.upload(&vec![f32::NAN; 2 * n])?;
        random::<1024>::launch(d, n.div_ceil(1024) as u32, &words, &floats, n as i32, seed)?;
        Ok((words.download()?, floats.download()?))
    });
    // A word equal to the poison is a 1 in 200,000 chance: an unwritten one.
    assert!(!g.0.contains(&POISON), "an unwritten word");
    assert_eq!(g.0, c.0, "randint4x and umulhi");
    assert_eq!(max_ulp_diff(&g.1[..n], &c.1[..n]), 0, "rand");
    let diff = max_rel_diff(&g.1[n..], &c.1[n..]);
    println!("randn: max relative difference {diff:.1e}");
    assert!(diff <= 1e-4, "randn differs by {diff}");
}

/// Bit-identical: the interpreter scans in the GPU's order (Hillis-Steele).
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn scans_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let x: Vec<f32> = fresh_rng()
        .vec(1024, 0.1)
        .into_iter()
        .map(|v| 1.0 + v)
        .collect();
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 4 * 1024])?;
        scans::<1024>::launch(d, 1, &dx, &out)?;
        out.download()
    });
    assert!(!g.iter().any(|v| v.is_nan()), "an unwritten element");
    assert_eq!(max_ulp_diff(&g[..1024], &c[..1024]), 0, "cumprod");
    let rest = max_ulp_diff(&g[1024..], &c[1024..]);
    assert_eq!(rest, 0, "cummax, cummin, integer cumprod");
}

/// Along columns and rows of a tile: the interpreter scans in the GPU's
/// order, so sums and products agree to the bit as in 1-D.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn scans_along_either_axis_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let x: Vec<f32> = fresh_rng()
        .vec(16 * 64, 0.1)
        .into_iter()
        .map(|v| 1.0 + v)
        .collect();
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 3 * 16 * 64])?;
        let totals = d.upload(&vec![f32::NAN; 64 + 16])?;
        scans_2d::<16, 64>::launch(d, 1, &dx, &out, &totals)?;
        Ok((out.download()?, totals.download()?))
    });
    assert!(
        !g.0.iter().chain(&g.1).any(|v| v.is_nan()),
        "an unwritten element"
    );
    assert_eq!(max_ulp_diff(&g.0, &c.0), 0, "scans");
    assert_eq!(max_ulp_diff(&g.1, &c.1), 0, "totals");
    // The interpreter against a plain sequential sum, loosely.
    for col in 0..64 {
        let sum: f32 = (0..16).map(|row| x[row * 64 + col]).sum();
        assert!((c.1[col] - sum).abs() < 1e-4, "column {col}");
    }
}

/// Selections only: bit-identical.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn reduce_with_combine_functions_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let x = fresh_rng().vec(1024, 4.0);
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 96])?;
        let iout = d.upload(&[-1i32; 16])?;
        combines::<64>::launch(d, 1, &dx, &out, &iout)?;
        Ok((out.download()?, iout.download()?))
    });
    assert!(!g.0.iter().any(|v| v.is_nan()), "an unwritten element");
    assert_eq!(max_ulp_diff(&g.0, &c.0), 0, "reduce");
    assert_eq!(g.1, c.1, "argmax of one's own");
}

/// The same tree of the same float operations: bit-identical.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn associative_scans_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let x = fresh_rng().vec(1024, 4.0);
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 3 * 1024])?;
        associative::<128>::launch(d, 1, &dx, &out)?;
        out.download()
    });
    assert!(!g.iter().any(|v| v.is_nan()), "an unwritten element");
    let ulps = max_ulp_diff(&g, &c);
    println!("associative_scan: max {ulps} ulp apart");
    assert_eq!(max_ulp_diff(&g[..2048], &c[..2048]), 0, "selections");
    // Measured 0 on the H100; LLVM may fuse the recurrence's multiply-adds.
    assert!(ulps <= 16, "associative_scan differs by {ulps} ulp");
}

/// Sorting networks select: bit-identical, and sorted.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn sorts_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let x = fresh_rng().vec(1024, 4.0);
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 2048 + 64])?;
        sorts::<256>::launch(d, 1, &dx, &out)?;
        out.download()
    });
    assert!(!g.iter().any(|v| v.is_nan()), "an unwritten element");
    assert_eq!(max_ulp_diff(&g, &c), 0, "sort, topk");
    for row in 0..4 {
        let mut want = x[row * 256..][..256].to_vec();
        want.sort_by(f32::total_cmp);
        assert_eq!(&g[row * 256..][..256], &want[..], "row {row} sorted");
    }
}

/// Moving elements only: bit-identical.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn join_split_and_interleave_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let x = fresh_rng().vec(1024, 4.0);
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let out = d.upload(&vec![f32::NAN; 5 * 512])?;
        pairs::<512>::launch(d, 1, &dx, &out)?;
        out.download()
    });
    assert!(!g.iter().any(|v| v.is_nan()), "an unwritten element");
    assert_eq!(max_ulp_diff(&g, &c), 0, "join, split, interleave");
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn reductions_scan_and_softmax_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let (rows, n) = (37, 1000);
    let x = fresh_rng().vec(rows * n, 8.0);
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let sm = d.upload(&vec![f32::NAN; rows * n])?;
        let am = d.upload(&vec![-1i32; rows])?;
        let sc = d.upload(&vec![-1i32; rows * (n + 1)])?;
        row_stats::<1024>::launch(d, rows as u32, &dx, &sm, &am, &sc, n as i32)?;
        Ok((sm.download()?, am.download()?, sc.download()?))
    });
    assert_eq!(g.1, c.1, "argmax");
    assert_eq!(g.2, c.2, "cumsum");
    let ulps = max_ulp_diff(&g.0, &c.0);
    println!("softmax: max {ulps} ulp apart");
    assert!(ulps <= 64, "softmax differs by {ulps} ulp");
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn tensor_core_dot_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let k = 256;
    let mut rng = fresh_rng();
    let a: Vec<bf16> = rng
        .vec(64 * k, 1.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let b: Vec<bf16> = rng
        .vec(k * 64, 1.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    for tile in [64, 32] {
        let (g, c) = on_both(&dev, |d| {
            let (da, db) = (d.upload(&a)?, d.upload(&b)?);
            let dc = d.upload(&vec![f32::NAN; tile * tile])?;
            match tile {
                64 => tile_matmul::<64, 64, 32>::launch(d, 1u32, &da, &db, &dc, k as i32)?,
                _ => tile_matmul::<32, 32, 32>::launch(d, 1u32, &da, &db, &dc, k as i32)?,
            }
            dc.download()
        });
        // Products of bf16 are exact in f32; only the summation order differs.
        let worst = max_rel_diff(&g, &c);
        println!("dot {tile}x{tile}: max relative difference {worst:e}");
        assert!(worst < 1e-5, "dot {tile}x{tile} differs by {worst}");
    }
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn tf32_and_i8_dots_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let (t, k) = (32, 64);
    let af = rng.vec(t * k, 1.0);
    let bf = rng.vec(k * t, 1.0);
    let ai: Vec<i8> = rng.vec(t * k, 100.0).iter().map(|x| *x as i8).collect();
    let bi: Vec<i8> = rng.vec(k * t, 100.0).iter().map(|x| *x as i8).collect();
    let (g, c) = on_both(&dev, |d| {
        let (daf, dbf) = (d.upload(&af)?, d.upload(&bf)?);
        let (dai, dbi) = (d.upload(&ai)?, d.upload(&bi)?);
        let cf = d.upload(&vec![f32::NAN; t * t])?;
        let ci = d.upload(&vec![i32::MIN; t * t])?;
        small_dots::<32, 64>::launch(d, 1u32, &daf, &dbf, &cf, &dai, &dbi, &ci)?;
        Ok((cf.download()?, ci.download()?))
    });
    // tf32 products are exact in f32 on both; the sums differ in order.
    let worst = max_rel_diff(&g.0, &c.0);
    println!("tf32 dot: max relative difference {worst:e}");
    assert!(worst < 1e-5, "tf32 dot differs by {worst}");
    assert_eq!(g.1, c.1, "i8 dot");
    assert!(c.1.iter().all(|v| *v != i32::MIN));
}

/// The pipelined wgmma path on shapes that are not multiples of the tiles,
/// aligned rows (16-byte `cp.async` chunks) and unaligned ones (the
/// element-wise fallback into the swizzled slots).
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn pipelined_tensor_core_dot_agrees_on_odd_shapes() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    for (m, n, k) in [(200, 300, 136), (70, 130, 130)] {
        let a: Vec<bf16> = rng
            .vec(m * k, 1.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        let b: Vec<bf16> = rng
            .vec(k * n, 1.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        let run = |config: usize| {
            on_both(&dev, |d| {
                let (da, db) = (d.upload(&a)?, d.upload(&b)?);
                let dc = d.upload(&vec![f32::NAN; m * n])?;
                let (mi, ni, ki) = (m as i32, n as i32, k as i32);
                match config {
                    0 => {
                        let grid = (m.div_ceil(128) as u32, n.div_ceil(128) as u32, 1);
                        masked_matmul::<128, 128, 64, 8>::launch(
                            d, grid, &da, &db, &dc, mi, ni, ki,
                        )?
                    }
                    _ => {
                        let grid = (m.div_ceil(64) as u32, n.div_ceil(128) as u32, 1);
                        masked_matmul::<64, 128, 32, 4>::launch(d, grid, &da, &db, &dc, mi, ni, ki)?
                    }
                }
                dc.download()
            })
        };
        for config in 0..2 {
            let (g, c) = run(config);
            let worst = max_rel_diff(&g, &c);
            println!(
                "pipelined dot {m}x{n}x{k} config {config}: max relative difference {worst:e}"
            );
            assert!(
                worst < 1e-5,
                "{m}x{n}x{k} config {config} differs by {worst}"
            );
        }
    }
}

/// `async_dot` with A in registers: P, computed in S's accumulator
/// registers, multiplies V without moving between threads; one and two
/// warp groups, one and two 64-row instructions per warp group.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn register_a_async_dot_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let mut tile = |rows: usize| -> Vec<bf16> {
        rng.vec(rows * 64, 2.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect()
    };
    let (q, k, v) = (tile(128), tile(64), tile(64));
    for config in 0..3 {
        let bm = if config == 0 { 64 } else { 128 };
        let (g, c) = on_both(&dev, |d| {
            let (dq, dk, dv) = (d.upload(&q[..bm * 64])?, d.upload(&k)?, d.upload(&v)?);
            let out = d.upload(&vec![f32::NAN; bm * 64])?;
            match config {
                0 => attention_tile::<64, 4>::launch(d, 1u32, &dq, &dk, &dv, &out)?,
                1 => attention_tile::<128, 4>::launch(d, 1u32, &dq, &dk, &dv, &out)?,
                _ => attention_tile::<128, 8>::launch(d, 1u32, &dq, &dk, &dv, &out)?,
            }
            out.download()
        });
        // exp2 is approximate on the GPU, and a P element that lands on a
        // bf16 rounding boundary may round either way (2^-8 relative); a
        // misplaced fragment is off by O(1).
        let worst = max_rel_diff(&g, &c);
        println!("register-A attention tile, config {config}: max relative difference {worst:e}");
        assert!(worst < 2e-2, "config {config} differs by {worst}");
    }
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn an_accumulator_reset_in_one_branch_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let (a, b) = (bf16_tile(&mut rng), bf16_tile(&mut rng));
    // Four steps: rescaled, reset, rescaled, rescaled (0.75 A B at the end).
    let (g, c) = on_both(&dev, |d| {
        let (da, db) = (d.upload(&a)?, d.upload(&b)?);
        let out = d.upload(&vec![f32::NAN; 64 * 64])?;
        reset_or_rescale::launch(d, 1u32, &da, &db, &out, 4)?;
        out.download()
    });
    let worst = max_rel_diff(&g, &c);
    println!("accumulator reset in one branch: max relative difference {worst:e}");
    assert!(worst < 1e-3, "differs by {worst}");
}

/// A bias loaded in the accumulator's layout: every column in its place,
/// the masked ones at their default.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn a_bias_loaded_in_the_accumulators_layout_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let (a, b) = (bf16_tile(&mut rng), bf16_tile(&mut rng));
    let bias = rng.vec(64, 4.0);
    let (g, c) = on_both(&dev, |d| {
        let (da, db, dbias) = (d.upload(&a)?, d.upload(&b)?, d.upload(&bias)?);
        let out = d.upload(&vec![f32::NAN; 64 * 64])?;
        bias_epilogue::launch(d, 1u32, &da, &db, &dbias, &out, 53)?;
        out.download()
    });
    let worst = max_rel_diff(&g, &c);
    println!("bias in the accumulator's layout: max relative difference {worst:e}");
    assert!(worst < 1e-3, "differs by {worst}");
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn m_major_a_async_dot_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let mut tile =
        |len: usize| -> Vec<bf16> { rng.vec(len, 2.0).into_iter().map(bf16::from_f32).collect() };
    let (at, b) = (tile(64 * 128), tile(64 * 128));
    // The same B stored K-major: row j holds column j.
    let bt: Vec<bf16> = (0..128 * 64).map(|x| b[(x % 64) * 128 + x / 64]).collect();
    for config in 0..3 {
        let m = if config == 0 { 64 } else { 128 };
        let (g, c) = on_both(&dev, |d| {
            let (dat, db, dbt) = (d.upload(&at[..64 * m])?, d.upload(&b)?, d.upload(&bt)?);
            let x = d.upload(&vec![f32::NAN; m * 128])?;
            let y = d.upload(&vec![f32::NAN; m * 128])?;
            match config {
                0 => m_major_a::<64, 4>::launch(d, 1u32, &dat, &db, &dbt, &x, &y)?,
                1 => m_major_a::<128, 8>::launch(d, 1u32, &dat, &db, &dbt, &x, &y)?,
                _ => m_major_a::<128, 4>::launch(d, 1u32, &dat, &db, &dbt, &x, &y)?,
            }
            Ok((x.download()?, y.download()?))
        });
        // Exact bf16 products, f32 sums in another order: a misplaced
        // element is O(1) off. Both B orders give the same C.
        let same = max_rel_diff(&c.0, &c.1);
        assert!(
            same < 1e-5,
            "config {config}: the B orders differ by {same}"
        );
        for (what, g, c) in [("B N-major", &g.0, &c.0), ("B K-major", &g.1, &c.1)] {
            let worst = max_rel_diff(g, c);
            println!("M-major A, {what}, config {config}: max relative difference {worst:e}");
            assert!(worst < 1e-5, "config {config}, {what}: differs by {worst}");
        }
    }
}

/// tf32 and s8 `async_dot`. The tf32 inputs are exact in tf32: wgmma reads
/// the f32 bits as tf32 without rounding them, the interpreter rounds to
/// nearest.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn tf32_and_i8_async_dots_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let (t, k) = (64, 64);
    let tf32 = |x: f32| f32::from_bits(x.to_bits() & !0x1fff);
    let af: Vec<f32> = rng.vec(t * k, 1.0).into_iter().map(tf32).collect();
    let btf: Vec<f32> = rng.vec(t * k, 1.0).into_iter().map(tf32).collect();
    let ai: Vec<i8> = rng.vec(t * k, 127.0).iter().map(|x| *x as i8).collect();
    let bti: Vec<i8> = rng.vec(t * k, 127.0).iter().map(|x| *x as i8).collect();
    let (g, c) = on_both(&dev, |d| {
        let (daf, dbf) = (d.upload(&af)?, d.upload(&btf)?);
        let (dai, dbi) = (d.upload(&ai)?, d.upload(&bti)?);
        let cf = d.upload(&vec![f32::NAN; t * t])?;
        let ci = d.upload(&vec![i32::MIN; t * t])?;
        async_dot_kinds::<64, 64>::launch(d, 1u32, &daf, &dbf, &cf, &dai, &dbi, &ci)?;
        Ok((cf.download()?, ci.download()?))
    });
    let worst = max_rel_diff(&g.0, &c.0);
    println!("tf32 async_dot: max relative difference {worst:e}");
    assert!(worst < 1e-5, "tf32 async_dot differs by {worst}");
    assert_eq!(g.1, c.1, "s8 async_dot");
    assert!(c.1.iter().all(|v| *v != i32::MIN));
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn atomics_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let n = 100_000;
    let x: Vec<i32> = fresh_rng()
        .vec(n, 1000.0)
        .into_iter()
        .map(|v| v.abs() as i32)
        .collect();
    let (g, c) = on_both(&dev, |d| {
        let dx = d.upload(&x)?;
        let bins = d.upload(&[0i32; 16])?;
        histogram::<256>::launch(d, n.div_ceil(256) as u32, &dx, &bins, n as i32)?;
        bins.download()
    });
    assert_eq!(g, c);
    assert_eq!(g.iter().sum::<i32>(), n as i32);
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn a_sixteen_program_cluster_agrees() {
    let Some(dev) = gpu_or_skip() else { return };
    let x: Vec<bf16> = fresh_rng()
        .vec(5 * cluster_center::ROW, 4.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let (g, c) = on_both(&dev, |d| cluster_center::centre_rows(d, &x));
    cluster_center::check_centred(&x, &g, "GPU");
    cluster_center::check_centred(&x, &c, "interpreter");
}

/// Warp-specialized tasks (`async_tasks!`) on the GPU: each replica on warps
/// of its own, with named barriers and `setmaxnreg`, as on the interpreter.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn warp_specialized_tasks_agree() {
    let Some(dev) = gpu_or_skip() else { return };
    let x = fresh_rng().vec(6 * 2 * warp_specialized::ROW, 1.0);
    let (g, c) = on_both(&dev, |d| warp_specialized::run(d, &x));
    warp_specialized::check(&x, &g, "GPU");
    warp_specialized::check(&x, &c, "interpreter");
}

/// Flash attention, forward and backward (`tlx::ops`), on the GPU and on
/// the interpreter from the same inputs: O, the log-sum-exp, dQ, dK and dV
/// agree to bf16 rounding (the GPU's `exp2` is approximate, and a P or dS
/// element on a rounding boundary may round either way; a misplaced tile or
/// a wrong mask is off by O(1)). Ragged lengths, grouped-query heads,
/// causal and not, head dims 64 and 128, and a grid with more tiles than
/// SMs; outputs NaN-poisoned first.
#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn flash_attention_agrees() {
    use tlx::ops::{Attention, AttentionGrads, AttentionSaved, AttentionWorkspace};
    let Some(dev) = gpu_or_skip() else { return };
    let mut rng = fresh_rng();
    let problems = [
        Attention::new(1, 4, 150, 64).kv_heads(2).causal(true),
        Attention::new(2, 2, 70, 128).seq_kv(190),
        Attention::new(1, 2, 130, 128).kv_heads(1).causal(true),
        // More query tiles than a GPU has SMs: the persistent forward's
        // programs take several (causal: in pairs).
        Attention::new(1, 140, 100, 64).kv_heads(35).causal(true),
    ];
    for p in problems {
        let mut draw =
            |n: usize| -> Vec<bf16> { rng.vec(n, 2.0).into_iter().map(bf16::from_f32).collect() };
        let (q, k, v, d_o) = (
            draw(p.q_len()),
            draw(p.kv_len()),
            draw(p.kv_len()),
            draw(p.q_len()),
        );
        // O, lse, dQ, dK, dV, each widened to f32.
        let (g, c) = on_both(&dev, |d| {
            let (q, k, v, d_o) = (d.upload(&q)?, d.upload(&k)?, d.upload(&v)?, d.upload(&d_o)?);
            let poisoned = |n: usize| d.upload(&vec![bf16::NAN; n]);
            let o = poisoned(p.q_len())?;
            let lse = d.upload(&vec![f32::NAN; p.rows()])?;
            tlx::ops::attention(d, &q, &k, &v, &o, Some(&lse), &p)?;
            let (dq, dk, dv) = (
                poisoned(p.q_len())?,
                poisoned(p.kv_len())?,
                poisoned(p.kv_len())?,
            );
            let saved = AttentionSaved {
                q: &q,
                k: &k,
                v: &v,
                o: &o,
                lse: &lse,
                d_o: &d_o,
            };
            let grads = AttentionGrads {
                dq: &dq,
                dk: &dk,
                dv: &dv,
            };
            let workspace = AttentionWorkspace::new(d, &p)?;
            tlx::ops::attention_backward(d, &saved, &grads, &workspace, &p)?;
            let wide = |t: Vec<bf16>| t.into_iter().map(bf16::to_f32).collect::<Vec<f32>>();
            Ok([
                wide(o.download()?),
                lse.download()?,
                wide(dq.download()?),
                wide(dk.download()?),
                wide(dv.download()?),
            ])
        });
        for (name, (g, c)) in ["O", "lse", "dQ", "dK", "dV"].iter().zip(g.iter().zip(&c)) {
            // Relative to the tensor's largest magnitude: gradients of
            // nearly cancelling sums are small where the tensor is not.
            let scale = c.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-3);
            let worst = g
                .iter()
                .zip(c)
                .map(|(x, y)| (x - y).abs() / scale)
                .fold(
                    0f32,
                    |w, e| if e.is_nan() { f32::INFINITY } else { w.max(e) },
                );
            println!(
                "flash attention {p}: {name} max difference {worst:e} of its largest magnitude"
            );
            assert!(
                worst < 2e-2,
                "{p}: {name} differs by {worst} of its largest magnitude"
            );
        }
    }
}
