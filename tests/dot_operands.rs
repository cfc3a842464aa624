//! `dot` on every operand form a Triton-style matmul gives it, on the
//! interpreter (CI) and on the GPU: f16, bf16, f32 (tf32) and fp8 e4m3
//! inputs; A and B each stored row- or column-major; the contiguous
//! dimension's stride a literal 1, a known constant (2), or a run-time
//! argument; tile-aligned and ragged sizes; each in the two configurations
//! of Triton's tutorial (64x64x32 on 4 warps; 128x128x64 on 8 warps with 3
//! stages, where wgmma operands get rings of their own). Inputs are fresh
//! random values, outputs poisoned with NaN first; the reference is f64.
//!
//! `ragged_matmul` is the kernel a new user writes first, exactly as issue
//! 58 reported it (every stride a run-time argument): it once failed to
//! build with an internal compiler error.

use tlx::prelude::*;
use tlx::Element;

#[path = "common/rng.rs"]
mod rng;

#[tlx::kernel(configs = [
    (BLOCK_M = 64, BLOCK_N = 64, BLOCK_K = 32, num_warps = 4),
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, num_warps = 8, num_stages = 3),
])]
fn ragged_matmul<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
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
    stride_cm: i32,
    stride_cn: i32,
) {
    let offs_m = program_id(0) * BLOCK_M + arange(0, BLOCK_M);
    let offs_n = program_id(1) * BLOCK_N + arange(0, BLOCK_N);
    let offs_k = arange(0, BLOCK_K);
    let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
    for k0 in (0..k).step_by(BLOCK_K) {
        let ks = k0 + offs_k;
        let a_tile = load(
            a + offs_m[(.., None)] * stride_am + ks[(None, ..)] * stride_ak,
            mask = (offs_m[(.., None)] < m) & (ks[(None, ..)] < k),
            other = 0.0,
        );
        let b_tile = load(
            b + ks[(.., None)] * stride_bk + offs_n[(None, ..)] * stride_bn,
            mask = (ks[(.., None)] < k) & (offs_n[(None, ..)] < n),
            other = 0.0,
        );
        acc = dot(a_tile, b_tile, acc);
    }
    store(
        c + offs_m[(.., None)] * stride_cm + offs_n[(None, ..)] * stride_cn,
        acc,
        mask = (offs_m[(.., None)] < m) & (offs_n[(None, ..)] < n),
    );
}

/// One operand form: `$a_at` and `$b_at` address element `(rows, ks)` of A
/// and `(ks_col, cols)` of B from the strides `sam, sak, sbk, sbn`.
macro_rules! operand_form {
    ($name:ident, $t:ident, $a_at:tt, $b_at:tt) => {
        #[tlx::kernel(configs = [
                                    (BM = 64, BN = 64, BK = 32, num_warps = 4),
                                    (BM = 128, BN = 128, BK = 64, num_warps = 8, num_stages = 3),
                                ])]
        fn $name<const BM: usize, const BN: usize, const BK: usize>(
            a: Ptr<$t>,
            b: Ptr<$t>,
            c: Ptr<f32>,
            m: i32,
            n: i32,
            k: i32,
            sam: i32,
            sak: i32,
            sbk: i32,
            sbn: i32,
        ) {
            let offs_m = program_id(0) * BM + arange(0, BM);
            let offs_n = program_id(1) * BN + arange(0, BN);
            let rows = offs_m[(.., None)];
            let cols = offs_n[(None, ..)];
            let mut acc = zeros([BM, BN], f32);
            for k0 in (0..k).step_by(BK) {
                let ks = (k0 + arange(0, BK))[(None, ..)];
                let ks_col = (k0 + arange(0, BK))[(.., None)];
                let a_tile = load(a + $a_at, mask = (rows < m) & (ks < k), other = 0.0);
                let b_tile = load(b + $b_at, mask = (ks_col < k) & (cols < n), other = 0.0);
                acc = dot(a_tile, b_tile, acc);
            }
            store(c + rows * n + cols, acc, mask = (rows < m) & (cols < n));
        }
    };
}

