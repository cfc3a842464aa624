//! Typed device buffers and offset views of them: allocation, uploads and
//! downloads on either device, each checked here (sizes, ranges, lengths,
//! owning device) and then done by the device's [`Backend`]. (Their
//! `PtrArg` impls are in arg.rs, with the others.)

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use cudarc::driver::CudaSlice;

use crate::backend::Backend;
use crate::cpu::CpuDevice;
use crate::cuda::CudaDevice;
use crate::device::{AnyBackend, Device};
use crate::value::{ptr_arg, DeviceId, KernelArg, PtrTarget};
use crate::{Element, Error};

/// `len` elements of `T` in a device's memory. Freed on drop.
pub struct Buffer<T: Element> {
    len: usize,
    storage: Storage<T>,
}

/// A buffer's memory, with the backend that owns it.
enum Storage<T: Element> {
    Cuda(Held<CudaDevice, T>),
    Cpu(Held<CpuDevice, T>),
}

/// Memory of a backend, with the backend.
struct Held<B: Backend, T: Element> {
    backend: Arc<B>,
    memory: B::Memory<T>,
}

impl<B: Backend, T: Element> Held<B, T> {
    fn alloc(backend: &Arc<B>, len: usize) -> Result<Held<B, T>, Error> {
        Ok(Held {
            memory: backend.alloc::<T>(len)?,
            backend: backend.clone(),
        })
    }
}

/// `$body` with `$held` bound to the [`Held`] memory of whichever backend
/// the storage `$storage` is on.
macro_rules! with_storage {
    ($storage:expr, |$held:ident| $body:expr) => {
        match $storage {
            Storage::Cuda($held) => $body,
            Storage::Cpu($held) => $body,
        }
    };
}

/// Elements `offset..offset + len` of a buffer; usable as a kernel argument.
pub struct BufferView<'a, T: Element> {
    buffer: &'a Buffer<T>,
    offset: usize,
    len: usize,
}

fn byte_len<T: Element>(what: &'static str, count: usize) -> Result<usize, Error> {
    let elem_bytes = std::mem::size_of::<T>();
    count.checked_mul(elem_bytes).ok_or(Error::TooLarge {
        what,
        count,
        elem_bytes,
    })
}

/// `range` within `0..len`, as `(start, end)`.
fn resolve_range(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize), Error> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::OutOfBounds { start, end, len });
    }
    Ok((start, end))
}

impl Device {
    /// `len` elements with unspecified contents (on the CPU device, reading
    /// them before writing is reported when `TLX_CHECK_UNINIT=1`).
    pub fn alloc<T: Element>(&self, len: usize) -> Result<Buffer<T>, Error> {
        // The backends trust the size to fit.
        byte_len::<T>("a buffer", len)?;
        let storage = match self.backend() {
            AnyBackend::Cuda(backend) => Storage::Cuda(Held::alloc(backend, len)?),
            AnyBackend::Cpu(backend) => Storage::Cpu(Held::alloc(backend, len)?),
        };
        Ok(Buffer { len, storage })
    }

    /// `len` elements, all zero.
    pub fn alloc_zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>, Error> {
        let mut buffer = self.alloc::<T>(len)?;
        with_storage!(&mut buffer.storage, |held| {
            held.backend.fill_zeros::<T>(&mut held.memory)
        })?;
        Ok(buffer)
    }

    /// A new buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<Buffer<T>, Error> {
        let mut buffer = self.alloc::<T>(data.len())?;
        buffer.copy_from(data)?;
        Ok(buffer)
    }
}

impl<T: Element> Buffer<T> {
    /// The length in elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The cudarc slice behind a GPU buffer, to hand it to other CUDA
    /// libraries (cuBLAS, or a framework built on cudarc). It may hold
    /// more elements than [`Buffer::len`] (never fewer).
    pub fn cuda_slice(&self) -> Result<&CudaSlice<T>, Error> {
        match &self.storage {
            Storage::Cuda(held) => Ok(&held.memory.slice),
            Storage::Cpu(_) => Err(Error::NeedsGpu("a CUDA slice")),
        }
    }

