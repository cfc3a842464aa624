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
//! The kernel language, with the TLX and Triton name of every primitive, is
//! described in `docs/language.md` in the repository; [`kernel`] lists the
//! attribute's keys.
//!
//! Run-time environment: `TLX_INTERPRET=1` runs every kernel on the CPU
//! interpreter, which reports out-of-bounds accesses, failed asserts and
//! deadlocks with the kernel, program and line; `TLX_CHECK_UNINIT=1` adds
//! reads of memory nothing wrote; `TLX_DUMP=ir,ptx` writes what each launch
//! runs. Build-time: `TLX_CHECK_BOUNDS=1` checks every global access on the
//! GPU too ([`Error::KernelOutOfBounds`]).

#![deny(missing_docs, rustdoc::broken_intra_doc_links)]

// The kernels of `ops` are written with `#[tlx::kernel]`, whose expansion
// names this crate `::tlx`.
extern crate self as tlx;

#[cfg(any(
    feature = "ops-gemm",
    feature = "ops-rows",
    feature = "ops-attention",
    feature = "ops-dist",
    feature = "ops-grouped"
))]
pub mod ops;

pub use half;
pub use tlx_macros::kernel;
pub use tlx_runtime::mx;
pub use tlx_runtime::testing;
pub use tlx_runtime::trace;
pub use tlx_runtime::{
    autotune, BenchSpec, Buffer, BufferView, Collectives, Device, Element, Error, Grid, Mesh,
    MeshRank, OutOfBoundsReport, Placement, PtrArg, ScalarArg, Strided, SymBuffer, SymRank,
    TensorDesc, F8E4M3, F8E5M2, MAX_GRID,
};

/// The kernel language's builtins, one item each, documented as
/// `docs/language.md` documents them (the items are generated from its
/// tables): `load`, `store`, `dot`, `local_alloc`, `barrier_wait`, ...
///
/// The items are markers, not functions: a builtin means something only
/// inside a `#[tlx::kernel]` body, which the macro compiles. The macro
/// points each builtin the body calls at its item here, so an editor that
/// expands proc macros can show the same text on hover.
///
/// ```
/// assert_eq!(tlx::lang::barrier_wait.name(), "barrier_wait");
/// ```
pub mod lang {
    /// A builtin of the kernel language (see the [module](self)).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Builtin {
        name: &'static str,
    }

    impl Builtin {
        /// The builtin's name, as a kernel calls it.
        pub const fn name(&self) -> &'static str {
            self.name
        }
    }

    // Rebuilt when the page changes.
    const _: &str = include_str!("../docs/language.md");

    tlx_macros::__lang_items!();
}

/// Kernel arguments as a launcher passes them: what [`PtrArg`] and
/// [`ScalarArg`] produce. Needed only to implement those traits for a type
/// of one's own.
pub mod args {
    pub use tlx_runtime::{KernelArg, PtrValue, ScalarValue, TensorDescValue};
}

/// TMA tensor maps as the driver encodes them, for host code that builds
/// descriptors itself; [`TensorDesc`] does this for kernel arguments.
pub mod tma {
    pub use tlx_runtime::{EncodedTensorMap, TensorMapError, TiledTensorMap, TmaSwizzle};
}

/// What kernel files and host code usually need.
pub mod prelude {
    pub use crate::{
        Buffer, Device, Error, Grid, Mesh, Ptr, Strided, SymBuffer, SymPtr, TensorDesc, F8E4M3,
        F8E5M2,
    };
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

/// The type of a kernel parameter that is a symmetric buffer of a [`Mesh`],
/// `SymPtr<f32>`: in the kernel, this rank's pointer, and `remote(x, rank)`
/// rank `rank`'s. The launcher takes a [`SymRank`] (`buffer.rank(r)?`).
pub struct SymPtr<T>(std::marker::PhantomData<T>);

/// What the code `#[tlx::kernel]` generates refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use tlx_core::instrument::SliceKind;
    pub use tlx_core::ir;
    pub use tlx_runtime::{
        autotune_launch, launch, BoundsSiteSpec, ConfigSpec, KernelSpec, ParamSpec,
        TimelineSliceSpec,
    };
}

/// The README's example, compiled and run as a doctest so it cannot drift
/// from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
