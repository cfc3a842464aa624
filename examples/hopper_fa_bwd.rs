//! Flash attention backward on Hopper: `dQ`, `dK` and `dV` from `Q`, `K`,
//! `V`, the forward's output `O` and row log-sum-exp, and the output
//! gradient `dO`, without ever holding the attention matrix (FA2's
//! algorithm, dQ accumulated across programs by TMA reductions as FA3 does).
//!
//! Three kernels:
//! - `fa_bwd_preprocess`: `delta = rowsum(dO ∘ O)` per query row, and the
//!   f32 dQ accumulator set to zero;
//! - `fa_bwd_main`: one program per 128 keys of one key/value head; its
//!   two consumer warp groups keep 64 keys each (K and V loaded once) and
//!   stream over the query tiles of every query head that reads them
//!   (Q and dO through a TMA ring): `Pᵀ = exp(K Qᵀ · scale − lse)`,
//!   `dV += Pᵀ dO`, `dPᵀ = V dOᵀ`, `dSᵀ = Pᵀ ∘ (dPᵀ − delta)`, `dK += dSᵀ Q`
//!   (`Pᵀ` and `dSᵀ` fed to wgmma from registers), and the query tile's
//!   share of dQ from these keys, `dS K` (`dSᵀ` through shared memory, read
//!   M-major), added into the accumulator by a TMA store with
//!   `store_reduce = "add"`; at head dim 128 the consumers split dQ's
//!   columns (FA3's way: both `dSᵀ` meet in shared memory), so each step
//!   sends one reduction, not two;
//! - `fa_bwd_dq_convert`: the accumulator in the element type.
//!
//! The main kernel is warp-specialized like the forward (a TMA producer
//! task, two consumer warp groups), takes the same `[batch, heads, seq,
//! head_dim]` tensors, GQA, causal masking and ragged lengths, and writes
//! through shared memory and TMA stores, which clip at each sequence's end.
//!
//! `cargo run --release --example hopper_fa_bwd`

// The forward pass, whose output and log-sum-exp the backward takes, and
// with it the shared example helpers.
#[path = "hopper_fa_fwd.rs"]
pub mod forward;

use common::attention::{cases, head_desc, reference_backward, widen, Shape};
use common::{Outcome, Rng, Size};
use forward::{common, AttentionElement};
use tlx::half::{bf16, f16};
use tlx::prelude::*;

