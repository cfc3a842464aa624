//! Flash attention forward on Hopper in the TLX style (FA3's schedule),
//! through `tlx::ops::attention`: `O = softmax(Q Kᵀ · scale) V` per (batch,
//! head), with the log-sum-exp of each row kept for the backward pass,
//! checked against an f64 CPU reference on fresh random inputs.
//!
//! The kernel is `src/ops/attention/forward.rs`: a persistent,
//! warp-specialized program (a TMA producer task, two consumer warp groups
//! in ping-pong over named barriers, `async_dot` for `Q Kᵀ` and `P V` with
//! one tile's softmax overlapping the other's products, the output through
//! shared memory and a TMA store).
//!
//! Tensors are `[batch, heads, seq, head_dim]`; K and V may have fewer heads
//! than Q (GQA/MQA); any sequence lengths; causal or not; bf16 and f16, head
//! dims 64, 128 and 256 (at 256, with 64-key tiles, O leaves through the Q
//! buffers: Q, K and V take 192 KB of shared memory).
//!
//! `cargo run --release --example hopper_fa_fwd`

pub mod common;

use common::attention::{forward_cases, reference_row, widen};
use common::{Outcome, Rng, Size};
use tlx::half::{bf16, f16};
use tlx::ops::{Attention, AttentionElement};
use tlx::prelude::*;

/// What the examples need of an element type beyond the kernels.
pub trait Sample: AttentionElement {
    const NAME: &'static str;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    fn nan() -> Self;
}

macro_rules! sample {
    ($t:ident) => {
        impl Sample for $t {
            const NAME: &'static str = stringify!($t);
            fn from_f32(x: f32) -> Self {
                $t::from_f32(x)
            }
            fn to_f32(self) -> f32 {
                $t::to_f32(self)
            }
            fn nan() -> Self {
                $t::NAN
            }
        }
    };
}

sample!(bf16);
sample!(f16);

/// Runs `problem` on fresh inputs and checks output and log-sum-exp against
/// the f64 reference, outputs poisoned first.
pub fn check<T: Sample>(device: &Device, rng: &mut Rng, problem: &Attention) -> Outcome {
    let random = |rng: &mut Rng, n: usize| -> Vec<T> {
        rng.normal_vec(n).into_iter().map(T::from_f32).collect()
    };
    let (q, k, v) = (
        random(rng, problem.q_len()),
        random(rng, problem.kv_len()),
        random(rng, problem.kv_len()),
    );
    let (q_dev, k_dev, v_dev) = (device.upload(&q)?, device.upload(&k)?, device.upload(&v)?);
    let o = device.upload(&vec![T::nan(); problem.q_len()])?;
    let lse = device.upload(&vec![f32::NAN; problem.rows()])?;
    tlx::ops::attention(device, &q_dev, &k_dev, &v_dev, &o, Some(&lse), problem)?;
    let (mut want_o, mut want_lse) = (Vec::new(), Vec::new());
    let wide = |t: &[T]| widen(t, T::to_f32);
    let (q, k, v) = (wide(&q), wide(&k), wide(&v));
    for b in 0..problem.batch {
        for h in 0..problem.heads {
            for i in 0..problem.seq_q {
                let (row, lse) = reference_row((&q, &k, &v), problem, (b, h, i));
                want_o.extend(row);
                want_lse.push(lse);
            }
        }
    }
    let got_o: Vec<f32> = o.download()?.iter().map(|&x| x.to_f32()).collect();
    let got_lse = lse.download()?;
    let what = format!("{} {problem}", T::NAME);
    let o_error = common::attention::output_error(&got_o, &want_o, problem.head_dim);
    common::verdict("hopper_fa_fwd", &format!("{what}: O"), o_error, 3e-2)?;
    let lse_error = common::max_rel_error(&got_lse, &want_lse, 1.0);
    common::verdict("hopper_fa_fwd", &format!("{what}: LSE"), lse_error, 1e-3)
}

/// Every problem of [`forward_cases`], against the f64 reference.
pub fn run(device: &Device) -> Outcome {
    let mut rng = Rng::fresh("hopper_fa_fwd");
    for case in forward_cases(Size::for_device(device)) {
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
    common::main_with("hopper_fa_fwd", run)
}