    /// [`Buffer::cuda_slice`], for libraries that write into the buffer.
    pub fn cuda_slice_mut(&mut self) -> Result<&mut CudaSlice<T>, Error> {
        match &mut self.storage {
            Storage::Cuda(held) => Ok(&mut held.memory.slice),
            Storage::Cpu(_) => Err(Error::NeedsGpu("a CUDA slice")),
        }
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of the contents (waits for queued work that writes them).
    pub fn download(&self) -> Result<Vec<T>, Error> {
        self.download_range(0, self.len)
    }

    /// Overwrites the contents with `data`, which must have the same length.
    pub fn copy_from(&mut self, data: &[T]) -> Result<(), Error> {
        if data.len() != self.len {
            return Err(Error::LengthMismatch {
                buffer: self.len,
                host: data.len(),
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        with_storage!(&mut self.storage, |held| {
            held.backend.upload(&mut held.memory, data)
        })
    }

    /// Overwrites the contents with another buffer's on the same device,
    /// without a trip through the host (asynchronous on a GPU).
    pub fn copy_from_device(&mut self, src: &Buffer<T>) -> Result<(), Error> {
        if src.len != self.len {
            return Err(Error::DeviceCopy(format!(
                "the source has {} elements, the destination {}",
                src.len, self.len
            )));
        }
        let len = self.len;
        match (&mut self.storage, &src.storage) {
            (Storage::Cuda(to), Storage::Cuda(from)) if Arc::ptr_eq(&to.backend, &from.backend) => {
                to.backend.copy::<T>(&mut to.memory, &from.memory, len)
            }
            (Storage::Cpu(to), Storage::Cpu(from)) if Arc::ptr_eq(&to.backend, &from.backend) => {
                to.backend.copy::<T>(&mut to.memory, &from.memory, len)
            }
            _ => Err(Error::DeviceCopy(
                "the buffers belong to different devices".to_string(),
            )),
        }
    }

    /// Elements in `range`, as a view usable as a kernel argument.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferView<'_, T>, Error> {
        let (start, end) = resolve_range(range, self.len)?;
        Ok(BufferView {
            buffer: self,
            offset: start,
            len: end - start,
        })
    }

    fn device_id(&self) -> DeviceId {
        with_storage!(&self.storage, |held| held.backend.id())
    }

    /// Whether the buffer is in `device`'s memory.
    pub fn is_on(&self, device: &Device) -> bool {
        self.device_id() == device.id()
    }

    /// The address a kernel sees for element 0, as an `i64`: what a table
    /// of addresses holds for a kernel to load and cast (`addr as
    /// Ptr<T>`), such as a grouped GEMM's per-group operands. The buffer
    /// must outlive every launch that uses it; on the interpreter, an
    /// access through it is still checked against the buffer.
    pub fn kernel_address(&self) -> i64 {
        self.target(0).kernel_address(std::mem::size_of::<T>())
    }

    /// Where element `offset` lives, as a kernel argument sees it.
    pub(crate) fn target(&self, offset: usize) -> PtrTarget {
        with_storage!(&self.storage, |held| {
            held.backend.target::<T>(&held.memory, offset)
        })
    }

    fn download_range(&self, offset: usize, len: usize) -> Result<Vec<T>, Error> {
        let mut out = vec![T::default(); len];
        if len == 0 {
            return Ok(out);
        }
        with_storage!(&self.storage, |held| {
            held.backend
                .download(&held.memory, self.len, offset, &mut out)
        })?;
        Ok(out)
    }
}

impl<T: Element> Drop for Buffer<T> {
    fn drop(&mut self) {
        with_storage!(&self.storage, |held| held.backend.free::<T>(&held.memory));
    }
}

impl<T: Element> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer<{}>[{}] on {}",
            T::SCALAR,
            self.len,
            self.device_id()
        )
    }
}

impl<'a, T: Element> BufferView<'a, T> {
    /// The length in elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the view's first element in its buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// A copy of the view's elements (waits for queued work that writes them).
    pub fn download(&self) -> Result<Vec<T>, Error> {
        self.buffer.download_range(self.offset, self.len)
    }

