//! The CPU interpreter backend: host memory for buffers, and launches run
//! synchronously by the IR interpreter, from the IR text each kernel embeds;
//! the ranks of a mesh share one memory and a [`LaunchGroup`] that holds
//! their launches until all can run as one schedule. It trusts its input
//! (see [`Backend`]): check.rs and buffer.rs checked it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tlx_core::interp::{self, ArgValue, BufferId, HostMemory, InterpOptions, Schedule};
use tlx_core::ir::{self, Kernel};

use crate::backend::{Arg, Backend, HeldDuringRun, Launch, Mark};
use crate::element::{as_bytes, as_bytes_mut};
use crate::env::env_flag;
use crate::spec::{extra_params, param_name, KernelSpec};
use crate::value::{DeviceId, PtrTarget};
use crate::{Element, Error};

/// Each CPU device has its own memory; buffers remember which one by this id.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

pub(crate) struct CpuDevice {
    instance: u64,
    memory: Arc<HostMemory>,
    /// The mesh this device is a rank of, if any, with the rank.
    group: Option<(Arc<LaunchGroup>, usize)>,
    /// Parsed IR per (kernel spec address, configuration index).
    kernels: Mutex<HashMap<(usize, usize), Arc<Kernel>>>,
    /// The last kernel each buffer was passed to, and as which parameter,
    /// for messages about what wrote (or did not write) it.
    last_use: Mutex<HashMap<u32, (&'static str, &'static str)>>,
}

/// A pointer into a CPU device's memory: a buffer and an element in it.
#[derive(Copy, Clone)]
pub(crate) struct CpuPtr {
    buffer: BufferId,
    offset_elems: usize,
}

impl CpuDevice {
    pub(crate) fn new() -> CpuDevice {
        CpuDevice {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            memory: Arc::new(HostMemory::new()),
            group: None,
            kernels: Mutex::new(HashMap::new()),
            last_use: Mutex::new(HashMap::new()),
        }
    }

    /// Rank `rank` of the mesh whose ranks share `group`'s memory.
    pub(crate) fn rank_of(group: &Arc<LaunchGroup>, rank: usize) -> CpuDevice {
        CpuDevice {
            memory: group.memory.clone(),
            group: Some((group.clone(), rank)),
            ..CpuDevice::new()
        }
    }

    /// The last kernel `buffer` was passed to, and as which parameter.
    fn last_use(&self, buffer: BufferId) -> Option<(&'static str, &'static str)> {
        let uses = self.last_use.lock().unwrap_or_else(PoisonError::into_inner);
        uses.get(&buffer.0).copied()
    }

    /// The interpreter's value for argument `index`, remembering which
    /// kernel and parameter each buffer was last passed to.
    fn arg_value(
        &self,
        spec: &'static KernelSpec,
        index: usize,
        arg: &Arg<'_, CpuPtr>,
    ) -> ArgValue {
        if let Arg::Ptr(at) | Arg::TensorDesc { at, .. } = arg {
            let mut uses = self.last_use.lock().unwrap_or_else(PoisonError::into_inner);
            uses.insert(at.buffer.0, (spec.name, param_name(spec, index)));
        }
        match *arg {
            Arg::Scalar(s) => ArgValue::Scalar(s.ty, s.bits),
            Arg::Ptr(at) => ArgValue::Ptr {
                buffer: at.buffer,
                offset_elems: at.offset_elems as i64,
            },
            Arg::TensorDesc { at, desc, .. } => {
                let mut shape = [0i64; 5];
                let mut strides = [0i64; 5];
                for i in 0..desc.rank() {
                    shape[i] = desc.shape[i] as i64;
                    strides[i] = desc.strides[i] as i64;
                }
                ArgValue::TensorDesc {
                    buffer: at.buffer,
                    offset_elems: at.offset_elems as i64,
                    elem: desc.elem,
                    rank: desc.rank,
                    shape,
                    strides,
                }
            }
        }
    }

