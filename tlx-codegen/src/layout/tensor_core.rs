//! The register layouts the tensor cores impose: the accumulator fragments
//! of `mma.sync` (m16n8 tiles, one warp each) and of `wgmma` (m64nN tiles,
//! one warp group of four warps each), and how Blackwell's `tcgen05.ld`
//! and `tcgen05.st` spread a tensor-memory matrix over a task's threads.
//!
//! Both share one 16x8 core: register bits own (col 1, row 8), lane bits
//! (col 2, col 4, row 1, row 2, row 4). They differ in how warps and further
//! registers tile the rest of the accumulator.
//!
//! wgmma's A operand held in registers (16-bit inputs) uses the same core:
//! per k16 step each warp owns 16 rows as in `mma.sync`'s m16n8k16 A
//! fragment, which is the accumulator's fragment of a 16-column block.

use super::{dim_bits, LayoutError, LinearLayout};

/// Warps along M and N for an `[m, n]` `mma.sync` accumulator.
pub fn warp_grid(m: usize, n: usize, num_warps: u32) -> (usize, usize) {
    let nw = num_warps as usize;
    let warps_m = nw.min((m / 16).max(1));
    let warps_n = (nw / warps_m).min((n / 8).max(1));
    (warps_m, warps_n)
}

/// Flat index of `(row, col)` in an `[_, n]` matrix.
fn at(n: usize, row: usize, col: usize) -> u32 {
    (row * n + col) as u32
}

/// The 16x8 core's register and lane bases.
fn core(n: usize) -> (Vec<u32>, Vec<u32>) {
    let regs = vec![at(n, 0, 1), at(n, 8, 0)];
    let lanes = vec![
        at(n, 0, 2),
        at(n, 0, 4),
        at(n, 1, 0),
        at(n, 2, 0),
        at(n, 4, 0),
    ];
    (regs, lanes)
}

/// `from, 2 * from, 4 * from, ...` while below `below`.
fn doublings(from: usize, below: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(from), |x| Some(x * 2)).take_while(move |x| *x < below)
}

/// `regs` followed by register bits that repeat the tile along columns
/// (from `cols.0` up to `cols.1`), then along rows (likewise).
fn repeats(mut regs: Vec<u32>, n: usize, rows: (usize, usize), cols: (usize, usize)) -> Vec<u32> {
    regs.extend(doublings(cols.0, cols.1).map(|c| at(n, 0, c)));
    regs.extend(doublings(rows.0, rows.1).map(|r| at(n, r, 0)));
    regs
}

fn check_shape(m: usize, n: usize, num_warps: u32) -> Result<(), LayoutError> {
    dim_bits(&[m, n])?;
    if m % 16 != 0 || n % 8 != 0 || !num_warps.is_power_of_two() {
        return Err(LayoutError::NoTensorCoreLayout { m, n, num_warps });
    }
    Ok(())
}

/// The accumulator layout of `mma.sync` m16n8 tiles over `[m, n]`: warps
/// tile M then N; further register bits repeat tiles along N, then M.
pub fn mma_sync_accumulator(
    m: usize,
    n: usize,
    num_warps: u32,
) -> Result<LinearLayout, LayoutError> {
    check_shape(m, n, num_warps)?;
    let (warps_m, warps_n) = warp_grid(m, n, num_warps);
    let (regs, lanes) = core(n);
    let regs = repeats(regs, n, (16 * warps_m, m), (8 * warps_n, n));
    let mut warps: Vec<u32> = doublings(1, warps_m)
        .map(|w| at(n, 16 * w, 0))
        .chain(doublings(1, warps_n).map(|w| at(n, 0, 8 * w)))
        .collect();
    while (1usize << warps.len()) < num_warps as usize {
        warps.push(0);
    }
    Ok(LinearLayout {
        shape: vec![m, n],
        regs,
        lanes,
        warps,
    })
}

/// The accumulator layout of `wgmma` m64nN instructions over `[m, n]` with
/// `n` at most 256: the four warps of a warp group own rows 16 apart, warp
/// groups tile M, and when `m` exceeds 64 per warp group each warp group
/// issues one instruction per further 64 rows, whose registers follow the
/// first instruction's (register `i` of instruction `j` is register
/// `j * n / 2 + i`), as PTX numbers the fragment of D.
pub fn wgmma_accumulator(m: usize, n: usize, num_warps: u32) -> Result<LinearLayout, LayoutError> {
    check_shape(m, n, num_warps)?;
    let groups = num_warps as usize / 4;
    if num_warps % 4 != 0 || n > 256 || m % (64 * groups) != 0 {
        return Err(LayoutError::NoTensorCoreLayout { m, n, num_warps });
    }
    let (regs, lanes) = core(n);
    let regs = repeats(regs, n, (64 * groups, m), (8, n));
    let warps = (0..num_warps.trailing_zeros())
        .map(|bit| at(n, 16 << bit, 0))
        .collect();
    Ok(LinearLayout {
        shape: vec![m, n],
        regs,
        lanes,
        warps,
    })
}

