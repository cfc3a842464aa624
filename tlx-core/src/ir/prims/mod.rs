//! TLX's explicit primitives (shared buffers, mbarriers, TMA, wgmma,
//! `cp.async`, named barriers, the cluster's remote views and stores,
//! `tcgen05`, grid dependency control) as one op family,
//! [`OpKind::Prim`]: operands are SSA values, compile-time arguments are
//! integer immediates.
//!
//! Each primitive is **declared once**, as a [`PrimDef`] in the file of its
//! family (`memory`, `mbarrier`, `fence`, `tma`, `wgmma`, `async_copy`,
//! `cluster`, `tcgen05`, `grid`): its name, its named operands and immediates, the
//! kernel language's keyword arguments, its effects, its typing rule, what
//! the protocol checker keeps of it, and, for a primitive that is one fixed
//! instruction, its PTX. The printer, parser, verifier, frontend, checker,
//! interpreter and code generator read that definition; the registry below
//! gives each one its [`Prim`] name. `docs/architecture.md` ("Adding a
//! primitive") walks through a new one.
//!
//! [`OpKind::Prim`]: super::OpKind::Prim

mod async_copy;
mod cluster;
mod fence;
mod grid;
mod mbarrier;
mod memory;
mod rules;
mod tcgen05;
mod tma;
mod wgmma;

pub use tma::{
    nvmma_swizzle, shared_swizzle, tma_block_rule, without_leading_ones, StoreReduce, TmaBox,
};

use super::def::Effects;
use super::types::Type;

/// One primitive's definition; see the module doc.
#[derive(Copy, Clone, Debug)]
pub struct PrimDef {
    /// The name in the IR text and in the kernel language (TLX's name).
    pub name: &'static str,
    pub signature: PrimSignature,
    /// The keyword arguments of the kernel language's call, in positional
    /// order, and how many of them are required.
    pub surface: Surface,
    pub effects: Effects,
    /// The typing rule; arity is checked before it runs.
    pub rule: fn(&Typing) -> Result<(), String>,
    /// What the synchronization-protocol checker keeps of it.
    pub protocol: Protocol,
    /// How the code generator emits it.
    pub lowering: Lowering,
    /// What the interpreter does for it.
    pub interp: Interp,
}

/// The operands and immediates a primitive takes, by name (for messages,
/// the text form, operand access and the typing rule).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PrimSignature {
    pub operands: &'static [&'static str],
    /// The last operand repeats (TMA offsets, one per descriptor dimension).
    pub variadic: bool,
    pub immediates: &'static [&'static str],
    pub results: usize,
    /// Immediates the kernel language spells as words.
    pub choices: &'static [Choice],
}

/// An immediate the kernel language spells as a word (TLX's string
/// options), each word standing for a piece of the primitive's PTX; the
/// immediate is the word's position.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub immediate: &'static str,
    /// `(word, PTX)`, in code order.
    pub options: &'static [(&'static str, &'static str)],
}

impl Choice {
    /// The words, quoted, for messages.
    pub fn words(&self) -> String {
        let words: Vec<String> = self
            .options
            .iter()
            .map(|(w, _)| format!("\"{w}\""))
            .collect();
        words.join(", ")
    }
}

impl PrimSignature {
    pub const fn new(
        operands: &'static [&'static str],
        immediates: &'static [&'static str],
        results: usize,
    ) -> PrimSignature {
        PrimSignature {
            operands,
            variadic: false,
            immediates,
            results,
            choices: &[],
        }
    }

    /// The same, with immediates spelled as words.
    pub const fn with_choices(self, choices: &'static [Choice]) -> PrimSignature {
        PrimSignature { choices, ..self }
    }

    /// The same, with the last operand repeating.
    pub const fn variadic(self) -> PrimSignature {
        PrimSignature {
            variadic: true,
            ..self
        }
    }

    /// A primitive with no operands, immediates or results (a fence).
    pub const NONE: PrimSignature = PrimSignature::new(&[], &[], 0);
}

/// The kernel language's call of a primitive.
#[derive(Copy, Clone, Debug)]
pub struct Surface {
    /// Keyword names, in positional order.
    pub params: &'static [&'static str],
    /// How many leading ones a call must give.
    pub required: usize,
    /// With a result-type rule, the frontend lowers the call from this
    /// definition alone: each parameter an operand, in the signature's
    /// order, then each an immediate given as a compile-time integer, the
    /// result types from the rule. Without, by a form of its own.
    pub generic: Option<ResultTypes>,
}

/// The result types of a primitive, from its operands' types.
pub type ResultTypes = fn(&Named<&Type>) -> Result<Vec<Type>, String>;

impl Surface {
    /// A call whose keyword names are the signature's operands and then its
    /// immediates, all required, lowered with no frontend code of its own.
    pub const fn generic(params: &'static [&'static str], results: ResultTypes) -> Surface {
        Surface {
            params,
            required: params.len(),
            generic: Some(results),
        }
    }

    /// A call the frontend lowers by a form of its own.
    pub const fn custom(params: &'static [&'static str], required: usize) -> Surface {
        Surface {
            params,
            required,
            generic: None,
        }
    }
}

