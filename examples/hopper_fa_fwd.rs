//! Flash attention forward on Hopper in the TLX style: `O = softmax(Q Kᵀ ·
//! scale) V` per (batch, head), with the log-sum-exp of each row kept for
//! the backward pass.
//!
//! One program takes 128 query rows of one head. Its default task (one warp
//! group, few registers) is the producer: it loads the two 64-row halves of
//! Q once, then K and V tiles through a ring of `STAGES` shared buffers with
//! TMA, each ring guarded by `full`/`empty` mbarriers. Two consumer warp
//! groups (a replicated task) each own one half of Q: `S = Q Kᵀ` on the
//! tensor cores, the online softmax in f32 with `exp2` of scores pre-scaled
//! by `scale · log2(e)`, then `O += P V` with `P` fed to wgmma straight from
//! registers. Tensors are `[batch, heads, seq, head_dim]`; descriptors with
//! blocks of `[1, 1, rows, head_dim]` load one head's rows, so TMA zero-fills
//! past the end of a sequence and clips the output store there, and any
//! sequence lengths work. K and V may have fewer heads than Q (GQA/MQA):
//! query head `h` reads key/value head `h / (heads / kv_heads)`. Causal
//! attention masks key `j > i` for query `i` (the top-left convention of
//! `torch`'s `is_causal`).
//!
//! `cargo run --release --example hopper_fa_fwd`

pub mod common;

use common::attention::{head_desc, reference_row, Shape};
use common::{Outcome, Rng, Size};
use tlx::half::bf16;
use tlx::prelude::*;

