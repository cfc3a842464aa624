//! fp8 values in arithmetic, comparisons, reductions and scans: each runs
//! in f32 and rounds back to fp8, on the interpreter (CI) and the GPU alike,
//! checked exactly against the host's own fp8 rounding (inputs drawn so
//! that the f32 work is exact).

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

const N: usize = 128;

#[tlx::kernel(num_warps = 4)]
fn fp8_arith(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>) {
    let o = arange(0, 128);
    let a = load(x + o).to(f8e4m3);
    let b = load(y + o).to(f8e4m3);
    store(out + o, (a * b - a).to(f32));
    store(out + 128 + o, maximum(-a, b).to(f32));
    store(out + 256 + o, a.to(f32), mask = a > b);
    store(out + 384, sum(a * b, axis = 0).to(f32));
    let (run, _) = cumsum(a, axis = 0);
    store(out + 385 + o, run.to(f32));
}

fn e4m3(x: f32) -> f32 {
    F8E4M3::from_f32(x).to_f32()
}

fn fp8_arith_agrees(dev: &Device) {
    let mut rng = rng::fresh_rng();
    // Quarters in [-2, 2]: every fp8 product and sum below is exact in f32.
    let mut draw = || -> Vec<f32> {
        rng.vec(N, 2.0)
            .into_iter()
            .map(|v| e4m3((v * 4.0).round() / 4.0))
            .collect()
    };
    let (x, y) = (draw(), draw());
    let (dx, dy) = (
        dev.upload(&x).expect("upload"),
        dev.upload(&y).expect("upload"),
    );
    let dout = dev.upload(&vec![f32::NAN; 385 + N]).expect("upload");
    fp8_arith::launch(dev, 1u32, &dx, &dy, &dout).expect("launch");
    let got = dout.download().expect("download");
    let mut want = vec![f32::NAN; 385 + N];
    let mut run = 0.0f32;
    let mut dot = 0.0f32;
    for i in 0..N {
        let (a, b) = (x[i], y[i]);
        want[i] = e4m3(e4m3(a * b) - a);
        // IEEE `maximum`: -0 is below +0.
        want[128 + i] = if -a > b || (-a == b && (-a).is_sign_positive()) {
            -a
        } else {
            b
        };
        if a > b {
            want[256 + i] = a;
        }
        dot += e4m3(a * b);
        // `cumsum` is exclusive.
        want[385 + i] = e4m3(run);
        run += a;
    }
    want[384] = e4m3(dot);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "out[{i}] = {g}, want {w}"
        );
    }
}

#[test]
fn fp8_arithmetic_on_the_interpreter() {
    fp8_arith_agrees(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn fp8_arithmetic_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        fp8_arith_agrees(&dev);
    }
}
