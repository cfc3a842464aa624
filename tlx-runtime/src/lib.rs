//! tlx-runtime: the host side of tlx. Pick a [`Device`] (a CUDA GPU through
//! cudarc, or the CPU interpreter when there is none), move data in typed
//! [`Buffer`]s, and [`launch`] kernels that `#[tlx::kernel]` compiled into
//! the binary as [`KernelSpec`]s.
//!
//! Environment: `TLX_INTERPRET=1` forces the CPU interpreter;
//! `TLX_CHECK_UNINIT=1` makes it report reads of never-written memory, uses of
//! values from masked-off lanes of a `load` without `other`, and downloads of
//! buffers nothing wrote.

#![deny(missing_docs, rustdoc::broken_intra_doc_links)]

mod arg;
mod autotune;
mod bench;
mod bounds;
mod buffer;
mod cpu;
mod cuda;
mod desc;
mod device;
mod dump;
mod element;
mod error;
mod grid;
mod launch;
mod spec;
mod strided;
pub mod testing;

pub use arg::{KernelArg, PtrArg, PtrValue, ScalarArg, ScalarValue};
pub use autotune::{autotune, autotune_launch};
pub use bench::BenchSpec;
pub use buffer::{Buffer, BufferView};
pub use cuda::tensor_map::{EncodedTensorMap, TensorMapError, TiledTensorMap, TmaSwizzle};
pub use desc::{TensorDesc, TensorDescValue};
pub use device::Device;
pub use element::{Element, F8E4M3, F8E5M2};
pub use error::{Error, OutOfBoundsReport};
pub use grid::{Grid, MAX_GRID};
pub use launch::launch;
pub use spec::{BoundsSiteSpec, ConfigSpec, KernelSpec, ParamSpec};
pub use strided::Strided;
