//! [`Strided`]: a buffer seen as a tensor of rank `N` with extents and
//! strides, the argument of a kernel's `Strided<T, N>` parameter. The launch
//! passes the pointer and then the extents and strides as `i32` scalars, so
//! the kernel reads `x.shape(d)` and `x.stride(d)` instead of taking them as
//! separate arguments that a caller could get wrong or misorder.

use std::marker::PhantomData;

use crate::arg::{PtrArg, ScalarArg};
use crate::value::KernelArg;
use crate::{Element, Error};

/// A view of `N` dimensions over a buffer, a buffer view or a cudarc slice:
/// extents and strides in elements, outermost first. Every element the
/// view reaches lies inside the buffer (checked when it is made); strides
/// may be anything else, so a transposed or sliced matrix is a view, not a
/// copy.
///
/// ```
/// use tlx_runtime::{Device, Strided};
///
/// let dev = Device::cpu();
/// let a = dev.alloc::<f32>(6 * 4)?;
/// let rows = Strided::contiguous(&a, [6, 4])?;
/// assert_eq!(rows.strides(), [4, 1]);
/// let cols = rows.transpose(0, 1);
/// assert_eq!((cols.shape(), cols.strides()), ([4, 6], [1, 4]));
/// # Ok::<(), tlx_runtime::Error>(())
/// ```
#[derive(Copy, Clone, Debug)]
pub struct Strided<'a, T: Element, const N: usize> {
    pointer: KernelArg<'a>,
    shape: [usize; N],
    strides: [usize; N],
    elem: PhantomData<T>,
}

impl<'a, T: Element, const N: usize> Strided<'a, T, N> {
    /// `tensor` with `shape` and `strides` (in elements). `Err` when a
    /// dimension or stride exceeds the kernels' `i32`, when the view reaches
    /// past the end of `tensor`, or when `N` is not 1 to 4.
    pub fn new(
        tensor: &'a (impl PtrArg<T> + ?Sized),
        shape: [usize; N],
        strides: [usize; N],
    ) -> Result<Self, Error> {
        let invalid = |reason: String| Err(Error::InvalidStrided { reason });
        if !(1..=4).contains(&N) {
            return invalid(format!("{N} dimensions; a kernel takes 1 to 4"));
        }
        let pointer = tensor.kernel_arg();
        let KernelArg::Ptr(ptr) = pointer else {
            return invalid("the tensor is not passed as a pointer".into());
        };
        let limit = i32::MAX as usize;
        if let Some(d) = (0..N).find(|&d| shape[d] > limit || strides[d] > limit) {
            return invalid(format!(
                "dimension {d} (extent {}, stride {}) exceeds the kernels' i32 indexing",
                shape[d], strides[d]
            ));
        }
        // The last element reached, if any is.
        if shape.iter().all(|&e| e > 0) {
            let last: u128 = (0..N)
                .map(|d| (shape[d] as u128 - 1) * strides[d] as u128)
                .sum();
            if last >= ptr.len() as u128 {
                return invalid(format!(
                    "shape {shape:?} with strides {strides:?} reaches element {last}, \
                     but the buffer holds {}",
                    ptr.len()
                ));
            }
        }
        Ok(Strided {
            pointer,
            shape,
            strides,
            elem: PhantomData,
        })
    }

    /// `tensor` as a row-major (C-order) tensor of `shape`.
    pub fn contiguous(
        tensor: &'a (impl PtrArg<T> + ?Sized),
        shape: [usize; N],
    ) -> Result<Self, Error> {
        let mut strides = [1usize; N];
        for d in (0..N.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].saturating_mul(shape[d + 1]);
        }
        Self::new(tensor, shape, strides)
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> [usize; N] {
        self.shape
    }

    /// The strides in elements, outermost first.
    pub fn strides(&self) -> [usize; N] {
        self.strides
    }

    /// The same elements with dimensions `a` and `b` swapped (a matrix's
    /// transpose for `(0, 1)`). Panics if either is not below `N`, as
    /// slice indexing does.
    pub fn transpose(mut self, a: usize, b: usize) -> Self {
        self.shape.swap(a, b);
        self.strides.swap(a, b);
        self
    }

    /// Launch argument `i` of the kernel parameter: the pointer, then the
    /// extents, then the strides (what `#[tlx::kernel]` passes).
    #[doc(hidden)]
    pub fn kernel_arg(&self, i: usize) -> KernelArg<'a> {
        // Each is at most i32::MAX (checked in `new`).
        let scalar = |v: usize| ScalarArg::kernel_arg(v as i32);
        match i {
            0 => self.pointer,
            i if i <= N => scalar(self.shape[i - 1]),
            i => scalar(self.strides[i - 1 - N]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[test]
    fn views_check_their_reach() {
        let dev = Device::cpu();
        let buf = dev.alloc::<f32>(12).expect("alloc");
        let m = Strided::contiguous(&buf, [3, 4]).expect("fits");
        assert_eq!(m.strides(), [4, 1]);
        // Every fourth element, three of them: reaches element 8.
        assert!(Strided::new(&buf, [3], [4]).is_ok());
        let past = Strided::new(&buf, [4, 4], [4, 1]).expect_err("16 elements");
        assert!(past.to_string().contains("reaches element 15"), "{past}");
        let wide = Strided::new(&buf, [1, 1], [1 << 31, 1]).expect_err("stride");
        assert!(wide.to_string().contains("i32"), "{wide}");
        let rank5 = Strided::<f32, 5>::contiguous(&buf, [1; 5]).expect_err("rank");
        assert!(rank5.to_string().contains("1 to 4"), "{rank5}");
        // An empty view reaches nothing.
        assert!(Strided::new(&buf, [0, 100], [100, 1]).is_ok());
    }

    #[test]
    fn launch_arguments_are_pointer_extents_strides() {
        let dev = Device::cpu();
        let buf = dev.alloc::<f32>(12).expect("alloc");
        let t = Strided::contiguous(&buf, [3, 4])
            .expect("fits")
            .transpose(0, 1);
        let ints: Vec<u64> = (1..5)
            .map(|i| match t.kernel_arg(i) {
                KernelArg::Scalar(s) => s.bits,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ints, [4, 3, 1, 4]);
        assert!(matches!(t.kernel_arg(0), KernelArg::Ptr(_)));
    }
}
