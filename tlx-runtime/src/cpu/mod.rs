//! The CPU device: host memory for buffers and launches run synchronously
//! by the IR interpreter, from the IR text each kernel embeds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tlx_core::interp::{self, ArgValue, BufferId, HostMemory, InterpOptions, Schedule};
use tlx_core::ir::{self, Kernel};

use crate::arg::{KernelArg, PtrTarget};
use crate::spec::KernelSpec;
use crate::{Error, Grid};

/// Each CPU device has its own memory; buffers remember which one by this id.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

pub(crate) struct CpuDevice {
    pub(crate) instance: u64,
    pub(crate) memory: HostMemory,
    /// Parsed IR per (kernel spec address, configuration index).
    kernels: Mutex<HashMap<(usize, usize), Arc<Kernel>>>,
    /// The last kernel each buffer was passed to, and as which parameter,
    /// for messages about what wrote (or did not write) it.
    last_use: Mutex<HashMap<u32, (&'static str, &'static str)>>,
}

impl CpuDevice {
    pub(crate) fn new() -> CpuDevice {
        CpuDevice {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            memory: HostMemory::new(),
            kernels: Mutex::new(HashMap::new()),
            last_use: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn alloc(&self, bytes: usize) -> BufferId {
        self.memory.alloc(bytes)
    }

    /// Runs the kernel to completion; `args` are already checked against the spec.
    pub(crate) fn launch(
        &self,
        spec: &'static KernelSpec,
        config: usize,
        grid: Grid,
        args: &[KernelArg<'_>],
    ) -> Result<(), Error> {
        let kernel = self.kernel(spec, config)?;
        let values: Vec<ArgValue> = args
            .iter()
            .enumerate()
            .map(|(index, arg)| self.arg_value(spec, crate::bounds::param_name(spec, index), arg))
            .collect::<Result<_, _>>()?;
        // `TLX_SCHEDULE=random:<seed>` interleaves a program's tasks from a
        // seeded random choice instead of round robin.
        let schedule = match std::env::var("TLX_SCHEDULE") {
            Ok(text) => text.parse().map_err(|e| Error::InvalidEnv {
                var: "TLX_SCHEDULE",
                message: format!("{e}"),
            })?,
            Err(_) => Schedule::default(),
        };
        // 0 threads: one per available core.
        let options = InterpOptions::new(0, crate::device::env_flag("TLX_CHECK_UNINIT"))
            .with_schedule(schedule);
        interp::run_kernel(&kernel, grid.dims(), &values, &self.memory, &options).map_err(|e| {
            Error::Interpreter {
                kernel: spec.name,
                message: e.to_string(),
            }
        })
    }

    /// The last kernel `buffer` was passed to, and as which parameter.
    pub(crate) fn last_use(&self, buffer: u32) -> Option<(&'static str, &'static str)> {
        let uses = self.last_use.lock().unwrap_or_else(PoisonError::into_inner);
        uses.get(&buffer).copied()
    }

    fn arg_value(
        &self,
        spec: &'static KernelSpec,
        param: &'static str,
        arg: &KernelArg<'_>,
    ) -> Result<ArgValue, Error> {
        if let KernelArg::Ptr(crate::arg::PtrValue {
            target: PtrTarget::Cpu { buffer, .. },
            ..
        })
        | KernelArg::TensorDesc(crate::desc::TensorDescValue {
            target: PtrTarget::Cpu { buffer, .. },
            ..
        }) = *arg
        {
            let mut uses = self.last_use.lock().unwrap_or_else(PoisonError::into_inner);
            uses.insert(buffer, (spec.name, param));
        }
        match *arg {
            KernelArg::Scalar(s) => Ok(ArgValue::Scalar(s.ty, s.bits)),
            KernelArg::TensorDesc(d) => match d.target {
                PtrTarget::Cpu {
                    buffer,
                    offset_elems,
                    ..
                } => {
                    let mut shape = [0i64; 5];
                    let mut strides = [0i64; 5];
                    for i in 0..d.rank() {
                        shape[i] = d.shape[i] as i64;
                        strides[i] = d.strides[i] as i64;
                    }
                    Ok(ArgValue::TensorDesc {
                        buffer: BufferId(buffer),
                        offset_elems: offset_elems as i64,
                        elem: d.elem,
                        rank: d.rank,
                        shape,
                        strides,
                    })
                }
                PtrTarget::Cuda { .. } => Err(Error::WrongDevice {
                    kernel: spec.name,
                    param,
                    buffer_device: d.target.device().to_string(),
                    device: crate::arg::DeviceId::Cpu(self.instance).to_string(),
                }),
            },
            KernelArg::Ptr(p) => match p.target {
                PtrTarget::Cpu {
                    buffer,
                    offset_elems,
                    ..
                } => Ok(ArgValue::Ptr {
                    buffer: BufferId(buffer),
                    offset_elems: offset_elems as i64,
                }),
                PtrTarget::Cuda { .. } => Err(Error::WrongDevice {
                    kernel: spec.name,
                    param,
                    buffer_device: p.target.device().to_string(),
                    device: crate::arg::DeviceId::Cpu(self.instance).to_string(),
                }),
            },
        }
    }

    /// The configuration's IR, parsed on first use.
    fn kernel(&self, spec: &'static KernelSpec, config: usize) -> Result<Arc<Kernel>, Error> {
        let key = (spec as *const KernelSpec as usize, config);
        let mut cache = self.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kernel) = cache.get(&key) {
            return Ok(kernel.clone());
        }
        let text = spec.configs.get(config).map_or("", |c| c.ir);
        let kernel = ir::parse(text).map_err(|source| Error::BadIr {
            kernel: spec.name,
            source,
        })?;
        let kinds: Vec<_> = kernel.params.iter().map(|p| p.kind).collect();
        // Descriptor blocks may depend on the configuration's constants.
        let spec_kinds = spec.configs.get(config).map_or(&[][..], |c| c.params);
        let checked = spec.configs.get(config).is_some_and(|c| c.bounds.is_some());
        let expected = spec_kinds.len()
            + if checked {
                crate::bounds::extra_params(spec_kinds)
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
