//! The op table: every [`OpKind`] is classified here exactly once, with its
//! mnemonic (its name in the IR text) and its [`Effects`]. The matches have
//! no wildcard arm, so a new op does not compile until it is classified; the
//! printer, parser, verifier, interpreter and code generator ask this table
//! instead of keeping lists of their own.

use super::ops::{BinaryOp, OpKind, UnaryOp};
use super::prims::Prim;

/// Where the memory an op reads or writes lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemorySpace {
    Global,
    /// The CTA's shared memory (and, through cluster addressing, its peers').
    Shared,
    /// Blackwell's tensor memory.
    Tensor,
}

/// A set of [`MemorySpace`]s.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemorySpaces(u8);

impl MemorySpaces {
    pub const NONE: MemorySpaces = MemorySpaces(0);

    pub const fn only(space: MemorySpace) -> MemorySpaces {
        MemorySpaces(1 << space as u8)
    }

    /// Both sets.
    pub const fn with(self, space: MemorySpace) -> MemorySpaces {
        MemorySpaces(self.0 | MemorySpaces::only(space).0)
    }

    pub fn contains(self, space: MemorySpace) -> bool {
        self.0 & MemorySpaces::only(space).0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// The threads a synchronizing op waits for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SyncScope {
    /// The threads of the program (CTA), or of the region it runs in.
    Cta,
    /// Every thread of every program of the cluster.
    Cluster,
}

/// An op's part in an asynchronous operation (a copy, an MMA, a barrier
/// phase) that proceeds after the op itself has executed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AsyncRole {
    Starts,
    Completes,
}

/// What an op does beyond computing its results from its operands.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Effects {
    pub reads: MemorySpaces,
    pub writes: MemorySpaces,
    pub sync: Option<SyncScope>,
    pub async_role: Option<AsyncRole>,
    /// Writes to the host's output or may stop the kernel (print, assert).
    pub host: bool,
    /// Owns nested blocks, whose ops' effects are its own.
    pub regions: bool,
    /// Ends a nested block.
    pub terminator: bool,
    /// A result element may come from an operand element another thread
    /// holds, so code generation moves data between threads.
    pub cross_thread: bool,
    /// Reads state that changes by itself (a clock): never merged with
    /// another read, removed or moved.
    pub volatile: bool,
    /// Its buffer operands are read through the async proxy until it
    /// completes (an MMA, a TMA store): the read stays open until a wait
    /// retires it, and needs a proxy fence after generic writes.
    pub async_reads: bool,
}

impl Effects {
    /// Computes its results from its operands and nothing else.
    pub const PURE: Effects = Effects {
        reads: MemorySpaces::NONE,
        writes: MemorySpaces::NONE,
        sync: None,
        async_role: None,
        host: false,
        regions: false,
        terminator: false,
        cross_thread: false,
        volatile: false,
        async_reads: false,
    };

    /// Pure, but a result element may depend on elements other threads hold.
    const MOVES_DATA: Effects = Effects {
        cross_thread: true,
        ..Effects::PURE
    };

    const REGIONS: Effects = Effects {
        regions: true,
        ..Effects::PURE
    };

    const TERMINATOR: Effects = Effects {
        terminator: true,
        ..Effects::PURE
    };

    const HOST: Effects = Effects {
        host: true,
        ..Effects::PURE
    };

    const fn reads(space: MemorySpace) -> Effects {
        Effects {
            reads: MemorySpaces::only(space),
            ..Effects::PURE
        }
    }

    const fn writes(space: MemorySpace) -> Effects {
        Effects {
            writes: MemorySpaces::only(space),
            ..Effects::PURE
        }
    }

    const fn read_modify_write(space: MemorySpace) -> Effects {
        Effects {
            reads: MemorySpaces::only(space),
            writes: MemorySpaces::only(space),
            ..Effects::PURE
        }
    }

    const fn syncs(scope: SyncScope) -> Effects {
        Effects {
            sync: Some(scope),
            ..Effects::PURE
        }
    }

