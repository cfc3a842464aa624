//! Devices: choosing the GPU or the CPU interpreter, the enum that holds
//! either backend and dispatches to it through the [`Backend`] trait, and
//! what a device does beyond buffers and launches (its name, synchronizing,
//! timing); also [`TiledTensorMap::encode`], which needs a device's context.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::backend::{Backend, Mark};
use crate::cpu::{CpuDevice, LaunchGroup};
use crate::cuda::tensor_map::{EncodedTensorMap, TensorMapError, TiledTensorMap};
use crate::cuda::{CudaDevice, HeldLaunches};
use crate::env::env_flag;
use crate::value::DeviceId;
use crate::Error;

/// Where kernels run: a CUDA GPU or the CPU interpreter. Cheap to clone
/// (clones share the device, its memory and its loaded kernels).
#[derive(Clone)]
pub struct Device {
    backend: AnyBackend,
}

/// The backend of a device: an enum of the two rather than an
/// `Arc<dyn Backend>`, because [`Backend`] cannot be a trait object: its
/// memory is generic over the element type (a GPU buffer stays a typed
/// `CudaSlice<T>`, which `Buffer::cuda_slice` lends out). The enum costs a
/// `match` per call ([`with_backend!`]), and the GPU-only API (cudarc's
/// context and stream, tensor maps, autotuning's restores) reaches the CUDA
/// backend by matching its variant.
#[derive(Clone)]
pub(crate) enum AnyBackend {
    Cuda(Arc<CudaDevice>),
    Cpu(Arc<CpuDevice>),
}

/// `$body` with `$backend` bound to the `&Arc<B>` of whichever [`Backend`]
/// `$any` (an `&AnyBackend`) holds: the dispatch of every call that both
/// backends implement.
macro_rules! with_backend {
    ($any:expr, |$backend:ident| $body:expr) => {
        match $any {
            $crate::device::AnyBackend::Cuda($backend) => $body,
            $crate::device::AnyBackend::Cpu($backend) => $body,
        }
    };
}
pub(crate) use with_backend;

impl Device {
    /// CUDA device 0 when a driver and a GPU are present, else the CPU
    /// interpreter, saying why on stderr. `TLX_INTERPRET=1` forces the CPU.
    pub fn new() -> Device {
        let (device, notice) = Device::select(env_flag("TLX_INTERPRET"), Device::cuda(0));
        if let Some(notice) = notice {
            eprintln!("{notice}");
        }
        device
    }

    /// The device [`Device::new`] picks given how opening the GPU went, and
    /// the fallback notice if any.
    fn select(force_cpu: bool, gpu: Result<Device, Error>) -> (Device, Option<String>) {
        if force_cpu {
            return (Device::cpu(), None);
        }
        let reason = match gpu {
            Ok(device) => return (device, None),
            Err(Error::NoGpu(reason)) => reason,
            Err(other) => format!("CUDA device 0 did not start ({other})"),
        };
        let notice = format!("tlx: {reason}; running kernels on the CPU interpreter");
        (Device::cpu(), Some(notice))
    }

    /// How many CUDA GPUs the driver sees; 0 without a driver or GPU (the
    /// CPU interpreter is not counted).
    pub fn count() -> usize {
        CudaDevice::count()
    }

    /// GPU `index` (0-based, the driver's order): [`Error::NoSuchDevice`]
    /// when the machine has `index` GPUs or fewer, [`Error::NoGpu`] when it
    /// has none. The same as [`Device::cuda`].
    pub fn nth(index: usize) -> Result<Device, Error> {
        Device::cuda(index)
    }

    /// The CUDA device with this ordinal.
    pub fn cuda(ordinal: usize) -> Result<Device, Error> {
        Ok(Device {
            backend: AnyBackend::Cuda(Arc::new(CudaDevice::open(ordinal)?)),
        })
    }

    /// A new CPU interpreter device with its own memory.
    pub fn cpu() -> Device {
        Device {
            backend: AnyBackend::Cpu(Arc::new(CpuDevice::new())),
        }
    }

    /// Rank `rank` of an interpreted mesh (see mesh.rs).
    pub(crate) fn cpu_rank(group: &Arc<LaunchGroup>, rank: usize) -> Device {
        Device {
            backend: AnyBackend::Cpu(Arc::new(CpuDevice::rank_of(group, rank))),
        }
    }

    /// GPU `ordinal` as a rank of a mesh whose runs `hold` keeps the
    /// launches of; `shared_rank` when the mesh's ranks share the GPU.
    pub(crate) fn cuda_rank(
        ordinal: usize,
        shared_rank: Option<usize>,
        hold: &Arc<HeldLaunches>,
    ) -> Result<Device, Error> {
        Ok(Device {
            backend: AnyBackend::Cuda(Arc::new(CudaDevice::open_rank(ordinal, shared_rank, hold)?)),
        })
    }

