//! Kernel arguments: device pointers (with their element type and device, so
//! that `launch` can check them) and scalars, and the traits the generated
//! launchers use to turn typed Rust values into them.

use std::fmt;
use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, DevicePtr, DeviceSlice};
use tlx_core::ir::{ParamKind, ScalarType};

use crate::buffer::{Buffer, BufferView};
use crate::desc::TensorDescValue;
use crate::Element;

/// Which device a pointer belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DeviceId {
    Cuda(usize),
    /// A CPU interpreter device, by instance (each has its own memory).
    Cpu(u64),
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cuda(ordinal) => write!(f, "CUDA device {ordinal}"),
            DeviceId::Cpu(instance) => write!(f, "CPU interpreter device #{instance}"),
        }
    }
}

/// Where a pointer argument points.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum PtrTarget {
    Cuda {
        ordinal: usize,
        address: u64,
    },
    Cpu {
        device: u64,
        buffer: u32,
        offset_elems: usize,
    },
}

impl PtrTarget {
    pub(crate) fn device(&self) -> DeviceId {
        match *self {
            PtrTarget::Cuda { ordinal, .. } => DeviceId::Cuda(ordinal),
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

/// Things that can be passed as a pointer-to-`T` parameter.
pub trait PtrArg<T: Element> {
    /// A pointer to the first element; it borrows `self`.
    fn kernel_arg(&self) -> KernelArg<'_>;
}

/// Things that can be passed as a scalar parameter.
pub trait ScalarArg {
    /// The value with its type.
    fn kernel_arg(self) -> KernelArg<'static>;
}

pub(crate) fn ptr_arg<'a>(elem: ScalarType, target: PtrTarget, len: usize) -> KernelArg<'a> {
    KernelArg::Ptr(PtrValue {
        elem,
        target,
        len_bytes: (len as u64).saturating_mul(elem.size_bytes() as u64),
        borrow: PhantomData,
    })
}

impl<T: Element> PtrArg<T> for Buffer<T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        ptr_arg(T::SCALAR, self.target(0), self.len())
    }
}

impl<T: Element> PtrArg<T> for BufferView<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        BufferView::kernel_arg(self)
    }
}

/// cudarc slices pass straight through; they must be on the launching device's
/// context, and the caller orders their streams against the launch stream.
impl<T: Element> PtrArg<T> for CudaSlice<T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        let (address, _record_read) = self.device_ptr(self.stream());
        let ordinal = self.stream().context().ordinal();
        ptr_arg(T::SCALAR, PtrTarget::Cuda { ordinal, address }, self.len())
    }
}

impl<T: Element> PtrArg<T> for CudaView<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        let (address, _record_read) = self.device_ptr(self.stream());
        let ordinal = self.stream().context().ordinal();
        ptr_arg(T::SCALAR, PtrTarget::Cuda { ordinal, address }, self.len())
    }
}

macro_rules! scalar_arg {
    ($t:ty, $scalar:ident, |$v:ident| $bits:expr) => {
        impl ScalarArg for $t {
            fn kernel_arg(self) -> KernelArg<'static> {
                let $v = self;
                KernelArg::Scalar(ScalarValue {
                    ty: ScalarType::$scalar,
                    bits: $bits,
                })
            }
        }
    };
}

scalar_arg!(i32, I32, |v| u64::from(v as u32));
scalar_arg!(u32, U32, |v| u64::from(v));
scalar_arg!(i64, I64, |v| v as u64);
scalar_arg!(f32, F32, |v| u64::from(v.to_bits()));
scalar_arg!(f64, F64, |v| v.to_bits());
scalar_arg!(bool, Bool, |v| u64::from(v));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_keep_their_type_and_bits() {
        let arg = (-1i32).kernel_arg();
        assert!(arg.fits(ParamKind::Scalar(ScalarType::I32)));
        assert!(!arg.fits(ParamKind::Scalar(ScalarType::U32)));
        assert_eq!(
            arg,
            KernelArg::Scalar(ScalarValue {
                ty: ScalarType::I32,
                bits: 0xffff_ffff
            })
        );
        let KernelArg::Scalar(f) = 1.5f32.kernel_arg() else {
            panic!("a float is a scalar argument");
        };
        assert_eq!(f.bits(), u64::from(1.5f32.to_bits()));
        let KernelArg::Scalar(b) = true.kernel_arg() else {
            panic!("a bool is a scalar argument");
        };
        assert_eq!((b.ty(), b.bits()), (ScalarType::Bool, 1));
        assert!((-2i64)
            .kernel_arg()
            .fits(ParamKind::Scalar(ScalarType::I64)));
        assert_eq!(7u32.kernel_arg().describe(), "a u32 scalar");
    }
}
