//! Grouped GEMM for mixture-of-experts layers (issue 55): one problem per
//! expert, launched as one kernel whose tile schedule walks the groups on
//! the device, so the host never reads the group sizes (no synchronization
//! per call).
//!
//! [`grouped_gemm`] (and [`grouped_gemm_masked`], the decode layout:
//! `[experts, m_max, k]` with a per-expert count on the device):
//! `C[rows of e] = A[rows of e] @ B[e]` for every expert
//! `e`, where the rows of expert `e` are `offsets[e]..offsets[e + 1]` of
//! `A` (`[m_total, k]`, the tokens sorted by expert) and `C`
//! (`[m_total, n]`), and `B` is `[experts, k, n]`; bf16 in and out, f32
//! accumulation. Empty groups, groups smaller than a tile and any `m_total`
//! work. Where TMA takes the operands (`k` a multiple of the K block, `n`
//! of 8, at most 256 experts) the tensor-core kernel runs (descriptor loads
//! the compiler keeps in a wgmma ring, one program per tile); otherwise a
//! persistent kernel of pointer loads. [`grouped_gemm_general`]: every
//! group its own buffers and sizes, on the tensor cores through descriptors
//! each program builds for its group on the device. [`grouped_gemm_fp8`] (and
//! [`grouped_gemm_fp8_masked`]): e4m3 with rowwise scales (or DeepGEMM's
//! 128-block ones, [`Fp8Scales`]) on a persistent warp-specialized kernel
//! (TMA producer, two fp8 wgmma consumer groups).

use crate::prelude::*;
use crate::PtrArg;

/// Programs walk the tiles of every group in turn (group `e`'s tiles
/// numbered after those of the groups before it), each taking every
/// `num_programs`-th tile. `MASKED = false`: group `e` is rows
/// `offsets[e]..offsets[e + 1]` of `m_total`; `MASKED = true`: rows
/// `e * m_max ..` of which `counts[e]` (`sizes`) are used, `m_total` being
/// `experts * m_max`.
#[tlx::kernel(configs = [
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, MASKED = false, num_warps = 8, num_stages = 4),
    (BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 32, MASKED = false, num_warps = 4),
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, MASKED = true, num_warps = 8, num_stages = 4),
    (BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 32, MASKED = true, num_warps = 4),
])]
fn grouped_gemm_kernel<
    const BLOCK_M: usize,
    const BLOCK_N: usize,
    const BLOCK_K: usize,
    const MASKED: bool,
>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<bf16>,
    sizes: Ptr<i32>,
    m_total: i32,
    m_max: i32,
    n: i32,
    k: i32,
    experts: i32,
) {
    let pid = program_id(0);
    let programs = num_programs(0);
    let tiles_n = cdiv(n, BLOCK_N);
    let offs_k = arange(0, BLOCK_K);
    let mut base = 0;
    for e in 0..experts {
        let mut start = 0;
        let mut end = 0;
        if MASKED {
            start = e * m_max;
            end = start + minimum(maximum(load(sizes + e), 0), m_max);
        } else {
            start = minimum(load(sizes + e), m_total);
            end = minimum(load(sizes + e + 1), m_total);
        }
        let rows = maximum(end - start, 0);
        let tiles = cdiv(rows, BLOCK_M) * tiles_n;
        // The first tile of this group that is this program's.
        let first = base + (pid - base % programs + programs) % programs;
        // Expert e's B, `e * k * n` elements in: i64, past 2^31 for large E.
        let b_e = b + e.to(i64) * k.to(i64) * n.to(i64);
        for t in (first..base + tiles).step_by(programs) {
            let local = t - base;
            let offs_m = start + (local / tiles_n) * BLOCK_M + arange(0, BLOCK_M);
            let offs_n = (local % tiles_n) * BLOCK_N + arange(0, BLOCK_N);
            let rows_ok = offs_m[(.., None)] < end;
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
                    b_e + ks[(.., None)] * n + offs_n[(None, ..)],
                    mask = (ks[(.., None)] < k) & cols_ok,
                    other = 0.0,
                );
                acc = dot(a_tile, b_tile, acc);
            }
            store(
                c + offs_m[(.., None)] * n + offs_n[(None, ..)],
                acc.to(bf16),
                mask = rows_ok & cols_ok,
            );
        }
        base += tiles;
    }
}

/// The tensor-core form of [`grouped_gemm_kernel`], for shapes TMA can take
/// (`k` a multiple of `BK`, `n` of 8): one program per tile of the most
/// tiles the groups can have, each finding its group from every group's
/// tile count at once (a scan over `EB` experts), then the K loop of
/// `tlx::ops::gemm` (descriptor loads the compiler keeps in a TMA ring
/// wgmma reads in place). A's descriptor is the whole `[m_total, k]`: a
/// tile running past its group's rows reads the next group's, whose
/// products land in rows the masked store leaves alone. B's is
/// `[experts * k, n]`, its K blocks never crossing an expert.
#[tlx::kernel(configs = [
    (BM = 128, BN = 128, BK = 64, EB = 256, MASKED = false, num_warps = 8, num_stages = 4),
    (BM = 128, BN = 256, BK = 64, EB = 256, MASKED = false, num_warps = 8, num_stages = 4),
    (BM = 128, BN = 128, BK = 64, EB = 256, MASKED = true, num_warps = 8, num_stages = 4),
    (BM = 64, BN = 128, BK = 64, EB = 256, MASKED = true, num_warps = 4, num_stages = 4),
    (BM = 32, BN = 32, BK = 32, EB = 256, MASKED = false, num_warps = 4),
    (BM = 32, BN = 32, BK = 32, EB = 256, MASKED = true, num_warps = 4),
])]
fn grouped_gemm_tma_kernel<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const EB: usize,
    const MASKED: bool,
