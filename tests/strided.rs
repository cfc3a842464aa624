//! `Strided<T, N>` parameters: the launch passes each view's extents and
//! strides, the kernel reads them as `x.shape(d)` and `x.stride(d)`. A
//! matrix product over a transposed operand and a column slice (views, not
//! copies), a rank-3 copy, and the named launch; on the interpreter in CI
//! and on the GPU where there is one. Outputs are poisoned first.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// `c = a @ b` for any strides: no size or stride argument of its own.
#[tlx::kernel(num_warps = 4)]
fn strided_matmul(a: Strided<f32, 2>, b: Strided<f32, 2>, c: Strided<f32, 2>) {
    let (m, n, k) = (a.shape(0), b.shape(1), a.shape(1));
    let rows = program_id(0) * 32 + arange(0, 32);
    let cols = program_id(1) * 32 + arange(0, 32);
    let mut acc = zeros([32, 32], f32);
    for k0 in (0..k).step_by(16) {
        let ks = k0 + arange(0, 16);
        let a_tile = load(
            a + rows[(.., None)] * a.stride(0) + ks[(None, ..)] * a.stride(1),
            mask = (rows[(.., None)] < m) & (ks[(None, ..)] < k),
            other = 0.0,
        );
        let b_tile = load(
            b + ks[(.., None)] * b.stride(0) + cols[(None, ..)] * b.stride(1),
            mask = (ks[(.., None)] < k) & (cols[(None, ..)] < n),
            other = 0.0,
        );
        acc = dot(a_tile, b_tile, acc, input_precision = "ieee");
    }
    let at = c + rows[(.., None)] * c.stride(0) + cols[(None, ..)] * c.stride(1);
    store(
        at,
        acc,
        mask = (rows[(.., None)] < m) & (cols[(None, ..)] < n),
    );
}

/// `dst[i, j, l] = src[i, j, l] + 1` over rank-3 views of any layout.
#[tlx::kernel(num_warps = 4)]
fn strided_copy3(src: Strided<i32, 3>, dst: Strided<i32, 3>) {
    let i = program_id(0);
    let j = arange(0, 8)[(.., None)];
    let l = arange(0, 16)[(None, ..)];
    let inside = (j < src.shape(1)) & (l < src.shape(2));
    let from = src + i * src.stride(0) + j * src.stride(1) + l * src.stride(2);
    let to = dst + i * dst.stride(0) + j * dst.stride(1) + l * dst.stride(2);
    store(to, load(from, mask = inside) + 1, mask = inside);
}

fn matmul_agrees(dev: &Device) {
    let (m, n, k) = (70, 45, 33);
    let mut rng = fresh_rng();
    // A is the first k columns of a wider [m, k + 7] matrix; B is given as
    // its transpose Bᵀ [n, k], read through a transposed view.
    let wide = rng.vec(m * (k + 7), 1.0);
    let bt = rng.vec(n * k, 1.0);
    let (wide_dev, bt_dev) = (
        dev.upload(&wide).expect("upload"),
        dev.upload(&bt).expect("upload"),
    );
    let c_dev = dev.upload(&vec![f32::NAN; m * n]).expect("upload");
    let a = Strided::new(&wide_dev, [m, k], [k + 7, 1]).expect("a");
    let b = Strided::contiguous(&bt_dev, [n, k])
        .expect("bt")
        .transpose(0, 1);
    let c = Strided::contiguous(&c_dev, [m, n]).expect("c");
    let grid = (m.div_ceil(32) as u32, n.div_ceil(32) as u32, 1);
    strided_matmul::launch(dev, grid, &a, &b, &c).expect("launch");
    let got = c_dev.download().expect("download");
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| f64::from(wide[i * (k + 7) + p]) * f64::from(bt[j * k + p]))
                .sum();
            let g = f64::from(got[i * n + j]);
            assert!(
                (g - want).abs() < 1e-4 * (1.0 + want.abs()),
                "c[{i},{j}] = {g}, want {want}"
            );
        }
    }
}

fn copy_agrees(dev: &Device) {
    let (d0, d1, d2) = (3, 5, 12);
    let src: Vec<i32> = (0..(d0 * d1 * d2) as i32).map(|x| x * 7 - 100).collect();
    let src_dev = dev.upload(&src).expect("upload");
    // The destination is laid out [d2, d0, d1] and viewed as [d0, d1, d2].
    let dst_dev = dev.upload(&vec![i32::MIN; d0 * d1 * d2]).expect("upload");
    let s = Strided::contiguous(&src_dev, [d0, d1, d2]).expect("src");
    let t = Strided::new(&dst_dev, [d0, d1, d2], [d1, 1, d0 * d1]).expect("dst");
    strided_copy3::launch_with(dev, d0 as u32, StridedCopy3Args { src: &s, dst: &t })
        .expect("launch");
    let got = dst_dev.download().expect("download");
    for i in 0..d0 {
        for j in 0..d1 {
            for l in 0..d2 {
                let want = src[(i * d1 + j) * d2 + l] + 1;
                assert_eq!(got[l * d0 * d1 + i * d1 + j], want, "[{i},{j},{l}]");
            }
        }
    }
}

#[test]
fn strided_on_the_interpreter() {
    let dev = Device::cpu();
    matmul_agrees(&dev);
    copy_agrees(&dev);
}

#[test]
fn a_view_past_the_buffer_is_refused() {
    let dev = Device::cpu();
    let buf = dev.alloc::<f32>(100).expect("alloc");
    let err = Strided::new(&buf, [10, 11], [10, 1]).expect_err("reaches 109");
    assert!(matches!(err, Error::InvalidStrided { .. }), "{err}");
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn strided_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        matmul_agrees(&dev);
        copy_agrees(&dev);
    }
}
