//! The shapes of generated kernels: block-level (elementwise with masks,
//! reductions, scans, dots, atomics) and TLX-level (a `cp.async` ring with
//! a random number of stages, a warp-specialized producer and replicated
//! consumers on mbarriers). Each case writes its kernel's source, says
//! its buffers and grid, computes what the kernel must produce, and offers
//! smaller cases to the shrinker.

use super::expr::{Env, Expr, V};
use super::Rng;

/// One generated kernel.
#[derive(Clone, Debug)]
pub enum Case {
    /// `of[i] = F`, `oi[i] = I` for `i < n`, masked past `n`.
    Elementwise {
        block: usize,
        warps: u32,
        n: usize,
        f: Expr,
        i: Expr,
    },
    /// A `[rows, cols]` tile per program reduced along `axis`.
    Reduce {
        rows: usize,
        cols: usize,
        warps: u32,
        programs: usize,
        axis: usize,
        op: Reduction,
        f: Expr,
        i: Expr,
    },
    /// `cumsum(I)` of a block per program: the exclusive scan and the total.
    Scan {
        block: usize,
        warps: u32,
        programs: usize,
        i: Expr,
    },
    /// `c = a @ b` over `k_tiles` tiles of `bk`, f16 in, f32 out.
    Dot {
        bm: usize,
        bn: usize,
        bk: usize,
        k_tiles: usize,
        warps: u32,
    },
    /// `atomic_add(oi + i % buckets, I)` for `i < n`.
    Atomic {
        block: usize,
        warps: u32,
        n: usize,
        buckets: usize,
        i: Expr,
    },
    /// `tiles` tiles of `x` through a ring of `stages` shared buffers filled
    /// by `async_load`, summed as `F` per program.
    Ring {
        block: usize,
        stages: usize,
        tiles: usize,
        warps: u32,
        programs: usize,
        f: Expr,
    },
    /// A producer task stores `tiles` tiles of `x` into a ring of `stages`
    /// buffers (full/empty mbarriers, or a `pipe!` when `pipe`);
    /// `replicas` consumer tasks of `consumer_warps` warps each sum `F`
    /// over them.
    WarpSpecialized {
        block: usize,
        stages: usize,
        tiles: usize,
        replicas: usize,
        consumer_warps: u32,
        programs: usize,
        pipe: bool,
        f: Expr,
    },
    /// A producer task (the kernel's 4 warps) hands `tiles` tiles of `x` to
    /// a consumer task (4 warps) through one shared buffer, on two named
    /// barriers (full: the producer arrives, the consumer waits; empty:
    /// the other way round), the consumer summing `F`.
    Named {
        block: usize,
        tiles: usize,
        programs: usize,
        f: Expr,
    },
    /// `tiles` `[rows, cols]` tiles of `x` through a ring of `stages`
    /// buffers filled by TMA (`async_descriptor_load`, one mbarrier per
    /// stage with its bytes announced), summed as `F` per program.
    TmaRing {
        rows: usize,
        cols: usize,
        stages: usize,
        tiles: usize,
        warps: u32,
        programs: usize,
        f: Expr,
    },
    /// The programs of each cluster of `cluster` pass `rounds` tiles of `x`
    /// around a ring through distributed shared memory (the next rank's
    /// inbox, two slots, full/empty mbarriers arrived on remotely), each
    /// summing `F` over what it receives.
    Cluster {
        block: usize,
        cluster: usize,
        rounds: usize,
        warps: u32,
        clusters: usize,
        f: Expr,
    },
}

#[derive(Clone, Copy, Debug)]
pub enum Reduction {
    Sum,
    Max,
    Min,
}

/// A global buffer of a case: input (filled with random values) or output
/// (poisoned, or for atomics holding random starting values).
#[derive(Clone, Debug)]
pub struct Buffer {
    pub name: &'static str,
    pub elem: Elem,
    pub len: usize,
    pub role: Role,
    /// Passed as a TMA descriptor of a row-major `[rows, cols]` matrix
    /// over the buffer, not as a pointer.
    pub matrix: Option<[usize; 2]>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elem {
    F32,
    F16,
    I32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
    Input,
    Output,
    /// Read and updated in place (atomics).
    Accumulate,
}

/// What an output element must be.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    Exact(V),
    /// A float within `tolerance` of `value` (sums in another order,
    /// products of halves).
    Near {
        value: f64,
        tolerance: f64,
    },
}

/// A buffer's contents as the run sees them.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F16(Vec<half::f16>),
    I32(Vec<i32>),
}

impl Data {
    pub fn at(&self, i: usize) -> V {
        match self {
            Data::F32(v) => V::F(v[i]),
            Data::F16(v) => V::F(v[i].to_f32()),
            Data::I32(v) => V::I(v[i]),
        }
    }
}

fn warps(rng: &mut Rng) -> u32 {
    [1, 2, 4, 8][rng.below(4)]
}