/// The twelve forms of one element type: `nn`, `tn`, `nt`, `tt` (A, then
/// B, stored transposed or not), each with the inner stride 1, 2 or a
/// run-time value.
macro_rules! forms_of {
    ($t:ident, [$($name:ident),* $(,)?]) => {
        forms_of!(@each $t, [$($name),*],
            [(rows * sam + ks) (rows * sam + ks * 2) (rows * sam + ks * sak)
             (rows + ks * sak) (rows * 2 + ks * sak) (rows * sam + ks * sak)
             (rows * sam + ks) (rows * sam + ks * 2) (rows * sam + ks * sak)
             (rows + ks * sak) (rows * 2 + ks * sak) (rows * sam + ks * sak)],
            [(ks_col * sbk + cols) (ks_col * sbk + cols * 2) (ks_col * sbk + cols * sbn)
             (ks_col * sbk + cols) (ks_col * sbk + cols * 2) (ks_col * sbk + cols * sbn)
             (ks_col + cols * sbn) (ks_col * 2 + cols * sbn) (ks_col * sbk + cols * sbn)
             (ks_col + cols * sbn) (ks_col * 2 + cols * sbn) (ks_col * sbk + cols * sbn)]);
    };
    (@each $t:ident, [$($name:ident),*], [$($a:tt)*], [$($b:tt)*]) => {
        $(operand_form!($name, $t, $a, $b);)*
    };
}

forms_of!(
    f16,
    [
        f16_nn_1, f16_nn_2, f16_nn_s, f16_tn_1, f16_tn_2, f16_tn_s, f16_nt_1, f16_nt_2, f16_nt_s,
        f16_tt_1, f16_tt_2, f16_tt_s
    ]
);
forms_of!(
    bf16,
    [
        bf16_nn_1, bf16_nn_2, bf16_nn_s, bf16_tn_1, bf16_tn_2, bf16_tn_s, bf16_nt_1, bf16_nt_2,
        bf16_nt_s, bf16_tt_1, bf16_tt_2, bf16_tt_s
    ]
);
forms_of!(
    f32,
    [
        f32_nn_1, f32_nn_2, f32_nn_s, f32_tn_1, f32_tn_2, f32_tn_s, f32_nt_1, f32_nt_2, f32_nt_s,
        f32_tt_1, f32_tt_2, f32_tt_s
    ]
);
forms_of!(
    f8e4m3,
    [
        f8_nn_1, f8_nn_2, f8_nn_s, f8_tn_1, f8_tn_2, f8_tn_s, f8_nt_1, f8_nt_2, f8_nt_s, f8_tt_1,
        f8_tt_2, f8_tt_s
    ]
);

/// A host element type the forms take, with its exact value.
trait Input: Element {
    fn round(x: f32) -> Self;
    fn value(self) -> f64;
}

impl Input for f16 {
    fn round(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn value(self) -> f64 {
        self.to_f64()
    }
}

impl Input for bf16 {
    fn round(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn value(self) -> f64 {
        self.to_f64()
    }
}

impl Input for f32 {
    /// Already a tf32 value, so the reference is exact whether the tensor
    /// cores round or truncate.
    fn round(x: f32) -> Self {
        f32::from_bits(x.to_bits() & !0x1fff)
    }
    fn value(self) -> f64 {
        f64::from(self)
    }
}

impl Input for F8E4M3 {
    fn round(x: f32) -> Self {
        F8E4M3::from_f32(x * 4.0)
    }
    fn value(self) -> f64 {
        f64::from(self.to_f32())
    }
}

/// A `rows x cols` matrix stored with the inner stride `inner` (row-major,
/// or column-major when `transposed`) and a padded outer stride; elements
/// the layout skips hold NaN, so a kernel that reads one shows it.
struct Operand<T> {
    values: Vec<f64>,
    stored: Vec<T>,
    /// `(row stride, column stride)` in elements.
    strides: (i32, i32),
}

fn operand<T: Input>(
    rng: &mut rng::Rng,
    (rows, cols): (usize, usize),
    transposed: bool,
    inner: usize,
) -> Operand<T> {
    let (outer_len, inner_len) = if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let outer = inner * inner_len + 3;
    let mut stored = vec![T::round(f32::NAN); outer * outer_len];
    let mut values = vec![0.0; rows * cols];
    let draws = rng.vec(rows * cols, 1.0);
    for r in 0..rows {
        for c in 0..cols {
            let v = T::round(draws[r * cols + c]);
            values[r * cols + c] = v.value();
            let (o, i) = if transposed { (c, r) } else { (r, c) };
            stored[o * outer + i * inner] = v;
        }
    }
    let strides = if transposed {
        (inner as i32, outer as i32)
    } else {
        (outer as i32, inner as i32)
    };
    Operand {
        values,
        stored,
        strides,
    }
}

/// Largest error of `got` (`m x n`, row-major) against `a @ b`, relative to
/// the reference's largest magnitude; a NaN (an element never written, or
/// a padding element read) is an infinite error.
fn relative_error(got: &[f32], a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize)) -> f64 {
    let (mut scale, mut worst) = (0f64, 0f64);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            scale = scale.max(want.abs());
            let g = f64::from(got[i * n + j]);
            worst = worst.max(if g.is_nan() {
                f64::INFINITY
            } else {
                (g - want).abs()
            });
        }
    }
    worst / scale
}