>(
    a: TensorDesc<bf16, BM, BK>,
    b: TensorDesc<bf16, BK, BN>,
    c: Ptr<bf16>,
    sizes: Ptr<i32>,
    m_total: i32,
    m_max: i32,
    n: i32,
    k: i32,
    experts: i32,
) {
    let t = program_id(0);
    let tiles_n = cdiv(n, BN);
    let es = arange(0, EB);
    let live = es < experts;
    let mut starts = es * m_max;
    let mut ends = starts + minimum(maximum(load(sizes + es, mask = live, other = 0), 0), m_max);
    if !MASKED {
        starts = minimum(load(sizes + es, mask = live, other = 0), m_total);
        ends = minimum(load(sizes + es + 1, mask = live, other = 0), m_total);
    }
    let tiles_m = cdiv(maximum(ends - starts, 0), BM);
    let tiles = select(live, tiles_m * tiles_n, 0);
    let (firsts, total) = cumsum(tiles, 0);
    if t >= total {
        return;
    }
    // Groups ending at or before tile t are a prefix: their count is t's group.
    let g = sum(select(firsts + tiles <= t, 1, 0));
    let here = es == g;
    let start = sum(select(here, starts, 0));
    let end = sum(select(here, ends, 0));
    let local = t - sum(select(here, firsts, 0));
    let group_tiles_m = sum(select(here, tiles_m, 0));
    // M fastest: a group's few row tiles read each B tile together.
    let row0 = start + (local % group_tiles_m) * BM;
    let col0 = (local / group_tiles_m) * BN;
    let mut acc = zeros([BM, BN], f32);
    for kk in 0..k / BK {
        acc = dot(
            a.load([row0, kk * BK]),
            b.load([g * k + kk * BK, col0]),
            acc,
        );
    }
    let rows = row0 + arange(0, BM);
    let cols = col0 + arange(0, BN);
    store(
        c + rows[(.., None)] * n + cols[(None, ..)],
        acc.to(bf16),
        mask = (rows[(.., None)] < end) & (cols[(None, ..)] < n),
    );
}

/// Which kernel the bf16 grouped GEMMs run (where TMA can take the
/// operands: `k` a multiple of 64, or of 32 on the interpreter, `n` of 8,
/// at most 256 experts, 16-byte aligned bases; elsewhere a persistent
/// kernel of pointer loads runs whatever is asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedKernel {
    /// The fastest of the others for the shape, timed the first time a
    /// shape (`n`, `k`, experts, layout) is seen (`tlx::autotune`).
    Auto,
    /// One program per tile of the most the groups can have (programs past
    /// the groups' tiles return at once), in block-level code: tensor
    /// descriptor loads the compiler keeps in a TMA ring wgmma reads in
    /// place.
    PerTile,
    /// Persistent (one program per SM) and warp-specialized: a TMA
    /// producer task and two consumer warp groups on wgmma, 128x128 tiles.
    Persistent,
}

/// `C[rows of e] = A[rows of e] @ B[e]` for every expert `e` (see the
/// module): `a` `[m_total, k]`, `b` `[experts, k, n]`, `c` `[m_total, n]`,
/// all row-major bf16, and `offsets` `experts + 1` nondecreasing `i32`
/// row offsets on the device (`offsets[0] = 0`, `offsets[experts] =
/// m_total`; rows past `m_total` are ignored). Rows of `c` no group covers
/// are left as they were.
pub fn grouped_gemm(
    device: &Device,
    a: &impl PtrArg<bf16>,
    b: &impl PtrArg<bf16>,
    c: &impl PtrArg<bf16>,
    offsets: &impl PtrArg<i32>,
    shape: (usize, usize, usize, usize),
) -> Result<(), Error> {
    grouped_gemm_with(device, (a, b, c), offsets, shape, GroupedKernel::Auto)
}

/// [`grouped_gemm`] on the kernel `kernel` names.
pub fn grouped_gemm_with(
    device: &Device,
    (a, b, c): (&impl PtrArg<bf16>, &impl PtrArg<bf16>, &impl PtrArg<bf16>),
    offsets: &impl PtrArg<i32>,
    (m_total, n, k, experts): (usize, usize, usize, usize),
    kernel: GroupedKernel,
) -> Result<(), Error> {
    let layout = Layout::Contiguous;
    launch(
        device,
        (a, b, c, offsets),
        (m_total, n, k, experts),
        layout,
        kernel,
    )
}

/// The masked layout (decode; CUDA-graph friendly): `a` `[experts, m_max,
/// k]`, `c` `[experts, m_max, n]`, of whose `m_max` rows per expert only
/// the first `counts[e]` (`experts` `i32`s on the device, clamped to
/// `0..=m_max`) are multiplied, with `b` `[experts, k, n]`; the other rows
/// of `c` are left as they were.
pub fn grouped_gemm_masked(
    device: &Device,
    a: &impl PtrArg<bf16>,
    b: &impl PtrArg<bf16>,
    c: &impl PtrArg<bf16>,
    counts: &impl PtrArg<i32>,
    shape: (usize, usize, usize, usize),
) -> Result<(), Error> {
    grouped_gemm_masked_with(device, (a, b, c), counts, shape, GroupedKernel::Auto)
}

/// [`grouped_gemm_masked`] on the kernel `kernel` names.
pub fn grouped_gemm_masked_with(
    device: &Device,
    (a, b, c): (&impl PtrArg<bf16>, &impl PtrArg<bf16>, &impl PtrArg<bf16>),
    counts: &impl PtrArg<i32>,
    (m_max, n, k, experts): (usize, usize, usize, usize),
    kernel: GroupedKernel,
) -> Result<(), Error> {
    let layout = Layout::Masked { m_max };
    launch(
        device,
        (a, b, c, counts),
        (experts * m_max, n, k, experts),
        layout,
        kernel,
    )
}

