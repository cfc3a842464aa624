//! Operations of the IR.
//!
//! The IR is SSA with structured control flow (`For`, `While`, `If` own
//! nested [`Block`]s), in the spirit of MLIR's `scf` dialect: no jumps, so
//! the interpreter, the code generator and the protocol checker all walk the
//! same tree. Operand types are exact: the frontend inserts every cast,
//! splat and broadcast, so an op never converts implicitly.

use super::prims::Prim;
use super::tasks::TaskRegion;
use super::types::ScalarType;

/// An SSA value: an index into [`super::Kernel::types`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for ValueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// An op's identity, unique within its kernel: the op's position in a
/// pre-order walk of the finished kernel (see [`super::Kernel::op`]). Two
/// ops from one source location (a helper inlined twice) have different ids.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

impl std::fmt::Display for OpId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

/// Where an op came from in the user's source (1-based line, 0-based column).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SrcLoc {
    pub line: u32,
    pub col: u32,
}

/// A straight-line sequence of ops. Blocks nested in control flow receive
/// `args` (the induction variable and loop-carried values) and end with a
/// terminator (`Yield` or `Condition`). The kernel body has no args and no terminator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    pub args: Vec<ValueId>,
    pub ops: Vec<Op>,
}

/// One operation: what it does, the values it defines, and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub id: OpId,
    pub kind: OpKind,
    pub results: Vec<ValueId>,
    pub loc: SrcLoc,
}

/// A literal constant. Floats are kept as f64 and rounded to the result type.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Floats: IEEE division. Integers: truncating toward zero (as C and Rust).
    Div,
    /// Remainder with the sign of the dividend (as C and Rust).
    Rem,
    /// `maximum`: for floats, NaN if either operand is NaN.
    Max,
    /// `minimum`: for floats, NaN if either operand is NaN.
    Min,
    /// Bitwise on integers, logical on `bool`.
    And,
    Or,
    Xor,
    Shl,
    /// Arithmetic for signed integers, logical for unsigned.
    Shr,
    /// Integers: the high half of the double-width product (Triton's
    /// `umulhi`), signed or unsigned as the type is.
    MulHi,
    /// f32 only: division with the GPU's fast `div.full.f32` (Triton's
    /// `fdiv(x, y, ieee_rounding=False)`), within 2 ulp of the correctly
    /// rounded quotient; `Div` is correctly rounded.
    DivFull,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    /// Bitwise not on integers, logical not on `bool`.
    Not,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Abs,
    Floor,
    Ceil,
    /// Hyperbolic tangent (`tanh.approx.f32` on the GPU: about 2^-11 relative).
    Tanh,
    /// To the nearest integer, ties to even.
    Round,
    /// Toward zero.
    Trunc,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CmpPred {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
    /// Index (i32) of the first maximum along the axis.
    Argmax,
    /// Index (i32) of the first minimum along the axis.
    Argmin,
}

/// Cache modifier of a global load or store (PTX `.ca`, `.cg`, `.cs`, ...).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum CacheModifier {
    #[default]
    None,
    /// Cache at all levels.
    Ca,
    /// Cache in L2 only.
    Cg,
    /// Streaming: likely accessed once.
    Cs,
    /// Write-back (stores).
    Wb,
    /// Write-through (stores).
    Wt,
}

/// L2 eviction priority hint.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum EvictionPolicy {
    #[default]
    Normal,
    EvictFirst,
    EvictLast,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
    And,
    Or,
    Xor,
    Exchange,
}

impl AtomicOp {
    /// Whether PTX's global `atom` performs this operation on `s`: the front
    /// end refuses the rest at the call, code generation relies on it.
    pub fn takes(self, s: ScalarType) -> bool {
        let wide_int = matches!(s, ScalarType::I32 | ScalarType::U32 | ScalarType::I64);
        match self {
            AtomicOp::Add => {
                wide_int
                    || matches!(
                        s,
                        ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 | ScalarType::F64
                    )
            }
            AtomicOp::Max | AtomicOp::Min | AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => {
                wide_int
            }
            AtomicOp::Exchange => wide_int || matches!(s, ScalarType::F32 | ScalarType::F64),
        }
    }
}

/// Whether PTX's global `atom.cas` takes `s`: 32- and 64-bit values.
pub fn cas_takes(s: ScalarType) -> bool {
    s.size_bytes() >= 4
}

/// Memory ordering of an atomic.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemSem {
    Relaxed,
    Acquire,
    Release,
    #[default]
    AcqRel,
}

/// Which threads an atomic is coherent with.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemScope {
    Cta,
    #[default]
    Gpu,
    System,
}

