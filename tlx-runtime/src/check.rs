//! Every check of a launch against the kernel's spec and the device, made
//! before a backend sees it: the configuration (index, `num_warps`), the grid
//! and its clusters, the arguments' count, kinds and types, the device that
//! owns each pointer and descriptor, and each descriptor against TMA's rules.
//! What passes comes out as the backend's own [`Arg`]s, which the backends
//! trust (they check nothing of it again).

use tlx_core::ir::ParamKind;

use crate::backend::{Arg, Backend};
use crate::buffer::Buffer;
use crate::grid::Grid;
use crate::spec::{describe_kind, param_name, ConfigSpec, KernelSpec};
use crate::value::{KernelArg, PtrTarget};
use crate::{Element, Error};

/// The most warps a program may have (1024 threads per block).
const MAX_WARPS: u32 = 32;

/// Where a CPU buffer is taken to start when its descriptors are checked.
const CPU_BUFFER_BASE: u64 = 1 << 20;

/// Configuration `config` of `spec`, if it exists and can run over `grid`.
pub(crate) fn config(
    spec: &'static KernelSpec,
    config: usize,
    grid: Grid,
) -> Result<&'static ConfigSpec, Error> {
    let Some(config_spec) = spec.configs.get(config) else {
        return Err(Error::ConfigIndex {
            kernel: spec.name,
            index: config,
            count: spec.configs.len(),
        });
    };
    if config_spec.num_warps == 0 || config_spec.num_warps > MAX_WARPS {
        return Err(Error::InvalidConfig {
            kernel: spec.name,
            reason: format!(
                "num_warps is {}; it must be between 1 and {MAX_WARPS}",
                config_spec.num_warps
            ),
        });
    }
    grid.validate()?;
    check_cluster(spec, config_spec.cluster, grid)?;
    Ok(config_spec)
}

/// The grid must be a whole number of clusters (`ctas_per_cga`).
fn check_cluster(spec: &'static KernelSpec, cluster: [u32; 3], grid: Grid) -> Result<(), Error> {
    if cluster.contains(&0) {
        return Err(Error::InvalidConfig {
            kernel: spec.name,
            reason: format!("cluster shape {cluster:?} has a zero dimension"),
        });
    }
    let dims = grid.dims();
    match (0..3).find(|&a| dims[a] % cluster[a] != 0) {
        None => Ok(()),
        Some(axis) => Err(Error::InvalidGrid {
            grid: dims.map(u64::from),
            reason: format!(
                "kernel `{}` runs in clusters of {cluster:?} programs (ctas_per_cga), and \
                 {} programs along {} are not a multiple of {}; round the grid up and mask \
                 the extra programs' work",
                spec.name,
                dims[axis],
                ["x", "y", "z"][axis],
                cluster[axis]
            ),
        }),
    }
}

/// `args` as `backend` takes them, once each fits its parameter of `spec`
/// and configuration `config`, lives on `backend`'s device, and (for a
/// descriptor) follows TMA's rules for the block the configuration moves.
pub(crate) fn args<'a, B: Backend>(
    backend: &B,
    spec: &'static KernelSpec,
    config: &'static ConfigSpec,
    args: &[KernelArg<'a>],
) -> Result<Vec<Arg<'a, B::Ptr>>, Error> {
    if args.len() != spec.params.len() {
        return Err(Error::ArgCount {
            kernel: spec.name,
            expected: spec.params.len(),
            got: args.len(),
        });
    }
    let mut checked = Vec::with_capacity(args.len());
    for (index, (param, arg)) in spec.params.iter().zip(args).enumerate() {
        if !arg.fits(param.kind) {
            return Err(Error::ArgType {
                kernel: spec.name,
                param: param.name,
                expected: describe_kind(param.kind),
                got: arg.describe(),
            });
        }
        checked.push(match *arg {
            KernelArg::Scalar(value) => Arg::Scalar(value),
            KernelArg::Ptr(ptr) => Arg::Ptr(pointer(backend, spec.name, param.name, ptr.target)?),
            KernelArg::TensorDesc(desc) => {
                let at = pointer(backend, spec.name, param.name, desc.target)?;
                let Some(ParamKind::TensorDesc(block)) = config.params.get(index) else {
                    return Err(Error::InvalidConfig {
                        kernel: spec.name,
                        reason: format!(
                            "parameter `{}` is not a descriptor in this configuration",
                            param.name
                        ),
                    });
                };
                Arg::TensorDesc {
                    at,
                    desc,
                    block: *block,
                }
            }
        });
    }
    check_descriptors(config, args)?;
    Ok(checked)
}

/// `target` as `backend` passes it, if `backend`'s device owns it: the one
/// check of the device an argument's memory belongs to. `param` names the
/// argument in the message.
pub(crate) fn pointer<B: Backend>(
    backend: &B,
    kernel: &'static str,
    param: &'static str,
    target: PtrTarget,
) -> Result<B::Ptr, Error> {
    let (owner, device) = (target.device(), backend.id());
    match B::pointer(target) {
        Some(ptr) if owner == device => Ok(ptr),
        _ => Err(Error::WrongDevice {
            kernel,
            param,
            buffer_device: owner.to_string(),
            device: device.to_string(),
        }),
    }
}

/// Appends `buffer`, which the launch itself made on the kernel's device
/// (a fault record, a timeline's records), as the next pointer argument.
pub(crate) fn push_launch_buffer<'a, B: Backend, T: Element>(
    backend: &B,
    spec: &'static KernelSpec,
    args: &mut Vec<Arg<'a, B::Ptr>>,
    buffer: &Buffer<T>,
) -> Result<(), Error> {
    let name = param_name(spec, args.len());
    args.push(Arg::Ptr(pointer(
        backend,
        spec.name,
        name,
        buffer.target(0),
    )?));
    Ok(())
}

/// Checks each descriptor against TMA's rules for the block this
/// configuration moves (strides, alignment, box), on every device, so that
/// a kernel tested on the interpreter is not refused on the GPU.
fn check_descriptors(config: &ConfigSpec, args: &[KernelArg<'_>]) -> Result<(), Error> {
    for (kind, arg) in config.params.iter().zip(args) {
        if let (ParamKind::TensorDesc(block), KernelArg::TensorDesc(desc)) = (kind, arg) {
            let address = match desc.target {
                PtrTarget::Cuda { address, .. } => address,
                // CPU buffers start aligned (here: at a made-up, non-null
                // address); what counts is the offset into them.
                PtrTarget::Cpu { offset_elems, .. } => {
                    CPU_BUFFER_BASE + (offset_elems * desc.elem().size_bytes()) as u64
                }
            };
            desc.tiled(address, block).validate()?;
        }
    }
    Ok(())
}
