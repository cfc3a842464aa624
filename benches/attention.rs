//! Flash attention (`tlx::ops::attention` and `attention_backward`, the
//! kernels of `src/ops/attention/`) in the FA3 paper's
//! setting: 16k tokens in all (batch × sequence), 16 heads of 128 (and 32
//! heads of 64, 8 of 256: the forward only), bf16, sequences 512 to 16384,
//! causal and not.
//!
//! `cargo bench --bench attention` (prints a table; skips without a GPU).
//! cuDNN's and torch's flash attention are not reachable from Rust here:
//! run `../shared/anchors.py` in the same sitting and combine the two with
//! `scripts/attention_table.py`. Each shape's output is checked on sampled
//! rows against an f64 CPU reference (NaN-poisoned first) before it is timed.
//! Both passes are timed as the anchors time cuDNN and torch (`timing`:
//! `do_bench`'s procedure, 25 ms of warm-up and 200 ms of runs, the L2
//! flushed before each, median).
//! `TLX_BENCH_ONLY=128` runs the head dimension 128 shapes only, `TLX_BENCH_ONLY="128 true 512"`
//! one shape (head dim, causal, sequence length: a prefix of that), and
//! `"128 true 512, 64 false"` several; with it set, the examples' full
//! checks (most of a minute) are skipped.

// Each example brings its own copy of `examples/common`, as it does when built alone.
#![allow(clippy::duplicate_mod)]

mod timing;

#[path = "../examples/hopper_fa_bwd.rs"]
#[allow(dead_code)]
mod hopper_fa_bwd;

use half::bf16;
use hopper_fa_bwd::forward as hopper_fa_fwd;
use hopper_fa_bwd::forward::common;
use timing::median_ms;
use tlx::ops::{Attention, AttentionGrads, AttentionSaved, AttentionWorkspace};
use tlx::prelude::*;

/// What one shape measured: forward and backward TFLOP/s (the backward
/// counted as 2.5 forwards, FA's convention: five products to two; none at
/// head dim 256, which the backward does not take), and the forward's
/// largest relative error on the sampled rows.
struct Measured {
    forward: f64,
    backward: Option<f64>,
    error: f64,
}

/// Times one shape's forward and backward and checks the forward's output
/// on sampled rows.
fn run_shape(dev: &Device, shape: &Attention) -> Result<Measured, Box<dyn std::error::Error>> {
    let mut rng = common::Rng::fresh("attention bench");
    let (q_len, kv_len) = (shape.q_len(), shape.kv_len());
    let mut random =
        |n: usize| -> Vec<bf16> { rng.normal_vec(n).into_iter().map(bf16::from_f32).collect() };
    let (q, k, v, d_o) = (random(q_len), random(kv_len), random(kv_len), random(q_len));
    let up = |t: &[bf16]| dev.upload(t);
    let (q_dev, k_dev, v_dev, do_dev) = (up(&q)?, up(&k)?, up(&v)?, up(&d_o)?);
    let o = dev.upload(&vec![bf16::NAN; q_len])?;
    let lse = dev.upload(&vec![f32::NAN; shape.rows()])?;
    let forward = || tlx::ops::attention(dev, &q_dev, &k_dev, &v_dev, &o, Some(&lse), shape);
    forward()?;
    let got = o.download()?;
    let d = shape.head_dim;
    let wide = |t: &[bf16]| common::attention::widen(t, bf16::to_f32);
    let (q, k, v) = (wide(&q), wide(&k), wide(&v));
    let mut worst: f64 = 0.0;
    let last = (shape.batch - 1, shape.heads - 1);
    for (b, h) in [(0, 0), last] {
        for i in [0, 1, shape.seq_q / 2, shape.seq_q - 1] {
            let (want, _) = common::attention::reference_row((&q, &k, &v), shape, (b, h, i));
            let at = ((b * shape.heads + h) * shape.seq_q + i) * d;
            let row: Vec<f32> = got[at..at + d].iter().map(|x| x.to_f32()).collect();
            worst = worst.max(common::attention::output_error(&row, &want, d));
        }
    }
    let forward_ms = median_ms(dev, forward)?;
    let measured = |backward| Measured {
        forward: shape.flops() / forward_ms / 1e9,
        backward,
        error: worst,
    };
    if shape.head_dim == 256 {
        return Ok(measured(None));
    }
    let (dq, dk, dv) = (
        dev.upload(&vec![bf16::NAN; q_len])?,
        dev.upload(&vec![bf16::NAN; kv_len])?,
        dev.upload(&vec![bf16::NAN; kv_len])?,
    );
    let saved = AttentionSaved {
        q: &q_dev,
        k: &k_dev,
        v: &v_dev,
        o: &o,
        lse: &lse,
        d_o: &do_dev,
    };
    let grads = AttentionGrads {
        dq: &dq,
        dk: &dk,
        dv: &dv,
    };
    let workspace = AttentionWorkspace::new(dev, shape)?;
    let backward_ms = median_ms(dev, || {
        tlx::ops::attention_backward(dev, &saved, &grads, &workspace, shape)
    })?;
    Ok(measured(Some(2.5 * shape.flops() / backward_ms / 1e9)))
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
    let selected: Vec<&str> = only.split(',').map(str::trim).collect();
    // Both passes checked in full against the f64 reference on the
    // examples' problems first (a full check at 16k tokens would take hours
    // on the CPU); the timed shapes check the forward on sampled rows.
    // A run of selected shapes (a comparison between builds) skips the
    // full check: it takes most of a minute.
    if only.is_empty() {
        hopper_fa_fwd::run(&dev)?;
        hopper_fa_bwd::run(&dev)?;
    } else {
        println!("TLX_BENCH_ONLY is set: the examples' full checks are skipped");
    }
    let mut rows = Vec::new();
    for (head_dim, heads) in [(128, 16), (64, 32), (256, 8)] {
        for causal in [false, true] {
            for seq in [512, 1024, 2048, 4096, 8192, 16384] {
                let name = format!("{head_dim} {causal} {seq}");
                if !selected.iter().any(|prefix| name.starts_with(prefix)) {
                    continue;
                }
                let shape = Attention::new(16384 / seq, heads, seq, head_dim).causal(causal);
                let m = run_shape(&dev, &shape)?;
                println!(
                    "attn d{head_dim} causal {causal} S {seq}: fwd {:.1} bwd {} TFLOP/s (fwd max rel error {:.1e})",
                    m.forward,
                    backward_text(m.backward, 1),
                    m.error
                );
                rows.push((head_dim, causal, seq, m));
            }
        }
    }
    println!();
    println!("| head dim | causal | seq | tlx fwd TFLOP/s | tlx bwd TFLOP/s | fwd max rel error |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (d, causal, seq, m) in rows {
        println!(
            "| {d} | {causal} | {seq} | {:.0} | {} | {:.1e} |",
            m.forward,
            backward_text(m.backward, 0),
            m.error
        );
    }
    Ok(())
}

/// A backward speed with `digits` decimals, or `-` where there is none.
fn backward_text(backward: Option<f64>, digits: usize) -> String {
    backward.map_or_else(|| "-".to_string(), |b| format!("{b:.digits$}"))
}
