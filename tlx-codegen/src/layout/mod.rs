//! Distributed layouts: which thread register holds which tensor element.
//!
//! Block shapes are powers of two, so the row-major flat index of an element
//! is the concatenation of its coordinates' bits. A layout is *linear* over
//! GF(2): every register bit, lane bit and warp bit owns one basis vector (a
//! flat index), and the element held by `(register, lane, warp)` is the XOR of
//! the bases of their set bits. A zero basis means that bit only replicates
//! data. This model (Triton's "linear layouts") covers blocked layouts, their
//! slices (the results of reductions) and the tensor-core fragment layouts with
//! one representation, and makes `Reshape` and `ExpandDims` free: they do not
//! change the flat index, so they do not change the layout.

use thiserror::Error;

mod shared;
mod tensor_core;

pub use shared::{OffsetBases, SharedLayout, Swizzle};
pub use tensor_core::{
    mma_sync_accumulator, tensor_memory_rows, warp_grid, wgmma_accumulator, wgmma_register_a,
};

/// Lanes in a warp.
pub const WARP_SIZE: u32 = 32;
/// Bits of a lane index.
pub const LANE_BITS: usize = 5;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("dimension {dim} of shape {shape:?} is not a power of two")]
    NotPowerOfTwo { shape: Vec<usize>, dim: usize },
    #[error("num_warps = {0} is not a power of two")]
    WarpsNotPowerOfTwo(u32),
    #[error("shape {0:?} has more than 2^31 elements")]
    TooLarge(Vec<usize>),
    #[error("{perm:?} is not a permutation of the {rank} dimensions")]
    BadPermutation { perm: Vec<usize>, rank: usize },
    #[error("shape {0:?} is not a matrix (rank 2)")]
    NotAMatrix(Vec<usize>),
    #[error("a {atom_bytes}-byte swizzle needs at least 8 rows of {atom_bytes} bytes; tile {shape:?} has fewer")]
    SwizzleTooWide {
        shape: Vec<usize>,
        atom_bytes: usize,
    },
    #[error("a layout of {layout:?} cannot be placed in a shared buffer of {shared:?}")]
    ShapeMismatch {
        layout: Vec<usize>,
        shared: Vec<usize>,
    },
    #[error("no tensor-core layout for a [{m}, {n}] accumulator over {num_warps} warps")]
    NoTensorCoreLayout { m: usize, n: usize, num_warps: u32 },
}

/// A linear layout of a tensor of `shape` over the registers, lanes and warps of one CTA.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinearLayout {
    pub shape: Vec<usize>,
    /// Basis (a flat index) of each register-index bit; `2^regs.len()` registers.
    pub regs: Vec<u32>,
    /// Basis of each lane-index bit (always [`LANE_BITS`] of them).
    pub lanes: Vec<u32>,
    /// Basis of each warp-index bit.
    pub warps: Vec<u32>,
}

/// log2 of a power of two, or `None`.
fn exact_log2(n: usize) -> Option<usize> {
    (n.is_power_of_two()).then(|| n.trailing_zeros() as usize)
}

/// Bits of each dimension of a power-of-two shape (flat indices fit in 31 bits).
pub fn dim_bits(shape: &[usize]) -> Result<Vec<usize>, LayoutError> {
    let bits = shape
        .iter()
        .enumerate()
        .map(|(dim, &n)| {
            exact_log2(n).ok_or(LayoutError::NotPowerOfTwo {
                shape: shape.to_vec(),
                dim,
            })
        })
        .collect::<Result<Vec<usize>, LayoutError>>()?;
    if bits.iter().sum::<usize>() > 31 {
        return Err(LayoutError::TooLarge(shape.to_vec()));
    }
    Ok(bits)
}

/// The lowest flat-index bit of each dimension (row-major: the last dim is lowest).
fn dim_offsets(bits: &[usize]) -> Vec<usize> {
    let mut offsets = vec![0; bits.len()];
    let mut acc = 0;
    for d in (0..bits.len()).rev() {
        offsets[d] = acc;
        acc += bits[d];
    }
    offsets
}