/// Where a group's rows are: `offsets[e]..offsets[e + 1]`, or the first
/// `counts[e]` of rows `e * m_max..`.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Contiguous,
    Masked { m_max: usize },
}

/// Checks the bf16 grouped GEMM's sizes and buffers (`m_total`: the rows
/// of A and C, every expert's `m_max` in the masked layout) and launches it
/// in `layout` on the kernel `kernel` asks for where TMA takes the
/// operands, else on the pointer kernel.
fn launch(
    device: &Device,
    (a, b, c, sizes): (
        &impl PtrArg<bf16>,
        &impl PtrArg<bf16>,
        &impl PtrArg<bf16>,
        &impl PtrArg<i32>,
    ),
    (m_total, n, k, experts): (usize, usize, usize, usize),
    layout: Layout,
    kernel: GroupedKernel,
) -> Result<(), Error> {
    let (op, rows, table, table_len) = match layout {
        Layout::Contiguous => ("grouped_gemm", "m_total", "offsets", experts + 1),
        Layout::Masked { .. } => ("grouped_gemm_masked", "experts * m_max", "counts", experts),
    };
    super::extents(op, &[("k", k), ("n", n)])?;
    super::extents(op, &[("experts", experts)])?;
    if m_total > 0 {
        super::extents(op, &[(rows, m_total), ("k", k)])?;
        super::extents(op, &[(rows, m_total), ("n", n)])?;
    }
    // B's offsets are i64 in the kernel; its size only has to fit memory.
    super::holds(op, "a", a, m_total * k)?;
    super::holds(op, "b", b, experts * k * n)?;
    super::holds(op, "c", c, m_total * n)?;
    super::holds(op, table, sizes, table_len)?;
    if m_total == 0 {
        return Ok(());
    }
    let (masked, m_max) = match layout {
        Layout::Contiguous => (false, 0),
        Layout::Masked { m_max } => (true, m_max),
    };
    let (d0, d1, d2, d3, d4) = (
        m_total as i32,
        m_max as i32,
        n as i32,
        k as i32,
        experts as i32,
    );
    let gpu = device.is_gpu();
    // TMA takes the operands where B's K blocks do not cross experts and
    // rows are whole 16-byte units.
    let per_tile_bk = if gpu { 64 } else { 32 };
    // B's TMA rows (`experts * k`) are i32 coordinates.
    let b_rows_fit = experts * k <= super::MAX_EXTENT;
    let tma = experts <= TMA_MAX_EXPERTS && n % 8 == 0 && b_rows_fit;
    let descriptors = (
        TensorDesc::over(a, &[m_total, k], &[k, 1]),
        TensorDesc::over(b, &[experts * k, n], &[n, 1]),
    );
    if let (true, 0, Ok(ad), Ok(bd)) = (tma, k % per_tile_bk, descriptors.0, descriptors.1) {
        // The most tiles the groups can have.
        let grid = |bm: usize, bn: usize| {
            let row_tiles = if masked {
                experts * m_max.div_ceil(bm)
            } else {
                m_total.div_ceil(bm) + experts
            };
            // Past u32, the launch refuses the grid with its limit.
            u32::try_from(row_tiles * n.div_ceil(bn)).unwrap_or(u32::MAX)
        };
        macro_rules! per_tile {
            ($bm:literal, $bn:literal, $bk:literal, $masked:literal) => {
                grouped_gemm_tma_kernel::<$bm, $bn, $bk, TMA_MAX_EXPERTS, $masked>::launch(
                    device,
                    grid($bm, $bn),
                    &ad,
                    &bd,
                    c,
                    sizes,
                    d0,
                    d1,
                    d2,
                    d3,
                    d4,
                )
            };
        }
        let persistent = || {
            let programs = grid(128, 128).min(device.multiprocessor_count().max(1));
            if masked {
                grouped_gemm_ws_kernel::<128, 128, 64, 4, 256, true>::launch(
                    device, programs, &ad, &bd, c, sizes, d0, d1, d2, d3, d4,
                )
            } else {
                grouped_gemm_ws_kernel::<128, 128, 64, 4, 256, false>::launch(
                    device, programs, &ad, &bd, c, sizes, d0, d1, d2, d3, d4,
                )
            }
        };
        // Decode's few rows per expert take 64-row tiles.
        let per_tile = |wide: bool| match (gpu, masked, m_max <= 64, wide) {
            (true, false, _, false) => per_tile!(128, 128, 64, false),
            (true, false, _, true) => per_tile!(128, 256, 64, false),
            (true, true, false, _) => per_tile!(128, 128, 64, true),
            (true, true, true, _) => per_tile!(64, 128, 64, true),
            (false, false, _, _) => per_tile!(32, 32, 32, false),
            (false, true, _, _) => per_tile!(32, 32, 32, true),
        };
        let launched = match kernel {
            GroupedKernel::Persistent if k % 64 == 0 => persistent(),
            // Wider tiles read A half as often, narrower ones make more
            // tiles of few groups, the persistent kernel saves the programs'
            // starts: timed once per shape.
            GroupedKernel::Auto if gpu => {
                let key = format!("{n}x{k}x{experts} masked={masked} m_max={m_max}");
                let labels: &[&str] = if masked {
                    &["per-tile", "persistent"]
                } else {
                    &["per-tile 128x128", "per-tile 128x256", "persistent"]
                };
                crate::autotune(device, "grouped_gemm", &key, labels, |i| {
                    match (masked, i) {
                        (_, 0) => per_tile(false),
                        (false, 1) => per_tile(true),
                        _ => persistent(),
                    }
                })
                .map(|_| ())
            }
            _ => per_tile(false),
        };
        match launched {
            // A base off a 16-byte boundary: the pointer kernel.
            Err(Error::TensorMap(_)) => {}
            other => return other,
        }
    }
    let grid = device.multiprocessor_count().max(1);
    match (gpu, masked) {
        (true, false) => grouped_gemm_kernel::<128, 128, 64, false>::launch(
            device, grid, a, b, c, sizes, d0, d1, d2, d3, d4,
        ),
        (false, false) => grouped_gemm_kernel::<32, 32, 32, false>::launch(
            device, grid, a, b, c, sizes, d0, d1, d2, d3, d4,
        ),
        (true, true) => grouped_gemm_kernel::<128, 128, 64, true>::launch(
            device, grid, a, b, c, sizes, d0, d1, d2, d3, d4,
        ),
        (false, true) => grouped_gemm_kernel::<32, 32, 32, true>::launch(
            device, grid, a, b, c, sizes, d0, d1, d2, d3, d4,
        ),
    }
}

