//! Kernels across the ranks of a [`Mesh`] (docs/distributed.md), each one
//! kernel per rank in which communication and compute are in flight at
//! once: [`AllReduce`] (every rank's vector summed onto every rank, pushed
//! through peers' memory and signals), [`AllGatherGemm`] (`C = allgather(A)
//! @ B`, copy programs pulling peers' row splits while compute programs
//! multiply the splits that have arrived) and [`GemmReduceScatter`]
//! (`C_r = (A @ B summed over ranks)[rows of r]`, each tile's partial
//! pushed to the rank that owns its rows, which sums them as they arrive),
//! and TLE's [`reshard`] between replicated, split and partial tensors
//! (its kernels in `reshard.rs`).
//!
//! Each keeps its scratch (symmetric slots, flags) between calls and
//! counts calls in an epoch that its flags compare against, so flags need
//! no reset. Every program of every rank must be resident at once: the
//! grids are at most [`Mesh::programs_per_rank`].

use crate::prelude::*;
use crate::{Element, Placement, SymBuffer};

pub use super::reshard::{reshard, ReshardElement, Sharding};

/// The epoch's flags count to `epoch * contributions`; i32 flags bound it.
fn next_epoch(epoch: &mut i32, op: &'static str) -> Result<i32, Error> {
    *epoch = epoch.checked_add(1).ok_or(Error::InvalidShape {
        op,
        reason: "its flags' epoch overflowed i32 after 2^31 calls; make a new one".into(),
    })?;
    Ok(*epoch)
}

/// Checks that `buffers` has one buffer of at least `len` elements per rank.
pub(super) fn per_rank<T: Element>(
    op: &'static str,
    what: &str,
    mesh: &Mesh,
    buffers: &[Buffer<T>],
    len: usize,
) -> Result<(), Error> {
    if buffers.len() != mesh.ranks() {
        return Err(Error::InvalidShape {
            op,
            reason: format!(
                "`{what}` has {} buffers for a mesh of {} ranks: give one per rank, on its device",
                buffers.len(),
                mesh.ranks()
            ),
        });
    }
    for (rank, buffer) in buffers.iter().enumerate() {
        if buffer.len() < len {
            return Err(Error::InvalidShape {
                op,
                reason: format!(
                    "`{what}` of rank {rank} holds {} elements, but the shape needs {len}",
                    buffer.len()
                ),
            });
        }
    }
    Ok(())
}

/// Programs for `work` units on each rank, all resident at once.
fn programs(mesh: &Mesh, work: usize) -> u32 {
    (work.max(1) as u32).min(mesh.programs_per_rank())
}

/// Every program pushes its blocks of `x` into slot `rank` of every rank's
/// `slots`, releases its flag there, then waits for every rank's flag for
/// its blocks in its own `flags` and sums the slots into `out`.
#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4)])]
fn all_reduce_push<const BLOCK: usize>(
    mesh: Mesh,
    x: Ptr<f32>,
    slots: SymPtr<f32>,
    flags: SymPtr<i32>,
    out: Ptr<f32>,
    n: i32,
    epoch: i32,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let pid = program_id(0);
    let programs = num_programs(0);
    let blocks = cdiv(n, BLOCK);
    for peer in 0..ranks {
        let slot = remote(slots, peer) + rank * n;
        for block in (pid..blocks).step_by(programs) {
            let offs = block * BLOCK + arange(0, BLOCK);
            let mask = offs < n;
            store(slot + offs, load(x + offs, mask = mask), mask = mask);
        }
        signal_set(remote(flags, peer) + rank * programs + pid, epoch);
    }
    for src in 0..ranks {
        signal_wait_until(flags + src * programs + pid, "ge", epoch);
    }
    for block in (pid..blocks).step_by(programs) {
        let offs = block * BLOCK + arange(0, BLOCK);
        let mask = offs < n;
        let mut acc = zeros([BLOCK], f32);
        for src in 0..ranks {
            acc += load(slots + src * n + offs, mask = mask, other = 0.0);
        }
        store(out + offs, acc, mask = mask);
    }
}

