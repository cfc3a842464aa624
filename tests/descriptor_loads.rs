//! Triton's block-level descriptor loads (`desc.load([o0, o1])`): the
//! descriptor's block at any offset, zero past the tensor's edges (also
//! before its start), as a register tensor; stores (`desc.store`) clipped
//! at every edge; and a block-level GEMM whose
//! operands are descriptor loads, which a pipelined loop keeps in TMA-filled
//! ring slots that wgmma reads in place. Each kernel runs on the interpreter
//! against a CPU reference and, where there is a GPU, on the GPU against
//! the same reference; outputs are NaN-poisoned first, so unwritten
//! elements show.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

#[tlx::kernel(configs = [(BR = 16, BC = 64)])]
fn shifted_copy<const BR: usize, const BC: usize>(
    x: TensorDesc<f32, BR, BC>,
    out: Ptr<f32>,
    out_cols: i32,
    dc: i32,
) {
    let (pr, pc) = (program_id(0), program_id(1));
    // Shifted up and right: the first programs reach before row 0, the last
    // ones past the last row and column. TMA starts a row on 16-byte
    // boundaries only: `dc` is 4 (or 5, which must be refused).
    let tile = x.load([pr * BR - 3, pc * BC + dc]);
    let rows = pr * BR + arange(0, BR);
    let cols = pc * BC + arange(0, BC);
    store(
        out + rows[(.., None)] * out_cols + cols[(None, ..)],
        tile * 2.0 + 1.0,
    );
}

/// A block read at one place and written, scaled, at another by TMA
/// stores that reach past the last row and column of `y` (clipped there;
/// a store may not start before the first, see below).
#[tlx::kernel(configs = [(BR = 16, BC = 64)])]
fn shifted_store<const BR: usize, const BC: usize>(
    x: TensorDesc<f32, BR, BC>,
    y: TensorDesc<f32, BR, BC>,
    dr: i32,
) {
    let (pr, pc) = (program_id(0), program_id(1));
    let tile = x.load([pr * BR, pc * BC]);
    y.store([pr * BR + dr, pc * BC + 4], tile * 3.0 - 1.0);
}

#[tlx::kernel(arch = "sm_90a", configs = [
    (BM = 128, BN = 128, BK = 64, NW = 8, S = 4, num_warps = NW, num_stages = S),
    (BM = 64, BN = 64, BK = 32, NW = 4, S = 3, num_warps = NW, num_stages = S),
    (BM = 64, BN = 64, BK = 32, NW = 4, S = 1, num_warps = NW, num_stages = S),
])]
fn descriptor_matmul<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const NW: usize,
    const S: usize,
>(
    a: TensorDesc<bf16, BM, BK>,
    b: TensorDesc<bf16, BK, BN>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let (om, on) = (program_id(0) * BM, program_id(1) * BN);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        acc = dot(a.load([om, k0]), b.load([k0, on]), acc);
    }
    let rm = om + arange(0, BM);
    let rn = on + arange(0, BN);
    let ok = (rm[(.., None)] < m) & (rn[(None, ..)] < n);
    store(c + rm[(.., None)] * n + rn[(None, ..)], acc, mask = ok);
}

