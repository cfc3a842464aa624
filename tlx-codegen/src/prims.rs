//! TLX primitives in LLVM IR for sm_90a: where `local_alloc` and
//! `alloc_barriers` live (planned before lowering, at the start of the
//! dynamic shared buffer, scratch and pipeline rings after them), and the
//! PTX each primitive becomes (mbarrier, `cp.async.bulk.tensor`, wgmma,
//! `barrier.sync`/`barrier.arrive`, proxy fences).
//!
//! A buffer, barrier or descriptor value is one register: the byte offset
//! of the buffer or barrier in the shared array, or the generic address of
//! the descriptor parameter. Single-thread operations (barrier arrivals,
//! TMA issues) run on the first thread of the context, so a task (or the
//! program) counts as one arrival, as the interpreter counts it.

use std::collections::HashMap;

use super::emit::llvm_type;
use super::lower::{malformed, Lowerer, Result, Tensor};
use super::wgmma::{is_16_bit_float, OperandOrders, WgmmaA, WgmmaPlan};
use super::CodegenError;
use crate::layout::{self, wgmma_register_a, SharedLayout};
use tlx_core::ir::{
    Arch, Block, Elem, Kernel, Lowering, Named, Op, OpKind, Prim, ScalarType, SharedMemoryType,
    StoreReduce, Swizzle, TmaBox, Type, ValueId,
};

/// Where each `local_alloc` and `alloc_barriers` result lives.
#[derive(Clone, Debug, Default)]
pub struct StaticShared {
    offsets: HashMap<ValueId, usize>,
    /// Each tensor-memory allocation's first column.
    pub(super) tmem_columns: HashMap<ValueId, usize>,
    /// With tensor memory: the shared byte offset of the slot its address
    /// arrives in, and the columns the kernel's buffers take.
    pub(super) tmem_slot: Option<(usize, usize)>,
    /// Bytes the allocations take (scratch starts after them).
    pub bytes: usize,
    /// The alignment the shared array needs for them.
    pub align: usize,
}

/// Bytes between consecutive buffers of an allocation: swizzled buffers
/// start on a swizzle period, as TMA and wgmma apply the pattern to
/// absolute addresses.
fn buffer_stride(m: &SharedMemoryType) -> usize {
    let bytes = m.shape().iter().product::<usize>() * m.elem().size_bytes();
    bytes.div_ceil(m.swizzle().alignment_bytes()) * m.swizzle().alignment_bytes()
}

fn layout_swizzle(swizzle: Swizzle) -> Option<layout::Swizzle> {
    match swizzle {
        Swizzle::None => None,
        Swizzle::Bytes32 => Some(layout::Swizzle::B32),
        Swizzle::Bytes64 => Some(layout::Swizzle::B64),
        Swizzle::Bytes128 => Some(layout::Swizzle::B128),
    }
}

/// The placement of one buffer's elements (for a `local_trans` view, the
/// stored matrix's placement with the flat-index bits of rows and columns
/// exchanged).
pub(super) fn buffer_layout(m: &SharedMemoryType) -> Result<SharedLayout> {
    let eb = m.elem().size_bytes();
    let stored: Vec<usize> = if m.transposed() {
        m.shape().iter().rev().copied().collect()
    } else {
        m.shape().to_vec()
    };
    let layout = match layout_swizzle(m.swizzle()) {
        Some(s) => SharedLayout::nvmma(&stored, eb, s)?,
        None => SharedLayout::row_major(&stored, eb)?,
    };
    if m.transposed() {
        return Ok(layout.transposed()?);
    }
    Ok(layout)
}

/// Places every allocation of the kernel body, in program order.
pub fn plan_static_shared(kernel: &Kernel) -> Result<StaticShared> {
    let mut plan = StaticShared {
        align: 16,
        ..StaticShared::default()
    };
    for op in &kernel.body.ops {
        let OpKind::Prim { prim, ref args, .. } = op.kind else {
            for block in op.kind.blocks() {
                reject_nested_allocations(block)?;
            }
            continue;
        };
        let Some(&result) = op.results.first() else {
            continue;
        };
        // `reuse = other`: the bytes of an allocation placed before.
        if let (Prim::LocalAlloc, [other]) = (prim, args.as_slice()) {
            let at = plan
                .offsets
                .get(other)
                .copied()
                .ok_or_else(|| malformed("`reuse` of something that is not an allocation"))?;
            plan.offsets.insert(result, at);
            continue;
        }
        let (bytes, align) = match (prim, kernel.type_of(result)) {
            (Prim::LocalAlloc, Type::TensorMemory(m)) => {
                let (slot, columns) = plan.tmem_slot.unwrap_or((usize::MAX, 0));
                plan.tmem_columns.insert(result, columns);
                let taken = columns + m.columns() * m.buffers() as usize;
                plan.tmem_slot = Some((slot, taken));
                continue;
            }
            (Prim::LocalAlloc, Type::SharedMemory(m)) => (
                buffer_stride(m) * m.buffers() as usize,
                m.swizzle().alignment_bytes(),
            ),
            (Prim::AllocBarriers, Type::Barriers(b)) => (8 * b.count(), 8),
            _ => continue,
        };
        let at = plan.bytes.div_ceil(align) * align;
        plan.offsets.insert(result, at);
        plan.bytes = at + bytes;
        plan.align = plan.align.max(align);
    }
    // The 4-byte slot `tcgen05.alloc` writes the tensor-memory address to.
    if let Some((_, columns)) = plan.tmem_slot {
        let at = plan.bytes.div_ceil(8) * 8;
        plan.tmem_slot = Some((at, columns));
        plan.bytes = at + 8;
    }
    Ok(plan)
}

