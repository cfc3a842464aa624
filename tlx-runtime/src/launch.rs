//! `launch`: checks a launch against the kernel's spec and the device
//! (configuration, launch shape, every argument), then hands it to the device.

use crate::arg::{KernelArg, PtrTarget};
use crate::device::{Backend, Device};
use crate::grid::Grid;
use crate::spec::{describe_kind, ConfigSpec, KernelSpec};
use crate::Error;
use tlx_core::ir::ParamKind;

/// The most warps a program may have (1024 threads per block).
const MAX_WARPS: u32 = 32;

/// Runs configuration `config` of a kernel over `grid`. Asynchronous on a
/// GPU (errors inside the kernel surface at the next synchronize or
/// download); synchronous on the CPU interpreter.
pub fn launch(
    device: &Device,
    spec: &'static KernelSpec,
    config: usize,
    grid: Grid,
    args: &[KernelArg<'_>],
) -> Result<(), Error> {
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
    check_args(device, spec, args)?;
    check_descriptors(config_spec, args)?;
    crate::dump::on_launch(spec, config, config_spec);
    let dispatch = |args: &[KernelArg<'_>]| match device.backend() {
        Backend::Cuda(cuda) => cuda.launch(spec, config, config_spec, grid, args),
        Backend::Cpu(cpu) => cpu.launch(spec, config, grid, args),
    };
    match config_spec.bounds {
        None => dispatch(args),
        Some(sites) => crate::bounds::launch_checked(device, spec, sites, args, dispatch),
    }
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

/// Where a CPU buffer is taken to start when its descriptors are checked.
const CPU_BUFFER_BASE: u64 = 1 << 20;

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

fn check_args(
    device: &Device,
    spec: &'static KernelSpec,
    args: &[KernelArg<'_>],
) -> Result<(), Error> {
    if args.len() != spec.params.len() {
        return Err(Error::ArgCount {
            kernel: spec.name,
            expected: spec.params.len(),
            got: args.len(),
        });
    }
    for (param, arg) in spec.params.iter().zip(args) {
        if !arg.fits(param.kind) {
            return Err(Error::ArgType {
                kernel: spec.name,
                param: param.name,
                expected: describe_kind(param.kind),
                got: arg.describe(),
            });
        }
        let target = match arg {
            KernelArg::Ptr(ptr) => Some(ptr.target),
            KernelArg::TensorDesc(desc) => Some(desc.target),
            KernelArg::Scalar(_) => None,
        };
        if let Some(target) = target {
            let owner = target.device();
            if owner != device.id() {
                return Err(Error::WrongDevice {
                    kernel: spec.name,
                    param: param.name,
                    buffer_device: owner.to_string(),
                    device: device.id().to_string(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ConfigSpec, ParamSpec};
    use crate::{PtrArg, ScalarArg};
    use tlx_core::ir::{ParamKind, ScalarType};

    static ADD: KernelSpec = KernelSpec {
        name: "add",
        params: &[
            ParamSpec {
                name: "x",
                kind: ParamKind::Ptr(ScalarType::F32),
            },
            ParamSpec {
                name: "n",
                kind: ParamKind::Scalar(ScalarType::I32),
            },
        ],
        configs: &[ConfigSpec {
            consts: &[("BLOCK", 128)],
            num_warps: 4,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 0,
            global_scratch_bytes: 0,
            ptx: &[],
            ir: "",
            params: &[],
            bounds: None,
        }],
    };

    fn message(result: Result<(), Error>) -> String {
        match result {
            Ok(()) => panic!("the launch was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn wrong_arguments_are_reported_by_name() {
        let device = Device::cpu();
        let x = device.alloc_zeros::<f32>(8).expect("alloc");
        let ints = device.alloc_zeros::<i32>(8).expect("alloc");
        let grid = Grid::from(1);
        let count = message(launch(&device, &ADD, 0, grid, &[x.kernel_arg()]));
        assert_eq!(count, "kernel `add` takes 2 arguments, but 1 were given");
        let args = [PtrArg::<i32>::kernel_arg(&ints), 8i32.kernel_arg()];
        let elem = message(launch(&device, &ADD, 0, grid, &args));
        assert_eq!(
            elem,
            "kernel `add`, argument `x`: expected a pointer to f32, got a pointer to i32"
        );
        let args = [x.kernel_arg(), 8i64.kernel_arg()];
        let scalar = message(launch(&device, &ADD, 0, grid, &args));
        assert!(
            scalar.contains("argument `n`: expected a i32 scalar, got a i64 scalar"),
            "{scalar}"
        );
        let args = [1.0f32.kernel_arg(), 8i32.kernel_arg()];
        assert!(message(launch(&device, &ADD, 0, grid, &args)).contains("argument `x`"));
    }

    #[test]
    fn buffers_of_another_device_are_refused() {
        let (device, other) = (Device::cpu(), Device::cpu());
        let x = other.alloc_zeros::<f32>(8).expect("alloc");
        let args = [x.kernel_arg(), 8i32.kernel_arg()];
        let err = message(launch(&device, &ADD, 0, Grid::from(1), &args));
        assert!(
            err.contains("the buffer belongs to CPU interpreter device"),
            "{err}"
        );
    }

    #[test]
    fn bad_configs_and_grids_are_refused() {
        let device = Device::cpu();
        let x = device.alloc_zeros::<f32>(8).expect("alloc");
        let args = [x.kernel_arg(), 8i32.kernel_arg()];
        let config = message(launch(&device, &ADD, 1, Grid::from(1), &args));
        assert_eq!(
            config,
            "kernel `add` has 1 configurations; configuration 1 does not exist"
        );
        let grid = message(launch(&device, &ADD, 0, Grid::from(0), &args));
        assert!(grid.contains("x is 0"), "{grid}");
        let grid = message(launch(&device, &ADD, 0, Grid::new(1, 70000, 1), &args));
        assert!(grid.contains("y is 70000"), "{grid}");
    }

    #[test]
    fn views_pass_their_offset() {
        let device = Device::cpu();
        let x = device.alloc_zeros::<f32>(8).expect("alloc");
        let view = x.slice(3..).expect("in bounds");
        let KernelArg::Ptr(ptr) = view.kernel_arg() else {
            panic!("a view is a pointer argument");
        };
        assert_eq!(ptr.elem(), ScalarType::F32);
        assert!(matches!(
            ptr.target,
            crate::arg::PtrTarget::Cpu {
                offset_elems: 3,
                ..
            }
        ));
    }
}
