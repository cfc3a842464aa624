//! TLX's explicit primitives (shared buffers, mbarriers, TMA, wgmma, fences,
//! named barriers, and the cluster's remote views, distributed shared-memory
//! stores and multicast copies) as one op family, [`OpKind::Prim`]: operands are SSA
//! values, compile-time arguments are integer immediates, and each [`Prim`]
//! is one row of this table: its mnemonic, its effects, the names of its
//! operands and immediates, and its typing rule. The printer, parser and
//! verifier read the row, so a new primitive is a row here plus its meaning
//! in the interpreter and the code generator.
//!
//! [`OpKind::Prim`]: super::OpKind::Prim

use super::def::{AsyncRole, Effects, MemorySpace, SyncScope};
use super::types::{ScalarType, SharedMemoryType, Swizzle, TensorMemoryType, Type};

/// A TLX primitive; see the TLX README for each one's meaning.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Prim {
    /// `local_alloc(shape, dtype, num)`: `num` buffers in shared memory; the
    /// result type says it all. With an operand (`reuse = other`), the
    /// buffers are `other`'s bytes, buffer for buffer.
    LocalAlloc,
    /// `local_view(buffers, i)`: buffer (or mbarrier) `i` of an allocation.
    LocalView,
    /// `local_slice(buffer, offsets, shapes)`: the sub-tile of `shapes`
    /// (the result type's) at `offsets` of a buffer, as a buffer.
    LocalSlice,
    /// `local_trans(buffer)`: the transposed view of a matrix buffer (same
    /// bytes), e.g. a K-major `[N, K]` tile as the `[K, N]` B of `async_dot`.
    LocalTrans,
    /// `local_load(buffer)`: a buffer's contents as a register tensor.
    LocalLoad,
    /// `local_reinterpret(buffer, dtype, shape)`: the bytes of one whole
    /// buffer seen as a buffer of another element type and shape (the result
    /// type's), which must fit in them and be laid out on the same bytes.
    LocalReinterpret,
    /// `local_store(buffer, value)`.
    LocalStore,
    /// `alloc_barriers(num, arrive_count)`: initialized mbarriers.
    AllocBarriers,
    /// `barrier_wait(bar, phase, pred)`: until the phase of that parity completed.
    BarrierWait,
    /// `barrier_arrive(bar, count, pred)`.
    BarrierArrive,
    /// `barrier_expect_bytes(bar, bytes, pred)`: arrives once and announces
    /// the bytes asynchronous copies will complete on the barrier's phase.
    BarrierExpectBytes,
    /// `fence_async_shared()`: orders generic-proxy shared-memory accesses
    /// before later async-proxy ones (TMA, wgmma).
    FenceAsyncShared,
    /// `async_descriptor_load(desc, buffer, offsets, barrier)`: a TMA copy of
    /// the descriptor's block at `offsets` (elements) into `buffer`,
    /// completing its bytes on `barrier`; out-of-bounds elements read zero.
    AsyncDescriptorLoad,
    /// `async_descriptor_store(desc, buffer, offsets, store_reduce)`: a TMA
    /// copy of `buffer` into the block at `offsets`, or with a
    /// [`StoreReduce`] other than `None` (the immediate's code), an atomic
    /// combination with the block's elements; out-of-bounds elements are
    /// not touched.
    AsyncDescriptorStore,
    /// `async_descriptor_store_wait(pendings)`: until at most `pendings` TMA
    /// stores of this thread are still reading their buffers.
    AsyncDescriptorStoreWait,
    /// `async_descriptor_prefetch(desc, offsets)`: asks TMA to bring the
    /// descriptor's block at `offsets` into L2, so that a later load of it
    /// waits less; a hint with no effect on any value, nothing to wait for.
    AsyncDescriptorPrefetch,
    /// `async_dot(a, b, acc)`: `acc + a @ b` on the tensor cores (wgmma), `a`
    /// a buffer or a register tensor, `b` a buffer; the result may be read
    /// only after an `async_dot_wait` that covers it.
    AsyncDot,
    /// `async_dot_wait(pendings, acc)`: until at most `pendings` `async_dot`
    /// groups are in flight; gives `acc` back, now complete.
    AsyncDotWait,
    /// `async_load(ptrs, buffer, mask)`: a `cp.async` copy of the elements
    /// `ptrs` point at into `buffer` (masked-off ones read zero), in this
    /// thread's open group.
    AsyncLoad,
    /// `async_load_commit_group()`: closes the open group of `async_load`s.
    AsyncLoadCommitGroup,
    /// `async_load_wait_group(pendings)`: until at most `pendings` committed
    /// groups are in flight; the copies before them are then visible to the
    /// whole task (and to the async proxy, for `async_dot`).
    AsyncLoadWaitGroup,
    /// `named_barrier_wait(id, num_threads)`: hardware barrier `id`.
    NamedBarrierWait,
    /// `named_barrier_arrive(id, num_threads)`.
    NamedBarrierArrive,
    /// `remote_view(local, rank)`: the same buffer or mbarrier in program
    /// `rank` of the cluster (PTX `mapa`); a remote type, which only stores
    /// and arrivals take.
    RemoteView,
    /// `remote_shmem_store(dst, value)`: writes a register tensor into a
    /// remote buffer (`st.shared::cluster`), synchronously.
    RemoteShmemStore,
    /// `async_remote_shmem_store(dst, value, barrier)`: the same as an
    /// asynchronous store whose bytes complete on `barrier`, a remote view of
    /// a barrier of the same peer (`st.async ... complete_tx::bytes`).
    AsyncRemoteShmemStore,
    /// `fence_mbarrier_init_cluster()`: makes this program's barrier
    /// initializations visible to the cluster (before a `cluster_barrier`
    /// after which peers arrive on them).
    FenceMbarrierInitCluster,
    /// `async_descriptor_load(..., multicast_targets = ranks)`: a TMA copy
    /// into `buffer` of every program of the cluster whose bit `cta_mask`
    /// sets, completing its bytes on `barrier` of each (same offsets there).
    AsyncDescriptorLoadMulticast,
    /// `clock64()`: this SM's 64-bit cycle counter (i64), for timing a
    /// stretch of a kernel.
    Clock64,
    /// `desc.load(offsets)` or `load_tensor_descriptor(desc, offsets)`
    /// (Triton's block-level descriptor load): the
    /// descriptor's block at `offsets` as a register tensor of the block's
    /// shape, out-of-bounds elements zero; a TMA copy on the GPU.
    DescriptorLoad,
    /// `desc.store(offsets, value)` or `store_tensor_descriptor(desc,
    /// offsets, value)`: writes a register tensor of the block's shape into
    /// the block at `offsets`; out-of-bounds elements are not written. A TMA
    /// copy on the GPU, complete when the op is.
    DescriptorStore,
    /// `make_tensor_descriptor(base, shape, strides, block_shape)`: a
    /// descriptor built on the device (Triton's and TLX's device-side form)
    /// over the tensor at `base` whose dimensions and outer strides (in
    /// elements, outermost first; the innermost stride is 1) are run-time
    /// values, moving blocks of the result type's shape.
    MakeTensorDescriptor,
    /// `async_dot(a, b, acc, use_acc, mbarriers)` with `acc` a buffer in
    /// tensor memory (Blackwell's `tcgen05.mma`): `acc = a @ b` (`+ acc`
    /// when the i1 `use_acc` holds), issued by one thread and finished
    /// asynchronously; each barrier after `use_acc` gets one arrival when
    /// it (and every MMA this thread issued before) completes.
    Tcgen05Mma,
    /// `tcgen05_commit(bar)`: one arrival on `bar` when every `tcgen05` MMA
    /// this thread issued so far has completed.
    Tcgen05Commit,
    /// `gdc_wait()` (Triton's name; PTX `griddepcontrol.wait`): in a kernel
    /// launched as a programmatic dependent (`launch_pdl = true`), waits
    /// until the grids it depends on (the kernel before it on the stream)
    /// have completed and their memory is visible; otherwise returns at once.
    GdcWait,
    /// `gdc_launch_dependents()` (`griddepcontrol.launch_dependents`): once
    /// every program of this grid has run it (or exited), the next kernel on
    /// the stream, if launched with `launch_pdl`, may start.
    GdcLaunchDependents,
}

