//! `out = x + y` over a long vector: the smallest complete kernel.
//!
//! `cargo run --release --example vector_add` (GPU if present, else the CPU interpreter).

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024), (BLOCK = 4096, num_warps = 8)])]
fn vector_add<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0.0);
    let b = load(y + offs, mask = mask, other = 0.0);
    store(out + offs, a + b, mask = mask);
}

/// Checks the kernel against a CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let size = Size::for_device(device);
    // An odd length, so the last program's mask matters.
    let n = match size {
        Size::Gpu => (1 << 24) + 17,
        Size::Interpreter => (1 << 16) + 17,
    };
    let mut rng = Rng::fresh("vector_add");
    let x = rng.uniform_vec(n, -10.0, 10.0);
    let y = rng.uniform_vec(n, -10.0, 10.0);
    let dx = device.upload(&x)?;
    let dy = device.upload(&y)?;
    let out = device.upload(&vec![f32::NAN; n])?;
    vector_add::<1024>::launch(device, n.div_ceil(1024) as u32, &dx, &dy, &out, n as i32)?;
    let got = out.download()?;
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| (a + b) as f64).collect();
    common::verdict(
        "vector_add",
        &format!("{n} elements:"),
        common::max_rel_error(&got, &want, 1e-6),
        0.0,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("vector_add", run)
}