/// XOR of the bases selected by the set bits of `index`.
fn combine(bases: &[u32], index: u32) -> u32 {
    bases
        .iter()
        .enumerate()
        .filter(|(bit, _)| index >> bit & 1 == 1)
        .fold(0, |acc, (_, b)| acc ^ b)
}

impl LinearLayout {
    /// The default blocked layout: `vector` contiguous elements of the last dim per
    /// register group, then lanes, then warps along the flat index (so a warp reads
    /// consecutive addresses), then the remaining bits wrap into registers. Bits the
    /// shape lacks become zero bases (replication).
    pub fn blocked(shape: &[usize], vector: usize, num_warps: u32) -> Result<Self, LayoutError> {
        let bits = dim_bits(shape)?;
        let warp_bits =
            exact_log2(num_warps as usize).ok_or(LayoutError::WarpsNotPowerOfTwo(num_warps))?;
        let total: usize = bits.iter().sum();
        let last = bits.last().copied().unwrap_or(0);
        let vector_bits = exact_log2(vector.max(1)).unwrap_or(0).min(last);
        let mut next = 0usize;
        let mut take = |n: usize| -> Vec<u32> {
            (0..n)
                .map(|_| {
                    let basis = if next < total { 1u32 << next } else { 0 };
                    next += 1;
                    basis
                })
                .collect()
        };
        let mut regs = take(vector_bits);
        let lanes = take(LANE_BITS);
        let warps = take(warp_bits);
        let rest = total.saturating_sub(vector_bits + LANE_BITS + warp_bits);
        regs.extend(take(rest));
        Ok(LinearLayout {
            shape: shape.to_vec(),
            regs,
            lanes,
            warps,
        })
    }

    /// A fully replicated layout of a scalar (one register, every thread).
    pub fn scalar(num_warps: u32) -> Result<Self, LayoutError> {
        LinearLayout::blocked(&[], 1, num_warps)
    }