fn shifted_copy_agrees(dev: &Device) {
    let (rows, cols): (usize, usize) = (37, 156);
    let (grid_r, grid_c) = (rows.div_ceil(16) as u32, cols.div_ceil(64) as u32);
    let (out_rows, out_cols) = (grid_r as usize * 16, grid_c as usize * 64);
    let x = fresh_rng().vec(rows * cols, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let out = dev
        .upload(&vec![f32::NAN; out_rows * out_cols])
        .expect("upload");
    let desc = TensorDesc::matrix(&xb, rows, cols).expect("descriptor");
    shifted_copy::<16, 64>::launch(dev, (grid_r, grid_c, 1), &desc, &out, out_cols as i32, 4)
        .expect("launch");
    let got = out.download().expect("download");
    for i in 0..out_rows {
        for j in 0..out_cols {
            let (si, sj) = (i as i64 - 3, j + 4);
            let inside = (0..rows as i64).contains(&si) && sj < cols;
            let source = if inside {
                x[si as usize * cols + sj]
            } else {
                0.0
            };
            let want = source * 2.0 + 1.0;
            assert_eq!(got[i * out_cols + j], want, "element ({i}, {j})");
        }
    }
}

fn shifted_store_agrees(dev: &Device) {
    let (rows, cols): (usize, usize) = (37, 156);
    let (grid_r, grid_c) = (rows.div_ceil(16), cols.div_ceil(64));
    let x = fresh_rng().vec(rows * cols, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let yb = dev.upload(&vec![f32::NAN; rows * cols]).expect("upload");
    let x_desc = TensorDesc::matrix(&xb, rows, cols).expect("descriptor");
    let y_desc = TensorDesc::matrix(&yb, rows, cols).expect("descriptor");
    let grid = (grid_r as u32, grid_c as u32, 1);
    shifted_store::<16, 64>::launch(dev, grid, &x_desc, &y_desc, 5).expect("launch");
    let got = yb.download().expect("download");
    for i in 0..rows {
        for j in 0..cols {
            // Written by the program whose block starts 5 rows above and 4
            // columns left of it, if there is one; x reads 0 past its edges.
            let (si, sj) = (i as i64 - 5, j as i64 - 4);
            let covered =
                (0..(grid_r * 16) as i64).contains(&si) && (0..(grid_c * 64) as i64).contains(&sj);
            let got = got[i * cols + j];
            if !covered {
                assert!(got.is_nan(), "element ({i}, {j}) was written: {got}");
                continue;
            }
            let (si, sj) = (si as usize, sj as usize);
            let source = if si < rows && sj < cols {
                x[si * cols + sj]
            } else {
                0.0
            };
            assert_eq!(got, source * 3.0 - 1.0, "element ({i}, {j})");
        }
    }
}

/// `C = A @ B` with every configuration of `descriptor_matmul`, on shapes
/// that are not multiples of any tile; the reference sums in f64.
fn descriptor_matmul_agrees(dev: &Device, (m, n, k): (usize, usize, usize)) {
    let mut rng = fresh_rng();
    let round = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let (a, b) = (round(rng.vec(m * k, 1.0)), round(rng.vec(k * n, 1.0)));
    let mut want = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = f64::from(a[i * k + p].to_f32());
            for j in 0..n {
                want[i * n + j] += x * f64::from(b[p * n + j].to_f32());
            }
        }
    }
    let (ab, bb) = (
        dev.upload(&a).expect("upload"),
        dev.upload(&b).expect("upload"),
    );
    let (ad, bd) = (
        TensorDesc::matrix(&ab, m, k).expect("descriptor"),
        TensorDesc::matrix(&bb, k, n).expect("descriptor"),
    );
    let dims = (m as i32, n as i32, k as i32);
    type Launch = fn(
        &Device,
        &TensorDesc<bf16>,
        &TensorDesc<bf16>,
        &Buffer<f32>,
        (i32, i32, i32),
    ) -> Result<(), tlx::Error>;
    let configs: [(&str, usize, usize, Launch); 3] = [
        ("128x128x64 s4", 128, 128, |d, a, b, c, (m, n, k)| {
            let grid = ((m as u32).div_ceil(128), (n as u32).div_ceil(128), 1);
            descriptor_matmul::<128, 128, 64, 8, 4>::launch(d, grid, a, b, c, m, n, k)
        }),
        ("64x64x32 s3", 64, 64, |d, a, b, c, (m, n, k)| {
            let grid = ((m as u32).div_ceil(64), (n as u32).div_ceil(64), 1);
            descriptor_matmul::<64, 64, 32, 4, 3>::launch(d, grid, a, b, c, m, n, k)
        }),
        ("64x64x32 s1", 64, 64, |d, a, b, c, (m, n, k)| {
            let grid = ((m as u32).div_ceil(64), (n as u32).div_ceil(64), 1);
            descriptor_matmul::<64, 64, 32, 4, 1>::launch(d, grid, a, b, c, m, n, k)
        }),
    ];
    for (name, _, _, launch) in configs {
        let c = dev.upload(&vec![f32::NAN; m * n]).expect("upload");
        launch(dev, &ad, &bd, &c, dims).expect("launch");
        let got = c.download().expect("download");
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (f64::from(*g) - w).abs() / w.abs().max(1.0))
            .fold(0.0f64, |acc, d| {
                if d.is_nan() {
                    f64::INFINITY
                } else {
                    acc.max(d)
                }
            });
        println!("{name}: max rel diff {worst:.2e}");
        assert!(worst < 1e-4, "{name}: max rel diff {worst}");
    }
}