/// The most experts the TMA kernel scans at once (its `EB`).
const TMA_MAX_EXPERTS: usize = 256;

/// The persistent warp-specialized grouped kernels, one per element type:
/// `hopper_gemm_fp8`'s structure (a TMA producer filling a `pipe!` of
/// stages, two consumer warp groups on wgmma) over the tiles of every
/// group, each task finding a tile's group from every group's tile count (a
/// scan of `EB` experts done once per task, then a few reductions per
/// tile). A's descriptor is the whole `[rows, k]` and B's spans every
/// expert: a tile reaching past its group's rows or its expert's columns
/// computes the neighbours', which the masked epilogue (bf16 stores from
/// registers) leaves alone. The tasks' loops run to a tile count read from
/// the device, which the protocol checker does not follow: every task
/// computes the same count, and the interpreter tests run the protocol
/// (under random schedules too).
///
/// Per element type: B's block and where a tile's K block of it starts
/// (`g`: the group, `col0`: the tile's first column, `k0`: its K offset),
/// a consumer's step of the K loop (stage `it` ready as `ready`, this
/// group's rows of A as `a_half`; it adds into `acc` and releases stages)
/// and what follows the loop, the extra parameters and the epilogue, which
/// defines `out` (from `acc`, `rows`, `cols`, their masks, `g`, `n`). Written in the forms the golden-PTX
/// test expands (`tlx-codegen/tests/macro_templates.rs`).
macro_rules! grouped_ws_kernel {
    (
        fn $name:ident<$t:ident>,
        b_block = [$bb0:ident, $bb1:ident],
        b_at = $b_at:tt,
        k_step = {$($k_step:tt)*},
        after_k = {$($after_k:tt)*},
        params = ($($extra:tt)*),
        epilogue = {$($epilogue:tt)*},
        configs = $configs:tt,
    ) => {
        #[tlx::kernel(arch = "sm_90a", num_warps = 4, check_protocol = false, configs = $configs)]
        fn $name<
            const BM: usize,
            const BN: usize,
            const BK: usize,
            const NUM_STAGES: usize,
            const EB: usize,
            const MASKED: bool,
        >(
            a_desc: TensorDesc<$t, BM, BK>,
            b_desc: TensorDesc<$t, $bb0, $bb1>,
            c: Ptr<bf16>,
            $($extra)*
            sizes: Ptr<i32>,
            m_total: i32,
            m_max: i32,
            n: i32,
            k: i32,
            experts: i32,
        ) {
            let a_bufs = local_alloc([BM, BK], $t, NUM_STAGES);
            let b_bufs = local_alloc([$bb0, $bb1], $t, NUM_STAGES);
            let stages = pipe!(capacity = NUM_STAGES, a = a_bufs, b = b_bufs);
            let k_tiles = cdiv(k, BK);
            let tiles_n = cdiv(n, BN);
            let first = program_id(0);
            let stride = num_programs(0);
            // Every group's first row, end and first tile (in group order, M
            // fastest within a group), and the tile count of all.
            fn schedule(
                sizes: Ptr<i32>,
                m_total: i32,
                m_max: i32,
                experts: i32,
                tiles_n: i32,
            ) -> (Tensor, Tensor, Tensor, Tensor, i32) {
                let es = arange(0, EB);
                let live = es < experts;
                let mut starts = es * m_max;
                let mut ends =
                    starts + minimum(maximum(load(sizes + es, mask = live, other = 0), 0), m_max);
                if !MASKED {
                    starts = minimum(load(sizes + es, mask = live, other = 0), m_total);
                    ends = minimum(load(sizes + es + 1, mask = live, other = 0), m_total);
                }
                let tiles_m = cdiv(maximum(ends - starts, 0), BM);
                let tiles = select(live, tiles_m * tiles_n, 0);
                let (firsts, total) = cumsum(tiles, 0);
                (starts, ends, firsts + tiles, tiles_m, total)
            }
            // Tile t's group, first row and column, and its group's end row.
            fn locate(
                t: i32,
                starts: Tensor,
                ends: Tensor,
                lasts: Tensor,
                tiles_m: Tensor,
                tiles_n: i32,
            ) -> (i32, i32, i32, i32) {
                // Groups ending at or before tile t are a prefix: their count is t's group.
                let g = sum(select(lasts <= t, 1, 0));
                let here = arange(0, EB) == g;
                let group_tiles_m = sum(select(here, tiles_m, 0));
                let local = t - (sum(select(here, lasts, 0)) - group_tiles_m * tiles_n);
                (
                    g,
                    sum(select(here, starts, 0)) + (local % group_tiles_m) * BM,
                    (local / group_tiles_m) * BN,
                    sum(select(here, ends, 0)),
                )
            }
            async_tasks! {
                task(default, num_regs = 40) {
                    let (starts, ends, lasts, tiles_m, total) =
                        schedule(sizes, m_total, m_max, experts, tiles_n);
                    let writer = stages.writer();
                    for tile in (first..total).step_by(stride) {
                        let (g, row0, col0, _) =
                            locate(tile, starts, ends, lasts, tiles_m, tiles_n);
                        let done = (tile - first) / stride * k_tiles;
                        for kk in 0..k_tiles {
                            let it = done + kk;
                            let k0 = kk * BK;
                            let slot = writer.acquire(it);
                            async_descriptor_load(a_desc, slot.a, [row0, k0]);
                            async_descriptor_load(b_desc, slot.b, $b_at);
                            writer.commit(it);
                        }
                    }
                }
                task(num_warps = 4, num_regs = 232, replicate = 2) {
                    let half = async_task_replica_id();
                    let (starts, ends, lasts, tiles_m, total) =
                        schedule(sizes, m_total, m_max, experts, tiles_n);
                    let reader = stages.reader();
                    for tile in (first..total).step_by(stride) {
                        let (g, row0, col0, end) =
                            locate(tile, starts, ends, lasts, tiles_m, tiles_n);
                        let done = (tile - first) / stride * k_tiles;
                        let mut acc = zeros([64, BN], f32);
                        for kk in 0..k_tiles {
                            let it = done + kk;
                            let ready = reader.wait(it);
                            let a_half = local_slice(ready.a, [half * 64, 0], [64, BK]);
                            $($k_step)*
                        }
                        $($after_k)*
                        let rows = row0 + half * 64 + arange(0, 64);
                        let cols = col0 + arange(0, BN);
                        let rows_ok = rows < end;
                        let cols_ok = cols < n;
                        $($epilogue)*
                        store(
                            c + rows[(.., None)] * n + cols[(None, ..)],
                            out.to(bf16),
                            mask = rows_ok[(.., None)] & cols_ok[(None, ..)],
                        );
                    }
                }
            }
        }
    };
}