fn pow2(rng: &mut Rng, lo: u32, hi: u32) -> usize {
    1 << (lo + rng.below((hi - lo + 1) as usize) as u32)
}

impl Case {
    pub fn random(rng: &mut Rng) -> Case {
        let depth = 1 + rng.below(4) as u32;
        match rng.below(10) {
            0 => {
                let block = pow2(rng, 5, 10);
                Case::Elementwise {
                    block,
                    warps: warps(rng),
                    n: 1 + rng.below(3 * block),
                    f: Expr::float(rng, depth),
                    i: Expr::int(rng, depth),
                }
            }
            1 => Case::Reduce {
                rows: pow2(rng, 1, 5),
                cols: pow2(rng, 1, 7),
                warps: warps(rng),
                programs: 1 + rng.below(3),
                axis: rng.below(2),
                op: [Reduction::Sum, Reduction::Max, Reduction::Min][rng.below(3)],
                f: Expr::float(rng, depth),
                i: Expr::int(rng, depth),
            },
            2 => Case::Scan {
                block: pow2(rng, 4, 10),
                warps: warps(rng),
                programs: 1 + rng.below(3),
                i: Expr::int(rng, depth),
            },
            3 => Case::Dot {
                bm: pow2(rng, 4, 6),
                bn: pow2(rng, 4, 6),
                bk: pow2(rng, 4, 6),
                k_tiles: 1 + rng.below(3),
                warps: [4, 8][rng.below(2)],
            },
            4 => {
                let block = pow2(rng, 5, 9);
                Case::Atomic {
                    block,
                    warps: warps(rng),
                    n: 1 + rng.below(3 * block),
                    buckets: 1 + rng.below(40),
                    i: Expr::int(rng, depth),
                }
            }
            5 => Case::Ring {
                block: pow2(rng, 5, 9),
                stages: 2 + rng.below(3),
                tiles: 1 + rng.below(6),
                warps: warps(rng),
                programs: 1 + rng.below(3),
                f: Expr::float(rng, depth),
            },
            8 => Case::Named {
                block: pow2(rng, 5, 9),
                tiles: 1 + rng.below(5),
                programs: 1 + rng.below(3),
                f: Expr::float(rng, depth),
            },
            7 => Case::TmaRing {
                rows: pow2(rng, 3, 6),
                cols: pow2(rng, 3, 5),
                stages: 1 + rng.below(3),
                tiles: 1 + rng.below(6),
                warps: [4, 8][rng.below(2)],
                programs: 1 + rng.below(3),
                f: Expr::float(rng, depth),
            },
            6 => Case::Cluster {
                block: pow2(rng, 5, 9),
                cluster: [2, 4][rng.below(2)],
                rounds: 1 + rng.below(6),
                warps: warps(rng),
                clusters: 1 + rng.below(2),
                f: Expr::float(rng, depth),
            },
            _ => Case::WarpSpecialized {
                block: pow2(rng, 5, 9),
                stages: 1 + rng.below(3),
                tiles: 1 + rng.below(6),
                replicas: 1 + rng.below(2),
                consumer_warps: [1, 2, 4][rng.below(3)],
                programs: 1 + rng.below(2),
                pipe: rng.below(2) == 0,
                f: Expr::float(rng, depth),
            },
        }
    }

