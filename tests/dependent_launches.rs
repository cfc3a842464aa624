//! Programmatic dependent launches (`launch_pdl = true`, `gdc_wait()`,
//! `gdc_launch_dependents()`) and counts published after TMA stores have
//! written (`async_descriptor_store_wait(0, writes = true)` then a release
//! `atomic_add` whose old value nothing reads): a kernel scales `x` into
//! `y` by TMA and counts its programs; the next one, launched as its
//! dependent, waits for it and reads both. On the interpreter, and on the
//! GPU where there is one, against a CPU reference.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// `y = 2 x` block by block through shared memory and a TMA store; each
/// program counts itself in `done` once its store has written.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 64)])]
fn scale_and_count<const BLOCK: usize>(
    x: Ptr<f32>,
    y_desc: TensorDesc<f32, 1, BLOCK>,
    done: Ptr<i32>,
    n: i32,
) {
    // Every program has started: the dependent may launch (it waits).
    gdc_launch_dependents();
    let buf = local_view(local_alloc([1, BLOCK], f32, 1), 0);
    let col0 = program_id(0) * BLOCK;
    let cols = col0 + arange(0, BLOCK);
    let v = load(x + cols, mask = cols < n, other = 0.0) * 2.0;
    local_store(buf, v[(None, ..)]);
    async_descriptor_store(y_desc, buf, [0, col0]);
    async_descriptor_store_wait(0, writes = true);
    atomic_add(done, 1, sem = "release");
}

/// `z = y + 1`, and `counted` = what `done` held, from a launch that may
/// start before `scale_and_count` ends: `gdc_wait` waits for it.
#[tlx::kernel(launch_pdl = true, configs = [(BLOCK = 64)])]
fn add_one_after<const BLOCK: usize>(
    y: Ptr<f32>,
    z: Ptr<f32>,
    done: Ptr<i32>,
    counted: Ptr<i32>,
    n: i32,
) {
    gdc_wait();
    let cols = program_id(0) * BLOCK + arange(0, BLOCK);
    let v = load(y + cols, mask = cols < n, other = 0.0);
    store(z + cols, v + 1.0, mask = cols < n);
    store(counted + program_id(0), load(done));
}

/// Not a multiple of the block: the last TMA store is clipped.
const N: usize = 1000;

fn dependent_reads_what_the_first_wrote(dev: &Device) {
    let mut rng = fresh_rng();
    let x = rng.vec(N, 1.0);
    let programs = N.div_ceil(64);
    let xb = dev.upload(&x).expect("upload");
    let y = dev.upload(&vec![f32::NAN; N]).expect("upload");
    let z = dev.upload(&vec![f32::NAN; N]).expect("upload");
    let done = dev.upload(&[0i32]).expect("upload");
    let counted = dev.upload(&vec![-1i32; programs]).expect("upload");
    let y_desc = TensorDesc::matrix(&y, 1, N).expect("descriptor");
    let grid = programs as u32;
    scale_and_count::<64>::launch(dev, grid, &xb, &y_desc, &done, N as i32).expect("launch");
    add_one_after::<64>::launch(dev, grid, &y, &z, &done, &counted, N as i32).expect("launch");
    let (z, counted) = (
        z.download().expect("z"),
        counted.download().expect("counted"),
    );
    for (i, (&got, &xi)) in z.iter().zip(&x).enumerate() {
        let want = 2.0 * xi + 1.0;
        assert!(
            (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
            "element {i}: {got} against {want}"
        );
    }
    assert!(
        counted.iter().all(|&c| c == programs as i32),
        "every program of the dependent sees all {programs} counts: {counted:?}"
    );
}

#[test]
fn dependent_launches_on_the_interpreter() {
    dependent_reads_what_the_first_wrote(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn dependent_launches_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    dependent_reads_what_the_first_wrote(&dev);
}
