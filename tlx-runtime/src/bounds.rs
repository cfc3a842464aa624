//! Launches of kernels compiled with `check_bounds`: the arguments such a
//! kernel takes after the user's (each pointer's length in bytes, then a
//! zeroed fault record), and the error the record becomes when an access
//! fell outside its buffer. The launch waits for the kernel (launch.rs),
//! so the error comes back from `launch` itself, on a GPU as on the CPU
//! interpreter.
//! (How many such arguments a kernel takes is `spec::extra_params`.)

use tlx_core::instrument::{BoundsFault, FAULT_RECORD_WORDS};
use tlx_core::ir::ScalarType;

use crate::backend::{Arg, Backend, Launch};
use crate::buffer::Buffer;
use crate::check;
use crate::device::Device;
use crate::error::OutOfBoundsReport;
use crate::spec::{BoundsSiteSpec, KernelSpec};
use crate::value::{KernelArg, ScalarValue};
use crate::Error;

/// A checked launch's fault record, zeroed before the launch.
pub(crate) struct FaultRecord {
    record: Buffer<i64>,
    sites: &'static [BoundsSiteSpec],
}

/// Appends the checked-mode arguments to `checked` (the checked form of
/// `args`, for `launch` on `backend`, the backend of `device`): each
/// pointer's length, then a zeroed fault record.
pub(crate) fn prepare<B: Backend>(
    device: &Device,
    backend: &B,
    launch: &Launch,
    sites: &'static [BoundsSiteSpec],
    args: &[KernelArg<'_>],
    checked: &mut Vec<Arg<'_, B::Ptr>>,
) -> Result<FaultRecord, Error> {
    let spec = launch.spec;
    let record = device.upload(&[0i64; FAULT_RECORD_WORDS])?;
    // Each pointer's length, as an i64 (far below 2^63).
    checked.extend(args.iter().filter_map(|arg| match arg {
        KernelArg::Ptr(p) => Some(Arg::Scalar(ScalarValue {
            ty: ScalarType::I64,
            bits: p.len_bytes,
        })),
        _ => None,
    }));
    // The record is on `device`, so its check passes.
    check::push_launch_buffer(backend, spec, checked, &record)?;
    Ok(FaultRecord { record, sites })
}

impl FaultRecord {
    /// What the launch (finished, `ran` its outcome) comes to: a fault in
    /// the record becomes [`Error::KernelOutOfBounds`].
    pub(crate) fn finish(
        self,
        launch: &Launch,
        args: &[KernelArg<'_>],
        ran: Result<(), Error>,
    ) -> Result<(), Error> {
        // A suppressed access can make the kernel fail later (the interpreter
        // reports the undefined value it left behind): the record names the
        // cause, so it wins. A GPU that faulted cannot be read; its error stands.
        let fault = self.record.download().ok().and_then(|words| {
            let words: [i64; FAULT_RECORD_WORDS] = words.try_into().ok()?;
            BoundsFault::decode(&words)
        });
        match (fault, ran) {
            (Some(fault), _) => Err(fault_error(launch.spec, self.sites, args, &fault)),
            (None, ran) => ran,
        }
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
