//! `launch`: has check.rs check a launch against the kernel's spec and the
//! device, then hands it to the device's backend, with the arguments
//! bounds.rs adds for a kernel compiled with `check_bounds` and those
//! trace.rs adds for one built with timelines, and reads back what they
//! recorded.

use crate::backend::{Backend, Launch};
use crate::device::{with_backend, Device};
use crate::grid::Grid;
use crate::spec::KernelSpec;
use crate::trace::{self, GpuTimeline};
use crate::value::KernelArg;
use crate::{bounds, check, dump, Error};

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
    let config_spec = check::config(spec, config, grid)?;
    let launch = Launch {
        spec,
        config,
        config_spec,
        grid,
    };
    with_backend!(device.backend(), |backend| {
        launch_on(device, backend.as_ref(), &launch, args)
    })
}

/// [`launch`] on `backend`, the backend of `device`.
fn launch_on<B: Backend>(
    device: &Device,
    backend: &B,
    launch: &Launch,
    args: &[KernelArg<'_>],
) -> Result<(), Error> {
    let mut checked = check::args(backend, launch.spec, launch.config_spec, args)?;
    dump::on_launch(launch.spec, launch.config, launch.config_spec);
    let config = launch.config_spec;
    let bounds = match config.bounds {
        Some(sites) => Some(bounds::prepare(
            device,
            backend,
            launch,
            sites,
            args,
            &mut checked,
        )?),
        None => None,
    };
    // The interpreter runs the IR, which records no timeline of its own
    // making and takes no timeline arguments.
    let timeline = match config.timeline {
        Some(slices) if B::RUNS_PTX => {
            GpuTimeline::prepare(device, backend, launch, slices, &mut checked)?
        }
        _ => None,
    };
    if B::RUNS_PTX && config.timeline.is_none() {
        trace::note_untimed_gpu_launch(launch.spec.name);
    }
    let mut ran = backend.launch(launch, &checked);
    // What the kernel recorded is read once it has finished.
    if bounds.is_some() || timeline.is_some() {
        ran = ran.and_then(|()| backend.synchronize());
    }
    if let Some(timeline) = timeline {
        timeline.finish(launch, ran.is_ok())?;
    }
    match bounds {
        Some(record) => record.finish(launch, args, ran),
        None => ran,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ConfigSpec, ParamSpec};
    use crate::value::PtrTarget;
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
            timeline: None,
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
            PtrTarget::Cpu {
                offset_elems: 3,
                ..
            }
        ));
    }
}