/// A form's launch: device, grid, A, B, C, then the sizes and strides.
type Launch<T> =
    fn(&Device, Grid, &Buffer<T>, &Buffer<T>, &Buffer<f32>, [i32; 7]) -> Result<(), Error>;

/// One form: which operands are stored transposed, the inner stride the
/// host lays them out with, and its two configurations' launches (tiles
/// of 64 and 128).
struct Form<T: Input> {
    name: &'static str,
    transposed: (bool, bool),
    inner: usize,
    launches: [(usize, Launch<T>); 2],
}

macro_rules! form {
    ($name:ident, $ta:expr, $tb:expr, $inner:expr) => {
        Form {
            name: stringify!($name),
            transposed: ($ta, $tb),
            inner: $inner,
            launches: [
                (64, |d, g, a, b, c, s| {
                    $name::<64, 64, 32>::launch(
                        d, g, a, b, c, s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                    )
                }),
                (128, |d, g, a, b, c, s| {
                    $name::<128, 128, 64>::launch(
                        d, g, a, b, c, s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                    )
                }),
            ],
        }
    };
}

/// The twelve forms of one element type, in `forms_of!`'s order.
macro_rules! forms_list {
    ($($nn1:ident $nn2:ident $nns:ident $tn1:ident $tn2:ident $tns:ident $nt1:ident $nt2:ident $nts:ident $tt1:ident $tt2:ident $tts:ident)?) => {
        $([
            form!($nn1, false, false, 1), form!($nn2, false, false, 2), form!($nns, false, false, 1),
            form!($tn1, true, false, 1), form!($tn2, true, false, 2), form!($tns, true, false, 1),
            form!($nt1, false, true, 1), form!($nt2, false, true, 2), form!($nts, false, true, 1),
            form!($tt1, true, true, 1), form!($tt2, true, true, 2), form!($tts, true, true, 1),
        ])?
    };
}

/// Runs every form of `forms` in both configurations at each size and
/// checks it against the reference within `tolerance`.
fn check_forms<T: Input>(
    dev: &Device,
    forms: &[Form<T>],
    sizes: &[(usize, usize, usize)],
    tolerance: f64,
) {
    let mut rng = rng::fresh_rng();
    for form in forms {
        for &(m, n, k) in sizes {
            let a = operand::<T>(&mut rng, (m, k), form.transposed.0, form.inner);
            let b = operand::<T>(&mut rng, (k, n), form.transposed.1, form.inner);
            let (da, db) = (
                dev.upload(&a.stored).expect("upload"),
                dev.upload(&b.stored).expect("upload"),
            );
            for (tile, launch) in &form.launches {
                let dc = dev.upload(&vec![f32::NAN; m * n]).expect("upload");
                let grid = Grid::from((m.div_ceil(*tile) as u32, n.div_ceil(*tile) as u32, 1));
                let sizes_and_strides = [
                    m as i32,
                    n as i32,
                    k as i32,
                    a.strides.0,
                    a.strides.1,
                    b.strides.0,
                    b.strides.1,
                ];
                launch(dev, grid, &da, &db, &dc, sizes_and_strides)
                    .unwrap_or_else(|e| panic!("{} (tile {tile}): {e}", form.name));
                let got = dc.download().expect("download");
                let err = relative_error(&got, &a.values, &b.values, (m, n, k));
                assert!(
                    err < tolerance,
                    "{} (tile {tile}) at {m}x{n}x{k}: relative error {err:e}",
                    form.name
                );
            }
        }
    }
}