/// What `async_descriptor_store` does with the elements already in its
/// block (TLX's `store_reduce`): overwrite them, or combine each with the
/// buffer's element atomically (`cp.reduce.async.bulk.tensor`), e.g. to
/// accumulate partial sums of many programs in one f32 tensor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum StoreReduce {
    None,
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

impl StoreReduce {
    /// Every choice with TLX's name for it (`""` is the plain store); the
    /// position is the immediate's code.
    pub const ALL: [(StoreReduce, &'static str); 7] = [
        (StoreReduce::None, ""),
        (StoreReduce::Add, "add"),
        (StoreReduce::Min, "min"),
        (StoreReduce::Max, "max"),
        (StoreReduce::And, "and"),
        (StoreReduce::Or, "or"),
        (StoreReduce::Xor, "xor"),
    ];

    pub fn code(self) -> i64 {
        Self::ALL.iter().position(|(r, _)| *r == self).unwrap_or(0) as i64
    }

    pub fn from_code(code: i64) -> Option<StoreReduce> {
        let i = usize::try_from(code).ok()?;
        Self::ALL.get(i).map(|(r, _)| *r)
    }

    pub fn name(self) -> &'static str {
        Self::ALL[self.code() as usize].1
    }

    /// The per-element operation, `None` for the plain store.
    pub fn atomic(self) -> Option<super::AtomicOp> {
        use super::AtomicOp;
        Some(match self {
            StoreReduce::None => return None,
            StoreReduce::Add => AtomicOp::Add,
            StoreReduce::Min => AtomicOp::Min,
            StoreReduce::Max => AtomicOp::Max,
            StoreReduce::And => AtomicOp::And,
            StoreReduce::Or => AtomicOp::Or,
            StoreReduce::Xor => AtomicOp::Xor,
        })
    }

    /// Whether TMA combines elements of `elem` this way (the PTX ISA's
    /// table for `cp.reduce.async.bulk.tensor`: no f32 min/max, no 8-bit
    /// types, bitwise operations on integers only).
    pub fn supports(self, elem: ScalarType) -> bool {
        use ScalarType::*;
        match self {
            StoreReduce::None => true,
            StoreReduce::Add => matches!(elem, F16 | BF16 | F32 | I32 | U32),
            StoreReduce::Min | StoreReduce::Max => matches!(elem, F16 | BF16 | I32 | U32 | I64),
            StoreReduce::And | StoreReduce::Or | StoreReduce::Xor => {
                matches!(elem, I32 | U32 | I64)
            }
        }
    }

    /// The types this reduction takes, for a message about `elem`.
    pub fn unsupported(self, elem: ScalarType) -> String {
        let ok: Vec<String> = ScalarType::ALL
            .iter()
            .filter(|t| self.supports(**t))
            .map(|t| t.to_string())
            .collect();
        format!(
            "TMA has no `{}` reduction of {elem} elements; it reduces {} with `{}`",
            self.name(),
            ok.join(", "),
            self.name()
        )
    }
}

/// The operands and immediates a primitive takes, by name (for messages,
/// the text form and the frontend's keyword arguments).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PrimSignature {
    pub operands: &'static [&'static str],
    /// The last operand repeats (TMA offsets, one per descriptor dimension).
    pub variadic: bool,
    pub immediates: &'static [&'static str],
    pub results: usize,
}

const fn sig(
    operands: &'static [&'static str],
    immediates: &'static [&'static str],
    results: usize,
) -> PrimSignature {
    PrimSignature {
        operands,
        variadic: false,
        immediates,
        results,
    }
}

impl Prim {
    pub const ALL: [Prim; 36] = [
        Prim::LocalAlloc,
        Prim::LocalView,
        Prim::LocalSlice,
        Prim::LocalTrans,
        Prim::LocalLoad,
        Prim::LocalStore,
        Prim::AllocBarriers,
        Prim::BarrierWait,
        Prim::BarrierArrive,
        Prim::BarrierExpectBytes,
        Prim::FenceAsyncShared,
        Prim::AsyncDescriptorLoad,
        Prim::AsyncDescriptorStore,
        Prim::AsyncDescriptorStoreWait,
        Prim::AsyncDescriptorPrefetch,
        Prim::AsyncDot,
        Prim::AsyncDotWait,
        Prim::AsyncLoad,
        Prim::AsyncLoadCommitGroup,
        Prim::AsyncLoadWaitGroup,
        Prim::NamedBarrierWait,
        Prim::NamedBarrierArrive,
        Prim::RemoteView,
        Prim::RemoteShmemStore,
        Prim::AsyncRemoteShmemStore,
        Prim::FenceMbarrierInitCluster,
        Prim::Clock64,
        Prim::AsyncDescriptorLoadMulticast,
        Prim::DescriptorLoad,
        Prim::DescriptorStore,
        Prim::LocalReinterpret,
        Prim::MakeTensorDescriptor,
        Prim::Tcgen05Mma,
        Prim::Tcgen05Commit,
        Prim::GdcWait,
        Prim::GdcLaunchDependents,
    ];

