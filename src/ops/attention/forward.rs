//! The flash-attention forward kernel on Hopper in the TLX style (FA3's
//! schedule): `O = softmax(Q Kᵀ · scale) V` per (batch, head), with the
//! log-sum-exp of each row kept for the backward pass.
//!
//! Persistent: one program per SM loops over (batch, head, 128-row query
//! tile) in head-major order (neighbouring programs share K and V in L2);
//! a causal program takes its tiles in pairs, a head's longest with its
//! shortest, so that every program gets the same work. Its default task
//! (few registers; at head dim 128 one warp, holding its warp group) is the
//! producer: per tile it loads the two 64-row halves of Q, then K and V
//! tiles through rings of `STAGES` shared buffers with TMA, guarded by
//! `full`/`empty` mbarriers. Two consumer warp groups (a replicated task)
//! each own one half of Q and pipeline within themselves:
//! iteration `j` issues `S_j = Q K_jᵀ` and `O += P_{j-1} V_{j-1}` together,
//! then runs the online softmax of `S_j` (f32, `exp2` of scores scaled by
//! `scale · log2(e)` in one FMA) while the second product runs. Between
//! the two groups, two named barriers pass a turn on the tensor cores
//! (ping-pong): one group issues its products while the other does its
//! softmax (but at head dim 64 causal, where each group issues as soon as
//! it is ready). `P` goes to wgmma straight from registers; `O` leaves through
//! shared memory and a TMA store. Up to head dim 128 each group has two Q
//! buffers, so the next tile's Q is in place before a tile ends: the next
//! tile's first scores go in the same turn as the tile's last `P V` and
//! run while its output is stored (a spare tile after the last keeps the
//! wgmmas out of branches).
//!
//! At head dim 128 the key tiles go last first, so that the only tile
//! with scores to mask is a tile's first and the steps after it carry no
//! branch (see `DESCENDING`). From head dim 128 each thread keeps its
//! rows' sums in four parts, its own columns of the accumulator, and the
//! four threads of a row add them once a tile instead of once a step (see
//! `PARTS`).
//!
//! Descriptors with blocks of `[1, 1, rows, head_dim]` load one head's
//! rows, so TMA zero-fills past the end of a sequence and clips the output
//! store there, and any sequence lengths work.
//!
//! Head dims 64 and 128 take 128 keys a step; 256 takes 64 (an accumulator
//! of 128 registers a thread leaves room for no more scores), and its Q, K
//! and V buffers fill 192 KB, so O goes out through the consumer's own Q
//! buffer, handed back to the producer once the store has read it.

use super::Attention;
use crate::prelude::*;
use crate::{Element, PtrArg};

/// Query rows per tile (two consumer warp groups of 64).
pub(super) const QUERY_TILE: usize = 128;