fn reject_nested_allocations(block: &Block) -> Result<()> {
    for op in &block.ops {
        if let OpKind::Prim {
            prim: prim @ (Prim::LocalAlloc | Prim::AllocBarriers),
            ..
        } = op.kind
        {
            return Err(CodegenError::Misuse {
                message: format!("`{}` inside a loop, branch or task", prim.mnemonic()),
                hint: "allocate shared buffers and barriers at the top of the kernel body, \
                       before `async_tasks!`, as TLX does"
                    .into(),
                at: Some(op.loc),
            });
        }
        for nested in op.kind.blocks() {
            reject_nested_allocations(nested)?;
        }
    }
    Ok(())
}

/// How a `local_slice` from `from` to `to` moves the base: along which
/// dimension, and bytes per unit of its offset; `None` when the slice is not
/// laid out in the buffer as a buffer of its own shape would be.
fn slice_step(from: &SharedMemoryType, to: &SharedMemoryType) -> Option<(usize, usize)> {
    let eb = from.elem().size_bytes();
    let (f, t) = (from.shape(), to.shape());
    let rest = |d: usize| f[d + 1..].iter().product::<usize>();
    let sliced: Vec<usize> = (0..f.len()).filter(|&d| f[d] != t[d]).collect();
    match (layout_swizzle(from.swizzle()), sliced.as_slice()) {
        (_, []) => Some((0, 0)),
        // Whole rows: row-major, or NVMMA with one column block.
        (None, [0]) => Some((0, rest(0) * eb)),
        (Some(s), [0]) if f.len() == 2 && f[1] * eb == s.atom_bytes() => Some((0, f[1] * eb)),
        // Whole column blocks of an NVMMA buffer (all rows).
        (Some(s), [1]) if f.len() == 2 && (t[1] * eb) % s.atom_bytes() == 0 => {
            // One atom column block spans `rows * atom` bytes.
            let atom_elems = s.atom_bytes() / eb;
            Some((1, f[0] * s.atom_bytes() / atom_elems))
        }
        _ => None,
    }
}

fn elem_of(m: &SharedMemoryType) -> Elem {
    Elem::Scalar(m.elem())
}