/// The register layout of wgmma's A operand `[m, k]` read from registers
/// (f16/bf16 inputs): for K step `s` (16 columns) and M block `j` (64 rows
/// per warp group), a thread's eight elements are its registers
/// `j * k / 2 + 8 * s ..+ 8`, packed in pairs into the instruction's four
/// 32-bit operands. Its bases are those of [`wgmma_accumulator`] of an
/// `[m, k]` tile, so an accumulator whose N equals this K converts into it
/// without moving data (flash attention's `P = softmax(S)` fed back as A).
pub fn wgmma_register_a(m: usize, k: usize, num_warps: u32) -> Result<LinearLayout, LayoutError> {
    check_shape(m, k, num_warps)?;
    let groups = num_warps as usize / 4;
    if num_warps % 4 != 0 || k % 16 != 0 || m % (64 * groups) != 0 {
        return Err(LayoutError::NoTensorCoreLayout { m, n: k, num_warps });
    }
    let (regs, lanes) = core(k);
    let regs = repeats(regs, k, (64 * groups, m), (8, k));
    let warps = (0..num_warps.trailing_zeros())
        .map(|bit| at(k, 16 << bit, 0))
        .collect();
    Ok(LinearLayout {
        shape: vec![m, k],
        regs,
        lanes,
        warps,
    })
}

