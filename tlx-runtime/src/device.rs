//! Devices: choosing the GPU or the CPU interpreter, and what a device does
//! beyond buffers and launches (its name, synchronizing, timing).

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use crate::arg::DeviceId;
use crate::cpu::CpuDevice;
use crate::cuda::CudaDevice;
use crate::Error;

/// Where kernels run: a CUDA GPU or the CPU interpreter. Cheap to clone
/// (clones share the device, its memory and its loaded kernels).
#[derive(Clone)]
pub struct Device {
    backend: Backend,
}

#[derive(Clone)]
pub(crate) enum Backend {
    Cuda(Arc<CudaDevice>),
    Cpu(Arc<CpuDevice>),
}

/// True when the environment variable is set to `1`, `true` or `yes`.
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| is_truthy(&v))
}

fn is_truthy(value: &str) -> bool {
    matches!(value.trim(), "1" | "true" | "yes")
}

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

    /// The CUDA device with this ordinal.
    pub fn cuda(ordinal: usize) -> Result<Device, Error> {
        Ok(Device {
            backend: Backend::Cuda(Arc::new(CudaDevice::open(ordinal)?)),
        })
    }

    /// A new CPU interpreter device with its own memory.
    pub fn cpu() -> Device {
        Device {
            backend: Backend::Cpu(Arc::new(CpuDevice::new())),
        }
    }

    /// Whether this is a CUDA device rather than the CPU interpreter.
    pub fn is_gpu(&self) -> bool {
        matches!(self.backend, Backend::Cuda(_))
    }

    /// The GPU's name with its architecture, or `CPU interpreter`.
    pub fn name(&self) -> String {
        match &self.backend {
            Backend::Cuda(device) => format!("{} ({})", device.name, device.arch_name()),
            Backend::Cpu(_) => "CPU interpreter".to_string(),
        }
    }

    /// The GPU's compute capability, e.g. `(9, 0)` for an H100; `None` on
    /// the CPU interpreter, which runs kernels of every architecture.
    pub fn compute_capability(&self) -> Option<(u32, u32)> {
        match &self.backend {
            Backend::Cuda(device) => Some(device.compute_capability),
            Backend::Cpu(_) => None,
        }
    }

    /// How many programs run at once at full width: the GPU's streaming
    /// multiprocessors, or the interpreter's host threads. Persistent kernels
    /// size their grid by it.
    pub fn multiprocessor_count(&self) -> u32 {
        match &self.backend {
            Backend::Cuda(device) => device.multiprocessor_count,
            Backend::Cpu(_) => tlx_core::interp::default_threads() as u32,
        }
    }

    /// Waits for every queued launch and copy; reports errors they met.
    pub fn synchronize(&self) -> Result<(), Error> {
        match &self.backend {
            Backend::Cuda(device) => device.synchronize(),
            Backend::Cpu(_) => Ok(()),
        }
    }

    /// Runs `f` and returns how long the work it queued took, in
    /// milliseconds: GPU time between CUDA events, or wall time on the CPU.
    pub fn time(&self, f: impl FnOnce() -> Result<(), Error>) -> Result<f32, Error> {
        let start = self.mark()?;
        f()?;
        let end = self.mark()?;
        start.elapsed_ms(&end)
    }

    /// The point this device's queued work has reached.
    pub(crate) fn mark(&self) -> Result<Mark, Error> {
        let event = match &self.backend {
            Backend::Cuda(device) => Some(device.mark()?),
            Backend::Cpu(_) => None,
        };
        Ok(Mark {
            event,
            at: Instant::now(),
        })
    }

    /// Flushes the L2 cache before a timed launch (nothing on the CPU).
    pub(crate) fn flush_l2(&self) -> Result<(), Error> {
        match &self.backend {
            Backend::Cuda(device) => device.flush_l2(),
            Backend::Cpu(_) => Ok(()),
        }
    }

    /// The cudarc context, to mix tlx kernels with cudarc (e.g. cuBLAS).
    pub fn cuda_context(&self) -> Result<&Arc<CudaContext>, Error> {
        match &self.backend {
            Backend::Cuda(device) => Ok(&device.ctx),
            Backend::Cpu(_) => Err(Error::NeedsGpu("a CUDA context")),
        }
    }

    /// The stream every launch and copy of this device goes to.
    pub fn cuda_stream(&self) -> Result<&Arc<CudaStream>, Error> {
        match &self.backend {
            Backend::Cuda(device) => Ok(&device.stream),
            Backend::Cpu(_) => Err(Error::NeedsGpu("a CUDA stream")),
        }
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    pub(crate) fn id(&self) -> DeviceId {
        match &self.backend {
            Backend::Cuda(device) => DeviceId::Cuda(device.ordinal),
            Backend::Cpu(device) => DeviceId::Cpu(device.instance),
        }
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

/// A point in a device's work: a CUDA event recorded on its stream, or on
/// the CPU, where launches finish before they return, the wall clock.
pub(crate) struct Mark {
    event: Option<CudaEvent>,
    at: Instant,
}

impl Mark {
    /// Milliseconds from this mark to the later `end`, waiting for `end`'s
    /// work: GPU time between the events where both have one.
    pub(crate) fn elapsed_ms(&self, end: &Mark) -> Result<f32, Error> {
        match (&self.event, &end.event) {
            (Some(start), Some(end)) => CudaDevice::elapsed_ms(start, end),
            _ => Ok(end.at.duration_since(self.at).as_secs_f32() * 1000.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::probe;

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

    #[test]
    fn devices_and_buffers_can_cross_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Device>();
        shareable::<crate::Buffer<f32>>();
        shareable::<crate::BufferView<'static, crate::F8E4M3>>();
    }

    #[test]
    fn env_flags_accept_common_spellings() {
        for on in ["1", "true", "yes", " 1\n"] {
            assert!(is_truthy(on), "{on:?}");
        }
        for off in ["", "0", "false", "no", "2"] {
            assert!(!is_truthy(off), "{off:?}");
        }
        assert!(!env_flag("TLX_TEST_FLAG_THAT_IS_NEVER_SET"));
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
}