/// An all-reduce (sum) of f32 vectors of `n` elements, one per rank, onto
/// every rank: one kernel per rank pushes its vector into every rank's
/// slots through peer memory and signals, then sums what arrived.
pub struct AllReduce {
    n: usize,
    slots: SymBuffer<f32>,
    flags: SymBuffer<i32>,
    programs: u32,
    epoch: i32,
}

impl AllReduce {
    /// Scratch for vectors of `n` elements on `mesh`.
    pub fn new(mesh: &Mesh, n: usize) -> Result<AllReduce, Error> {
        super::extents("all_reduce", &[("n", n), ("ranks", mesh.ranks())])?;
        let programs = programs(mesh, n.div_ceil(1024));
        Ok(AllReduce {
            n,
            slots: mesh.alloc(mesh.ranks() * n)?,
            flags: mesh.alloc_zeros(mesh.ranks() * programs as usize)?,
            programs,
            epoch: 0,
        })
    }

    /// `out[r] = sum over ranks q of x[q]` for every rank `r`; `x` and `out`
    /// hold one buffer per rank, on its device.
    pub fn run(
        &mut self,
        mesh: &mut Mesh,
        x: &[Buffer<f32>],
        out: &[Buffer<f32>],
    ) -> Result<(), Error> {
        per_rank("all_reduce", "x", mesh, x, self.n)?;
        per_rank("all_reduce", "out", mesh, out, self.n)?;
        let epoch = next_epoch(&mut self.epoch, "all_reduce")?;
        let (slots, flags, n, programs) = (&self.slots, &self.flags, self.n, self.programs);
        mesh.run(|rank, dev| {
            let r = rank.index();
            all_reduce_push::<1024>::launch(
                dev,
                programs,
                rank,
                &x[r],
                &slots.rank(r)?,
                &flags.rank(r)?,
                &out[r],
                n as i32,
                epoch,
            )
        })
    }
}

