//! Fused dropout with Triton's counter-based random numbers: each element is
//! kept with probability `1 - p` (and scaled by `1 / (1 - p)`) by
//! `rand(seed, offset) > p`, so the mask is never stored: the backward pass
//! regenerates it from the same seed. The check recomputes Philox-4x32-10 on
//! the CPU and wants every element bit for bit.
//!
//! `cargo run --release --example dropout` (GPU if present, else the CPU interpreter).

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024)])]
fn dropout<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, n: i32, p: f32, seed: i64) {
    let offsets = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offsets < n;
    let v = load(x + offsets, mask = mask);
    let keep = rand(seed, offsets) > p;
    store(out + offsets, select(keep, v / (1.0 - p), 0.0), mask = mask);
}

/// Philox-4x32 with Triton's key split (the seed's low word first) and
/// counter `(offset, 0, 0, 0)`: the first word of `randint4x`.
fn philox_word(seed: i64, offset: u32) -> u32 {
    let mut c = [offset, 0, 0, 0];
    let mut k = [seed as u32, (seed as u64 >> 32) as u32];
    for _ in 0..10 {
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p2 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            (p2 >> 32) as u32 ^ c[1] ^ k[0],
            p2 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [
            k[0].wrapping_add(0x9E37_79B9),
            k[1].wrapping_add(0xBB67_AE85),
        ];
    }
    c[0]
}

/// Triton's `uint_to_uniform_float` of a word, in f32 as the kernel computes it.
fn uniform(word: u32) -> f32 {
    let x = word as i32;
    let magnitude = if x < 0 {
        x.wrapping_neg().wrapping_sub(1)
    } else {
        x
    };
    magnitude as f32 * 4.656_612_7e-10_f32
}

/// Checks the kernel against a CPU reference on fresh random inputs and seeds.
pub fn run(device: &Device) -> Outcome {
    let n = match Size::for_device(device) {
        Size::Gpu => (1 << 24) + 5,
        Size::Interpreter => (1 << 15) + 5,
    };
    let mut rng = Rng::fresh("dropout");
    let x = rng.uniform_vec(n, 0.5, 2.0);
    let seed = rng.next_u64() as i64;
    let p = 0.3f32;
    let dx = device.upload(&x)?;
    let out = device.upload(&vec![f32::NAN; n])?;
    let grid = n.div_ceil(1024) as u32;
    dropout::<1024>::launch(device, grid, &dx, &out, n as i32, p, seed)?;
    let got = out.download()?;

    let mut kept = 0usize;
    let mut mismatches = 0usize;
    for (i, (&have, &v)) in got.iter().zip(&x).enumerate() {
        let keep = uniform(philox_word(seed, i as u32)) > p;
        let want = if keep { v / (1.0 - p) } else { 0.0 };
        kept += usize::from(keep);
        if have.to_bits() != want.to_bits() {
            if mismatches < 5 {
                println!("dropout: element {i}: {have} where the reference has {want}");
            }
            mismatches += 1;
        }
    }
    if mismatches > 0 {
        return Err(
            format!("dropout: {mismatches} of {n} elements differ from the reference").into(),
        );
    }
    // The kept share is binomial: its standard deviation is under 0.5 / sqrt(n).
    let share = kept as f64 / n as f64;
    let expected = 1.0 - f64::from(p);
    if (share - expected).abs() > 3.0 / (n as f64).sqrt() {
        return Err(
            format!("dropout: kept {share:.4} of the elements, expected {expected:.2}").into(),
        );
    }
    println!("PASS dropout: {n} elements, p = {p}: all equal to the reference bit for bit, {share:.4} kept");
    Ok(())
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("dropout", run)
}
