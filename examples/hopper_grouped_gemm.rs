//! Grouped GEMM for a mixture-of-experts layer with `tlx::ops::grouped_gemm`:
//! the tokens routed to each expert sorted into one `[m_total, k]` tensor,
//! each expert's weights `[k, n]`, and the group offsets on the device (the
//! host never reads them). Group sizes are skewed as a router's are (a few
//! busy experts, empty ones, ones smaller than a tile); checked against an
//! f64 reference.
//!
//! `cargo run --release --features ops-grouped --example hopper_grouped_gemm`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

/// Tokens per expert: Zipf-like (expert `e` gets about `1 / (e + 1)` of the
/// busiest's share), every fourth expert empty.
fn group_sizes(rng: &mut Rng, experts: usize, busiest: usize) -> Vec<usize> {
    (0..experts)
        .map(|e| {
            if e % 4 == 3 {
                return 0;
            }
            let share = busiest as f32 / (e + 1) as f32;
            (share * rng.uniform(0.5, 1.0)) as usize
        })
        .collect()
}

/// Checks the op against an f64 reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let (experts, busiest, n, k) = match Size::for_device(device) {
        Size::Gpu => (16, 2000, 1024, 512),
        Size::Interpreter => (6, 60, 40, 64),
    };
    let mut rng = Rng::fresh("hopper_grouped_gemm");
    let sizes = group_sizes(&mut rng, experts, busiest);
    let m_total: usize = sizes.iter().sum();
    let mut offsets = vec![0i32];
    for s in &sizes {
        offsets.push(offsets[offsets.len() - 1] + *s as i32);
    }
    let to_bf16 = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let a = to_bf16(rng.uniform_vec(m_total * k, -1.0, 1.0));
    let b = to_bf16(rng.uniform_vec(experts * k * n, -1.0, 1.0));
    let (da, db) = (device.upload(&a)?, device.upload(&b)?);
    let dc = device.upload(&vec![bf16::NAN; m_total * n])?;
    let doff = device.upload(&offsets)?;
    tlx::ops::grouped_gemm(device, &da, &db, &dc, &doff, (m_total, n, k, experts))?;
    let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
    let mut want = vec![0.0f64; m_total * n];
    for e in 0..experts {
        let rows = offsets[e] as usize..offsets[e + 1] as usize;
        let part = common::matmul_f64(
            (rows.len(), n, k),
            |i, p| f64::from(a[(rows.start + i) * k + p].to_f32()),
            |p, j| f64::from(b[(e * k + p) * n + j].to_f32()),
        );
        want[rows.start * n..rows.end * n].copy_from_slice(&part);
    }
    // bf16 output: half an ulp is up to 2^-8 of the value; floor 1.0 for sums near zero.
    common::verdict(
        "hopper_grouped_gemm",
        &format!("{experts} experts, sizes {sizes:?}, n {n}, k {k}:"),
        common::max_rel_error(&got, &want, 1.0),
        8e-3,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_grouped_gemm", run)
}