    /// The name in the IR text and in the kernel language (TLX's name).
    pub fn mnemonic(self) -> &'static str {
        match self {
            Prim::LocalAlloc => "local_alloc",
            Prim::LocalView => "local_view",
            Prim::LocalSlice => "local_slice",
            Prim::LocalTrans => "local_trans",
            Prim::LocalLoad => "local_load",
            Prim::LocalReinterpret => "local_reinterpret",
            Prim::LocalStore => "local_store",
            Prim::AllocBarriers => "alloc_barriers",
            Prim::BarrierWait => "barrier_wait",
            Prim::BarrierArrive => "barrier_arrive",
            Prim::BarrierExpectBytes => "barrier_expect_bytes",
            Prim::FenceAsyncShared => "fence_async_shared",
            Prim::AsyncDescriptorLoad => "async_descriptor_load",
            Prim::AsyncDescriptorStore => "async_descriptor_store",
            Prim::AsyncDescriptorStoreWait => "async_descriptor_store_wait",
            Prim::AsyncDescriptorPrefetch => "async_descriptor_prefetch",
            Prim::AsyncDot => "async_dot",
            Prim::AsyncDotWait => "async_dot_wait",
            Prim::AsyncLoad => "async_load",
            Prim::AsyncLoadCommitGroup => "async_load_commit_group",
            Prim::AsyncLoadWaitGroup => "async_load_wait_group",
            Prim::NamedBarrierWait => "named_barrier_wait",
            Prim::NamedBarrierArrive => "named_barrier_arrive",
            Prim::RemoteView => "remote_view",
            Prim::RemoteShmemStore => "remote_shmem_store",
            Prim::AsyncRemoteShmemStore => "async_remote_shmem_store",
            Prim::FenceMbarrierInitCluster => "fence_mbarrier_init_cluster",
            Prim::Clock64 => "clock64",
            Prim::AsyncDescriptorLoadMulticast => "async_descriptor_load_multicast",
            Prim::DescriptorLoad => "load_tensor_descriptor",
            Prim::DescriptorStore => "store_tensor_descriptor",
            Prim::MakeTensorDescriptor => "make_tensor_descriptor",
            Prim::Tcgen05Mma => "tcgen05_mma",
            Prim::Tcgen05Commit => "tcgen05_commit",
            Prim::GdcWait => "gdc_wait",
            Prim::GdcLaunchDependents => "gdc_launch_dependents",
        }
    }

    pub fn from_mnemonic(name: &str) -> Option<Prim> {
        Prim::ALL.into_iter().find(|p| p.mnemonic() == name)
    }

    pub fn signature(self) -> PrimSignature {
        match self {
            Prim::LocalAlloc => PrimSignature {
                variadic: true,
                ..sig(&["reuse"], &[], 1)
            },
            Prim::LocalView => sig(&["buffers", "index"], &[], 1),
            Prim::LocalSlice => PrimSignature {
                variadic: true,
                ..sig(&["buffer", "offsets"], &[], 1)
            },
            Prim::LocalLoad | Prim::LocalTrans | Prim::LocalReinterpret => sig(&["buffer"], &[], 1),
            Prim::LocalStore => sig(&["buffer", "value"], &[], 0),
            Prim::AllocBarriers => sig(&[], &["arrive_count"], 1),
            Prim::BarrierWait => sig(&["bar", "phase", "pred"], &[], 0),
            Prim::BarrierArrive => sig(&["bar", "pred"], &["arrive_count"], 0),
            Prim::BarrierExpectBytes => sig(&["bar", "bytes", "pred"], &[], 0),
            Prim::FenceAsyncShared => sig(&[], &[], 0),
            Prim::AsyncDescriptorLoad => PrimSignature {
                variadic: true,
                ..sig(&["desc", "buffer", "barrier", "offsets"], &[], 0)
            },
            Prim::AsyncDescriptorStore => PrimSignature {
                variadic: true,
                ..sig(&["desc", "buffer", "offsets"], &["store_reduce"], 0)
            },
            Prim::AsyncDescriptorPrefetch => PrimSignature {
                variadic: true,
                ..sig(&["desc", "offsets"], &[], 0)
            },
            Prim::AsyncDescriptorStoreWait => sig(&[], &["pendings", "writes"], 0),
            Prim::AsyncDot => sig(&["a", "b", "acc"], &[], 1),
            Prim::AsyncDotWait => sig(&["acc"], &["pendings"], 1),
            Prim::AsyncLoad => sig(&["ptrs", "buffer", "mask"], &[], 0),
            Prim::AsyncLoadCommitGroup => sig(&[], &[], 0),
            Prim::AsyncLoadWaitGroup => sig(&[], &["pendings"], 0),
            Prim::NamedBarrierWait | Prim::NamedBarrierArrive => {
                sig(&["bar_id"], &["num_threads"], 0)
            }
            Prim::RemoteView => sig(&["local", "remote_cta_rank"], &[], 1),
            Prim::RemoteShmemStore => sig(&["dst", "value"], &[], 0),
            Prim::AsyncRemoteShmemStore => sig(&["dst", "value", "barrier"], &[], 0),
            Prim::FenceMbarrierInitCluster => sig(&[], &[], 0),
            Prim::Clock64 => sig(&[], &[], 1),
            Prim::DescriptorLoad => PrimSignature {
                variadic: true,
                ..sig(&["desc", "offsets"], &[], 1)
            },
            Prim::DescriptorStore => PrimSignature {
                variadic: true,
                ..sig(&["desc", "value", "offsets"], &[], 0)
            },
            Prim::AsyncDescriptorLoadMulticast => PrimSignature {
                variadic: true,
                ..sig(
                    &["desc", "buffer", "barrier", "cta_mask", "offsets"],
                    &[],
                    0,
                )
            },
            // The shape's dimensions, then the strides of all but the
            // innermost dimension.
            Prim::MakeTensorDescriptor => PrimSignature {
                variadic: true,
                ..sig(&["base", "dims"], &[], 1)
            },
            // Zero or more completion barriers.
            Prim::Tcgen05Mma => PrimSignature {
                variadic: true,
                ..sig(&["a", "b", "acc", "use_acc", "mbarriers"], &[], 0)
            },
            Prim::Tcgen05Commit => sig(&["bar"], &[], 0),
            Prim::GdcWait | Prim::GdcLaunchDependents => sig(&[], &[], 0),
        }
    }

    pub fn effects(self) -> Effects {
        use MemorySpace::{Global, Shared, Tensor};
        let syncs = Effects {
            sync: Some(SyncScope::Cta),
            ..Effects::PURE
        };
        let syncs_cluster = Effects {
            sync: Some(SyncScope::Cluster),
            ..Effects::PURE
        };
        match self {
            // An allocation is an identity, not a value: two are two buffers,
            // so it must not be merged or dropped like a pure op.
            Prim::LocalAlloc => Effects {
                writes: super::MemorySpaces::only(Shared),
                ..Effects::PURE
            },
            // `mapa` is address arithmetic, as a view is.
            Prim::LocalView
            | Prim::LocalSlice
            | Prim::LocalTrans
            | Prim::LocalReinterpret
            | Prim::RemoteView => Effects::PURE,
            // Of a shared or a tensor-memory buffer.
            Prim::LocalLoad => Effects {
                reads: super::MemorySpaces::only(Shared).with(Tensor),
                ..Effects::PURE
            },
            Prim::LocalStore => Effects {
                writes: super::MemorySpaces::only(Shared).with(Tensor),
                ..Effects::PURE
            },
            Prim::Tcgen05Mma => Effects {
                reads: super::MemorySpaces::only(Shared).with(Tensor),
                writes: super::MemorySpaces::only(Tensor),
                async_role: Some(AsyncRole::Starts),
                ..Effects::PURE
            },
            Prim::Tcgen05Commit => Effects {
                async_role: Some(AsyncRole::Starts),
                ..syncs
            },
            // `mbarrier.init` writes the barrier words.
            Prim::AllocBarriers => Effects {
                writes: super::MemorySpaces::only(Shared),
                ..syncs
            },
            Prim::BarrierWait => Effects {
                async_role: Some(AsyncRole::Completes),
                ..syncs
            },
            Prim::BarrierArrive
            | Prim::BarrierExpectBytes
            | Prim::FenceAsyncShared
            | Prim::NamedBarrierWait
            | Prim::NamedBarrierArrive => syncs,
            Prim::AsyncDescriptorLoad | Prim::AsyncDescriptorLoadMulticast => Effects {
                reads: super::MemorySpaces::only(Global),
                writes: super::MemorySpaces::only(Shared),
                async_role: Some(AsyncRole::Starts),
                ..Effects::PURE
            },
            // A read as far as ordering goes: kept, and kept after the
            // writes before it.
            Prim::DescriptorLoad | Prim::AsyncDescriptorPrefetch => Effects {
                reads: super::MemorySpaces::only(Global),
                ..Effects::PURE
            },
            // The descriptor's 128 bytes are written to the program's global
            // scratch (where TMA reads descriptors from).
            Prim::DescriptorStore | Prim::MakeTensorDescriptor => Effects {
                writes: super::MemorySpaces::only(Global),
                ..Effects::PURE
            },
            Prim::AsyncDescriptorStore => Effects {
                reads: super::MemorySpaces::only(Shared),
                writes: super::MemorySpaces::only(Global),
                async_role: Some(AsyncRole::Starts),
                ..Effects::PURE
            },
            Prim::AsyncLoad => Effects {
                reads: super::MemorySpaces::only(Global),
                writes: super::MemorySpaces::only(Shared),
                async_role: Some(AsyncRole::Starts),
                ..Effects::PURE
            },
            Prim::AsyncLoadCommitGroup => Effects {
                async_role: Some(AsyncRole::Starts),
                ..Effects::PURE
            },
            Prim::AsyncLoadWaitGroup => Effects {
                async_role: Some(AsyncRole::Completes),
                ..syncs
            },
            Prim::AsyncDescriptorStoreWait | Prim::AsyncDotWait => Effects {
                async_role: Some(AsyncRole::Completes),
                ..Effects::PURE
            },
            Prim::AsyncDot => Effects {
                reads: super::MemorySpaces::only(Shared),
                async_role: Some(AsyncRole::Starts),
                cross_thread: true,
                ..Effects::PURE
            },
            Prim::RemoteShmemStore => Effects {
                writes: super::MemorySpaces::only(Shared),
                ..Effects::PURE
            },
            Prim::AsyncRemoteShmemStore => Effects {
                writes: super::MemorySpaces::only(Shared),
                async_role: Some(AsyncRole::Starts),
                ..Effects::PURE
            },
            Prim::FenceMbarrierInitCluster => syncs_cluster,
            Prim::Clock64 => Effects {
                volatile: true,
                ..Effects::PURE
            },
            // Global accesses after the wait may read what the grids before
            // wrote: none moves above it.
            Prim::GdcWait => Effects {
                reads: super::MemorySpaces::only(Global),
                writes: super::MemorySpaces::only(Global),
                volatile: true,
                ..Effects::PURE
            },
            // Where it runs decides when the next kernel starts: kept in place.
            Prim::GdcLaunchDependents => Effects {
                volatile: true,
                ..Effects::PURE
            },
        }
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
        let i32_scalar = |t: &Type, what: &str| scalar_of(t, ScalarType::I32, what);
        let bool_scalar = |t: &Type, what: &str| scalar_of(t, ScalarType::Bool, what);
        match self {
            Prim::LocalAlloc => {
                let m = match results[0] {
                    Type::SharedMemory(m) if m.buffers() >= 1 && !m.shape().is_empty() => m,
                    Type::TensorMemory(t) if t.buffers() >= 1 => {
                        if !operands.is_empty() {
                            return Err("`reuse` of tensor memory: allocate it once and \
                                        pick buffers with `local_view`"
                                .into());
                        }
                        return TensorMemoryType::rule(t.elem(), t.shape());
                    }
                    other => {
                        return Err(format!("`local_alloc` makes shared buffers, not {other}"))
                    }
                };
                match operands {
                    [] => Ok(()),
                    [Type::SharedMemory(other)] => reusable(other, m),
                    _ => {
                        Err("`local_alloc` reuses at most one allocation (`reuse = other`)".into())
                    }
                }
            }
            Prim::LocalView => {
                i32_scalar(operands[1], "the index")?;
                local(operands[0], "`local_view`")?;
                match (operands[0], results[0]) {
                    (Type::SharedMemory(all), Type::SharedMemory(one))
                        if one.buffers() == 1
                            && !one.remote()
                            && one.elem() == all.elem()
                            && one.shape() == all.shape()
                            && one.swizzle() == all.swizzle() =>
                    {
                        Ok(())
                    }
                    (Type::Barriers(_), Type::Barriers(one))
                        if one.count() == 1 && !one.remote() =>
                    {
                        Ok(())
                    }
                    (Type::TensorMemory(all), Type::TensorMemory(one))
                        if *one == all.one_buffer() =>
                    {
                        Ok(())
                    }
                    (from, to) => Err(format!("`local_view` of {from} cannot give {to}")),
                }
            }
            Prim::LocalSlice if matches!(operands[0], Type::TensorMemory(_)) => {
                // Whole rows (TMEM lanes), a run of columns.
                let (Type::TensorMemory(m), Type::TensorMemory(r)) = (operands[0], results[0])
                else {
                    return Err(format!(
                        "a slice of {} cannot be {}",
                        operands[0], results[0]
                    ));
                };
                let fits = m.buffers() == 1
                    && r.buffers() == 1
                    && r.elem() == m.elem()
                    && r.shape().len() == 2
                    && r.shape()[0] == m.shape()[0]
                    && r.shape()[1] <= m.shape()[1];
                if !fits {
                    return Err(format!(
                        "a slice of {} cannot be {}: tensor-memory slices keep all 128 rows \
                         and take a run of columns",
                        operands[0], results[0]
                    ));
                }
                TensorMemoryType::rule(r.elem(), r.shape())?;
                if operands.len() != 3 {
                    return Err(format!("{} offsets for a 2-d buffer", operands.len() - 1));
                }
                operands[1..]
                    .iter()
                    .try_for_each(|t| i32_scalar(t, "an offset"))
            }
            Prim::LocalSlice => {
                let m = one_buffer(operands[0], "`local_slice`")?;
                let Type::SharedMemory(r) = results[0] else {
                    return Err(format!("`local_slice` gives a buffer, not {}", results[0]));
                };
                let fits = r.buffers() == 1
                    && !r.remote()
                    && !m.transposed()
                    && !r.transposed()
                    && r.elem() == m.elem()
                    && r.swizzle() == m.swizzle()
                    && r.shape().len() == m.shape().len()
                    && r.shape()
                        .iter()
                        .zip(m.shape())
                        .all(|(a, b)| (1..=*b).contains(a));
                if !fits {
                    return Err(format!(
                        "a slice of {} cannot be {}",
                        operands[0], results[0]
                    ));
                }
                if operands.len() - 1 != m.shape().len() {
                    return Err(format!(
                        "{} offsets for a {}-d buffer",
                        operands.len() - 1,
                        m.shape().len()
                    ));
                }
                operands[1..]
                    .iter()
                    .try_for_each(|t| i32_scalar(t, "an offset"))
            }
            Prim::LocalTrans => {
                let m = one_buffer(operands[0], "`local_trans`")?;
                if m.shape().len() != 2 {
                    return Err(format!("`local_trans` takes a matrix, not {}", operands[0]));
                }
                same(results[0], &Type::SharedMemory(m.transpose()), "the view")
            }
            Prim::LocalLoad => {
                let (elem, shape) = buffer_contents(operands[0], "`local_load`")?;
                same(
                    results[0],
                    &Type::tensor(elem.into(), shape),
                    "the loaded tensor",
                )
            }
            Prim::LocalStore => {
                let (elem, shape) = buffer_contents(operands[0], "`local_store`")?;
                same(
                    operands[1],
                    &Type::tensor(elem.into(), shape),
                    "the stored tensor",
                )
            }
            Prim::Tcgen05Mma => {
                let acc = match operands[2] {
                    Type::TensorMemory(t) if t.buffers() == 1 => t,
                    other => {
                        return Err(format!(
                            "the accumulator is one tensor-memory buffer, not {other}"
                        ))
                    }
                };
                let a = one_buffer(operands[0], "`async_dot`'s a")?;
                let b = one_buffer(operands[1], "`async_dot`'s b")?;
                mma_shapes(a, b, acc)?;
                bool_scalar(operands[3], "`use_acc`")?;
                operands[4..]
                    .iter()
                    .try_for_each(|t| one_barrier(t, "`async_dot`'s mbarriers").map(|_| ()))
            }
            Prim::Tcgen05Commit => one_barrier(operands[0], "`tcgen05_commit`").map(|_| ()),
            Prim::AllocBarriers => {
                positive(imms[0], "the arrive count")?;
                match results[0] {
                    Type::Barriers(b) if b.count() >= 1 => Ok(()),
                    other => Err(format!("`alloc_barriers` makes barriers, not {other}")),
                }
            }
            Prim::BarrierWait | Prim::BarrierExpectBytes => {
                one_barrier(operands[0], &format!("`{}`", self.mnemonic()))?;
                i32_scalar(operands[1], "the second operand")?;
                bool_scalar(operands[2], "the predicate")
            }
            Prim::BarrierArrive => {
                // The one barrier operation a peer may do remotely.
                one_barrier_anywhere(operands[0], "`barrier_arrive`")?;
                positive(imms[0], "the arrive count")?;
                bool_scalar(operands[1], "the predicate")
            }
            Prim::FenceAsyncShared
            | Prim::FenceMbarrierInitCluster
            | Prim::GdcWait
            | Prim::GdcLaunchDependents => Ok(()),
            Prim::Clock64 => match results {
                [t] if **t == Type::scalar(ScalarType::I64) => Ok(()),
                _ => Err("`clock64` gives one i64 scalar".into()),
            },
            Prim::AsyncDescriptorLoad
            | Prim::AsyncDescriptorLoadMulticast
            | Prim::AsyncDescriptorStore => {
                let Type::TensorDescriptor(d) = operands[0] else {
                    return Err(format!("a tensor descriptor, not {}", operands[0]));
                };
                let m = one_buffer(operands[1], &format!("`{}`", self.mnemonic()))?;
                if m.elem() != d.elem() || !holds_block(m.shape(), d.block_shape()) {
                    return Err(format!(
                        "the buffer ({:?} {}) does not hold the descriptor's block ({:?} {}); \
                         TMA moves whole blocks: allocate it as `local_alloc({:?}, {}, ..)`",
                        m.shape(),
                        m.elem(),
                        d.block_shape(),
                        d.elem(),
                        without_leading_ones(d.block_shape()),
                        d.elem()
                    ));
                }
                let swizzle = shared_swizzle(d.elem(), d.block_shape());
                if m.swizzle() != swizzle {
                    return Err(format!(
                        "the buffer ({}) does not hold the descriptor's block ({}): \
                         its swizzle is not the one TMA uses for that block",
                        operands[1], operands[0]
                    ));
                }
                if self == Prim::AsyncDescriptorStore {
                    let reduce = StoreReduce::from_code(imms[0])
                        .ok_or_else(|| format!("no store reduction has code {}", imms[0]))?;
                    if !reduce.supports(d.elem()) {
                        return Err(reduce.unsupported(d.elem()));
                    }
                }
                let offsets = match self {
                    Prim::AsyncDescriptorLoad => {
                        one_barrier(operands[2], "`async_descriptor_load`")?;
                        &operands[3..]
                    }
                    Prim::AsyncDescriptorLoadMulticast => {
                        one_barrier(operands[2], "`async_descriptor_load`")?;
                        i32_scalar(operands[3], "the multicast mask")?;
                        &operands[4..]
                    }
                    _ => &operands[2..],
                };
                block_offsets(d.block_shape(), offsets)
            }
            Prim::AsyncDescriptorPrefetch => {
                let Type::TensorDescriptor(d) = operands[0] else {
                    return Err(format!("a tensor descriptor, not {}", operands[0]));
                };
                block_offsets(d.block_shape(), &operands[1..])
            }
            Prim::LocalReinterpret => {
                let from = one_buffer(operands[0], "`local_reinterpret`")?;
                let to = match results[0] {
                    Type::SharedMemory(m) if m.buffers() == 1 => m,
                    other => {
                        return Err(format!("`local_reinterpret` makes one buffer, not {other}"))
                    }
                };
                reinterpretable(from, to)
            }
            Prim::DescriptorLoad | Prim::DescriptorStore => {
                let Type::TensorDescriptor(d) = operands[0] else {
                    return Err(format!("a tensor descriptor, not {}", operands[0]));
                };
                let block = Type::tensor(super::Elem::Scalar(d.elem()), d.block_shape().to_vec());
                let (offsets, tile) = match self {
                    Prim::DescriptorLoad => (&operands[1..], results[0]),
                    _ => (&operands[2..], operands[1]),
                };
                block_offsets(d.block_shape(), offsets)?;
                let what = match self {
                    Prim::DescriptorLoad => "the result",
                    _ => "the stored value",
                };
                same(tile, &block, what)
            }
            Prim::AsyncDescriptorStoreWait => {
                non_negative(imms[0], "pendings")?;
                if !matches!(imms[1], 0 | 1) {
                    return Err(format!("`writes` is 0 or 1, not {}", imms[1]));
                }
                Ok(())
            }
            Prim::MakeTensorDescriptor => {
                let Type::TensorDescriptor(d) = results[0] else {
                    return Err(format!(
                        "`make_tensor_descriptor` makes a descriptor, not {}",
                        results[0]
                    ));
                };
                same(operands[0], &Type::ptr(d.elem()), "the base")?;
                let rank = d.block_shape().len();
                if operands.len() != 2 * rank {
                    return Err(format!(
                        "{} dimensions and strides for a {rank}-d block: give {rank} dimensions \
                         and {} outer strides",
                        operands.len() - 1,
                        rank - 1
                    ));
                }
                operands[1..]
                    .iter()
                    .try_for_each(|t| scalar_of(t, ScalarType::I64, "a dimension or stride"))?;
                tma_block_rule(d.elem(), d.block_shape())
            }
            Prim::AsyncDot => {
                let b = one_buffer(operands[1], "`async_dot`'s b")?;
                let (a_elem, a_shape) = match operands[0] {
                    Type::SharedMemory(_) => {
                        let a = one_buffer(operands[0], "`async_dot`'s a")?;
                        (a.elem(), a.shape().to_vec())
                    }
                    Type::Tensor(_) => match operands[0].elem().scalar() {
                        Some(s) => (s, operands[0].shape().to_vec()),
                        None => return Err("`async_dot`'s a holds pointers".into()),
                    },
                    other => return Err(format!("`async_dot`'s a is {other}")),
                };
                let [m, k] = a_shape[..] else {
                    return Err("`async_dot`'s a is not a matrix".into());
                };
                let [k2, n] = b.shape()[..] else {
                    return Err("`async_dot`'s b is not a matrix".into());
                };
                if k != k2 {
                    return Err(format!(
                        "inner dimensions differ: a is {a_shape:?}, b is {:?}; \
                         a's columns (K) must equal b's rows",
                        b.shape()
                    ));
                }
                if a_elem != b.elem() {
                    return Err(format!(
                        "a holds {a_elem} and b holds {}; both operands must have one element type",
                        b.elem()
                    ));
                }
                let acc_elem = if a_elem.is_float() {
                    ScalarType::F32
                } else {
                    ScalarType::I32
                };
                let acc = Type::tensor(acc_elem.into(), vec![m, n]);
                same(operands[2], &acc, "the accumulator")?;
                same(results[0], &acc, "the result")
            }
            Prim::AsyncLoad => {
                let m = one_buffer(operands[1], "`async_load`")?;
                let ptrs = Type::tensor(super::Elem::global_ptr(m.elem()), m.shape().to_vec());
                same(operands[0], &ptrs, "the pointer tensor")?;
                let mask = Type::tensor(ScalarType::Bool.into(), m.shape().to_vec());
                same(operands[2], &mask, "the mask")
            }
            Prim::AsyncLoadCommitGroup => Ok(()),
            Prim::AsyncLoadWaitGroup => non_negative(imms[0], "pendings"),
            Prim::AsyncDotWait => {
                non_negative(imms[0], "pendings")?;
                same(results[0], operands[0], "the result")
            }
            Prim::RemoteView => {
                i32_scalar(operands[1], "the remote CTA rank")?;
                let remote = match operands[0] {
                    Type::SharedMemory(_) => {
                        Type::SharedMemory(one_buffer(operands[0], "`remote_view`")?.to_remote())
                    }
                    Type::Barriers(b) => {
                        one_barrier(operands[0], "`remote_view`")?;
                        Type::Barriers(b.to_remote())
                    }
                    other => {
                        return Err(format!(
                            "`remote_view` takes one buffer or barrier, not {other}"
                        ))
                    }
                };
                same(results[0], &remote, "the remote view")
            }
            Prim::RemoteShmemStore | Prim::AsyncRemoteShmemStore => {
                let user = format!("`{}`", self.mnemonic());
                let m = remote_buffer(operands[0], &user)?;
                let expected = Type::tensor(m.elem().into(), m.shape().to_vec());
                same(operands[1], &expected, "the stored tensor")?;
                if self == Prim::AsyncRemoteShmemStore {
                    match operands[2] {
                        Type::Barriers(b) if b.count() == 1 && b.remote() => {}
                        other => {
                            return Err(format!(
                                "{user} completes on a remote view of one barrier of the same peer, not {other}"
                            ))
                        }
                    }
                }
                Ok(())
            }
            // The id is a run-time value (PTX takes a register): the
            // interpreter checks its range.
            Prim::NamedBarrierWait | Prim::NamedBarrierArrive => {
                i32_scalar(operands[0], "the barrier id")?;
                if imms[0] <= 0 || imms[0] % 32 != 0 {
                    return Err(format!(
                        "{} threads is not a positive multiple of 32 \
                         (a named barrier counts whole warps)",
                        imms[0]
                    ));
                }
                Ok(())
            }
        }
    }
}