fn every_form_agrees(dev: &Device, sizes: &[(usize, usize, usize)]) {
    check_forms::<f16>(
        dev,
        &forms_list!(f16_nn_1 f16_nn_2 f16_nn_s f16_tn_1 f16_tn_2 f16_tn_s f16_nt_1 f16_nt_2 f16_nt_s f16_tt_1 f16_tt_2 f16_tt_s),
        sizes,
        1e-4,
    );
    check_forms::<bf16>(
        dev,
        &forms_list!(bf16_nn_1 bf16_nn_2 bf16_nn_s bf16_tn_1 bf16_tn_2 bf16_tn_s bf16_nt_1 bf16_nt_2 bf16_nt_s bf16_tt_1 bf16_tt_2 bf16_tt_s),
        sizes,
        1e-4,
    );
    check_forms::<f32>(
        dev,
        &forms_list!(f32_nn_1 f32_nn_2 f32_nn_s f32_tn_1 f32_tn_2 f32_tn_s f32_nt_1 f32_nt_2 f32_nt_s f32_tt_1 f32_tt_2 f32_tt_s),
        sizes,
        1e-4,
    );
    check_forms::<F8E4M3>(
        dev,
        &forms_list!(f8_nn_1 f8_nn_2 f8_nn_s f8_tn_1 f8_tn_2 f8_tn_s f8_nt_1 f8_nt_2 f8_nt_s f8_tt_1 f8_tt_2 f8_tt_s),
        sizes,
        1e-4,
    );
}

/// `ragged_matmul` at `(m, n, k)` with the strides of row-major A, B, C.
fn ragged_matmul_agrees(dev: &Device, (m, n, k): (usize, usize, usize)) {
    let mut rng = rng::fresh_rng();
    let a = operand::<f16>(&mut rng, (m, k), false, 1);
    let b = operand::<f16>(&mut rng, (k, n), false, 1);
    let (da, db) = (
        dev.upload(&a.stored).expect("upload"),
        dev.upload(&b.stored).expect("upload"),
    );
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    for tile in [64, 128] {
        let dc = dev.upload(&vec![f32::NAN; m * n]).expect("upload");
        let grid = (m.div_ceil(tile) as u32, n.div_ceil(tile) as u32, 1);
        let (sa, sb) = (a.strides, b.strides);
        let launched = if tile == 64 {
            ragged_matmul::<64, 64, 32>::launch(
                dev, grid, &da, &db, &dc, mi, ni, ki, sa.0, sa.1, sb.0, sb.1, ni, 1,
            )
        } else {
            ragged_matmul::<128, 128, 64>::launch(
                dev, grid, &da, &db, &dc, mi, ni, ki, sa.0, sa.1, sb.0, sb.1, ni, 1,
            )
        };
        launched.expect("launch");
        let got = dc.download().expect("download");
        let err = relative_error(&got, &a.values, &b.values, (m, n, k));
        assert!(
            err < 1e-4,
            "ragged_matmul (tile {tile}) at {m}x{n}x{k}: relative error {err:e}"
        );
    }
}

#[test]
fn every_operand_form_on_the_interpreter() {
    every_form_agrees(&Device::cpu(), &[(64, 64, 64), (70, 45, 40)]);
}

#[test]
fn ragged_matmul_on_the_interpreter() {
    ragged_matmul_agrees(&Device::cpu(), (130, 100, 72));
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn every_operand_form_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        every_form_agrees(&dev, &[(256, 256, 256), (333, 190, 277)]);
    }
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn ragged_matmul_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        ragged_matmul_agrees(&dev, (1000, 1000, 1000));
    }
}
