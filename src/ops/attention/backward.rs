//! The flash-attention backward kernels on Hopper: `dQ`, `dK` and `dV` from
//! `Q`, `K`, `V`, the forward's output `O` and row log-sum-exp, and the
//! output gradient `dO`, without ever holding the attention matrix (FA2's
//! algorithm, dQ accumulated across programs by TMA reductions as FA3 does).
//!
//! Three kernels:
//! - `fa_bwd_preprocess`: `delta = rowsum(dO ∘ O)` and `lse · log2 e` per
//!   query row, each head's rows padded to a multiple of 64 (so the main
//!   kernel's producer brings a tile of each by TMA beside Q and dO), and
//!   the f32 dQ accumulator set to zero;
//! - `fa_bwd_main`: per 128 keys of one key/value head (a key tile; the
//!   non-causal programs are persistent, one per SM, over the key tiles),
//!   two consumer warp groups keep 64 keys each (K and V loaded once) and
//!   stream over the query tiles of every query head that reads them
//!   (Q and dO through a TMA ring): `Pᵀ = exp(K Qᵀ · scale − lse)`,
//!   `dV += Pᵀ dO`, `dPᵀ = V dOᵀ`, `dSᵀ = Pᵀ ∘ (dPᵀ − delta)`, `dK += dSᵀ Q`
//!   (`Pᵀ` and `dSᵀ` fed to wgmma from registers), and the query tile's
//!   share of dQ from these keys, `dS K` (`dSᵀ` through shared memory, read
//!   M-major), added into the accumulator by a TMA store with
//!   `store_reduce = "add"`, which a writer warp sends from the
//!   consumer's buffer; both consumers' `dSᵀ` meet in shared memory
//!   so that each step sends one reduction, not two: at head dim 128 the
//!   consumers split dQ's columns (FA3's way), at 64 they take it in turns;
//! - `fa_bwd_dq_convert`: the accumulator times the softmax scale (which the
//!   main kernel leaves out of `dS K`), in the element type.
//!
//! The main kernel is warp-specialized like the forward (a TMA producer
//! warp and FA3's dQ writer warp sharing one warp group, two consumer warp
//! groups), takes the same `[batch, heads, seq, head_dim]` tensors, GQA,
//! causal masking and ragged lengths, and writes through shared memory and
//! TMA stores, which clip at each sequence's end.

use super::{Attention, AttentionGrads, AttentionSaved, AttentionWorkspace};
use crate::prelude::*;
use crate::Element;

/// Keys per program of the main kernel (two consumer warp groups of 64).
const KEY_TILE: usize = 128;
/// Rows per program of the preprocess kernel.
const PREPROCESS_ROWS: usize = 64;
/// Elements per program of the dQ conversion.
const CONVERT_BLOCK: usize = 2048;
/// The shortest key sequence whose causal main kernel runs its programs
/// longest first. On the H100 (session 24): +3-6% at 2048-8192 keys (head
/// dim 128), +1-2% at head dim 64; at 512 keys, -5% (programs of two to
/// eight query tiles, whose heads' queries are then read by fewer programs
/// at a time), and no change at 1024.
const LONGEST_FIRST_MIN_KEYS: usize = 2048;

/// Query rows per head of the per-row statistics the main kernel reads by
/// TMA (`delta`, `lse · log2 e`): whole 64-row tiles, so a tile never
/// reaches into the next head's rows and every row is 16-byte aligned.
pub(super) fn padded_seq(seq_q: usize) -> usize {
    seq_q.div_ceil(64) * 64
}

