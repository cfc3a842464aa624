//! Flash attention forward (`examples/hopper_fa_fwd.rs`) in the FA3 paper's
//! setting: 16k tokens in all (batch × sequence), 16 heads of 128 (and 32
//! heads of 64), bf16, sequences 512 to 16384, causal and not.
//!
//! `cargo bench --bench attention` (prints a table; skips without a GPU).
//! cuDNN's and torch's flash attention are not reachable from Rust here:
//! run `../shared/anchors.py` in the same sitting and combine the two with
//! `scripts/attention_table.py`. Each shape's output is checked on sampled
//! rows against an f64 CPU reference (NaN-poisoned first) before it is timed.
//! `TLX_BENCH_ONLY=128` runs the head dimension 128 shapes only.

// Each example brings its own copy of `examples/common`, as it does when built alone.
#![allow(clippy::duplicate_mod)]

#[path = "../examples/common/mod.rs"]
mod common;
#[path = "../examples/hopper_fa_fwd.rs"]
#[allow(dead_code)]
mod hopper_fa_fwd;

use half::bf16;
use hopper_fa_fwd::Shape;
use tlx::prelude::*;

/// Median milliseconds of `f` over `reps` runs after two warm-up runs.
fn median_ms(
    dev: &Device,
    reps: usize,
    mut f: impl FnMut() -> Result<(), tlx::Error>,
) -> Result<f64, tlx::Error> {
    f()?;
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(dev.time(&mut f)? as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}

/// Times one shape and checks sampled rows; returns TFLOP/s and the largest
/// relative error on the sample.
fn run_shape(dev: &Device, shape: Shape) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let mut rng = common::Rng::fresh("attention bench");
    let q_len = shape.batch * shape.heads * shape.seq_q * shape.head_dim;
    let kv_len = shape.batch * shape.kv_heads * shape.seq_kv * shape.head_dim;
    let mut random =
        |n: usize| -> Vec<bf16> { rng.normal_vec(n).into_iter().map(bf16::from_f32).collect() };
    let (q, k, v) = (random(q_len), random(kv_len), random(kv_len));
    let (dq, dk, dv) = (dev.upload(&q)?, dev.upload(&k)?, dev.upload(&v)?);
    let o = dev.upload(&vec![bf16::NAN; q_len])?;
    let lse = dev.upload(&vec![f32::NAN; shape.batch * shape.heads * shape.seq_q])?;
    let sm_scale = 1.0 / (shape.head_dim as f32).sqrt();
    let call = || hopper_fa_fwd::attention(dev, (&dq, &dk, &dv), (&o, &lse), shape, sm_scale);
    call()?;
    let got = o.download()?;
    let d = shape.head_dim;
    let mut worst: f64 = 0.0;
    let last = (shape.batch - 1, shape.heads - 1);
    for (b, h) in [(0, 0), last] {
        for i in [0, 1, shape.seq_q / 2, shape.seq_q - 1] {
            let (want, _) =
                hopper_fa_fwd::reference_row((&q, &k, &v), shape, sm_scale as f64, (b, h, i));
            let at = ((b * shape.heads + h) * shape.seq_q + i) * d;
            let row: Vec<f32> = got[at..at + d].iter().map(|x| x.to_f32()).collect();
            worst = worst.max(common::max_rel_error(&row, &want, 0.1));
        }
    }
    let ms = median_ms(dev, 20, call)?;
    Ok((shape.flops() / ms / 1e9, worst))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: the attention benchmark needs a GPU ({e})");
            return Ok(());
        }
    };
    println!("device: {}", dev.name());
    let only = std::env::var("TLX_BENCH_ONLY").unwrap_or_default();
    let mut rows = Vec::new();
    for (head_dim, heads) in [(128, 16), (64, 32)] {
        if !head_dim.to_string().starts_with(&only) {
            continue;
        }
        for causal in [false, true] {
            for seq in [512, 1024, 2048, 4096, 8192, 16384] {
                let shape = Shape {
                    batch: 16384 / seq,
                    heads,
                    kv_heads: heads,
                    seq_q: seq,
                    seq_kv: seq,
                    head_dim,
                    causal,
                };
                let (tflops, error) = run_shape(&dev, shape)?;
                println!(
                    "attn fwd d{head_dim} causal {causal} S {seq}: {tflops:.1} TFLOP/s (max rel error {error:.1e})"
                );
                rows.push((head_dim, causal, seq, tflops, error));
            }
        }
    }
    println!();
    println!("| head dim | causal | seq | tlx TFLOP/s | max rel error |");
    println!("| --- | --- | --- | --- | --- |");
    for (d, causal, seq, tflops, error) in rows {
        println!("| {d} | {causal} | {seq} | {tflops:.0} | {error:.1e} |");
    }
    Ok(())
}
