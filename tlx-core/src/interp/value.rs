//! Runtime values: a tile is a shape and a flat row-major vector of one of
//! four element representations. Ops match on the representation once per
//! tile and then loop over plain slices.
//!
//! Integers of every width are kept as canonical i64 (sign- or zero-extended
//! from their type, see [`crate::numeric::wrap_int`]); f64 as itself;
//! narrower floats as f32 values already rounded to their type; pointers as
//! (buffer, byte offset).

use crate::ir::ScalarType;

use super::error::{Fault, FaultResult};
use super::memory::BufferId;

/// A global pointer: a buffer and a byte offset into it (may be out of
/// bounds; only accesses are checked).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ptr {
    pub buffer: BufferId,
    pub byte_offset: i64,
}

impl Ptr {
    /// The pointer as an integer (a pointer cast to i64): buffers lie 2^40
    /// bytes apart, so differences within a buffer are exact and a pointer
    /// into another buffer is far out of range of this one.
    pub(crate) fn address(self) -> i64 {
        ((i64::from(self.buffer.0) + 1) << 40).wrapping_add(self.byte_offset)
    }

    /// The pointer at an address [`Ptr::address`] gave (an i64 cast to a
    /// pointer, as `remote` does with a peer's address). An address no
    /// buffer gave names a buffer that does not exist, which an access
    /// reports.
    pub(crate) fn from_address(address: i64) -> Ptr {
        const LOW: i64 = (1 << 40) - 1;
        let buffer = (address >> 40).wrapping_sub(1);
        Ptr {
            buffer: BufferId(u32::try_from(buffer).unwrap_or(u32::MAX)),
            byte_offset: address & LOW,
        }
    }
}

/// The address a kernel sees for byte `byte_offset` of `buffer`: what a
/// pointer to it cast to i64 gives, and what the runtime writes into the
/// tables of peers' addresses of symmetric buffers.
pub fn address_of(buffer: BufferId, byte_offset: i64) -> i64 {
    Ptr {
        buffer,
        byte_offset,
    }
    .address()
}

/// A value of TLX's memory-object types: what a buffer, barrier or
/// descriptor value refers to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Handle {
    /// Buffers `first..` of allocation `alloc` (see `shared::SharedMemory`);
    /// with `window`, only those flat elements of buffer `first`, in the
    /// order of the view (a `local_slice`).
    Shared {
        alloc: usize,
        first: usize,
        window: Option<std::sync::Arc<Vec<usize>>>,
    },
    /// mbarriers `first..` of the program (or cluster) state.
    Barriers { first: usize },
    /// A `remote_view`: the counterpart of `local` (this program's buffer or
    /// barrier) in the cluster's program `rank`, found where it is used (the
    /// peer may make it only later; see `cluster`).
    Remote { rank: usize, local: Box<Handle> },
    /// A global tensor that TMA copies read and write.
    Desc(GlobalTensor),
    /// In a skeleton run (the protocol checker's): a value the run does not
    /// compute (data, or a parameter it has no sample for). Reading one
    /// where the protocol needs it is `Fault::Undecidable`.
    Opaque,
}

/// A tensor in global memory as a descriptor sees it: where element 0 is,
/// the shape and the strides in elements, outermost first.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GlobalTensor {
    pub base: Ptr,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
}

/// The elements of a tile, flat and row-major.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Data {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    Float(Vec<f32>),
    F64(Vec<f64>),
    Ptr(Vec<Ptr>),
    /// A buffer, barrier or descriptor (always a single element).
    Handle(Vec<Handle>),
}

/// How elements of an IR element type are represented.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Repr {
    Bool,
    Int,
    Float,
    F64,
}

impl Repr {
    pub(crate) fn of_scalar(s: ScalarType) -> Repr {
        if s == ScalarType::Bool {
            Repr::Bool
        } else if s == ScalarType::F64 {
            Repr::F64
        } else if s.is_float() {
            Repr::Float
        } else {
            Repr::Int
        }
    }
}

impl Data {
    pub(crate) fn len(&self) -> usize {
        match self {
            Data::Bool(v) => v.len(),
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::Ptr(v) => v.len(),
            Data::Handle(v) => v.len(),
        }
    }

    /// The elements at `indices`, in that order.
    pub(crate) fn gather(&self, indices: &[usize]) -> Data {
        fn pick<T: Copy>(v: &[T], indices: &[usize]) -> Vec<T> {
            indices.iter().map(|&i| v[i]).collect()
        }
        match self {
            Data::Bool(v) => Data::Bool(pick(v, indices)),
            Data::Int(v) => Data::Int(pick(v, indices)),
            Data::Float(v) => Data::Float(pick(v, indices)),
            Data::F64(v) => Data::F64(pick(v, indices)),
            Data::Ptr(v) => Data::Ptr(pick(v, indices)),
            Data::Handle(v) => Data::Handle(indices.iter().map(|&i| v[i].clone()).collect()),
        }
    }

    /// Writes `src[i]` to `self[indices[i]]`; both must have the same representation.
    pub(crate) fn scatter(&mut self, indices: &[usize], src: &Data) -> FaultResult<()> {
        fn put<T: Copy>(dst: &mut [T], indices: &[usize], src: &[T]) {
            for (&i, &v) in indices.iter().zip(src) {
                dst[i] = v;
            }
        }
        match (self, src) {
            (Data::Bool(d), Data::Bool(s)) => put(d, indices, s),
            (Data::Int(d), Data::Int(s)) => put(d, indices, s),
            (Data::Float(d), Data::Float(s)) => put(d, indices, s),
            (Data::F64(d), Data::F64(s)) => put(d, indices, s),
            (Data::Ptr(d), Data::Ptr(s)) => put(d, indices, s),
            _ => return Err(Fault::malformed("insert of a tile of another element type")),
        }
        Ok(())
    }
}