#[test]
fn descriptor_loads_on_the_interpreter() {
    let dev = Device::cpu();
    shifted_copy_agrees(&dev);
    shifted_store_agrees(&dev);
    descriptor_matmul_agrees(&dev, (200, 136, 152));
}

/// TMA's rules hold on every device: rows whose byte stride is not a
/// multiple of 16 are refused at launch, on the interpreter too.
#[test]
fn misaligned_rows_are_refused_on_the_interpreter() {
    let dev = Device::cpu();
    let (rows, cols) = (20, 30);
    let x = dev.upload(&vec![1.0f32; rows * cols]).expect("upload");
    let out = dev.upload(&vec![0.0f32; 64 * 64]).expect("upload");
    let desc = TensorDesc::matrix(&x, rows, cols).expect("descriptor");
    let err = shifted_copy::<16, 64>::launch(&dev, (2, 1, 1), &desc, &out, 64, 4)
        .expect_err("a 120-byte row stride is not a TMA stride");
    let message = err.to_string();
    assert!(message.contains("multiple of 16"), "{message}");
}

/// A box whose row starts off a 16-byte boundary stops the GPU (an illegal
/// instruction, measured on an H100); the interpreter says why, at the load.
#[test]
fn misaligned_box_offsets_are_reported_on_the_interpreter() {
    let dev = Device::cpu();
    let x = dev.upload(&vec![1.0f32; 32 * 128]).expect("upload");
    let out = dev.upload(&vec![0.0f32; 64 * 128]).expect("upload");
    let desc = TensorDesc::matrix(&x, 32, 128).expect("descriptor");
    let err = shifted_copy::<16, 64>::launch(&dev, (2, 2, 1), &desc, &out, 128, 5)
        .expect_err("a box 20 bytes into a row");
    let message = err.to_string();
    assert!(
        message.contains("descriptor_loads.rs") && message.contains("multiple of 4 elements"),
        "{message}"
    );
}

/// A TMA store whose block starts before the tensor stops the GPU (an
/// illegal instruction, measured on an H100, where loads read zeros there);
/// the interpreter says so at the store.
#[test]
fn stores_starting_before_the_tensor_are_reported_on_the_interpreter() {
    let dev = Device::cpu();
    let x = dev.upload(&vec![1.0f32; 32 * 128]).expect("upload");
    let y = dev.upload(&vec![0.0f32; 32 * 128]).expect("upload");
    let x_desc = TensorDesc::matrix(&x, 32, 128).expect("descriptor");
    let y_desc = TensorDesc::matrix(&y, 32, 128).expect("descriptor");
    let err = shifted_store::<16, 64>::launch(&dev, (2, 2, 1), &x_desc, &y_desc, -5)
        .expect_err("a store starting 5 rows before the tensor");
    let message = err.to_string();
    assert!(
        message.contains("descriptor_loads.rs") && message.contains("must start inside"),
        "{message}"
    );
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn descriptor_loads_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    shifted_copy_agrees(&dev);
    shifted_store_agrees(&dev);
    descriptor_matmul_agrees(&dev, (200, 136, 152));
    descriptor_matmul_agrees(&dev, (1000, 1032, 520));
}