    pub fn num_regs(&self) -> usize {
        1 << self.regs.len()
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Flat index held by register `reg` alone (lane 0, warp 0).
    pub fn reg_offset(&self, reg: usize) -> u32 {
        combine(&self.regs, reg as u32)
    }

    /// Flat (row-major) index of the element held by `(reg, lane, warp)`.
    pub fn flat_index(&self, reg: usize, lane: u32, warp: u32) -> u32 {
        combine(&self.regs, reg as u32) ^ combine(&self.lanes, lane) ^ combine(&self.warps, warp)
    }

    /// Coordinates of the element held by `(reg, lane, warp)`.
    pub fn coords(&self, reg: usize, lane: u32, warp: u32) -> Vec<usize> {
        unflatten(&self.shape, self.flat_index(reg, lane, warp) as usize)
    }

    /// True if `(reg, lane, warp)` holds a copy of an element that a lower register,
    /// lane or warp of the same CTA also holds (the copy that should not write).
    pub fn is_replica(&self, reg: usize, lane: u32, warp: u32) -> bool {
        let replica_bit = |bases: &[u32], index: u32| {
            bases
                .iter()
                .enumerate()
                .any(|(bit, &b)| b == 0 && index >> bit & 1 == 1)
        };
        replica_bit(&self.regs, reg as u32)
            || replica_bit(&self.lanes, lane)
            || replica_bit(&self.warps, warp)
    }

    /// The layout of the result of reducing `axis`: bases lose that dimension's bits
    /// (Triton's slice layout). Lane and warp bases lying wholly in `axis` become
    /// replicas; register ones are dropped, since a thread holding the same value
    /// in several registers only multiplies the work done on it (a row max of a
    /// wgmma accumulator: two values per thread, not sixty-four).
    pub fn sliced(&self, axis: usize) -> Result<LinearLayout, LayoutError> {
        let mut shape = self.shape.clone();
        shape.remove(axis);
        let map = drop_dim_bits(&self.shape, axis)?;
        let mut sliced = self.map_bases(shape, &map);
        sliced.regs.retain(|&b| b != 0);
        Ok(sliced)
    }

    /// The same elements on the same threads, each once per thread: register
    /// bits that only replicate (zero bases) dropped. What a load issued for a
    /// broadcast use should fetch: its copies are register moves afterwards.
    pub fn without_register_replicas(&self) -> LinearLayout {
        let mut compact = self.clone();
        compact.regs.retain(|&b| b != 0);
        compact
    }

    /// The register of [`LinearLayout::sliced`]`(axis)` that holds what
    /// register `reg` of this layout holds once `axis` is reduced away.
    pub fn sliced_register(&self, axis: usize, reg: usize) -> Result<usize, LayoutError> {
        let map = drop_dim_bits(&self.shape, axis)?;
        Ok(self
            .regs
            .iter()
            .enumerate()
            .filter(|(_, &b)| map(b) != 0)
            .enumerate()
            .map(|(j, (i, _))| (reg >> i & 1) << j)
            .sum())
    }

    /// Which bases carry `axis` bits, as masks of register, lane and warp bits.
    pub fn axis_bits(&self, axis: usize) -> Result<(u32, u32, u32), LayoutError> {
        let bits = dim_bits(&self.shape)?;
        let offsets = dim_offsets(&bits);
        let field = ((1u32 << bits[axis]) - 1) << offsets[axis];
        let mask = |bases: &[u32]| {
            bases
                .iter()
                .enumerate()
                .filter(|(_, &b)| b & field != 0)
                .fold(0u32, |m, (i, _)| m | 1 << i)
        };
        Ok((mask(&self.regs), mask(&self.lanes), mask(&self.warps)))
    }

    /// The same distribution for a shape of the same size whose flat indices are the
    /// same elements (`Reshape`, `ExpandDims`).
    pub fn reshaped(&self, shape: &[usize]) -> LinearLayout {
        LinearLayout {
            shape: shape.to_vec(),
            ..self.clone()
        }
    }

    /// This layout as seen by an operand of `Broadcast` whose size-1 dims are
    /// repeated: the repeated dims' bits dropped (the operand keeps the same
    /// registers, each holding the element its broadcast copy comes from).
    pub fn broadcast_source(&self, source_shape: &[usize]) -> Result<LinearLayout, LayoutError> {
        let bits = dim_bits(&self.shape)?;
        let offsets = dim_offsets(&bits);
        let keep: Vec<(u32, u32)> = (0..self.shape.len())
            .filter(|&d| source_shape.get(d).copied() == Some(self.shape[d]))
            .map(|d| (((1u32 << bits[d]) - 1) << offsets[d], offsets[d] as u32))
            .collect();
        let source_bits = dim_bits(source_shape)?;
        let source_offsets = dim_offsets(&source_bits);
        let kept_dims: Vec<usize> = (0..self.shape.len())
            .filter(|&d| source_shape.get(d).copied() == Some(self.shape[d]))
            .collect();
        let map = move |basis: u32| -> u32 {
            keep.iter()
                .zip(&kept_dims)
                .fold(0, |acc, ((field, off), &d)| {
                    acc | ((basis & field) >> off) << source_offsets[d]
                })
        };
        Ok(self.map_bases(source_shape.to_vec(), &map))
    }

    /// Dimensions permuted (`Trans`): result dim `i` is this layout's dim `perm[i]`.
    pub fn transposed(&self, perm: &[usize]) -> Result<LinearLayout, LayoutError> {
        let rank = self.shape.len();
        let mut seen = vec![false; rank];
        for &p in perm {
            if p >= rank || std::mem::replace(&mut seen[p], true) {
                return Err(LayoutError::BadPermutation {
                    perm: perm.to_vec(),
                    rank,
                });
            }
        }
        if perm.len() != rank {
            return Err(LayoutError::BadPermutation {
                perm: perm.to_vec(),
                rank,
            });
        }
        let bits = dim_bits(&self.shape)?;
        let offsets = dim_offsets(&bits);
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        let new_offsets = dim_offsets(&dim_bits(&shape)?);
        let map = |basis: u32| -> u32 {
            perm.iter().enumerate().fold(0, |acc, (i, &p)| {
                let field = (basis >> offsets[p]) & ((1u32 << bits[p]) - 1);
                acc | field << new_offsets[i]
            })
        };
        Ok(self.map_bases(shape, &map))
    }

    /// The layout of `join`'s result for operands in this layout: the new last
    /// dimension (flat bit 0) in the lowest register bit, so register `2r + j`
    /// holds element `j` of what register `r` holds here.
    pub fn joined(&self) -> LinearLayout {
        let mut shape = self.shape.clone();
        shape.push(2);
        let mut joined = self.map_bases(shape, &|b| b << 1);
        joined.regs.insert(0, 1);
        joined
    }

    /// The inverse of [`LinearLayout::joined`] when this layout has that form
    /// (some register bit alone carries the last dimension, a size-2 one, and
    /// no other basis touches it): the halves' layout and that register bit.
    pub fn split_halves(&self) -> Option<(LinearLayout, usize)> {
        if self.shape.last() != Some(&2) {
            return None;
        }
        let bit = self.regs.iter().position(|&b| b == 1)?;
        let others = self
            .regs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != bit)
            .map(|(_, &b)| b)
            .chain(self.lanes.iter().copied())
            .chain(self.warps.iter().copied());
        if others.clone().any(|b| b & 1 != 0) {
            return None;
        }
        let shape = self.shape[..self.shape.len() - 1].to_vec();
        let mut halves = self.map_bases(shape, &|b| b >> 1);
        halves.regs.remove(bit);
        Some((halves, bit))
    }