    pub fn family(&self) -> &'static str {
        match self {
            Case::Elementwise { .. } => "elementwise",
            Case::Reduce { .. } => "reduce",
            Case::Scan { .. } => "scan",
            Case::Dot { .. } => "dot",
            Case::Atomic { .. } => "atomic",
            Case::Ring { .. } => "ring",
            Case::WarpSpecialized { pipe: true, .. } => "pipe",
            Case::Cluster { .. } => "cluster",
            Case::TmaRing { .. } => "tma_ring",
            Case::Named { .. } => "named_barriers",
            Case::WarpSpecialized { .. } => "warp_specialized",
        }
    }

    /// The kernel's source, attribute included.
    pub fn source(&self) -> String {
        match self {
            Case::Elementwise { block, warps, f, i, .. } => format!(
                "#[tlx::kernel(num_warps = {warps}, configs = [(BLOCK = {block})])]
fn rk<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, a: Ptr<i32>, of: Ptr<f32>, oi: Ptr<i32>, n: i32) {{
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let xv = load(x + offs, mask = mask, other = 1.0);
    let yv = load(y + offs, mask = mask, other = 1.0);
    let av = load(a + offs, mask = mask, other = 1);
    store(of + offs, {}, mask = mask);
    store(oi + offs, {}, mask = mask);
}}",
                f.text(),
                i.text()
            ),
            Case::Reduce { rows, cols, warps, axis, op, f, i, .. } => {
                let op = match op {
                    Reduction::Sum => "sum",
                    Reduction::Max => "max",
                    Reduction::Min => "min",
                };
                let out = if *axis == 0 { "C" } else { "R" };
                format!(
                    "#[tlx::kernel(num_warps = {warps}, configs = [(R = {rows}, C = {cols})])]
fn rk<const R: usize, const C: usize>(x: Ptr<f32>, y: Ptr<f32>, a: Ptr<i32>, of: Ptr<f32>, oi: Ptr<i32>) {{
    let offs = program_id(0) * R * C + arange(0, R)[(.., None)] * C + arange(0, C)[(None, ..)];
    let xv = load(x + offs);
    let yv = load(y + offs);
    let av = load(a + offs);
    let outs = program_id(0) * {out} + arange(0, {out});
    store(of + outs, {op}({}, axis = {axis}));
    store(oi + outs, {op}({}, axis = {axis}));
}}",
                    f.text(),
                    i.text()
                )
            }
            Case::Scan { block, warps, i, .. } => format!(
                "#[tlx::kernel(num_warps = {warps}, configs = [(BLOCK = {block})])]
fn rk<const BLOCK: usize>(a: Ptr<i32>, oi: Ptr<i32>, ot: Ptr<i32>) {{
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let av = load(a + offs);
    let xv = av.to(f32) * 0.5;
    let yv = av.to(f32) - 3.0;
    let (before, total) = cumsum({}, axis = 0);
    store(oi + offs, before);
    store(ot + program_id(0), total);
}}",
                i.text()
            ),
            Case::Dot { bm, bn, bk, warps, .. } => format!(
                "#[tlx::kernel(num_warps = {warps}, configs = [(BM = {bm}, BN = {bn}, BK = {bk})])]
fn rk<const BM: usize, const BN: usize, const BK: usize>(a: Ptr<f16>, b: Ptr<f16>, c: Ptr<f32>, k_tiles: i32) {{
    let rm = arange(0, BM);
    let rn = arange(0, BN);
    let rk = arange(0, BK);
    let k = k_tiles * BK;
    let mut acc = zeros([BM, BN], f32);
    for t in 0..k_tiles {{
        let at = load(a + rm[(.., None)] * k + (t * BK + rk)[(None, ..)]);
        let bt = load(b + (t * BK + rk)[(.., None)] * BN + rn[(None, ..)]);
        acc = dot(at, bt, acc);
    }}
    store(c + rm[(.., None)] * BN + rn[(None, ..)], acc);
}}"
            ),
            Case::Atomic { block, warps, buckets, i, .. } => format!(
                "#[tlx::kernel(num_warps = {warps}, configs = [(BLOCK = {block})])]
fn rk<const BLOCK: usize>(a: Ptr<i32>, oi: Ptr<i32>, n: i32) {{
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let av = load(a + offs, mask = mask, other = 0);
    let xv = av.to(f32) * 0.5;
    let yv = av.to(f32) - 3.0;
    atomic_add(oi + offs % {buckets}, {}, mask = mask);
}}",
                i.text()
            ),
            Case::Ring { block, stages, warps, f, .. } => format!(
                "#[tlx::kernel(num_warps = {warps}, configs = [(BLOCK = {block}, S = {stages})])]
fn rk<const BLOCK: usize, const S: usize>(x: Ptr<f32>, y: Ptr<f32>, of: Ptr<f32>, tiles: i32) {{
    let pid = program_id(0);
    let bufs = local_alloc([BLOCK], f32, S);
    let cols = arange(0, BLOCK);
    let base = x + pid * tiles * BLOCK;
    let yv = load(y + pid * BLOCK + cols);
    for t in 0..S - 1 {{
        async_load(base + t * BLOCK + cols, local_view(bufs, t % S), mask = t * BLOCK + cols < tiles * BLOCK);
        async_load_commit_group();
    }}
    let mut acc = zeros([BLOCK], f32);
    for i in 0..tiles {{
        async_load_wait_group(S - 2);
        let xv = local_load(local_view(bufs, i % S));
        let av = (xv * 8.0).to(i32);
        acc = acc + {};
        let t = i + S - 1;
        async_load(base + t * BLOCK + cols, local_view(bufs, t % S), mask = t * BLOCK + cols < tiles * BLOCK);
        async_load_commit_group();
    }}
    async_load_wait_group(0);
    store(of + pid * BLOCK + cols, acc);
}}",
                f.text()
            ),
            Case::Named { block, f, .. } => format!(
                "#[tlx::kernel(arch = \"sm_90a\", num_warps = 4, configs = [(BLOCK = {block})])]
fn rk<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, of: Ptr<f32>, tiles: i32) {{
    let pid = program_id(0);
    let bufs = local_alloc([BLOCK], f32, 1);
    let cols = arange(0, BLOCK);
    async_tasks! {{
        task(default) {{
            for t in 0..tiles {{
                if t > 0 {{
                    named_barrier_wait(9, 256);
                }}
                local_store(local_view(bufs, 0), load(x + (pid * tiles + t) * BLOCK + cols));
                named_barrier_arrive(8, 256);
            }}
        }}
        task(num_warps = 4) {{
            let yv = load(y + pid * BLOCK + cols);
            let mut acc = zeros([BLOCK], f32);
            for t in 0..tiles {{
                named_barrier_wait(8, 256);
                let xv = local_load(local_view(bufs, 0));
                let av = (xv * 8.0).to(i32);
                acc = acc + {};
                if t + 1 < tiles {{
                    named_barrier_arrive(9, 256);
                }}
            }}
            store(of + pid * BLOCK + cols, acc);
        }}
    }}
}}",
                f.text()
            ),
            Case::TmaRing { rows, cols, stages, warps, f, .. } => format!(
                "#[tlx::kernel(arch = \"sm_90a\", num_warps = {warps}, configs = [(BR = {rows}, BC = {cols}, S = {stages})])]
fn rk<const BR: usize, const BC: usize, const S: usize>(xd: TensorDesc<f32, BR, BC>, y: Ptr<f32>, of: Ptr<f32>, tiles: i32) {{
    let pid = program_id(0);
    let bufs = local_alloc([BR, BC], f32, S);
    let bars = alloc_barriers(S, 1);
    let at = arange(0, BR)[(.., None)] * BC + arange(0, BC)[(None, ..)];
    let yv = load(y + pid * BR * BC + at);
    for t in 0..S {{
        if t < tiles {{
            barrier_expect_bytes(local_view(bars, t), BR * BC * 4);
            async_descriptor_load(xd, local_view(bufs, t), [(pid * tiles + t) * BR, 0], local_view(bars, t));
        }}
    }}
    let mut acc = zeros([BR, BC], f32);
    for i in 0..tiles {{
        let s = i % S;
        barrier_wait(local_view(bars, s), (i / S) % 2);
        let xv = local_load(local_view(bufs, s));
        let av = (xv * 8.0).to(i32);
        acc = acc + {};
        let t = i + S;
        if t < tiles {{
            barrier_expect_bytes(local_view(bars, s), BR * BC * 4);
            async_descriptor_load(xd, local_view(bufs, s), [(pid * tiles + t) * BR, 0], local_view(bars, s));
        }}
    }}
    store(of + pid * BR * BC + at, acc);
}}",
                f.text()
            ),
            Case::Cluster { block, cluster, rounds, warps, f, .. } => format!(
                "#[tlx::kernel(num_warps = {warps}, ctas_per_cga = {cluster}, configs = [(BLOCK = {block}, ROUNDS = {rounds})])]
fn rk<const BLOCK: usize, const ROUNDS: usize>(x: Ptr<f32>, y: Ptr<f32>, of: Ptr<f32>) {{
    let inbox = local_alloc([BLOCK], f32, 2);
    let full = alloc_barriers(2, 1);
    let empty = alloc_barriers(2, 1);
    fence_mbarrier_init_cluster();
    cluster_barrier();
    let rank = cluster_cta_rank();
    let next = (rank + 1) % {cluster};
    let prev = (rank + {cluster} - 1) % {cluster};
    let pid = program_id(0);
    let cols = arange(0, BLOCK);
    let yv = load(y + pid * BLOCK + cols);
    let mut acc = zeros([BLOCK], f32);
    for i in 0..ROUNDS {{
        let slot = i % 2;
        let phase = (i / 2) & 1;
        if i >= 2 {{
            barrier_wait(local_view(empty, slot), phase ^ 1);
        }}
        remote_shmem_store(local_view(inbox, slot), load(x + (pid * ROUNDS + i) * BLOCK + cols), next);
        barrier_arrive(local_view(full, slot), 1, remote_cta_rank = next);
        barrier_wait(local_view(full, slot), phase);
        let xv = local_load(local_view(inbox, slot));
        let av = (xv * 8.0).to(i32);
        acc = acc + {};
        barrier_arrive(local_view(empty, slot), 1, remote_cta_rank = prev);
    }}
    store(of + pid * BLOCK + cols, acc);
    cluster_barrier();
}}",
                f.text()
            ),
            Case::WarpSpecialized { block, stages, replicas, consumer_warps, pipe: true, f, .. } => format!(
                "#[tlx::kernel(arch = \"sm_90a\", num_warps = 4, configs = [(BLOCK = {block}, S = {stages}, R = {replicas})])]
fn rk<const BLOCK: usize, const S: usize, const R: usize>(x: Ptr<f32>, y: Ptr<f32>, of: Ptr<f32>, tiles: i32) {{
    let pid = program_id(0);
    let bufs = local_alloc([BLOCK], f32, S);
    let ring = pipe!(capacity = S, x = bufs);
    let cols = arange(0, BLOCK);
    async_tasks! {{
        task(default) {{
            let writer = ring.writer();
            for t in 0..tiles {{
                let slot = writer.acquire(t);
                local_store(slot.x, load(x + (pid * tiles + t) * BLOCK + cols));
                writer.commit(t);
            }}
        }}
        task(num_warps = {consumer_warps}, replicate = R) {{
            let r = async_task_replica_id();
            let reader = ring.reader();
            let yv = load(y + (pid * R + r) * BLOCK + cols);
            let mut acc = zeros([BLOCK], f32);
            for t in 0..tiles {{
                let ready = reader.wait(t);
                let xv = local_load(ready.x);
                let av = (xv * 8.0).to(i32);
                acc = acc + {};
                reader.release(t);
            }}
            store(of + (pid * R + r) * BLOCK + cols, acc);
        }}
    }}
}}",
                f.text()
            ),
            Case::WarpSpecialized { block, stages, replicas, consumer_warps, f, .. } => format!(
                "#[tlx::kernel(arch = \"sm_90a\", num_warps = 4, configs = [(BLOCK = {block}, S = {stages}, R = {replicas})])]
fn rk<const BLOCK: usize, const S: usize, const R: usize>(x: Ptr<f32>, y: Ptr<f32>, of: Ptr<f32>, tiles: i32) {{
    let pid = program_id(0);
    let bufs = local_alloc([BLOCK], f32, S);
    let full = alloc_barriers(S, 1);
    let empty = alloc_barriers(S, R);
    let cols = arange(0, BLOCK);
    async_tasks! {{
        task(default) {{
            for t in 0..tiles {{
                let s = t % S;
                barrier_wait(local_view(empty, s), (t / S) % 2 ^ 1);
                local_store(local_view(bufs, s), load(x + (pid * tiles + t) * BLOCK + cols));
                barrier_arrive(local_view(full, s));
            }}
        }}
        task(num_warps = {consumer_warps}, replicate = R) {{
            let r = async_task_replica_id();
            let yv = load(y + (pid * R + r) * BLOCK + cols);
            let mut acc = zeros([BLOCK], f32);
            for t in 0..tiles {{
                let s = t % S;
                barrier_wait(local_view(full, s), (t / S) % 2);
                let xv = local_load(local_view(bufs, s));
                let av = (xv * 8.0).to(i32);
                acc = acc + {};
                barrier_arrive(local_view(empty, s));
            }}
            store(of + (pid * R + r) * BLOCK + cols, acc);
        }}
    }}
}}",
                f.text()
            ),
        }
    }

    /// The buffers, in parameter order, and the scalar arguments after them.
    pub fn buffers(&self) -> (Vec<Buffer>, Vec<i32>) {
        let b = |name, elem, len, role| Buffer {
            name,
            elem,
            len,
            role,
            matrix: None,
        };
        use Elem::*;
        use Role::*;
        match self {
            Case::Elementwise { block, n, .. } => {
                let len = n.div_ceil(*block) * block;
                (
                    vec![
                        b("x", F32, len, Input),
                        b("y", F32, len, Input),
                        b("a", I32, len, Input),
                        b("of", F32, len, Output),
                        b("oi", I32, len, Output),
                    ],
                    vec![*n as i32],
                )
            }
            Case::Reduce {
                rows,
                cols,
                programs,
                axis,
                ..
            } => {
                let len = rows * cols * programs;
                let out = if *axis == 0 { *cols } else { *rows } * programs;
                (
                    vec![
                        b("x", F32, len, Input),
                        b("y", F32, len, Input),
                        b("a", I32, len, Input),
                        b("of", F32, out, Output),
                        b("oi", I32, out, Output),
                    ],
                    vec![],
                )
            }
            Case::Scan {
                block, programs, ..
            } => (
                vec![
                    b("a", I32, block * programs, Input),
                    b("oi", I32, block * programs, Output),
                    b("ot", I32, *programs, Output),
                ],
                vec![],
            ),
            Case::Dot {
                bm,
                bn,
                bk,
                k_tiles,
                ..
            } => (
                vec![
                    b("a", F16, bm * bk * k_tiles, Input),
                    b("b", F16, bk * k_tiles * bn, Input),
                    b("c", F32, bm * bn, Output),
                ],
                vec![*k_tiles as i32],
            ),
            Case::Atomic {
                block, n, buckets, ..
            } => (
                vec![
                    b("a", I32, n.div_ceil(*block) * block, Input),
                    b("oi", I32, *buckets, Accumulate),
                ],
                vec![*n as i32],
            ),
            Case::Ring {
                block,
                tiles,
                programs,
                ..
            } => (
                vec![
                    b("x", F32, block * tiles * programs, Input),
                    b("y", F32, block * programs, Input),
                    b("of", F32, block * programs, Output),
                ],
                vec![*tiles as i32],
            ),
            Case::WarpSpecialized {
                block,
                tiles,
                replicas,
                programs,
                ..
            } => (
                vec![
                    b("x", F32, block * tiles * programs, Input),
                    b("y", F32, block * replicas * programs, Input),
                    b("of", F32, block * replicas * programs, Output),
                ],
                vec![*tiles as i32],
            ),
            Case::Named {
                block,
                tiles,
                programs,
                ..
            } => (
                vec![
                    b("x", F32, block * tiles * programs, Input),
                    b("y", F32, block * programs, Input),
                    b("of", F32, block * programs, Output),
                ],
                vec![*tiles as i32],
            ),
            Case::TmaRing {
                rows,
                cols,
                tiles,
                programs,
                ..
            } => {
                let tile = rows * cols;
                let mut x = b("xd", F32, tile * tiles * programs, Input);
                x.matrix = Some([rows * tiles * programs, *cols]);
                (
                    vec![
                        x,
                        b("y", F32, tile * programs, Input),
                        b("of", F32, tile * programs, Output),
                    ],
                    vec![*tiles as i32],
                )
            }
            Case::Cluster {
                block,
                cluster,
                rounds,
                clusters,
                ..
            } => {
                let programs = cluster * clusters;
                (
                    vec![
                        b("x", F32, block * rounds * programs, Input),
                        b("y", F32, block * programs, Input),
                        b("of", F32, block * programs, Output),
                    ],
                    vec![],
                )
            }
        }
    }

    pub fn programs(&self) -> u32 {
        match self {
            Case::Elementwise { block, n, .. } | Case::Atomic { block, n, .. } => {
                n.div_ceil(*block) as u32
            }
            Case::Reduce { programs, .. }
            | Case::Scan { programs, .. }
            | Case::Ring { programs, .. }
            | Case::WarpSpecialized { programs, .. }
            | Case::TmaRing { programs, .. }
            | Case::Named { programs, .. } => *programs as u32,
            Case::Dot { .. } => 1,
            Case::Cluster {
                cluster, clusters, ..
            } => (cluster * clusters) as u32,
        }
    }

    /// What each output buffer must hold, given every buffer as it was
    /// before the launch (`None` for an element the kernel must not write).
    pub fn expected(&self, before: &[Data]) -> Vec<(usize, Vec<Option<Want>>)> {
        let f32s = |d: &Data| match d {
            Data::F32(v) => v.clone(),
            _ => unreachable!("an f32 buffer"),
        };
        let i32s = |d: &Data| match d {
            Data::I32(v) => v.clone(),
            _ => unreachable!("an i32 buffer"),
        };
        let exact = |v: V| Some(Want::Exact(v));
        match self {
            Case::Elementwise { n, f, i, .. } => {
                let (x, y, a) = (f32s(&before[0]), f32s(&before[1]), i32s(&before[2]));
                let len = x.len();
                let env = |k: usize| Env {
                    x: x[k],
                    y: y[k],
                    a: a[k],
                };
                let of = (0..len)
                    .map(|k| {
                        if k < *n {
                            exact(f.eval(env(k)))
                        } else {
                            exact(before[3].at(k))
                        }
                    })
                    .collect();
                let oi = (0..len)
                    .map(|k| {
                        if k < *n {
                            exact(i.eval(env(k)))
                        } else {
                            exact(before[4].at(k))
                        }
                    })
                    .collect();
                vec![(3, of), (4, oi)]
            }
            Case::Reduce {
                rows,
                cols,
                programs,
                axis,
                op,
                f,
                i,
                ..
            } => {
                let (x, y, a) = (f32s(&before[0]), f32s(&before[1]), i32s(&before[2]));
                let (outer, inner) = if *axis == 0 {
                    (*cols, *rows)
                } else {
                    (*rows, *cols)
                };
                let mut of = Vec::new();
                let mut oi = Vec::new();
                for p in 0..*programs {
                    for o in 0..outer {
                        let at = |k: usize| {
                            let (r, c) = if *axis == 0 { (k, o) } else { (o, k) };
                            let e = p * rows * cols + r * cols + c;
                            Env {
                                x: x[e],
                                y: y[e],
                                a: a[e],
                            }
                        };
                        let fs: Vec<f32> = (0..inner)
                            .map(|k| match f.eval(at(k)) {
                                V::F(v) => v,
                                V::I(v) => v as f32,
                            })
                            .collect();
                        let is: Vec<i32> = (0..inner)
                            .map(|k| match i.eval(at(k)) {
                                V::I(v) => v,
                                V::F(v) => v as i32,
                            })
                            .collect();
                        match op {
                            Reduction::Sum => {
                                let value: f64 = fs.iter().map(|v| f64::from(*v)).sum();
                                let scale: f64 = fs.iter().map(|v| f64::from(v.abs())).sum();
                                of.push(Some(Want::Near {
                                    value,
                                    tolerance: 1e-5 * scale + 1e-30,
                                }));
                                oi.push(exact(V::I(
                                    is.iter().fold(0i32, |s, v| s.wrapping_add(*v)),
                                )));
                            }
                            Reduction::Max => {
                                of.push(exact(V::F(
                                    fs.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                                )));
                                oi.push(exact(V::I(is.iter().copied().max().unwrap_or(i32::MIN))));
                            }
                            Reduction::Min => {
                                of.push(exact(V::F(
                                    fs.iter().copied().fold(f32::INFINITY, f32::min),
                                )));
                                oi.push(exact(V::I(is.iter().copied().min().unwrap_or(i32::MAX))));
                            }
                        }
                    }
                }
                vec![(3, of), (4, oi)]
            }
            Case::Scan {
                block, programs, i, ..
            } => {
                let a = i32s(&before[0]);
                let mut before_sums = Vec::new();
                let mut totals = Vec::new();
                for p in 0..*programs {
                    let mut run = 0i32;
                    for k in 0..*block {
                        before_sums.push(exact(V::I(run)));
                        let v = i.eval(derived(a[p * block + k]));
                        run = run.wrapping_add(match v {
                            V::I(v) => v,
                            V::F(v) => v as i32,
                        });
                    }
                    totals.push(exact(V::I(run)));
                }
                vec![(1, before_sums), (2, totals)]
            }
            Case::Dot {
                bm,
                bn,
                bk,
                k_tiles,
                ..
            } => {
                let half = |d: &Data| match d {
                    Data::F16(v) => v.iter().map(|h| f64::from(h.to_f32())).collect::<Vec<_>>(),
                    _ => unreachable!("an f16 buffer"),
                };
                let (a, b) = (half(&before[0]), half(&before[1]));
                let k = bk * k_tiles;
                let mut c = Vec::new();
                for m in 0..*bm {
                    for n in 0..*bn {
                        let terms = (0..k).map(|j| a[m * k + j] * b[j * bn + n]);
                        let (value, scale) =
                            terms.fold((0.0, 0.0), |(s, t), v| (s + v, t + v.abs()));
                        c.push(Some(Want::Near {
                            value,
                            tolerance: 1e-5 * scale + 1e-30,
                        }));
                    }
                }
                vec![(2, c)]
            }
            Case::Atomic { n, buckets, i, .. } => {
                let a = i32s(&before[0]);
                let mut sums = i32s(&before[1]);
                for k in 0..*n {
                    let v = i.eval(derived(a[k]));
                    let v = match v {
                        V::I(v) => v,
                        V::F(v) => v as i32,
                    };
                    sums[k % buckets] = sums[k % buckets].wrapping_add(v);
                }
                vec![(1, sums.into_iter().map(|v| exact(V::I(v))).collect())]
            }
            Case::Ring {
                block,
                tiles,
                programs,
                f,
                ..
            } => {
                let (x, y) = (f32s(&before[0]), f32s(&before[1]));
                vec![(2, tile_sums(&x, &y, *block, *tiles, *programs, 1, f))]
            }
            Case::WarpSpecialized {
                block,
                tiles,
                replicas,
                programs,
                f,
                ..
            } => {
                let (x, y) = (f32s(&before[0]), f32s(&before[1]));
                vec![(
                    2,
                    tile_sums(&x, &y, *block, *tiles, *programs, *replicas, f),
                )]
            }
            Case::Named {
                block,
                tiles,
                programs,
                f,
            } => {
                let (x, y) = (f32s(&before[0]), f32s(&before[1]));
                vec![(2, tile_sums(&x, &y, *block, *tiles, *programs, 1, f))]
            }
            Case::TmaRing {
                rows,
                cols,
                tiles,
                programs,
                f,
                ..
            } => {
                let (x, y) = (f32s(&before[0]), f32s(&before[1]));
                vec![(2, tile_sums(&x, &y, rows * cols, *tiles, *programs, 1, f))]
            }
            Case::Cluster {
                block,
                cluster,
                rounds,
                clusters,
                f,
                ..
            } => {
                let (x, y) = (f32s(&before[0]), f32s(&before[1]));
                let mut of = Vec::new();
                for p in 0..cluster * clusters {
                    let rank = p % cluster;
                    let from = p - rank + (rank + cluster - 1) % cluster;
                    for c in 0..*block {
                        let yv = y[p * block + c];
                        let mut acc = 0f32;
                        for i in 0..*rounds {
                            let xv = x[(from * rounds + i) * block + c];
                            acc += f
                                .eval(Env {
                                    x: xv,
                                    y: yv,
                                    a: (xv * 8.0) as i32,
                                })
                                .f();
                        }
                        of.push(Some(Want::Exact(V::F(acc))));
                    }
                }
                vec![(2, of)]
            }
        }
    }

    /// Smaller cases that keep the family: a simpler expression, fewer
    /// tiles, stages, replicas, programs, elements.
    pub fn shrunk(&self) -> Vec<Case> {
        let mut out = Vec::new();
        let mut probe = self.clone();
        let exprs: Vec<(Expr, bool)> = probe
            .exprs_mut()
            .into_iter()
            .map(|(e, float)| (e.clone(), float))
            .collect();
        for (k, (expr, float)) in exprs.into_iter().enumerate() {
            for smaller in expr.shrunk(float) {
                let mut case = self.clone();
                *case.exprs_mut()[k].0 = smaller;
                out.push(case);
            }
        }
        let counts: Vec<(usize, Lower, usize)> = probe
            .counts_mut()
            .into_iter()
            .map(|(value, lower, floor)| (*value, lower, floor))
            .collect();
        for (k, (value, lower, floor)) in counts.into_iter().enumerate() {
            if value > floor {
                let mut case = self.clone();
                *case.counts_mut()[k].0 = lower.from(value, floor);
                out.push(case);
            }
        }
        out
    }

    /// The case's expressions, each with whether it is a float one.
    fn exprs_mut(&mut self) -> Vec<(&mut Expr, bool)> {
        match self {
            Case::Elementwise { f, i, .. } | Case::Reduce { f, i, .. } => {
                vec![(f, true), (i, false)]
            }
            Case::Scan { i, .. } | Case::Atomic { i, .. } => vec![(i, false)],
            Case::Dot { .. } => Vec::new(),
            Case::Ring { f, .. }
            | Case::WarpSpecialized { f, .. }
            | Case::Named { f, .. }
            | Case::TmaRing { f, .. }
            | Case::Cluster { f, .. } => vec![(f, true)],
        }
    }

    /// The counts the shrinker may lower, each with how and its floor (a
    /// count at its floor stays).
    fn counts_mut(&mut self) -> Vec<(&mut usize, Lower, usize)> {
        use Lower::*;
        match self {
            Case::Elementwise { n, block, .. } => vec![(n, Halve, 1), (block, Halve, 32)],
            Case::Reduce {
                programs,
                rows,
                cols,
                ..
            } => vec![(programs, To(1), 1), (rows, Halve, 2), (cols, Halve, 2)],
            Case::Scan {
                programs, block, ..
            } => vec![(programs, To(1), 1), (block, Halve, 16)],
            Case::Dot {
                k_tiles,
                bm,
                bn,
                bk,
                ..
            } => vec![
                (k_tiles, To(1), 1),
                (bm, Halve, 16),
                (bn, Halve, 16),
                (bk, Halve, 16),
            ],
            Case::Atomic { n, buckets, .. } => vec![(n, Halve, 1), (buckets, To(1), 1)],
            Case::Ring {
                tiles,
                stages,
                programs,
                ..
            } => vec![
                (tiles, Decrement, 1),
                (stages, Decrement, 2),
                (programs, To(1), 1),
            ],
            Case::WarpSpecialized {
                tiles,
                stages,
                replicas,
                programs,
                ..
            } => vec![
                (tiles, Decrement, 1),
                (stages, Decrement, 1),
                (replicas, To(1), 1),
                (programs, To(1), 1),
            ],
            Case::Named { tiles, .. } => vec![(tiles, Decrement, 1)],
            Case::TmaRing { tiles, stages, .. } => {
                vec![(tiles, Decrement, 1), (stages, Decrement, 1)]
            }
            Case::Cluster {
                rounds,
                clusters,
                cluster,
                ..
            } => vec![
                (rounds, Decrement, 1),
                (clusters, To(1), 1),
                (cluster, To(2), 2),
            ],
        }
    }
}