impl<'k> Lowerer<'k> {
    pub fn lower_prim(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::Prim { prim, args, imms } = &op.kind else {
            return Err(malformed("not a primitive"));
        };
        if let Lowering::Asm {
            asm,
            result,
            constraints,
        } = prim.def().lowering
        {
            return self.lower_asm_prim(op, asm, result, constraints);
        }
        let named = Named::new(*prim, args, imms);
        let arg = |name: &str| named.get(name).copied().map_err(malformed);
        let rest = |name: &str| named.rest(name).map_err(malformed);
        let imm = |name: &str| named.imm(name).map_err(malformed);
        let result = || -> Result<ValueId> {
            op.results
                .first()
                .copied()
                .ok_or_else(|| malformed("op without result"))
        };
        match prim {
            Prim::LocalAlloc if matches!(self.ty(result()?), Type::TensorMemory(_)) => {
                self.tmem_alloc(op, result()?)
            }
            Prim::LocalAlloc | Prim::AllocBarriers => {
                let r = result()?;
                let at = self
                    .facts
                    .static_shared
                    .offsets
                    .get(&r)
                    .copied()
                    .ok_or_else(|| malformed("an allocation the planner did not place"))?;
                self.define_register(r, at.to_string())?;
                if *prim == Prim::AllocBarriers {
                    self.init_barriers(at, self.ty(r).numel(), imm("arrive_count")?);
                }
                Ok(())
            }
            Prim::LocalView if matches!(self.ty(arg("buffers")?), Type::TensorMemory(_)) => {
                let Type::TensorMemory(m) = self.ty(arg("buffers")?) else {
                    return Err(malformed("a view of tensor memory"));
                };
                let (base, index) = (
                    self.register(arg("buffers")?)?,
                    self.register(arg("index")?)?,
                );
                let at = self.tmem_view(m, &base, &index);
                self.define_register(result()?, at)
            }
            Prim::LocalView => {
                let stride = match self.ty(arg("buffers")?) {
                    Type::SharedMemory(m) => buffer_stride(m),
                    _ => 8,
                };
                let base = self.register(arg("buffers")?)?;
                let index = self.register(arg("index")?)?;
                let delta = self.f.inst(format!("mul i32 {index}, {stride}"));
                let at = self.f.inst(format!("add i32 {base}, {delta}"));
                self.define_register(result()?, at)
            }
            // The same bytes: only the type (and so the placement) changes.
            Prim::LocalTrans => {
                let base = self.register(arg("buffer")?)?;
                self.define_register(result()?, base)
            }
            Prim::LocalReinterpret => {
                // A slice's elements are not the bytes after its start.
                let of_slice = self.def_of(arg("buffer")?).is_some_and(|def| {
                    matches!(
                        def.kind,
                        OpKind::Prim {
                            prim: Prim::LocalSlice,
                            ..
                        }
                    )
                });
                if of_slice {
                    return Err(CodegenError::Misuse {
                        message: "`local_reinterpret` of a `local_slice`".into(),
                        hint: "reinterpret the whole buffer (a `local_view`), then slice the \
                               reinterpreted view"
                            .into(),
                        at: Some(op.loc),
                    });
                }
                let base = self.register(arg("buffer")?)?;
                self.define_register(result()?, base)
            }
            // Rows stay (a slice keeps all 128 lanes): the column offset moves.
            Prim::LocalSlice if matches!(self.ty(arg("buffer")?), Type::TensorMemory(_)) => {
                let column = *rest("offsets")?
                    .get(1)
                    .ok_or_else(|| malformed("a 2-d slice"))?;
                let (base, column) = (self.register(arg("buffer")?)?, self.register(column)?);
                let at = self.f.inst(format!("add i32 {base}, {column}"));
                self.define_register(result()?, at)
            }
            Prim::LocalSlice => {
                let from = self.buffer_type(arg("buffer")?)?;
                let to = self.buffer_type(result()?)?;
                let (dim, step) = slice_step(&from, &to).ok_or_else(|| CodegenError::Misuse {
                    message: format!(
                        "`local_slice` of a {:?} sub-tile of a {:?} buffer",
                        to.shape(),
                        from.shape(),
                    ),
                    hint: "slices are whole rows (all columns, at a row offset that is a multiple \
                           of 8 for swizzled buffers) or whole column blocks of the swizzle atom"
                        .into(),
                    at: Some(op.loc),
                })?;
                let base = self.register(arg("buffer")?)?;
                let offset = *rest("offsets")?
                    .get(dim)
                    .ok_or_else(|| malformed("an offset"))?;
                let offset = self.register(offset)?;
                let delta = self.f.inst(format!("mul i32 {offset}, {step}"));
                let at = self.f.inst(format!("add i32 {base}, {delta}"));
                self.define_register(result()?, at)
            }
            Prim::LocalLoad if matches!(self.ty(arg("buffer")?), Type::TensorMemory(_)) => {
                self.tmem_load(op, arg("buffer")?, result()?)
            }
            Prim::LocalStore if matches!(self.ty(arg("buffer")?), Type::TensorMemory(_)) => {
                self.tmem_store(op, arg("buffer")?, arg("value")?)
            }
            Prim::Tcgen05Mma => self.tcgen05_mma(op, args),
            Prim::Tcgen05Commit => self.tcgen05_commit(op, arg("bar")?),
            Prim::LocalLoad => {
                let m = self.buffer_type(arg("buffer")?)?;
                let placement = buffer_layout(&m)?;
                let base = self.register(arg("buffer")?)?;
                self.note_load(result()?, op);
                let layout = match self.load_hint(result()?) {
                    Some(hint) => hint,
                    None => self.default_layout(m.shape())?,
                };
                let regs = self.load_placed_at(&layout, elem_of(&m), &placement, &base)?;
                self.define_value(result()?, Tensor { layout, regs });
                Ok(())
            }
            Prim::LocalStore => {
                let m = self.buffer_type(arg("buffer")?)?;
                let placement = buffer_layout(&m)?;
                let base = self.register(arg("buffer")?)?;
                let value = self.tensor(arg("value")?)?;
                // As Triton's shared-memory barrier analysis would: earlier
                // readers of the buffer are done, and later readers (other
                // threads, the async proxy) see the whole tile. A barrier
                // with nothing but pure instructions after it (the one of
                // `async_descriptor_store_wait` before a TMA store's
                // staging buffer is refilled) already orders the readers.
                if !self.barrier_stands() {
                    self.barrier();
                }
                self.store_placed_at(&value, elem_of(&m), &placement, &base)?;
                self.shared_writes_reach_async_proxy();
                Ok(())
            }
            Prim::BarrierWait => {
                let bar = self.shared_address_of(arg("bar")?)?;
                let phase = self.register(arg("phase")?)?;
                let pred = self.register(arg("pred")?)?;
                match self.kernel.options.mbar_timeout_ns {
                    Some(timeout) => self.wait_parity_or_trap(&bar, &phase, &pred, timeout, op),
                    None => self.wait_parity(&bar, &phase, &pred),
                }
                self.tcgen05_fence_after();
                Ok(())
            }
            Prim::BarrierArrive => {
                let remote = self.ty(arg("bar")?).is_remote();
                // A remote view's register is already its `shared::cluster` address.
                let bar = if remote {
                    self.register(arg("bar")?)?
                } else {
                    self.shared_address_of(arg("bar")?)?
                };
                let pred = self.register(arg("pred")?)?;
                let count = imm("arrive_count")?;
                self.tcgen05_fence_before();
                self.order_context_before_single_thread();
                // A remote arrival publishes this program's generic stores
                // into the peer's buffers (`remote_shmem_store`) only with a
                // release at cluster scope, which ptxas builds from a
                // GPU-wide `MEMBAR` (hundreds of cycles, every arrival).
                // Without such stores, the peer learns only that this
                // program is done reading a buffer of its own, which the
                // default release (CTA scope) orders, as CUTLASS's and
                // TLX's own remote arrivals do: the remote-arrive-per-stage
                // multicast backward measured 20% slower with the
                // cluster-scope form (H200, session 31).
                let publishes_stores = remote && self.facts.stores_into_peers;
                self.on_first_thread(&pred, |l| {
                    let asm = if publishes_stores {
                        format!(
                            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [$0], {count};"
                        )
                    } else if remote {
                        format!("mbarrier.arrive.shared::cluster.b64 _, [$0], {count};")
                    } else {
                        format!("mbarrier.arrive.shared::cta.b64 _, [$0], {count};")
                    };
                    l.f.asm("void", &asm, "r,~{memory}", &[("i32", &bar)]);
                });
                Ok(())
            }
            Prim::BarrierExpectBytes => {
                let bar = self.shared_address_of(arg("bar")?)?;
                let bytes = self.register(arg("bytes")?)?;
                let pred = self.register(arg("pred")?)?;
                self.expect_bytes(&pred, &bar, &bytes);
                Ok(())
            }
            Prim::AsyncDescriptorLoad => {
                let desc = self.register(arg("desc")?)?;
                let m = self.buffer_type(arg("buffer")?)?;
                let dst = self.shared_address_of(arg("buffer")?)?;
                let bar = self.shared_address_of(arg("barrier")?)?;
                let coords = self.registers(rest("offsets")?)?;
                let load = TmaDirection::Load {
                    barrier: &bar,
                    multicast: None,
                };
                self.tma_block("true", &m, (&desc, &dst), load, &coords);
                Ok(())
            }
            Prim::AsyncDescriptorPrefetch => {
                let desc = self.register(arg("desc")?)?;
                let d = self.descriptor_type(arg("desc")?)?;
                let coords = self.registers(rest("offsets")?)?;
                self.tma_prefetch(&desc, &TmaBox::new(d.elem(), d.block_shape()), &coords);
                Ok(())
            }
            Prim::AsyncDescriptorLoadMulticast => {
                let desc = self.register(arg("desc")?)?;
                let m = self.buffer_type(arg("buffer")?)?;
                let dst = self.shared_address_of(arg("buffer")?)?;
                let bar = self.shared_address_of(arg("barrier")?)?;
                let mask = self.register(arg("cta_mask")?)?;
                let mask = self.f.inst(format!("trunc i32 {mask} to i16"));
                let coords = self.registers(rest("offsets")?)?;
                let load = TmaDirection::Load {
                    barrier: &bar,
                    multicast: Some(&mask),
                };
                self.tma_block("true", &m, (&desc, &dst), load, &coords);
                Ok(())
            }
            Prim::RemoteView => {
                let local = self.shared_address_of(arg("buffer")?)?;
                let rank = self.register(arg("remote_cta_rank")?)?;
                let remote = self.map_to_peer(&local, &rank);
                self.define_register(result()?, remote)
            }
            Prim::RemoteShmemStore => self.remote_store(op, arg("dst")?, arg("value")?),
            Prim::AsyncRemoteShmemStore => {
                self.async_remote_store(op, arg("dst")?, arg("value")?, arg("barrier")?)
            }
            Prim::DescriptorLoad => {
                self.lower_descriptor_load(arg("desc")?, rest("offsets")?, result()?)
            }
            Prim::DescriptorStore => {
                self.lower_descriptor_store(arg("desc")?, arg("value")?, rest("offsets")?)
            }
            Prim::MakeTensorDescriptor => {
                self.lower_make_descriptor(arg("base")?, rest("dims")?, result()?)
            }
            Prim::AsyncDescriptorStore => {
                let desc = self.register(arg("desc")?)?;
                let m = self.buffer_type(arg("buffer")?)?;
                let src = self.shared_address_of(arg("buffer")?)?;
                let coords = self.registers(rest("offsets")?)?;
                // The tile's generic writes reach the async proxy, from every thread.
                self.shared_writes_reach_async_proxy();
                let reduce = StoreReduce::from_code(imm("store_reduce")?)
                    .ok_or_else(|| malformed("an unknown store reduction"))?;
                self.tma_block(
                    "true",
                    &m,
                    (&desc, &src),
                    TmaDirection::Store(reduce),
                    &coords,
                );
                Ok(())
            }
            Prim::AsyncDescriptorStoreWait => {
                // `.read`: the stores have read their shared buffers; without
                // it, their writes to global memory are done too (visible to
                // this thread, and to others after a release).
                let read = if imm("writes")? == 0 { ".read" } else { "" };
                let asm = format!("cp.async.bulk.wait_group{read} {};", imm("pendings")?);
                self.f.asm("void", &asm, "~{memory}", &[]);
                // Only the issuing thread tracked the stores: the others wait for it.
                self.barrier();
                Ok(())
            }
            Prim::AsyncDot => {
                self.lower_async_dot(op, arg("a")?, arg("b")?, arg("acc")?, result()?)
            }
            Prim::AsyncDotWait => {
                let acc = self.tensor(arg("acc")?)?;
                let acc_type = self
                    .ty(arg("acc")?)
                    .elem()
                    .scalar()
                    .unwrap_or(ScalarType::F32);
                let regs = self.wgmma_wait(imm("pendings")? as usize, acc_type, &acc.regs);
                self.define_value(
                    result()?,
                    Tensor {
                        layout: acc.layout,
                        regs,
                    },
                );
                Ok(())
            }
            Prim::AsyncLoad => {
                let m = self.buffer_type(arg("buffer")?)?;
                let placement = buffer_layout(&m)?;
                let base = self.register(arg("buffer")?)?;
                self.async_copy_into(arg("ptrs")?, arg("mask")?, &placement, &base, op.loc)
            }
            Prim::AsyncLoadCommitGroup => {
                self.f
                    .asm("void", "cp.async.commit_group;", "~{memory}", &[]);
                Ok(())
            }
            Prim::AsyncLoadWaitGroup => {
                let asm = format!("cp.async.wait_group {};", imm("pendings")?);
                self.f.asm("void", &asm, "~{memory}", &[]);
                // Each thread waited for its own copies: make them visible to
                // the async proxy (wgmma) and to the task's other threads.
                self.fence_async_shared();
                self.barrier();
                Ok(())
            }
            Prim::NamedBarrierWait | Prim::NamedBarrierArrive => {
                let step = if *prim == Prim::NamedBarrierWait {
                    "sync"
                } else {
                    "arrive"
                };
                let id = self.register(arg("bar_id")?)?;
                let threads = u32::try_from(imm("num_threads")?).unwrap_or(0);
                if *prim == Prim::NamedBarrierWait {
                    self.drop_barrier_subsumed_by(threads);
                }
                // Not `.aligned` (`bar.*`): see `Lowerer::barrier`.
                let asm = format!("barrier.{step} $0, {};", imm("num_threads")?);
                self.tcgen05_fence_before();
                self.f.asm("void", &asm, "r,~{memory}", &[("i32", &id)]);
                if *prim == Prim::NamedBarrierWait {
                    self.tcgen05_fence_after();
                }
                Ok(())
            }
            // `Lowering::Asm` primitives returned above.
            _ => Err(malformed(format!(
                "`{}` has no lowering of its own",
                prim.mnemonic()
            ))),
        }
    }