    fn map_bases(&self, shape: Vec<usize>, map: &dyn Fn(u32) -> u32) -> LinearLayout {
        let apply = |bases: &[u32]| bases.iter().map(|&b| map(b)).collect();
        LinearLayout {
            shape,
            regs: apply(&self.regs),
            lanes: apply(&self.lanes),
            warps: apply(&self.warps),
        }
    }
}

/// A function removing the bit field of `axis` from flat indices of `shape`.
fn drop_dim_bits(shape: &[usize], axis: usize) -> Result<impl Fn(u32) -> u32, LayoutError> {
    let bits = dim_bits(shape)?;
    let offsets = dim_offsets(&bits);
    let low = offsets[axis];
    let width = bits[axis];
    Ok(move |basis: u32| {
        let below = basis & ((1u32 << low) - 1);
        let above = basis >> (low + width);
        below | above << low
    })
}

/// Row-major coordinates of flat index `flat` in `shape`.
pub fn unflatten(shape: &[usize], mut flat: usize) -> Vec<usize> {
    let mut coords = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        coords[d] = flat % shape[d];
        flat /= shape[d];
    }
    coords
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every element's owners, as `(reg, lane, warp)` triples.
    fn owners(l: &LinearLayout, num_warps: u32) -> HashMap<u32, Vec<(usize, u32, u32)>> {
        let mut map: HashMap<u32, Vec<(usize, u32, u32)>> = HashMap::new();
        for w in 0..num_warps {
            for lane in 0..WARP_SIZE {
                for r in 0..l.num_regs() {
                    map.entry(l.flat_index(r, lane, w))
                        .or_default()
                        .push((r, lane, w));
                }
            }
        }
        map
    }

    #[test]
    fn blocked_covers_every_element_once_when_big_enough() {
        let l = LinearLayout::blocked(&[64, 128], 4, 4).unwrap();
        assert_eq!(l.num_regs(), 64 * 128 / 128);
        let map = owners(&l, 4);
        assert_eq!(map.len(), 64 * 128);
        assert!(map.values().all(|o| o.len() == 1));
        assert!(map.keys().all(|&f| (f as usize) < 64 * 128));
    }

    #[test]
    fn blocked_vectors_and_coalescing() {
        let l = LinearLayout::blocked(&[16, 64], 4, 4).unwrap();
        // Registers 0..4 of lane 0 hold row 0, columns 0..4.
        for r in 0..4 {
            assert_eq!(l.coords(r, 0, 0), vec![0, r]);
        }
        // Lane 1 continues at column 4; lane 16 starts row 1.
        assert_eq!(l.coords(0, 1, 0), vec![0, 4]);
        assert_eq!(l.coords(0, 16, 0), vec![1, 0]);
        // Warp 1 starts two rows down; register 4 wraps to row 8.
        assert_eq!(l.coords(0, 0, 1), vec![2, 0]);
        assert_eq!(l.coords(4, 0, 0), vec![8, 0]);
        assert!(!l.is_replica(4, 31, 3));
    }

    #[test]
    fn small_shapes_replicate() {
        let l = LinearLayout::blocked(&[8], 4, 4).unwrap();
        let map = owners(&l, 4);
        assert_eq!(map.len(), 8);
        // 128 threads x 4 registers over 8 elements: 64 copies each, one of them primary.
        for o in map.values() {
            assert_eq!(o.len(), 64);
            assert_eq!(
                o.iter()
                    .filter(|(r, l2, w)| !l.is_replica(*r, *l2, *w))
                    .count(),
                1
            );
        }
        assert_eq!(l.coords(1, 0, 0), vec![1]);
        assert_eq!(l.coords(0, 1, 0), vec![4]);
        assert_eq!(l.coords(0, 2, 0), vec![0]);
    }

    #[test]
    fn scalar_is_one_replicated_register() {
        let l = LinearLayout::scalar(8).unwrap();
        assert_eq!(l.num_regs(), 1);
        assert_eq!(l.flat_index(0, 17, 5), 0);
        assert!(l.is_replica(0, 1, 0));
        assert!(!l.is_replica(0, 0, 0));
    }

    #[test]
    fn slice_agrees_with_parent_coordinates() {
        let parent = LinearLayout::blocked(&[32, 64], 4, 4).unwrap();
        for axis in 0..2 {
            let slice = parent.sliced(axis).unwrap();
            for w in 0..4 {
                for lane in 0..32 {
                    for r in 0..parent.num_regs() {
                        let mut c = parent.coords(r, lane, w);
                        c.remove(axis);
                        let sr = parent.sliced_register(axis, r).unwrap();
                        assert_eq!(slice.coords(sr, lane, w), c);
                    }
                }
            }
            // The slice still covers the whole result.
            assert_eq!(owners(&slice, 4).len(), slice.numel());
        }
    }

    #[test]
    fn a_broadcast_source_without_replicas_holds_each_element_once_per_thread() {
        // A row vector added to every row of a wgmma accumulator.
        let acc = wgmma_accumulator(64, 64, 4).unwrap();
        let full = acc.broadcast_source(&[1, 64]).unwrap();
        let compact = full.without_register_replicas();
        assert!(compact.num_regs() < full.num_regs());
        for w in 0..4 {
            for lane in 0..WARP_SIZE {
                let held = |l: &LinearLayout| {
                    let mut v: Vec<u32> = (0..l.num_regs())
                        .map(|r| l.flat_index(r, lane, w))
                        .collect();
                    v.sort_unstable();
                    v
                };
                let mut distinct = held(&full);
                distinct.dedup();
                assert_eq!(held(&compact), distinct);
            }
        }
    }

    #[test]
    fn axis_bits_split_reduction_levels() {
        let l = LinearLayout::blocked(&[16, 64], 4, 4).unwrap();
        // Along dim 1: registers 0,1 (the vector), lanes 0..4; rows everywhere else.
        assert_eq!(l.axis_bits(1).unwrap(), (0b11, 0b01111, 0b00));
        assert_eq!(l.axis_bits(0).unwrap(), (0b100, 0b10000, 0b11));
    }

    #[test]
    fn broadcast_source_holds_the_repeated_element() {
        let result = LinearLayout::blocked(&[16, 64], 4, 4).unwrap();
        for (src_shape, dim) in [(vec![16, 1], 1), (vec![1, 64], 0)] {
            let src = result.broadcast_source(&src_shape).unwrap();
            for w in 0..4 {
                for lane in 0..32 {
                    for r in 0..result.num_regs() {
                        let mut c = result.coords(r, lane, w);
                        c[dim] = 0;
                        assert_eq!(src.coords(r, lane, w), c);
                    }
                }
            }
        }
    }

    #[test]
    fn transpose_permutes_coordinates() {
        let l = LinearLayout::blocked(&[8, 32], 2, 2).unwrap();
        let t = l.transposed(&[1, 0]).unwrap();
        assert_eq!(t.shape, vec![32, 8]);
        for w in 0..2 {
            for lane in 0..32 {
                for r in 0..l.num_regs() {
                    let c = l.coords(r, lane, w);
                    assert_eq!(t.coords(r, lane, w), vec![c[1], c[0]]);
                }
            }
        }
    }

    #[test]
    fn expand_dims_keeps_flat_indices() {
        let l = LinearLayout::blocked(&[64], 1, 4).unwrap();
        let e = l.reshaped(&[64, 1]);
        assert_eq!(e.coords(0, 3, 1), vec![l.coords(0, 3, 1)[0], 0]);
    }

    #[test]
    fn rejects_non_powers_of_two() {
        assert_eq!(
            LinearLayout::blocked(&[3, 4], 1, 4),
            Err(LayoutError::NotPowerOfTwo {
                shape: vec![3, 4],
                dim: 0
            })
        );
        assert_eq!(
            LinearLayout::blocked(&[4], 1, 3),
            Err(LayoutError::WarpsNotPowerOfTwo(3))
        );
        assert!(matches!(
            LinearLayout::blocked(&[1 << 16, 1 << 16], 1, 4),
            Err(LayoutError::TooLarge(_))
        ));
        let l = LinearLayout::blocked(&[4, 8], 1, 1).unwrap();
        assert!(matches!(
            l.transposed(&[0, 0]),
            Err(LayoutError::BadPermutation { .. })
        ));
        assert!(matches!(
            l.transposed(&[1]),
            Err(LayoutError::BadPermutation { .. })
        ));
    }

    #[test]
    fn joined_layouts_split_back_and_hold_the_interleaved_elements() {
        for (shape, warps) in [(vec![64usize], 2u32), (vec![16, 32], 4), (vec![], 1)] {
            let layout = LinearLayout::blocked(&shape, 4, warps).expect("layout");
            let joined = layout.joined();
            assert_eq!(joined.num_regs(), 2 * layout.num_regs());
            for r in 0..layout.num_regs() {
                for (lane, warp) in [(0, 0), (5, warps - 1), (31, 0)] {
                    let flat = layout.flat_index(r, lane, warp);
                    for j in 0..2 {
                        assert_eq!(
                            joined.flat_index(2 * r + j, lane, warp),
                            2 * flat + j as u32
                        );
                    }
                }
            }
            assert_eq!(joined.split_halves(), Some((layout.clone(), 0)));
        }
        // The size-2 dimension across lanes: no register split.
        let across = LinearLayout::blocked(&[32, 2], 1, 1).expect("layout");
        assert_eq!(across.split_halves(), None);
        // A [2, 256] tile over 4 warps, transposed: the size-2 dimension in a warp bit.
        let rows = LinearLayout::blocked(&[2, 256], 4, 4).expect("layout");
        assert_eq!(
            rows.transposed(&[1, 0]).expect("transposed").split_halves(),
            None
        );
    }
}