    /// No memory, synchronization, asynchronous operation, host output,
    /// regions or control transfer: the op may be removed, duplicated,
    /// reordered or recomputed freely.
    pub fn is_pure(&self) -> bool {
        self.reads.is_empty()
            && self.writes.is_empty()
            && self.sync.is_none()
            && self.async_role.is_none()
            && !self.host
            && !self.regions
            && !self.terminator
            && !self.volatile
    }

    /// Pure, and each thread computes its result elements from the operand
    /// elements it holds: such ops can be redone in whatever layout a user
    /// wants (the pipeliner's address ops).
    pub fn is_thread_local_pure(&self) -> bool {
        self.is_pure() && !self.cross_thread
    }
}

/// Declares [`OpCode`] and the list of its fieldless variants in one place,
/// so that [`OpCode::all`] cannot miss one.
macro_rules! op_codes {
    ($($(#[$doc:meta])* $code:ident),* $(,)?) => {
        /// What an [`OpKind`] is, without its operands and attributes: the
        /// key of the op table. Binary and unary ops carry their operator,
        /// which names them in the text.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum OpCode {
            Binary(BinaryOp),
            Unary(UnaryOp),
            Prim(Prim),
            $($(#[$doc])* $code),*
        }

        const FIELDLESS_CODES: &[OpCode] = &[$(OpCode::$code),*];
    };
}

op_codes! {
    Constant,
    ProgramId,
    NumPrograms,
    MultipleOf,
    ClusterCtaRank,
    ClusterBarrier,
    Arange,
    Splat,
    Broadcast,
    ExpandDims,
    Reshape,
    Trans,
    Cast,
    Bitcast,
    Compare,
    Select,
    Fma,
    AddPtr,
    Load,
    Store,
    Reduce,
    Scan,
    Dot,
    AtomicRmw,
    AtomicCas,
    Join,
    Split,
    ExtractTile,
    InsertTile,
    For,
    While,
    If,
    Yield,
    Condition,
    Print,
    Assert,
    AsyncTasks,
    AsyncTaskReplicaId,
}

impl OpCode {
    /// Every op code, each once.
    pub fn all() -> impl Iterator<Item = OpCode> {
        BinaryOp::ALL
            .into_iter()
            .map(OpCode::Binary)
            .chain(UnaryOp::ALL.into_iter().map(OpCode::Unary))
            .chain(Prim::ALL.iter().copied().map(OpCode::Prim))
            .chain(FIELDLESS_CODES.iter().copied())
    }

    /// The op code the IR text names `mnemonic`.
    pub fn from_mnemonic(mnemonic: &str) -> Option<OpCode> {
        OpCode::all().find(|c| c.mnemonic() == mnemonic)
    }

    /// The op's name in the IR text.
    pub fn mnemonic(self) -> &'static str {
        use OpCode::*;
        match self {
            Binary(op) => op.mnemonic(),
            Unary(op) => op.mnemonic(),
            Prim(p) => p.mnemonic(),
            Constant => "constant",
            ProgramId => "program_id",
            NumPrograms => "num_programs",
            MultipleOf => "multiple_of",
            ClusterCtaRank => "cluster_cta_rank",
            ClusterBarrier => "cluster_barrier",
            Arange => "arange",
            Splat => "splat",
            Broadcast => "broadcast",
            ExpandDims => "expand_dims",
            Reshape => "reshape",
            Trans => "trans",
            Cast => "cast",
            Bitcast => "bitcast",
            Compare => "cmp",
            Select => "select",
            Fma => "fma",
            AddPtr => "addptr",
            Load => "load",
            Store => "store",
            Reduce => "reduce",
            Scan => "scan",
            Dot => "dot",
            AtomicRmw => "atomic_rmw",
            AtomicCas => "atomic_cas",
            Join => "join",
            Split => "split",
            ExtractTile => "extract_tile",
            InsertTile => "insert_tile",
            For => "for",
            While => "while",
            If => "if",
            Yield => "yield",
            Condition => "condition",
            Print => "print",
            Assert => "assert",
            AsyncTasks => "async_tasks",
            AsyncTaskReplicaId => "async_task_replica_id",
        }
    }

    /// The op's name in the kernel language, for messages to its author.
    pub fn source_name(self) -> &'static str {
        match self {
            OpCode::Select => "where",
            OpCode::Print => "device_print",
            OpCode::Assert => "device_assert",
            // Every other op is written as the IR names it.
            other => other.mnemonic(),
        }
    }

    /// What the op does beyond computing its results.
    pub fn effects(self) -> Effects {
        use MemorySpace::Global;
        use OpCode::*;
        match self {
            Binary(_) | Unary(_) | Constant | ProgramId | NumPrograms | MultipleOf
            | ClusterCtaRank | Arange | Splat | Broadcast | ExpandDims | Cast | Bitcast
            | Compare | Select | Fma | AddPtr | AsyncTaskReplicaId => Effects::PURE,
            Reshape | Trans | Reduce | Scan | Dot | Join | Split | ExtractTile | InsertTile => {
                Effects::MOVES_DATA
            }
            Load => Effects::reads(Global),
            Store => Effects::writes(Global),
            AtomicRmw | AtomicCas => Effects::read_modify_write(Global),
            // Also orders memory: writes before it are visible to the cluster after it.
            ClusterBarrier => Effects::syncs(SyncScope::Cluster),
            Prim(p) => p.effects(),
            For | While | If | AsyncTasks => Effects::REGIONS,
            Yield | Condition => Effects::TERMINATOR,
            Print | Assert => Effects::HOST,
        }
    }
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 14] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Shl,
        BinaryOp::Shr,
        BinaryOp::MulHi,
        BinaryOp::DivFull,
    ];

    pub fn mnemonic(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
            BinaryOp::MulHi => "mulhi",
            BinaryOp::DivFull => "divfull",
        }
    }
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 16] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Abs,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Tanh,
        UnaryOp::Round,
        UnaryOp::Trunc,
    ];

    /// Whether PTX has an exact (correctly rounded) instruction for the op
    /// on every float type, f64 included; the others are f32 approximations.
    pub fn is_exact(self) -> bool {
        matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Trunc
                | UnaryOp::Sqrt
        )
    }

    pub fn mnemonic(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Abs => "abs",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Round => "round",
            UnaryOp::Trunc => "trunc",
        }
    }
}