/// The backward kernels for element type `$t`.
macro_rules! fa_backward_kernels {
    ($pre:ident, $main:ident, $convert:ident, $t:ident) => {
        /// For `BM` query rows of one (batch, head) pair `program_id(1)`:
        /// `delta = sum(dO * O, axis = 1)` and `lse * log2 e` at the rows of
        /// `seq_pad` (a multiple of `BM`) per head, the padding rows given 0
        /// and infinity (no probability), and the dQ accumulator's rows set
        /// to zero.
        #[tlx::kernel(num_warps = 4, configs = [(D = 64, BM = 64), (D = 128, BM = 64)])]
        fn $pre<const D: usize, const BM: usize>(
            o: Ptr<$t>,
            d_o: Ptr<$t>,
            lse: Ptr<f32>,
            delta: Ptr<f32>,
            lse_log2: Ptr<f32>,
            dq_accum: Ptr<f32>,
            seq_q: i32,
            seq_pad: i32,
        ) {
            let head = program_id(1);
            let q = program_id(0) * BM + arange(0, BM);
            let valid = q < seq_q;
            let r = head * seq_q + q;
            let at = r[(.., None)] * D + arange(0, D)[(None, ..)];
            let inside = valid[(.., None)];
            // Padding rows: a delta of 0.
            let out = load(o + at, mask = inside, other = 0.0).to(f32);
            let grad = load(d_o + at, mask = inside, other = 0.0).to(f32);
            let padded = head * seq_pad + q;
            store(delta + padded, sum(out * grad, axis = 1));
            let log2e = 1.4426950408889634;
            store(lse_log2 + padded, load(lse + r, mask = valid, other = f32::INFINITY) * log2e);
            // The accumulator's rows are one run of `BM * D` floats, zeroed
            // in a shape of their own: f32 accesses at `[BM, D]` would make
            // the loads of O and dO there 8-byte vectors, not 16.
            let row0 = program_id(0) * BM;
            let flat = arange(0, BM * D);
            let run = dq_accum + (head * seq_q + row0) * D;
            store(run + flat, zeros([BM * D], f32), mask = flat < (seq_q - row0) * D);
        }

        #[tlx::kernel(arch = "sm_90a", num_warps = 1, configs = [
            (D = 64, STAGES = 3, CAUSAL = false),
            (D = 64, STAGES = 3, CAUSAL = true),
            (D = 128, STAGES = 2, CAUSAL = false),
            (D = 128, STAGES = 2, CAUSAL = true),
        ])]
        fn $main<const D: usize, const STAGES: usize, const CAUSAL: bool>(
            q_desc: TensorDesc<$t, 1, 1, 64, D>,
            k_desc: TensorDesc<$t, 1, 1, 64, D>,
            v_desc: TensorDesc<$t, 1, 1, 64, D>,
            do_desc: TensorDesc<$t, 1, 1, 64, D>,
            dk_desc: TensorDesc<$t, 1, 1, 64, D>,
            dv_desc: TensorDesc<$t, 1, 1, 64, D>,
            dq_desc: TensorDesc<f32, 1, 1, 64, 64>,
            lse_desc: TensorDesc<f32, 1, 64>,
            delta_desc: TensorDesc<f32, 1, 64>,
            sm_scale: f32,
            heads: i32,
            kv_heads: i32,
            seq_q: i32,
            seq_kv: i32,
            key_tiles: i32,
            kv_pairs: i32,
            order_group: i32,
        ) {
            // Each consumer's 64 keys and values, loaded once a key tile.
            let k_bufs = local_alloc([64, D], $t, 2);
            let v_bufs = local_alloc([64, D], $t, 2);
            let q_bufs = local_alloc([64, D], $t, STAGES);
            let do_bufs = local_alloc([64, D], $t, STAGES);
            // Each query tile's `lse · log2 e` and `delta`, beside Q and dO:
            // read in the layout of the products they meet, they cost no
            // barrier (a plain load would be moved there through shared
            // memory, or hold 16 registers a thread across the products).
            let lse_bufs = local_alloc([1, 64], f32, STAGES);
            let delta_bufs = local_alloc([1, 64], f32, STAGES);
            // Each consumer's dSᵀ (an A of the dQ products, read M-major),
            // two steps' worth (the dQ products read both consumers'),
            // and each consumer's part of dQ on the way to the accumulator.
            let ds_bufs = local_alloc([64, 64], $t, 4);
            let dq_bufs = local_alloc([64, 64], f32, 2);
            // Non-causal programs are persistent (see the launch), and
            // their dK and dV leave through buffers of their own, so that
            // the next key tile's K and V load while they are stored: dV
            // through its own, dK through the consumer's dQ buffer (at head
            // dim 128 there is room for no more). Causal programs, whose
            // tiles differ in length, take one each (a static share of
            // them measured 4-20% slower) and store through K and V.
            let dv_bufs = if CAUSAL { v_bufs } else { local_alloc([64, D], $t, 2) };
            let dk_bufs = if CAUSAL {
                k_bufs
            } else if D == 128 {
                dq_bufs
            } else {
                local_alloc([64, D / 2], f32, 2)
            };
            // dQ's parts (and, `DK_BY_WRITER`, dK) on their way out: left
            // in a consumer's buffer (`dq_full`), read by the writer's store
            // (`dq_empty`).
            let dq_full = alloc_barriers(2, 1);
            let dq_empty = alloc_barriers(2, 1);
            let kv_full = alloc_barriers(1, 1);
            // Both consumers read both halves of K (the dQ products).
            let kv_empty = alloc_barriers(1, 2);
            let q_full = alloc_barriers(STAGES, 1);
            let do_full = alloc_barriers(STAGES, 1);
            // Both consumers read every query tile.
            let q_empty = alloc_barriers(STAGES, 2);
            let do_empty = alloc_barriers(STAGES, 2);
            // The key tiles this program takes (`first..num_tiles` by
            // `stride`) and the query heads per K/V head: computed in each
            // task, since a value the program holds across the region is
            // live in every task (ptxas spilled one with a one-warp
            // producer).
            fn schedule(key_tiles: i32, kv_pairs: i32, heads: i32, kv_heads: i32) -> (i32, i32, i32, i32) {
                (program_id(0), key_tiles * kv_pairs, num_programs(0), heads / kv_heads)
            }
            // The `tile`-th key tile of the order: its first key, batch,
            // key/value head, first query tile and query tiles. A causal
            // tile's work shrinks with its key tile (it sees the queries
            // from its own on). Within groups of `order_group` heads, the
            // tiles run longest first, all heads' first key tiles before
            // any head's second, so that the last to start are short: a
            // long one started late sets the kernel's end. (Groups, not
            // the whole grid, so that the tiles running together read few
            // heads' queries and dQ, as in the plain order, from L2.)
            fn tile_coords(
                tile: i32,
                key_tiles: i32,
                kv_pairs: i32,
                kv_heads: i32,
                order_group: i32,
                seq_q: i32,
            ) -> (i32, i32, i32, i32, i32) {
                let (key_tile, batch_kv_head) = if CAUSAL {
                    let per_group = order_group * key_tiles;
                    let g = tile / per_group;
                    let r = tile - g * per_group;
                    let size = minimum(order_group, kv_pairs - g * order_group);
                    (r / size, g * order_group + r % size)
                } else {
                    let pair = tile / key_tiles;
                    (tile - pair * key_tiles, pair)
                };
                let batch = batch_kv_head / kv_heads;
                let kv_head = batch_kv_head - batch * kv_heads;
                // Causal: queries before the tile's first key see none of its keys.
                let first_q_tile = if CAUSAL { key_tile * 2 } else { 0 };
                let q_tiles = maximum(cdiv(seq_q, 64) - first_q_tile, 0);
                (key_tile * 128, batch, kv_head, first_q_tile, q_tiles)
            }
            // At head dim 128 non-causal, dK leaves through the consumers'
            // dQ buffers (there is room for no other), so the writer
            // stores it too.
            const DK_BY_WRITER: bool = (D == 128) & !CAUSAL;
            // A consumer's `n`-th part for the writer (counted from the
            // kernel's start): into its buffer once the writer's store has
            // read the one before (`local_store` makes it visible to that
            // store, the async proxy), then announced.
            fn hand_over(buf: Buffer, part: Tensor, full: Barriers, empty: Barriers, half: i32, n: i32) {
                barrier_wait(local_view(empty, half), n % 2 ^ 1);
                local_store(buf, part);
                barrier_arrive(local_view(full, half));
            }
            // At head dim 128, each consumer's parts before step `it`: one
            // a step, and (`DK_BY_WRITER`) one dK a key tile done.
            fn parts_before(it: i32, tiles_done: i32) -> i32 {
                if DK_BY_WRITER {
                    it + tiles_done
                } else {
                    it
                }
            }
            // The writer hands both consumers' buffers back as its two
            // stores (the older first) have read them.
            fn hand_back_both(empty: Barriers) {
                async_descriptor_store_wait(1);
                barrier_arrive(local_view(empty, 0));
                async_descriptor_store_wait(0);
                barrier_arrive(local_view(empty, 1));
            }
            // The steps of a key tile: every query head `h` of the group,
            // each over its query tiles `t` (two loops, not a division of
            // one counter every step); `it` counts them for the ring, from
            // key tile to key tile.
            async_tasks! {
                // The producer: one warp (`num_warps = 1`), holding its
                // warp group, whose second warp is the dQ writer's.
                task(default, num_regs = 24) {
                    let mut it0 = 0;
                    let mut tiles_done = 0;
                    let (first, num_tiles, stride, group) = schedule(key_tiles, kv_pairs, heads, kv_heads);
                    for tile in (first..num_tiles).step_by(stride) {
                        let (off_n, batch, kv_head, first_q_tile, q_tiles) =
                            tile_coords(tile, key_tiles, kv_pairs, kv_heads, order_group, seq_q);
                        // Both consumers are done with the previous tile's keys.
                        barrier_wait(local_view(kv_empty, 0), tiles_done % 2 ^ 1);
                        let bar = local_view(kv_full, 0);
                        barrier_expect_bytes(bar, 4 * 64 * D * size_of(dtype_of(k_desc)));
                        for half in static_range(0, 2) {
                            let key0 = off_n + half * 64;
                            async_descriptor_load(k_desc, local_view(k_bufs, half), [batch, kv_head, key0, 0], bar);
                            async_descriptor_load(v_desc, local_view(v_bufs, half), [batch, kv_head, key0, 0], bar);
                        }
                        for h in 0..group {
                            let head = kv_head * group + h;
                            let stats_row = batch * heads + head;
                            for t in 0..q_tiles {
                                let it = it0 + h * q_tiles + t;
                                let q0 = (first_q_tile + t) * 64;
                                let slot = it % STAGES;
                                let free = (it / STAGES) % 2 ^ 1;
                                // Q (or dO) and its rows' statistic.
                                let tile_bytes = 64 * D * size_of(dtype_of(q_desc))
                                    + 64 * size_of(dtype_of(lse_desc));
                                barrier_wait(local_view(q_empty, slot), free);
                                let q_bar = local_view(q_full, slot);
                                barrier_expect_bytes(q_bar, tile_bytes);
                                async_descriptor_load(q_desc, local_view(q_bufs, slot), [batch, head, q0, 0], q_bar);
                                async_descriptor_load(lse_desc, local_view(lse_bufs, slot), [stats_row, q0], q_bar);
                                barrier_wait(local_view(do_empty, slot), free);
                                let do_bar = local_view(do_full, slot);
                                barrier_expect_bytes(do_bar, tile_bytes);
                                async_descriptor_load(do_desc, local_view(do_bufs, slot), [batch, head, q0, 0], do_bar);
                                async_descriptor_load(delta_desc, local_view(delta_bufs, slot), [stats_row, q0], do_bar);
                            }
                        }
                        it0 += group * q_tiles;
                        tiles_done += 1;
                    }
                }
                // FA3's dQ writer, on a warp of the producer's group: sends
                // each consumer's part of dQ to the accumulator by a TMA
                // reduce-add and hands the buffer back once the reduction
                // has read it, so that no consumer waits on its own stores
                // (without the reductions the step ran 8% faster: session
                // 38, H200).
                task(num_warps = 1, num_regs = 24, warp_group_start_id = 1) {
                    let mut it0 = 0;
                    let mut tiles_done = 0;
                    let (first, num_tiles, stride, group) = schedule(key_tiles, kv_pairs, heads, kv_heads);
                    for tile in (first..num_tiles).step_by(stride) {
                        let (off_n, batch, kv_head, first_q_tile, q_tiles) =
                            tile_coords(tile, key_tiles, kv_pairs, kv_heads, order_group, seq_q);
                        for h in 0..group {
                            let head = kv_head * group + h;
                            for t in 0..q_tiles {
                                let it = it0 + h * q_tiles + t;
                                let q0 = (first_q_tile + t) * 64;
                                if D == 128 {
                                    // Each consumer's 64 columns, every step.
                                    let n = parts_before(it, tiles_done);
                                    for half in static_range(0, 2) {
                                        barrier_wait(local_view(dq_full, half), n % 2);
                                        let part = local_view(dq_bufs, half);
                                        async_descriptor_store(dq_desc, part, [batch, head, q0, half * 64], store_reduce = "add");
                                    }
                                    hand_back_both(dq_empty);
                                } else {
                                    // The consumers in turns, all 64 columns.
                                    let half = it % 2;
                                    barrier_wait(local_view(dq_full, half), (it / 2) % 2);
                                    async_descriptor_store(dq_desc, local_view(dq_bufs, half), [batch, head, q0, 0], store_reduce = "add");
                                    async_descriptor_store_wait(0);
                                    barrier_arrive(local_view(dq_empty, half));
                                }
                            }
                        }
                        it0 += group * q_tiles;
                        if DK_BY_WRITER {
                            for half in static_range(0, 2) {
                                barrier_wait(local_view(dq_full, half), parts_before(it0, tiles_done) % 2);
                                let dk_out = local_reinterpret(local_view(dk_bufs, half), $t, [64, D]);
                                async_descriptor_store(dk_desc, dk_out, [batch, kv_head, off_n + half * 64, 0]);
                            }
                            hand_back_both(dq_empty);
                        }
                        tiles_done += 1;
                    }
                }
                task(num_warps = 4, num_regs = 240, replicate = 2, warp_group_start_id = 4) {
                    let half = async_task_replica_id();
                    let k_buf = local_view(k_bufs, half);
                    let v_buf = local_view(v_bufs, half);
                    let dq_buf = local_view(dq_bufs, half);
                    let dk_out = local_reinterpret(local_view(dk_bufs, half), $t, [64, D]);
                    let dv_out = local_view(dv_bufs, half);
                    let qk_scale = sm_scale * 1.4426950408889634;
                    // At head dim 64, K and V stay in registers as the A
                    // operands of Sᵀ and dPᵀ: the step is bound by shared-
                    // memory reads (two 64-wide products per consumer read
                    // A and B for every 16 of K), and these halve two of
                    // them (+2-4% on the H200, session 31). At 128 the 64
                    // more registers a thread do not fit beside dK and dV:
                    // ptxas spills and then serializes every wgmma.
                    const KV_IN_REGS: bool = D == 64;
                    let mut it0 = 0;
                    let mut tiles_done = 0;
                    let (first, num_tiles, stride, group) = schedule(key_tiles, kv_pairs, heads, kv_heads);
                    for tile in (first..num_tiles).step_by(stride) {
                        let (off_n, batch, kv_head, first_q_tile, q_tiles) =
                            tile_coords(tile, key_tiles, kv_pairs, kv_heads, order_group, seq_q);
                        let key0 = off_n + half * 64;
                        let keys = key0 + arange(0, 64);
                        let mut dk = zeros([64, D], f32);
                        let mut dv = zeros([64, D], f32);
                        barrier_wait(local_view(kv_full, 0), tiles_done % 2);
                        let k_regs = if KV_IN_REGS { local_load(k_buf) } else { zeros([64, D], $t) };
                        let v_regs = if KV_IN_REGS { local_load(v_buf) } else { zeros([64, D], $t) };
                        for h in 0..group {
                            let head = kv_head * group + h;
                            for t in 0..q_tiles {
                                let it = it0 + h * q_tiles + t;
                                let q0 = (first_q_tile + t) * 64;
                                let queries = q0 + arange(0, 64);
                                let slot = it % STAGES;
                                let phase = (it / STAGES) % 2;
                                barrier_wait(local_view(q_full, slot), phase);
                                let q_buf = local_view(q_bufs, slot);
                                let st = if KV_IN_REGS {
                                    async_dot(k_regs, local_trans(q_buf), zeros([64, 64], f32))
                                } else {
                                    async_dot(k_buf, local_trans(q_buf), zeros([64, 64], f32))
                                };
                                // dPᵀ right behind Sᵀ: P is computed while it runs,
                                // and dS while dV's product runs.
                                barrier_wait(local_view(do_full, slot), phase);
                                let do_buf = local_view(do_bufs, slot);
                                let dpt = if KV_IN_REGS {
                                    async_dot(v_regs, local_trans(do_buf), zeros([64, 64], f32))
                                } else {
                                    async_dot(v_buf, local_trans(do_buf), zeros([64, 64], f32))
                                };
                                let st = async_dot_wait(1, st);
                                // Past the end, an infinite lse makes P zero.
                                let lse_q = local_load(local_view(lse_bufs, slot));
                                let pt = exp2(fma(st, qk_scale, -lse_q));
                                // Only a tile with a key after one of its queries
                                // (on this consumer's diagonal) has some to mask.
                                let pt = if CAUSAL & (q0 < key0 + 64) {
                                    select(keys[(.., None)] <= queries[(None, ..)], pt, 0.0)
                                } else {
                                    pt
                                };
                                dv = async_dot(pt.to($t), do_buf, dv);
                                let dpt = async_dot_wait(1, dpt);
                                let delta_q = local_load(local_view(delta_bufs, slot));
                                let dst = (pt * (dpt - delta_q)).to($t);
                                // The query tile's share of dQ from these 128 keys,
                                // dS K, takes both consumers' dSᵀ through shared
                                // memory, read M-major, so that the accumulator
                                // sees one reduction per step, not two.
                                let parity = 2 * (it % 2);
                                local_store(local_view(ds_bufs, parity + half), dst);
                                // Both consumers' dSᵀ are in place. (The buffers
                                // alternate by step: a consumer rewrites one after
                                // the next step's meeting, when the other has
                                // finished reading it.)
                                named_barrier_wait(8, 256);
                                if D == 128 {
                                    // FA3's split: each consumer takes 64 of dQ's
                                    // columns.
                                    let col0 = half * 64;
                                    let mut dq = zeros([64, 64], f32);
                                    for i in static_range(0, 2) {
                                        let ds_i = local_trans(local_view(ds_bufs, parity + i));
                                        let k_cols = local_slice(local_view(k_bufs, i), [0, col0], [64, 64]);
                                        dq = async_dot(ds_i, k_cols, dq);
                                    }
                                    // dK last: its product runs during dQ's epilogue.
                                    dk = async_dot(dst, q_buf, dk);
                                    // dV's product finished before dQ's (groups
                                    // retire in order).
                                    let dq = async_dot_wait(1, dq);
                                    dv = async_dot_wait(1, dv);
                                    barrier_arrive(local_view(do_empty, slot));
                                    let n = parts_before(it, tiles_done);
                                    hand_over(dq_buf, dq, dq_full, dq_empty, half, n);
                                } else {
                                    // 64 columns are one product's narrowest N:
                                    // the consumers take dQ in turns, a step each
                                    // (+11-15% on the H100 over one reduction per
                                    // consumer and step).
                                    dk = async_dot(dst, q_buf, dk);
                                    if it % 2 == half {
                                        let mut dq = zeros([64, 64], f32);
                                        for i in static_range(0, 2) {
                                            let ds_i = local_trans(local_view(ds_bufs, parity + i));
                                            dq = async_dot(ds_i, local_view(k_bufs, i), dq);
                                        }
                                        let dq = async_dot_wait(0, dq);
                                        // This consumer's parts before: every other step's.
                                        hand_over(dq_buf, dq, dq_full, dq_empty, half, (it + 1 - half) / 2);
                                    }
                                    dv = async_dot_wait(1, dv);
                                    barrier_arrive(local_view(do_empty, slot));
                                }
                                dk = async_dot_wait(0, dk);
                                barrier_arrive(local_view(q_empty, slot));
                            }
                        }
                        // Both consumers' last dQ products have read both
                        // halves of K: the producer may load the next tile's.
                        named_barrier_wait(8, 256);
                        barrier_arrive(local_view(kv_empty, 0), pred = !CAUSAL);
                        if DK_BY_WRITER {
                            // dK leaves through the dQ buffer, by the writer,
                            // as the tile's last part.
                            let n = parts_before(it0 + group * q_tiles, tiles_done);
                            hand_over(dk_out, (dk * sm_scale).to($t), dq_full, dq_empty, half, n);
                            // The previous tile's dV store has read its buffer.
                            async_descriptor_store_wait(0);
                            local_store(dv_out, dv.to($t));
                            async_descriptor_store(dv_desc, dv_out, [batch, kv_head, key0, 0]);
                        } else {
                            // The previous tile's dK and dV stores have read
                            // their buffers.
                            async_descriptor_store_wait(0);
                            local_store(dk_out, (dk * sm_scale).to($t));
                            async_descriptor_store(dk_desc, dk_out, [batch, kv_head, key0, 0]);
                            local_store(dv_out, dv.to($t));
                            async_descriptor_store(dv_desc, dv_out, [batch, kv_head, key0, 0]);
                            if CAUSAL {
                                // Through K and V: they are free once read.
                                async_descriptor_store_wait(0);
                                barrier_arrive(local_view(kv_empty, 0));
                            }
                        }
                        it0 += group * q_tiles;
                        tiles_done += 1;
                    }
                    async_descriptor_store_wait(0);
                }
            }
        }

        /// `dq = dq_accum * sm_scale` in `$t`, over `n` elements (the main
        /// kernel leaves the softmax scale of `dS K` to this pass: 32 fewer
        /// multiplications a thread and step there).
        #[tlx::kernel(num_warps = 4, configs = [(BLOCK = 2048)])]
        fn $convert<const BLOCK: usize>(dq_accum: Ptr<f32>, dq: Ptr<$t>, sm_scale: f32, n: i32) {
            let at = program_id(0) * BLOCK + arange(0, BLOCK);
            let scaled = load(dq_accum + at, mask = at < n) * sm_scale;
            store(dq + at, scaled.to($t), mask = at < n);
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

/// The backward kernels of one element type.
pub trait BackwardKernels: Element {
    /// Launches the three kernels for `problem`.
    fn launch_backward(
        device: &Device,
        saved: &AttentionSaved<Self>,
        grads: &AttentionGrads<Self>,
        workspace: &AttentionWorkspace,
        problem: &Attention,
    ) -> Result<(), Error>;
}

macro_rules! backward_kernels {
    ($t:ident, $pre:ident, $main:ident, $convert:ident) => {
        impl BackwardKernels for $t {
            fn launch_backward(
                device: &Device,
                saved: &AttentionSaved<Self>,
                grads: &AttentionGrads<Self>,
                workspace: &AttentionWorkspace,
                p: &Attention,
            ) -> Result<(), Error> {
                let (delta, dq_accum) = (&workspace.delta, &workspace.dq_accum);
                let lse_log2 = &workspace.lse_log2;
                let seq_pad = padded_seq(p.seq_q);
                let stats = (p.batch * p.heads, seq_pad);
                let stats_desc =
                    |buffer| TensorDesc::over(buffer, &[stats.0, stats.1], &[stats.1, 1]);
                let (lse_desc, delta_desc) = (&stats_desc(lse_log2)?, &stats_desc(delta)?);
                let queries = (p.heads, p.seq_q);
                let keys = (p.kv_heads, p.seq_kv);
                let q = &p.heads_desc(saved.q, queries)?;
                let k = &p.heads_desc(saved.k, keys)?;
                let v = &p.heads_desc(saved.v, keys)?;
                let d_o = &p.heads_desc(saved.d_o, queries)?;
                let dk = &p.heads_desc(grads.dk, keys)?;
                let dv = &p.heads_desc(grads.dv, keys)?;
                let dq_desc = &p.heads_desc(dq_accum, queries)?;
                let sizes = [p.heads, p.kv_heads, p.seq_q, p.seq_kv].map(|n| n as i32);
                let [heads, kv_heads, seq_q, seq_kv] = sizes;
                let elements = p.q_len();
                // `seq_pad` is a multiple of PREPROCESS_ROWS: the programs
                // cover every padding row too.
                let rows_grid = (
                    (seq_pad / PREPROCESS_ROWS) as u32,
                    (p.batch * p.heads) as u32,
                );
                let key_tiles = p.seq_kv.div_ceil(KEY_TILE);
                let kv_pairs = p.batch * p.kv_heads;
                // Non-causal: persistent programs, one per multiprocessor,
                // over the key tiles, so that a program's next tile's K, V,
                // Q and dO load while its dK and dV are stored (H200: +1-1.5%
                // at head dim 128). Causal: a program per tile (the kernel).
                let tiles = key_tiles * kv_pairs;
                let main_grid = if p.causal {
                    tiles
                } else {
                    tiles.min(device.multiprocessor_count() as usize)
                } as u32;
                // Causal programs longest first, in groups of heads about
                // two waves of programs long (see the kernel), from
                // `LONGEST_FIRST_MIN_KEYS` keys on; a group of one head is
                // the plain order.
                let two_waves = 2 * device.multiprocessor_count() as usize;
                let order_group = if p.seq_kv >= LONGEST_FIRST_MIN_KEYS {
                    (two_waves / key_tiles).max(1) as i32
                } else {
                    1
                };
                // Q/dO stages: three at head dim 64 (+2-6% on the H100);
                // at 128 a third would leave L1 32 KB and measured no faster.
                macro_rules! launch {
                    ($d:literal, $stages:literal, $causal:literal) => {{
                        $pre::<$d, PREPROCESS_ROWS>::launch(
                            device,
                            rows_grid,
                            saved.o,
                            saved.d_o,
                            saved.lse,
                            delta,
                            lse_log2,
                            dq_accum,
                            seq_q,
                            seq_pad as i32,
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
                            dq_desc,
                            lse_desc,
                            delta_desc,
                            p.scale,
                            heads,
                            kv_heads,
                            seq_q,
                            seq_kv,
                            key_tiles as i32,
                            kv_pairs as i32,
                            order_group,
                        )
                    }};
                }
                match (p.head_dim, p.causal) {
                    (64, false) => launch!(64, 3, false),
                    (64, true) => launch!(64, 3, true),
                    (128, false) => launch!(128, 2, false),
                    (128, true) => launch!(128, 2, true),
                    (d, _) => Err(super::head_dim_not_compiled(super::OP_BACKWARD, d)),
                }?;
                $convert::<CONVERT_BLOCK>::launch(
                    device,
                    elements.div_ceil(CONVERT_BLOCK) as u32,
                    dq_accum,
                    grads.dq,
                    p.scale,
                    elements as i32,
                )
            }
        }
    };
}

backward_kernels!(bf16, fa_bwd_preprocess, fa_bwd_main, fa_bwd_dq_convert);
backward_kernels!(
    f16,
    fa_bwd_preprocess_f16,
    fa_bwd_main_f16,
    fa_bwd_dq_convert_f16
);