// fp8 (e4m3) with rowwise scales: B is the transposed weights `[experts *
// n, k]` (K-major, the only B fp8 wgmma reads, through `local_trans`); the
// epilogue applies the row and column scales.
grouped_ws_kernel! {
    fn grouped_gemm_fp8_kernel<f8e4m3>,
    b_block = [BN, BK],
    b_at = [g * n + col0, k0],
    k_step = {
        acc = async_dot(a_half, local_trans(ready.b), acc);
        acc = async_dot_wait(1, acc);
        if it > 0 {
            reader.release(it - 1);
        }
    },
    after_k = { acc = async_dot_wait(0, acc); },
    params = (scale_a: Ptr<f32>, scale_b: Ptr<f32>,),
    epilogue = {
        let sa = load(scale_a + rows, mask = rows_ok, other = 0.0);
        let sb = load(scale_b + g * n + cols, mask = cols_ok, other = 0.0);
        let out = acc * sa[(.., None)] * sb[(None, ..)];
    },
    configs = [
        (BM = 128, BN = 256, BK = 128, NUM_STAGES = 3, EB = 256, MASKED = false),
        (BM = 128, BN = 128, BK = 128, NUM_STAGES = 4, EB = 256, MASKED = true),
    ],
}

// bf16: B is the weights `[experts * k, n]` as they are (N-major), so `k`
// must be a multiple of `BK` (a block may not cross experts). 128-column
// tiles: at 256 the consumers spill (16-24 bytes) storing from registers.
grouped_ws_kernel! {
    fn grouped_gemm_ws_kernel<bf16>,
    b_block = [BK, BN],
    b_at = [g * k + k0, col0],
    k_step = {
        acc = async_dot(a_half, ready.b, acc);
        acc = async_dot_wait(1, acc);
        if it > 0 {
            reader.release(it - 1);
        }
    },
    after_k = { acc = async_dot_wait(0, acc); },
    params = (),
    epilogue = { let out = acc; },
    configs = [
        (BM = 128, BN = 128, BK = 64, NUM_STAGES = 4, EB = 256, MASKED = false),
        (BM = 128, BN = 128, BK = 64, NUM_STAGES = 4, EB = 256, MASKED = true),
    ],
}

/// The general layout: group `g` multiplies its own row-major `[m, k]` A
/// and `[k, n]` B into `[m, n]` C, the operands' addresses and the sizes
/// in device tables (`sizes[3 g..3 g + 3]` = m, n, k), as CUTLASS's
/// grouped GEMM takes them.
#[tlx::kernel(configs = [
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, num_warps = 8, num_stages = 4),
    (BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 32, num_warps = 4),
])]
fn grouped_gemm_general_kernel<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a_addrs: Ptr<i64>,
    b_addrs: Ptr<i64>,
    c_addrs: Ptr<i64>,
    sizes: Ptr<i32>,
    groups: i32,
) {
    let pid = program_id(0);
    let programs = num_programs(0);
    let offs_k = arange(0, BLOCK_K);
    let mut base = 0;
    for g in 0..groups {
        let m = load(sizes + g * 3);
        let n = load(sizes + g * 3 + 1);
        let k = load(sizes + g * 3 + 2);
        let a = load(a_addrs + g) as Ptr<bf16>;
        let b = load(b_addrs + g) as Ptr<bf16>;
        let c = load(c_addrs + g) as Ptr<bf16>;
        let tiles_n = cdiv(n, BLOCK_N);
        let tiles = cdiv(m, BLOCK_M) * tiles_n;
        let first = base + (pid - base % programs + programs) % programs;
        for t in (first..base + tiles).step_by(programs) {
            let local = t - base;
            let offs_m = (local / tiles_n) * BLOCK_M + arange(0, BLOCK_M);
            let offs_n = (local % tiles_n) * BLOCK_N + arange(0, BLOCK_N);
            let rows_ok = offs_m[(.., None)] < m;
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
            store(
                c + offs_m[(.., None)] * n + offs_n[(None, ..)],
                acc.to(bf16),
                mask = rows_ok & cols_ok,
            );
        }
        base += tiles;
    }
}