/// `C = allgather(A) @ B` on every rank: A is split by rows, `rows` per
/// rank. Programs `0..copiers` pull each peer's split (once the peer has
/// said its split is ready) into the rank's `a_full` and count it done in
/// `ready`; the other programs compute `C`'s tiles, the rank's own split
/// first (no wait), then each peer's once its copies are done.
#[tlx::kernel(configs = [
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, num_warps = 8, num_stages = 4),
    (BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 32, num_warps = 4),
])]
fn all_gather_gemm_kernel<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    mesh: Mesh,
    a_shard: SymPtr<bf16>,
    avail: SymPtr<i32>,
    a_full: Ptr<bf16>,
    ready: Ptr<i32>,
    b: Ptr<bf16>,
    c: Ptr<bf16>,
    rows: i32,
    n: i32,
    k: i32,
    copiers: i32,
    epoch: i32,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let pid = program_id(0);
    if pid == 0 {
        // This rank's split is ready (its kernel starts after the work
        // before it on its stream): say so to every rank.
        for peer in 0..ranks {
            signal_set(remote(avail, peer) + rank, epoch);
        }
    }
    if pid < copiers {
        let cols = arange(0, BLOCK_K);
        for step in 1..ranks {
            let src = (rank + step) % ranks;
            signal_wait_until(avail + src, "ge", epoch);
            let from = remote(a_shard, src);
            let to = a_full + src * rows * k;
            for row0 in (pid * BLOCK_M..rows).step_by(copiers * BLOCK_M) {
                let r = row0 + arange(0, BLOCK_M);
                for k0 in (0..k).step_by(BLOCK_K) {
                    let ks = k0 + cols;
                    let mask = (r[(.., None)] < rows) & (ks[(None, ..)] < k);
                    let at = r[(.., None)] * k + ks[(None, ..)];
                    store(to + at, load(from + at, mask = mask), mask = mask);
                }
            }
            atomic_add(ready + src, 1, sem = "release", scope = "gpu");
        }
    } else {
        let workers = num_programs(0) - copiers;
        let tiles_m = cdiv(rows, BLOCK_M);
        let tiles_n = cdiv(n, BLOCK_N);
        let per_split = tiles_m * tiles_n;
        let offs_k = arange(0, BLOCK_K);
        for t in (pid - copiers..per_split * ranks).step_by(workers) {
            let step = t / per_split;
            let src = (rank + step) % ranks;
            let tile = t % per_split;
            let mut a = a_shard;
            if src != rank {
                signal_wait_until(ready + src, "ge", epoch * copiers);
                a = a_full + src * rows * k;
            }
            let offs_m = (tile / tiles_n) * BLOCK_M + arange(0, BLOCK_M);
            let offs_n = (tile % tiles_n) * BLOCK_N + arange(0, BLOCK_N);
            let rows_ok = offs_m[(.., None)] < rows;
            let cols_ok = offs_n[(None, ..)] < n;
            let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
            for k0 in (0..k).step_by(BLOCK_K) {
                let ks = k0 + offs_k;
                let a_tile = load(
                    a + offs_m[(.., None)] * k + ks[(None, ..)],
                    mask = rows_ok & (ks[(None, ..)] < k),
                    other = 0.0,
                );
                let b_tile = load(
                    b + ks[(.., None)] * n + offs_n[(None, ..)],
                    mask = (ks[(.., None)] < k) & cols_ok,
                    other = 0.0,
                );
                acc = dot(a_tile, b_tile, acc);
            }
            let out_rows = src * rows + offs_m;
            store(
                c + out_rows[(.., None)] * n + offs_n[(None, ..)],
                acc.to(bf16),
                mask = rows_ok & cols_ok,
            );
        }
    }
}

/// Tiles: the GPU's (`128 x 128 x 64`) or the interpreter's (`32 x 32 x 32`).
fn tiles(mesh: &Mesh) -> (usize, usize) {
    match mesh.placement() {
        Placement::Interpreter => (32, 32),
        Placement::Gpus | Placement::SharedGpu => (128, 128),
    }
}

/// `C = allgather(A) @ B` on every rank of a mesh, with `A` split by rows
/// (`rows` per rank, bf16, row-major `[rows, k]` in a symmetric buffer),
/// `B` bf16 `[k, n]` and `C` bf16 `[ranks * rows, n]` on every rank:
/// peers' splits are copied while the local one is multiplied, in one of
/// two ways ([`Overlap`]).
pub struct AllGatherGemm {
    shape: (usize, usize, usize),
    a_full: Vec<Buffer<bf16>>,
    avail: SymBuffer<i32>,
    ready: Vec<Buffer<i32>>,
    epoch: i32,
    overlap: Overlap,
}

/// How [`AllGatherGemm`] overlaps the gather with the GEMM.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// One kernel per rank: copy programs pull the peers' splits through
    /// peer memory and signal each one's arrival to the compute programs
    /// (block-level `dot`), which start with the rank's own split.
    OneKernel,
    /// The copy engine pulls each peer's split on a stream of its own while
    /// `tlx::ops::gemm` multiplies the splits already there, split by
    /// split, each GEMM waiting for its split's copy (a CUDA event); on the
    /// interpreter the same steps one after the other.
    CopyEngine,
}

