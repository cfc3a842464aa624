//! Flash attention forward (non-causal, bf16 in, f32 out) for Blackwell in
//! the style of TLX's Blackwell attention tutorial: both products
//! accumulate in tensor memory, so the softmax warp group reads a whole row
//! of scores per thread and never holds the output in registers between
//! blocks. Per program, one 128-row block of queries of one head; three tasks:
//!
//! - a one-warp **producer** loads Q once and K, V blocks into a ring (TMA);
//! - a one-warp **MMA** task issues `S_j = Q K_j^T` into one of two
//!   tensor-memory score buffers, one block ahead of the softmax, and
//!   `O += P_j V_j` into the tensor-memory output once the softmax wrote
//!   `P_j`; each PV's completion releases the K/V stage and tells the softmax;
//! - the **softmax** (default task, one warp group) runs the online softmax
//!   of `S_j` (`exp2` of scores in log2 units), rescales `O` in tensor memory
//!   once the previous PV is done, writes `P_j` (bf16) into tensor memory,
//!   two values per column, where the PV MMA reads it as its A (FA4's way:
//!   P never goes through shared memory), and at the end divides `O` by the
//!   row sums.
//!
//! Built for `sm_100a`. On a GPU that is not a Blackwell one it says so
//! and runs on the CPU interpreter, as it does with no GPU.
//!
//! `cargo run --release --example blackwell_fa_fwd`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [
    (BM = 128, BN = 64, D = 64, STAGES = 2),
])]
pub fn blackwell_fa_fwd<const BM: usize, const BN: usize, const D: usize, const STAGES: usize>(
    q_desc: TensorDesc<bf16, BM, D>,
    k_desc: TensorDesc<bf16, BN, D>,
    v_desc: TensorDesc<bf16, BN, D>,
    o: Ptr<f32>,
    seq: i32,
    sm_scale: f32,
) {
    let q_buf = local_alloc([BM, D], bf16, 1);
    let k_bufs = local_alloc([BN, D], bf16, STAGES);
    let v_bufs = local_alloc([BN, D], bf16, STAGES);
    let s_tmem = local_alloc([BM, BN], f32, 2, storage = "tmem");
    // P in tensor memory, two bf16 values per column (FA4's way): the PV
    // MMA reads its A from there.
    let p_tmem = local_alloc([BM, BN], bf16, 2, storage = "tmem");
    let o_tmem = local_alloc([BM, D], f32, 1, storage = "tmem");
    let q_full = alloc_barriers(1, 1);
    let kv_full = alloc_barriers(STAGES, 1);
    let kv_empty = alloc_barriers(STAGES, 1);
    // S_j is in score buffer j % 2.
    let s_full = alloc_barriers(2, 1);
    // The softmax wrote P_j into buffer j % 2 (and rescaled O).
    let p_full = alloc_barriers(2, 1);
    // O += P_j V_j completed.
    let o_done = alloc_barriers(1, 1);
    let head = program_id(1);
    let row0 = head * seq + program_id(0) * BM;
    let kv0 = head * seq;
    let blocks = cdiv(seq, BN);
    async_tasks! {
        // The softmax, the correction of O, and the epilogue.
        task(default) {
            let qk_scale = sm_scale * 1.4426950408889634;
            let mut m_i = full([BM], f32::NEG_INFINITY, f32);
            let mut l_i = full([BM], 0.0, f32);
            for j in 0..blocks {
                let b = j % 2;
                barrier_wait(local_view(s_full, b), (j / 2) % 2);
                let s = local_load(local_view(s_tmem, b));
                let m_new = maximum(m_i, max(s, axis = 1) * qk_scale);
                let p = exp2(s * qk_scale - m_new[(.., None)]);
                let alpha = exp2(m_i - m_new);
                l_i = l_i * alpha + sum(p, axis = 1);
                m_i = m_new;
                if j > 0 {
                    // P_{j-1} V_{j-1} is in O (and P_{j-2}'s buffer is free).
                    barrier_wait(local_view(o_done, 0), (j - 1) % 2);
                    let acc = local_load(local_view(o_tmem, 0));
                    local_store(local_view(o_tmem, 0), acc * alpha[(.., None)]);
                }
                local_store(local_view(p_tmem, b), p.to(bf16));
                barrier_arrive(local_view(p_full, b));
            }
            barrier_wait(local_view(o_done, 0), (blocks - 1) % 2);
            let out = local_load(local_view(o_tmem, 0)) / l_i[(.., None)];
            let rows = row0 + arange(0, BM);
            store(o + rows[(.., None)] * D + arange(0, D)[(None, ..)], out);
        }
        // The producer.
        task(num_warps = 1) {
            barrier_expect_bytes(local_view(q_full, 0), BM * D * size_of(dtype_of(q_desc)));
            async_descriptor_load(q_desc, local_view(q_buf, 0), [row0, 0], local_view(q_full, 0));
            for j in 0..blocks {
                let stage = j % STAGES;
                barrier_wait(local_view(kv_empty, stage), (j / STAGES) % 2 ^ 1);
                let bar = local_view(kv_full, stage);
                barrier_expect_bytes(bar, 2 * BN * D * size_of(dtype_of(k_desc)));
                async_descriptor_load(k_desc, local_view(k_bufs, stage), [kv0 + j * BN, 0], bar);
                async_descriptor_load(v_desc, local_view(v_bufs, stage), [kv0 + j * BN, 0], bar);
            }
        }
        // The MMA issuer: S one block ahead of PV.
        task(num_warps = 1) {
            barrier_wait(local_view(q_full, 0), 0);
            barrier_wait(local_view(kv_full, 0), 0);
            async_dot(local_view(q_buf, 0), local_trans(local_view(k_bufs, 0)), local_view(s_tmem, 0),
                      use_acc = false, mbarriers = [local_view(s_full, 0)]);
            for j in 0..blocks {
                let stage = j % STAGES;
                let b = j % 2;
                if j + 1 < blocks {
                    let next = (j + 1) % STAGES;
                    barrier_wait(local_view(kv_full, next), ((j + 1) / STAGES) % 2);
                    async_dot(local_view(q_buf, 0), local_trans(local_view(k_bufs, next)),
                              local_view(s_tmem, (j + 1) % 2), use_acc = false,
                              mbarriers = [local_view(s_full, (j + 1) % 2)]);
                }
                barrier_wait(local_view(p_full, b), (j / 2) % 2);
                async_dot(local_view(p_tmem, b), local_view(v_bufs, stage), local_view(o_tmem, 0),
                          use_acc = j > 0,
                          mbarriers = [local_view(kv_empty, stage), local_view(o_done, 0)]);
            }
        }
    }
}