/// What the protocol checker's skeleton (the program cut down to what
/// decides when and where things happen) keeps of a primitive.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Always kept, with every operand that is not a data tensor, except
    /// the named ones and those after them (a variadic tail), which say
    /// what data moves rather than when.
    Kept { data: &'static [&'static str] },
    /// Kept only where its result is needed (a descriptor a copy names).
    IfResultNeeded,
    /// Neither waits, arrives nor starts anything the protocol tracks (it
    /// completes within the op): dropped.
    Dropped,
}

impl Protocol {
    pub const KEPT: Protocol = Protocol::Kept { data: &[] };
}

/// How the code generator emits a primitive.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Lowering {
    /// One inline-assembly instruction, volatile: the operands in order as
    /// `$n` (after the result's), `{name}` for the PTX of a [`Choice`]'s
    /// word, the LLVM type of the one result (`"void"` for none) and the
    /// constraint string.
    Asm {
        asm: &'static str,
        result: &'static str,
        constraints: &'static str,
    },
    /// Code of its own in the code generator's family file.
    Custom,
}

/// What the interpreter does for a primitive.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Interp {
    /// Nothing it models changes (the reason is in the definition): a hint,
    /// or an ordering the interpreter's sequential semantics already give.
    Nothing,
    /// Semantics of its own in the interpreter's family file.
    Custom,
}

/// A primitive's operands (values, or their types) and immediates, reached
/// by the names of its signature.
#[derive(Copy, Clone, Debug)]
pub struct Named<'a, T> {
    prim: Prim,
    operands: &'a [T],
    imms: &'a [i64],
}

impl<'a, T> Named<'a, T> {
    pub fn new(prim: Prim, operands: &'a [T], imms: &'a [i64]) -> Named<'a, T> {
        Named {
            prim,
            operands,
            imms,
        }
    }

    fn position(&self, name: &str) -> Result<usize, String> {
        self.prim
            .signature()
            .operands
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| format!("`{}` has no operand `{name}`", self.prim.mnemonic()))
    }

    /// The operand called `name`.
    pub fn get(&self, name: &str) -> Result<&'a T, String> {
        let i = self.position(name)?;
        self.operands.get(i).ok_or_else(|| {
            format!(
                "`{}` lacks its operand `{name}` ({} given)",
                self.prim.mnemonic(),
                self.operands.len()
            )
        })
    }

    /// The operand called `name` and all after it (a variadic tail, or an
    /// optional last operand).
    pub fn rest(&self, name: &str) -> Result<&'a [T], String> {
        let i = self.position(name)?;
        Ok(self.operands.get(i..).unwrap_or(&[]))
    }

    /// The immediate called `name`.
    pub fn imm(&self, name: &str) -> Result<i64, String> {
        let sig = self.prim.signature();
        sig.immediates
            .iter()
            .position(|n| *n == name)
            .and_then(|i| self.imms.get(i).copied())
            .ok_or_else(|| format!("`{}` has no immediate `{name}`", self.prim.mnemonic()))
    }

    pub fn prim(&self) -> Prim {
        self.prim
    }

    pub fn operands(&self) -> &'a [T] {
        self.operands
    }
}

/// What a typing rule sees: the operands' types and the immediates by name,
/// and the result types.
pub struct Typing<'a> {
    pub args: Named<'a, &'a Type>,
    pub results: &'a [&'a Type],
}

impl<'a> Typing<'a> {
    /// The type of the operand called `name`.
    pub fn operand(&self, name: &str) -> Result<&'a Type, String> {
        self.args.get(name).copied()
    }

    pub fn rest(&self, name: &str) -> Result<&'a [&'a Type], String> {
        self.args.rest(name)
    }

    pub fn imm(&self, name: &str) -> Result<i64, String> {
        self.args.imm(name)
    }

    /// The first result's type.
    pub fn result(&self) -> Result<&'a Type, String> {
        self.results
            .first()
            .copied()
            .ok_or_else(|| format!("`{}` gives no result", self.args.prim.mnemonic()))
    }

    /// `"`name`"`, for messages.
    pub fn user(&self) -> String {
        format!("`{}`", self.args.prim.mnemonic())
    }
}

/// The registry: the enum of primitive names, and each one's definition.
/// A primitive is one line here and a [`PrimDef`] in its family's file.
macro_rules! registry {
    ($($variant:ident => $family:ident::$def:ident,)*) => {
        /// A TLX primitive; its definition ([`Prim::def`]) says all about it.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Prim {
            $(
                #[doc = concat!("See `", stringify!($family), "::", stringify!($def), "`.")]
                $variant,
            )*
        }

        impl Prim {
            pub const ALL: &'static [Prim] = &[$(Prim::$variant,)*];

            pub fn def(self) -> &'static PrimDef {
                match self {
                    $(Prim::$variant => &$family::$def,)*
                }
            }
        }
    };
}

