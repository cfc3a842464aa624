//! Fused row-wise softmax: one program per row, the row held in registers,
//! max and sum reduced across the program's threads.
//!
//! `cargo run --release --example softmax`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4), (BLOCK = 4096, num_warps = 8)])]
fn softmax<const BLOCK: usize>(out: Ptr<f32>, inp: Ptr<f32>, stride: i32, n_cols: i32) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(
        inp + row * stride + cols,
        mask = mask,
        other = f32::NEG_INFINITY,
    );
    let shifted = x - max(x, axis = 0);
    let num = exp(shifted);
    let den = sum(num, axis = 0);
    store(out + row * stride + cols, num / den, mask = mask);
}

fn reference(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * cols);
    for r in x.chunks(cols).take(rows) {
        let m = r.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let e: Vec<f64> = r.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

/// Checks the kernel against a CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let size = Size::for_device(device);
    let (rows, cols) = match size {
        Size::Gpu => (4096, 3000),
        Size::Interpreter => (64, 3000),
    };
    let mut rng = Rng::fresh("softmax");
    let x = rng
        .normal_vec(rows * cols)
        .iter()
        .map(|v| v * 4.0)
        .collect::<Vec<_>>();
    let dx = device.upload(&x)?;
    let out = device.upload(&vec![f32::NAN; rows * cols])?;
    softmax::<4096>::launch(device, rows as u32, &out, &dx, cols as i32, cols as i32)?;
    let got = out.download()?;
    let want = reference(&x, rows, cols);
    // The GPU's exp is ex2.approx: a few ulp.
    common::verdict(
        "softmax",
        &format!("{rows}x{cols}:"),
        common::max_rel_error(&got, &want, 1e-30),
        2e-5,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("softmax", run)
}
