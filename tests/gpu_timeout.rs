//! `mbar_timeout_ns`: a `barrier_wait` that would hang the GPU instead
//! prints its source line and traps, so the launch fails with an error.
//! The kernel is broken on purpose (nothing ever arrives on the barrier),
//! which the protocol checker rejects: `check_protocol = false` lets it
//! through to show the run-time net. A trap poisons the process's CUDA
//! context, hence its own test binary.

use tlx::prelude::*;

#[tlx::kernel(
    arch = "sm_90a",
    num_warps = 4,
    check_protocol = false,
    mbar_timeout_ns = 200_000_000
)]
fn never_released(out: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    barrier_wait(local_view(bars, 0), 0);
    store(out, 1.0);
}

#[test]
fn a_wait_past_its_timeout_fails_the_launch() {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            // The interpreter reports the same hang as a deadlock.
            let dev = Device::cpu();
            let out = dev.upload(&[0.0f32]).unwrap();
            let err = never_released::launch(&dev, 1u32, &out).expect_err("deadlocks");
            assert!(err.to_string().contains("deadlock"), "{err}");
            println!("skipped on the GPU: needs one ({e}); the interpreter reports: {err}");
            return;
        }
    };
    let out = dev.upload(&[0.0f32]).unwrap();
    let started = std::time::Instant::now();
    let result = never_released::launch(&dev, 1u32, &out).and_then(|()| dev.synchronize());
    let message = match result {
        Err(e) => e.to_string(),
        Ok(()) => panic!("a wait nobody completes returned"),
    };
    println!("after {:?}: {message}", started.elapsed());
    assert!(message.contains("mbar_timeout_ns"), "{message}");
}
