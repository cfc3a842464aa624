//! tlx-core: the tlx compiler as a library.
//!
//! The pipeline, one folder a stage:
//! - [`frontend`]: Rust syntax (syn) to [`ir`], with shape and dtype inference and diagnostics;
//! - [`ir`]: the typed block-tensor IR every later stage reads;
//! - [`interp`]: the CPU interpreter that runs the IR without a GPU;
//! - [`instrument`]: optional run-time checks woven into a kernel (bounds);
//! - code generation (IR to LLVM IR to PTX), with the layouts that say which
//!   thread register holds which tensor element, is the `tlx-codegen` crate,
//!   the only one that links LLVM.

pub mod check;
pub mod diag;
pub mod frontend;
pub mod instrument;
pub mod interp;
pub mod ir;
pub mod numeric;