impl OpKind {
    /// The op's entry in the table.
    pub fn code(&self) -> OpCode {
        match self {
            OpKind::Binary { op, .. } => OpCode::Binary(*op),
            OpKind::Unary { op, .. } => OpCode::Unary(*op),
            OpKind::Prim { prim, .. } => OpCode::Prim(*prim),
            OpKind::Constant(_) => OpCode::Constant,
            OpKind::ProgramId { .. } => OpCode::ProgramId,
            OpKind::NumPrograms { .. } => OpCode::NumPrograms,
            OpKind::MultipleOf { .. } => OpCode::MultipleOf,
            OpKind::ClusterCtaRank => OpCode::ClusterCtaRank,
            OpKind::ClusterBarrier => OpCode::ClusterBarrier,
            OpKind::Arange { .. } => OpCode::Arange,
            OpKind::Splat(_) => OpCode::Splat,
            OpKind::Broadcast(_) => OpCode::Broadcast,
            OpKind::ExpandDims { .. } => OpCode::ExpandDims,
            OpKind::Reshape(_) => OpCode::Reshape,
            OpKind::Trans { .. } => OpCode::Trans,
            OpKind::Cast(_) => OpCode::Cast,
            OpKind::Bitcast(_) => OpCode::Bitcast,
            OpKind::Compare { .. } => OpCode::Compare,
            OpKind::Select { .. } => OpCode::Select,
            OpKind::Fma { .. } => OpCode::Fma,
            OpKind::AddPtr { .. } => OpCode::AddPtr,
            OpKind::Load { .. } => OpCode::Load,
            OpKind::Store { .. } => OpCode::Store,
            OpKind::Reduce { .. } => OpCode::Reduce,
            OpKind::Scan { .. } => OpCode::Scan,
            OpKind::Dot { .. } => OpCode::Dot,
            OpKind::AtomicRmw { .. } => OpCode::AtomicRmw,
            OpKind::AtomicCas { .. } => OpCode::AtomicCas,
            OpKind::Join { .. } => OpCode::Join,
            OpKind::Split(_) => OpCode::Split,
            OpKind::ExtractTile { .. } => OpCode::ExtractTile,
            OpKind::InsertTile { .. } => OpCode::InsertTile,
            OpKind::For { .. } => OpCode::For,
            OpKind::While { .. } => OpCode::While,
            OpKind::If { .. } => OpCode::If,
            OpKind::Yield(_) => OpCode::Yield,
            OpKind::Condition(_) => OpCode::Condition,
            OpKind::Print { .. } => OpCode::Print,
            OpKind::Assert { .. } => OpCode::Assert,
            OpKind::AsyncTasks { .. } => OpCode::AsyncTasks,
            OpKind::AsyncTaskReplicaId => OpCode::AsyncTaskReplicaId,
        }
    }

