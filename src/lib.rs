//! tlx: GPU kernels written in Rust, in the style of Triton and TLX.
//!
//! `#[tlx::kernel]` compiles a block-level kernel to PTX at build time and
//! replaces the function with a launcher type; [`Device`] runs it on a CUDA
//! GPU, or on the CPU interpreter when there is none (or `TLX_INTERPRET=1`).
//!
//! ```ignore
//! use tlx::prelude::*;
//!
//! #[tlx::kernel(configs = [(BLOCK = 1024)])]
//! fn vector_add<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
//!     let offs = program_id(0) * BLOCK + arange(0, BLOCK);
//!     let mask = offs < n;
//!     store(out + offs, load(x + offs, mask = mask) + load(y + offs, mask = mask), mask = mask);
//! }
//!
//! let dev = Device::new();
//! vector_add::<1024>::launch(&dev, n.div_ceil(1024), &x, &y, &out, n as i32)?;
//! ```
//!
//! The kernel language is described in `docs/language.md`.

pub use half;
pub use tlx_macros::kernel;
pub use tlx_runtime::*;

/// What kernel files and host code usually need.
pub mod prelude {
    pub use crate::{Buffer, Device, Error, Grid, Ptr, TensorDesc, F8E4M3, F8E5M2};
    pub use half::{bf16, f16};

    /// The kernel-language name of [`F8E4M3`], as in `Ptr<f8e4m3>`.
    #[allow(non_camel_case_types)]
    pub type f8e4m3 = crate::F8E4M3;
    /// The kernel-language name of [`F8E5M2`], as in `Ptr<f8e5m2>`.
    #[allow(non_camel_case_types)]
    pub type f8e5m2 = crate::F8E5M2;
}

/// The type of a global-pointer kernel parameter, `Ptr<f32>`.
///
/// It appears only in kernel signatures, which tlx (not rustc) compiles; the
/// launcher takes a [`Buffer`] or any other [`PtrArg`] in its place.
pub struct Ptr<T>(std::marker::PhantomData<T>);

/// What the code `#[tlx::kernel]` generates refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use tlx_core::ir;
    pub use tlx_runtime::{launch, BoundsSiteSpec, ConfigSpec, KernelSpec, ParamSpec};
}

/// The README's example, compiled and run as a doctest so it cannot drift
/// from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
