//! A kernel specialized for one configuration: its parameters, options,
//! body, and the type of every value.

use super::ops::{Block, Op, OpId, ValueId};
use super::types::{ScalarType, TensorDescriptorType, Type};

/// The most ranks a device mesh has (the GPUs of one host): the runtime
/// refuses larger meshes, and `distributed_barrier` signals every peer
/// from one tile of this many lanes.
pub const MAX_MESH_RANKS: usize = 8;

/// The most axes a device mesh has (`Mesh::reshape`, a kernel's `Mesh<N>`).
pub const MAX_MESH_AXES: usize = 3;

/// Where things are in each rank's barrier words (an `i32` symmetric buffer
/// the runtime zeroes before each run): the whole mesh's barrier (its
/// programs' count, then the ranks' arrivals), the mesh's extents (padded
/// with 1s to [`MAX_MESH_AXES`]), then one such pair per axis for the
/// barriers over the ranks along that axis.
pub mod mesh_words {
    use super::MAX_MESH_AXES;
    /// The whole mesh's count and arrivals.
    pub const BARRIER: usize = 0;
    /// The extent of axis `a` is word `DIMS + a`.
    pub const DIMS: usize = 2;
    /// The pair of the barrier along axis `a` starts at `AXIS_BARRIERS + 2 a`.
    pub const AXIS_BARRIERS: usize = DIMS + MAX_MESH_AXES;
    /// Words per rank.
    pub const LEN: usize = AXIS_BARRIERS + 2 * MAX_MESH_AXES;
}

/// A kernel parameter as the launcher passes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    /// The value the body uses for this parameter.
    pub value: ValueId,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A global pointer, passed as a 64-bit address.
    Ptr(ScalarType),
    /// A scalar passed by value (`bool` travels as one byte, 0 or 1).
    Scalar(ScalarType),
    /// A TMA descriptor moving blocks of this shape, passed by value as a
    /// 128-byte `__grid_constant__` parameter; the launcher encodes it from
    /// the caller's tensor with the box and swizzle the kernel was compiled for.
    TensorDesc(DescriptorBlock),
}

/// The element type and block shape of a tensor-descriptor parameter
/// (TMA moves boxes of up to 5 dimensions).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DescriptorBlock {
    elem: ScalarType,
    rank: u8,
    dims: [u32; 5],
}

impl DescriptorBlock {
    /// `None` unless the rank is 1..=5 and every dimension 1..=256 (TMA's box limits).
    pub fn new(elem: ScalarType, shape: &[usize]) -> Option<DescriptorBlock> {
        if !(1..=5).contains(&shape.len()) || shape.iter().any(|&d| !(1..=256).contains(&d)) {
            return None;
        }
        let mut dims = [0; 5];
        for (slot, &d) in dims.iter_mut().zip(shape) {
            *slot = d as u32;
        }
        Some(DescriptorBlock {
            elem,
            rank: shape.len() as u8,
            dims,
        })
    }

    /// [`DescriptorBlock::new`] for a block already checked, in a constant
    /// (the specs `#[tlx::kernel]` emits); dimensions past the fifth are ignored.
    pub const fn from_dims(elem: ScalarType, shape: &[u32]) -> DescriptorBlock {
        let mut dims = [0; 5];
        let mut i = 0;
        while i < shape.len() && i < 5 {
            dims[i] = shape[i];
            i += 1;
        }
        DescriptorBlock {
            elem,
            rank: i as u8,
            dims,
        }
    }

    pub fn elem(&self) -> ScalarType {
        self.elem
    }

    /// The block's dimensions, outermost first.
    pub fn shape(&self) -> Vec<usize> {
        self.dims[..usize::from(self.rank)]
            .iter()
            .map(|&d| d as usize)
            .collect()
    }
}

impl ParamKind {
    /// The IR type of the parameter's value in the body.
    pub fn value_type(self) -> Type {
        match self {
            ParamKind::Ptr(s) => Type::ptr(s),
            ParamKind::Scalar(s) => Type::scalar(s),
            ParamKind::TensorDesc(block) => {
                Type::TensorDescriptor(TensorDescriptorType::new(block.elem, block.shape()))
            }
        }
    }
}

/// GPU architectures code can be generated for.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Hopper (H100/H200) with the arch-specific features (wgmma, setmaxnreg).
    #[default]
    Sm90a,
    /// Blackwell datacenter (B200), compiled and checked by `ptxas` but not run here.
    Sm100a,
}

impl Arch {
    pub const ALL: [Arch; 2] = [Arch::Sm90a, Arch::Sm100a];

    /// The PTX `.target` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
        }
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The compute capability (major, minor) a device must have to run this code.
    pub fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm90a => (9, 0),
            Arch::Sm100a => (10, 0),
        }
    }
}