/// The backward kernels for element type `$t`.
macro_rules! fa_backward_kernels {
    ($pre:ident, $main:ident, $convert:ident, $t:ident) => {
        /// `delta[r] = sum(dO[r, :] * O[r, :])` over `rows` rows of `D`, and
        /// the rows of the dQ accumulator set to zero.
        #[tlx::kernel(num_warps = 4, configs = [(D = 64, BM = 64), (D = 128, BM = 64)])]
        pub fn $pre<const D: usize, const BM: usize>(
            o: Ptr<$t>,
            d_o: Ptr<$t>,
            delta: Ptr<f32>,
            dq_accum: Ptr<f32>,
            rows: i32,
        ) {
            let r = program_id(0) * BM + arange(0, BM);
            let at = r[(.., None)] * D + arange(0, D)[(None, ..)];
            let inside = r[(.., None)] < rows;
            let out = load(o + at, mask = inside).to(f32);
            let grad = load(d_o + at, mask = inside).to(f32);
            store(delta + r, sum(out * grad, axis = 1), mask = r < rows);
            store(dq_accum + at, zeros([BM, D], f32), mask = inside);
        }

        #[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
            (D = 64, STAGES = 3, CAUSAL = false),
            (D = 64, STAGES = 3, CAUSAL = true),
            (D = 128, STAGES = 2, CAUSAL = false),
            (D = 128, STAGES = 2, CAUSAL = true),
        ])]
        pub fn $main<const D: usize, const STAGES: usize, const CAUSAL: bool>(
            q_desc: TensorDesc<$t, 1, 1, 64, D>,
            k_desc: TensorDesc<$t, 1, 1, 64, D>,
            v_desc: TensorDesc<$t, 1, 1, 64, D>,
            do_desc: TensorDesc<$t, 1, 1, 64, D>,
            dk_desc: TensorDesc<$t, 1, 1, 64, D>,
            dv_desc: TensorDesc<$t, 1, 1, 64, D>,
            dq_desc: TensorDesc<f32, 1, 1, 64, 64>,
            lse: Ptr<f32>,
            delta: Ptr<f32>,
            sm_scale: f32,
            heads: i32,
            kv_heads: i32,
            seq_q: i32,
            seq_kv: i32,
        ) {
            // Each consumer's 64 keys and values, loaded once; they take dK and dV
            // at the end.
            let k_bufs = local_alloc([64, D], $t, 2);
            let v_bufs = local_alloc([64, D], $t, 2);
            let q_bufs = local_alloc([64, D], $t, STAGES);
            let do_bufs = local_alloc([64, D], $t, STAGES);
            // Each consumer's dSᵀ (an A of the dQ products, read M-major),
            // two steps' worth at head dim 128 (both consumers read both),
            // and each consumer's part of dQ on the way to the accumulator.
            let ds_bufs = local_alloc([64, 64], $t, 4);
            let dq_bufs = local_alloc([64, 64], f32, 2);
            let kv_full = alloc_barriers(1, 1);
            let q_full = alloc_barriers(STAGES, 1);
            let do_full = alloc_barriers(STAGES, 1);
            // Both consumers read every query tile.
            let q_empty = alloc_barriers(STAGES, 2);
            let do_empty = alloc_barriers(STAGES, 2);
            let off_n = program_id(0) * 128;
            let batch_kv_head = program_id(1);
            let batch = batch_kv_head / kv_heads;
            let kv_head = batch_kv_head % kv_heads;
            let group = heads / kv_heads;
            // Causal: queries before this program's first key see none of its keys.
            let first_q_tile = if CAUSAL { off_n / 64 } else { 0 };
            let q_tiles = maximum(cdiv(seq_q, 64) - first_q_tile, 0);
            // Every query head of the group, each over its query tiles.
            let steps = group * q_tiles;
            async_tasks! {
                task(default, num_regs = 24) {
                    let bar = local_view(kv_full, 0);
                    barrier_expect_bytes(bar, 4 * 64 * D * size_of(dtype_of(k_desc)));
                    for half in static_range(0, 2) {
                        let key0 = off_n + half * 64;
                        async_descriptor_load(k_desc, local_view(k_bufs, half), [batch, kv_head, key0, 0], bar);
                        async_descriptor_load(v_desc, local_view(v_bufs, half), [batch, kv_head, key0, 0], bar);
                    }
                    for it in 0..steps {
                        let head = kv_head * group + it / q_tiles;
                        let q0 = (first_q_tile + it % q_tiles) * 64;
                        let slot = it % STAGES;
                        let free = (it / STAGES) % 2 ^ 1;
                        let tile_bytes = 64 * D * size_of(dtype_of(q_desc));
                        barrier_wait(local_view(q_empty, slot), free);
                        let q_bar = local_view(q_full, slot);
                        barrier_expect_bytes(q_bar, tile_bytes);
                        async_descriptor_load(q_desc, local_view(q_bufs, slot), [batch, head, q0, 0], q_bar);
                        barrier_wait(local_view(do_empty, slot), free);
                        let do_bar = local_view(do_full, slot);
                        barrier_expect_bytes(do_bar, tile_bytes);
                        async_descriptor_load(do_desc, local_view(do_bufs, slot), [batch, head, q0, 0], do_bar);
                    }
                }
                task(num_warps = 4, num_regs = 240, replicate = 2) {
                    let half = async_task_replica_id();
                    let key0 = off_n + half * 64;
                    let keys = key0 + arange(0, 64);
                    let k_buf = local_view(k_bufs, half);
                    let v_buf = local_view(v_bufs, half);
                    let ds_buf = local_view(ds_bufs, half);
                    let dq_buf = local_view(dq_bufs, half);
                    let log2e = 1.4426950408889634;
                    let qk_scale = sm_scale * log2e;
                    let mut dk = zeros([64, D], f32);
                    let mut dv = zeros([64, D], f32);
                    barrier_wait(local_view(kv_full, 0), 0);
                    for it in 0..steps {
                        let head = kv_head * group + it / q_tiles;
                        let q0 = (first_q_tile + it % q_tiles) * 64;
                        let queries = q0 + arange(0, 64);
                        let row = (batch * heads + head) * seq_q + queries;
                        // Past the end, an infinite lse makes P zero.
                        let valid = queries < seq_q;
                        let lse_q = load(lse + row, mask = valid, other = f32::INFINITY) * log2e;
                        let delta_q = load(delta + row, mask = valid);
                        let slot = it % STAGES;
                        let phase = (it / STAGES) % 2;
                        barrier_wait(local_view(q_full, slot), phase);
                        let q_buf = local_view(q_bufs, slot);
                        let st = async_dot(k_buf, local_trans(q_buf), zeros([64, 64], f32));
                        let st = async_dot_wait(0, st);
                        let mut pt = exp2(st * qk_scale - lse_q[(None, ..)]);
                        if CAUSAL {
                            pt = select(keys[(.., None)] <= queries[(None, ..)], pt, 0.0);
                        }
                        barrier_wait(local_view(do_full, slot), phase);
                        let do_buf = local_view(do_bufs, slot);
                        dv = async_dot(pt.to($t), do_buf, dv);
                        let dpt = async_dot(v_buf, local_trans(do_buf), zeros([64, 64], f32));
                        let dpt = async_dot_wait(0, dpt);
                        dv = async_dot_wait(0, dv);
                        let dst = (pt * (dpt - delta_q[(None, ..)])).to($t);
                        // The query tile's share of dQ from these keys, dS K,
                        // takes dSᵀ through shared memory, read M-major.
                        let (dq, col0) = if D == 128 {
                            // FA3's split: each consumer takes 64 of dQ's
                            // columns over all 128 keys, so the accumulator
                            // sees one reduction per step, not two.
                            let parity = 2 * (it % 2);
                            local_store(local_view(ds_bufs, parity + half), dst);
                            // Both consumers' dSᵀ are in place. (The buffers
                            // alternate by step: a consumer rewrites one after
                            // the next step's meeting, when the other has
                            // finished reading it.)
                            named_barrier_wait(8, 256);
                            dk = async_dot(dst, q_buf, dk);
                            let col0 = half * 64;
                            let mut dq = zeros([64, 64], f32);
                            for i in static_range(0, 2) {
                                let ds_i = local_trans(local_view(ds_bufs, parity + i));
                                let k_cols = local_slice(local_view(k_bufs, i), [0, col0], [64, 64]);
                                dq = async_dot(ds_i, k_cols, dq);
                            }
                            (async_dot_wait(0, dq), col0)
                        } else {
                            local_store(ds_buf, dst);
                            dk = async_dot(dst, q_buf, dk);
                            let dq = async_dot(local_trans(ds_buf), k_buf, zeros([64, D], f32));
                            (async_dot_wait(0, dq), 0)
                        };
                        dk = async_dot_wait(0, dk);
                        barrier_arrive(local_view(q_empty, slot));
                        barrier_arrive(local_view(do_empty, slot));
                        // The previous step's reduction has read the buffer.
                        async_descriptor_store_wait(0);
                        local_store(dq_buf, dq * sm_scale);
                        async_descriptor_store(dq_desc, dq_buf, [batch, head, q0, col0], store_reduce = "add");
                    }
                    if D == 128 {
                        // The other consumer's last dQ products read this
                        // consumer's keys, which dK is about to replace.
                        named_barrier_wait(8, 256);
                    }
                    local_store(k_buf, (dk * sm_scale).to($t));
                    async_descriptor_store(dk_desc, k_buf, [batch, kv_head, key0, 0]);
                    local_store(v_buf, dv.to($t));
                    async_descriptor_store(dv_desc, v_buf, [batch, kv_head, key0, 0]);
                    async_descriptor_store_wait(0);
                }
            }
        }

        /// `dq = dq_accum` in `$t`, over `n` elements.
        #[tlx::kernel(num_warps = 4, configs = [(BLOCK = 2048)])]
        pub fn $convert<const BLOCK: usize>(dq_accum: Ptr<f32>, dq: Ptr<$t>, n: i32) {
            let at = program_id(0) * BLOCK + arange(0, BLOCK);
            store(dq + at, load(dq_accum + at, mask = at < n).to($t), mask = at < n);
        }
    };
}

