//! The CUDA device: a context and stream from cudarc, kernel modules loaded
//! once per (kernel, configuration), and launches through `cuLaunchKernelEx`.

pub(crate) mod probe;
pub(crate) mod tensor_map;

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::{
    self, CUdevice_attribute, CUevent_flags, CUfunction, CUfunction_attribute, CUmodule,
};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use crate::arg::{KernelArg, PtrTarget};
use crate::spec::{ConfigSpec, KernelSpec};
use crate::{Error, Grid};
use tensor_map::EncodedTensorMap;
use tlx_core::ir::ParamKind;

/// The held descriptor scratch of a device (see [`CudaDevice::launch`]).
type ScratchLock<'a> = MutexGuard<'a, Option<CudaSlice<u8>>>;

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

pub(crate) struct CudaDevice {
    pub(crate) ctx: Arc<CudaContext>,
    /// Every launch and copy goes to this stream, so they run in program order.
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) ordinal: usize,
    pub(crate) name: String,
    pub(crate) compute_capability: (u32, u32),
    max_shared_optin: u32,
    pub(crate) multiprocessor_count: u32,
    /// Loaded kernels per (kernel spec address, configuration index).
    functions: Mutex<HashMap<(usize, usize), Arc<LoadedFunction>>>,
    /// The global scratch of kernels that make tensor descriptors, grown to
    /// the largest launch so far; launches on the one stream take turns.
    scratch: Mutex<Option<CudaSlice<u8>>>,
    /// The buffer [`CudaDevice::flush_l2`] writes, made on first use.
    l2_flush: Mutex<Option<CudaSlice<u8>>>,
}

impl CudaDevice {
    pub(crate) fn open(ordinal: usize) -> Result<CudaDevice, Error> {
        probe::driver_library().map_err(Error::NoGpu)?;
        // The probe makes cudarc's panics unreachable; the guard keeps a
        // driver that still surprises it from taking the program down.
        catch_unwind(AssertUnwindSafe(|| Self::open_with_driver(ordinal))).unwrap_or_else(|_| {
            Err(Error::NoGpu(
                "the CUDA bindings could not use the installed driver".to_string(),
            ))
        })
    }