    /// A primitive whose definition is one instruction: scalar operands in
    /// order, one scalar result or none.
    fn lower_asm_prim(
        &mut self,
        op: &'k Op,
        asm: &str,
        result: &str,
        constraints: &str,
    ) -> Result<()> {
        let mut operands = Vec::with_capacity(op.kind.operands().len());
        for v in op.kind.operands() {
            let reg = self.register(v)?;
            operands.push((llvm_type(self.ty(v).elem()), reg));
        }
        let operands: Vec<(&str, &str)> = operands.iter().map(|(t, r)| (*t, r.as_str())).collect();
        let mut asm = asm.to_string();
        if let OpKind::Prim { prim, args, imms } = &op.kind {
            let named = Named::new(*prim, args, imms);
            for choice in prim.signature().choices {
                let code = named.imm(choice.immediate).map_err(malformed)?;
                let ptx = usize::try_from(code)
                    .ok()
                    .and_then(|c| choice.options.get(c))
                    .ok_or_else(|| malformed(format!("`{}` code {code}", choice.immediate)))?
                    .1;
                asm = asm.replace(&format!("{{{}}}", choice.immediate), ptx);
            }
        }
        let out = self.f.asm(result, &asm, constraints, &operands);
        match op.results.first() {
            Some(&r) => self.define_register(r, out),
            None => Ok(()),
        }
    }

