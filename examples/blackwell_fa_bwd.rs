//! Flash attention backward (non-causal, bf16 in, f32 gradients) for
//! Blackwell with every product in tensor memory, in FA2's order: one
//! program per block of 128 keys of one head walks the query blocks (64
//! rows each) and, per block, computes with `tcgen05` MMAs
//!
//! - `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` (keys as the MMA's 128 rows),
//! - `Pᵀ = exp(Sᵀ · scale − lse)` and `dSᵀ = Pᵀ ⊙ (dPᵀ − delta)` in
//!   registers, one key row per thread, written back into tensor memory as
//!   bf16 (two per column) where the next MMAs read them as their A,
//! - `dV += Pᵀ dO` and `dK += dSᵀ Q` (accumulators in tensor memory across
//!   the query blocks),
//! - `dQ_part = dS K`, an **M = 64** MMA (A is `dSᵀ` from shared memory,
//!   transposed by `local_trans`), added into `dQ` with atomics.
//!
//! `lse` (the forward's natural log-sum-exp per query row) and `delta =
//! rowsum(dO ⊙ O)` come from the host here. One task of one warp group: the
//! point is the data path (TS-form MMAs, 16-bit tensor memory, M = 64), not
//! the overlap a warp-specialized schedule would add.
//!
//! Built for `sm_100a`, never run on Blackwell silicon here. On a GPU that
//! is not a Blackwell one it says so and runs on the CPU interpreter.
//!
//! `cargo run --release --features ops --example blackwell_fa_bwd`

mod common;