    /// The configuration's IR, parsed on first use.
    fn kernel(&self, launch: &Launch) -> Result<Arc<Kernel>, Error> {
        let Launch {
            spec,
            config,
            config_spec,
            ..
        } = *launch;
        let key = (spec as *const KernelSpec as usize, config);
        let mut cache = self.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kernel) = cache.get(&key) {
            return Ok(kernel.clone());
        }
        let kernel = ir::parse(config_spec.ir).map_err(|source| Error::BadIr {
            kernel: spec.name,
            source,
        })?;
        let kinds: Vec<_> = kernel.params.iter().map(|p| p.kind).collect();
        // Descriptor blocks may depend on the configuration's constants.
        let spec_kinds = config_spec.params;
        let expected = spec_kinds.len()
            + if config_spec.bounds.is_some() {
                extra_params(spec_kinds)
            } else {
                0
            };
        if kinds.len() != expected || kinds[..spec_kinds.len().min(kinds.len())] != *spec_kinds {
            return Err(Error::InvalidConfig {
                kernel: spec.name,
                reason: format!(
                    "its embedded IR takes parameters {kinds:?}, its spec {spec_kinds:?}; rebuild the crate"
                ),
            });
        }
        let kernel = Arc::new(kernel);
        cache.insert(key, kernel.clone());
        Ok(kernel)
    }
}

fn host_error(e: impl std::fmt::Display) -> Error {
    Error::HostMemory(e.to_string())
}

/// Bytes in `count` elements of `T`: within an allocation, whose size in
/// bytes `Device::alloc` checked fits.
fn bytes<T: Element>(count: usize) -> usize {
    count * std::mem::size_of::<T>()
}

impl Backend for CpuDevice {
    type Memory<T: Element> = BufferId;
    type Ptr = CpuPtr;
    const RUNS_PTX: bool = false;

    fn id(&self) -> DeviceId {
        DeviceId::Cpu(self.instance)
    }

    fn name(&self) -> String {
        "CPU interpreter".to_string()
    }

    /// None: the interpreter runs kernels of every architecture.
    fn compute_capability(&self) -> Option<(u32, u32)> {
        None
    }