fa_backward_kernels!(fa_bwd_preprocess, fa_bwd_main, fa_bwd_dq_convert, bf16);
fa_backward_kernels!(
    fa_bwd_preprocess_f16,
    fa_bwd_main_f16,
    fa_bwd_dq_convert_f16,
    f16
);

/// The forward pass's tensors and the output gradient, on a device.
pub struct Saved<'b, T: AttentionElement> {
    pub q: &'b Buffer<T>,
    pub k: &'b Buffer<T>,
    pub v: &'b Buffer<T>,
    pub o: &'b Buffer<T>,
    pub lse: &'b Buffer<f32>,
    pub d_o: &'b Buffer<T>,
}

/// Where the gradients go, and the scratch the pass needs: `delta` (one
/// f32 per query row) and `dq_accum` (one f32 per element of dQ, where the
/// main kernel's programs add their parts).
pub struct Grads<'b, T: AttentionElement> {
    pub dq: &'b Buffer<T>,
    pub dk: &'b Buffer<T>,
    pub dv: &'b Buffer<T>,
    pub delta: &'b Buffer<f32>,
    pub dq_accum: &'b Buffer<f32>,
}

/// The descriptors of one backward pass: Q, K, V, dO, dK, dV, and the f32
/// dQ accumulator.
pub struct Descs<'d, 'b, T: AttentionElement> {
    pub inputs: [&'d TensorDesc<'b, T>; 4],
    pub outputs: [&'d TensorDesc<'b, T>; 2],
    pub dq_accum: &'d TensorDesc<'b, f32>,
}