/// TMA's compile-time rules for a descriptor's block: rank 1 to 5, boxes
/// (see [`TmaBox`]) of 1 to 256 elements per dimension, an innermost
/// dimension of whole 16-byte chunks, and elements TMA copies (not `bool`).
pub fn tma_block_rule(elem: ScalarType, block: &[usize]) -> Result<(), String> {
    if !(1..=5).contains(&block.len()) {
        return Err(format!(
            "a {}-d block: TMA moves blocks of 1 to 5 dimensions",
            block.len()
        ));
    }
    if elem == ScalarType::Bool {
        return Err("TMA does not copy bool elements: store them as u8".into());
    }
    let tma = TmaBox::new(elem, block);
    if let Some(d) = tma.box_shape.iter().find(|d| !(1..=256).contains(*d)) {
        return Err(format!(
            "a block dimension of {d}: TMA boxes hold 1 to 256 elements per dimension \
             (only the innermost is cut into swizzle-wide pieces)"
        ));
    }
    if let Some(d) = block.iter().find(|d| !d.is_power_of_two()) {
        return Err(format!(
            "a block dimension of {d}: the tiles a TMA block lands in (shared buffers, \
             register tensors) have power-of-two shapes"
        ));
    }
    let inner = block[block.len() - 1] * elem.size_bytes();
    if inner % 16 != 0 {
        return Err(format!(
            "the block's rows are {inner} bytes: TMA moves rows of whole 16-byte chunks \
             (make the innermost dimension a multiple of {} {elem} elements)",
            16 / elem.size_bytes()
        ));
    }
    Ok(())
}

