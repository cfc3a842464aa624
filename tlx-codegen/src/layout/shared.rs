//! Shared-memory layouts: where each element of a tile sits in a shared
//! buffer, as a map from the tile's row-major flat index to a byte offset.
//!
//! Like the distributed layouts of the parent module the map is linear over
//! GF(2): every flat-index bit owns one byte-offset basis and an element's
//! offset is the XOR of the bases of its set bits. Row-major placement is
//! linear (tile sides are powers of two), and so are the XOR swizzles the
//! tensor cores read (`Swizzle<B, 4, 3>`: byte-address bits `[4, 4 + B)`
//! XOR bits `[7, 7 + B)`), so composing a distributed layout with a shared
//! one is a map of bases, and a thread's offset is the XOR of its lane and
//! warp parts with a per-register constant.

use super::{dim_bits, LayoutError, LinearLayout};

/// The swizzles of NVIDIA's "NVMMA" shared layouts, named by the width of
/// the row segment (atom) they permute 16-byte chunks within.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Swizzle {
    /// 32-byte atoms: chunk bit 4 ^= address bit 7.
    B32,
    /// 64-byte atoms: chunk bits 4-5 ^= address bits 7-8.
    B64,
    /// 128-byte atoms: chunk bits 4-6 ^= address bits 7-9.
    B128,
}

