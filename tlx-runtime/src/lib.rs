//! tlx-runtime: the host side of tlx. Pick a [`Device`] (a CUDA GPU through
//! cudarc, or the CPU interpreter when there is none), move data in typed
//! [`Buffer`]s, and [`launch`] kernels that `#[tlx::kernel]` compiled into
//! the binary as [`KernelSpec`]s.
//!
//! Environment: `TLX_INTERPRET=1` forces the CPU interpreter;
//! `TLX_CHECK_UNINIT=1` makes it report reads of never-written memory, uses of
//! values from masked-off lanes of a `load` without `other`, and downloads of
//! buffers nothing wrote.
//!
//! The files form layers; each imports only files of the layers above it in
//! this list (and of its own layer, earlier on its line), never a later one:
//! 1. leaves, importing nothing of the crate: `element`, `spec`, `env`,
//!    `cuda/probe`, `cuda/tensor_map` (TMA rules and encoding);
//! 2. `error`, `grid`, `dump`;
//! 3. `value`: kernel arguments as values;
//! 4. `backend`: the `Backend` trait, what a device does;
//! 5. its implementations: `cpu/` (the interpreter), `cuda/` (the GPU);
//! 6. `device`: a [`Device`] holds either backend and dispatches to it;
//! 7. `buffer`, then `arg` (the `PtrArg` and `ScalarArg` traits, for
//!    buffers, cudarc slices and scalars), then `desc` and `strided`: typed
//!    memory and arguments; `mesh` (ranks, symmetric buffers, runs), then
//!    `nccl` (its collectives on GPUs);
//! 8. `check` (every check of a launch, before a backend sees it), then
//!    `bounds`, then `launch`;
//! 9. `bench`, `autotune`, `testing`.

#![deny(missing_docs, rustdoc::broken_intra_doc_links)]

mod arg;
mod autotune;
mod backend;
mod bench;
mod bounds;
mod buffer;
mod check;
mod cpu;
mod cuda;
mod desc;
mod device;
mod dump;
mod element;
mod env;
mod error;
mod grid;
mod launch;
mod mesh;
pub mod mx;
mod nccl;
mod spec;
mod strided;
pub mod testing;
pub mod trace;
mod value;

pub use arg::{PtrArg, ScalarArg};
pub use autotune::{autotune, autotune_launch};
pub use bench::BenchSpec;
pub use buffer::{Buffer, BufferView};
pub use cuda::tensor_map::{EncodedTensorMap, TensorMapError, TiledTensorMap, TmaSwizzle};
pub use desc::TensorDesc;
pub use device::Device;
pub use element::{Element, F8E4M3, F8E5M2};
pub use error::{Error, OutOfBoundsReport};
pub use grid::{Grid, MAX_GRID};
pub use launch::launch;
pub use mesh::{Copied, Mesh, MeshRank, Placement, SymBuffer, SymRank};
pub use nccl::Collectives;
pub use spec::{BoundsSiteSpec, ConfigSpec, KernelSpec, ParamSpec, TimelineSliceSpec};
pub use strided::Strided;
pub use value::{KernelArg, PtrValue, ScalarValue, TensorDescValue};