#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
    (D = 64, BN = 128, STAGES = 2, CAUSAL = false),
    (D = 64, BN = 128, STAGES = 2, CAUSAL = true),
    (D = 128, BN = 128, STAGES = 2, CAUSAL = false),
    (D = 128, BN = 128, STAGES = 2, CAUSAL = true),
])]
pub fn hopper_fa_fwd<const D: usize, const BN: usize, const STAGES: usize, const CAUSAL: bool>(
    q_desc: TensorDesc<bf16, 1, 1, 64, D>,
    k_desc: TensorDesc<bf16, 1, 1, BN, D>,
    v_desc: TensorDesc<bf16, 1, 1, BN, D>,
    o_desc: TensorDesc<bf16, 1, 1, 64, D>,
    lse: Ptr<f32>,
    sm_scale: f32,
    heads: i32,
    kv_heads: i32,
    seq_q: i32,
    seq_kv: i32,
) {
    let q_bufs = local_alloc([64, D], bf16, 2);
    let k_bufs = local_alloc([BN, D], bf16, STAGES);
    let v_bufs = local_alloc([BN, D], bf16, STAGES);
    let o_bufs = local_alloc([64, D], bf16, 2);
    let q_full = alloc_barriers(1, 1);
    let k_full = alloc_barriers(STAGES, 1);
    let v_full = alloc_barriers(STAGES, 1);
    // Both consumers read every K and V tile.
    let k_empty = alloc_barriers(STAGES, 2);
    let v_empty = alloc_barriers(STAGES, 2);
    let off_m = program_id(0) * 128;
    let batch_head = program_id(1);
    let batch = batch_head / heads;
    let head = batch_head % heads;
    let kv_head = head / (heads / kv_heads);
    // The keys any of this program's rows sees.
    let kv_end = if CAUSAL {
        minimum(seq_kv, off_m + 128)
    } else {
        seq_kv
    };
    let kv_tiles = cdiv(kv_end, BN);
    async_tasks! {
        task(default, num_regs = 40) {
            let q_bar = local_view(q_full, 0);
            barrier_expect_bytes(q_bar, 2 * 64 * D * size_of(dtype_of(q_desc)));
            async_descriptor_load(q_desc, local_view(q_bufs, 0), [batch, head, off_m, 0], q_bar);
            async_descriptor_load(q_desc, local_view(q_bufs, 1), [batch, head, off_m + 64, 0], q_bar);
            for j in 0..kv_tiles {
                let slot = j % STAGES;
                // The first pass over the ring finds every stage free.
                let free = (j / STAGES) % 2 ^ 1;
                let tile_bytes = BN * D * size_of(dtype_of(k_desc));
                barrier_wait(local_view(k_empty, slot), free);
                let k_bar = local_view(k_full, slot);
                barrier_expect_bytes(k_bar, tile_bytes);
                async_descriptor_load(k_desc, local_view(k_bufs, slot), [batch, kv_head, j * BN, 0], k_bar);
                barrier_wait(local_view(v_empty, slot), free);
                let v_bar = local_view(v_full, slot);
                barrier_expect_bytes(v_bar, tile_bytes);
                async_descriptor_load(v_desc, local_view(v_bufs, slot), [batch, kv_head, j * BN, 0], v_bar);
            }
        }
        task(num_warps = 4, num_regs = 232, replicate = 2) {
            let half = async_task_replica_id();
            let row0 = off_m + half * 64;
            let rows = row0 + arange(0, 64);
            let q_buf = local_view(q_bufs, half);
            // Scores in log2 units, so that the softmax is `exp2`.
            let qk_scale = sm_scale * 1.4426950408889634;
            let mut m_i = full([64], f32::NEG_INFINITY, f32);
            let mut l_i = zeros([64], f32);
            let mut acc = zeros([64, D], f32);
            barrier_wait(local_view(q_full, 0), 0);
            for j in 0..kv_tiles {
                let slot = j % STAGES;
                let phase = (j / STAGES) % 2;
                barrier_wait(local_view(k_full, slot), phase);
                let k_tile = local_trans(local_view(k_bufs, slot));
                let s = async_dot(q_buf, k_tile, zeros([64, BN], f32));
                let s = async_dot_wait(0, s);
                barrier_arrive(local_view(k_empty, slot));
                let cols = j * BN + arange(0, BN);
                let mut visible = cols[(None, ..)] < seq_kv;
                if CAUSAL {
                    visible = visible & (cols[(None, ..)] <= rows[(.., None)]);
                }
                let s = select(visible, s * qk_scale, f32::NEG_INFINITY);
                // Every row sees key 0 in the first tile, so `m_new` is finite.
                let m_new = maximum(m_i, max(s, axis = 1));
                let p = exp2(s - m_new[(.., None)]);
                let alpha = exp2(m_i - m_new);
                l_i = l_i * alpha + sum(p, axis = 1);
                acc = acc * alpha[(.., None)];
                m_i = m_new;
                barrier_wait(local_view(v_full, slot), phase);
                acc = async_dot(p.to(bf16), local_view(v_bufs, slot), acc);
                acc = async_dot_wait(0, acc);
                barrier_arrive(local_view(v_empty, slot));
            }
            let out = local_view(o_bufs, half);
            local_store(out, (acc / l_i[(.., None)]).to(bf16));
            async_descriptor_store(o_desc, out, [batch, head, row0, 0]);
            // The natural log-sum-exp of each row's scaled scores.
            let row_lse = (m_i + log2(l_i)) * 0.6931471805599453;
            store(lse + (batch_head * seq_q + rows), row_lse, mask = rows < seq_q);
            async_descriptor_store_wait(0);
        }
    }
}

/// `o = attention(q, k, v)` and the rows' log-sum-exp on `device`.
pub fn attention(
    device: &Device,
    (q, k, v): (&Buffer<bf16>, &Buffer<bf16>, &Buffer<bf16>),
    (o, lse): (&Buffer<bf16>, &Buffer<f32>),
    shape: Shape,
    sm_scale: f32,
) -> Result<(), tlx::Error> {
    let Shape {
        batch,
        heads,
        kv_heads,
        seq_q,
        seq_kv,
        head_dim,
        causal,
    } = shape;
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(tlx::Error::InvalidConfig {
            kernel: "hopper_fa_fwd",
            reason: format!(
                "{heads} query heads do not split evenly over {kv_heads} key/value heads"
            ),
        });
    }
    let q_desc = head_desc(q, batch, heads, seq_q, head_dim)?;
    let k_desc = head_desc(k, batch, kv_heads, seq_kv, head_dim)?;
    let v_desc = head_desc(v, batch, kv_heads, seq_kv, head_dim)?;
    let o_desc = head_desc(o, batch, heads, seq_q, head_dim)?;
    let grid = (seq_q.div_ceil(128) as u32, (batch * heads) as u32);
    let args = (
        sm_scale,
        heads as i32,
        kv_heads as i32,
        seq_q as i32,
        seq_kv as i32,
    );
    macro_rules! launch {
        ($d:literal, $causal:literal) => {
            hopper_fa_fwd::<$d, 128, 2, $causal>::launch(
                device, grid, &q_desc, &k_desc, &v_desc, &o_desc, lse, args.0, args.1, args.2,
                args.3, args.4,
            )?
        };
    }
    match (head_dim, causal) {
        (64, false) => launch!(64, false),
        (64, true) => launch!(64, true),
        (128, false) => launch!(128, false),
        (128, true) => launch!(128, true),
        _ => {
            return Err(tlx::Error::InvalidConfig {
                kernel: "hopper_fa_fwd",
                reason: format!("head_dim {head_dim}: compiled for 64 and 128"),
            })
        }
    }
    Ok(())
}