/// The element types the backward kernels are compiled for.
pub trait BackwardElement: AttentionElement {
    /// Launches the three kernels for this type; `sizes` are heads,
    /// kv_heads, seq_q and seq_kv, `grids` the preprocess's (and the
    /// conversion's) and the main kernel's, `config` the head dim and
    /// causality.
    #[allow(clippy::too_many_arguments)]
    fn launch_backward(
        device: &Device,
        saved: &Saved<Self>,
        grads: &Grads<Self>,
        descs: Descs<Self>,
        sizes: (i32, i32, i32, i32),
        grids: (u32, (u32, u32)),
        sm_scale: f32,
        config: (usize, bool),
    ) -> Result<(), tlx::Error>;
}

macro_rules! backward_element {
    ($t:ident, $pre:ident, $main:ident, $convert:ident) => {
        impl BackwardElement for $t {
            fn launch_backward(
                device: &Device,
                saved: &Saved<Self>,
                grads: &Grads<Self>,
                descs: Descs<Self>,
                (heads, kv_heads, seq_q, seq_kv): (i32, i32, i32, i32),
                (rows_grid, main_grid): (u32, (u32, u32)),
                sm_scale: f32,
                (head_dim, causal): (usize, bool),
            ) -> Result<(), tlx::Error> {
                let rows = saved.lse.len() as i32;
                let [q, k, v, d_o] = descs.inputs;
                let [dk, dv] = descs.outputs;
                // Q/dO stages: three at head dim 64 (+2-6% on the H100);
                // at 128 a third would leave L1 32 KB and measured no faster.
                macro_rules! launch {
                    ($d:literal, $stages:literal, $causal:literal) => {{
                        $pre::<$d, 64>::launch(
                            device,
                            rows_grid,
                            saved.o,
                            saved.d_o,
                            grads.delta,
                            grads.dq_accum,
                            rows,
                        )?;
                        $main::<$d, $stages, $causal>::launch(
                            device,
                            main_grid,
                            q,
                            k,
                            v,
                            d_o,
                            dk,
                            dv,
                            descs.dq_accum,
                            saved.lse,
                            grads.delta,
                            sm_scale,
                            heads,
                            kv_heads,
                            seq_q,
                            seq_kv,
                        )
                    }};
                }
                match (head_dim, causal) {
                    (64, false) => launch!(64, 3, false),
                    (64, true) => launch!(64, 3, true),
                    (128, false) => launch!(128, 2, false),
                    (128, true) => launch!(128, 2, true),
                    _ => Err(tlx::Error::InvalidConfig {
                        kernel: stringify!($main),
                        reason: format!("head_dim {head_dim}: compiled for 64 and 128"),
                    }),
                }?;
                let n = grads.dq_accum.len();
                $convert::<2048>::launch(
                    device,
                    n.div_ceil(2048) as u32,
                    grads.dq_accum,
                    grads.dq,
                    n as i32,
                )
            }
        }
    };
}

backward_element!(bf16, fa_bwd_preprocess, fa_bwd_main, fa_bwd_dq_convert);
backward_element!(
    f16,
    fa_bwd_preprocess_f16,
    fa_bwd_main_f16,
    fa_bwd_dq_convert_f16
);