use common::attention::{reference_backward, widen};
use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [(BN = 128, BM = 64, D = 64)])]
pub fn blackwell_fa_bwd<const BN: usize, const BM: usize, const D: usize>(
    q_desc: TensorDesc<bf16, BM, D>,
    k_desc: TensorDesc<bf16, BN, D>,
    v_desc: TensorDesc<bf16, BN, D>,
    do_desc: TensorDesc<bf16, BM, D>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    dq: Ptr<f32>,
    dk: Ptr<f32>,
    dv: Ptr<f32>,
    seq: i32,
    sm_scale: f32,
) {
    let k_buf = local_alloc([BN, D], bf16, 1);
    let v_buf = local_alloc([BN, D], bf16, 1);
    let q_buf = local_alloc([BM, D], bf16, 1);
    let do_buf = local_alloc([BM, D], bf16, 1);
    // dSᵀ again in shared memory: dQ's MMA reads it transposed, as its A.
    let ds_buf = local_alloc([BN, BM], bf16, 1);
    let s_t = local_alloc([BN, BM], f32, 1, storage = "tmem");
    let dp_t = local_alloc([BN, BM], f32, 1, storage = "tmem");
    let p_t = local_alloc([BN, BM], bf16, 1, storage = "tmem");
    let ds_t = local_alloc([BN, BM], bf16, 1, storage = "tmem");
    let dv_acc = local_alloc([BN, D], f32, 1, storage = "tmem");
    let dk_acc = local_alloc([BN, D], f32, 1, storage = "tmem");
    let dq_acc = local_alloc([BM, D], f32, 1, storage = "tmem");
    let kv_full = alloc_barriers(1, 1);
    let q_full = alloc_barriers(1, 1);
    // Sᵀ and dPᵀ are in; then dV, dK and dQ's MMAs of the block are done.
    let s_done = alloc_barriers(1, 1);
    let grads_done = alloc_barriers(1, 1);
    let head = program_id(1);
    let key0 = head * seq + program_id(0) * BN;
    let kv = local_view(kv_full, 0);
    barrier_expect_bytes(kv, 2 * BN * D * size_of(dtype_of(k_desc)));
    async_descriptor_load(k_desc, local_view(k_buf, 0), [key0, 0], kv);
    async_descriptor_load(v_desc, local_view(v_buf, 0), [key0, 0], kv);
    barrier_wait(kv, 0);
    let (k_tile, v_tile) = (local_view(k_buf, 0), local_view(v_buf, 0));
    let (q_tile, do_tile) = (local_view(q_buf, 0), local_view(do_buf, 0));
    let d = arange(0, D);
    // Zeros to accumulate onto, so that a sequence of no query block (which
    // the launcher rules out) still leaves them defined.
    local_store(local_view(dv_acc, 0), zeros([BN, D], f32));
    local_store(local_view(dk_acc, 0), zeros([BN, D], f32));
    for i in 0..seq / BM {
        let row0 = head * seq + i * BM;
        let qf = local_view(q_full, 0);
        barrier_expect_bytes(qf, 2 * BM * D * size_of(dtype_of(q_desc)));
        async_descriptor_load(q_desc, q_tile, [row0, 0], qf);
        async_descriptor_load(do_desc, do_tile, [row0, 0], qf);
        barrier_wait(qf, i % 2);
        async_dot(
            k_tile,
            local_trans(q_tile),
            local_view(s_t, 0),
            use_acc = false,
        );
        async_dot(
            v_tile,
            local_trans(do_tile),
            local_view(dp_t, 0),
            use_acc = false,
            mbarriers = [local_view(s_done, 0)],
        );
        barrier_wait(local_view(s_done, 0), i % 2);
        let rows = row0 + arange(0, BM);
        let l = load(lse + rows);
        let dl = load(delta + rows);
        let p = exp(local_load(local_view(s_t, 0)) * sm_scale - l[(None, ..)]);
        let ds = p * (local_load(local_view(dp_t, 0)) - dl[(None, ..)]);
        local_store(local_view(p_t, 0), p.to(bf16));
        local_store(local_view(ds_t, 0), ds.to(bf16));
        local_store(local_view(ds_buf, 0), ds.to(bf16));
        async_dot(
            local_view(p_t, 0),
            do_tile,
            local_view(dv_acc, 0),
            use_acc = true,
        );
        async_dot(
            local_view(ds_t, 0),
            q_tile,
            local_view(dk_acc, 0),
            use_acc = true,
        );
        async_dot(
            local_trans(local_view(ds_buf, 0)),
            k_tile,
            local_view(dq_acc, 0),
            use_acc = false,
            mbarriers = [local_view(grads_done, 0)],
        );
        barrier_wait(local_view(grads_done, 0), i % 2);
        let part = local_load(local_view(dq_acc, 0)) * sm_scale;
        atomic_add(dq + rows[(.., None)] * D + d[(None, ..)], part);
    }
    let keys = key0 + arange(0, BN);
    let at = keys[(.., None)] * D + d[(None, ..)];
    store(dk + at, local_load(local_view(dk_acc, 0)) * sm_scale);
    store(dv + at, local_load(local_view(dv_acc, 0)));
}

/// The gradients `(dq, dk, dv)` of `O = softmax(Q Kᵀ · sm_scale) V` per
/// head, for `heads` heads of `seq` rows of 64 (`seq` a multiple of 128),
/// given the forward's `lse` and `delta = rowsum(dO ⊙ O)` per query row;
/// `dq` must hold zeros (the programs add into it).
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    device: &Device,
    (q, k, v, d_o): (&Buffer<bf16>, &Buffer<bf16>, &Buffer<bf16>, &Buffer<bf16>),
    (lse, delta): (&Buffer<f32>, &Buffer<f32>),
    (dq, dk, dv): (&Buffer<f32>, &Buffer<f32>, &Buffer<f32>),
    heads: usize,
    seq: usize,
    sm_scale: f32,
) -> Result<(), tlx::Error> {
    let rows = heads * seq;
    let q_desc = TensorDesc::matrix(q, rows, 64)?;
    let k_desc = TensorDesc::matrix(k, rows, 64)?;
    let v_desc = TensorDesc::matrix(v, rows, 64)?;
    let do_desc = TensorDesc::matrix(d_o, rows, 64)?;
    let grid = ((seq / 128) as u32, heads as u32);
    blackwell_fa_bwd::<128, 64, 64>::launch(
        device, grid, &q_desc, &k_desc, &v_desc, &do_desc, lse, delta, dq, dk, dv, seq as i32,
        sm_scale,
    )
}