impl AllGatherGemm {
    /// Scratch for `[rows, k]` splits and `[k, n]` right-hand sides on `mesh`.
    pub fn new(mesh: &Mesh, rows: usize, n: usize, k: usize) -> Result<AllGatherGemm, Error> {
        let ranks = mesh.ranks();
        super::gemm_extents("all_gather_gemm", "rows * ranks", (rows * ranks, n, k))?;
        let a_full = mesh.alloc_each(ranks * rows * k)?;
        let ready = mesh.alloc_zeros_each(ranks)?;
        Ok(AllGatherGemm {
            shape: (rows, n, k),
            a_full,
            avail: mesh.alloc_zeros(ranks)?,
            ready,
            epoch: 0,
            overlap: Overlap::OneKernel,
        })
    }

    /// The same, overlapping as `overlap` says.
    pub fn with_overlap(self, overlap: Overlap) -> AllGatherGemm {
        AllGatherGemm { overlap, ..self }
    }

    /// `c[r] = allgather(a) @ b[r]` for every rank `r`.
    pub fn run(
        &mut self,
        mesh: &mut Mesh,
        a: &SymBuffer<bf16>,
        b: &[Buffer<bf16>],
        c: &[Buffer<bf16>],
    ) -> Result<(), Error> {
        let (rows, n, k) = self.shape;
        let ranks = mesh.ranks();
        if a.len() < rows * k || a.ranks() != ranks {
            return Err(Error::InvalidShape {
                op: "all_gather_gemm",
                reason: format!(
                    "`a` holds {} elements on {} ranks; the shape needs {} ({rows} x {k}) on {ranks}",
                    a.len(),
                    a.ranks(),
                    rows * k
                ),
            });
        }
        per_rank("all_gather_gemm", "b", mesh, b, k * n)?;
        per_rank("all_gather_gemm", "c", mesh, c, ranks * rows * n)?;
        if self.overlap == Overlap::CopyEngine && mesh.placement() != Placement::Interpreter {
            return self.run_copy_engine(mesh, a, b, c);
        }
        let epoch = next_epoch(&mut self.epoch, "all_gather_gemm")?;
        let (tile_m, tile_n) = tiles(mesh);
        let tiles = ranks * rows.div_ceil(tile_m) * n.div_ceil(tile_n);
        // A copier per 8 SMs' worth of programs: copying is bandwidth-bound.
        let grid = programs(mesh, tiles + 1).max(2);
        let copiers = (grid / 8).max(1) as i32;
        let (a_full, avail, ready) = (&self.a_full, &self.avail, &self.ready);
        mesh.run(|rank, dev| {
            let r = rank.index();
            let args = (
                &a.rank(r)?,
                &avail.rank(r)?,
                &a_full[r],
                &ready[r],
                &b[r],
                &c[r],
            );
            let dims = (rows as i32, n as i32, k as i32, copiers, epoch);
            if tile_m == 128 {
                all_gather_gemm_kernel::<128, 128, 64>::launch(
                    dev, grid, rank, args.0, args.1, args.2, args.3, args.4, args.5, dims.0,
                    dims.1, dims.2, dims.3, dims.4,
                )
            } else {
                all_gather_gemm_kernel::<32, 32, 32>::launch(
                    dev, grid, rank, args.0, args.1, args.2, args.3, args.4, args.5, dims.0,
                    dims.1, dims.2, dims.3, dims.4,
                )
            }
        })
    }