registry! {
    LocalAlloc => memory::LOCAL_ALLOC,
    LocalView => memory::LOCAL_VIEW,
    LocalSlice => memory::LOCAL_SLICE,
    LocalTrans => memory::LOCAL_TRANS,
    LocalLoad => memory::LOCAL_LOAD,
    LocalStore => memory::LOCAL_STORE,
    AllocBarriers => mbarrier::ALLOC_BARRIERS,
    BarrierWait => mbarrier::BARRIER_WAIT,
    BarrierArrive => mbarrier::BARRIER_ARRIVE,
    BarrierExpectBytes => mbarrier::BARRIER_EXPECT_BYTES,
    FenceAsyncShared => fence::FENCE_ASYNC_SHARED,
    AsyncDescriptorLoad => tma::ASYNC_DESCRIPTOR_LOAD,
    AsyncDescriptorStore => tma::ASYNC_DESCRIPTOR_STORE,
    AsyncDescriptorStoreWait => tma::ASYNC_DESCRIPTOR_STORE_WAIT,
    AsyncDescriptorPrefetch => tma::ASYNC_DESCRIPTOR_PREFETCH,
    AsyncDot => wgmma::ASYNC_DOT,
    AsyncDotWait => wgmma::ASYNC_DOT_WAIT,
    AsyncLoad => async_copy::ASYNC_LOAD,
    AsyncLoadCommitGroup => async_copy::ASYNC_LOAD_COMMIT_GROUP,
    AsyncLoadWaitGroup => async_copy::ASYNC_LOAD_WAIT_GROUP,
    NamedBarrierWait => mbarrier::NAMED_BARRIER_WAIT,
    NamedBarrierArrive => mbarrier::NAMED_BARRIER_ARRIVE,
    RemoteView => cluster::REMOTE_VIEW,
    RemoteShmemStore => cluster::REMOTE_SHMEM_STORE,
    AsyncRemoteShmemStore => cluster::ASYNC_REMOTE_SHMEM_STORE,
    FenceMbarrierInitCluster => cluster::FENCE_MBARRIER_INIT_CLUSTER,
    Clock64 => grid::CLOCK64,
    AsyncDescriptorLoadMulticast => cluster::ASYNC_DESCRIPTOR_LOAD_MULTICAST,
    DescriptorLoad => tma::DESCRIPTOR_LOAD,
    DescriptorStore => tma::DESCRIPTOR_STORE,
    LocalReinterpret => memory::LOCAL_REINTERPRET,
    MakeTensorDescriptor => tma::MAKE_TENSOR_DESCRIPTOR,
    Tcgen05Mma => tcgen05::TCGEN05_MMA,
    Tcgen05Commit => tcgen05::TCGEN05_COMMIT,
    GdcWait => grid::GDC_WAIT,
    GdcLaunchDependents => grid::GDC_LAUNCH_DEPENDENTS,
    Fence => fence::FENCE,
}

impl Prim {
    /// The name in the IR text and in the kernel language (TLX's name).
    pub fn mnemonic(self) -> &'static str {
        self.def().name
    }

    pub fn from_mnemonic(name: &str) -> Option<Prim> {
        Prim::ALL.iter().copied().find(|p| p.mnemonic() == name)
    }

    pub fn signature(self) -> PrimSignature {
        self.def().signature
    }

    pub fn effects(self) -> Effects {
        self.def().effects
    }

    /// Checks operand and result types and immediates: `Err` says what is wrong.
    pub fn check(self, imms: &[i64], operands: &[&Type], results: &[&Type]) -> Result<(), String> {
        let s = self.signature();
        let fixed = s.operands.len() - usize::from(s.variadic);
        let arity_ok = if s.variadic {
            operands.len() >= fixed
        } else {
            operands.len() == fixed
        };
        if !arity_ok || imms.len() != s.immediates.len() || results.len() != s.results {
            return Err(format!(
                "`{}` takes operands ({}) and immediates [{}] with {} result(s)",
                self.mnemonic(),
                s.operands.join(", "),
                s.immediates.join(", "),
                s.results
            ));
        }
        for choice in s.choices {
            let named = Named::new(self, operands, imms);
            let code = named.imm(choice.immediate)?;
            if usize::try_from(code).map_or(true, |c| c >= choice.options.len()) {
                return Err(format!(
                    "`{}`'s `{}` is one of {} (codes 0 to {}), not code {code}",
                    self.mnemonic(),
                    choice.immediate,
                    choice.words(),
                    choice.options.len() - 1
                ));
            }
        }
        (self.def().rule)(&Typing {
            args: Named::new(self, operands, imms),
            results,
        })
    }
}

#[cfg(test)]
mod tests;
