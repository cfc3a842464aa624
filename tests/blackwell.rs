//! Blackwell kernels where there is no Blackwell GPU: a tensor-memory round
//! trip runs on the interpreter, and launching it on another GPU (an H100)
//! is a clear error naming the architectures, not a crash; on a Blackwell
//! GPU it runs and must agree.

use tlx::prelude::*;

/// Row `r` of a `[128, 64]` tile through tensor memory and back, doubled.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn tmem_round_trip(x: Ptr<f32>, out: Ptr<f32>) {
    let buf = local_alloc([128, 64], f32, 1, storage = "tmem");
    let offs = arange(0, 128)[(.., None)] * 64 + arange(0, 64)[(None, ..)];
    local_store(local_view(buf, 0), load(x + offs));
    let back = local_load(local_view(buf, 0));
    store(out + offs, back * 2.0);
}

fn inputs() -> Vec<f32> {
    (0..128 * 64)
        .map(|i| (i as f32 * 0.37).sin() + 1.5)
        .collect()
}

fn run(dev: &Device) -> Result<Vec<f32>, tlx::Error> {
    let x = dev.upload(&inputs())?;
    let out = dev.upload(&vec![f32::NAN; 128 * 64])?;
    tmem_round_trip::launch(dev, 1u32, &x, &out)?;
    dev.synchronize()?;
    out.download()
}

fn assert_doubled(got: &[f32]) {
    for (i, (g, x)) in got.iter().zip(inputs()).enumerate() {
        assert_eq!(*g, 2.0 * x, "element {i}");
    }
}

#[test]
fn tensor_memory_round_trips_on_the_interpreter() {
    assert_doubled(&run(&Device::cpu()).expect("runs"));
}

#[test]
fn an_sm_100a_kernel_on_another_gpu_is_an_error_naming_the_architectures() {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: needs a GPU ({e})");
            return;
        }
    };
    match dev.compute_capability() {
        Some((10, _)) => assert_doubled(&run(&dev).expect("runs on Blackwell")),
        _ => {
            let err = run(&dev).expect_err("no PTX for this GPU");
            let message = err.to_string();
            println!("{}: {message}", dev.name());
            assert!(message.contains("has PTX for sm_100a only"), "{message}");
        }
    }
}
