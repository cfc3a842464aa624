//! Code generation: a verified [`ir::Kernel`] to LLVM IR to PTX.
//!
//! The kernel is lowered to LLVM IR text (one function, every tensor spread
//! over the threads by a [`crate::layout::LinearLayout`], one LLVM scalar per
//! register), which LLVM's NVPTX back end then verifies, optimizes (O2 less
//! the vectorizers, see `llvm.rs`) and turns into PTX.
//!
//! Layouts: values derived only from constants, `arange` and scalars, and
//! layout-only ops (broadcast, expand_dims, reshape, trans), are produced in
//! whatever layout their user wants; other values keep the layout they were
//! made in (blocked for loads, sliced for reductions, MMA fragments for `dot`,
//! which loops carry unchanged) and elementwise ops follow their first such
//! operand. Anything else that must change layout goes through shared memory
//! (`convert`). Shared scratch is reused between ops; each use starts with a
//! barrier, so `If` conditions around ops that use it must be uniform in a CTA.
//! Loads that `for` loops prefetch (`num_stages`, see [`pipeline`]) get rings
//! of their own after the scratch.
//!
//! Math accuracy: `exp`/`exp2`/`log`/`log2` use `ex2.approx`/`lg2.approx`
//! (about 2 ulp, relative error near 2^-22; `exp` and `log` add the rounding of
//! the scaling by log2(e) or ln 2), `sin`/`cos` use `sin.approx`/`cos.approx`
//! (absolute error about 2^-20 on [-pi, pi], worse far from it), `rsqrt` uses
//! `rsqrt.approx` and `sqrt` is correctly rounded. Half and bfloat16 math is
//! done in f32 and rounded once.

mod analysis;
mod atomics;
mod cluster;
mod control;
mod convert;
mod debug;
mod descriptor;
mod device_descriptor;
mod dot;
mod emit;
mod error;
mod join;
pub mod layout;
mod llvm;
mod lower;
mod memory;
pub mod parallel;
mod pipeline;
mod prims;
mod ptxas_workarounds;
mod reduce;
mod region;
mod repack;
mod rings;
mod scalar;
mod scan;
mod tasks;
mod tcgen05;
mod tiles;
mod wgmma;

use crate::layout::LayoutError;
use thiserror::Error;
use tlx_core::ir;

/// A kernel compiled for one architecture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledKernel {
    /// The PTX entry name (the kernel's name).
    pub entry: String,
    pub ptx: String,
    /// The optimized LLVM IR the PTX was generated from (from
    /// [`compile_with_llvm_ir`]; empty otherwise).
    pub llvm_ir: String,
    /// Dynamic shared memory the launch must provide, in bytes.
    pub shared_bytes: u32,
    /// Global scratch the launch must provide per program, in bytes, as a
    /// last parameter after the kernel's own (descriptors made on the
    /// device); 0 when the kernel takes none.
    pub global_scratch_bytes: u32,
    pub num_warps: u32,
    /// Where code generation took a slower path than the kernel could have
    /// had (an operand staged element by element, ...), each with how to get
    /// the fast one; `TLX_DUMP=notes` writes them at build time.
    pub notes: Vec<String>,
}

#[derive(Debug, Error)]
pub enum CodegenError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("malformed IR: {0}")]
    MalformedIr(String),
    #[error("internal LLVM error: {0}")]
    Llvm(String),
    #[error("needs {needed} bytes of shared memory; a program may use at most {limit}")]
    SharedMemoryExceeded { needed: u32, limit: u32 },
    /// Something the kernel asks for that the hardware cannot do, found
    /// only once layouts are known: the user's to change, not a bug; `at`
    /// is the op's source location, when one op is at fault.
    #[error("{message}{}", at_line(.at))]
    Misuse {
        message: String,
        hint: String,
        at: Option<ir::SrcLoc>,
    },
}

fn at_line(at: &Option<ir::SrcLoc>) -> String {
    match at {
        Some(loc) => format!(" (line {})", loc.line),
        None => String::new(),
    }
}

/// What [`compile`] would refuse in `kernel` for `arch` (every
/// `CodegenError` but LLVM's own), found by lowering it without running
/// LLVM; on success the launch facts, with no PTX or LLVM IR. For builds
/// that link no binary (`cargo check`): LLVM is most of a kernel's cost.
pub fn check(kernel: &ir::Kernel, arch: ir::Arch) -> Result<CompiledKernel, CodegenError> {
    let lowered = lower::lower_kernel(kernel, arch)?;
    Ok(CompiledKernel {
        entry: kernel.name.clone(),
        ptx: String::new(),
        llvm_ir: String::new(),
        shared_bytes: lowered.shared_bytes,
        global_scratch_bytes: lowered.global_scratch_bytes,
        num_warps: kernel.total_warps(),
        notes: lowered.notes,
    })
}

/// Compile `kernel` to PTX for `arch` (`llvm_ir` left empty: printing
/// the optimized module back costs about a tenth of LLVM's time on a big
/// kernel, and only `TLX_DUMP=llvm` reads it).
pub fn compile(kernel: &ir::Kernel, arch: ir::Arch) -> Result<CompiledKernel, CodegenError> {
    compile_keeping(kernel, arch, false)
}

/// [`compile`], with the optimized LLVM IR in `llvm_ir`.
pub fn compile_with_llvm_ir(
    kernel: &ir::Kernel,
    arch: ir::Arch,
) -> Result<CompiledKernel, CodegenError> {
    compile_keeping(kernel, arch, true)
}

fn compile_keeping(
    kernel: &ir::Kernel,
    arch: ir::Arch,
    keep_llvm_ir: bool,
) -> Result<CompiledKernel, CodegenError> {
    let lowered = lower::lower_kernel(kernel, arch)?;
    let features = analysis::ptx_features(kernel);
    let (llvm_ir, ptx) = llvm::compile_to_ptx(&lowered.module_text, arch, features, keep_llvm_ir)?;
    Ok(CompiledKernel {
        entry: kernel.name.clone(),
        ptx,
        llvm_ir,
        shared_bytes: lowered.shared_bytes,
        global_scratch_bytes: lowered.global_scratch_bytes,
        num_warps: kernel.total_warps(),
        notes: lowered.notes,
    })
}