    /// [`Overlap::CopyEngine`]: every peer's split copied on the rank's copy
    /// stream (queued first, so the copies wait only for earlier work), the
    /// rank's own rows multiplied meanwhile, then each peer's rows once its
    /// copy is done.
    fn run_copy_engine(
        &mut self,
        mesh: &mut Mesh,
        a: &SymBuffer<bf16>,
        b: &[Buffer<bf16>],
        c: &[Buffer<bf16>],
    ) -> Result<(), Error> {
        let (rows, n, k) = self.shape;
        let ranks = mesh.ranks();
        let split = |src: usize| src * rows * k..(src + 1) * rows * k;
        let out = |src: usize| src * rows * n..(src + 1) * rows * n;
        let mut copies = Vec::with_capacity(ranks);
        for (r, full) in self.a_full.iter().enumerate() {
            let mut mine = Vec::with_capacity(ranks - 1);
            for step in 1..ranks {
                let src = (r + step) % ranks;
                let from = a.on(src)?.slice(..rows * k)?;
                mine.push((
                    src,
                    mesh.copy_async(src, &from, r, &full.slice(split(src))?)?,
                ));
            }
            copies.push(mine);
        }
        for (r, mine) in copies.iter().enumerate() {
            let dev = mesh.device(r)?;
            let own = a.on(r)?.slice(..rows * k)?;
            crate::ops::gemm(dev, &own, &b[r], &c[r].slice(out(r))?, (rows, n, k))?;
            for (src, copied) in mine {
                mesh.wait_for(r, copied)?;
                let from = self.a_full[r].slice(split(*src))?;
                crate::ops::gemm(dev, &from, &b[r], &c[r].slice(out(*src))?, (rows, n, k))?;
            }
        }
        for dev in mesh.devices() {
            dev.synchronize()?;
        }
        Ok(())
    }
}

/// Each rank multiplies its `A` (`[m, k]`, its slice of the contraction)
/// with its `B` (`[k, n]`) tile by tile, starting with the tiles whose rows
/// the next rank owns, pushes each tile into slot `rank` of the owner's
/// `partials` and counts it in the owner's `arrived`; then sums the
/// partials of its own rows' tiles as their counts complete.
#[tlx::kernel(configs = [
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, num_warps = 8, num_stages = 4),
    (BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 32, num_warps = 4),
])]
fn gemm_reduce_scatter_kernel<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    mesh: Mesh,
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    partials: SymPtr<f32>,
    arrived: SymPtr<i32>,
    c: Ptr<f32>,
    rows: i32,
    n: i32,
    k: i32,
    epoch: i32,
) {
    let rank = shard_id(mesh, 0);
    let ranks = shard_count(mesh, 0);
    let pid = program_id(0);
    let programs = num_programs(0);
    let tiles_m = rows / BLOCK_M;
    let tiles_n = cdiv(n, BLOCK_N);
    let per_rank = tiles_m * tiles_n;
    let offs_k = arange(0, BLOCK_K);
    let offs_bm = arange(0, BLOCK_M);
    let offs_bn = arange(0, BLOCK_N);
    for t in (pid..per_rank * ranks).step_by(programs) {
        let owner = (rank + 1 + t / per_rank) % ranks;
        let tile = t % per_rank;
        let local_m = (tile / tiles_n) * BLOCK_M + offs_bm;
        let offs_m = owner * rows + local_m;
        let offs_n = (tile % tiles_n) * BLOCK_N + offs_bn;
        let cols_ok = offs_n[(None, ..)] < n;
        let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
        for k0 in (0..k).step_by(BLOCK_K) {
            let ks = k0 + offs_k;
            let a_tile = load(
                a + offs_m[(.., None)] * k + ks[(None, ..)],
                mask = ks[(None, ..)] < k,
                other = 0.0,
            );
            let b_tile = load(
                b + ks[(.., None)] * n + offs_n[(None, ..)],
                mask = (ks[(.., None)] < k) & cols_ok,
                other = 0.0,
            );
            acc = dot(a_tile, b_tile, acc);
        }
        let slot = remote(partials, owner) + rank * rows * n;
        store(
            slot + local_m[(.., None)] * n + offs_n[(None, ..)],
            acc,
            mask = cols_ok,
        );
        signal_add(remote(arrived, owner) + tile, 1);
    }
    // Summed 32 rows at a time: a whole tile's addresses would spill.
    let offs_sum = arange(0, 32);
    for tile in (pid..per_rank).step_by(programs) {
        signal_wait_until(arrived + tile, "ge", epoch * ranks);
        let offs_n = (tile % tiles_n) * BLOCK_N + offs_bn;
        let cols_ok = offs_n[(None, ..)] < n;
        for r0 in (0..BLOCK_M).step_by(32) {
            let local_m = (tile / tiles_n) * BLOCK_M + r0 + offs_sum;
            let at = local_m[(.., None)] * n + offs_n[(None, ..)];
            let mut sum = zeros([32, BLOCK_N], f32);
            for src in 0..ranks {
                sum += load(partials + src * rows * n + at, mask = cols_ok, other = 0.0);
            }
            store(c + at, sum, mask = cols_ok);
        }
    }
}