/// A value of the program: a tile (a scalar is a tile of rank 0, one element).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// A skeleton run's stand-in for a value it does not compute.
    pub(crate) fn opaque() -> Tensor {
        Tensor {
            shape: Vec::new(),
            data: Data::Handle(vec![Handle::Opaque]),
        }
    }

    pub(crate) fn is_opaque(&self) -> bool {
        matches!(&self.data, Data::Handle(h) if matches!(h.as_slice(), [Handle::Opaque]))
    }

    pub(crate) fn new(shape: Vec<usize>, data: Data) -> FaultResult<Tensor> {
        let numel: usize = shape.iter().product();
        if numel != data.len() {
            return Err(Fault::malformed(format!(
                "shape {shape:?} does not hold {} elements",
                data.len()
            )));
        }
        Ok(Tensor { shape, data })
    }

    pub(crate) fn numel(&self) -> usize {
        self.data.len()
    }

    /// The single element of a scalar as an integer (loop bounds, ids).
    pub(crate) fn scalar_int(&self) -> FaultResult<i64> {
        match &self.data {
            Data::Int(v) if v.len() == 1 => Ok(v[0]),
            _ => Err(Fault::malformed("expected an integer scalar")),
        }
    }

    /// The single element of a scalar as a bool (branch conditions).
    pub(crate) fn scalar_bool(&self) -> FaultResult<bool> {
        match &self.data {
            Data::Bool(v) if v.len() == 1 => Ok(v[0]),
            _ => Err(Fault::malformed("expected a bool scalar")),
        }
    }

    pub(crate) fn bools(&self) -> FaultResult<&[bool]> {
        match &self.data {
            Data::Bool(v) => Ok(v),
            _ => Err(Fault::malformed("expected a bool tile")),
        }
    }

    pub(crate) fn ints(&self) -> FaultResult<&[i64]> {
        match &self.data {
            Data::Int(v) => Ok(v),
            _ => Err(Fault::malformed("expected an integer tile")),
        }
    }

    /// The single element of a buffer, barrier or descriptor value.
    pub(crate) fn handle(&self) -> FaultResult<&Handle> {
        match &self.data {
            Data::Handle(v) if v.len() == 1 => Ok(&v[0]),
            _ => Err(Fault::malformed("expected a buffer, barrier or descriptor")),
        }
    }

    pub(crate) fn ptrs(&self) -> FaultResult<&[Ptr]> {
        match &self.data {
            Data::Ptr(v) => Ok(v),
            _ => Err(Fault::malformed("expected a pointer tile")),
        }
    }
}

/// Checks that an operand of `len` elements can serve a tile of `numel`
/// lanes: either one element per lane or one element for all.
pub(crate) fn check_lanes(len: usize, numel: usize, what: &str) -> FaultResult<()> {
    if len == numel || len == 1 {
        Ok(())
    } else {
        Err(Fault::malformed(format!(
            "{what} has {len} elements for a tile of {numel}"
        )))
    }
}

/// Row-major strides of a shape.
pub(crate) fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// For each element of a tile of `out_shape` (row-major), `base + Σ index[d] * strides[d]`.
pub(crate) fn strided_indices(out_shape: &[usize], strides: &[usize], base: usize) -> Vec<usize> {
    let numel: usize = out_shape.iter().product();
    let mut out = Vec::with_capacity(numel);
    if numel == 0 {
        return out;
    }
    let rank = out_shape.len();
    let mut index = vec![0usize; rank];
    let mut offset = base;
    for _ in 0..numel {
        out.push(offset);
        // Odometer increment, keeping the offset in step.
        for d in (0..rank).rev() {
            index[d] += 1;
            offset += strides[d];
            if index[d] < out_shape[d] {
                break;
            }
            offset -= strides[d] * out_shape[d];
            index[d] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_indices_walk_row_major() {
        assert_eq!(strides_of(&[2, 3, 4]), vec![12, 4, 1]);
        // A transpose of a 2x3 tile: out[j][i] = in[i][j].
        assert_eq!(strided_indices(&[3, 2], &[1, 3], 0), vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(strided_indices(&[], &[], 7), vec![7]);
    }

    #[test]
    fn gather_and_scatter_move_elements() {
        let d = Data::Int(vec![10, 20, 30]);
        assert_eq!(d.gather(&[2, 0]), Data::Int(vec![30, 10]));
        let mut dst = Data::Int(vec![0; 3]);
        dst.scatter(&[1, 2], &Data::Int(vec![5, 6]))
            .expect("same repr");
        assert_eq!(dst, Data::Int(vec![0, 5, 6]));
        assert!(dst.scatter(&[0], &Data::Bool(vec![true])).is_err());
        assert!(Tensor::new(vec![2, 2], Data::Int(vec![1])).is_err());
    }

    #[test]
    fn addresses_cast_back_to_their_pointers() {
        for (buffer, byte_offset) in [(0, 0), (3, 4096), (70_000, (1 << 40) - 8)] {
            let ptr = Ptr {
                buffer: BufferId(buffer),
                byte_offset,
            };
            assert_eq!(Ptr::from_address(ptr.address()), ptr);
            assert_eq!(address_of(ptr.buffer, byte_offset), ptr.address());
        }
        // Addresses in one buffer differ by their byte distance.
        let at = |o| address_of(BufferId(5), o);
        assert_eq!(at(256) - at(0), 256);
    }
}