    /// The interpreter's host threads.
    fn multiprocessor_count(&self) -> u32 {
        interp::default_threads() as u32
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<BufferId, Error> {
        Ok(self.memory.alloc(bytes::<T>(len)))
    }

    fn free<T: Element>(&self, memory: &BufferId) {
        self.memory.free(*memory);
    }

    fn fill_zeros<T: Element>(&self, memory: &mut BufferId) -> Result<(), Error> {
        self.memory.fill(*memory, 0).map_err(host_error)
    }

    fn upload<T: Element>(&self, memory: &mut BufferId, data: &[T]) -> Result<(), Error> {
        self.memory
            .write(*memory, 0, as_bytes(data))
            .map_err(host_error)
    }

    fn copy<T: Element>(
        &self,
        to: &mut BufferId,
        from: &BufferId,
        len: usize,
    ) -> Result<(), Error> {
        let mut data = vec![0u8; bytes::<T>(len)];
        self.memory.read(*from, 0, &mut data).map_err(host_error)?;
        self.memory.write(*to, 0, &data).map_err(host_error)
    }

    /// With `TLX_CHECK_UNINIT=1`, refuses to read memory nothing wrote.
    fn download<T: Element>(
        &self,
        memory: &BufferId,
        len: usize,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), Error> {
        let start = bytes::<T>(offset);
        if env_flag("TLX_CHECK_UNINIT") {
            let unwritten = self
                .memory
                .first_unwritten(*memory, start, bytes::<T>(out.len()))
                .map_err(host_error)?;
            if let Some(byte) = unwritten {
                return Err(Error::UnwrittenDownload {
                    element: offset + byte / std::mem::size_of::<T>(),
                    len,
                    last_use: self.last_use(*memory),
                });
            }
        }
        self.memory
            .read(*memory, start, as_bytes_mut(out))
            .map_err(host_error)
    }

    fn target<T: Element>(&self, memory: &BufferId, offset: usize) -> PtrTarget {
        PtrTarget::Cpu {
            device: self.instance,
            buffer: memory.0,
            offset_elems: offset,
        }
    }

    fn pointer(target: PtrTarget) -> Option<CpuPtr> {
        match target {
            PtrTarget::Cpu {
                buffer,
                offset_elems,
                ..
            } => Some(CpuPtr {
                buffer: BufferId(buffer),
                offset_elems,
            }),
            PtrTarget::Cuda { .. } => None,
        }
    }

    /// Runs the kernel to completion, or, while this device's mesh runs,
    /// holds it until every rank has launched.
    fn launch(&self, launch: &Launch, args: &[Arg<'_, CpuPtr>]) -> Result<(), Error> {
        let kernel = self.kernel(launch)?;
        let values: Vec<ArgValue> = args
            .iter()
            .enumerate()
            .map(|(index, arg)| self.arg_value(launch.spec, index, arg))
            .collect();
        let (kernel, values) = match &self.group {
            Some((group, rank)) => {
                let pending = PendingLaunch {
                    kernel,
                    name: launch.spec.name,
                    grid: launch.grid.dims(),
                    args: values,
                    rank: *rank,
                };
                match group.held.try_hold(pending) {
                    Ok(()) => return Ok(()),
                    // Outside a run of its mesh, a rank runs its launches alone.
                    Err(alone) => (alone.kernel, alone.args),
                }
            }
            None => (kernel, values),
        };
        let mut options = interp_options()?;
        if crate::trace::recording(launch.spec.name) {
            options.trace = Some(Default::default());
        }
        let ran = interp::run_kernel(&kernel, launch.grid.dims(), &values, &self.memory, &options)
            .map_err(|e| Error::Interpreter {
                kernel: launch.spec.name,
                message: e.to_string(),
            });
        // A launch that failed is traced too: its timeline shows where.
        if let Some(trace) = &options.trace {
            crate::trace::record(crate::trace::interpreted(launch.spec.name, trace))?;
        }
        ran
    }

    /// Nothing to wait for: launches and copies finish before they return.
    fn synchronize(&self) -> Result<(), Error> {
        Ok(())
    }

    fn mark(&self) -> Result<Mark, Error> {
        Ok(Mark::now(None))
    }

    /// Nothing to flush.
    fn flush_l2(&self) -> Result<(), Error> {
        Ok(())
    }
}

/// The interpreter's options from the environment: `TLX_SCHEDULE=random:<seed>`
/// interleaves a program's tasks from a seeded random choice instead of
/// round robin; `TLX_CHECK_UNINIT=1` reports reads of unwritten memory.
fn interp_options() -> Result<InterpOptions, Error> {
    let schedule = match std::env::var("TLX_SCHEDULE") {
        Ok(text) => text.parse().map_err(|e| Error::InvalidEnv {
            var: "TLX_SCHEDULE",
            message: format!("{e}"),
        })?,
        Err(_) => Schedule::default(),
    };
    // 0 threads: one per available core.
    Ok(InterpOptions::new(0, env_flag("TLX_CHECK_UNINIT")).with_schedule(schedule))
}

/// A launch a rank of a mesh made while the mesh runs, held until every
/// rank has made its own.
pub(crate) struct PendingLaunch {
    kernel: Arc<Kernel>,
    name: &'static str,
    grid: [u32; 3],
    args: Vec<ArgValue>,
    rank: usize,
}

/// The memory the ranks of an interpreted mesh share, and the launches they
/// make during a run of the mesh, which then run as one schedule (so a
/// rank's wait on a peer's signal can be met).
pub(crate) struct LaunchGroup {
    memory: Arc<HostMemory>,
    held: HeldDuringRun<PendingLaunch>,
}

impl LaunchGroup {
    pub(crate) fn new() -> Arc<LaunchGroup> {
        Arc::new(LaunchGroup {
            memory: Arc::new(HostMemory::new()),
            held: HeldDuringRun::new(),
        })
    }

    /// Calls `launch_all`, which launches on the ranks, then runs what they
    /// launched together: one launch per rank of `ranks`.
    pub(crate) fn run(
        &self,
        ranks: usize,
        launch_all: impl FnOnce() -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut held = self.held.collect(launch_all)?;
        for rank in 0..ranks {
            let launched = held.iter().filter(|l| l.rank == rank).count();
            if launched != 1 {
                return Err(Error::MeshLaunches { rank, launched });
            }
        }
        held.sort_by_key(|l| l.rank);
        run_launches(&held, &self.memory)
    }
}

/// Runs `launches` as one schedule in `memory`; an error names the kernels.
fn run_launches(launches: &[PendingLaunch], memory: &HostMemory) -> Result<(), Error> {
    let options = interp_options()?;
    let together: Vec<interp::Launch<'_>> = launches
        .iter()
        .map(|l| interp::Launch {
            kernel: &l.kernel,
            grid: l.grid,
            args: &l.args,
        })
        .collect();
    interp::run_together(&together, memory, &options).map_err(|e| Error::Interpreter {
        kernel: launches.first().map_or("", |l| l.name),
        message: e.to_string(),
    })
}
