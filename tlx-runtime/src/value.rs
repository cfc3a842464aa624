//! Kernel arguments as values, as a launch sees them: device pointers and
//! tensor descriptors (with their element type and device, so that check.rs
//! can check them) and scalars. The traits that make them from typed Rust
//! values are in arg.rs; [`TensorDescValue`]'s typed maker, `TensorDesc`, in
//! desc.rs.

use std::fmt;
use std::marker::PhantomData;

use tlx_core::ir::{DescriptorBlock, ParamKind, ScalarType, Swizzle, TmaBox};

use crate::cuda::tensor_map::{TiledTensorMap, TmaSwizzle};

/// Which device a pointer belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DeviceId {
    /// A GPU by ordinal; `rank`, for a rank of a mesh that shares the GPU
    /// with other ranks (each with its own stream), tells them apart.
    Cuda { ordinal: usize, rank: Option<usize> },
    /// A CPU interpreter device, by instance (each has its own memory).
    Cpu(u64),
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cuda {
                ordinal,
                rank: None,
            } => write!(f, "CUDA device {ordinal}"),
            DeviceId::Cuda {
                ordinal,
                rank: Some(rank),
            } => write!(f, "rank {rank} of a mesh on CUDA device {ordinal}"),
            DeviceId::Cpu(instance) => write!(f, "CPU interpreter device #{instance}"),
        }
    }
}

/// Where a pointer argument points.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum PtrTarget {
    Cuda {
        ordinal: usize,
        /// The mesh rank of a GPU shared by several (see [`DeviceId`]).
        rank: Option<usize>,
        address: u64,
    },
    Cpu {
        device: u64,
        buffer: u32,
        offset_elems: usize,
    },
}

impl PtrTarget {
    /// What a kernel sees as the address of `self` (elements of
    /// `elem_bytes`): a GPU address, or the interpreter's address of the
    /// buffer's byte.
    pub(crate) fn kernel_address(&self, elem_bytes: usize) -> i64 {
        match *self {
            PtrTarget::Cuda { address, .. } => address as i64,
            PtrTarget::Cpu {
                buffer,
                offset_elems,
                ..
            } => tlx_core::interp::address_of(
                tlx_core::interp::BufferId(buffer),
                (offset_elems * elem_bytes) as i64,
            ),
        }
    }

    pub(crate) fn device(&self) -> DeviceId {
        match *self {
            PtrTarget::Cuda { ordinal, rank, .. } => DeviceId::Cuda { ordinal, rank },
            PtrTarget::Cpu { device, .. } => DeviceId::Cpu(device),
        }
    }
}

/// A pointer argument: borrowed from a buffer for `'a`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PtrValue<'a> {
    pub(crate) elem: ScalarType,
    pub(crate) target: PtrTarget,
    /// Bytes from the pointer to the end of what was passed (a buffer, a
    /// view, a slice): what a kernel compiled with `check_bounds` may touch.
    pub(crate) len_bytes: u64,
    pub(crate) borrow: PhantomData<&'a ()>,
}

impl PtrValue<'_> {
    /// The pointee type.
    pub fn elem(&self) -> ScalarType {
        self.elem
    }

    /// Elements from the pointer to the end of what was passed.
    pub fn len(&self) -> usize {
        (self.len_bytes / self.elem.size_bytes().max(1) as u64) as usize
    }

    /// Whether nothing lies past the pointer.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }
}

/// A scalar argument: its type and its bits (little-endian in the low bytes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ScalarValue {
    pub(crate) ty: ScalarType,
    pub(crate) bits: u64,
}

impl ScalarValue {
    /// The scalar's type.
    pub fn ty(&self) -> ScalarType {
        self.ty
    }

    /// The value's bits, zero-extended (a `bool` is 0 or 1).
    pub fn bits(&self) -> u64 {
        self.bits
    }
}

/// A tensor-descriptor argument as a launch sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TensorDescValue<'a> {
    pub(crate) elem: ScalarType,
    pub(crate) target: PtrTarget,
    pub(crate) rank: u8,
    /// Outermost first; the first `rank` entries count.
    pub(crate) shape: [u64; 5],
    pub(crate) strides: [u64; 5],
    pub(crate) borrow: PhantomData<&'a ()>,
}

impl TensorDescValue<'_> {
    /// The element type.
    pub fn elem(&self) -> ScalarType {
        self.elem
    }

    /// The number of dimensions (1 to 5).
    pub fn rank(&self) -> usize {
        usize::from(self.rank)
    }

    /// The TMA description for a kernel that moves `block`s of this tensor,
    /// on a GPU whose buffer starts at `address`.
    pub(crate) fn tiled(&self, address: u64, block: &DescriptorBlock) -> TiledTensorMap {
        let rank = self.rank();
        let tma = TmaBox::new(block.elem(), &block.shape());
        TiledTensorMap {
            elem: self.elem,
            global_address: address,
            shape: self.shape[..rank].to_vec(),
            strides_elems: self.strides[..rank].to_vec(),
            box_shape: tma.box_shape.iter().map(|&d| d as u32).collect(),
            swizzle: match tma.swizzle {
                Swizzle::None => TmaSwizzle::None,
                Swizzle::Bytes32 => TmaSwizzle::Bytes32,
                Swizzle::Bytes64 => TmaSwizzle::Bytes64,
                Swizzle::Bytes128 => TmaSwizzle::Bytes128,
            },
        }
    }
}

/// One argument of a launch, in parameter order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KernelArg<'a> {
    /// For a pointer parameter.
    Ptr(PtrValue<'a>),
    /// For a scalar parameter.
    Scalar(ScalarValue),
    /// For a `TensorDesc` parameter; a GPU launch encodes its TMA descriptor.
    TensorDesc(TensorDescValue<'a>),
}

impl KernelArg<'_> {
    /// Whether this argument can be passed for a parameter of `kind` (a
    /// descriptor of the same element type and rank, whatever block the
    /// kernel moves).
    pub fn fits(&self, kind: ParamKind) -> bool {
        match (self, kind) {
            (KernelArg::Ptr(p), ParamKind::Ptr(t)) => p.elem == t,
            (KernelArg::Scalar(s), ParamKind::Scalar(t)) => s.ty == t,
            (KernelArg::TensorDesc(d), ParamKind::TensorDesc(block)) => {
                d.elem == block.elem() && d.rank() == block.shape().len()
            }
            _ => false,
        }
    }

    /// What the argument is, for messages.
    pub fn describe(&self) -> String {
        match self {
            KernelArg::Ptr(p) => format!("a pointer to {}", p.elem),
            KernelArg::Scalar(s) => format!("a {} scalar", s.ty),
            KernelArg::TensorDesc(d) => {
                format!("a {}-d tensor descriptor of {}", d.rank(), d.elem)
            }
        }
    }
}

/// A pointer argument to `len` elements of `elem` from `target`.
pub(crate) fn ptr_arg<'a>(elem: ScalarType, target: PtrTarget, len: usize) -> KernelArg<'a> {
    KernelArg::Ptr(PtrValue {
        elem,
        target,
        len_bytes: (len as u64).saturating_mul(elem.size_bytes() as u64),
        borrow: PhantomData,
    })
}