    fn lower_async_dot(
        &mut self,
        op: &Op,
        a: ValueId,
        b: ValueId,
        acc: ValueId,
        result: ValueId,
    ) -> Result<()> {
        let Type::SharedMemory(mb) = self.ty(b) else {
            return Err(malformed("`async_dot`'s b is not a buffer"));
        };
        let (a_elem, a_shape, a_buffer) = match self.ty(a) {
            Type::SharedMemory(ma) => (ma.elem(), ma.shape().to_vec(), Some(ma)),
            t => match t.elem().scalar() {
                Some(s) => (s, t.shape().to_vec(), None),
                None => return Err(malformed("`async_dot`'s a")),
            },
        };
        let [m, k] = a_shape[..] else {
            return Err(malformed("`async_dot`'s a is not a matrix"));
        };
        let n = mb.shape()[1];
        let acc_elem = self.ty(acc).elem().scalar().unwrap_or(ScalarType::F32);
        let warps = self.context.num_warps;
        let types = (a_elem, mb.elem(), acc_elem);
        if a_buffer.is_none() && !is_16_bit_float(a_elem) {
            return Err(CodegenError::Misuse {
                message: format!("`async_dot` with A in registers takes f16 or bf16, not {a_elem}"),
                hint: "wgmma reads only 16-bit A operands from registers: `local_store` A into \
                       a shared buffer for fp8, tf32 (f32) and 8-bit integer inputs, or cast it \
                       (`.to(bf16)`)"
                    .into(),
                at: Some(op.loc),
            });
        }
        let orders = OperandOrders {
            a_m_major: a_buffer.is_some_and(|ma| ma.transposed()),
            b_k_major: mb.transposed(),
        };
        let plan = WgmmaPlan::with_orders(self.arch, types, (m, n, k), warps, orders)
            .filter(|p| {
                a_buffer.is_none_or(|ma| buffer_layout(ma).is_ok_and(|l| l == p.a))
                    && buffer_layout(mb).is_ok_and(|l| l == p.b)
            })
            .ok_or_else(|| CodegenError::Misuse {
                message: format!(
                    "`async_dot` of [{m}, {k}] x [{k}, {n}] {a_elem} tiles on {warps} warps does not map onto wgmma{}",
                    wgmma_mismatch(self.arch, types, (m, n, k), warps, orders)
                ),
                hint: "wgmma takes f16/bf16 buffers (A may be a register tensor or M-major, \
                       `local_trans` of a [K, M] buffer) with an f32 accumulator; fp8 or f32 (tf32) buffers with an f32 accumulator and \
                       s8/u8 buffers with an i32 one, all three with B K-major (`local_trans` \
                       of an [N, K] tile); on sm_90a, whole warp groups (the task's num_warps \
                       a multiple of 4), M a multiple of 64 per warp group, N a multiple of 8 \
                       up to 256 (64 or more for an N-major B, a multiple of 16 above 32 for \
                       8-bit integers) and K a whole number of 32-byte steps (16 for 16-bit \
                       inputs, 32 for 8-bit, 8 for tf32)"
                    .into(),
                at: Some(op.loc),
            })?;
        let layout = plan.acc_layout()?;
        let acc_regs = self.get(acc, &layout)?;
        let b_at = self.register(b)?;
        let regs = if a_buffer.is_some() {
            let a_at = self.register(a)?;
            self.wgmma_issue(&plan, acc_regs, WgmmaA::Shared(&a_at), &b_at)?
        } else {
            // Free when A already sits in this layout, as an accumulator of
            // N = K (cast to 16 bits) does.
            let a_layout = wgmma_register_a(m, k, warps)?;
            let a_regs = self.get(a, &a_layout)?;
            self.wgmma_issue(&plan, acc_regs, WgmmaA::Registers(&a_regs), &b_at)?
        };
        self.define_value(result, Tensor { layout, regs });
        Ok(())
    }

