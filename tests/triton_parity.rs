//! Triton's block pointers and integer indexing of tensors, on the
//! interpreter (CI) and the GPU, against CPU references on fresh random
//! inputs with poisoned outputs.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

/// `c = a @ b` through block pointers: windows advanced along K in the
/// loop, every edge masked by `boundary_check` and zero-padded.
#[tlx::kernel(configs = [(BM = 64, BN = 64, BK = 32)], num_warps = 4)]
fn block_ptr_matmul<const BM: usize, const BN: usize, const BK: usize>(
    a: Ptr<f16>,
    b: Ptr<f16>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let pm = program_id(0) * BM;
    let pn = program_id(1) * BN;
    let mut a_block = make_block_ptr(a, (m, k), (k, 1), (pm, 0), (BM, BK), (1, 0));
    let mut b_block = make_block_ptr(b, (k, n), (n, 1), (0, pn), (BK, BN), (1, 0));
    let mut acc = zeros([BM, BN], f32);
    for _ in (0..k).step_by(BK) {
        let a_tile = load(a_block, boundary_check = (0, 1), padding_option = "zero");
        let b_tile = load(b_block, boundary_check = (0, 1), padding_option = "zero");
        acc = dot(a_tile, b_tile, acc);
        a_block = advance(a_block, (0, BK));
        b_block = advance(b_block, (BK, 0));
    }
    let c_block = make_block_ptr(c, (m, n), (n, 1), (pm, pn), (BM, BN), (1, 0));
    store(c_block, acc, boundary_check = (0, 1));
}

/// Row `r` of a `[16, 32]` tile (a run-time index), its element `j`
/// (constant) and the tile's element `(r, j2)` through two indices.
#[tlx::kernel(num_warps = 4)]
fn pick(x: Ptr<f32>, rows_out: Ptr<f32>, elems_out: Ptr<f32>, r: i32, j2: i32) {
    let rows = arange(0, 16);
    let cols = arange(0, 32);
    let tile = load(x + rows[(.., None)] * 32 + cols[(None, ..)]);
    let row = tile[r];
    store(rows_out + cols, row);
    store(rows_out + 32 + cols, tile[(3, ..)]);
    store(elems_out, row[5]);
    store(elems_out + 1, tile[(r, j2)]);
    store(elems_out + 2, tile[(.., 7)][r]);
}

fn block_ptr_matmul_agrees(dev: &Device, (m, n, k): (usize, usize, usize)) {
    let mut rng = rng::fresh_rng();
    let a: Vec<f16> = rng.vec(m * k, 1.0).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = rng.vec(k * n, 1.0).into_iter().map(f16::from_f32).collect();
    let (da, db) = (
        dev.upload(&a).expect("upload"),
        dev.upload(&b).expect("upload"),
    );
    let dc = dev.upload(&vec![f32::NAN; m * n]).expect("upload");
    let grid = (m.div_ceil(64) as u32, n.div_ceil(64) as u32, 1);
    block_ptr_matmul::<64, 64, 32>::launch(dev, grid, &da, &db, &dc, m as i32, n as i32, k as i32)
        .expect("launch");
    let got = dc.download().expect("download");
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| a[i * k + p].to_f64() * b[p * n + j].to_f64())
                .sum();
            let g = f64::from(got[i * n + j]);
            assert!(
                (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "c[{i},{j}] = {g}, want {want}"
            );
        }
    }
}

fn pick_agrees(dev: &Device) {
    let mut rng = rng::fresh_rng();
    let x = rng.vec(16 * 32, 1.0);
    let dx = dev.upload(&x).expect("upload");
    for (r, j2) in [(0usize, 0usize), (11, 30), (15, 31)] {
        let rows_out = dev.upload(&vec![f32::NAN; 64]).expect("upload");
        let elems_out = dev.upload(&[f32::NAN; 3]).expect("upload");
        pick::launch(dev, 1u32, &dx, &rows_out, &elems_out, r as i32, j2 as i32).expect("launch");
        let rows = rows_out.download().expect("download");
        let elems = elems_out.download().expect("download");
        assert_eq!(&rows[..32], &x[r * 32..r * 32 + 32], "tile[{r}]");
        assert_eq!(&rows[32..], &x[3 * 32..4 * 32], "tile[(3, ..)]");
        assert_eq!(
            elems,
            vec![x[r * 32 + 5], x[r * 32 + j2], x[r * 32 + 7]],
            "elements at {r}, {j2}"
        );
    }
}

#[test]
fn block_pointers_on_the_interpreter() {
    block_ptr_matmul_agrees(&Device::cpu(), (70, 100, 40));
}

#[test]
fn integer_indices_on_the_interpreter() {
    pick_agrees(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn block_pointers_and_integer_indices_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        block_ptr_matmul_agrees(&dev, (1000, 1000, 1000));
        pick_agrees(&dev);
    }
}