/// The swizzle TMA and wgmma want for rows of `row_bytes` bytes: the widest
/// of 128, 64 and 32 bytes that fits in a row (none for narrower rows).
pub fn nvmma_swizzle(row_bytes: usize) -> Swizzle {
    match row_bytes {
        r if r >= 128 => Swizzle::Bytes128,
        r if r >= 64 => Swizzle::Bytes64,
        r if r >= 32 => Swizzle::Bytes32,
        _ => Swizzle::None,
    }
}

/// The swizzle of a shared buffer of `shape` (TLX infers it from the
/// consumers; here every matrix of at least 8 rows of power-of-two extents
/// gets the NVMMA swizzle, which TMA, wgmma and `local_load`/`local_store`
/// all handle, so producer and consumers always agree).
pub fn shared_swizzle(elem: ScalarType, shape: &[usize]) -> Swizzle {
    match without_leading_ones(shape) {
        [rows, cols] if *rows >= 8 && rows.is_power_of_two() && cols.is_power_of_two() => {
            nvmma_swizzle(cols * elem.size_bytes())
        }
        _ => Swizzle::None,
    }
}

/// `shape` without its leading unit dimensions (all but the last): the
/// matrix that a TMA block of `[1, 1, BN, D]` (one head of a `[B, H, S, D]`
/// tensor) really moves.
pub fn without_leading_ones(shape: &[usize]) -> &[usize] {
    let first = shape
        .iter()
        .position(|&d| d != 1)
        .unwrap_or(shape.len())
        .min(shape.len().saturating_sub(1));
    &shape[first..]
}