/// Launch-shape options from the kernel attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelOptions {
    /// Warps per program (CTA); the block has `32 * num_warps` threads.
    pub num_warps: u32,
    /// Software pipelining of `for` loops: loads are issued `num_stages - 1`
    /// iterations ahead (1: not pipelined).
    pub num_stages: u32,
    /// Programs per cluster along each grid axis (TLX's `ctas_per_cga`);
    /// `[1, 1, 1]`: no clusters. A cluster's programs run at the same time and
    /// may synchronize with `cluster_barrier()`.
    pub cluster: [u32; 3],
    /// Triton's `maxnreg`: at most this many registers per thread (PTX
    /// `.maxnreg`), so that more programs fit on an SM; `None`: ptxas chooses.
    pub maxnreg: Option<u32>,
    /// Compile every `barrier_wait` with this timeout: a wait that spins
    /// longer prints its source line, barrier and phase, and traps, so a
    /// hang becomes an error with a location; `None`: plain waits.
    pub mbar_timeout_ns: Option<u64>,
    /// Launched as a programmatic dependent of the kernel before it on the
    /// stream (PDL, Triton's `launch_pdl`): it may start once every program
    /// of that kernel has run `gdc_launch_dependents()` (or exited), before
    /// that kernel's memory is complete; `gdc_wait()` waits for it.
    pub launch_pdl: bool,
}

impl KernelOptions {
    /// Programs per cluster.
    pub fn cluster_size(&self) -> u32 {
        self.cluster.iter().product()
    }
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            num_warps: 4,
            // Pipelining through shared memory made the streaming kernels
            // measured so far slower on H100 (BENCHMARKS.md): opt in per kernel.
            num_stages: 1,
            cluster: [1, 1, 1],
            maxnreg: None,
            launch_pdl: false,
            mbar_timeout_ns: None,
        }
    }
}

/// A kernel in IR form, specialized for one configuration of its constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// The compile-time constants this specialization was built with, in declaration order.
    pub consts: Vec<(String, i64)>,
    pub options: KernelOptions,
    pub body: Block,
    /// The type of each value, indexed by [`ValueId`].
    pub types: Vec<Type>,
    /// The user's source file, for messages (may be empty).
    pub source_file: String,
    /// The user's names of the shared buffers and barriers the kernel
    /// allocates (`let empty = alloc_barriers(..)`), for messages.
    pub names: ValueNames,
}

/// Names the user gave values with `let`, kept for messages. They do not
/// change what a kernel means: kernels that differ only in them are equal,
/// and the text form leaves them out.
#[derive(Clone, Debug, Default)]
pub struct ValueNames(std::collections::HashMap<ValueId, String>);

impl ValueNames {
    pub fn set(&mut self, value: ValueId, name: impl Into<String>) {
        self.0.insert(value, name.into());
    }

    pub fn get(&self, value: ValueId) -> Option<&str> {
        self.0.get(&value).map(String::as_str)
    }
}

impl PartialEq for ValueNames {
    fn eq(&self, _: &ValueNames) -> bool {
        true
    }
}

impl Kernel {
    pub fn type_of(&self, v: ValueId) -> &Type {
        &self.types[v.index()]
    }

    /// The highest hardware barrier id the compiler uses: 0 synchronizes
    /// the program, and replica `i` of an `async_tasks` region has `i + 1`;
    /// named barriers of the kernel's own take ids above it.
    pub fn named_barriers_reserved(&self) -> u32 {
        self.body
            .ops
            .iter()
            .filter_map(|op| match &op.kind {
                super::OpKind::AsyncTasks { tasks } => {
                    Some(tasks.iter().map(|t| t.replicate).sum::<u32>())
                }
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Warps a program launches with: the kernel's own, and those of the
    /// tasks of its `async_tasks` regions.
    pub fn total_warps(&self) -> u32 {
        self.body
            .ops
            .iter()
            .filter_map(|op| match &op.kind {
                super::OpKind::AsyncTasks { tasks } => {
                    super::task_warps(tasks, self.options.num_warps)
                        .iter()
                        .map(|t| t.held_end())
                        .max()
                }
                _ => None,
            })
            .fold(self.options.num_warps, u32::max)
    }

    pub fn threads_per_program(&self) -> u32 {
        self.total_warps() * 32
    }

    /// Whether any op of the kernel, wherever it is nested, is `prim`.
    pub fn uses_prim(&self, prim: super::Prim) -> bool {
        fn any(block: &Block, prim: super::Prim) -> bool {
            block.ops.iter().any(|op| {
                matches!(op.kind, super::OpKind::Prim { prim: p, .. } if p == prim)
                    || op.kind.blocks().into_iter().any(|b| any(b, prim))
            })
        }
        any(&self.body, prim)
    }

    /// The op with identity `id`, wherever it is nested.
    pub fn op(&self, id: OpId) -> Option<&Op> {
        fn find(block: &Block, id: OpId) -> Option<&Op> {
            block.ops.iter().find_map(|op| {
                if op.id == id {
                    Some(op)
                } else {
                    op.kind.blocks().into_iter().find_map(|b| find(b, id))
                }
            })
        }
        find(&self.body, id)
    }

    /// Gives every op its pre-order position as its id. The builder and the
    /// parser both end with it, so a kernel and its text agree on ids
    /// without the text spelling them out.
    pub(crate) fn number_ops(&mut self) {
        fn number(block: &mut Block, next: &mut u32) {
            for op in &mut block.ops {
                op.id = OpId(*next);
                *next += 1;
                for nested in op.kind.blocks_mut() {
                    number(nested, next);
                }
            }
        }
        number(&mut self.body, &mut 0);
    }
}
