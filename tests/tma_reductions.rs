//! TMA stores that reduce (`async_descriptor_store(.., store_reduce = ..)`):
//! many programs combine their blocks into one tensor atomically, element
//! by element; elements past the tensor's edge are left alone. Each kernel
//! runs on the interpreter and, where there is a GPU, on the GPU, against a
//! CPU reference.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// Program `(i, j, p)` adds block `(i, j)` of term `p` of `x` (`terms`
/// matrices of `[rows, cols]`) into `sums`.
#[tlx::kernel(arch = "sm_90a", configs = [(BR = 16, BC = 32)])]
fn add_terms<const BR: usize, const BC: usize>(
    x: Ptr<f32>,
    sums: TensorDesc<f32, BR, BC>,
    rows: i32,
    cols: i32,
) {
    let buf = local_view(local_alloc([BR, BC], f32, 1), 0);
    let (r0, c0) = (program_id(0) * BR, program_id(1) * BC);
    let r = r0 + arange(0, BR);
    let c = c0 + arange(0, BC);
    let inside = (r[(.., None)] < rows) & (c[(None, ..)] < cols);
    let at = program_id(2) * rows * cols + r[(.., None)] * cols + c[(None, ..)];
    local_store(buf, load(x + at, mask = inside, other = 0.0));
    async_descriptor_store(sums, buf, [r0, c0], store_reduce = "add");
    async_descriptor_store_wait(0);
}

/// The same shape of work with `max` over i32 terms.
#[tlx::kernel(arch = "sm_90a", configs = [(BR = 16, BC = 32)])]
fn max_terms<const BR: usize, const BC: usize>(
    x: Ptr<i32>,
    maxima: TensorDesc<i32, BR, BC>,
    rows: i32,
    cols: i32,
) {
    let buf = local_view(local_alloc([BR, BC], i32, 1), 0);
    let (r0, c0) = (program_id(0) * BR, program_id(1) * BC);
    let r = r0 + arange(0, BR);
    let c = c0 + arange(0, BC);
    let inside = (r[(.., None)] < rows) & (c[(None, ..)] < cols);
    let at = program_id(2) * rows * cols + r[(.., None)] * cols + c[(None, ..)];
    local_store(buf, load(x + at, mask = inside, other = 0));
    async_descriptor_store(maxima, buf, [r0, c0], store_reduce = "max");
    async_descriptor_store_wait(0);
}

/// Sizes that are not multiples of the block, so edge blocks are clipped.
const ROWS: usize = 45;
const COLS: usize = 72;
const TERMS: usize = 7;

fn grid() -> (u32, u32, u32) {
    (
        ROWS.div_ceil(16) as u32,
        COLS.div_ceil(32) as u32,
        TERMS as u32,
    )
}

fn sums_agree(dev: &Device) {
    let mut rng = fresh_rng();
    let x = rng.vec(TERMS * ROWS * COLS, 1.0);
    // The tensor starts at a value of its own, which the sums add to.
    let start = rng.vec(ROWS * COLS, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let sums = dev.upload(&start).expect("upload");
    let desc = TensorDesc::matrix(&sums, ROWS, COLS).expect("descriptor");
    add_terms::<16, 32>::launch(dev, grid(), &xb, &desc, ROWS as i32, COLS as i32).expect("launch");
    let got = sums.download().expect("download");
    for (e, (&g, &s)) in got.iter().zip(&start).enumerate() {
        let want: f64 = s as f64
            + (0..TERMS)
                .map(|p| x[p * ROWS * COLS + e] as f64)
                .sum::<f64>();
        let scale = 1.0 + want.abs();
        assert!(
            ((g as f64) - want).abs() / scale < 1e-5,
            "element {e}: {g} against {want}"
        );
    }
}

fn maxima_agree(dev: &Device) {
    let mut rng = fresh_rng();
    let x: Vec<i32> = rng
        .vec(TERMS * ROWS * COLS, 1000.0)
        .iter()
        .map(|&v| v as i32)
        .collect();
    let start: Vec<i32> = rng
        .vec(ROWS * COLS, 1000.0)
        .iter()
        .map(|&v| v as i32)
        .collect();
    let xb = dev.upload(&x).expect("upload");
    let maxima = dev.upload(&start).expect("upload");
    let desc = TensorDesc::matrix(&maxima, ROWS, COLS).expect("descriptor");
    max_terms::<16, 32>::launch(dev, grid(), &xb, &desc, ROWS as i32, COLS as i32).expect("launch");
    let got = maxima.download().expect("download");
    for (e, (&g, &s)) in got.iter().zip(&start).enumerate() {
        let want = (0..TERMS).map(|p| x[p * ROWS * COLS + e]).fold(s, i32::max);
        assert_eq!(g, want, "element {e}");
    }
}

#[test]
fn tma_reductions_on_the_interpreter() {
    let dev = Device::cpu();
    sums_agree(&dev);
    maxima_agree(&dev);
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn tma_reductions_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    sums_agree(&dev);
    maxima_agree(&dev);
}