/// Runs `shape` on fresh inputs and checks output and log-sum-exp against
/// the f64 reference, outputs poisoned first.
pub fn check(device: &Device, rng: &mut Rng, shape: Shape) -> Outcome {
    let random = |rng: &mut Rng, n: usize| -> Vec<bf16> {
        rng.normal_vec(n).into_iter().map(bf16::from_f32).collect()
    };
    let (q, k, v) = (
        random(rng, shape.q_len()),
        random(rng, shape.kv_len()),
        random(rng, shape.kv_len()),
    );
    let sm_scale = 1.0 / (shape.head_dim as f32).sqrt();
    let (dq, dk, dv) = (device.upload(&q)?, device.upload(&k)?, device.upload(&v)?);
    let o = device.upload(&vec![bf16::NAN; shape.q_len()])?;
    let rows = shape.batch * shape.heads * shape.seq_q;
    let lse = device.upload(&vec![f32::NAN; rows])?;
    attention(device, (&dq, &dk, &dv), (&o, &lse), shape, sm_scale)?;
    let (mut want_o, mut want_lse) = (Vec::new(), Vec::new());
    for b in 0..shape.batch {
        for h in 0..shape.heads {
            for i in 0..shape.seq_q {
                let (row, lse) = reference_row((&q, &k, &v), shape, sm_scale as f64, (b, h, i));
                want_o.extend(row);
                want_lse.push(lse);
            }
        }
    }
    let got_o: Vec<f32> = o.download()?.iter().map(|x| x.to_f32()).collect();
    let got_lse = lse.download()?;
    let what = format!(
        "{}x{}/{}x{}x{} over {} keys{}",
        shape.batch,
        shape.heads,
        shape.kv_heads,
        shape.seq_q,
        shape.head_dim,
        shape.seq_kv,
        if shape.causal { ", causal" } else { "" }
    );
    // bf16 output and P rounded to bf16 before `P V`: about 2^-8 relative,
    // against outputs of order 0.1 (floor 0.1 keeps near-zero ones fair).
    let o_error = common::max_rel_error(&got_o, &want_o, 0.1);
    common::verdict("hopper_fa_fwd", &format!("{what}: O"), o_error, 3e-2)?;
    let lse_error = common::max_rel_error(&got_lse, &want_lse, 1.0);
    common::verdict("hopper_fa_fwd", &format!("{what}: LSE"), lse_error, 1e-3)
}

/// Head dims 64 and 128, causal and not, GQA, and lengths that are not
/// multiples of the tiles (and differ between queries and keys).
pub fn run(device: &Device) -> Outcome {
    let mut rng = Rng::fresh("hopper_fa_fwd");
    let shapes: &[(usize, usize, usize, usize, usize, usize, bool)] = match Size::for_device(device)
    {
        Size::Gpu => &[
            (2, 8, 2, 1000, 1000, 128, false),
            (2, 8, 2, 1000, 1000, 128, true),
            (1, 4, 4, 777, 1500, 64, false),
            (1, 4, 1, 1500, 777, 64, true),
            (1, 2, 2, 4096, 4096, 128, true),
        ],
        Size::Interpreter => &[
            (1, 2, 1, 200, 150, 64, false),
            (1, 2, 2, 190, 190, 128, true),
        ],
    };
    for &(batch, heads, kv_heads, seq_q, seq_kv, head_dim, causal) in shapes {
        let shape = Shape {
            batch,
            heads,
            kv_heads,
            seq_q,
            seq_kv,
            head_dim,
            causal,
        };
        check(device, &mut rng, shape)?;
    }
    Ok(())
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_fa_fwd", run)
}