/// The forward kernel for element type `$t`.
macro_rules! fa_forward_kernel {
    ($name:ident, $t:ident) => {
        #[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [
            (D = 64, BN = 128, STAGES = 2, CAUSAL = false, SHARED = false),
            (D = 64, BN = 128, STAGES = 2, CAUSAL = true, SHARED = true),
            (D = 128, BN = 128, STAGES = 2, CAUSAL = false, SHARED = true, num_warps = 1),
            (D = 128, BN = 128, STAGES = 2, CAUSAL = true, SHARED = true, num_warps = 1),
            (D = 256, BN = 64, STAGES = 2, CAUSAL = false, SHARED = false),
            (D = 256, BN = 64, STAGES = 2, CAUSAL = true, SHARED = false),
        ])]
        fn $name<
            const D: usize,
            const BN: usize,
            const STAGES: usize,
            const CAUSAL: bool,
            const SHARED: bool,
        >(
            q_desc: TensorDesc<$t, 1, 1, 64, D>,
            k_desc: TensorDesc<$t, 1, 1, BN, D>,
            v_desc: TensorDesc<$t, 1, 1, BN, D>,
            o_desc: TensorDesc<$t, 1, 1, 64, D>,
            lse: Ptr<f32>,
            sm_scale: f32,
            batch: i32,
            heads: i32,
            kv_heads: i32,
            seq_q: i32,
            seq_kv: i32,
        ) {
            // Up to head dim 128, each consumer has two Q buffers, so that
            // its next tile's Q is in place before this tile ends: the
            // next tile's first scores start with this tile's last
            // product. At 256 there is room for one.
            const Q_SETS: usize = if D <= 128 { 2 } else { 1 };
            let ahead = Q_SETS == 2;
            // The consumers take turns on the tensor cores, but at head dim
            // 64 causal: there each issuing when ready measured 0.5-2%
            // faster at every length (session 25, H100).
            const PING_PONG: bool = !(CAUSAL & (D == 64));
            // Key tiles go last first, so that the only one with scores to
            // mask (at the end of the keys, or on the diagonal) is a tile's
            // first, whose softmax runs with no product in flight: a branch
            // around the mask while `P V` runs made ptxas wait for `P V`
            // before every step's softmax, which then no longer overlapped
            // it (session 36: +2-3% at head dim 128 non-causal; session 37:
            // +1-2% causal, H200). Head dim 64 keeps ascending order (2%
            // slower causal descending, level non-causal), and so do
            // 64-key causal tiles, whose diagonal spans two tiles.
            const DESCENDING: bool = (D == 128) & !(CAUSAL & (BN < 128));
            let q_bufs = local_alloc([64, D], $t, 2 * Q_SETS);
            let k_bufs = local_alloc([BN, D], $t, STAGES);
            let v_bufs = local_alloc([BN, D], $t, STAGES);
            // At head dim 256, Q, K and V fill 192 of the 227 KB: O leaves
            // through its consumer's Q buffer, which goes back to the
            // producer only once the store has read it.
            let o_in_q = D > 128;
            let o_bufs = if o_in_q { q_bufs } else { local_alloc([64, D], $t, 2) };
            // One Q half per consumer and set, reloaded once it is done.
            let q_full = alloc_barriers(2 * Q_SETS, 1);
            let q_empty = alloc_barriers(2 * Q_SETS, 1);
            let k_full = alloc_barriers(STAGES, 1);
            let v_full = alloc_barriers(STAGES, 1);
            // Both consumers read every K and V tile.
            let k_empty = alloc_barriers(STAGES, 2);
            let v_empty = alloc_barriers(STAGES, 2);
            let m_tiles = cdiv(seq_q, 128);
            let num_tiles = m_tiles * batch * heads;
            let first = program_id(0);
            let stride = num_programs(0);
            let group = heads / kv_heads;
            // Reciprocals of the divisors `tile_coords` takes, once.
            let inv_stride = 1.0 / stride.to(f32);
            let inv_m_tiles = 1.0 / m_tiles.to(f32);
            let inv_heads = 1.0 / heads.to(f32);
            let inv_group = 1.0 / group.to(f32);
            // `n / d` for `0 <= n < 2^24` and `d > 0`, from `inv_d = 1 / d`:
            // a handful of instructions where an integer division by a
            // run-time value takes dozens, every tile. The float estimate
            // is off by at most one, which the remainder corrects. (Tile
            // indices stay below 2^24: that many 128-row tiles of Q would
            // not fit in any GPU's memory.)
            fn quotient(n: i32, d: i32, inv_d: f32) -> i32 {
                let q = (n.to(f32) * inv_d).to(i32);
                let r = n - q * d;
                if r < 0 {
                    q - 1
                } else if r >= d {
                    q + 1
                } else {
                    q
                }
            }
            // A tile's batch, head, key/value head, first query row and
            // number of key tiles. Programs take every `stride`-th tile.
            // Tiles run head-major, so that the programs of one round
            // share K and V in L2. Causal tiles differ in length: a
            // program takes two in a row (in two consecutive rounds) from
            // the two ends of one head, the longest left with the
            // shortest, so every pair holds the same work.
            fn tile_coords(
                tile: i32,
                stride: i32,
                num_tiles: i32,
                m_tiles: i32,
                heads: i32,
                group: i32,
                seq_kv: i32,
                inv_stride: f32,
                inv_m_tiles: f32,
                inv_heads: f32,
                inv_group: f32,
            ) -> (i32, i32, i32, i32, i32) {
                let (batch_head, m) = if CAUSAL {
                    // Rounds go in twos; in the last two, programs past
                    // `two` get one tile.
                    let round = quotient(tile, stride, inv_stride);
                    let base = round / 2 * (2 * stride);
                    let two = maximum(minimum(2 * stride, num_tiles - base) - stride, 0);
                    let p = tile - round * stride;
                    let order = if p < two { base + 2 * p + round % 2 } else { base + two + p };
                    let batch_head = quotient(order, m_tiles, inv_m_tiles);
                    let k = order - batch_head * m_tiles;
                    let m = if k % 2 == 0 { m_tiles - 1 - k / 2 } else { k / 2 };
                    (batch_head, m)
                } else {
                    let batch_head = quotient(tile, m_tiles, inv_m_tiles);
                    (batch_head, tile - batch_head * m_tiles)
                };
                let batch_i = quotient(batch_head, heads, inv_heads);
                let head = batch_head - batch_i * heads;
                let off_m = m * 128;
                let kv_end = if CAUSAL { minimum(seq_kv, off_m + 128) } else { seq_kv };
                (batch_i, head, quotient(head, group, inv_group), off_m, cdiv(kv_end, BN))
            }
            // The producer's loads of the `n`-th tile's Q (from row
            // `off_m` of one head): each consumer's half into its buffer of
            // the set the tile takes, once that is free.
            fn load_q(
                q_desc: TensorDesc,
                q_bufs: Buffers,
                q_full: Barriers,
                q_empty: Barriers,
                n: i32,
                batch_i: i32,
                head: i32,
                off_m: i32,
            ) {
                for half in static_range(0, 2) {
                    let q_slot = 2 * (n % Q_SETS) + half;
                    barrier_wait(local_view(q_empty, q_slot), (n / Q_SETS) % 2 ^ 1);
                    let q_bar = local_view(q_full, q_slot);
                    barrier_expect_bytes(q_bar, 64 * D * size_of(dtype_of(q_desc)));
                    let row0 = off_m + half * 64;
                    async_descriptor_load(q_desc, local_view(q_bufs, q_slot), [batch_i, head, row0, 0], q_bar);
                }
            }
            // The tensor cores' turns: group 0 takes the first; each
            // group passes the turn on after issuing its products.
            // Group 1 passes no turn after its very last, so that
            // every arrival on the two barriers meets a wait.
            fn take_turn(me: i32, turns: i32) {
                if PING_PONG & ((turns > 0) | (me == 1)) {
                    named_barrier_wait(8 + me, 256);
                }
            }
            fn pass_turn(me: i32, last: bool) {
                if PING_PONG & ((me == 0) | !last) {
                    named_barrier_arrive(9 - me, 256);
                }
            }
            // The key tile a tile's `j`-th step takes, of `n`.
            fn key_tile(j: i32, n: i32) -> i32 {
                if DESCENDING {
                    n - 1 - j
                } else {
                    j
                }
            }
            // Whether key tile `j` has scores to mask: only tiles at the
            // end of the keys or on the diagonal do.
            fn needs_mask(j: i32, row0: i32, seq_kv: i32) -> bool {
                let ragged = (j + 1) * BN > seq_kv;
                let diagonal = CAUSAL & ((j + 1) * BN > row0 + 1);
                ragged | diagonal
            }
            // The row sums' parts (see `softmax_step`): four from head dim
            // 128 (session 40, H200: +5% at 256 non-causal, +1% causal,
            // 0-1% at 128). Head dim 64 keeps one running sum per row and
            // its code as before: the parts, even one, measured 1-2% slower
            // there (session 41) with a key loop of the same instructions
            // in another order.
            const PARTS: usize = if D >= 128 { 4 } else { 1 };
            // One online-softmax step over key tile `j` (`masked`: with
            // its scores masked): the tile's probabilities (in `$t`), the
            // new running max, the row sums, and the factor that rescales
            // what came before. With one part the sums are the running
            // ones (`l_i` rescaled plus the tile's); with `PARTS` they are
            // the tile's own in parts, which the caller folds in. Part `b`
            // of four sums the columns `8 a + 2 b + c` over `a` and `c`:
            // in the tensor cores' accumulator those are one thread's, so a
            // step adds within threads, and the four threads of a row add
            // their parts once, at the tile's end (FA3's deferred sum: 4
            // shuffles and 4 adds a step fewer).
            fn softmax_step(
                s: f32,
                j: i32,
                row0: i32,
                m_i: f32,
                l_i: f32,
                qk_scale: f32,
                seq_kv: i32,
                masked: bool,
            ) -> ($t, f32, f32, f32) {
                let s = if masked {
                    // The last key a row sees, relative to the tile: the
                    // sequence's last or (causal) the row's own. One compare
                    // an element, where a test per condition took two and an
                    // `and` (d64 causal +3-7% on the H100).
                    let cols = arange(0, BN);
                    let visible = if CAUSAL {
                        let rows = row0 + arange(0, 64);
                        let bound = minimum(rows, seq_kv - 1) - j * BN;
                        cols[(None, ..)] <= bound[(.., None)]
                    } else {
                        cols[(None, ..)] < seq_kv - j * BN
                    };
                    select(visible, s, f32::NEG_INFINITY)
                } else {
                    s
                };
                // Every row sees the first key of its first tile (the last
                // tile's, descending), so the max is finite.
                let m_new = maximum(m_i, max(s, axis = 1) * qk_scale);
                let p = exp2(fma(s, qk_scale, -m_new[(.., None)]));
                let alpha = exp2(m_i - m_new);
                if PARTS == 1 {
                    (p.to($t), m_new, l_i * alpha + sum(p, axis = 1), alpha)
                } else {
                    let parts = sum(sum(reshape(p, [64, BN / 8, PARTS, 8 / PARTS]), axis = 1), axis = 2);
                    (p.to($t), m_new, parts, alpha)
                }
            }
            async_tasks! {
                // At head dim 128 (`num_warps = 1`) the producer is one
                // warp: its warp group's other three idle at the region's
                // end instead of polling the same barriers (FA3's layout;
                // session 37, H200: +0.5-1.8% non-causal, causal level).
                // At 64 four warps measured 1-2% faster; 256 is unmeasured.
                task(default, num_regs = 24) {
                    // K/V tiles loaded and tiles started so far: the rings'
                    // positions carry over from tile to tile.
                    let mut kv_done = 0;
                    let mut tiles_done = 0;
                    for tile in (first..num_tiles).step_by(stride) {
                        let (batch_i, head, kv_head, off_m, kv_tiles) =
                            tile_coords(
                            tile,
                            stride,
                            num_tiles,
                            m_tiles,
                            heads,
                            group,
                            seq_kv,
                            inv_stride,
                            inv_m_tiles,
                            inv_heads,
                            inv_group,
                        );
                        load_q(q_desc, q_bufs, q_full, q_empty, tiles_done, batch_i, head, off_m);
                        for j in 0..kv_tiles {
                            let it = kv_done + j;
                            let slot = it % STAGES;
                            // The first pass over the ring finds every stage free.
                            let free = (it / STAGES) % 2 ^ 1;
                            let tile_bytes = BN * D * size_of(dtype_of(k_desc));
                            let key0 = key_tile(j, kv_tiles) * BN;
                            barrier_wait(local_view(k_empty, slot), free);
                            let k_bar = local_view(k_full, slot);
                            barrier_expect_bytes(k_bar, tile_bytes);
                            async_descriptor_load(k_desc, local_view(k_bufs, slot), [batch_i, kv_head, key0, 0], k_bar);
                            barrier_wait(local_view(v_empty, slot), free);
                            let v_bar = local_view(v_full, slot);
                            barrier_expect_bytes(v_bar, tile_bytes);
                            async_descriptor_load(v_desc, local_view(v_bufs, slot), [batch_i, kv_head, key0, 0], v_bar);
                        }
                        kv_done += kv_tiles;
                        tiles_done += 1;
                    }
                    if ahead {
                        // The consumers' spare tile after their last: its
                        // first scores are started and never read, so any Q
                        // and K will do.
                        load_q(q_desc, q_bufs, q_full, q_empty, tiles_done, 0, 0, 0);
                        let slot = kv_done % STAGES;
                        barrier_wait(local_view(k_empty, slot), (kv_done / STAGES) % 2 ^ 1);
                        let k_bar = local_view(k_full, slot);
                        barrier_expect_bytes(k_bar, BN * D * size_of(dtype_of(k_desc)));
                        async_descriptor_load(k_desc, local_view(k_bufs, slot), [0, 0, 0, 0], k_bar);
                    }
                }
                task(num_warps = 4, num_regs = 240, replicate = 2, warp_group_start_id = 4, shared_body = SHARED) {
                    let me = async_task_replica_id();
                    let out = local_view(o_bufs, me);
                    // Scores in log2 units, so that the softmax is `exp2`.
                    let qk_scale = sm_scale * 1.4426950408889634;
                    let mut kv_done = 0;
                    let mut tiles_done = 0;
                    let mut turns = 0;
                    // A tile's first scores: started by the tile itself, or
                    // (`ahead`) in the last turn of the tile before, and
                    // for the first tile here. After the last tile comes a
                    // spare one, so that no wgmma is issued under a
                    // condition: ptxas would wait for every wgmma if one
                    // were in flight on one side of a branch only.
                    let mut s = zeros([64, BN], f32);
                    if ahead {
                        barrier_wait(local_view(q_full, me), 0);
                        barrier_wait(local_view(k_full, 0), 0);
                        take_turn(me, turns);
                        s = async_dot(local_view(q_bufs, me), local_trans(local_view(k_bufs, 0)), s);
                        pass_turn(me, first >= num_tiles);
                        turns += 1;
                    }
                    for tile in (first..num_tiles).step_by(stride) {
                        let (batch_i, head, _kv_head, off_m, kv_tiles) =
                            tile_coords(
                            tile,
                            stride,
                            num_tiles,
                            m_tiles,
                            heads,
                            group,
                            seq_kv,
                            inv_stride,
                            inv_m_tiles,
                            inv_heads,
                            inv_group,
                        );
                        let last_tile = tile + stride >= num_tiles;
                        let row0 = off_m + me * 64;
                        // The key tiles this group's rows see. With 64-key
                        // tiles, a causal tile's first group sees one fewer
                        // than the second: it skips the last (all masked).
                        let skips = CAUSAL & (BN < 128);
                        let kv_mine = if skips {
                            cdiv(minimum(seq_kv, row0 + 64), BN)
                        } else {
                            kv_tiles
                        };
                        let q_slot = 2 * (tiles_done % Q_SETS) + me;
                        let q_buf = local_view(q_bufs, q_slot);
                        // The first key tile: its scores alone.
                        let slot = kv_done % STAGES;
                        if !ahead {
                            barrier_wait(local_view(q_full, q_slot), (tiles_done / Q_SETS) % 2);
                            barrier_wait(local_view(k_full, slot), (kv_done / STAGES) % 2);
                            take_turn(me, turns);
                            s = async_dot(q_buf, local_trans(local_view(k_bufs, slot)), zeros([64, BN], f32));
                            pass_turn(me, false);
                            turns += 1;
                        }
                        let s0 = async_dot_wait(0, s);
                        barrier_arrive(local_view(k_empty, slot));
                        // Q's last product is done: the producer may load the
                        // next tile's while this one finishes.
                        barrier_arrive(local_view(q_empty, q_slot), pred = (kv_mine == 1) & !o_in_q);
                        let first_tile = key_tile(0, kv_mine);
                        // In parts, the first tile's start the sums (a start
                        // from zeros would carry the zeros' layout round the
                        // loop and move the parts into it every step).
                        let (mut p, mut m_i, mut l_i, _) = softmax_step(
                            s0,
                            first_tile,
                            row0,
                            full([64], f32::NEG_INFINITY, f32),
                            zeros([64], f32),
                            qk_scale,
                            seq_kv,
                            needs_mask(first_tile, row0, seq_kv),
                        );
                        let mut acc = zeros([64, D], f32);
                        for j in 1..kv_mine {
                            let it = kv_done + j;
                            let slot = it % STAGES;
                            let prev = (it - 1) % STAGES;
                            // The second group takes its turn after the first
                            // has issued its scores on the same K stage, which
                            // it waited for (FA3's order); not with 64-key causal
                            // tiles, where the first skips the second's last.
                            if !PING_PONG | (me == 0) | (CAUSAL & (BN < 128)) {
                                barrier_wait(local_view(k_full, slot), (it / STAGES) % 2);
                            }
                            take_turn(me, turns);
                            let s = async_dot(q_buf, local_trans(local_view(k_bufs, slot)), zeros([64, BN], f32));
                            // V only now, in every group (the first may have
                            // issued its scores before V landed): the scores
                            // need not wait for the values (FA3's order;
                            // session 39, H200: +1% at head dim 128, +3% at 64).
                            barrier_wait(local_view(v_full, prev), ((it - 1) / STAGES) % 2);
                            acc = async_dot(p, local_view(v_bufs, prev), acc);
                            pass_turn(me, false);
                            turns += 1;
                            // The older group, the scores, is done.
                            let s = async_dot_wait(1, s);
                            barrier_arrive(local_view(k_empty, slot));
                            barrier_arrive(local_view(q_empty, q_slot), pred = (j == kv_mine - 1) & !o_in_q);
                            // Descending, no step after the first masks.
                            let tile = key_tile(j, kv_mine);
                            let masked = !DESCENDING & needs_mask(tile, row0, seq_kv);
                            let (p_j, m_j, l_j, alpha) =
                                softmax_step(s, tile, row0, m_i, l_i, qk_scale, seq_kv, masked);
                            let l_j = if PARTS == 1 { l_j } else { l_i * alpha[(.., None)] + l_j };
                            acc = async_dot_wait(0, acc);
                            barrier_arrive(local_view(v_empty, prev));
                            acc = acc * alpha[(.., None)];
                            p = p_j;
                            m_i = m_j;
                            l_i = l_j;
                        }
                        if skips {
                            // The skipped tiles' turns, passed on at once,
                            // so that the other group's come as before.
                            for _ in kv_mine..kv_tiles {
                                take_turn(me, turns);
                                pass_turn(me, false);
                                turns += 1;
                            }
                        }
                        // The last tile's values and, `ahead`, the next
                        // tile's first scores, in one turn: they run while
                        // this tile's output is stored.
                        let it = kv_done + kv_mine - 1;
                        let slot = it % STAGES;
                        barrier_wait(local_view(v_full, slot), (it / STAGES) % 2);
                        if ahead {
                            let next_q = 2 * ((tiles_done + 1) % Q_SETS) + me;
                            let next_kv = kv_done + kv_tiles;
                            let next_k = next_kv % STAGES;
                            take_turn(me, turns);
                            acc = async_dot(p, local_view(v_bufs, slot), acc);
                            // The next tile's Q and K only now: this tile's
                            // last product need not wait for them (session 39:
                            // +0.5-1% up to 2048 tokens).
                            barrier_wait(local_view(q_full, next_q), ((tiles_done + 1) / Q_SETS) % 2);
                            barrier_wait(local_view(k_full, next_k), (next_kv / STAGES) % 2);
                            s = async_dot(local_view(q_bufs, next_q), local_trans(local_view(k_bufs, next_k)), zeros([64, BN], f32));
                            pass_turn(me, last_tile);
                            acc = async_dot_wait(1, acc);
                        } else {
                            take_turn(me, turns);
                            acc = async_dot(p, local_view(v_bufs, slot), acc);
                            pass_turn(me, last_tile);
                            acc = async_dot_wait(0, acc);
                            // Not the tile's scores, which would then stay
                            // live (in registers) through all its steps.
                            s = zeros([64, BN], f32);
                        }
                        turns += 1;
                        barrier_arrive(local_view(v_empty, slot));
                        if skips {
                            // The skipped stages, released unread once the
                            // producer has filled them: a release before the
                            // fill would count towards the stage's previous
                            // use, which the other group may still be reading.
                            for j in kv_mine..kv_tiles {
                                let it = kv_done + j;
                                let slot = it % STAGES;
                                let phase = (it / STAGES) % 2;
                                barrier_wait(local_view(k_full, slot), phase);
                                barrier_arrive(local_view(k_empty, slot));
                                barrier_wait(local_view(v_full, slot), phase);
                                barrier_arrive(local_view(v_empty, slot));
                            }
                        }
                        // The previous tile's store has finished reading the buffer.
                        async_descriptor_store_wait(0);
                        // One reciprocal per row, not a division per element:
                        // 64 IEEE divisions per thread cost as much as two
                        // key tiles' softmax, which short sequences felt.
                        // The rows' sums from their parts.
                        let l_i = if PARTS == 1 { l_i } else { sum(l_i, axis = 1) };
                        let inv_l = 1.0 / l_i;
                        local_store(out, (acc * inv_l[(.., None)]).to($t));
                        async_descriptor_store(o_desc, out, [batch_i, head, row0, 0]);
                        if o_in_q {
                            async_descriptor_store_wait(0);
                            barrier_arrive(local_view(q_empty, me));
                        }
                        // The natural log-sum-exp of each row's scaled scores.
                        let row_lse = (m_i + log2(l_i)) * 0.6931471805599453;
                        let rows = row0 + arange(0, 64);
                        let at = (batch_i * heads + head) * seq_q + rows;
                        store(lse + at, row_lse, mask = rows < seq_q);
                        kv_done += kv_tiles;
                        tiles_done += 1;
                    }
                    if ahead {
                        // The spare tile's scores, unused.
                        s = async_dot_wait(0, s);
                    }
                    async_descriptor_store_wait(0);
                }
            }
        }
    };
}