    /// A narrower view; `range` counts from the start of this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferView<'a, T>, Error> {
        let (start, end) = resolve_range(range, self.len)?;
        Ok(BufferView {
            buffer: self.buffer,
            offset: self.offset + start,
            len: end - start,
        })
    }

    /// The view as a kernel argument, borrowing the buffer rather than the
    /// view, so that `buffer.slice(r)?.kernel_arg()` can be passed directly.
    pub fn kernel_arg(&self) -> KernelArg<'a> {
        ptr_arg(T::SCALAR, self.buffer.target(self.offset), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    use crate::{F8E4M3, F8E5M2};

    fn round_trip<T: Element + PartialEq>(device: &Device, data: &[T]) {
        let buffer = device.upload(data).expect("upload");
        assert_eq!(buffer.len(), data.len());
        assert_eq!(buffer.download().expect("download"), data);
    }

    #[test]
    fn every_element_type_round_trips_on_the_cpu() {
        let device = Device::cpu();
        round_trip(&device, &[1.5f32, -0.0, f32::MAX]);
        round_trip(&device, &[f16::from_f32(0.5), f16::MIN]);
        round_trip(&device, &[bf16::from_f32(-3.0), bf16::MAX]);
        round_trip(&device, &[i8::MIN, 0, i8::MAX]);
        round_trip(&device, &[0u8, 255]);
        round_trip(&device, &[i32::MIN, 7]);
        round_trip(&device, &[u32::MAX]);
        round_trip(&device, &[i64::MIN, i64::MAX]);
        round_trip(&device, &[F8E4M3::from_f32(2.0), F8E4M3(0x7f)]);
        round_trip(&device, &[F8E5M2::from_f32(-0.25)]);
        round_trip::<f32>(&device, &[]);
    }

    #[test]
    fn zeros_copies_and_views() {
        let device = Device::cpu();
        let mut buffer = device.alloc_zeros::<i32>(6).expect("alloc");
        assert_eq!(buffer.download().expect("download"), vec![0; 6]);
        buffer.copy_from(&[0, 1, 2, 3, 4, 5]).expect("copy");
        let view = buffer.slice(2..5).expect("in bounds");
        assert_eq!((view.offset(), view.len()), (2, 3));
        assert_eq!(view.download().expect("download"), vec![2, 3, 4]);
        let inner = view.slice(1..=2).expect("in bounds");
        assert_eq!(inner.offset(), 3);
        assert_eq!(inner.download().expect("download"), vec![3, 4]);
        assert_eq!(buffer.slice(..).map(|v| v.len()).ok(), Some(6));
        assert!(buffer.slice(6..).is_ok_and(|v| v.is_empty()));
    }

    #[test]
    fn out_of_bounds_views_and_mismatched_copies_are_errors() {
        let device = Device::cpu();
        let mut buffer = device.alloc::<f32>(4).expect("alloc");
        let err = buffer
            .slice(2..5)
            .map(|v| v.len())
            .map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("range 2..5 is out of bounds for a buffer of 4 elements".to_string())
        );
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = buffer.slice(3..1).map(|v| v.len());
        assert!(matches!(reversed, Err(Error::OutOfBounds { .. })));
        let view = buffer.slice(1..3).expect("in bounds");
        assert!(view.slice(0..3).is_err());
        assert!(matches!(
            buffer.copy_from(&[1.0; 3]),
            Err(Error::LengthMismatch { buffer: 4, host: 3 })
        ));
        assert!(matches!(
            device.alloc::<f32>(usize::MAX),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn device_to_device_copies_check_length_and_device() {
        let device = Device::cpu();
        let src = device.upload(&[1.5f32, -2.0, 3.25]).unwrap();
        let mut dst = device.upload(&[f32::NAN; 3]).unwrap();
        dst.copy_from_device(&src).unwrap();
        assert_eq!(dst.download().unwrap(), vec![1.5, -2.0, 3.25]);
        let mut short = device.alloc::<f32>(2).unwrap();
        assert!(matches!(
            short.copy_from_device(&src),
            Err(Error::DeviceCopy(_))
        ));
        let mut elsewhere = Device::cpu().alloc::<f32>(3).unwrap();
        let err = elsewhere.copy_from_device(&src).unwrap_err();
        assert!(err.to_string().contains("different devices"), "{err}");
    }

    #[test]
    fn dropping_a_buffer_frees_its_memory() {
        let device = Device::cpu();
        let buffer = device.upload(&[1u8, 2, 3]).expect("upload");
        let Storage::Cpu(held) = &buffer.storage else {
            panic!("a CPU buffer has CPU storage");
        };
        let (cpu, id) = (held.backend.clone(), held.memory);
        let mut byte = [0u8];
        assert!(cpu.download(&id, 3, 0, &mut byte).is_ok());
        drop(buffer);
        assert!(cpu.download(&id, 3, 0, &mut byte).is_err());
    }

    #[test]
    fn devices_and_buffers_can_cross_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Device>();
        shareable::<Buffer<f32>>();
        shareable::<BufferView<'static, F8E4M3>>();
    }
}