/// Checks the three gradients against an f64 CPU reference on fresh random
/// inputs; `lse` and `delta` from an f64 forward pass.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_fa_bwd");
    let (heads, seq) = match Size::for_device(&device) {
        Size::Gpu => (16, 2048),
        Size::Interpreter => (2, 256),
    };
    let d = 64;
    let mut rng = common::Rng::fresh("blackwell_fa_bwd");
    let mut random = |len: usize| -> Vec<bf16> {
        rng.uniform_vec(len, -1.0, 1.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect()
    };
    let n = heads * seq * d;
    let (q, k, v, d_o) = (random(n), random(n), random(n), random(n));
    let sm_scale = 1.0 / (d as f32).sqrt();
    let wide = |x: &[bf16]| widen(x, |e| e.to_f32());
    let (qw, kw, vw, dow) = (wide(&q), wide(&k), wide(&v), wide(&d_o));
    // The forward in f64: each query row's lse and rowsum(dO ⊙ O).
    let (mut lse, mut delta) = (vec![0f32; heads * seq], vec![0f32; heads * seq]);
    for h in 0..heads {
        for i in 0..seq {
            let qi = &qw[(h * seq + i) * d..][..d];
            let scores: Vec<f64> = (0..seq)
                .map(|j| {
                    let kj = &kw[(h * seq + j) * d..][..d];
                    qi.iter().zip(kj).map(|(x, y)| x * y).sum::<f64>() * f64::from(sm_scale)
                })
                .collect();
            let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = scores.iter().map(|s| (s - top).exp()).sum();
            let row_delta: f64 = (0..d)
                .map(|c| {
                    let o: f64 = (0..seq)
                        .map(|j| (scores[j] - top).exp() / total * vw[(h * seq + j) * d + c])
                        .sum();
                    o * dow[(h * seq + i) * d + c]
                })
                .sum();
            lse[h * seq + i] = (top + total.ln()) as f32;
            delta[h * seq + i] = row_delta as f32;
        }
    }
    let up = |x: &[bf16]| device.upload(x);
    let inputs = (&up(&q)?, &up(&k)?, &up(&v)?, &up(&d_o)?);
    let stats = (&device.upload(&lse)?, &device.upload(&delta)?);
    let dq = device.upload(&vec![0f32; n])?;
    let (dk, dv) = (
        device.upload(&vec![f32::NAN; n])?,
        device.upload(&vec![f32::NAN; n])?,
    );
    attention_backward(
        &device,
        inputs,
        stats,
        (&dq, &dk, &dv),
        heads,
        seq,
        sm_scale,
    )?;
    let problem = tlx::ops::Attention {
        batch: 1,
        heads,
        kv_heads: heads,
        seq_q: seq,
        seq_kv: seq,
        head_dim: d,
        causal: false,
        scale: sm_scale,
    };
    let want = reference_backward((&qw, &kw, &vw, &dow), &problem);
    // P and dS are rounded to bf16 before their products: errors of about
    // 2^-8 of the gradients' typical size, which the floor stands for.
    for (name, got, want) in [
        ("dq", dq.download()?, &want.0),
        ("dk", dk.download()?, &want.1),
        ("dv", dv.download()?, &want.2),
    ] {
        let typical = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt();
        let what = format!("{name}, {heads} heads x {seq} rows, d 64:");
        common::verdict(
            "blackwell_fa_bwd",
            &what,
            common::max_rel_error(&got, want, typical),
            1.5e-2,
        )?;
    }
    Ok(())
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_fa_bwd", run)
}