/// How `dot` treats f32 inputs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum DotPrecision {
    /// f32 inputs are rounded to tf32 (10-bit mantissa) on tensor cores.
    #[default]
    Tf32,
    /// Full f32 products (no tensor cores for f32 inputs).
    Ieee,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// A literal splatted to the result's type.
    Constant(Literal),
    /// `program_id(axis)`: i32 scalar.
    ProgramId {
        axis: u8,
    },
    /// `num_programs(axis)`: i32 scalar.
    NumPrograms {
        axis: u8,
    },
    /// `multiple_of(value, factor)`: `value` (an integer or pointer scalar)
    /// unchanged, with the promise that it is a multiple of `factor` (a power
    /// of two; bytes for a pointer). Code generation uses it to prove vector
    /// accesses aligned; the interpreter checks it.
    MultipleOf {
        value: ValueId,
        factor: u32,
    },
    /// `cluster_cta_rank()`: the program's rank in its cluster, i32 scalar
    /// (x fastest, as PTX's `%cluster_ctarank`).
    ClusterCtaRank,
    /// `cluster_barrier()`: every thread of every program of the cluster
    /// arrives (release) and waits for all the others (acquire), so writes
    /// before it, global memory included, are visible to the cluster after it.
    ClusterBarrier,
    /// `arange(start, end)`: i32 tensor `[end - start]` holding `start..end`.
    Arange {
        start: i64,
        end: i64,
    },
    /// A scalar repeated to the result's shape.
    Splat(ValueId),
    /// Size-1 dimensions repeated to the result's shape (same rank).
    Broadcast(ValueId),
    /// A new size-1 dimension inserted at `axis`.
    ExpandDims {
        value: ValueId,
        axis: usize,
    },
    /// Same elements in row-major order, new shape.
    Reshape(ValueId),
    /// Dimensions permuted: result dim `i` is operand dim `perm[i]`.
    Trans {
        value: ValueId,
        perm: Vec<usize>,
    },
    /// Element type conversion to the result's type; floats round to nearest even,
    /// float-to-int truncates toward zero and saturates (NaN becomes 0).
    Cast(ValueId),
    /// Reinterpret the bits as the result's element type of the same size.
    Bitcast(ValueId),
    Binary {
        op: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    Unary {
        op: UnaryOp,
        value: ValueId,
    },
    /// Elementwise comparison; the result is `bool`.
    Compare {
        pred: CmpPred,
        lhs: ValueId,
        rhs: ValueId,
    },
    /// Elementwise `cond ? on_true : on_false` (Triton's `where`).
    Select {
        cond: ValueId,
        on_true: ValueId,
        on_false: ValueId,
    },
    /// `a * b + c` rounded once.
    Fma {
        a: ValueId,
        b: ValueId,
        c: ValueId,
    },
    /// Pointer plus an integer offset counted in pointee elements.
    AddPtr {
        ptr: ValueId,
        offset: ValueId,
    },
    /// Global load. Masked-off lanes read `other` (or an unspecified value when absent)
    /// and touch no memory.
    Load {
        ptr: ValueId,
        mask: Option<ValueId>,
        other: Option<ValueId>,
        cache: CacheModifier,
        eviction: EvictionPolicy,
        volatile: bool,
    },
    /// Global store; masked-off lanes touch no memory. No results.
    Store {
        ptr: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
        cache: CacheModifier,
        eviction: EvictionPolicy,
    },
    /// Reduction along `axis`; the result drops that dimension. `Argmax`/`Argmin` give i32.
    Reduce {
        value: ValueId,
        axis: usize,
        kind: ReduceKind,
    },
    /// A scan by `combine` (`Add`, `Mul`, `Max` or `Min`): results are the
    /// exclusive prefix (operand's shape; the combine's identity first) and the
    /// total (the operand's shape without `axis`). `reverse` scans from the
    /// end. TLE's `cumsum` is the `Add` scan; `cummax`, `cummin` and `cumprod`
    /// combine the prefix with the element.
    Scan {
        value: ValueId,
        axis: usize,
        reverse: bool,
        combine: BinaryOp,
    },
    /// `acc + a @ b` for rank-2 tiles `[M, K] x [K, N] -> [M, N]`, accumulated in the
    /// accumulator's type (f32 for float inputs, i32 for i8).
    Dot {
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        precision: DotPrecision,
    },
    /// Atomic read-modify-write per element; the result is the old value.
    AtomicRmw {
        op: AtomicOp,
        ptr: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
        sem: MemSem,
        scope: MemScope,
    },
    /// Atomic compare-and-swap per element; the result is the old value.
    AtomicCas {
        ptr: ValueId,
        cmp: ValueId,
        value: ValueId,
        sem: MemSem,
        scope: MemScope,
    },
    /// Triton's `join`: two tensors of one shape side by side along a new
    /// last dimension of size 2 (`a` at index 0).
    Join {
        a: ValueId,
        b: ValueId,
    },
    /// Triton's `split`: a tensor whose last dimension has size 2, as its two
    /// halves along it (two results, that dimension dropped).
    Split(ValueId),
    /// TLE's `extract_tile`: the operand split into tiles of the result's shape,
    /// and the tile at grid coordinates `index` taken.
    ExtractTile {
        value: ValueId,
        index: Vec<usize>,
    },
    /// TLE's `insert_tile`: `value` with the tile at grid coordinates `index` replaced.
    InsertTile {
        value: ValueId,
        tile: ValueId,
        index: Vec<usize>,
    },
    /// `for iv in (lower..upper).step_by(step)` with loop-carried values. The body's
    /// args are `[iv, carried...]` and it ends with `Yield(next carried)`; the results
    /// are the final carried values. `step` must be positive.
    For {
        lower: ValueId,
        upper: ValueId,
        step: ValueId,
        inits: Vec<ValueId>,
        body: Block,
    },
    /// `while`: `cond` takes the carried values and ends with `Condition`; `body` takes
    /// them too and ends with `Yield`. The results are the carried values on exit.
    While {
        inits: Vec<ValueId>,
        cond: Block,
        body: Block,
    },
    /// Both blocks take no args and end with `Yield` of the results.
    If {
        cond: ValueId,
        then_block: Block,
        else_block: Block,
    },
    /// TLX's `async_tasks`: the tasks run at the same time, each replica on
    /// warps of its own (see [`super::task_warps`]), over the program's
    /// memory and values defined before the op; the op completes when every
    /// task has finished. Only at the top level of the kernel body.
    AsyncTasks {
        tasks: Vec<TaskRegion>,
    },
    /// TLX's `async_task_replica_id()`: i32 scalar, the replica of the
    /// enclosing task that runs it (0 for a task without copies).
    AsyncTaskReplicaId,
    /// A TLX primitive (see [`Prim`]): its SSA operands and its
    /// compile-time immediates, as its row of the table names them.
    Prim {
        prim: Prim,
        args: Vec<ValueId>,
        imms: Vec<i64>,
    },
    /// Terminator: the values a nested block hands back.
    Yield(Vec<ValueId>),
    /// Terminator of a `While`'s `cond` block: continue while true.
    Condition(ValueId),
    /// `device_print(prefix, values...)`.
    Print {
        prefix: String,
        values: Vec<ValueId>,
    },
    /// `device_assert(cond, message)`: every element of `cond` must hold.
    Assert {
        cond: ValueId,
        message: String,
    },
}