/// How the shrinker lowers a count above its floor.
#[derive(Clone, Copy)]
enum Lower {
    Halve,
    Decrement,
    To(usize),
}

impl Lower {
    fn from(self, value: usize, floor: usize) -> usize {
        match self {
            Lower::Halve => (value / 2).max(floor),
            Lower::Decrement => value - 1,
            Lower::To(target) => target,
        }
    }
}

/// Per program (and replica), the sum over `tiles` tiles of `F(x, y)`,
/// elementwise: what the ring and the consumers accumulate, in tile order.
fn tile_sums(
    x: &[f32],
    y: &[f32],
    block: usize,
    tiles: usize,
    programs: usize,
    replicas: usize,
    f: &Expr,
) -> Vec<Option<Want>> {
    let mut out = Vec::new();
    for p in 0..programs {
        for r in 0..replicas {
            for c in 0..block {
                let yv = y[(p * replicas + r) * block + c];
                let mut acc = 0f32;
                for t in 0..tiles {
                    let xv = x[(p * tiles + t) * block + c];
                    let v = match f.eval(Env {
                        x: xv,
                        y: yv,
                        a: (xv * 8.0) as i32,
                    }) {
                        V::F(v) => v,
                        V::I(v) => v as f32,
                    };
                    acc += v;
                }
                out.push(Some(Want::Exact(V::F(acc))));
            }
        }
    }
    out
}

/// The tiles of a kernel that loads only integers: `xv`, `yv` derived
/// from `av` as its source says.
fn derived(a: i32) -> Env {
    Env {
        x: a as f32 * 0.5,
        y: a as f32 - 3.0,
        a,
    }
}