/// The three kernels of the backward pass for `shape`, on `device`.
pub fn attention_backward<T: BackwardElement>(
    device: &Device,
    saved: &Saved<T>,
    grads: &Grads<T>,
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
    shape.check_heads("hopper_fa_bwd")?;
    let rows = batch * heads * seq_q;
    if saved.lse.len() != rows || grads.delta.len() != rows {
        return Err(tlx::Error::InvalidConfig {
            kernel: "hopper_fa_bwd",
            reason: format!("lse and delta need {rows} elements (batch x heads x seq_q)"),
        });
    }
    if grads.dq_accum.len() != rows * head_dim {
        return Err(tlx::Error::InvalidConfig {
            kernel: "hopper_fa_bwd",
            reason: format!(
                "dq_accum needs {} elements (batch x heads x seq_q x head_dim)",
                rows * head_dim
            ),
        });
    }
    let q = head_desc(saved.q, batch, heads, seq_q, head_dim)?;
    let k = head_desc(saved.k, batch, kv_heads, seq_kv, head_dim)?;
    let v = head_desc(saved.v, batch, kv_heads, seq_kv, head_dim)?;
    let d_o = head_desc(saved.d_o, batch, heads, seq_q, head_dim)?;
    let dk = head_desc(grads.dk, batch, kv_heads, seq_kv, head_dim)?;
    let dv = head_desc(grads.dv, batch, kv_heads, seq_kv, head_dim)?;
    let dq_accum = head_desc(grads.dq_accum, batch, heads, seq_q, head_dim)?;
    let sizes = (heads as i32, kv_heads as i32, seq_q as i32, seq_kv as i32);
    let grids = (
        rows.div_ceil(64) as u32,
        (seq_kv.div_ceil(128) as u32, (batch * kv_heads) as u32),
    );
    let descs = Descs {
        inputs: [&q, &k, &v, &d_o],
        outputs: [&dk, &dv],
        dq_accum: &dq_accum,
    };
    T::launch_backward(
        device,
        saved,
        grads,
        descs,
        sizes,
        grids,
        sm_scale,
        (head_dim, causal),
    )
}

/// Runs `shape` on fresh inputs (the forward kernel giving the output and
/// log-sum-exp) and checks the three gradients against the f64 reference,
/// outputs poisoned first.
pub fn check<T: BackwardElement>(device: &Device, rng: &mut Rng, shape: Shape) -> Outcome {
    let random = |rng: &mut Rng, n: usize| -> Vec<T> {
        rng.normal_vec(n).into_iter().map(T::from_f32).collect()
    };
    let (q_len, kv_len) = (shape.q_len(), shape.kv_len());
    let (q, k, v, d_o) = (
        random(rng, q_len),
        random(rng, kv_len),
        random(rng, kv_len),
        random(rng, q_len),
    );
    let sm_scale = 1.0 / (shape.head_dim as f32).sqrt();
    let up = |t: &[T]| device.upload(t);
    let (dq_in, dk_in, dv_in, do_in) = (up(&q)?, up(&k)?, up(&v)?, up(&d_o)?);
    // The forward kernel's output and log-sum-exp, as in training.
    let rows = shape.batch * shape.heads * shape.seq_q;
    let o_in = device.upload(&vec![T::nan(); q_len])?;
    let lse_in = device.upload(&vec![f32::NAN; rows])?;
    forward::attention(
        device,
        (&dq_in, &dk_in, &dv_in),
        (&o_in, &lse_in),
        shape,
        sm_scale,
    )?;
    let dq = device.upload(&vec![T::nan(); q_len])?;
    let dk = device.upload(&vec![T::nan(); kv_len])?;
    let dv = device.upload(&vec![T::nan(); kv_len])?;
    let delta = device.upload(&vec![f32::NAN; rows])?;
    let dq_accum = device.upload(&vec![f32::NAN; q_len])?;
    let saved = Saved {
        q: &dq_in,
        k: &dk_in,
        v: &dv_in,
        o: &o_in,
        lse: &lse_in,
        d_o: &do_in,
    };
    let grads = Grads {
        dq: &dq,
        dk: &dk,
        dv: &dv,
        delta: &delta,
        dq_accum: &dq_accum,
    };
    attention_backward(device, &saved, &grads, shape, sm_scale)?;
    let wide = |t: &[T]| widen(t, T::to_f32);
    let (want_dq, want_dk, want_dv) = reference_backward(
        (&wide(&q), &wide(&k), &wide(&v), &wide(&d_o)),
        shape,
        sm_scale as f64,
    );
    let what = format!("{} {shape}", T::NAME);
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
            check::<f16>(device, &mut rng, case.shape)?;
        } else {
            check::<bf16>(device, &mut rng, case.shape)?;
        }
    }
    Ok(())
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("hopper_fa_bwd", run)
}