/// Whether allocation `new` may take the bytes of allocation `old`
/// (`reuse = old`): buffer `i` of `new` on buffer `i` of `old`, so each
/// buffer must have the same bytes, there may be no more of them, and the
/// start must suit `new`'s swizzle.
fn reusable(old: &super::SharedMemoryType, new: &super::SharedMemoryType) -> Result<(), String> {
    let bytes =
        |m: &super::SharedMemoryType| m.shape().iter().product::<usize>() * m.elem().size_bytes();
    if old.transposed() || old.remote() {
        return Err("`reuse` takes an allocation (the result of `local_alloc`), not a view".into());
    }
    if bytes(new) != bytes(old) {
        return Err(format!(
            "each buffer takes {} bytes ({:?} of {}), and each of the reused allocation's {} ({:?} of {}): buffers are reused one for one, so they must be the same size",
            bytes(new), new.shape(), new.elem(), bytes(old), old.shape(), old.elem()
        ));
    }
    if new.buffers() > old.buffers() {
        return Err(format!(
            "{} buffers reuse an allocation of {}: allocate at most {}",
            new.buffers(),
            old.buffers(),
            old.buffers()
        ));
    }
    if new.swizzle().alignment_bytes() > old.swizzle().alignment_bytes() {
        return Err(format!(
            "the buffers' swizzle ({:?}) needs {}-byte alignment, and the reused allocation's start is aligned for its own swizzle ({:?}) only",
            new.swizzle(),
            new.swizzle().alignment_bytes(),
            old.swizzle()
        ));
    }
    Ok(())
}

/// Whether the bytes of buffer `from` may be seen as buffer `to`: no more
/// bytes, not a transposed view, the same swizzle as `to` gets by its own
/// shape (so every consumer lays it out as the bytes are), and, when
/// swizzled, the same rows of the same width (a swizzle moves bytes within
/// rows, and wide rows are stored in atom-wide column blocks whose stride is
/// the row count).
pub fn reinterpretable(
    from: &super::SharedMemoryType,
    to: &super::SharedMemoryType,
) -> Result<(), String> {
    let bytes =
        |m: &super::SharedMemoryType| m.shape().iter().product::<usize>() * m.elem().size_bytes();
    if from.transposed() {
        return Err("`local_reinterpret` of a transposed view (`local_trans`): reinterpret the buffer itself".into());
    }
    if bytes(to) > bytes(from) {
        return Err(format!(
            "{:?} of {} take {} bytes, more than the buffer's {} ({:?} of {})",
            to.shape(),
            to.elem(),
            bytes(to),
            bytes(from),
            from.shape(),
            from.elem()
        ));
    }
    let wanted = shared_swizzle(to.elem(), to.shape());
    if to.swizzle() != wanted || from.swizzle() != wanted {
        return Err(format!(
            "the buffer is laid out with the {} swizzle and {:?} of {} would be with the {} one: the same bytes would not hold the same elements; keep the rows' width in bytes",
            from.swizzle().name(),
            to.shape(),
            to.elem(),
            wanted.name()
        ));
    }
    let row_bytes = |m: &super::SharedMemoryType| {
        let shape = without_leading_ones(m.shape());
        let rows: usize = shape[..shape.len() - 1].iter().product();
        (rows, shape[shape.len() - 1] * m.elem().size_bytes())
    };
    if wanted != Swizzle::None && row_bytes(from) != row_bytes(to) {
        let ((r0, b0), (r1, b1)) = (row_bytes(from), row_bytes(to));
        return Err(format!(
            "a swizzled buffer of {r0} rows of {b0} bytes seen as {r1} rows of {b1} bytes: the swizzle would put the elements elsewhere; keep the rows (e.g. [{r0}, {}] of {})",
            b0 / to.elem().size_bytes(),
            to.elem()
        ));
    }
    Ok(())
}

/// Whether a buffer of `buffer` shape holds a TMA block of `block`: the
/// same extents, or the block's with leading unit dimensions left out
/// (Triton's descriptor loads of `[1, BM, D]` blocks into `[BM, D]` tiles).
fn holds_block(buffer: &[usize], block: &[usize]) -> bool {
    buffer.len() <= block.len()
        && block[block.len() - buffer.len()..] == *buffer
        && block[..block.len() - buffer.len()].iter().all(|&d| d == 1)
}

/// How TMA moves one block of a descriptor into a buffer of
/// [`shared_swizzle`]: boxes of `box_shape` (outermost first), the inner
/// dimension cut to one swizzle atom when the block is wider, `pieces` of
/// them side by side along it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmaBox {
    pub swizzle: Swizzle,
    pub box_shape: Vec<usize>,
    pub pieces: usize,
}

