//! The static description of a compiled kernel that `#[tlx::kernel]` emits:
//! its parameters and, per configuration of its constants, the PTX for each
//! architecture and the IR text for the CPU interpreter; and how messages
//! name its parameters.

use tlx_core::instrument::SliceKind;
use tlx_core::ir::{Arch, ParamKind};

/// A kernel as compiled into the binary.
#[derive(Debug)]
pub struct KernelSpec {
    /// The kernel's name; also the PTX entry name.
    pub name: &'static str,
    /// The parameters, in order.
    pub params: &'static [ParamSpec],
    /// One entry per specialization of the kernel's constants (autotuning candidates).
    pub configs: &'static [ConfigSpec],
}

/// One parameter of a kernel.
#[derive(Debug)]
pub struct ParamSpec {
    /// Its name in the kernel's source.
    pub name: &'static str,
    /// What it takes: a pointer, a scalar or a tensor descriptor, and of which type.
    pub kind: ParamKind,
}

/// One specialization of a kernel.
#[derive(Debug)]
pub struct ConfigSpec {
    /// The constants this specialization was compiled with.
    pub consts: &'static [(&'static str, i64)],
    /// Warps per program; 32 threads each.
    pub num_warps: u32,
    /// Programs per cluster along x, y and z (`ctas_per_cga`); the grid
    /// must be a whole number of clusters.
    pub cluster: [u32; 3],
    /// Launched as a programmatic dependent of the kernel before it on the
    /// stream (`launch_pdl = true`): it may start before that one ends.
    pub launch_pdl: bool,
    /// Dynamic shared memory the kernel needs, in bytes.
    pub shared_bytes: u32,
    /// Global scratch the kernel needs per program, in bytes (for tensor
    /// descriptors it makes on the device): the launch passes a buffer of
    /// this many bytes per program of the grid after every other argument.
    pub global_scratch_bytes: u32,
    /// One PTX module per architecture; the entry is named [`KernelSpec::name`].
    pub ptx: &'static [(Arch, &'static str)],
    /// The kernel in `tlx_core::ir::text` form, for the CPU interpreter.
    pub ir: &'static str,
    /// The parameters as this specialization takes them (a descriptor's
    /// block depends on the constants).
    pub params: &'static [ParamKind],
    /// Compiled with `check_bounds`: its checked accesses, in the order the
    /// fault record numbers them. The kernel then takes, after `params`,
    /// each pointer argument's length in bytes and a fault record
    /// (`tlx_core::instrument`), which the launch supplies.
    pub bounds: Option<&'static [BoundsSiteSpec]>,
    /// Built with `timeline` (or `TLX_TRACE` set at build time): the
    /// slices its GPU code marks, by index (`tlx_core::instrument`'s
    /// timeline layout). The PTX then takes, after `params` and any
    /// `check_bounds` arguments, a record buffer and its capacity per
    /// track, which the launch supplies (none when nothing is recorded).
    pub timeline: Option<&'static [TimelineSliceSpec]>,
}

/// One slice a kernel built with timelines marks.
#[derive(Debug)]
pub struct TimelineSliceSpec {
    /// The program, a task replica, or a wait.
    pub kind: SliceKind,
    /// `program`, `default task`, `task 1`, `wait: mbarrier (line 40)`.
    pub label: &'static str,
}

/// One global access of a kernel compiled with `check_bounds`.
#[derive(Debug)]
pub struct BoundsSiteSpec {
    /// The pointer parameters the access may reach (usually one).
    pub params: &'static [&'static str],
    /// `load`, `store`, `atomic` or `async_load`.
    pub access: &'static str,
    /// The kernel's source file, and the access's 1-based line and column.
    pub file: &'static str,
    /// The access's 1-based line.
    pub line: u32,
    /// The access's 1-based column.
    pub column: u32,
}

/// How a parameter kind reads in messages: `*f32` or `i32`.
pub(crate) fn describe_kind(kind: ParamKind) -> String {
    match kind {
        ParamKind::Ptr(s) => format!("a pointer to {s}"),
        ParamKind::Scalar(s) => format!("a {s} scalar"),
        ParamKind::TensorDesc(block) => format!(
            "a {}-d tensor descriptor of {}",
            block.shape().len(),
            block.elem()
        ),
    }
}

/// How many parameters a kernel compiled with `check_bounds` takes after its
/// own `params`: a length per pointer, then the fault record (what
/// `bounds::launch_checked` passes).
pub(crate) fn extra_params(params: &[ParamKind]) -> usize {
    params
        .iter()
        .filter(|k| matches!(k, ParamKind::Ptr(_)))
        .count()
        + 1
}

/// The name of argument `index` for messages: the user's parameter, or
/// what a checked-mode argument is.
pub(crate) fn param_name(spec: &KernelSpec, index: usize) -> &'static str {
    spec.params
        .get(index)
        .map_or("(a check_bounds argument)", |p| p.name)
}
