//! tlx-core: the compiler's core, which neither syn nor LLVM touches.
//!
//! One folder a stage:
//! - [`ir`]: the typed block-tensor IR every stage reads (types, ops, the
//!   primitive table, the text form, the builder);
//! - [`check`]: the verifier and the build-time checks (task regions,
//!   cluster barriers, the synchronization protocol);
//! - [`instrument`]: optional run-time checks woven into a kernel (bounds);
//! - [`interp`]: the CPU interpreter that runs the IR without a GPU;
//! - [`env`]: the `TLX_*` environment variables the project reads.
//!
//! Rust syntax to IR is the `tlx-frontend` crate; code generation (IR to
//! LLVM IR to PTX, with the layouts) is `tlx-codegen`, the only crate that
//! links LLVM.

pub mod check;
pub mod env;
pub mod instrument;
pub mod interp;
pub mod ir;
pub mod numeric;