impl TmaBox {
    pub fn new(elem: ScalarType, block: &[usize]) -> TmaBox {
        let swizzle = shared_swizzle(elem, block);
        let mut box_shape = block.to_vec();
        let atom_elems = match swizzle {
            Swizzle::None => usize::MAX,
            Swizzle::Bytes32 => 32 / elem.size_bytes(),
            Swizzle::Bytes64 => 64 / elem.size_bytes(),
            Swizzle::Bytes128 => 128 / elem.size_bytes(),
        };
        let inner = block.last().copied().unwrap_or(1);
        let cut = inner.min(atom_elems);
        if let Some(last) = box_shape.last_mut() {
            *last = cut;
        }
        TmaBox {
            swizzle,
            box_shape,
            pieces: inner / cut.max(1),
        }
    }
}

/// One i32 offset per dimension of a descriptor's block.
fn block_offsets(block: &[usize], offsets: &[&Type]) -> Result<(), String> {
    if offsets.len() != block.len() {
        return Err(format!(
            "{} offsets for a {}-d descriptor",
            offsets.len(),
            block.len()
        ));
    }
    offsets
        .iter()
        .try_for_each(|t| scalar_of(t, ScalarType::I32, "an offset"))
}

fn scalar_of(t: &Type, s: ScalarType, what: &str) -> Result<(), String> {
    same(t, &Type::scalar(s), what)
}

fn same(t: &Type, expected: &Type, what: &str) -> Result<(), String> {
    if t == expected {
        Ok(())
    } else {
        Err(format!("{what} is {t}, expected {expected}"))
    }
}

fn positive(n: i64, what: &str) -> Result<(), String> {
    if (1..1 << 20).contains(&n) {
        Ok(())
    } else {
        Err(format!("{what} {n} is not in 1..2^20"))
    }
}

fn non_negative(n: i64, what: &str) -> Result<(), String> {
    if (0..64).contains(&n) {
        Ok(())
    } else {
        Err(format!("{what} {n} is not in 0..64"))
    }
}

/// What a primitive that takes only this program's own buffers and
/// barriers says of a remote view.
fn local(t: &Type, user: &str) -> Result<(), String> {
    if t.is_remote() {
        return Err(format!(
            "{user} cannot take a remote view ({t}): only `barrier_arrive` and the remote \
             stores reach a peer program's shared memory"
        ));
    }
    Ok(())
}

fn one_buffer<'t>(t: &'t Type, user: &str) -> Result<&'t super::SharedMemoryType, String> {
    local(t, user)?;
    match t {
        Type::SharedMemory(m) if m.buffers() == 1 => Ok(m),
        Type::SharedMemory(m) => Err(format!(
            "{user} takes one buffer, not all {} of an allocation: pick one with `local_view(buffers, i)`",
            m.buffers()
        )),
        other => Err(format!("{user} takes a shared buffer, not {other}")),
    }
}

/// The element type and shape of one buffer, in shared or tensor memory
/// (what `local_load` gives and `local_store` takes).
fn buffer_contents(t: &Type, user: &str) -> Result<(ScalarType, Vec<usize>), String> {
    match t {
        Type::TensorMemory(m) if m.buffers() == 1 => Ok((m.elem(), m.shape().to_vec())),
        Type::TensorMemory(m) => Err(format!(
            "{user} takes one buffer, not all {} of an allocation: pick one with `local_view(buffers, i)`",
            m.buffers()
        )),
        _ => one_buffer(t, user).map(|m| (m.elem(), m.shape().to_vec())),
    }
}

/// The shapes and types of a `tcgen05` MMA: `a` `[128, K]` and `b` `[K, N]`
/// of one 16-bit float type in shared memory, K a multiple of 16, into an
/// f32 `[128, N]` accumulator.
fn mma_shapes(
    a: &SharedMemoryType,
    b: &SharedMemoryType,
    acc: &TensorMemoryType,
) -> Result<(), String> {
    let ([m, k], [k2, n]) = (a.shape(), b.shape()) else {
        return Err("`async_dot`'s a and b are matrices".into());
    };
    if k != k2 {
        return Err(format!(
            "inner dimensions differ: a is {:?}, b is {:?}; a's columns (K) must equal b's rows",
            a.shape(),
            b.shape()
        ));
    }
    if a.elem() != b.elem() || !matches!(a.elem(), ScalarType::F16 | ScalarType::BF16) {
        return Err(format!(
            "a holds {} and b holds {}: a tensor-memory `async_dot` takes f16 or bf16 operands of one type",
            a.elem(),
            b.elem()
        ));
    }
    if k % 16 != 0 {
        return Err(format!(
            "K = {k}: `tcgen05` MMAs step K by 16, so K must be a multiple of 16"
        ));
    }
    if acc.elem() != ScalarType::F32 || acc.shape() != [*m, *n] || n % 16 != 0 {
        return Err(format!(
            "a [{m}, {k}] x [{k}, {n}] product accumulates into an f32 [{m}, {n}] tensor-memory buffer with N a multiple of 16, not {}",
            Type::TensorMemory(acc.clone())
        ));
    }
    Ok(())
}

/// One buffer of a peer program (a `remote_view`).
fn remote_buffer<'t>(t: &'t Type, user: &str) -> Result<&'t super::SharedMemoryType, String> {
    match t {
        Type::SharedMemory(m) if m.buffers() == 1 && m.remote() => Ok(m),
        other => Err(format!(
            "{user} writes a remote view of one buffer (`remote_view(local_view(bufs, i), rank)`), not {other}"
        )),
    }
}

fn one_barrier(t: &Type, user: &str) -> Result<(), String> {
    local(t, user)?;
    one_barrier_anywhere(t, user)
}