/// `O = softmax(Q K^T * sm_scale) V` per head, for `heads` heads of `seq`
/// rows of `D = 64` (rows of all heads one after another), `seq` a multiple of 128.
pub fn attention(
    device: &Device,
    (q, k, v, o): (&Buffer<bf16>, &Buffer<bf16>, &Buffer<bf16>, &Buffer<f32>),
    heads: usize,
    seq: usize,
    sm_scale: f32,
) -> Result<(), tlx::Error> {
    let rows = heads * seq;
    let q_desc = TensorDesc::matrix(q, rows, 64)?;
    let k_desc = TensorDesc::matrix(k, rows, 64)?;
    let v_desc = TensorDesc::matrix(v, rows, 64)?;
    let grid = ((seq / 128) as u32, heads as u32);
    blackwell_fa_fwd::<128, 64, 64, 2>::launch(
        device, grid, &q_desc, &k_desc, &v_desc, o, seq as i32, sm_scale,
    )
}

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_fa_fwd");
    let (heads, seq) = match Size::for_device(&device) {
        Size::Gpu => (16, 2048),
        Size::Interpreter => (2, 384),
    };
    let d = 64;
    let mut rng = common::Rng::fresh("blackwell_fa_fwd");
    let mut random = |len: usize| -> Vec<bf16> {
        rng.uniform_vec(len, -1.0, 1.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect()
    };
    let (q, k, v) = (
        random(heads * seq * d),
        random(heads * seq * d),
        random(heads * seq * d),
    );
    let sm_scale = 1.0 / (d as f32).sqrt();
    let bufs = (device.upload(&q)?, device.upload(&k)?, device.upload(&v)?);
    let o = device.upload(&vec![f32::NAN; heads * seq * d])?;
    attention(
        &device,
        (&bufs.0, &bufs.1, &bufs.2, &o),
        heads,
        seq,
        sm_scale,
    )?;
    let got = o.download()?;
    let at = |x: &[bf16], row: usize, c: usize| x[row * d + c].to_f64();
    let mut want = vec![0f64; heads * seq * d];
    for h in 0..heads {
        for i in 0..seq {
            let qi = h * seq + i;
            let scores: Vec<f64> = (0..seq)
                .map(|j| {
                    (0..d)
                        .map(|c| at(&q, qi, c) * at(&k, h * seq + j, c))
                        .sum::<f64>()
                        * sm_scale as f64
                })
                .collect();
            let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
            let total: f64 = weights.iter().sum();
            for c in 0..d {
                let value: f64 = (0..seq).map(|j| weights[j] * at(&v, h * seq + j, c)).sum();
                want[qi * d + c] = value / total;
            }
        }
    }
    let what = format!("{heads} heads x {seq} rows, d 64:");
    // P is rounded to bf16 before its product with V, as in FA3 and TLX.
    common::verdict(
        "blackwell_fa_fwd",
        &what,
        common::max_rel_error(&got, &want, 0.05),
        2e-2,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_fa_fwd", run)
}