    pub fn mnemonic(&self) -> &'static str {
        self.code().mnemonic()
    }

    pub fn effects(&self) -> Effects {
        self.code().effects()
    }

    /// True for ops that end a nested block.
    pub fn is_terminator(&self) -> bool {
        self.effects().terminator
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn mnemonics_are_unique_and_name_their_op() {
        let mut seen = HashSet::new();
        for code in OpCode::all() {
            assert!(seen.insert(code.mnemonic()), "{code:?}: duplicate mnemonic");
            assert_eq!(OpCode::from_mnemonic(code.mnemonic()), Some(code));
        }
        assert_eq!(OpCode::from_mnemonic("frobnicate"), None);
    }

    /// The set the pipeliner's `is_address_op` listed before the table
    /// existed: ops that compute addresses and masks.
    #[test]
    fn thread_local_pure_ops_are_the_old_address_ops() {
        use OpCode::*;
        let old: HashSet<OpCode> = [
            Constant,
            ProgramId,
            NumPrograms,
            ClusterCtaRank,
            MultipleOf,
            Arange,
            Splat,
            Broadcast,
            ExpandDims,
            Cast,
            Bitcast,
            Compare,
            Select,
            Fma,
            AddPtr,
        ]
        .into_iter()
        .chain(BinaryOp::ALL.map(Binary))
        .chain(UnaryOp::ALL.map(Unary))
        .collect();
        for code in OpCode::all() {
            // Added after the list: address ops like `program_id`.
            let new = matches!(
                code,
                AsyncTaskReplicaId
                    | Prim(
                        crate::ir::Prim::LocalView
                            | crate::ir::Prim::LocalSlice
                            | crate::ir::Prim::LocalTrans
                            | crate::ir::Prim::LocalReinterpret
                            | crate::ir::Prim::RemoteView
                    )
            );
            assert_eq!(
                code.effects().is_thread_local_pure(),
                old.contains(&code) || new,
                "{code:?}"
            );
        }
    }

    #[test]
    fn representative_effects() {
        use MemorySpace::*;
        let load = OpCode::Load.effects();
        assert!(load.reads.contains(Global) && !load.reads.contains(Shared));
        assert!(load.writes.is_empty() && !load.is_pure());
        let atomic = OpCode::AtomicRmw.effects();
        assert!(atomic.reads.contains(Global) && atomic.writes.contains(Global));
        assert_eq!(
            OpCode::ClusterBarrier.effects().sync,
            Some(SyncScope::Cluster)
        );
        assert!(OpCode::Dot.effects().is_pure() && OpCode::Dot.effects().cross_thread);
        assert!(OpCode::Binary(BinaryOp::Add)
            .effects()
            .is_thread_local_pure());
        assert!(OpCode::For.effects().regions && !OpCode::For.effects().is_pure());
        assert!(OpCode::Yield.effects().terminator);
        assert!(OpCode::Assert.effects().host && !OpCode::Print.effects().is_pure());
    }
}
