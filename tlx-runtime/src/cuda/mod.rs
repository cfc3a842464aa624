//! The CUDA GPU backend: a context and stream from cudarc, buffers in
//! device memory, kernel modules loaded once per (kernel, configuration), and
//! launches through `cuLaunchKernelEx`. It trusts its input (see
//! [`Backend`]): check.rs and buffer.rs checked it; what it checks itself is
//! what only the GPU knows (its shared memory, the PTX for its architecture).

pub(crate) mod probe;
pub(crate) mod tensor_map;

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::{
    self, CUdevice_attribute, CUevent_flags, CUfunction, CUfunction_attribute, CUmodule,
};
use cudarc::driver::{result, CudaContext, CudaSlice, CudaStream, DevicePtr};

use crate::backend::{Arg, Backend, HeldDuringRun, Launch, Mark};
use crate::spec::{ConfigSpec, KernelSpec};
use crate::value::{DeviceId, PtrTarget};
use crate::{Element, Error, Grid};
use tensor_map::EncodedTensorMap;

/// The held descriptor scratch of a device (see [`CudaDevice::launch`]).
type ScratchLock<'a> = MutexGuard<'a, Option<CudaSlice<u8>>>;

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

pub(crate) struct CudaDevice {
    pub(crate) ctx: Arc<CudaContext>,
    /// Every launch and copy goes to this stream, so they run in program order.
    pub(crate) stream: Arc<CudaStream>,
    ordinal: usize,
    /// The mesh rank this device is, when several share the GPU.
    rank: Option<usize>,
    /// The mesh's held launches, for a rank of a mesh.
    hold: Option<Arc<HeldLaunches>>,
    name: String,
    compute_capability: (u32, u32),
    max_shared_optin: u32,
    multiprocessor_count: u32,
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
        Self::open_as(ordinal, None)
    }

    /// GPU `ordinal` as a rank of a mesh whose launches `hold` keeps during
    /// its runs; `shared_rank` (the rank) when the mesh's ranks share the
    /// GPU, each then with a stream of its own so their kernels run at once.
    pub(crate) fn open_rank(
        ordinal: usize,
        shared_rank: Option<usize>,
        hold: &Arc<HeldLaunches>,
    ) -> Result<CudaDevice, Error> {
        Ok(CudaDevice {
            hold: Some(hold.clone()),
            ..Self::open_as(ordinal, shared_rank)?
        })
    }

    fn open_as(ordinal: usize, rank: Option<usize>) -> Result<CudaDevice, Error> {
        probe::driver_library().map_err(Error::NoGpu)?;
        // The probe makes cudarc's panics unreachable; the guard keeps a
        // driver that still surprises it from taking the program down.
        catch_unwind(AssertUnwindSafe(|| Self::open_with_driver(ordinal, rank))).unwrap_or_else(
            |_| {
                Err(Error::NoGpu(
                    "the CUDA bindings could not use the installed driver".to_string(),
                ))
            },
        )
    }

    /// How many CUDA devices the driver sees: 0 without a usable driver.
    pub(crate) fn count() -> usize {
        if probe::driver_library().is_err() {
            return 0;
        }
        catch_unwind(CudaContext::device_count)
            .ok()
            .and_then(Result::ok)
            .map_or(0, |n| n.max(0) as usize)
    }

    fn open_with_driver(ordinal: usize, rank: Option<usize>) -> Result<CudaDevice, Error> {
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoGpu(format!("the CUDA driver did not start ({:?})", e.0)))?;
        let count = count.max(0) as usize;
        if count == 0 {
            return Err(Error::NoGpu("the CUDA driver sees no device".to_string()));
        }
        if ordinal >= count {
            return Err(Error::NoSuchDevice {
                index: ordinal,
                count,
            });
        }
        let ctx =
            CudaContext::new(ordinal).map_err(|e| Error::cuda("cuDevicePrimaryCtxRetain", e))?;
        let stream = match rank {
            None => ctx.default_stream(),
            Some(_) => ctx
                .new_stream()
                .map_err(|e| Error::cuda("cuStreamCreate", e))?,
        };
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
            rank,
            hold: None,
            name,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
            max_shared_optin: max_shared_optin.max(0) as u32,
            multiprocessor_count: multiprocessor_count.max(1) as u32,
            functions: Mutex::new(HashMap::new()),
            scratch: Mutex::new(None),
            l2_flush: Mutex::new(None),
        })
    }

    /// Lets kernels on this device read and write `peer`'s memory through
    /// its addresses (a mesh's ranks on different GPUs); an error naming
    /// both when the hardware cannot.
    pub(crate) fn enable_peer_access(&self, peer: &CudaDevice) -> Result<(), Error> {
        if peer.ordinal == self.ordinal {
            return Ok(());
        }
        let no_peer = || Error::NoPeerAccess {
            from: self.ordinal,
            to: peer.ordinal,
        };
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::cuda("cuCtxSetCurrent", e))?;
        let mut can = 0;
        // SAFETY: both are devices the driver listed; `can` outlives the call.
        unsafe {
            cudarc::driver::sys::cuDeviceCanAccessPeer(
                &mut can,
                self.ctx.cu_device(),
                peer.ctx.cu_device(),
            )
        }
        .result()
        .map_err(|e| Error::cuda("cuDeviceCanAccessPeer", e))?;
        if can == 0 {
            return Err(no_peer());
        }
        // SAFETY: this context is current; the peer's is a live primary context.
        let enabled = unsafe { cudarc::driver::sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) };
        match enabled {
            cudarc::driver::sys::CUresult::CUDA_SUCCESS
            | cudarc::driver::sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            other => Err(Error::cuda(
                "cuCtxEnablePeerAccess",
                cudarc::driver::DriverError(other),
            )),
        }
    }

    fn arch_name(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("sm_{major}{minor}")
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
                device: self.name(),
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

/// A buffer in device memory: at least one element, so that empty buffers
/// still have an address.
pub(crate) struct CudaMemory<T> {
    pub(crate) slice: CudaSlice<T>,
    address: u64,
}

/// A kernel parameter's slot: an 8-byte word for a pointer or a scalar (the
/// driver reads the parameter's own size from its start, and the low bytes
/// come first), or an encoded descriptor in its 64-byte aligned box.
enum Slot {
    Word(u64),
    TensorMap(Box<EncodedTensorMap>),
}

impl Backend for CudaDevice {
    type Memory<T: Element> = CudaMemory<T>;
    /// A device address.
    type Ptr = u64;
    const RUNS_PTX: bool = true;

    fn id(&self) -> DeviceId {
        DeviceId::Cuda {
            ordinal: self.ordinal,
            rank: self.rank,
        }
    }

    fn name(&self) -> String {
        format!("{} ({})", self.name, self.arch_name())
    }

    fn compute_capability(&self) -> Option<(u32, u32)> {
        Some(self.compute_capability)
    }

    /// The streaming multiprocessors.
    fn multiprocessor_count(&self) -> u32 {
        self.multiprocessor_count
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<CudaMemory<T>, Error> {
        // SAFETY: every bit pattern is a valid `T` (`Element` is plain data).
        let slice = unsafe { self.stream.alloc::<T>(len.max(1)) }
            .map_err(|e| Error::cuda("cuMemAllocAsync", e))?;
        let address = slice.device_ptr(&self.stream).0;
        Ok(CudaMemory { slice, address })
    }

    /// Nothing: the slice frees itself when dropped.
    fn free<T: Element>(&self, _memory: &CudaMemory<T>) {}

    fn fill_zeros<T: Element>(&self, memory: &mut CudaMemory<T>) -> Result<(), Error> {
        self.stream
            .memset_zeros(&mut memory.slice)
            .map_err(|e| Error::cuda("cuMemsetD8Async", e))
    }

    fn upload<T: Element>(&self, memory: &mut CudaMemory<T>, data: &[T]) -> Result<(), Error> {
        self.stream
            .memcpy_htod(data, &mut memory.slice)
            .map_err(|e| Error::cuda("cuMemcpyHtoDAsync", e))
    }

    /// Queued on the stream.
    fn copy<T: Element>(
        &self,
        to: &mut CudaMemory<T>,
        from: &CudaMemory<T>,
        _len: usize,
    ) -> Result<(), Error> {
        self.stream
            .memcpy_dtod(&from.slice, &mut to.slice)
            .map_err(|e| Error::cuda("cuMemcpyDtoDAsync", e))
    }

    fn download<T: Element>(
        &self,
        memory: &CudaMemory<T>,
        _len: usize,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), Error> {
        let view = memory.slice.slice(offset..offset + out.len());
        self.stream
            .memcpy_dtoh(&view, out)
            .map_err(|e| Error::cuda("cuMemcpyDtoHAsync", e))?;
        self.synchronize()
    }

    fn target<T: Element>(&self, memory: &CudaMemory<T>, offset: usize) -> PtrTarget {
        PtrTarget::Cuda {
            ordinal: self.ordinal,
            rank: self.rank,
            // In bounds of the allocation, so no overflow.
            address: memory.address + (offset * std::mem::size_of::<T>()) as u64,
        }
    }

    fn pointer(target: PtrTarget) -> Option<u64> {
        match target {
            PtrTarget::Cuda { address, .. } => Some(address),
            PtrTarget::Cpu { .. } => None,
        }
    }

    /// Queues the kernel on the device's stream, or, while this device's
    /// mesh runs, holds it until every rank's kernel is ready (see
    /// [`HeldLaunches`]).
    fn launch(&self, launch: &Launch, args: &[Arg<'_, u64>]) -> Result<(), Error> {
        let function = self.function(launch.spec, launch.config, launch.config_spec)?;
        // Descriptors are encoded for the block and swizzle this
        // configuration was compiled with.
        let mut slots = Vec::with_capacity(args.len() + 1);
        for arg in args {
            slots.push(match *arg {
                Arg::Scalar(s) => Slot::Word(s.bits),
                Arg::Ptr(address) => Slot::Word(address),
                Arg::TensorDesc { at, desc, block } => {
                    Slot::TensorMap(Box::new(desc.tiled(at, &block).encode_on(&self.ctx)?))
                }
            });
        }
        // The scratch pointer goes after every other argument.
        // The lock is held until the launch is queued: a launch with a larger
        // grid that replaced the buffer in between would free it under this one.
        // (A held launch is its rank's only one in the run.)
        let (scratch_lock, scratch) = match launch.config_spec.global_scratch_bytes {
            0 => (None, None),
            per_program => {
                let (lock, address) =
                    self.scratch_address(launch.spec.name, launch.grid, per_program)?;
                (Some(lock), Some(address))
            }
        };
        slots.extend(scratch.map(Slot::Word));
        let ready = ReadyLaunch {
            function,
            slots,
            grid: launch.grid,
            config: launch.config_spec,
            stream: self.stream.clone(),
        };
        let ready = match &self.hold {
            Some(hold) => match hold.try_hold(ready) {
                Ok(()) => return Ok(()),
                Err(alone) => alone,
            },
            None => ready,
        };
        let queued = ready.enqueue();
        drop(scratch_lock);
        queued
    }

    fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(|e| Error::cuda("cuStreamSynchronize", e))
    }

    /// An event recorded on the stream.
    fn mark(&self) -> Result<Mark, Error> {
        let event = self
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| Error::cuda("cuEventCreate", e))?;
        event
            .record(&self.stream)
            .map_err(|e| Error::cuda("cuEventRecord", e))?;
        Ok(Mark::now(Some(event)))
    }

    /// GPU time between the events where both marks have one.
    fn elapsed_ms(&self, start: &Mark, end: &Mark) -> Result<f32, Error> {
        let (Some(start_event), Some(end_event)) = (&start.event, &end.event) else {
            return Ok(start.wall_ms(end));
        };
        end_event
            .synchronize()
            .map_err(|e| Error::cuda("cuEventSynchronize", e))?;
        start_event
            .elapsed_ms(end_event)
            .map_err(|e| Error::cuda("cuEventElapsedTime", e))
    }

    /// Evicts the L2 cache's contents by writing a buffer twice its size
    /// (queued on the stream), so that a timed launch after it starts cold,
    /// as one in an application does.
    fn flush_l2(&self) -> Result<(), Error> {
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
}

/// A launch with everything it needs (its module loaded, its arguments
/// marshalled), ready to queue.
pub(crate) struct ReadyLaunch {
    function: Arc<LoadedFunction>,
    slots: Vec<Slot>,
    grid: Grid,
    config: &'static ConfigSpec,
    stream: Arc<CudaStream>,
}

impl ReadyLaunch {
    fn enqueue(mut self) -> Result<(), Error> {
        let mut params: Vec<*mut c_void> = self
            .slots
            .iter_mut()
            .map(|slot| match slot {
                Slot::Word(word) => (word as *mut u64).cast::<c_void>(),
                Slot::TensorMap(map) => (&mut **map as *mut EncodedTensorMap).cast::<c_void>(),
            })
            .collect();
        self.stream
            .context()
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
        let config = self.config;
        let launch = sys::CUlaunchConfig {
            gridDimX: self.grid.x,
            gridDimY: self.grid.y,
            gridDimZ: self.grid.z,
            blockDimX: 32 * config.num_warps,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: config.shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: u32::from(config.launch_pdl),
        };
        // SAFETY: the function belongs to the stream's context; `params`
        // holds one pointer per kernel parameter, each to a slot at least as
        // large as the parameter, alive until the call returns (the driver
        // copies them); `launch` and the attribute it points at live as long.
        let status = unsafe {
            sys::cuLaunchKernelEx(
                &launch,
                self.function.function,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        status
            .result()
            .map_err(|e| Error::cuda("cuLaunchKernelEx", e))
    }
}

/// The launches the ranks of a mesh on GPUs make during a run, held until
/// all are ready and then queued together: loading a rank's module while a
/// peer's kernel already waits for it may wait for that kernel (the driver
/// synchronizes some loads and allocations with the device), which never
/// ends.
pub(crate) type HeldLaunches = HeldDuringRun<ReadyLaunch>;

impl HeldLaunches {
    /// Calls `launch_all`, which launches on the ranks, then queues what
    /// they launched, each on its rank's stream.
    pub(crate) fn run(&self, launch_all: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
        self.collect(launch_all)?
            .into_iter()
            .try_for_each(ReadyLaunch::enqueue)
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
