//! [`TensorDesc`]: a buffer seen as a tensor of up to five dimensions, the
//! argument of a kernel's `TensorDesc<T, ...>` parameter. The caller gives
//! shape and strides; the launcher adds what the compiled kernel fixes (the
//! block it moves and the swizzle of the buffer it lands in) when it
//! encodes the TMA descriptor, so the two cannot disagree. What a launch
//! sees of it, [`TensorDescValue`], is a kernel argument (value.rs).

use std::marker::PhantomData;

use crate::arg::PtrArg;
use crate::buffer::Buffer;
use crate::value::{KernelArg, TensorDescValue};
use crate::{Element, Error};

/// A buffer seen as a tensor for TMA copies (`async_descriptor_load` and
/// `async_descriptor_store`); boxes that reach past its edges read zeros
/// and write nothing there.
#[derive(Copy, Clone, Debug)]
pub struct TensorDesc<'a, T: Element> {
    value: TensorDescValue<'a>,
    elem: PhantomData<T>,
}

impl<'a, T: Element> TensorDesc<'a, T> {
    /// `buffer` as a tensor of `shape` with `strides` (in elements, outermost
    /// first; the innermost stride must be 1). Every element the shape
    /// reaches must lie inside the buffer.
    pub fn new(buffer: &'a Buffer<T>, shape: &[usize], strides: &[usize]) -> Result<Self, Error> {
        Self::over(buffer, shape, strides)
    }

    /// [`TensorDesc::new`] over anything passed as a pointer: a buffer, a
    /// view of one, or a cudarc slice.
    pub fn over(
        tensor: &'a (impl PtrArg<T> + ?Sized),
        shape: &[usize],
        strides: &[usize],
    ) -> Result<Self, Error> {
        let invalid = |reason: String| Error::InvalidDescriptor { reason };
        let KernelArg::Ptr(ptr) = tensor.kernel_arg() else {
            return Err(invalid("the tensor is not passed as a pointer".into()));
        };
        let len = ptr.len();
        let rank = shape.len();
        if !(1..=5).contains(&rank) || strides.len() != rank {
            return Err(invalid(format!(
                "shape {shape:?} and strides {strides:?} must both have 1 to 5 dimensions"
            )));
        }
        if strides[rank - 1] != 1 {
            return Err(invalid(format!(
                "the innermost stride is {}; TMA reads the last dimension contiguously, so it must be 1",
                strides[rank - 1]
            )));
        }
        if shape.contains(&0) {
            return Err(invalid(format!("shape {shape:?} has an empty dimension")));
        }
        let last = shape.iter().zip(strides).try_fold(0usize, |acc, (&n, &s)| {
            acc.checked_add((n - 1).checked_mul(s)?)
        });
        match last {
            Some(last) if last < len => {}
            _ => {
                return Err(invalid(format!(
                "shape {shape:?} with strides {strides:?} reaches past the buffer's {len} elements"
            )))
            }
        }
        let mut value = TensorDescValue {
            elem: T::SCALAR,
            target: ptr.target,
            rank: rank as u8,
            shape: [0; 5],
            strides: [0; 5],
            borrow: PhantomData,
        };
        for d in 0..rank {
            value.shape[d] = shape[d] as u64;
            value.strides[d] = strides[d] as u64;
        }
        Ok(TensorDesc {
            value,
            elem: PhantomData,
        })
    }

    /// A row-major matrix `[rows, cols]` over the start of `buffer`.
    pub fn matrix(buffer: &'a Buffer<T>, rows: usize, cols: usize) -> Result<Self, Error> {
        Self::new(buffer, &[rows, cols], &[cols, 1])
    }

    /// The launch argument.
    pub fn kernel_arg(&self) -> KernelArg<'a> {
        KernelArg::TensorDesc(self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use tlx_core::ir::ScalarType;

    #[test]
    fn shapes_must_fit_the_buffer_and_keep_the_last_dimension_contiguous() {
        let dev = Device::cpu();
        let buf = dev.alloc::<f32>(12).expect("alloc");
        assert!(TensorDesc::matrix(&buf, 3, 4).is_ok());
        assert!(TensorDesc::matrix(&buf, 4, 4).is_err(), "past the end");
        assert!(
            TensorDesc::new(&buf, &[3, 4], &[1, 3]).is_err(),
            "inner stride"
        );
        assert!(
            TensorDesc::new(&buf, &[3, 4], &[4]).is_err(),
            "rank mismatch"
        );
        assert!(TensorDesc::new(&buf, &[0, 4], &[4, 1]).is_err(), "empty");
        let d = TensorDesc::new(&buf, &[2, 2, 3], &[6, 3, 1]).expect("3-d");
        let KernelArg::TensorDesc(v) = d.kernel_arg() else {
            panic!("a descriptor argument");
        };
        assert_eq!((v.elem(), v.rank()), (ScalarType::F32, 3));
    }
}