    /// Initializes `count` mbarriers at byte `at` from the first thread,
    /// then makes them visible to every thread and to the async proxy.
    pub(super) fn init_barriers(&mut self, at: usize, count: usize, arrive_count: i64) {
        let offsets: Vec<String> = (0..count).map(|i| (at + 8 * i).to_string()).collect();
        self.init_barriers_at(&offsets, arrive_count);
    }

    /// [`Lowerer::init_barriers`] for mbarriers at the shared byte offsets
    /// `offsets` (i32 operands).
    pub(super) fn init_barriers_at(&mut self, offsets: &[String], arrive_count: i64) {
        self.on_first_thread("true", |l| {
            for offset in offsets {
                let address = l.shared_address(offset);
                let asm = format!("mbarrier.init.shared::cta.b64 [$0], {arrive_count};");
                l.f.asm("void", &asm, "r,~{memory}", &[("i32", &address)]);
            }
            l.f.asm(
                "void",
                "fence.mbarrier_init.release.cluster;",
                "~{memory}",
                &[],
            );
        });
        self.barrier();
    }

    /// From the first thread, when `pred`: arrives on the mbarrier at `bar`
    /// announcing `bytes` (an i32 operand) of asynchronous copies for its
    /// current phase.
    pub(super) fn expect_bytes(&mut self, pred: &str, bar: &str, bytes: &str) {
        self.on_first_thread(pred, |l| {
            l.f.asm(
                "void",
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                "r,r,~{memory}",
                &[("i32", bar), ("i32", bytes)],
            );
        });
    }

    /// From the first thread: retires the mbarriers at the shared addresses
    /// `bars`, so that their bytes may hold something else (every wait on
    /// them is over).
    pub(super) fn invalidate_barriers(&mut self, bars: &[String]) {
        self.on_first_thread("true", |l| {
            for bar in bars {
                l.f.asm(
                    "void",
                    "mbarrier.inval.shared::cta.b64 [$0];",
                    "r,~{memory}",
                    &[("i32", bar)],
                );
            }
        });
    }

    /// Spins on `mbarrier.try_wait.parity` (which itself suspends for a
    /// while) until the phase of parity `phase` completed; skipped when `pred` is false.
    pub(super) fn wait_parity(&mut self, bar: &str, phase: &str, pred: &str) {
        let head = self.f.fresh("mbar_wait");
        let done = self.f.fresh("mbar_done");
        self.f
            .stmt(format!("br i1 {pred}, label %{head}, label %{done}"));
        self.enter_block(&head);
        let passed = self.try_wait_parity(bar, phase);
        self.f
            .stmt(format!("br i1 {passed}, label %{done}, label %{head}"));
        self.enter_block(&done);
    }

    /// One `mbarrier.try_wait.parity`: whether the phase of parity `phase` completed.
    fn try_wait_parity(&mut self, bar: &str, phase: &str) -> String {
        // A peer's stores into this program (`remote_shmem_store`) come
        // with its cluster-scope release (see `BarrierArrive`), which by
        // PTX's memory model synchronizes only with an acquire whose scope
        // holds the peer: the default is the CTA's.
        let scope = if self.facts.stores_into_peers {
            ".acquire.cluster"
        } else {
            ""
        };
        let asm = format!(
            "{{ .reg .pred p; mbarrier.try_wait.parity{scope}.shared::cta.b64 p, [$1], $2; \
             selp.u32 $0, 1, 0, p; }}"
        );
        let ok = self.f.asm(
            "i32",
            &asm,
            "=r,r,r,~{memory}",
            &[("i32", bar), ("i32", phase)],
        );
        self.f.inst(format!("icmp ne i32 {ok}, 0"))
    }

    /// `wait_parity` with a deadline (`mbar_timeout_ns`): past `timeout`
    /// nanoseconds of `%globaltimer`, the context's first thread prints
    /// where it hangs and traps, which ends the grid with an error; the
    /// other threads spin until then.
    fn wait_parity_or_trap(&mut self, bar: &str, phase: &str, pred: &str, timeout: u64, op: &Op) {
        let start = self.f.fresh("mbar_start");
        let head = self.f.fresh("mbar_wait");
        let check = self.f.fresh("mbar_clock");
        let late = self.f.fresh("mbar_late");
        let report = self.f.fresh("mbar_report");
        let done = self.f.fresh("mbar_done");
        let clock = |l: &mut Self| {
            l.f.asm("i64", "mov.u64 $0, %globaltimer;", "=l,~{memory}", &[])
        };
        self.f
            .stmt(format!("br i1 {pred}, label %{start}, label %{done}"));
        self.enter_block(&start);
        let started = clock(self);
        self.f.stmt(format!("br label %{head}"));
        self.enter_block(&head);
        let passed = self.try_wait_parity(bar, phase);
        self.f
            .stmt(format!("br i1 {passed}, label %{done}, label %{check}"));
        self.enter_block(&check);
        let now = clock(self);
        let waited = self.f.inst(format!("sub i64 {now}, {started}"));
        let over = self.f.inst(format!("icmp ugt i64 {waited}, {timeout}"));
        self.f
            .stmt(format!("br i1 {over}, label %{late}, label %{head}"));
        self.enter_block(&late);
        let first = self.f.inst(format!("icmp eq i32 {}, 0", self.thread_id()));
        self.f
            .stmt(format!("br i1 {first}, label %{report}, label %{head}"));
        self.enter_block(&report);
        let site = format!(
            "{}:{}:{}: barrier_wait timed out after %llu ns (mbar_timeout_ns): the mbarrier at \
             shared address %u never completed the phase of parity %u; program (%u, %u, %u)\n",
            super::debug::escape_percent(&self.kernel.source_file),
            op.loc.line,
            op.loc.col
        );
        let mut args = vec![
            ("i64", waited),
            ("i32", bar.to_owned()),
            ("i32", phase.to_owned()),
        ];
        for d in ["x", "y", "z"] {
            let id = self
                .f
                .call("i32", &format!("llvm.nvvm.read.ptx.sreg.ctaid.{d}"), &[]);
            args.push(("i32", id));
        }
        self.vprintf(&site, &args);
        self.f.declare("declare void @llvm.trap()");
        self.f.stmt("call void @llvm.trap()");
        self.f.stmt("unreachable");
        self.enter_block(&done);
    }

