//! The kernel IR: typed SSA values, block-tensor ops and structured control
//! flow. Everything after the frontend (checks, layouts, the interpreter,
//! code generation) reads this and nothing else.
//!
//! Every op is classified once in the op table (`def`: mnemonic and
//! effects) and has an id unique in its kernel (`OpId`). The IR is built to
//! grow into the whole of TLX: task regions (`AsyncTasks`, see `tasks`) are
//! here; shared-memory buffers, mbarriers, tensor descriptors and async
//! tokens have their [`Type`] variants, and their ops will join the
//! block-tensor ones.

mod builder;
mod def;
mod kernel;
mod ops;
mod prims;
mod tasks;
mod text;
mod types;

pub use builder::Builder;
pub use def::{AsyncRole, Effects, MemorySpace, MemorySpaces, OpCode, SyncScope};
pub use kernel::{
    mesh_words, Arch, DescriptorBlock, Kernel, KernelOptions, Param, ParamKind, ValueNames,
    MAX_MESH_AXES, MAX_MESH_RANKS,
};
pub use ops::*;
pub use prims::{
    nvmma_swizzle, shared_swizzle, tma_block_rule, without_leading_ones, Choice, Family,
    FlagComparison, Interp, Lowering, Named, Prim, PrimDef, PrimSignature, Protocol, ResultTypes,
    ScaledForm, StoreReduce, Surface, TmaBox, Typing, CLC_RESPONSE_SHAPE,
};
pub use tasks::{launch_registers, task_warps, TaskRegion, TaskWarps};
pub use text::{parse, print, ParseError};
pub use types::{
    AddressSpace, BarrierType, Elem, ScalarType, SharedMemoryType, Swizzle, TensorDescriptorType,
    TensorMemoryType, TensorType, Type,
};