    /// Lets kernels on this GPU reach `peer`'s memory; nothing on the CPU.
    pub(crate) fn enable_peer_access(&self, peer: &Device) -> Result<(), Error> {
        match (&self.backend, &peer.backend) {
            (AnyBackend::Cuda(from), AnyBackend::Cuda(to)) => from.enable_peer_access(to),
            _ => Ok(()),
        }
    }

    /// Whether this is a CUDA device rather than the CPU interpreter.
    pub fn is_gpu(&self) -> bool {
        matches!(self.backend, AnyBackend::Cuda(_))
    }

    /// The GPU's name with its architecture, or `CPU interpreter`.
    pub fn name(&self) -> String {
        with_backend!(&self.backend, |backend| backend.name())
    }

    /// The GPU's compute capability, e.g. `(9, 0)` for an H100; `None` on
    /// the CPU interpreter, which runs kernels of every architecture.
    pub fn compute_capability(&self) -> Option<(u32, u32)> {
        with_backend!(&self.backend, |backend| backend.compute_capability())
    }

    /// How many programs run at once at full width: the GPU's streaming
    /// multiprocessors, or the interpreter's host threads. Persistent kernels
    /// size their grid by it.
    pub fn multiprocessor_count(&self) -> u32 {
        with_backend!(&self.backend, |backend| backend.multiprocessor_count())
    }

    /// Waits for every queued launch and copy; reports errors they met.
    pub fn synchronize(&self) -> Result<(), Error> {
        with_backend!(&self.backend, |backend| backend.synchronize())
    }

    /// Runs `f` and returns how long the work it queued took, in
    /// milliseconds: GPU time between CUDA events, or wall time on the CPU.
    pub fn time(&self, f: impl FnOnce() -> Result<(), Error>) -> Result<f32, Error> {
        let start = self.mark()?;
        f()?;
        let end = self.mark()?;
        self.elapsed_ms(&start, &end)
    }

    /// The point this device's queued work has reached.
    pub(crate) fn mark(&self) -> Result<Mark, Error> {
        with_backend!(&self.backend, |backend| backend.mark())
    }

    /// Milliseconds from `start` to the later `end`, waiting for `end`'s
    /// work: GPU time between the events where both have one.
    pub(crate) fn elapsed_ms(&self, start: &Mark, end: &Mark) -> Result<f32, Error> {
        with_backend!(&self.backend, |backend| backend.elapsed_ms(start, end))
    }

    /// Flushes the L2 cache before a timed launch (nothing on the CPU).
    pub(crate) fn flush_l2(&self) -> Result<(), Error> {
        with_backend!(&self.backend, |backend| backend.flush_l2())
    }

    /// The cudarc context, to mix tlx kernels with cudarc (e.g. cuBLAS).
    pub fn cuda_context(&self) -> Result<&Arc<CudaContext>, Error> {
        match &self.backend {
            AnyBackend::Cuda(device) => Ok(&device.ctx),
            AnyBackend::Cpu(_) => Err(Error::NeedsGpu("a CUDA context")),
        }
    }

    /// The stream every launch and copy of this device goes to.
    pub fn cuda_stream(&self) -> Result<&Arc<CudaStream>, Error> {
        match &self.backend {
            AnyBackend::Cuda(device) => Ok(&device.stream),
            AnyBackend::Cpu(_) => Err(Error::NeedsGpu("a CUDA stream")),
        }
    }

    pub(crate) fn backend(&self) -> &AnyBackend {
        &self.backend
    }

    pub(crate) fn id(&self) -> DeviceId {
        with_backend!(&self.backend, |backend| backend.id())
    }
}

impl Default for Device {
    fn default() -> Device {
        Device::new()
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.id())
    }
}