impl Swizzle {
    /// Bytes in one row of an atom (its width).
    pub fn atom_bytes(self) -> usize {
        match self {
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The widest swizzle whose atom row fits in `row_bytes`, if any.
    pub fn widest_for(row_bytes: usize) -> Option<Swizzle> {
        [Swizzle::B128, Swizzle::B64, Swizzle::B32]
            .into_iter()
            .find(|s| row_bytes >= s.atom_bytes())
    }

    /// Bits XORed into the chunk index (`B` of `Swizzle<B, 4, 3>`).
    fn bits(self) -> u32 {
        match self {
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        }
    }

    /// Bytes over which the pattern repeats: 8 atom rows. A buffer read by
    /// the tensor cores must start at a multiple of it, because they apply
    /// the swizzle to absolute shared addresses.
    pub fn period_bytes(self) -> usize {
        8 * self.atom_bytes()
    }

    /// The swizzled byte offset of the unswizzled offset `offset`.
    pub fn apply(self, offset: u32) -> u32 {
        let mask = ((1u32 << self.bits()) - 1) << 7;
        offset ^ ((offset & mask) >> 3)
    }

    /// The two-bit mode field of a wgmma shared-memory descriptor.
    pub fn descriptor_mode(self) -> u64 {
        match self {
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }
}

/// A tile's placement in a shared buffer: the byte offset of each flat-index
/// bit of a row-major tile of `shape`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedLayout {
    pub shape: Vec<usize>,
    /// Byte-offset basis of each flat-index bit, lowest bit first.
    pub bases: Vec<u32>,
    /// Bytes the tile spans.
    pub bytes: usize,
}

impl SharedLayout {
    /// Dense row-major placement of `elem_bytes`-sized elements.
    pub fn row_major(shape: &[usize], elem_bytes: usize) -> Result<SharedLayout, LayoutError> {
        let bits: usize = dim_bits(shape)?.iter().sum();
        Ok(SharedLayout {
            shape: shape.to_vec(),
            bases: (0..bits).map(|b| (elem_bytes << b) as u32).collect(),
            bytes: shape.iter().product::<usize>() * elem_bytes,
        })
    }

    /// The NVMMA layout of a `[rows, cols]` tile whose last dimension is
    /// contiguous in global memory (K of a K-major operand, N of an N-major
    /// one): the columns are cut into atoms of `swizzle.atom_bytes()` bytes;
    /// each column block is a `[rows, atom]` sub-tile stored row after row,
    /// the sub-tiles one after another; 16-byte chunks within every row are
    /// permuted by the swizzle. This is the layout wgmma's descriptors and
    /// TMA's swizzle modes describe.
    pub fn nvmma(
        shape: &[usize],
        elem_bytes: usize,
        swizzle: Swizzle,
    ) -> Result<SharedLayout, LayoutError> {
        let [rows, cols] = shape else {
            return Err(LayoutError::NotAMatrix(shape.to_vec()));
        };
        let (rows, cols) = (*rows, *cols);
        dim_bits(shape)?;
        let atom = swizzle.atom_bytes();
        if cols * elem_bytes < atom || rows < 8 || !elem_bytes.is_power_of_two() {
            return Err(LayoutError::SwizzleTooWide {
                shape: shape.to_vec(),
                atom_bytes: atom,
            });
        }
        let atom_elems = atom / elem_bytes;
        let unswizzled = |r: usize, c: usize| -> u32 {
            let block = c / atom_elems;
            ((block * rows + r) * atom + (c % atom_elems) * elem_bytes) as u32
        };
        let col_bits = cols.trailing_zeros();
        let total = col_bits + rows.trailing_zeros();
        let bases = (0..total)
            .map(|bit| {
                let flat = 1usize << bit;
                let (r, c) = (flat >> col_bits, flat & (cols - 1));
                swizzle.apply(unswizzled(r, c))
            })
            .collect();
        Ok(SharedLayout {
            shape: shape.to_vec(),
            bases,
            bytes: rows * cols * elem_bytes,
        })
    }

    /// The placement of this matrix's transpose over the same bytes: a
    /// `[C, R]` view of this `[R, C]` tile, whose flat-index bits are the
    /// row bits (low) then the column bits (high) of this one.
    pub fn transposed(&self) -> Result<SharedLayout, LayoutError> {
        let [rows, cols] = self.shape[..] else {
            return Err(LayoutError::NotAMatrix(self.shape.clone()));
        };
        let (row_bits, col_bits) = (
            rows.trailing_zeros() as usize,
            cols.trailing_zeros() as usize,
        );
        let bases = (0..row_bits)
            .map(|b| self.bases[col_bits + b])
            .chain((0..col_bits).map(|b| self.bases[b]))
            .collect();
        Ok(SharedLayout {
            shape: vec![cols, rows],
            bases,
            bytes: self.bytes,
        })
    }

    /// Elements a thread of `layout` holds in consecutive registers that
    /// this placement keeps consecutive in memory, at most 16 bytes' worth:
    /// the widest vector it can move per access.
    pub fn contiguous_run(
        &self,
        layout: &LinearLayout,
        elem_bytes: usize,
    ) -> Result<usize, LayoutError> {
        let offsets = self.compose(layout)?;
        let mut bits = 0;
        while bits < offsets.regs.len()
            && offsets.regs[bits] == (elem_bytes << bits) as u32
            && (elem_bytes << (bits + 1)) <= 16
        {
            bits += 1;
        }
        Ok(1 << bits)
    }

    /// Byte offset of the element at row-major flat index `flat`.
    pub fn offset(&self, flat: u32) -> u32 {
        super::combine(&self.bases, flat)
    }

    /// The byte offsets held by a distributed layout's register, lane and
    /// warp bits: `layout` composed with this placement. The shapes must
    /// agree.
    pub fn compose(&self, layout: &LinearLayout) -> Result<OffsetBases, LayoutError> {
        if layout.shape != self.shape {
            return Err(LayoutError::ShapeMismatch {
                layout: layout.shape.clone(),
                shared: self.shape.clone(),
            });
        }
        let map = |bases: &[u32]| bases.iter().map(|&b| self.offset(b)).collect();
        Ok(OffsetBases {
            regs: map(&layout.regs),
            lanes: map(&layout.lanes),
            warps: map(&layout.warps),
        })
    }
}

/// A distributed layout seen through a shared placement: the byte offset
/// each register, lane and warp bit contributes (combined by XOR).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OffsetBases {
    pub regs: Vec<u32>,
    pub lanes: Vec<u32>,
    pub warps: Vec<u32>,
}

impl OffsetBases {
    /// Byte offset of register `reg` of `lane` in `warp`.
    pub fn offset(&self, reg: usize, lane: u32, warp: u32) -> u32 {
        super::combine(&self.regs, reg as u32)
            ^ super::combine(&self.lanes, lane)
            ^ super::combine(&self.warps, warp)
    }

    /// The register part of register `reg`'s offset (lane 0, warp 0).
    pub fn reg_offset(&self, reg: usize) -> u32 {
        super::combine(&self.regs, reg as u32)
    }