fa_forward_kernel!(hopper_fa_fwd, bf16);
fa_forward_kernel!(hopper_fa_fwd_f16, f16);

/// The forward kernels of one element type.
pub trait ForwardKernels: Element {
    /// Launches the configuration for `problem`'s head dim and causality;
    /// `descs` are Q, K, V and O.
    fn launch_forward(
        device: &Device,
        grid: u32,
        descs: [&TensorDesc<Self>; 4],
        lse: &dyn PtrArg<f32>,
        problem: &Attention,
    ) -> Result<(), Error>;
}

macro_rules! forward_kernels {
    ($t:ident, $kernel:ident) => {
        impl ForwardKernels for $t {
            fn launch_forward(
                device: &Device,
                grid: u32,
                [q, k, v, o]: [&TensorDesc<Self>; 4],
                lse: &dyn PtrArg<f32>,
                p: &Attention,
            ) -> Result<(), Error> {
                let sizes = [p.batch, p.heads, p.kv_heads, p.seq_q, p.seq_kv].map(|n| n as i32);
                let [batch, heads, kv_heads, seq_q, seq_kv] = sizes;
                macro_rules! launch {
                    ($d:literal, $bn:literal, $causal:literal, $shared:literal) => {
                        $kernel::<$d, $bn, 2, $causal, $shared>::launch(
                            device, grid, q, k, v, o, lse, p.scale, batch, heads, kv_heads, seq_q,
                            seq_kv,
                        )
                    };
                }
                // One copy of the consumers' code (`shared_body`) keeps the
                // instruction cache warm where tiles are short (+14-17% at
                // 512 causal tokens, session 20). Since session 29, when the
                // replica index became warp-uniform to ptxas, it is at least
                // as fast at every length at head dim 128 (H200: +1-3%
                // non-causal, +2-4% causal up to 1024) and causal at 64; d64
                // non-causal runs 1% faster with a copy per consumer.
                match (p.head_dim, p.causal) {
                    (64, false) => launch!(64, 128, false, false),
                    (64, true) => launch!(64, 128, true, true),
                    (128, false) => launch!(128, 128, false, true),
                    (128, true) => launch!(128, 128, true, true),
                    (256, false) => launch!(256, 64, false, false),
                    (256, true) => launch!(256, 64, true, false),
                    (d, _) => Err(super::head_dim_not_compiled(super::OP, d)),
                }
            }
        }
    };
}

forward_kernels!(bf16, hopper_fa_fwd);
forward_kernels!(f16, hopper_fa_fwd_f16);