// fp8 (e4m3) with DeepGEMM's 128-block scales: `scale_a` `[rows, k / 128]`
// (a row's scale per 128 of K), `scale_b` `[experts, cdiv(n, 128), k / 128]`
// (per 128 x 128 block of each expert's `[n, k]`). 128-wide K and N blocks,
// so each K step's product is scaled once by its block's scales and added
// to an f32 accumulator (the promotion DeepGEMM does) before the stage is
// released.
grouped_ws_kernel! {
    fn grouped_gemm_fp8_blockwise_kernel<f8e4m3>,
    b_block = [BN, BK],
    b_at = [g * n + col0, k0],
    k_step = {
        let mut part = async_dot(a_half, local_trans(ready.b), zeros([64, BN], f32));
        part = async_dot_wait(0, part);
        reader.release(it);
        let scale_rows = row0 + half * 64 + arange(0, 64);
        let sa = load(scale_a + scale_rows * k_tiles + kk, mask = scale_rows < m_total, other = 0.0);
        let sb = load(scale_b + (g * cdiv(n, BN) + col0 / BN) * k_tiles + kk);
        acc += part * sa[(.., None)] * sb;
    },
    after_k = {},
    params = (scale_a: Ptr<f32>, scale_b: Ptr<f32>,),
    epilogue = { let out = acc; },
    configs = [
        (BM = 128, BN = 128, BK = 128, NUM_STAGES = 4, EB = 256, MASKED = false),
        (BM = 128, BN = 128, BK = 128, NUM_STAGES = 4, EB = 256, MASKED = true),
    ],
}

/// The general layout on the tensor cores, one program per tile: group
/// `g`'s tiles are programs `tile_ends[g - 1]..tile_ends[g]` (the call
/// knows every size), and each program builds descriptors of its group's
/// A, B and C on the device (`make_tensor_descriptor`: TMA zero-fills and
/// clips at the group's own edges, so no size need be a multiple of a
/// block), then runs `tlx::ops::gemm`'s K loop and a TMA store.
#[tlx::kernel(configs = [
    (BM = 128, BN = 128, BK = 64, EB = 256, num_warps = 8, num_stages = 4),
    (BM = 32, BN = 32, BK = 32, EB = 256, num_warps = 4),
])]
fn grouped_gemm_general_tma_kernel<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const EB: usize,
>(
    a_addrs: Ptr<i64>,
    b_addrs: Ptr<i64>,
    c_addrs: Ptr<i64>,
    sizes: Ptr<i32>,
    tile_ends: Ptr<i32>,
    groups: i32,
) {
    let t = program_id(0);
    let gs = arange(0, EB);
    let ends = load(tile_ends + gs, mask = gs < groups, other = 0);
    // Groups ending at or before tile t are a prefix: their count is t's group.
    let g = sum(select((ends <= t) & (gs < groups), 1, 0));
    let first = sum(select(gs == g - 1, ends, 0));
    let m = load(sizes + g * 3);
    let n = load(sizes + g * 3 + 1);
    let k = load(sizes + g * 3 + 2);
    let a = make_tensor_descriptor(load(a_addrs + g) as Ptr<bf16>, [m, k], [k, 1], [BM, BK]);
    let b = make_tensor_descriptor(load(b_addrs + g) as Ptr<bf16>, [k, n], [n, 1], [BK, BN]);
    let c = make_tensor_descriptor(load(c_addrs + g) as Ptr<bf16>, [m, n], [n, 1], [BM, BN]);
    let tiles_m = cdiv(m, BM);
    let row0 = ((t - first) % tiles_m) * BM;
    let col0 = ((t - first) / tiles_m) * BN;
    let mut acc = zeros([BM, BN], f32);
    for kk in 0..cdiv(k, BK) {
        acc = dot(a.load([row0, kk * BK]), b.load([kk * BK, col0]), acc);
    }
    c.store([row0, col0], acc.to(bf16));
}

/// One problem of [`grouped_gemm_general`]: `c = a @ b` with `a` `[m, k]`,
/// `b` `[k, n]` and `c` `[m, n]`, row-major bf16 buffers on the device.
pub struct GroupProblem<'a> {
    /// `[m, k]`.
    pub a: &'a Buffer<bf16>,
    /// `[k, n]`.
    pub b: &'a Buffer<bf16>,
    /// `[m, n]`, written.
    pub c: &'a Buffer<bf16>,
    /// `(m, n, k)`.
    pub shape: (usize, usize, usize),
}