    fn open_with_driver(ordinal: usize) -> Result<CudaDevice, Error> {
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoGpu(format!("the CUDA driver did not start ({:?})", e.0)))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoGpu(format!(
                "CUDA device {ordinal} was asked for, but the driver sees {count}"
            )));
        }
        let ctx =
            CudaContext::new(ordinal).map_err(|e| Error::cuda("cuDevicePrimaryCtxRetain", e))?;
        let stream = ctx.default_stream();
        let name = ctx.name().map_err(|e| Error::cuda("cuDeviceGetName", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| Error::cuda("cuDeviceGetAttribute", e))?;
        let max_shared_optin = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|e| Error::cuda("cuDeviceGetAttribute", e))?;
        let multiprocessor_count = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| Error::cuda("cuDeviceGetAttribute", e))?;
        Ok(CudaDevice {
            ctx,
            stream,
            ordinal,
            name,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
            max_shared_optin: max_shared_optin.max(0) as u32,
            multiprocessor_count: multiprocessor_count.max(1) as u32,
            functions: Mutex::new(HashMap::new()),
            scratch: Mutex::new(None),
            l2_flush: Mutex::new(None),
        })
    }

    pub(crate) fn arch_name(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("sm_{major}{minor}")
    }

    pub(crate) fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(|e| Error::cuda("cuStreamSynchronize", e))
    }

    /// An event recorded on the stream: the point its queued work has reached.
    pub(crate) fn mark(&self) -> Result<CudaEvent, Error> {
        let event = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| Error::cuda("cuEventCreate", e))?;
        event
            .record(&self.stream)
            .map_err(|e| Error::cuda("cuEventRecord", e))?;
        Ok(event)
    }

    /// Milliseconds of GPU time from `start` to `end`, once `end` is reached.
    pub(crate) fn elapsed_ms(start: &CudaEvent, end: &CudaEvent) -> Result<f32, Error> {
        end.synchronize()
            .map_err(|e| Error::cuda("cuEventSynchronize", e))?;
        start
            .elapsed_ms(end)
            .map_err(|e| Error::cuda("cuEventElapsedTime", e))
    }

    /// Queues the kernel on the device's stream; `args` are already checked.
    pub(crate) fn launch(
        &self,
        spec: &'static KernelSpec,
        config_index: usize,
        config: &ConfigSpec,
        grid: Grid,
        args: &[KernelArg<'_>],
    ) -> Result<(), Error> {
        let function = self.function(spec, config_index, config)?;
        // One 8-byte slot per pointer or scalar parameter: the driver reads
        // the parameter's own size from the start of its slot, and the low
        // bytes come first. Descriptors are encoded for the block and swizzle
        // this configuration was compiled with, each in a 64-byte aligned box.
        let mut slots: Vec<u64> = Vec::with_capacity(args.len());
        let mut maps: Vec<Box<EncodedTensorMap>> = Vec::new();
        for (index, arg) in args.iter().enumerate() {
            let param = crate::bounds::param_name(spec, index);
            let wrong_device = |target: PtrTarget| Error::WrongDevice {
                kernel: spec.name,
                param,
                buffer_device: target.device().to_string(),
                device: format!("CUDA device {}", self.ordinal),
            };
            match *arg {
                KernelArg::Scalar(s) => slots.push(s.bits),
                KernelArg::Ptr(p) => match p.target {
                    PtrTarget::Cuda { address, .. } => slots.push(address),
                    PtrTarget::Cpu { .. } => return Err(wrong_device(p.target)),
                },
                KernelArg::TensorDesc(d) => {
                    let PtrTarget::Cuda { address, .. } = d.target else {
                        return Err(wrong_device(d.target));
                    };
                    let Some(ParamKind::TensorDesc(block)) = config.params.get(index) else {
                        return Err(Error::InvalidConfig {
                            kernel: spec.name,
                            reason: format!(
                                "parameter `{param}` is not a descriptor in this configuration"
                            ),
                        });
                    };
                    slots.push(0);
                    maps.push(Box::new(d.tiled(address, block).encode_on(&self.ctx)?));
                }
            }
        }
        // Descriptors take their boxes in order; the rest their slots.
        let mut next_map = maps.iter_mut();
        let params: Vec<*mut c_void> = slots
            .iter_mut()
            .zip(args)
            .map(|(slot, arg)| match (arg, &mut next_map) {
                (KernelArg::TensorDesc(_), maps) => maps
                    .next()
                    .map(|map| (&mut **map as *mut EncodedTensorMap).cast::<c_void>()),
                _ => Some((slot as *mut u64).cast::<c_void>()),
            })
            .collect::<Option<_>>()
            .ok_or(Error::InvalidConfig {
                kernel: spec.name,
                reason: "descriptor arguments and encodings out of step".into(),
            })?;
        let mut params = params;
        // The scratch pointer goes after every other argument.
        // The lock is held until the launch is queued: a launch with a larger
        // grid that replaced the buffer in between would free it under this one.
        let (_scratch_lock, mut scratch) = match config.global_scratch_bytes {
            0 => (None, None),
            per_program => {
                let (lock, address) = self.scratch_address(spec.name, grid, per_program)?;
                (Some(lock), Some(address))
            }
        };
        if let Some(address) = scratch.as_mut() {
            params.push((address as *mut u64).cast::<c_void>());
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        // A programmatic dependent of the kernel before it on the stream
        // (`launch_pdl`) may start once every program of that one has run
        // `griddepcontrol.launch_dependents` (or exited); any other launch
        // passes no attribute.
        let mut attribute = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            // SAFETY: a plain-data union; every field is an integer array.
            value: unsafe { std::mem::zeroed() },
        };
        attribute.value.programmaticStreamSerializationAllowed = 1;
        let launch = sys::CUlaunchConfig {
            gridDimX: grid.x,
            gridDimY: grid.y,
            gridDimZ: grid.z,
            blockDimX: 32 * config.num_warps,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: config.shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: u32::from(config.launch_pdl),
        };
        // SAFETY: the function belongs to this context; `params` holds one
        // pointer per kernel parameter, each to a slot at least as large as
        // the parameter, alive until the call returns (the driver copies
        // them); `launch` and the attribute it points at live as long.
        let status = unsafe {
            sys::cuLaunchKernelEx(
                &launch,
                function.function,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        status
            .result()
            .map_err(|e| Error::cuda("cuLaunchKernelEx", e))
    }

    /// Evicts the L2 cache's contents by writing a buffer twice its size
    /// (queued on the stream), so that a timed launch after it starts cold,
    /// as one in an application does.
    pub(crate) fn flush_l2(&self) -> Result<(), Error> {
        let mut flush = self.l2_flush.lock().unwrap_or_else(PoisonError::into_inner);
        if flush.is_none() {
            let l2 = self
                .ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
                .map_err(|e| Error::cuda("cuDeviceGetAttribute", e))?;
            let bytes = (2 * l2.max(1 << 20)) as usize;
            // SAFETY: the buffer is only ever written.
            let buffer = unsafe { self.stream.alloc::<u8>(bytes) }
                .map_err(|e| Error::cuda("cuMemAllocAsync", e))?;
            *flush = Some(buffer);
        }
        if let Some(buffer) = flush.as_mut() {
            self.stream
                .memset_zeros(buffer)
                .map_err(|e| Error::cuda("cuMemsetD8Async", e))?;
        }
        Ok(())
    }

    /// A copy of `len` bytes of device memory at `address` (queued).
    pub(crate) fn save_bytes(&self, address: u64, len: u64) -> Result<CudaSlice<u8>, Error> {
        // A 64-bit target: device sizes fit in usize.
        let len = len as usize;
        // SAFETY: every byte is written by the copy below before any read.
        let copy = unsafe { self.stream.alloc::<u8>(len.max(1)) }
            .map_err(|e| Error::cuda("cuMemAllocAsync", e))?;
        let to = copy.device_ptr(&self.stream).0;
        self.copy_bytes(to, address, len)?;
        Ok(copy)
    }

    /// Puts a copy [`CudaDevice::save_bytes`] made back at `address` (queued).
    pub(crate) fn restore_bytes(
        &self,
        address: u64,
        saved: &CudaSlice<u8>,
        len: u64,
    ) -> Result<(), Error> {
        let from = saved.device_ptr(&self.stream).0;
        self.copy_bytes(address, from, len as usize)
    }

    fn copy_bytes(&self, to: u64, from: u64, len: usize) -> Result<(), Error> {
        if len == 0 {
            return Ok(());
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        // SAFETY: both ranges are device memory of this context that the
        // caller holds (a buffer it passed, or a copy made here), `len`
        // bytes long, and the copy is ordered on the one stream.
        unsafe { result::memcpy_dtod_async(to, from, len, self.stream.cu_stream()) }
            .map_err(|e| Error::cuda("cuMemcpyDtoDAsync", e))
    }

    /// The device address of a global scratch of `per_program` bytes for
    /// every program of `grid`, allocated (or grown) on the stream, with the
    /// lock that keeps it from being replaced.
    fn scratch_address(
        &self,
        kernel: &'static str,
        grid: Grid,
        per_program: u32,
    ) -> Result<(ScratchLock<'_>, u64), Error> {
        let programs: u64 = grid.dims().iter().map(|&d| u64::from(d)).product();
        let bytes = programs
            .checked_mul(u64::from(per_program))
            .and_then(|b| usize::try_from(b).ok())
            .ok_or(Error::InvalidConfig {
                kernel,
                reason: format!(
                    "its descriptor scratch ({per_program} bytes for each of {programs} programs) \
                     does not fit in memory: launch fewer programs"
                ),
            })?;
        let mut scratch = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        if scratch.as_ref().is_none_or(|s| s.len() < bytes) {
            // SAFETY: the kernel writes each descriptor before reading it.
            let fresh = unsafe { self.stream.alloc::<u8>(bytes) }
                .map_err(|e| Error::cuda("cuMemAllocAsync", e))?;
            *scratch = Some(fresh);
        }
        let slice = scratch.as_ref().ok_or(Error::InvalidConfig {
            kernel,
            reason: "its descriptor scratch was not allocated".into(),
        })?;
        let address = slice.device_ptr(&self.stream).0;
        Ok((scratch, address))
    }

    /// The loaded kernel for a configuration, loading its module on first use.
    fn function(
        &self,
        spec: &'static KernelSpec,
        config_index: usize,
        config: &ConfigSpec,
    ) -> Result<Arc<LoadedFunction>, Error> {
        let key = (spec as *const KernelSpec as usize, config_index);
        let mut cache = self
            .functions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(function) = cache.get(&key) {
            return Ok(function.clone());
        }
        let function = Arc::new(self.load(spec, config)?);
        cache.insert(key, function.clone());
        Ok(function)
    }

    fn load(
        &self,
        spec: &'static KernelSpec,
        config: &ConfigSpec,
    ) -> Result<LoadedFunction, Error> {
        if config.shared_bytes > self.max_shared_optin.max(DEFAULT_SHARED_LIMIT) {
            return Err(Error::SharedMemory {
                kernel: spec.name,
                needed: config.shared_bytes,
                limit: self.max_shared_optin,
                device: format!("{} ({})", self.name, self.arch_name()),
            });
        }
        let Some((_, ptx)) = config
            .ptx
            .iter()
            .find(|(arch, _)| arch.compute_capability() == self.compute_capability)
        else {
            let available: Vec<&str> = config.ptx.iter().map(|(arch, _)| arch.name()).collect();
            return Err(Error::NoMatchingPtx {
                kernel: spec.name,
                available: if available.is_empty() {
                    "no architecture".to_string()
                } else {
                    available.join(", ")
                },
                device_arch: self.arch_name(),
            });
        };
        let invalid = |reason: &str| Error::InvalidConfig {
            kernel: spec.name,
            reason: reason.to_string(),
        };
        let source = CString::new(*ptx).map_err(|_| invalid("its PTX contains a NUL byte"))?;
        let entry = CString::new(spec.name).map_err(|_| invalid("its name contains a NUL byte"))?;
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        // SAFETY: `source` is a NUL-terminated PTX text, alive for the call.
        let module = unsafe { result::module::load_data(source.as_ptr().cast()) }
            .map_err(|e| Error::cuda("cuModuleLoadData", e))?;
        let mut loaded = LoadedFunction {
            module,
            function: std::ptr::null_mut(),
            ctx: self.ctx.clone(),
        };
        // SAFETY: the module was just loaded in this context.
        loaded.function = unsafe { result::module::get_function(module, entry) }
            .map_err(|e| Error::cuda("cuModuleGetFunction", e))?;
        if config.shared_bytes > DEFAULT_SHARED_LIMIT {
            // SAFETY: a valid function of this context; the size is within the opt-in limit.
            unsafe {
                result::function::set_function_attribute(
                    loaded.function,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    config.shared_bytes as i32,
                )
            }
            .map_err(|e| Error::cuda("cuFuncSetAttribute", e))?;
        }
        if config.cluster.iter().product::<u32>() > PORTABLE_CLUSTER {
            // SAFETY: a valid function of this context; the attribute is a flag.
            unsafe {
                result::function::set_function_attribute(
                    loaded.function,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1,
                )
            }
            .map_err(|e| Error::cuda("cuFuncSetAttribute", e))?;
        }
        Ok(loaded)
    }
}

/// The largest cluster every GPU with clusters runs; H100 and H200 allow 16
/// once a kernel opts in.
const PORTABLE_CLUSTER: u32 = 8;

/// A loaded module and its kernel; unloading the module on drop.
struct LoadedFunction {
    module: CUmodule,
    function: CUfunction,
    ctx: Arc<CudaContext>,
}

// SAFETY: module and function handles are plain driver handles, usable from
// any thread once the context is current there (every use binds it first).
unsafe impl Send for LoadedFunction {}
unsafe impl Sync for LoadedFunction {}

impl Drop for LoadedFunction {
    fn drop(&mut self) {
        // Errors here (a context already torn down) leave nothing to clean up.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the module was loaded by this context and is unloaded once.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}
