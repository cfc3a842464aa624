//! The traits the generated launchers use to turn typed Rust values into
//! kernel arguments ([`PtrArg`], [`ScalarArg`]), and their impls for
//! buffers and views of them, cudarc slices and views, and scalars.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, DeviceSlice};
use tlx_core::ir::ScalarType;

use crate::buffer::{Buffer, BufferView};
use crate::value::{ptr_arg, KernelArg, PtrTarget, ScalarValue};
use crate::Element;

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
        cudarc_arg::<T>(self, self.stream(), self.len())
    }
}

impl<T: Element> PtrArg<T> for CudaView<'_, T> {
    fn kernel_arg(&self) -> KernelArg<'_> {
        cudarc_arg::<T>(self, self.stream(), self.len())
    }
}

/// A cudarc slice or view of `len` elements as a pointer argument on its
/// stream's GPU (no mesh rank: cudarc memory belongs to no mesh).
fn cudarc_arg<'a, T: Element>(
    memory: &impl DevicePtr<T>,
    stream: &Arc<CudaStream>,
    len: usize,
) -> KernelArg<'a> {
    let (address, _record_read) = memory.device_ptr(stream);
    let target = PtrTarget::Cuda {
        ordinal: stream.context().ordinal(),
        rank: None,
        address,
    };
    ptr_arg(T::SCALAR, target, len)
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
    use tlx_core::ir::ParamKind;

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
