//! The kernel IR: typed SSA values, block-tensor ops and structured control
//! flow. Everything after the frontend (checks, layouts, the interpreter,
//! code generation) reads this and nothing else.
//!
//! The IR is built to grow into the whole of TLX: shared-memory buffers and
//! their views, mbarriers as values, asynchronous copies and their
//! completion, task regions with their own warp counts and cluster scope will
//! be new element types and ops beside the block-tensor ones here.

mod builder;
mod def;
mod kernel;
mod ops;
mod tasks;
mod text;
mod types;

pub use builder::Builder;
pub use def::{AsyncRole, Effects, MemorySpace, MemorySpaces, OpCode, SyncScope};
pub use kernel::{Arch, Kernel, KernelOptions, Param, ParamKind};
pub use ops::*;
pub use tasks::{task_warps, TaskRegion, TaskWarps};
pub use text::{parse, print, ParseError};
pub use types::{
    AddressSpace, BarrierType, Elem, ScalarType, SharedMemoryType, Swizzle, TensorDescriptorType,
    TensorType, Type,
};
