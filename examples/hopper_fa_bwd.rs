//! Flash attention backward on Hopper through `tlx::ops::attention_backward`:
//! `dQ`, `dK` and `dV` from `Q`, `K`, `V`, the forward's output `O` and row
//! log-sum-exp, and the output gradient `dO`, without ever holding the
//! attention matrix, checked against an f64 CPU reference on fresh random
//! inputs.
//!
//! The kernels are `src/ops/attention/backward.rs` (FA2's algorithm with
//! FA3's schedule): a preprocess (`delta = rowsum(dO ∘ O)`, the f32 dQ
//! accumulator zeroed), a warp-specialized, K/V-stationary main kernel (a
//! TMA producer task streaming Q and dO, two consumer warp groups of 64 keys
//! each computing dK, dV and their share of dQ, added into the accumulator
//! by TMA reduce-add stores), and the accumulator's conversion to dQ.
//!
//! `cargo run --release --example hopper_fa_bwd`

// The forward pass, whose output and log-sum-exp the backward takes, and
// with it the shared example helpers.
#[path = "hopper_fa_fwd.rs"]
pub mod forward;

use common::attention::{cases, reference_backward, widen};
use common::{Outcome, Rng, Size};
use forward::{common, Sample};
use tlx::half::{bf16, f16};
use tlx::ops::{Attention, AttentionGrads, AttentionSaved, AttentionWorkspace};
use tlx::prelude::*;

/// Runs `problem` on fresh inputs (the forward kernel giving the output and
/// log-sum-exp) and checks the three gradients against the f64 reference,
/// outputs poisoned first.
pub fn check<T: Sample>(device: &Device, rng: &mut Rng, problem: &Attention) -> Outcome {
    let random = |rng: &mut Rng, n: usize| -> Vec<T> {
        rng.normal_vec(n).into_iter().map(T::from_f32).collect()
    };
    let (q_len, kv_len) = (problem.q_len(), problem.kv_len());
    let (q, k, v, d_o) = (
        random(rng, q_len),
        random(rng, kv_len),
        random(rng, kv_len),
        random(rng, q_len),
    );
    let up = |t: &[T]| device.upload(t);
    let (q_dev, k_dev, v_dev, do_dev) = (up(&q)?, up(&k)?, up(&v)?, up(&d_o)?);
    // The forward kernel's output and log-sum-exp, as in training.
    let o = device.upload(&vec![T::nan(); q_len])?;
    let lse = device.upload(&vec![f32::NAN; problem.rows()])?;
    tlx::ops::attention(device, &q_dev, &k_dev, &v_dev, &o, Some(&lse), problem)?;
    let dq = device.upload(&vec![T::nan(); q_len])?;
    let dk = device.upload(&vec![T::nan(); kv_len])?;
    let dv = device.upload(&vec![T::nan(); kv_len])?;
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
    let workspace = AttentionWorkspace::new(device, problem)?;
    tlx::ops::attention_backward(device, &saved, &grads, &workspace, problem)?;
    let wide = |t: &[T]| widen(t, T::to_f32);
    let (want_dq, want_dk, want_dv) =
        reference_backward((&wide(&q), &wide(&k), &wide(&v), &wide(&d_o)), problem);
    let what = format!("{} {problem}", T::NAME);
    // Relative to each gradient's largest element: P and dS are rounded to
    // 16 bits before their products, as every flash-attention backward does.
    for (name, got, want) in [
        ("dQ", dq, want_dq),
        ("dK", dk, want_dk),
        ("dV", dv, want_dv),
    ] {
        let got: Vec<f32> = got.download()?.iter().map(|&x| x.to_f32()).collect();
        let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let error = common::max_rel_error(&got, &want, scale);
        common::verdict("hopper_fa_bwd", &format!("{what}: {name}"), error, 2e-2)?;
    }
    Ok(())
}

/// Every problem of [`cases`], against the f64 reference.
pub fn run(device: &Device) -> Outcome {
    let mut rng = Rng::fresh("hopper_fa_bwd");
    for case in cases(Size::for_device(device)) {
        if case.f16 {
            check::<f16>(device, &mut rng, &case.problem)?;
        } else {
            check::<bf16>(device, &mut rng, &case.problem)?;
        }
    }
    Ok(())
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_fa_bwd", run)
}