    /// Shared-memory wavefronts a warp needs to access `bytes` (a power of
    /// two up to 16) at register `reg` in every lane: 128 bytes (32 banks)
    /// are served per wavefront, and lanes touching different words of one
    /// bank need separate ones.
    pub fn wavefronts(&self, reg: usize, bytes: usize) -> usize {
        let lanes_per_wavefront = (128 / bytes.max(4)).min(32) as u32;
        let mut total = 0;
        for first in (0..32).step_by(lanes_per_wavefront as usize) {
            let mut words_of_bank: Vec<Vec<u32>> = vec![Vec::new(); 32];
            for lane in first..first + lanes_per_wavefront {
                let at = self.offset(reg, lane, 0);
                for word in (at / 4)..(at + bytes.max(4) as u32) / 4 {
                    let bank = &mut words_of_bank[(word % 32) as usize];
                    if !bank.contains(&word) {
                        bank.push(word);
                    }
                }
            }
            total += words_of_bank.iter().map(Vec::len).max().unwrap_or(0).max(1);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The NVMMA placement written out independently: column block, row,
    /// then the 16-byte chunk index XOR the row's place in its period.
    fn reference(r: usize, c: usize, rows: usize, eb: usize, s: Swizzle) -> u32 {
        let atom = s.atom_bytes();
        let per = atom / eb;
        let chunk = (c % per) * eb / 16;
        let permuted = chunk ^ ((r * atom / 128) % (atom / 16));
        (((c / per) * rows + r) * atom + permuted * 16 + (c % per) * eb % 16) as u32
    }

    #[test]
    fn nvmma_is_a_permutation_matching_the_formula() {
        for s in [Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            for (rows, cols, eb) in [(64, 64, 2), (128, 32, 2), (64, 128, 2), (32, 128, 1)] {
                if cols * eb < s.atom_bytes() {
                    continue;
                }
                let l = SharedLayout::nvmma(&[rows, cols], eb, s).unwrap();
                let mut seen = HashSet::new();
                for r in 0..rows {
                    for c in 0..cols {
                        let at = l.offset((r * cols + c) as u32);
                        assert_eq!(at, reference(r, c, rows, eb, s), "{s:?} {r} {c}");
                        assert_eq!(at as usize % eb, 0);
                        assert!(seen.insert(at / eb as u32), "{s:?}: two elements at {at}");
                        assert!((at as usize) < l.bytes);
                    }
                }
            }
        }
    }

    #[test]
    fn swizzle_keeps_16_byte_chunks_whole() {
        let l = SharedLayout::nvmma(&[64, 64], 2, Swizzle::B128).unwrap();
        for r in 0..64 {
            for c in (0..64).step_by(8) {
                let first = l.offset((r * 64 + c) as u32);
                assert_eq!(first % 16, 0);
                for j in 1..8 {
                    assert_eq!(l.offset((r * 64 + c + j) as u32), first + 2 * j as u32);
                }
            }
        }
    }

    #[test]
    fn sixteen_byte_copies_of_blocked_tiles_are_conflict_free() {
        // A warp copying 16-byte vectors of a blocked tile into its swizzled
        // buffer (what a pipelined operand load does): one wavefront per
        // eight lanes, the minimum for 512 bytes.
        for (shape, s) in [
            ([128, 64], Swizzle::B128),
            ([64, 128], Swizzle::B128),
            ([64, 256], Swizzle::B128),
            ([128, 32], Swizzle::B64),
            ([64, 16], Swizzle::B32),
        ] {
            let shared = SharedLayout::nvmma(&shape, 2, s).unwrap();
            let blocked = LinearLayout::blocked(&shape, 8, 4).unwrap();
            let bases = shared.compose(&blocked).unwrap();
            for reg in (0..blocked.num_regs()).step_by(8) {
                assert_eq!(bases.wavefronts(reg, 16), 4, "{shape:?} {s:?} reg {reg}");
            }
        }
    }

    #[test]
    fn unswizzled_rows_conflict_where_the_swizzle_does_not() {
        // Lanes walking down the rows of one column block (as a fragment
        // read does) hit one bank group in a dense buffer, eight in a swizzled one.
        let dense = SharedLayout::row_major(&[64, 64], 2).unwrap();
        let swz = SharedLayout::nvmma(&[64, 64], 2, Swizzle::B128).unwrap();
        // A layout whose lanes walk down rows (as an ldmatrix-style read).
        let down_rows = LinearLayout {
            shape: vec![64, 64],
            regs: vec![1, 2, 4],
            lanes: vec![64, 128, 256, 8, 16],
            warps: vec![],
        };
        let dense_waves = dense.compose(&down_rows).unwrap().wavefronts(0, 16);
        let swz_waves = swz.compose(&down_rows).unwrap().wavefronts(0, 16);
        assert_eq!(swz_waves, 4);
        assert!(dense_waves > swz_waves, "{dense_waves} vs {swz_waves}");
    }

    #[test]
    fn rejects_what_does_not_fit() {
        assert!(SharedLayout::nvmma(&[64, 32], 2, Swizzle::B128).is_err());
        assert!(SharedLayout::nvmma(&[64], 2, Swizzle::B32).is_err());
        assert_eq!(Swizzle::widest_for(64), Some(Swizzle::B64));
        assert_eq!(Swizzle::widest_for(16), None);
    }
}
