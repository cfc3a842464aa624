//! Grouped GEMM for mixture-of-experts layers (issue 55), first form: the
//! contiguous layout, one problem per expert, launched as one persistent
//! kernel whose tile schedule walks the groups on the device, so the host
//! never reads the group sizes (no synchronization per call).
//!
//! [`grouped_gemm`]: `C[rows of e] = A[rows of e] @ B[e]` for every expert
//! `e`, where the rows of expert `e` are `offsets[e]..offsets[e + 1]` of
//! `A` (`[m_total, k]`, the tokens sorted by expert) and `C`
//! (`[m_total, n]`), and `B` is `[experts, k, n]`; bf16 in and out, f32
//! accumulation. Empty groups, groups smaller than a tile and any `m_total`
//! work. Block-level `dot` tiles for now (the warp-specialized TMA form is
//! the next step).

use crate::prelude::*;
use crate::PtrArg;

/// Programs walk the tiles of every group in turn (group `e`'s tiles
/// numbered after those of the groups before it), each taking every
/// `num_programs`-th tile.
#[tlx::kernel(configs = [
    (BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, num_warps = 8, num_stages = 4),
    (BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 32, num_warps = 4),
])]
fn grouped_gemm_contiguous<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<bf16>,
    offsets: Ptr<i32>,
    m_total: i32,
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
        let start = minimum(load(offsets + e), m_total);
        let end = minimum(load(offsets + e + 1), m_total);
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
    (m_total, n, k, experts): (usize, usize, usize, usize),
) -> Result<(), Error> {
    const OP: &str = "grouped_gemm";
    super::extents(OP, &[("k", k), ("n", n)])?;
    super::extents(OP, &[("experts", experts)])?;
    if m_total > 0 {
        super::extents(OP, &[("m_total", m_total), ("k", k)])?;
        super::extents(OP, &[("m_total", m_total), ("n", n)])?;
    }
    // B's offsets are i64 in the kernel; its size only has to fit memory.
    super::holds(OP, "a", a, m_total * k)?;
    super::holds(OP, "b", b, experts * k * n)?;
    super::holds(OP, "c", c, m_total * n)?;
    super::holds(OP, "offsets", offsets, experts + 1)?;
    if m_total == 0 {
        return Ok(());
    }
    let grid = device.multiprocessor_count().max(1);
    let dims = (m_total as i32, n as i32, k as i32, experts as i32);
    if device.is_gpu() {
        grouped_gemm_contiguous::<128, 128, 64>::launch(
            device, grid, a, b, c, offsets, dims.0, dims.1, dims.2, dims.3,
        )
    } else {
        grouped_gemm_contiguous::<32, 32, 32>::launch(
            device, grid, a, b, c, offsets, dims.0, dims.1, dims.2, dims.3,
        )
    }
}