/// The layout of an `[128, n]` tensor-memory matrix as `tcgen05.ld` /
/// `tcgen05.st` of shape `32x32b` move it: warp `w` may reach TMEM lanes
/// `32 * (w % 4)` up, so thread `t` of it holds row `32 * (w % 4) + t`;
/// further warp groups split the columns, and a thread's registers are its
/// consecutive columns. Needs whole warp groups.
///
/// An `[64, n]` matrix (an M = 64 MMA's accumulator) holds rows `16 q ..
/// 16 q + 15` in lanes `32 q ..`: shape `16x32bx2` moves it, thread `t < 16`
/// of warp `w` holding row `16 * (w % 4) + t` and thread `t + 16` the same
/// row's second half of the warp group's columns.
pub fn tensor_memory_rows(m: usize, n: usize, num_warps: u32) -> Result<LinearLayout, LayoutError> {
    dim_bits(&[m, n])?;
    let groups = num_warps as usize / 4;
    let fits = num_warps % 4 == 0 && num_warps.is_power_of_two();
    if m == 64 && fits && n >= 2 * groups {
        let per_group = n / groups;
        return Ok(LinearLayout {
            shape: vec![m, n],
            regs: doublings(1, per_group / 2).map(|c| at(n, 0, c)).collect(),
            lanes: (0..4)
                .map(|b| at(n, 1 << b, 0))
                .chain([at(n, 0, per_group / 2)])
                .collect(),
            warps: [at(n, 16, 0), at(n, 32, 0)]
                .into_iter()
                .chain(doublings(per_group, n).map(|c| at(n, 0, c)))
                .collect(),
        });
    }
    if m != 128 || !fits || n < groups {
        return Err(LayoutError::NoTensorCoreLayout { m, n, num_warps });
    }
    let per_group = n / groups;
    Ok(LinearLayout {
        shape: vec![m, n],
        regs: doublings(1, per_group).map(|c| at(n, 0, c)).collect(),
        lanes: (0..5).map(|b| at(n, 1 << b, 0)).collect(),
        warps: [at(n, 32, 0), at(n, 64, 0)]
            .into_iter()
            .chain(doublings(per_group, n).map(|c| at(n, 0, c)))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn covers_once(l: &LinearLayout, num_warps: u32) {
        let mut seen = HashSet::new();
        for w in 0..num_warps {
            for lane in 0..32 {
                for r in 0..l.num_regs() {
                    assert!(seen.insert(l.flat_index(r, lane, w)));
                }
            }
        }
        assert_eq!(seen.len(), l.numel());
    }

    #[test]
    fn mma_layout_matches_the_ptx_fragment_of_c() {
        let l = mma_sync_accumulator(64, 32, 4).unwrap();
        // 4 warps: 4 along M (64 / 16), 1 along N; each warp repeats 4 tiles along N.
        assert_eq!(l.num_regs(), 4 * 4);
        for lane in 0..32u32 {
            let (gid, tig) = ((lane / 4) as usize, (lane % 4) as usize);
            for i in 0..4 {
                let want = vec![gid + 8 * (i >> 1), tig * 2 + (i & 1)];
                assert_eq!(l.coords(i, lane, 0), want);
            }
            // Register 4 is the next tile along N; warp 1 the next tile along M.
            assert_eq!(l.coords(4, lane, 0), vec![gid, tig * 2 + 8]);
            assert_eq!(l.coords(0, lane, 1), vec![gid + 16, tig * 2]);
        }
        let mut seen = HashSet::new();
        for w in 0..4 {
            for lane in 0..32 {
                for r in 0..l.num_regs() {
                    assert!(seen.insert(l.flat_index(r, lane, w)));
                }
            }
        }
        assert_eq!(seen.len(), 64 * 32);
    }

    #[test]
    fn small_tiles_leave_warps_replicated() {
        let l = mma_sync_accumulator(16, 8, 4).unwrap();
        assert_eq!(l.warps, vec![0, 0]);
        assert_eq!(l.num_regs(), 4);
    }

    #[test]
    fn wgmma_accumulator_matches_the_ptx_fragment_of_d() {
        // PTX's m64nNk16 fragment: thread t (warp w, lane l) holds in
        // register i the element at row 16w + l/4 + 8 * (i/2 % 2), column
        // 8 * (i / 4) + 2 * (l % 4) + i % 2.
        for (m, n, num_warps) in [(64, 128, 4), (128, 256, 8), (128, 64, 4), (256, 128, 8)] {
            let l = wgmma_accumulator(m, n, num_warps).unwrap();
            covers_once(&l, num_warps);
            let per_instr = n / 2;
            for w in 0..num_warps {
                for lane in 0..32u32 {
                    for reg in 0..l.num_regs() {
                        let (instr, i) = (reg / per_instr, reg % per_instr);
                        let group = (w / 4) as usize;
                        let groups = num_warps as usize / 4;
                        let row = 64 * (instr * groups + group)
                            + 16 * (w % 4) as usize
                            + (lane / 4) as usize
                            + 8 * (i / 2 % 2);
                        let col = 8 * (i / 4) + 2 * (lane % 4) as usize + i % 2;
                        assert_eq!(
                            l.coords(reg, lane, w),
                            vec![row, col],
                            "{m}x{n} w{num_warps}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn wgmma_register_a_matches_the_ptx_fragment_of_a() {
        // PTX's m64nNk16 A fragment (16-bit inputs): thread t (warp w, lane
        // l) holds a_i at row 16w + l/4 + 8 * (i/2 % 2), column
        // 2 * (l % 4) + i % 2 + 8 * (i / 4) of the 64x16 block.
        for (m, k, num_warps) in [(64, 16, 4), (64, 64, 4), (128, 128, 8), (128, 512, 4)] {
            let l = wgmma_register_a(m, k, num_warps).unwrap();
            covers_once(&l, num_warps);
            let groups = num_warps as usize / 4;
            for w in 0..num_warps {
                for lane in 0..32u32 {
                    for reg in 0..l.num_regs() {
                        let (block, step, i) = (reg / (k / 2), reg % (k / 2) / 8, reg % 8);
                        let row = 64 * (block * groups + (w / 4) as usize)
                            + 16 * (w % 4) as usize
                            + (lane / 4) as usize
                            + 8 * (i / 2 % 2);
                        let col = 16 * step + 2 * (lane % 4) as usize + i % 2 + 8 * (i / 4);
                        assert_eq!(
                            l.coords(reg, lane, w),
                            vec![row, col],
                            "{m}x{k} w{num_warps}"
                        );
                    }
                }
            }
        }
        // An accumulator with N = K is already in A's layout.
        assert_eq!(
            wgmma_register_a(128, 128, 8).unwrap(),
            wgmma_accumulator(128, 128, 8).unwrap()
        );
        assert!(wgmma_register_a(64, 8, 4).is_err());
        assert!(wgmma_register_a(32, 16, 4).is_err());
    }

    #[test]
    fn wgmma_needs_whole_warp_groups() {
        assert!(wgmma_accumulator(64, 64, 2).is_err());
        assert!(wgmma_accumulator(64, 64, 8).is_err());
        assert!(wgmma_accumulator(64, 512, 4).is_err());
    }

    #[test]
    fn tensor_memory_rows_give_each_thread_one_row() {
        for (n, warps) in [(64, 4), (256, 4), (256, 8), (32, 16)] {
            let l = tensor_memory_rows(128, n, warps).expect("layout");
            covers_once(&l, warps);
            for warp in 0..warps {
                for lane in 0..32 {
                    let [row, col] = l.coords(0, lane, warp)[..] else {
                        panic!("a matrix")
                    };
                    assert_eq!(row as u32, 32 * (warp % 4) + lane);
                    assert_eq!(col, (warp / 4) as usize * n / (warps as usize / 4));
                }
            }
        }
        assert!(
            tensor_memory_rows(32, 64, 4).is_err(),
            "128 or 64 rows only"
        );
        assert!(tensor_memory_rows(128, 64, 2).is_err(), "whole warp groups");
    }

    #[test]
    fn sixty_four_rows_take_sixteen_lanes_per_warp_and_two_halves() {
        for (n, warps) in [(64, 4), (256, 4), (256, 8)] {
            let l = tensor_memory_rows(64, n, warps).expect("layout");
            covers_once(&l, warps);
            let per_group = n / (warps as usize / 4);
            for warp in 0..warps {
                for lane in 0..32 {
                    let [row, col] = l.coords(0, lane, warp)[..] else {
                        panic!("a matrix")
                    };
                    assert_eq!(row as u32, 16 * (warp % 4) + lane % 16);
                    let half = (lane / 16) as usize * per_group / 2;
                    assert_eq!(col, (warp / 4) as usize * per_group + half);
                }
            }
        }
    }
}