/// One barrier, of this program or (a remote view) of a peer.
fn one_barrier_anywhere(t: &Type, user: &str) -> Result<(), String> {
    match t {
        Type::Barriers(b) if b.count() == 1 => Ok(()),
        Type::Barriers(b) => Err(format!(
            "{user} takes one barrier, not all {} of an allocation: pick one with `local_view(bars, i)`",
            b.count()
        )),
        other => Err(format!("{user} takes a barrier, not {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BarrierType, SharedMemoryType, TensorDescriptorType};

    #[test]
    fn mnemonics_are_unique() {
        for p in Prim::ALL {
            assert_eq!(Prim::from_mnemonic(p.mnemonic()), Some(p));
        }
    }

    #[test]
    fn typing_rules_accept_a_tma_load_and_reject_a_mismatched_buffer() {
        let desc =
            Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::BF16, vec![128, 64]));
        let buf = |shape: Vec<usize>| {
            Type::SharedMemory(SharedMemoryType::new(
                ScalarType::BF16,
                shape,
                1,
                Swizzle::Bytes128,
                true,
            ))
        };
        let bar = Type::Barriers(BarrierType::new(1));
        let i32t = Type::scalar(ScalarType::I32);
        let good = buf(vec![128, 64]);
        let ok = [&desc, &good, &bar, &i32t, &i32t];
        assert_eq!(Prim::AsyncDescriptorLoad.check(&[], &ok, &[]), Ok(()));
        let bad = buf(vec![64, 64]);
        let err = Prim::AsyncDescriptorLoad
            .check(&[], &[&desc, &bad, &bar, &i32t, &i32t], &[])
            .expect_err("shapes differ");
        assert!(err.contains("does not hold"), "{err}");
        let err = Prim::AsyncDescriptorLoad
            .check(&[], &[&desc, &good, &bar, &i32t], &[])
            .expect_err("one offset short");
        assert!(err.contains("1 offsets for a 2-d"), "{err}");
        // A prefetch names the block the same way, with no buffer.
        let prefetch = Prim::AsyncDescriptorPrefetch;
        assert_eq!(prefetch.check(&[], &[&desc, &i32t, &i32t], &[]), Ok(()));
        let err = prefetch
            .check(&[], &[&desc, &i32t], &[])
            .expect_err("one offset short");
        assert!(err.contains("1 offsets for a 2-d"), "{err}");
        let err = prefetch
            .check(&[], &[&good, &i32t, &i32t], &[])
            .expect_err("a buffer is not a descriptor");
        assert!(err.contains("a tensor descriptor"), "{err}");
    }

    #[test]
    fn async_dot_wants_matching_operands_and_an_f32_accumulator() {
        let smem = |shape: Vec<usize>| {
            Type::SharedMemory(SharedMemoryType::new(
                ScalarType::F16,
                shape,
                1,
                Swizzle::Bytes128,
                true,
            ))
        };
        let acc = Type::tensor(ScalarType::F32.into(), vec![64, 128]);
        let (a, b) = (smem(vec![64, 64]), smem(vec![64, 128]));
        assert_eq!(Prim::AsyncDot.check(&[], &[&a, &b, &acc], &[&acc]), Ok(()));
        let wrong_k = smem(vec![32, 128]);
        let err = Prim::AsyncDot
            .check(&[], &[&a, &wrong_k, &acc], &[&acc])
            .expect_err("K differs");
        assert!(err.starts_with("inner dimensions differ"), "{err}");
    }

    #[test]
    fn remote_views_take_arrivals_and_stores_but_no_wait_or_load() {
        let bar = Type::Barriers(BarrierType::new(1));
        let bars = Type::Barriers(BarrierType::new(4));
        let i32t = Type::scalar(ScalarType::I32);
        let yes = Type::scalar(ScalarType::Bool);
        let peer_bar = Type::Barriers(BarrierType::new(1).to_remote());
        assert_eq!(
            Prim::RemoteView.check(&[], &[&bar, &i32t], &[&peer_bar]),
            Ok(())
        );
        let err = Prim::RemoteView
            .check(&[], &[&bars, &i32t], &[&peer_bar])
            .expect_err("all four barriers");
        assert!(err.contains("pick one"), "{err}");
        assert_eq!(
            Prim::BarrierArrive.check(&[1], &[&peer_bar, &yes], &[]),
            Ok(())
        );
        let err = Prim::BarrierWait
            .check(&[], &[&peer_bar, &i32t, &yes], &[])
            .expect_err("no remote wait");
        assert!(err.contains("cannot take a remote view"), "{err}");
        let buf = SharedMemoryType::new(ScalarType::F32, vec![64], 1, Swizzle::None, true);
        let peer_buf = Type::SharedMemory(buf.to_remote());
        let tile = Type::tensor(ScalarType::F32.into(), vec![64]);
        assert_eq!(
            Prim::RemoteShmemStore.check(&[], &[&peer_buf, &tile], &[]),
            Ok(())
        );
        assert_eq!(
            Prim::AsyncRemoteShmemStore.check(&[], &[&peer_buf, &tile, &peer_bar], &[]),
            Ok(())
        );
        let err = Prim::AsyncRemoteShmemStore
            .check(&[], &[&peer_buf, &tile, &bar], &[])
            .expect_err("the barrier must be the peer's");
        assert!(err.contains("remote view of one barrier"), "{err}");
        let err = Prim::LocalLoad
            .check(&[], &[&peer_buf], &[&tile])
            .expect_err("no remote load");
        assert!(err.contains("cannot take a remote view"), "{err}");
        let own = Type::SharedMemory(buf);
        let err = Prim::RemoteShmemStore
            .check(&[], &[&own, &tile], &[])
            .expect_err("a local destination");
        assert!(err.contains("writes a remote view"), "{err}");
    }

    #[test]
    fn a_multicast_copy_takes_a_mask_before_its_offsets() {
        let desc =
            Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::BF16, vec![64, 64]));
        let buf = Type::SharedMemory(SharedMemoryType::new(
            ScalarType::BF16,
            vec![64, 64],
            1,
            Swizzle::Bytes128,
            true,
        ));
        let bar = Type::Barriers(BarrierType::new(1));
        let i32t = Type::scalar(ScalarType::I32);
        let ok = [&desc, &buf, &bar, &i32t, &i32t, &i32t];
        assert_eq!(
            Prim::AsyncDescriptorLoadMulticast.check(&[], &ok, &[]),
            Ok(())
        );
        let peer_bar = Type::Barriers(BarrierType::new(1).to_remote());
        let err = Prim::AsyncDescriptorLoadMulticast
            .check(&[], &[&desc, &buf, &peer_bar, &i32t, &i32t, &i32t], &[])
            .expect_err("the barrier names every target's own");
        assert!(err.contains("cannot take a remote view"), "{err}");
    }

    #[test]
    fn swizzle_follows_the_row_width() {
        assert_eq!(nvmma_swizzle(128), Swizzle::Bytes128);
        assert_eq!(nvmma_swizzle(64), Swizzle::Bytes64);
        assert_eq!(nvmma_swizzle(32), Swizzle::Bytes32);
        assert_eq!(nvmma_swizzle(16), Swizzle::None);
        assert_eq!(shared_swizzle(ScalarType::BF16, &[4, 64]), Swizzle::None);
        assert_eq!(shared_swizzle(ScalarType::F32, &[64]), Swizzle::None);
        assert_eq!(
            shared_swizzle(ScalarType::BF16, &[1, 1, 64, 128]),
            Swizzle::Bytes128
        );
    }

    #[test]
    fn buffers_hold_blocks_with_leading_unit_dimensions_left_out() {
        assert!(holds_block(&[64, 128], &[1, 1, 64, 128]));
        assert!(holds_block(&[1, 64, 128], &[1, 1, 64, 128]));
        assert!(holds_block(&[64, 128], &[64, 128]));
        assert!(!holds_block(&[64, 128], &[2, 64, 128]));
        assert!(!holds_block(&[1, 64, 128], &[64, 128]));
        assert_eq!(without_leading_ones(&[1, 1, 1]), &[1]);
    }

    #[test]
    fn wide_blocks_move_in_atom_wide_boxes() {
        let b = TmaBox::new(ScalarType::BF16, &[64, 256]);
        assert_eq!(
            (b.swizzle, b.box_shape.clone(), b.pieces),
            (Swizzle::Bytes128, vec![64, 64], 4)
        );
        let a = TmaBox::new(ScalarType::BF16, &[128, 64]);
        assert_eq!((a.box_shape.clone(), a.pieces), (vec![128, 64], 1));
        let v = TmaBox::new(ScalarType::F32, &[256]);
        assert_eq!(
            (v.swizzle, v.box_shape.clone(), v.pieces),
            (Swizzle::None, vec![256], 1)
        );
    }

    #[test]
    fn store_reductions_round_trip_and_follow_the_ptx_type_table() {
        for (r, name) in StoreReduce::ALL {
            assert_eq!(StoreReduce::from_code(r.code()), Some(r));
            assert_eq!(r.name(), name);
        }
        assert_eq!(StoreReduce::from_code(7), None);
        assert_eq!(StoreReduce::from_code(-1), None);
        assert!(StoreReduce::Add.supports(ScalarType::F32));
        assert!(StoreReduce::Max.supports(ScalarType::BF16));
        assert!(!StoreReduce::Max.supports(ScalarType::F32));
        assert!(!StoreReduce::Add.supports(ScalarType::U8));
        assert!(!StoreReduce::Xor.supports(ScalarType::F16));
        let desc = Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::F32, vec![16, 32]));
        let buf = Type::SharedMemory(SharedMemoryType::new(
            ScalarType::F32,
            vec![16, 32],
            1,
            shared_swizzle(ScalarType::F32, &[16, 32]),
            true,
        ));
        let i32_t = Type::scalar(ScalarType::I32);
        let operands = [&desc, &buf, &i32_t, &i32_t];
        let store = |r: StoreReduce| Prim::AsyncDescriptorStore.check(&[r.code()], &operands, &[]);
        assert_eq!(store(StoreReduce::Add), Ok(()));
        assert!(store(StoreReduce::Min).is_err_and(|e| e.contains("no `min` reduction of f32")));
    }
}
