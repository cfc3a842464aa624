//! Launches of kernels compiled with `check_bounds`: the arguments such a
//! kernel takes after the user's (each pointer's length in bytes, then a
//! zeroed fault record), and the error the record becomes when an access
//! fell outside its buffer. The launch waits for the kernel, so the error
//! comes back from `launch` itself, on a GPU as on the CPU interpreter.

use tlx_core::instrument::{BoundsFault, FAULT_RECORD_WORDS};
use tlx_core::ir::ParamKind;

use crate::arg::KernelArg;
use crate::device::Device;
use crate::error::OutOfBoundsReport;
use crate::spec::{BoundsSiteSpec, KernelSpec};
use crate::{Error, PtrArg, ScalarArg};

/// Runs `dispatch` with `args` and the checked-mode arguments, waits, and
/// turns a fault record into [`Error::KernelOutOfBounds`].
pub(crate) fn launch_checked(
    device: &Device,
    spec: &'static KernelSpec,
    sites: &'static [BoundsSiteSpec],
    args: &[KernelArg<'_>],
    dispatch: impl FnOnce(&[KernelArg<'_>]) -> Result<(), Error>,
) -> Result<(), Error> {
    let record = device.upload(&[0i64; FAULT_RECORD_WORDS])?;
    let lengths = args.iter().filter_map(|arg| match arg {
        KernelArg::Ptr(p) => Some(ScalarArg::kernel_arg(p.len_bytes as i64)),
        _ => None,
    });
    let all: Vec<KernelArg<'_>> = args
        .iter()
        .copied()
        .chain(lengths)
        .chain([PtrArg::kernel_arg(&record)])
        .collect();
    let ran = dispatch(&all).and_then(|()| device.synchronize());
    // A suppressed access can make the kernel fail later (the interpreter
    // reports the undefined value it left behind): the record names the
    // cause, so it wins. A GPU that faulted cannot be read; its error stands.
    let fault = record.download().ok().and_then(|words| {
        let words: [i64; FAULT_RECORD_WORDS] = words.try_into().ok()?;
        BoundsFault::decode(&words)
    });
    match (fault, ran) {
        (Some(fault), _) => Err(fault_error(spec, sites, args, &fault)),
        (None, ran) => ran,
    }
}

fn fault_error(
    spec: &'static KernelSpec,
    sites: &'static [BoundsSiteSpec],
    args: &[KernelArg<'_>],
    fault: &BoundsFault,
) -> Error {
    let site = sites.get(fault.site);
    let names = site.map_or(&[][..], |s| s.params);
    // The record's offset is from the site's first parameter.
    let len_bytes = names
        .first()
        .and_then(|first| spec.params.iter().position(|p| p.name == *first))
        .and_then(|index| match args.get(index) {
            Some(KernelArg::Ptr(p)) => Some(p.len_bytes),
            _ => None,
        })
        .unwrap_or(0);
    let param = if names.is_empty() {
        "a pointer argument".to_string()
    } else {
        format!("`{}`", names.join("`/`"))
    };
    Error::KernelOutOfBounds(Box::new(OutOfBoundsReport {
        kernel: spec.name,
        program: fault.program,
        access: site.map_or("access", |s| s.access),
        param,
        file: site.map_or("", |s| s.file),
        line: site.map_or(0, |s| s.line),
        column: site.map_or(0, |s| s.column),
        element: fault.element,
        byte_offset: fault.byte_offset,
        len_bytes,
        count: fault.count,
    }))
}

/// How many parameters a checked kernel takes after its own `params`: a
/// length per pointer, then the fault record (what [`launch_checked`] passes).
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