    /// Emits `body` for the context's first thread only, when `pred` holds.
    pub(super) fn on_first_thread(&mut self, pred: &str, body: impl FnOnce(&mut Self)) {
        let first = self.f.inst(format!("icmp eq i32 {}, 0", self.thread_id()));
        let go = self.f.inst(format!("and i1 {first}, {pred}"));
        self.when(&go, body);
    }

    /// Runs `body` in the threads where `cond` (an i1) holds.
    pub(super) fn when(&mut self, cond: &str, body: impl FnOnce(&mut Self)) {
        let then = self.f.fresh("when");
        let after = self.f.fresh("when_done");
        self.f
            .stmt(format!("br i1 {cond}, label %{then}, label %{after}"));
        self.enter_block(&then);
        body(self);
        self.f.stmt(format!("br label %{after}"));
        self.enter_block(&after);
    }

    /// A single-thread arrival stands for the context's work: with several
    /// warp groups, the others must be done first (one warp group's own
    /// `wgmma.wait_group` already orders its reads).
    fn order_context_before_single_thread(&mut self) {
        if self.context.num_warps > 4 {
            self.barrier();
        }
    }

    /// Issues, from the first thread when `pred`, the TMA copies of one block between
    /// global memory (through `desc`) and the buffer at shared address
    /// `smem`: one per atom-wide box, the way `direction` says.
    pub(super) fn tma_block(
        &mut self,
        pred: &str,
        m: &SharedMemoryType,
        (desc, smem): (&str, &str),
        direction: TmaDirection,
        coords: &[String],
    ) {
        let (barrier, multicast, reduce) = match direction {
            TmaDirection::Load { barrier, multicast } => (Some(barrier), multicast, None),
            TmaDirection::Store(reduce) => (None, None, reduce.atomic().map(|_| reduce.name())),
        };
        let tma = TmaBox::new(m.elem(), m.shape());
        let piece_bytes = tma.box_shape.iter().product::<usize>() * m.elem().size_bytes();
        self.on_first_thread(pred, |l| {
            for piece in 0..tma.pieces {
                let (at, coords) = l.tma_piece(smem, coords, &tma, piece, piece_bytes);
                // Operands: the buffer, the descriptor, the barrier of a
                // load, then the coordinates.
                let mut ops = vec![("i32", at.as_str()), ("i64", desc)];
                ops.extend(barrier.map(|b| ("i32", b)));
                let first = ops.len();
                ops.extend(coords.iter().map(|c| ("i32", c.as_str())));
                let (rank, at_coords) = (coords.len(), placeholders(first, coords.len()));
                let asm = match (barrier, multicast) {
                    (Some(_), None) => format!(
                        "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {{{at_coords}}}], [$2];"
                    ),
                    (Some(_), Some(_)) => format!(
                        "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {{{at_coords}}}], [$2], ${};",
                        first + coords.len()
                    ),
                    (None, _) => match reduce {
                        None => format!(
                            "cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [$1, {{{at_coords}}}], [$0];"
                        ),
                        // The element type is the tensor map's.
                        Some(op) => format!(
                            "cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op}.tile.bulk_group [$1, {{{at_coords}}}], [$0];"
                        ),
                    },
                };
                let mut constraints = vec!["r", "l"];
                constraints.extend(std::iter::repeat_n("r", ops.len() - 2));
                if let (Some(_), Some(mask)) = (barrier, multicast) {
                    ops.push(("i16", mask));
                    constraints.push("h");
                }
                let constraints = constraints.join(",") + ",~{memory}";
                l.f.asm("void", &asm, &constraints, &ops);
            }
            if barrier.is_none() {
                l.f.asm("void", "cp.async.bulk.commit_group;", "~{memory}", &[]);
            }
        });
    }

    /// Asks TMA, from the first thread, to bring the block at `coords`
    /// into L2: one prefetch per box of the block, as its loads are cut.
    fn tma_prefetch(&mut self, desc: &str, tma: &TmaBox, coords: &[String]) {
        self.on_first_thread("true", |l| {
            for piece in 0..tma.pieces {
                let coords = l.tma_piece_coords(coords, tma, piece);
                let mut ops = vec![("i64", desc)];
                ops.extend(coords.iter().map(|c| ("i32", c.as_str())));
                let rank = coords.len();
                let at_coords = placeholders(1, rank);
                let asm = format!(
                    "cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile [$0, {{{at_coords}}}];"
                );
                let constraints = std::iter::once("l")
                    .chain(std::iter::repeat_n("r", rank))
                    .collect::<Vec<_>>()
                    .join(",");
                l.f.asm("void", &asm, &(constraints + ",~{memory}"), &ops);
            }
        });
    }

