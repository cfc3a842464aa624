//! Every kernel's call-site autotuner: `kernel::autotune(&device, grid,
//! args..)` picks among the compiled configurations by the kernel's `key`,
//! launches the choice on the grid the caller's function gives for it, and
//! returns it. Outputs the trials overwrite are restored (`restore`), so an
//! accumulating kernel adds exactly once. On the interpreter the first
//! configuration runs (nothing is timed there); on a GPU each is timed.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// `out += 2 * x`: reads what it writes, so trials must not pile up.
#[tlx::kernel(
    configs = [(BLOCK = 256), (BLOCK = 1024, num_warps = 8), (BLOCK = 4096, num_warps = 8)],
    key = [n],
    restore = [out],
)]
fn accumulate<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let sum = load(out + offs, mask = mask) + 2.0 * load(x + offs, mask = mask);
    store(out + offs, sum, mask = mask);
}

/// Runs `accumulate::autotune` over `n` elements twice (the second call
/// finds the choice remembered) and checks `out = start + 4x` exactly.
fn adds_once_per_call(dev: &Device, n: usize) -> AccumulateConfig {
    let mut rng = fresh_rng();
    let x = rng.vec(n, 1.0);
    let start = rng.vec(n, 1.0);
    let (xb, out) = (
        dev.upload(&x).expect("upload"),
        dev.upload(&start).expect("upload"),
    );
    let grid = |c: &AccumulateConfig| n.div_ceil(c.BLOCK) as u32;
    let first = accumulate::autotune(dev, grid, &xb, &out, n as i32).expect("autotune");
    let again = accumulate::autotune(dev, grid, &xb, &out, n as i32).expect("autotune");
    assert_eq!(
        first, again,
        "the second call must reuse the first's choice"
    );
    let got = out.download().expect("download");
    for i in 0..n {
        assert_eq!(got[i], start[i] + 2.0 * x[i] + 2.0 * x[i], "element {i}");
    }
    first
}

#[test]
fn the_interpreter_runs_the_first_configuration() {
    let chosen = adds_once_per_call(&Device::cpu(), 3000);
    assert_eq!(
        chosen,
        AccumulateConfig {
            BLOCK: 256,
            num_warps: 4
        }
    );
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn the_gpu_times_every_configuration_and_restores_the_output() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    // Sizes no other test keys on, so the cache cannot answer for them.
    let n = 1 << 24 | (std::process::id() as usize & 0xffff);
    let chosen = adds_once_per_call(&dev, n);
    println!("autotune chose {chosen:?} for n = {n}");
}