/// `C_r = (sum over ranks q of A_q @ B_q)[rows of r]` on every rank `r`:
/// `A_q` bf16 `[ranks * rows, k]` and `B_q` bf16 `[k, n]` (each rank's
/// slice of the contraction), `C_r` f32 `[rows, n]`, `rows` a multiple of
/// the tile (128 on a GPU, 32 on the interpreter). Partial tiles travel to
/// their owners while the next ones are computed.
pub struct GemmReduceScatter {
    shape: (usize, usize, usize),
    partials: SymBuffer<f32>,
    arrived: SymBuffer<i32>,
    epoch: i32,
}

impl GemmReduceScatter {
    /// Scratch for `rows` rows per rank of `n` columns, contracting `k`.
    pub fn new(mesh: &Mesh, rows: usize, n: usize, k: usize) -> Result<GemmReduceScatter, Error> {
        let ranks = mesh.ranks();
        super::gemm_extents("gemm_reduce_scatter", "rows * ranks", (rows * ranks, n, k))?;
        let (tile_m, tile_n) = tiles(mesh);
        if rows % tile_m != 0 {
            return Err(Error::InvalidShape {
                op: "gemm_reduce_scatter",
                reason: format!(
                    "`rows` is {rows}, not a multiple of the {tile_m}-row tile: pad the rows"
                ),
            });
        }
        let tiles = (rows / tile_m) * n.div_ceil(tile_n);
        Ok(GemmReduceScatter {
            shape: (rows, n, k),
            partials: mesh.alloc(ranks * rows * n)?,
            arrived: mesh.alloc_zeros(tiles)?,
            epoch: 0,
        })
    }

    /// `c[r] = (sum over q of a[q] @ b[q])[r * rows..(r + 1) * rows]`.
    pub fn run(
        &mut self,
        mesh: &mut Mesh,
        a: &[Buffer<bf16>],
        b: &[Buffer<bf16>],
        c: &[Buffer<f32>],
    ) -> Result<(), Error> {
        let (rows, n, k) = self.shape;
        let ranks = mesh.ranks();
        per_rank("gemm_reduce_scatter", "a", mesh, a, ranks * rows * k)?;
        per_rank("gemm_reduce_scatter", "b", mesh, b, k * n)?;
        per_rank("gemm_reduce_scatter", "c", mesh, c, rows * n)?;
        let epoch = next_epoch(&mut self.epoch, "gemm_reduce_scatter")?;
        let (tile_m, tile_n) = tiles(mesh);
        let grid = programs(mesh, ranks * (rows / tile_m) * n.div_ceil(tile_n));
        let (partials, arrived) = (&self.partials, &self.arrived);
        mesh.run(|rank, dev| {
            let r = rank.index();
            let (p, s) = (&partials.rank(r)?, &arrived.rank(r)?);
            let dims = (rows as i32, n as i32, k as i32, epoch);
            if tile_m == 128 {
                gemm_reduce_scatter_kernel::<128, 128, 64>::launch(
                    dev, grid, rank, &a[r], &b[r], p, s, &c[r], dims.0, dims.1, dims.2, dims.3,
                )
            } else {
                gemm_reduce_scatter_kernel::<32, 32, 32>::launch(
                    dev, grid, rank, &a[r], &b[r], p, s, &c[r], dims.0, dims.1, dims.2, dims.3,
                )
            }
        })
    }
}