/// The general layout (every group its own buffers and sizes): `c = a @
/// b` for every problem, as one kernel reading the operands' addresses and
/// the sizes from tables this call uploads: one program per tile on the
/// tensor cores through descriptors built per group on the device where
/// every group's rows are whole 16-byte units (`n` and `k` multiples of 8,
/// 16-byte aligned buffers, at most 256 groups), else a persistent kernel
/// of pointer loads.
pub fn grouped_gemm_general(device: &Device, problems: &[GroupProblem<'_>]) -> Result<(), Error> {
    const OP: &str = "grouped_gemm_general";
    let mut sizes = Vec::with_capacity(3 * problems.len());
    let mut addrs = [Vec::new(), Vec::new(), Vec::new()];
    for (g, p) in problems.iter().enumerate() {
        let (m, n, k) = p.shape;
        for (name, len) in [("m", m), ("n", n), ("k", k)] {
            if len > super::MAX_EXTENT {
                return Err(Error::InvalidShape {
                    op: OP,
                    reason: format!(
                        "group {g}'s `{name}` is {len}, past the kernels' 32-bit indexing"
                    ),
                });
            }
        }
        for (name, buffer, needed) in [("a", p.a, m * k), ("b", p.b, k * n), ("c", p.c, m * n)] {
            if buffer.len() < needed || !buffer.is_on(device) {
                return Err(Error::InvalidShape {
                    op: OP,
                    reason: format!(
                        "group {g}'s `{name}` holds {} elements{}; its shape needs {needed} on this device",
                        buffer.len(),
                        if buffer.is_on(device) { "" } else { " on another device" }
                    ),
                });
            }
        }
        sizes.extend([m as i32, n as i32, k as i32]);
        for (table, buffer) in addrs.iter_mut().zip([p.a, p.b, p.c]) {
            table.push(buffer.kernel_address());
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let [a, b, c] = addrs.map(|t| device.upload(&t));
    let (a, b, c, sizes) = (a?, b?, c?, device.upload(&sizes)?);
    let groups = problems.len() as i32;
    // TMA takes every group where rows are whole 16-byte units starting on
    // one and no dimension of a group with tiles is empty.
    let tma = problems.len() <= TMA_MAX_EXPERTS
        && problems.iter().all(|p| {
            let (m, n, k) = p.shape;
            let aligned = [p.a, p.b, p.c]
                .iter()
                .all(|buffer| buffer.kernel_address() % 16 == 0);
            m * n == 0 || (k > 0 && k % 8 == 0 && n % 8 == 0 && aligned)
        });
    if tma {
        let (bm, bn) = if device.is_gpu() {
            (128, 128)
        } else {
            (32, 32)
        };
        let mut tile_ends = Vec::with_capacity(problems.len());
        let mut tiles = 0usize;
        for p in problems {
            let (m, n, _) = p.shape;
            tiles += m.div_ceil(bm) * n.div_ceil(bn);
            tile_ends.push(i32::try_from(tiles).map_err(|_| Error::InvalidShape {
                op: OP,
                reason: format!("{tiles} tiles: past a launch's grid"),
            })?);
        }
        if tiles == 0 {
            return Ok(());
        }
        let ends = device.upload(&tile_ends)?;
        let grid = tiles as u32;
        return if device.is_gpu() {
            grouped_gemm_general_tma_kernel::<128, 128, 64, 256>::launch(
                device, grid, &a, &b, &c, &sizes, &ends, groups,
            )
        } else {
            grouped_gemm_general_tma_kernel::<32, 32, 32, 256>::launch(
                device, grid, &a, &b, &c, &sizes, &ends, groups,
            )
        };
    }
    let grid = device.multiprocessor_count().max(1);
    if device.is_gpu() {
        grouped_gemm_general_kernel::<128, 128, 64>::launch(
            device, grid, &a, &b, &c, &sizes, groups,
        )
    } else {
        grouped_gemm_general_kernel::<32, 32, 32>::launch(device, grid, &a, &b, &c, &sizes, groups)
    }
}

/// How the fp8 grouped GEMMs' dequantization scales are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Scales {
    /// `torch._scaled_grouped_mm`'s rowwise scales: `scale_a` one f32 per
    /// row of A, `scale_b` `[experts, n]` (one per output column).
    Rowwise,
    /// DeepGEMM's: `scale_a` `[rows, k / 128]` (a row's scale per 128 of
    /// K) and `scale_b` `[experts, cdiv(n, 128), k / 128]` (per 128 x 128
    /// block of each expert's `[n, k]`); `k` must be a multiple of 128.
    /// Each 128-wide K step's product is scaled by its blocks' scales in
    /// f32 (DeepGEMM's promotion), on 128 x 128 tiles.
    Blockwise,
}

/// `c[rows of e] = diag(scale_a[rows]) · (a[rows of e] @ b_t[e]ᵀ) ·
/// diag(scale_b[e])` for every expert `e`, in fp8 (e4m3) with bf16 output:
/// the contiguous layout of [`grouped_gemm`] with B transposed, as
/// `torch._scaled_grouped_mm` takes it with rowwise scales. `a` is `[m_total,
/// k]` (rows sorted by expert) with `scale_a` one f32 per row; `b_t` is
/// `[experts, n, k]` (each expert's weights K-major, as fp8 wgmma reads them)
/// with `scale_b` `[experts, n]`; `c` is `[m_total, n]`; `offsets` as for
/// [`grouped_gemm`]. Sums accumulate in wgmma's fp8 accumulator (cuBLASLt's
/// "fast accumulation"). TMA moves the rows, so `k` must be a multiple of 16;
/// at most 256 experts (the kernel scans them at once). Hopper GPUs
/// (`sm_90a`) and the CPU interpreter. [`grouped_gemm_fp8_with`] takes
/// DeepGEMM's 128-block scales too.
pub fn grouped_gemm_fp8(
    device: &Device,
    a: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    b_t: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    c: &impl PtrArg<bf16>,
    offsets: &impl PtrArg<i32>,
    shape: (usize, usize, usize, usize),
) -> Result<(), Error> {
    grouped_gemm_fp8_with(device, a, b_t, c, offsets, shape, Fp8Scales::Rowwise)
}

/// [`grouped_gemm_fp8`] with the scales laid out as `scales` says.
pub fn grouped_gemm_fp8_with(
    device: &Device,
    a: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    b_t: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    c: &impl PtrArg<bf16>,
    offsets: &impl PtrArg<i32>,
    (m_total, n, k, experts): (usize, usize, usize, usize),
    scales: Fp8Scales,
) -> Result<(), Error> {
    const OP: &str = "grouped_gemm_fp8";
    super::holds(OP, "offsets", offsets, experts + 1)?;
    let shape = (m_total, 0, n, k, experts);
    fp8_launch(OP, device, (a, b_t, c, offsets), shape, scales)
}

/// [`grouped_gemm_fp8`] in the masked layout of [`grouped_gemm_masked`]:
/// `a` `[experts, m_max, k]` with `scale_a` `[experts, m_max]`, `c`
/// `[experts, m_max, n]`, of whose rows only the first `counts[e]` per
/// expert are multiplied; `b_t` `[experts, n, k]` with `scale_b` `[experts,
/// n]`.
pub fn grouped_gemm_fp8_masked(
    device: &Device,
    a: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    b_t: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    c: &impl PtrArg<bf16>,
    counts: &impl PtrArg<i32>,
    shape: (usize, usize, usize, usize),
) -> Result<(), Error> {
    grouped_gemm_fp8_masked_with(device, a, b_t, c, counts, shape, Fp8Scales::Rowwise)
}

/// [`grouped_gemm_fp8_masked`] with the scales laid out as `scales` says
/// (rows of A counting every expert's `m_max`).
pub fn grouped_gemm_fp8_masked_with(
    device: &Device,
    a: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    b_t: (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
    c: &impl PtrArg<bf16>,
    counts: &impl PtrArg<i32>,
    (m_max, n, k, experts): (usize, usize, usize, usize),
    scales: Fp8Scales,
) -> Result<(), Error> {
    const OP: &str = "grouped_gemm_fp8_masked";
    super::holds(OP, "counts", counts, experts)?;
    let shape = (experts * m_max, m_max, n, k, experts);
    fp8_launch(OP, device, (a, b_t, c, counts), shape, scales)
}

/// Checks the fp8 ops' sizes and buffers and launches the persistent
/// kernel of `scales` (one program per SM, or per tile when there are
/// fewer); `m_max > 0` is the masked layout.
#[allow(clippy::type_complexity)]
fn fp8_launch(
    op: &'static str,
    device: &Device,
    ((a, scale_a), (b_t, scale_b), c, sizes): (
        (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
        (&impl PtrArg<F8E4M3>, &impl PtrArg<f32>),
        &impl PtrArg<bf16>,
        &impl PtrArg<i32>,
    ),
    (m_total, m_max, n, k, experts): (usize, usize, usize, usize, usize),
    scales: Fp8Scales,
) -> Result<(), Error> {
    // The kernel indexes B's and scale_b's rows (`experts * n`), A's, C's
    // and scale_a's in i32; B itself may pass 2^31 elements.
    super::extents(op, &[("k", k), ("n", n)])?;
    super::extents(op, &[("experts", experts), ("n", n)])?;
    if m_total > 0 {
        super::extents(op, &[("rows", m_total), ("k", k)])?;
        super::extents(op, &[("rows", m_total), ("n", n)])?;
    }
    let refuse = |reason: String| Err(Error::InvalidShape { op, reason });
    let blockwise = scales == Fp8Scales::Blockwise;
    if blockwise && k % 128 != 0 {
        return refuse(format!(
            "k = {k}: 128-block scales need k a multiple of 128 (pad the matrices with zeros)"
        ));
    }
    if k % 16 != 0 {
        return refuse(format!(
            "k = {k}: TMA moves rows of whole 16-byte units, so k must be a multiple of 16 \
             (pad the matrices with zeros)"
        ));
    }
    if experts > TMA_MAX_EXPERTS {
        return refuse(format!(
            "{experts} experts: the kernel schedules at most {TMA_MAX_EXPERTS} groups per call \
             (split the experts over several calls)"
        ));
    }
    let (a_scales, b_scales) = if blockwise {
        (m_total * (k / 128), experts * n.div_ceil(128) * (k / 128))
    } else {
        (m_total, experts * n)
    };
    super::holds(op, "a", a, m_total * k)?;
    super::holds(op, "scale_a", scale_a, a_scales)?;
    super::holds(op, "b_t", b_t, experts * n * k)?;
    super::holds(op, "scale_b", scale_b, b_scales)?;
    super::holds(op, "c", c, m_total * n)?;
    if m_total == 0 || n == 0 {
        return Ok(());
    }
    let a_desc = TensorDesc::over(a, &[m_total, k], &[k, 1])?;
    let bt_desc = TensorDesc::over(b_t, &[experts * n, k], &[k, 1])?;
    let row_tiles = if m_max > 0 {
        experts * m_max.div_ceil(128)
    } else {
        m_total.div_ceil(128) + experts
    };
    // The decode (masked) and blockwise configurations have 128-column
    // tiles (decode: more of them for the few rows).
    let bn = if m_max > 0 || blockwise { 128 } else { 256 };
    let most_tiles = row_tiles * n.div_ceil(bn);
    let grid = most_tiles.min(device.multiprocessor_count().max(1) as usize) as u32;
    let (d0, d1, d2, d3, d4) = (
        m_total as i32,
        m_max as i32,
        n as i32,
        k as i32,
        experts as i32,
    );
    macro_rules! fp8 {
        ($kernel:ident, $bn:literal, $stages:literal, $masked:literal) => {
            $kernel::<128, $bn, 128, $stages, 256, $masked>::launch(
                device, grid, &a_desc, &bt_desc, c, scale_a, scale_b, sizes, d0, d1, d2, d3, d4,
            )
        };
    }
    match (blockwise, m_max > 0) {
        (false, false) => fp8!(grouped_gemm_fp8_kernel, 256, 3, false),
        (false, true) => fp8!(grouped_gemm_fp8_kernel, 128, 4, true),
        (true, false) => fp8!(grouped_gemm_fp8_blockwise_kernel, 128, 4, false),
        (true, true) => fp8!(grouped_gemm_fp8_blockwise_kernel, 128, 4, true),
    }
}
