//! `fence(scope)`: the last program to finish sums what every program
//! stored with plain stores, published by `fence("gpu")` before a relaxed
//! counter bump and acquired by `fence("gpu")` after it ("threadfence
//! reduction"). On the interpreter, and on the GPU where there is one,
//! against a CPU reference in f64.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 128, PROGRAMS = 16)])]
fn last_program_sums<const BLOCK: usize, const PROGRAMS: usize>(
    x: Ptr<f32>,
    partials: Ptr<f32>,
    count: Ptr<i32>,
    out: Ptr<f32>,
) {
    let pid = program_id(0);
    let cols = pid * BLOCK + arange(0, BLOCK);
    store(partials + pid, sum(load(x + cols)));
    fence("gpu");
    let arrived = atomic_add(count, 1);
    if arrived == PROGRAMS - 1 {
        fence("gpu");
        store(out, sum(load(partials + arange(0, PROGRAMS))));
    }
}

/// Both other scopes compile and run (the interpreter's memory needs
/// neither): a copy with a system-scope fence between its halves.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 128)])]
fn fenced_copy<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let v = load(x + offs);
    fence("sys");
    fence("async_shared");
    store(y + offs, v);
}

fn last_program_sums_every_partial(dev: &Device) {
    const BLOCK: usize = 128;
    const PROGRAMS: usize = 16;
    let mut rng = fresh_rng();
    let x = rng.vec(BLOCK * PROGRAMS, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let partials = dev.upload(&[f32::NAN; PROGRAMS]).expect("upload");
    let count = dev.upload(&[0i32]).expect("upload");
    let out = dev.upload(&[f32::NAN]).expect("upload");
    last_program_sums::<BLOCK, PROGRAMS>::launch(
        dev,
        PROGRAMS as u32,
        &xb,
        &partials,
        &count,
        &out,
    )
    .expect("launch");
    let got = f64::from(out.download().expect("out")[0]);
    let want: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let scale: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
    assert!(
        (got - want).abs() <= 1e-5 * scale,
        "sum {got} against {want}"
    );
    assert_eq!(count.download().expect("count")[0], PROGRAMS as i32);

    let y = dev.upload(&vec![f32::NAN; BLOCK * 2]).expect("upload");
    fenced_copy::<BLOCK>::launch(dev, 2u32, &xb, &y).expect("launch");
    assert_eq!(y.download().expect("y"), x[..BLOCK * 2]);
}

#[test]
fn fences_on_the_interpreter() {
    last_program_sums_every_partial(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn fences_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    last_program_sums_every_partial(&dev);
}