    /// Destination (or source) address and coordinates of TMA box `piece`
    /// of a block cut along its inner dimension; coordinates innermost
    /// first, as PTX takes them.
    fn tma_piece(
        &mut self,
        base: &str,
        coords: &[String],
        tma: &TmaBox,
        piece: usize,
        piece_bytes: usize,
    ) -> (String, Vec<String>) {
        let at = self
            .f
            .inst(format!("add i32 {base}, {}", piece * piece_bytes));
        (at, self.tma_piece_coords(coords, tma, piece))
    }

    /// The coordinates of TMA box `piece` of a block at `coords`, innermost
    /// first.
    fn tma_piece_coords(&mut self, coords: &[String], tma: &TmaBox, piece: usize) -> Vec<String> {
        let inner_step = tma.box_shape.last().copied().unwrap_or(0) * piece;
        let mut reversed: Vec<String> = coords.iter().rev().cloned().collect();
        if let Some(inner) = reversed.first_mut() {
            *inner = self.f.inst(format!("add i32 {inner}, {inner_step}"));
        }
        reversed
    }

    fn buffer_type(&self, v: ValueId) -> Result<SharedMemoryType> {
        match self.ty(v) {
            Type::SharedMemory(m) => Ok(m.clone()),
            other => Err(malformed(format!("{v} is {other}, not a buffer"))),
        }
    }

    /// The one register of a scalar, buffer, barrier or descriptor value.
    pub(super) fn register(&mut self, v: ValueId) -> Result<String> {
        let t = self.tensor(v)?;
        t.regs
            .first()
            .cloned()
            .ok_or_else(|| malformed(format!("{v} has no register")))
    }

    pub(super) fn registers(&mut self, vs: &[ValueId]) -> Result<Vec<String>> {
        vs.iter().map(|&v| self.register(v)).collect()
    }

    /// The shared-window address of a buffer or barrier value.
    fn shared_address_of(&mut self, v: ValueId) -> Result<String> {
        let offset = self.register(v)?;
        Ok(self.shared_address(&offset))
    }

    pub(super) fn define_register(&mut self, v: ValueId, reg: String) -> Result<()> {
        let layout = self.scalar_layout()?;
        self.define_value(
            v,
            Tensor {
                layout,
                regs: vec![reg],
            },
        );
        Ok(())
    }
}

/// Which way a TMA block moves.
pub(super) enum TmaDirection<'a> {
    /// Into shared memory, completing on the mbarrier at `barrier`; with
    /// `multicast` (an i16 of cluster ranks), into the same buffer and
    /// barrier of each of those programs.
    Load {
        barrier: &'a str,
        multicast: Option<&'a str>,
    },
    /// Out of shared memory, committed as one bulk group; a reduction
    /// other than `None` combines each element with the one in memory.
    Store(StoreReduce),
}

/// Which of wgmma's requirements an `async_dot` misses, as `": reason"`
/// (empty when none of these is the reason).
fn wgmma_mismatch(
    arch: Arch,
    (a, b, acc): (ScalarType, ScalarType, ScalarType),
    (m, n, k): (usize, usize, usize),
    warps: u32,
    OperandOrders {
        a_m_major,
        b_k_major,
    }: OperandOrders,
) -> String {
    let groups = warps as usize / 4;
    let integer = matches!(a, ScalarType::I8 | ScalarType::U8);
    let k_major_only = matches!(
        a,
        ScalarType::F8E4M3 | ScalarType::F8E5M2 | ScalarType::F32 | ScalarType::I8 | ScalarType::U8
    );
    let k_step = 32 / a.size_bytes();
    let reason = if arch != Arch::Sm90a {
        format!("wgmma exists only on sm_90a, not {}", arch.name())
    } else if a != b {
        format!("the operands are {a} and {b}, not one type")
    } else if !is_16_bit_float(a) && !k_major_only {
        format!("wgmma has no {a} inputs")
    } else if k_major_only && !b_k_major {
        format!("{a} operands must be K-major: B must be `local_trans` of an [N, K] buffer")
    } else if k_major_only && a_m_major {
        format!(
            "{a} operands must be K-major: A must be an [M, K] buffer, not `local_trans` of one"
        )
    } else if integer && acc != ScalarType::I32 {
        format!("the accumulator is {acc}, not i32")
    } else if !integer && acc != ScalarType::F32 {
        format!("the accumulator is {acc}, not f32")
    } else if warps % 4 != 0 {
        format!("{warps} warps are not whole warp groups of 4")
    } else if m % (64 * groups) != 0 {
        format!(
            "M = {m} is not a multiple of 64 rows per warp group ({groups} warp group{})",
            if groups == 1 { "" } else { "s" }
        )
    } else if n > 256 || n % 8 != 0 || (!b_k_major && n < 64) {
        format!("N = {n} is not a multiple of 8 up to 256 (at least 64 for an N-major B)")
    } else if integer && n > 32 && n % 16 != 0 {
        format!("N = {n}: 8-bit integer wgmma has N = 8, 16, 24, 32 or a multiple of 16")
    } else if k % k_step != 0 {
        format!("K = {k} is not a multiple of {k_step}")
    } else {
        return String::new();
    };
    format!(": {reason}")
}

/// `$first, $first+1, ...`: `count` asm operand references.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}