impl TiledTensorMap {
    /// Validates, then has the driver encode the descriptor for `device`,
    /// whose memory `global_address` points into.
    ///
    /// Encoding only computes (the tensor is not read), yet the driver wants
    /// a current context: on driver 580 it answers `CUDA_ERROR_NOT_INITIALIZED`
    /// before `cuInit` and `CUDA_ERROR_INVALID_CONTEXT` without a context. So
    /// this makes `device`'s context current on the calling thread, as a
    /// launch does.
    pub fn encode(&self, device: &Device) -> Result<EncodedTensorMap, TensorMapError> {
        // A bad description is reported as such, whatever the device.
        self.validate()?;
        let AnyBackend::Cuda(cuda) = device.backend() else {
            return Err(TensorMapError::NotCuda);
        };
        self.encode_on(&cuda.ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::probe;
    use crate::cuda::tensor_map::gemm_operand;
    use crate::cuda::tensor_map::TmaSwizzle;

    fn no_gpu() -> Result<Device, Error> {
        Err(Error::NoGpu("the driver sees 0".to_string()))
    }

    #[test]
    fn forced_interpreter_needs_no_notice() {
        let (device, notice) = Device::select(true, no_gpu());
        assert!(!device.is_gpu());
        assert_eq!(notice, None);
        assert_eq!(device.name(), "CPU interpreter");
    }

    #[test]
    fn any_gpu_failure_falls_back_with_its_reason() {
        let (device, notice) = Device::select(false, no_gpu());
        assert!(!device.is_gpu());
        assert_eq!(
            notice.as_deref(),
            Some("tlx: the driver sees 0; running kernels on the CPU interpreter")
        );
        let broken = Err(Error::cuda(
            "cuDevicePrimaryCtxRetain",
            cudarc::driver::DriverError(
                cudarc::driver::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY,
            ),
        ));
        let (device, notice) = Device::select(false, broken);
        assert!(!device.is_gpu());
        let notice = notice.unwrap_or_default();
        assert!(
            notice.starts_with("tlx: CUDA device 0 did not start (CUDA error in cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY"),
            "{notice}"
        );
    }

    #[test]
    fn without_a_driver_the_cpu_takes_over_with_a_notice() {
        if probe::driver_library().is_ok() {
            eprintln!("skipping: a CUDA driver is installed here");
            return;
        }
        let (device, notice) = Device::select(false, Device::cuda(0));
        assert!(!device.is_gpu());
        assert_eq!(
            notice.as_deref(),
            Some(
                "tlx: no CUDA driver found (libcuda.so.1); running kernels on the CPU interpreter"
            )
        );
        match Device::cuda(0) {
            Err(Error::NoGpu(reason)) => assert!(reason.contains("libcuda"), "{reason}"),
            other => panic!("expected NoGpu, got {other:?}"),
        }
        assert!(matches!(device.cuda_stream(), Err(Error::NeedsGpu(_))));
    }

    /// Works with and without GPUs: an index past the last is a typed
    /// error saying how many there are; the last one opens.
    #[test]
    fn devices_are_counted_and_an_index_past_them_is_a_typed_error() {
        let count = Device::count();
        match Device::nth(count) {
            Err(Error::NoSuchDevice { index, count: seen }) => {
                assert_eq!((index, seen), (count, count));
                assert!(count > 0);
            }
            Err(Error::NoGpu(_)) => assert_eq!(count, 0),
            Err(other) => panic!("expected NoSuchDevice or NoGpu, got {other}"),
            Ok(_) => panic!("device {count} of {count} opened"),
        }
        let message = Error::NoSuchDevice { index: 3, count: 2 }.to_string();
        assert!(
            message.contains("device 3") && message.contains("sees 2"),
            "{message}"
        );
        if let Some(last) = count.checked_sub(1) {
            assert!(Device::nth(last).is_ok_and(|d| d.is_gpu()));
        }
    }

    #[test]
    fn cpu_devices_are_distinct() {
        let (a, b) = (Device::cpu(), Device::cpu());
        assert_ne!(a.id(), b.id());
        assert_eq!(a.clone().id(), a.id());
        assert!(a.synchronize().is_ok());
        let elapsed = a.time(|| Ok(()));
        assert!(elapsed.is_ok_and(|ms| ms >= 0.0));
        assert!(a.multiprocessor_count() >= 1);
    }

    #[test]
    fn the_cpu_interpreter_has_no_tensor_maps() {
        let device = Device::cpu();
        assert_eq!(gemm_operand().encode(&device), Err(TensorMapError::NotCuda));
        // A bad description is reported as such, whatever the device.
        let mut map = gemm_operand();
        map.box_shape[0] = 0;
        assert!(matches!(
            map.encode(&device),
            Err(TensorMapError::BoxDim { .. })
        ));
    }

    #[test]
    fn the_driver_encodes_a_gemm_operand_tile() {
        // The same probe that keeps cudarc from panicking when opening a
        // device; without a driver or a GPU there is nothing to check.
        if let Err(reason) = probe::driver_library() {
            println!("skipped: {reason}");
            return;
        }
        let device = match Device::cuda(0) {
            Ok(device) => device,
            Err(err) => {
                println!("skipped: {err}");
                return;
            }
        };
        let map = gemm_operand();
        let encoded = match map.encode(&device) {
            Ok(encoded) => encoded,
            Err(err) => panic!("{err}"),
        };
        assert_ne!(encoded.0, [0; 128], "the driver wrote nothing");
        // The descriptor is a function of the description alone.
        assert_eq!(map.encode(&device), Ok(encoded));
        let unswizzled = TiledTensorMap {
            swizzle: TmaSwizzle::None,
            ..map
        };
        assert_ne!(unswizzled.encode(&device).map(|e| e.0), Ok(encoded.0));
    }
}