impl OpKind {
    /// Whether the op reads and writes only its task's own values: no
    /// memory, barrier, other task or output. Such ops commute with
    /// everything other tasks do, so an interpreter may run a task's
    /// consecutive local ops without interleaving others between them.
    /// (Control flow counts as local; what its blocks hold is judged op by op.)
    pub fn is_task_local(&self) -> bool {
        use OpKind::*;
        match self {
            Constant(_)
            | ProgramId { .. }
            | NumPrograms { .. }
            | MultipleOf { .. }
            | ClusterCtaRank
            | Arange { .. }
            | Splat { .. }
            | Broadcast { .. }
            | ExpandDims { .. }
            | Reshape { .. }
            | Trans { .. }
            | Cast { .. }
            | Bitcast { .. }
            | Binary { .. }
            | Unary { .. }
            | Compare { .. }
            | Select { .. }
            | Fma { .. }
            | AddPtr { .. }
            | Reduce { .. }
            | Scan { .. }
            | Dot { .. }
            | Join { .. }
            | Split { .. }
            | ExtractTile { .. }
            | InsertTile { .. }
            | For { .. }
            | While { .. }
            | If { .. }
            | AsyncTaskReplicaId
            | Yield(_)
            | Condition(_) => true,
            ClusterBarrier
            | Load { .. }
            | Store { .. }
            | AtomicRmw { .. }
            | AtomicCas { .. }
            | AsyncTasks { .. }
            | Prim { .. }
            | Print { .. }
            | Assert { .. } => false,
        }
    }

