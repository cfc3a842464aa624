//! `device_print` and `device_assert` on the GPU. A failed assert traps,
//! which poisons the process's CUDA context: hence its own test binary, and
//! one test that runs the passing case before the failing one.

use tlx::prelude::*;

#[tlx::kernel]
fn checked_scale(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * 128 + arange(0, 128);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 1.0);
    if program_id(0) == 0 {
        device_print("first element ", load(x));
    }
    device_assert(v > 0.0, "inputs must be positive");
    store(out + offs, v * 2.0, mask = mask);
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn print_runs_and_a_failed_assert_fails_the_launch() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    let good = dev.upload(&vec![3.0f32; 300]).unwrap();
    let out = dev.upload(&vec![f32::NAN; 300]).unwrap();
    checked_scale::launch(&dev, 3u32, &good, &out, 300).unwrap();
    dev.synchronize().unwrap();
    assert!(out.download().unwrap().iter().all(|&v| v == 6.0));

    let mut bad = vec![3.0f32; 300];
    bad[257] = -1.0;
    let bad = dev.upload(&bad).unwrap();
    let result =
        checked_scale::launch(&dev, 3u32, &bad, &out, 300).and_then(|()| dev.synchronize());
    let message = match result {
        Err(e) => e.to_string(),
        Ok(()) => panic!("a failed device_assert did not fail the launch"),
    };
    println!("{message}");
    assert!(message.contains("device_assert"), "{message}");
}