    /// The SSA operands this op reads directly (not those inside nested blocks).
    pub fn operands(&self) -> Vec<ValueId> {
        use OpKind::*;
        match self {
            Constant(_)
            | ProgramId { .. }
            | NumPrograms { .. }
            | ClusterCtaRank
            | ClusterBarrier
            | Arange { .. }
            | AsyncTasks { .. }
            | AsyncTaskReplicaId => vec![],
            Splat(v) | Broadcast(v) | Reshape(v) | Cast(v) | Bitcast(v) | Split(v) => vec![*v],
            MultipleOf { value, .. } => vec![*value],
            ExpandDims { value, .. }
            | Trans { value, .. }
            | Unary { value, .. }
            | Reduce { value, .. }
            | Scan { value, .. }
            | ExtractTile { value, .. } => vec![*value],
            Binary { lhs, rhs, .. } | Compare { lhs, rhs, .. } => vec![*lhs, *rhs],
            Join { a, b } => vec![*a, *b],
            Select {
                cond,
                on_true,
                on_false,
            } => vec![*cond, *on_true, *on_false],
            Fma { a, b, c } => vec![*a, *b, *c],
            AddPtr { ptr, offset } => vec![*ptr, *offset],
            Load {
                ptr, mask, other, ..
            } => [Some(*ptr), *mask, *other].into_iter().flatten().collect(),
            Store {
                ptr, value, mask, ..
            } => [Some(*ptr), Some(*value), *mask]
                .into_iter()
                .flatten()
                .collect(),
            Dot { a, b, acc, .. } => vec![*a, *b, *acc],
            AtomicRmw {
                ptr, value, mask, ..
            } => [Some(*ptr), Some(*value), *mask]
                .into_iter()
                .flatten()
                .collect(),
            AtomicCas {
                ptr, cmp, value, ..
            } => vec![*ptr, *cmp, *value],
            InsertTile { value, tile, .. } => vec![*value, *tile],
            For {
                lower,
                upper,
                step,
                inits,
                ..
            } => [*lower, *upper, *step]
                .into_iter()
                .chain(inits.iter().copied())
                .collect(),
            While { inits, .. } => inits.clone(),
            If { cond, .. } => vec![*cond],
            Yield(vs) | Prim { args: vs, .. } => vs.clone(),
            Condition(v) => vec![*v],
            Print { values, .. } => values.clone(),
            Assert { cond, .. } => vec![*cond],
        }
    }

    /// The nested blocks of a control-flow op, in execution order.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::While { cond, body, .. } => vec![cond, body],
            OpKind::If {
                then_block,
                else_block,
                ..
            } => vec![then_block, else_block],
            OpKind::AsyncTasks { tasks } => tasks.iter().map(|t| &t.body).collect(),
            _ => vec![],
        }
    }

    /// For `for`, `while` and `if`: each value the op carries, as the
    /// values that hold it at each point (the init, the blocks' arguments,
    /// what the blocks yield, the op's result). Analyses that follow values
    /// through control flow treat each group as one.
    pub fn carried_values(&self, results: &[ValueId]) -> Vec<Vec<ValueId>> {
        fn ends(block: &Block) -> &[ValueId] {
            match block.ops.last().map(|op| &op.kind) {
                Some(OpKind::Yield(values)) => values,
                _ => &[],
            }
        }
        let at = |vs: &[ValueId], i: usize| vs.get(i).copied();
        match self {
            OpKind::For { inits, body, .. } => (0..inits.len())
                .map(|i| {
                    // The body's first argument is the counter.
                    [
                        at(inits, i),
                        at(&body.args, i + 1),
                        at(ends(body), i),
                        at(results, i),
                    ]
                    .into_iter()
                    .flatten()
                    .collect()
                })
                .collect(),
            OpKind::While { inits, cond, body } => (0..inits.len())
                .map(|i| {
                    [
                        at(inits, i),
                        at(&cond.args, i),
                        at(&body.args, i),
                        at(ends(body), i),
                        at(results, i),
                    ]
                    .into_iter()
                    .flatten()
                    .collect()
                })
                .collect(),
            OpKind::If {
                then_block,
                else_block,
                ..
            } => (0..results.len())
                .map(|i| {
                    [
                        at(results, i),
                        at(ends(then_block), i),
                        at(ends(else_block), i),
                    ]
                    .into_iter()
                    .flatten()
                    .collect()
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// [`OpKind::blocks`], mutable.
    pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::While { cond, body, .. } => vec![cond, body],
            OpKind::If {
                then_block,
                else_block,
                ..
            } => vec![then_block, else_block],
            OpKind::AsyncTasks { tasks } => tasks.iter_mut().map(|t| &mut t.body).collect(),
            _ => vec![],
        }
    }
}

/// The element type that integer `arange`, `program_id` and loop counters use.
pub const INDEX_TYPE: ScalarType = ScalarType::I32;
