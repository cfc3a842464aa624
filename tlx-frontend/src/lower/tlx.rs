//! Calls of TLX primitives (`local_alloc`, `barrier_wait`,
//! `async_descriptor_load`, `async_dot`, `remote_view`, ...): arguments
//! bound by TLX's names, compile-time ones evaluated, run-time ones converted
//! to the types the primitive's row of the op table asks for, and the row's
//! typing rule run at the call, so a misuse points at the user's tokens. A
//! cluster peer's buffer or barrier (a `remote_view`) where only this
//! program's own is allowed (a wait, a load) is reported at that argument.

use super::calls::{choice, CallArgs};
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{
    shared_swizzle, tma_block_rule, BarrierType, BinaryOp, Elem, Named, OpKind, Prim, ResultTypes,
    ScalarType, SharedMemoryType, StoreReduce, TensorMemoryType, Type, ValueId,
};

impl<'a> Lowerer<'a> {
    pub(super) fn prim_call(&mut self, prim: Prim, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        if matches!(prim, Prim::LocalAlloc | Prim::AllocBarriers) && self.b.depth() > 0 {
            return Err(Diagnostic::new(span, format!("`{}` inside a loop, branch or task", prim.mnemonic()))
                .with_hint("allocate shared buffers and barriers once, at the top of the kernel body before `async_tasks!`, and pick one with `local_view(x, i)` where it is used"));
        }
        if prim == Prim::TraceEvent {
            return Err(Diagnostic::new(span, "`trace_event` is not a call of the kernel language: the compiler puts it in")
                .with_hint("for timelines of every task and barrier wait, build with `TLX_TRACE` set or give the kernel `timeline = true` (docs/language.md, \"Timelines\")"));
        }
        let surface = prim.def().surface;
        let a = args.bind(surface.params, surface.required)?;
        if let Some(result_types) = surface.generic {
            return self.generic_prim(prim, &a, result_types, span);
        }
        let (operands, imms, results) = match prim {
            Prim::LocalAlloc => {
                let shape = self.shape_arg(self.expr_arg(a[0])?)?;
                let elem = self.dtype_of_expr(self.expr_arg(a[1])?)?;
                let num = match a[2] {
                    Some(e) => self.const_int(e, "the number of buffers")?,
                    None => 1,
                };
                if !(1..=64).contains(&num) {
                    return Err(Diagnostic::new(span, format!("{num} buffers"))
                        .with_hint("`local_alloc` makes 1 to 64 buffers"));
                }
                if choice(a[4], &[("smem", false), ("tmem", true)], false)? {
                    return self.tensor_memory_alloc(elem, shape, num as u32, a[3], span);
                }
                let swizzle = shared_swizzle(elem, &shape);
                let ty = SharedMemoryType::new(elem, shape, num as u32, swizzle, true);
                let reused = match a[3] {
                    Some(e) => {
                        let other = self.ir_arg(Some(e))?;
                        if !self.shared.allocations.contains(&other) {
                            return Err(Diagnostic::new(e.span(), "`reuse` of a view: it takes an allocation")
                                .with_hint("pass what `local_alloc` returned (`reuse = bufs`), not a `local_view`, slice or reinterpreted view of it"));
                        }
                        vec![other]
                    }
                    None => vec![],
                };
                (reused, vec![], vec![Type::SharedMemory(ty)])
            }
            Prim::AllocBarriers => {
                let num = self.const_int(self.expr_arg(a[0])?, "the number of barriers")?;
                if !(1..=1024).contains(&num) {
                    return Err(Diagnostic::new(span, format!("{num} barriers"))
                        .with_hint("`alloc_barriers` makes 1 to 1024 barriers"));
                }
                let count = self.const_or(a[1], 1, "the arrive count")?;
                let ty = Type::Barriers(BarrierType::new(num as usize));
                (vec![], vec![count], vec![ty])
            }
            Prim::LocalView => {
                let buffers = self.local_arg(a[0], prim)?;
                let index = self.int_arg(a[1])?;
                let view = match self.ty(buffers) {
                    Type::SharedMemory(m) => Type::SharedMemory(m.one_buffer()),
                    Type::TensorMemory(m) => Type::TensorMemory(m.one_buffer()),
                    Type::Barriers(_) => Type::Barriers(BarrierType::new(1)),
                    other => {
                        return Err(Diagnostic::new(
                            span,
                            format!("`local_view` takes buffers or barriers, not {other}"),
                        ))
                    }
                };
                (vec![buffers, index], vec![], vec![view])
            }
            Prim::LocalTrans => {
                let buffer = self.local_arg(a[0], prim)?;
                let Type::SharedMemory(m) = self.ty(buffer) else {
                    return Err(Diagnostic::new(span, "`local_trans` takes a shared buffer")
                        .with_hint("pick one buffer with `local_view(buffers, i)` first"));
                };
                (
                    vec![buffer],
                    vec![],
                    vec![Type::SharedMemory(m.transpose())],
                )
            }
            Prim::LocalSlice => {
                let buffer = self.local_arg(a[0], prim)?;
                let offsets = self.offsets_arg(self.expr_arg(a[1])?)?;
                let shape = self.shape_arg(self.expr_arg(a[2])?)?;
                let sliced = match self.ty(buffer) {
                    Type::SharedMemory(m) => Type::SharedMemory(SharedMemoryType::new(
                        m.elem(),
                        shape,
                        1,
                        m.swizzle(),
                        m.mutable(),
                    )),
                    Type::TensorMemory(m) => {
                        Type::TensorMemory(TensorMemoryType::new(m.elem(), shape, 1))
                    }
                    _ => {
                        return Err(Diagnostic::new(span, "`local_slice` takes a buffer")
                            .with_hint("pick one buffer with `local_view(buffers, i)` first"))
                    }
                };
                let mut operands = vec![buffer];
                operands.extend(offsets);
                (operands, vec![], vec![sliced])
            }
            Prim::LocalLoad => {
                let buffer = self.local_arg(a[0], prim)?;
                let t = self.ty(buffer);
                let result = Type::tensor(t.elem(), t.shape().to_vec());
                (vec![buffer], vec![], vec![result])
            }
            Prim::LocalStore => {
                let buffer = self.local_arg(a[0], prim)?;
                let t = self.ty(buffer);
                let value = self.tile_arg(a[1], &t)?;
                (vec![buffer, value], vec![], vec![])
            }
            Prim::BarrierWait => {
                let bar = self.local_arg(a[0], prim)?;
                let phase = self.int_arg(a[1])?;
                let pred = self.pred_arg(a[2])?;
                (vec![bar, phase, pred], vec![], vec![])
            }
            Prim::BarrierArrive => {
                let mut bar = self.ir_arg(a[0])?;
                let count = self.const_or(a[1], 1, "the arrive count")?;
                if let Some(rank) = a[2] {
                    bar = self.remote_view_of(a[0], rank, span)?;
                }
                let pred = self.pred_arg(a[3])?;
                (vec![bar, pred], vec![count], vec![])
            }
            Prim::BarrierExpectBytes => {
                let bar = self.local_arg(a[0], prim)?;
                let bytes = self.int_arg(a[1])?;
                let pred = self.pred_arg(a[2])?;
                (vec![bar, bytes, pred], vec![], vec![])
            }
            Prim::AsyncDescriptorLoad => {
                let desc = self.ir_arg(a[0])?;
                let buffer = self.local_arg(a[1], prim)?;
                let barrier = match a[3] {
                    Some(e) => self.local_arg(Some(e), prim)?,
                    None => {
                        // Into a pipe stage: its `full` barrier, and its commit
                        // announces these bytes.
                        let t = self.ty(buffer);
                        let bytes = (t.numel()
                            * t.elem().scalar().map_or(1, ScalarType::size_bytes))
                            as i64;
                        self.pipe_copy_barrier(buffer, bytes, span)?.ok_or_else(|| {
                            Diagnostic::new(span, "`async_descriptor_load` without a barrier")
                                .with_hint("pass the mbarrier the copy completes on (`barrier = local_view(bars, i)`), or copy into a field of a pipe stage (`slot.x`), whose commit waits for it")
                        })?
                    }
                };
                let mut operands = vec![desc, buffer, barrier];
                let mask = match a[4] {
                    Some(targets) => self.multicast_mask(targets)?,
                    None => None,
                };
                let prim = match mask {
                    Some(mask) => {
                        operands.push(mask);
                        Prim::AsyncDescriptorLoadMulticast
                    }
                    None => prim,
                };
                operands.extend(self.offsets_arg(self.expr_arg(a[2])?)?);
                return self
                    .emit_prim(prim, operands, vec![], vec![], span)
                    .map(|_| Val::Unit);
            }
            Prim::AsyncDescriptorStore => {
                let desc = self.ir_arg(a[0])?;
                let buffer = self.local_arg(a[1], prim)?;
                let mut operands = vec![desc, buffer];
                operands.extend(self.offsets_arg(self.expr_arg(a[2])?)?);
                let reduce = choice(
                    a[3],
                    &StoreReduce::ALL.map(|(r, n)| (n, r)),
                    StoreReduce::None,
                )?;
                if let (Some(at), Type::TensorDescriptor(d)) = (a[3], self.ty(desc)) {
                    if !reduce.supports(d.elem()) {
                        return Err(Diagnostic::new(at.span(), reduce.unsupported(d.elem()))
                            .with_hint("reduce into a tensor of one of those types, or combine the values in registers and store them without `store_reduce`"));
                    }
                }
                (operands, vec![reduce.code()], vec![])
            }
            Prim::AsyncDescriptorStoreWait => {
                let writes = self.const_bool_or(a[1], false)?;
                let pendings = self.const_or(a[0], 0, "pendings")?;
                (vec![], vec![pendings, i64::from(writes)], vec![])
            }
            Prim::AsyncDescriptorPrefetch => {
                let mut operands = vec![self.ir_arg(a[0])?];
                operands.extend(self.offsets_arg(self.expr_arg(a[1])?)?);
                (operands, vec![], vec![])
            }
            Prim::LocalReinterpret => {
                let buffer = self.local_arg(a[0], prim)?;
                if self.shared.slices.contains(&buffer) {
                    return Err(Diagnostic::new(
                        self.expr_arg(a[0])?.span(),
                        "`local_reinterpret` of a `local_slice`: a slice's elements are not the bytes after its start",
                    )
                    .with_hint("reinterpret the whole buffer (a `local_view`), then slice the reinterpreted view"));
                }
                let elem = self.dtype_of_expr(self.expr_arg(a[1])?)?;
                let shape = self.shape_arg(self.expr_arg(a[2])?)?;
                let mutable = match self.ty(buffer) {
                    Type::SharedMemory(m) => m.mutable(),
                    _ => true,
                };
                let swizzle = shared_swizzle(elem, &shape);
                let ty = SharedMemoryType::new(elem, shape, 1, swizzle, mutable);
                (vec![buffer], vec![], vec![Type::SharedMemory(ty)])
            }
            Prim::DescriptorLoad | Prim::DescriptorStore => {
                let desc = self.ir_arg(a[0])?;
                let block = match self.ty(desc) {
                    Type::TensorDescriptor(d) => {
                        Type::tensor(Elem::Scalar(d.elem()), d.block_shape().to_vec())
                    }
                    other => {
                        let at = self.expr_arg(a[0])?.span();
                        let (verb, hint) = match prim {
                            Prim::DescriptorLoad => ("load", "`.load([o0, o1, ...])` reads the block of a `TensorDesc<T, D0, D1, ...>` parameter at those offsets; load through pointers with `load(ptrs, mask, other)`"),
                            _ => ("store", "`.store([o0, o1, ...], value)` writes the block of a `TensorDesc<T, D0, D1, ...>` parameter at those offsets; store through pointers with `store(ptrs, value, mask)`"),
                        };
                        return Err(Diagnostic::new(
                            at,
                            format!("`{verb}` of {other}, which is not a tensor descriptor"),
                        )
                        .with_hint(hint));
                    }
                };
                let offsets = self.offsets_arg(self.expr_arg(a[1])?)?;
                if prim == Prim::DescriptorLoad {
                    let operands = std::iter::once(desc).chain(offsets).collect();
                    (operands, vec![], vec![block])
                } else {
                    let value = self.tile_arg(a[2], &block)?;
                    let operands = [desc, value].into_iter().chain(offsets).collect();
                    (operands, vec![], vec![])
                }
            }
            Prim::MakeTensorDescriptor => return self.make_tensor_descriptor(&a),
            Prim::AsyncDot => {
                let x = self.local_arg(a[0], prim)?;
                let y = self.local_arg(a[1], prim)?;
                let acc = self.ir_arg(a[2])?;
                if let Type::TensorMemory(_) = self.ty(acc) {
                    let use_acc = self.pred_arg(a[3])?;
                    let mut operands = vec![x, y, acc, use_acc];
                    if let Some(list) = a[4] {
                        operands.extend(self.barrier_list(list)?);
                    }
                    let pair = self.two_ctas_arg(a[5], span)?;
                    return self
                        .emit_prim(Prim::Tcgen05Mma, operands, vec![pair], vec![], span)
                        .map(|_| Val::Unit);
                }
                if let Some(e) = a[3].or(a[4]).or(a[5]) {
                    return Err(Diagnostic::new(e.span(), "`use_acc`, `mbarriers` and `two_ctas` belong to an `async_dot` into tensor memory")
                        .with_hint("a register accumulator is complete after `async_dot_wait(pendings, acc)`; on Blackwell, accumulate into `local_alloc([128, N], f32, 1, storage = \"tmem\")` and pass `mbarriers = [bar]`"));
                }
                let result = self.ty(acc);
                (vec![x, y, acc], vec![], vec![result])
            }
            Prim::Tcgen05MmaScaled => {
                let x = self.local_arg(a[0], prim)?;
                let y = self.local_arg(a[1], prim)?;
                let mut operands = vec![x, y];
                for e in &a[2..5] {
                    operands.push(self.ir_arg(*e)?);
                }
                operands.push(self.pred_arg(a[5])?);
                if let Some(list) = a[6] {
                    operands.extend(self.barrier_list(list)?);
                }
                return self
                    .emit_prim(prim, operands, vec![], vec![], span)
                    .map(|_| Val::Unit);
            }
            Prim::Tcgen05Commit => {
                let bar = self.local_arg(a[0], prim)?;
                (vec![bar], vec![self.two_ctas_arg(a[1], span)?], vec![])
            }
            Prim::Tcgen05Mma => {
                return Err(Diagnostic::new(span, "`tcgen05_mma` is the IR's name of an `async_dot` into tensor memory")
                    .with_hint("write `async_dot(a, b, acc, use_acc = ..., mbarriers = [bar])` with `acc` a tensor-memory buffer, as TLX does"));
            }
            Prim::AsyncDotWait => {
                let pendings = self.const_int(self.expr_arg(a[0])?, "pendings")?;
                let acc = self.ir_arg(a[1])?;
                let result = self.ty(acc);
                (vec![acc], vec![pendings], vec![result])
            }
            Prim::AsyncLoad => {
                let ptrs = self.ir_arg(a[0])?;
                let buffer = self.local_arg(a[1], prim)?;
                let shape = self.ty(buffer).shape().to_vec();
                if let Some(other) = a[3] {
                    let zero = matches!(self.eval_const(other, "`other`"), Ok(ConstVal::Int(0)))
                        || matches!(self.eval_const(other, "`other`"), Ok(ConstVal::Float(f)) if f == 0.0);
                    if !zero {
                        return Err(Diagnostic::new(other.span(), "`async_load` fills masked-off elements with zeros only")
                            .with_hint("drop `other` (or write `other = 0`); apply another value after `local_load` with `where`"));
                    }
                }
                let mask = match a[2] {
                    Some(e) => {
                        let m = self.ir_arg(Some(e))?;
                        self.broadcast_to(m, &shape, e.span())?
                    }
                    None => {
                        let t = self.constant(ConstVal::Bool(true), Type::scalar(ScalarType::Bool));
                        self.broadcast_to(t, &shape, span)?
                    }
                };
                (vec![ptrs, buffer, mask], vec![], vec![])
            }
            Prim::AsyncLoadWaitGroup => {
                let pendings = self.const_int(self.expr_arg(a[0])?, "pendings")?;
                (vec![], vec![pendings], vec![])
            }
            Prim::NamedBarrierWait | Prim::NamedBarrierArrive => {
                let id_expr = self.expr_arg(a[0])?;
                if let Ok(ConstVal::Int(id)) = self.eval_const(id_expr, "a named barrier id") {
                    if !(0..16).contains(&id) {
                        return Err(Diagnostic::new(id_expr.span(), format!("named barrier {id} is not one of 0..16"))
                            .with_hint("a program has 16 hardware barriers; 0 and one per task replica are the compiler's, so pick from the top (15, 14, ...)"));
                    }
                }
                let id = self.int_arg(a[0])?;
                let threads = self.const_int(self.expr_arg(a[1])?, "a thread count")?;
                (vec![id], vec![threads], vec![])
            }
            Prim::RemoteView => {
                let view = self.remote_view_of(a[0], self.expr_arg(a[1])?, span)?;
                return Ok(Val::Ir(view));
            }
            Prim::RemoteShmemStore | Prim::AsyncRemoteShmemStore => {
                let dst = self.remote_target(a[0], a[2], span)?;
                let value = self.tile_arg(a[1], &self.ty(dst))?;
                let mut operands = vec![dst, value];
                if prim == Prim::AsyncRemoteShmemStore {
                    if a[3].is_none() {
                        return Err(Diagnostic::new(span, "`async_remote_shmem_store` without a barrier")
                            .with_hint("pass the barrier its bytes complete on: `barrier = local_view(bars, i)` (mapped to the peer's with `remote_cta_rank`), or a remote view of the peer's"));
                    }
                    operands.push(self.remote_target(a[3], a[2], span)?);
                }
                (operands, vec![], vec![])
            }
            Prim::AsyncDescriptorLoadMulticast => {
                return Err(Diagnostic::new(span, "`async_descriptor_load_multicast` is the IR's name of a multicast copy")
                    .with_hint("write `async_descriptor_load(desc, buffer, offsets, barrier, multicast_targets = [r0, r1, ...])`, as TLX does"));
            }
            // Lowered by `generic_prim` above.
            _ => {
                return Err(Diagnostic::new(
                    span,
                    format!("`{}` has no form of its own", prim.mnemonic()),
                ))
            }
        };
        Ok(match self.emit_prim(prim, operands, imms, results, span)? {
            Some(v) => Val::Ir(v),
            None => Val::Unit,
        })
    }

    /// A call lowered from the primitive's definition alone: its operands
    /// in the signature's order, then its immediates as compile-time
    /// integers, the result types from the definition's rule.
    fn generic_prim(
        &mut self,
        prim: Prim,
        a: &[Option<&'a Expr>],
        result_types: ResultTypes,
        span: proc_macro2::Span,
    ) -> R<Val> {
        let sig = prim.signature();
        // The call's arguments come in the surface's order, which may put
        // an immediate between operands (`signal_wait_until(flag, "ge", v)`).
        let params = prim.def().surface.params;
        let arg = |name: &str| {
            params
                .iter()
                .position(|p| *p == name)
                .and_then(|i| a.get(i).copied().flatten())
        };
        let mut operands = Vec::with_capacity(sig.operands.len());
        for name in sig.operands {
            operands.push(self.ir_arg(arg(name))?);
        }
        let mut imms = Vec::with_capacity(sig.immediates.len());
        for name in sig.immediates {
            let e = self.expr_arg(arg(name))?;
            let imm = match sig.choices.iter().find(|c| c.immediate == *name) {
                Some(c) => {
                    let table: Vec<(&str, i64)> = c
                        .options
                        .iter()
                        .zip(0..)
                        .map(|((w, _), i)| (*w, i))
                        .collect();
                    choice(Some(e), &table, 0)?
                }
                None => self.const_int(e, name)?,
            };
            imms.push(imm);
        }
        let types: Vec<Type> = operands.iter().map(|&v| self.ty(v)).collect();
        let type_refs: Vec<&Type> = types.iter().collect();
        let results = result_types(&Named::new(prim, &type_refs, &imms)).map_err(|message| {
            Diagnostic::new(span, format!("`{}`: {message}", prim.mnemonic())).with_hint(hint(prim))
        })?;
        Ok(match self.emit_prim(prim, operands, imms, results, span)? {
            Some(v) => Val::Ir(v),
            None => Val::Unit,
        })
    }

    /// Appends a primitive after its row's typing rule accepted it; its
    /// result, if it has one.
    pub(super) fn emit_prim(
        &mut self,
        prim: Prim,
        operands: Vec<ValueId>,
        imms: Vec<i64>,
        results: Vec<Type>,
        span: proc_macro2::Span,
    ) -> R<Option<ValueId>> {
        let operand_types: Vec<Type> = operands.iter().map(|&v| self.ty(v)).collect();
        let operand_refs: Vec<&Type> = operand_types.iter().collect();
        let result_refs: Vec<&Type> = results.iter().collect();
        if let Err(message) = prim.check(&imms, &operand_refs, &result_refs) {
            // The typing rule's message may already name the primitive.
            let name = format!("`{}`", prim.mnemonic());
            let message = if message.starts_with(&name) {
                message
            } else {
                format!("{name}: {message}")
            };
            return Err(Diagnostic::new(span, message).with_hint(hint(prim)));
        }
        let kind = OpKind::Prim {
            prim,
            args: operands,
            imms,
        };
        let result = self.b.push(kind, results).first().copied();
        match (prim, result) {
            (Prim::LocalSlice, Some(view)) => {
                self.shared.slices.insert(view);
            }
            (Prim::LocalAlloc, Some(buffers)) => {
                self.shared.allocations.insert(buffers);
            }
            _ => {}
        }
        Ok(result)
    }

    /// `local_alloc(shape, dtype, num, storage = "tmem")`: buffers in tensor
    /// memory, whose columns all the kernel's allocations share (512).
    fn tensor_memory_alloc(
        &mut self,
        elem: ScalarType,
        shape: Vec<usize>,
        num: u32,
        reuse: Option<&'a Expr>,
        span: proc_macro2::Span,
    ) -> R<Val> {
        if let Some(e) = reuse {
            return Err(Diagnostic::new(e.span(), "`reuse` of tensor memory")
                .with_hint("allocate tensor memory once, with as many buffers as you need, and pick them with `local_view(buffers, i)`"));
        }
        let ty = TensorMemoryType::new(elem, shape, num);
        let needed = self.shared.tmem_columns + ty.columns() * num as usize;
        if needed > TensorMemoryType::COLUMNS {
            return Err(Diagnostic::new(
                span,
                format!(
                    "tensor memory overflows: this allocation takes {} columns ({num} x {}), \
                     {needed} with the kernel's earlier ones; a program has {}",
                    ty.columns() * num as usize,
                    ty.columns(),
                    TensorMemoryType::COLUMNS
                ),
            )
            .with_hint("use fewer or narrower buffers (an [128, N] f32 buffer takes N columns), or let two uses share one allocation through `local_view`"));
        }
        let buffers = self.emit_prim(
            Prim::LocalAlloc,
            vec![],
            vec![],
            vec![Type::TensorMemory(ty)],
            span,
        )?;
        self.shared.tmem_columns = needed;
        Ok(buffers.map_or(Val::Unit, Val::Ir))
    }

    /// `two_ctas = true` of a tensor-memory `async_dot` or `tcgen05_commit`
    /// (1, else 0): the kernel's clusters must hold whole pairs of programs
    /// along x, and every `tcgen05` op of the kernel must agree.
    fn two_ctas_arg(&mut self, e: Option<&'a Expr>, span: proc_macro2::Span) -> R<i64> {
        let pair = self.const_bool_or(e, false)?;
        let cluster = self.b.options().cluster;
        if pair && cluster[0] % 2 != 0 {
            return Err(Diagnostic::new(e.map_or(span, |e| e.span()), format!("`two_ctas = true` in a cluster of {:?} programs", cluster))
                .with_hint("a 2-CTA MMA spans programs 2p and 2p + 1 of a cluster: give the kernel `ctas_per_cga = (2, 1, 1)` (or an even x)"));
        }
        match self.shared.pair_mma {
            Some((earlier, line)) if earlier != pair => {
                return Err(Diagnostic::new(span, format!("`two_ctas = {pair}` here, `two_ctas = {earlier}` at line {line}"))
                    .with_hint("a kernel's tensor memory is allocated for single programs or for pairs (`cta_group::1` or `::2`): give every `async_dot` into tensor memory and every `tcgen05_commit` the same `two_ctas`"));
            }
            Some(_) => {}
            None => self.shared.pair_mma = Some((pair, super::loc_of(span).line)),
        }
        Ok(i64::from(pair))
    }

    /// A list of barriers, e.g. `[local_view(bars, 0)]` (an `async_dot`'s
    /// `mbarriers`).
    fn barrier_list(&mut self, e: &'a Expr) -> R<Vec<ValueId>> {
        let Expr::Array(list) = e else {
            return Err(Diagnostic::new(
                e.span(),
                "expected the barriers as a list, e.g. `[local_view(bars, 0)]`",
            )
            .with_hint(
                "write `mbarriers = [bar]` (or several): the MMAs' completion arrives on each",
            ));
        };
        list.elems
            .iter()
            .map(|b| self.local_arg(Some(b), Prim::Tcgen05Commit))
            .collect()
    }

    /// A buffer or barrier argument of `prim` that must be this program's
    /// own: a `remote_view` there is an error at the argument.
    fn local_arg(&mut self, e: Option<&'a Expr>, prim: Prim) -> R<ValueId> {
        let v = self.ir_arg(e)?;
        if !self.ty(v).is_remote() {
            return Ok(v);
        }
        let at = self.expr_arg(e)?.span();
        let hint = match prim {
            Prim::BarrierWait => "a program can arrive at a peer's mbarrier but not wait on it (PTX has no remote wait): wait on your own barrier, and have the peer arrive on it with `barrier_arrive(bar, 1, remote_cta_rank = r)` (\"arrive remote, wait local\")",
            Prim::BarrierExpectBytes => "announce the bytes on your own barrier: a peer's multicast copies and `async_remote_shmem_store`s into your buffers complete on it",
            Prim::LocalStore => "write a peer's buffer with `remote_shmem_store(dst, value, remote_cta_rank)`, which takes your own buffer and maps it to the peer's",
            Prim::AsyncDescriptorLoad => "a TMA copy reaches peers through `multicast_targets = [r0, r1, ...]` with your own buffer and barrier: it lands in the same buffer of every target and completes on the same barrier there",
            _ => "a remote view may only be written (`remote_shmem_store`) or arrived at (`barrier_arrive`): read your own buffer after the peer has stored into it and signalled one of your barriers",
        };
        Err(Diagnostic::new(
            at,
            format!(
                "`{}` of a remote view ({}): a peer program's shared memory is not readable or waitable here",
                prim.mnemonic(),
                self.ty(v)
            ),
        )
        .with_hint(hint))
    }

    /// `remote_view(local, rank)`: `local` (one buffer or one barrier of this
    /// program) as seen in program `rank` of the cluster.
    fn remote_view_of(
        &mut self,
        local: Option<&'a Expr>,
        rank: &'a Expr,
        span: proc_macro2::Span,
    ) -> R<ValueId> {
        let local_expr = self.expr_arg(local)?;
        let view = self.ir_arg(local)?;
        let ty = self.ty(view);
        if ty.is_remote() {
            return Err(Diagnostic::new(local_expr.span(), format!("a remote view of a remote view ({ty})"))
                .with_hint("pass this program's own buffer or barrier with `remote_cta_rank`: the primitive maps it to the peer's"));
        }
        let remote = match &ty {
            Type::SharedMemory(m) if m.buffers() == 1 => Type::SharedMemory(m.to_remote()),
            Type::Barriers(b) if b.count() == 1 => Type::Barriers(b.to_remote()),
            Type::SharedMemory(_) | Type::Barriers(_) => return Err(Diagnostic::new(
                local_expr.span(),
                format!("a remote view of all of {ty}"),
            )
            .with_hint(
                "pick one buffer or barrier with `local_view(x, i)` first: a remote view names one",
            )),
            other => {
                return Err(
                    Diagnostic::new(local_expr.span(), format!("a remote view of {other}"))
                        .with_hint(
                        "only shared buffers and mbarriers live in a peer program's shared memory",
                    ),
                )
            }
        };
        self.check_rank(rank)?;
        let rank = self.int_arg(Some(rank))?;
        let view = self.emit_prim(
            Prim::RemoteView,
            vec![view, rank],
            vec![],
            vec![remote],
            span,
        )?;
        view.ok_or_else(|| Diagnostic::new(span, "internal: `remote_view` gave no value"))
    }

    /// A remote store's destination or barrier: this program's own mapped
    /// to the peer of rank `rank`, or, without a rank, a remote view already.
    fn remote_target(
        &mut self,
        e: Option<&'a Expr>,
        rank: Option<&'a Expr>,
        span: proc_macro2::Span,
    ) -> R<ValueId> {
        if let Some(rank) = rank {
            return self.remote_view_of(e, rank, span);
        }
        let v = self.ir_arg(e)?;
        if self.ty(v).is_remote() {
            return Ok(v);
        }
        Err(Diagnostic::new(
            self.expr_arg(e)?.span(),
            format!(
                "a remote store into this program's own {} without `remote_cta_rank`",
                self.ty(v)
            ),
        )
        .with_hint("name the peer with `remote_cta_rank = r`, or pass `remote_view(x, r)`"))
    }

    /// A rank known at compile time must name a program of the cluster.
    fn check_rank(&self, rank: &Expr) -> R<()> {
        let size = i64::from(self.b.options().cluster_size());
        if let Ok(ConstVal::Int(r)) = self.eval_const(rank, "a CTA rank") {
            if !(0..size).contains(&r) {
                return Err(Diagnostic::new(rank.span(), format!("CTA rank {r} is not in this cluster of {size}"))
                    .with_hint("ranks run from 0 to `cluster_num_ctas() - 1`; set the cluster with `ctas_per_cga` in the kernel's attribute"));
            }
        }
        Ok(())
    }

    /// `multicast_targets = [r0, r1, ...]` as the i32 mask of those ranks
    /// (PTX's `ctaMask`); `None` for an empty list (no multicast).
    fn multicast_mask(&mut self, targets: &'a Expr) -> R<Option<ValueId>> {
        let Expr::Array(list) = targets else {
            return Err(Diagnostic::new(
                targets.span(),
                "expected the multicast targets as a list of CTA ranks, e.g. `[0, 1]`",
            ));
        };
        let i32t = Type::scalar(ScalarType::I32);
        let mut mask = None;
        for rank in &list.elems {
            self.check_rank(rank)?;
            let r = self.int_arg(Some(rank))?;
            let one = self.constant(ConstVal::Int(1), i32t.clone());
            let bit = self.b.push1(
                OpKind::Binary {
                    op: BinaryOp::Shl,
                    lhs: one,
                    rhs: r,
                },
                i32t.clone(),
            );
            mask = Some(match mask {
                None => bit,
                Some(m) => self.b.push1(
                    OpKind::Binary {
                        op: BinaryOp::Or,
                        lhs: m,
                        rhs: bit,
                    },
                    i32t.clone(),
                ),
            });
        }
        Ok(mask)
    }

    /// A compile-time integer argument, `default` when absent.
    fn const_or(&self, e: Option<&Expr>, default: i64, what: &str) -> R<i64> {
        match e {
            Some(e) => self.const_int(e, what),
            None => Ok(default),
        }
    }

    /// A run-time i32 scalar (integers and bools convert).
    pub(super) fn int_arg(&mut self, e: Option<&'a Expr>) -> R<ValueId> {
        let e = self.expr_arg(e)?;
        let v = self.lower_expr(e)?;
        let id = self.materialize(&v, e.span())?;
        let t = self.ty(id);
        let integer = t.elem().scalar().is_some_and(ScalarType::is_int);
        if !t.is_tensor() || !t.is_scalar() || !integer {
            return Err(Diagnostic::new(
                e.span(),
                format!("expected an integer scalar, found {t}"),
            )
            .with_hint("offsets, indices, phases and byte counts are integers: convert a float with `.to(i32)` (which truncates) if that is what you mean"));
        }
        self.cast(id, ScalarType::I32, e.span())
    }

    /// A predicate: `true` when absent.
    fn pred_arg(&mut self, e: Option<&'a Expr>) -> R<ValueId> {
        let Some(e) = e else {
            return Ok(self.constant(ConstVal::Bool(true), Type::scalar(ScalarType::Bool)));
        };
        let v = self.lower_expr(e)?;
        let id = self.materialize(&v, e.span())?;
        let t = self.ty(id);
        if t != Type::scalar(ScalarType::Bool) {
            return Err(Diagnostic::new(
                e.span(),
                format!("a predicate is a bool scalar, not {t}"),
            ));
        }
        Ok(id)
    }

    /// A tensor stored into a buffer of type `buffer`: converted to its
    /// element type, a scalar broadcast to its shape.
    fn tile_arg(&mut self, e: Option<&'a Expr>, buffer: &Type) -> R<ValueId> {
        let e = self.expr_arg(e)?;
        let v = self.lower_expr(e)?;
        let id = self.materialize(&v, e.span())?;
        let Some(elem) = buffer.elem().scalar() else {
            return Err(Diagnostic::new(e.span(), "a buffer of pointers"));
        };
        let id = self.cast(id, elem, e.span())?;
        self.broadcast_to(id, buffer.shape(), e.span())
    }

    /// `[a, b, ...]`: i32 scalars, outermost dimension first.
    /// `make_tensor_descriptor(base, shape, strides, block_shape)`: the
    /// tensor's run-time dimensions and outer strides as i64 operands, the
    /// innermost stride the literal 1 TMA needs, the block checked against
    /// TMA's rules here (the run-time values are checked by the interpreter).
    fn make_tensor_descriptor(&mut self, a: &[Option<&'a Expr>]) -> R<Val> {
        let base_expr = self.expr_arg(a[0])?;
        let base = self.ir_arg(a[0])?;
        let base_ty = self.ty(base);
        let elem = match base_ty.elem() {
            Elem::Ptr(pointee, tlx_core::ir::AddressSpace::Global) if base_ty.is_scalar() => {
                pointee
            }
            _ => return Err(not_a_base(base_expr, &base_ty)),
        };
        let block_expr = self.expr_arg(a[3])?;
        let block = self.index_list(block_expr, "the block shape")?;
        tma_block_rule(elem, &block).map_err(|m| {
            Diagnostic::new(block_expr.span(), m)
                .with_hint("the block is what one TMA copy moves; it is fixed at compile time")
        })?;
        let list =
            |e: &'a Expr, what: &str| -> R<&'a syn::punctuated::Punctuated<Expr, syn::Token![,]>> {
                match e {
                    Expr::Array(list) => Ok(&list.elems),
                    _ => Err(Diagnostic::new(
                        e.span(),
                        format!("expected {what} as a list, e.g. `[m, k]`"),
                    )),
                }
            };
        let shape_expr = self.expr_arg(a[1])?;
        let strides_expr = self.expr_arg(a[2])?;
        let (dims, strides) = (
            list(shape_expr, "the shape")?,
            list(strides_expr, "the strides")?,
        );
        for (what, got, e) in [
            ("dimensions", dims.len(), shape_expr),
            ("strides", strides.len(), strides_expr),
        ] {
            if got != block.len() {
                return Err(Diagnostic::new(e.span(), format!("{got} {what} for a {}-d block", block.len()))
                    .with_hint("give the tensor's shape and strides with one entry per dimension of `block_shape`, outermost first"));
            }
        }
        let inner = strides
            .last()
            .ok_or_else(|| Diagnostic::new(strides_expr.span(), "no strides"))?;
        if !matches!(
            self.eval_const(inner, "the innermost stride"),
            Ok(ConstVal::Int(1))
        ) {
            return Err(Diagnostic::new(inner.span(), "the innermost stride must be the constant 1")
                .with_hint("TMA reads the innermost dimension contiguously: write `1` there (transpose or copy a strided tensor first)"));
        }
        let mut operands = vec![base];
        for e in dims.iter().chain(strides.iter().take(block.len() - 1)) {
            let v = self.lower_expr(e)?;
            let id = self.materialize(&v, e.span())?;
            let t = self.ty(id);
            if !t.is_scalar() || !t.elem().scalar().is_some_and(|s| s.is_int()) {
                return Err(Diagnostic::new(
                    e.span(),
                    format!("a dimension or stride is an integer scalar, not {t}"),
                ));
            }
            operands.push(self.cast(id, ScalarType::I64, e.span())?);
        }
        let ty = Type::TensorDescriptor(tlx_core::ir::TensorDescriptorType::new(elem, block));
        let desc = self.emit_prim(
            Prim::MakeTensorDescriptor,
            operands,
            vec![],
            vec![ty],
            base_expr.span(),
        )?;
        desc.map(Val::Ir).ok_or_else(|| {
            Diagnostic::new(base_expr.span(), "`make_tensor_descriptor` made no value")
        })
    }

    fn offsets_arg(&mut self, e: &'a Expr) -> R<Vec<ValueId>> {
        let Expr::Array(list) = e else {
            return Err(Diagnostic::new(
                e.span(),
                "expected the offsets as a list, e.g. `[off_m, off_k]`",
            ));
        };
        list.elems.iter().map(|x| self.int_arg(Some(x))).collect()
    }
}

/// A primitive's arguments as the kernel language takes them (TLX's names
/// and order, which the IR's operand order need not follow), and how many
/// are required; the rest have the defaults [`default_of`] gives.
fn not_a_base(e: &Expr, t: &Type) -> Diagnostic {
    Diagnostic::new(e.span(), format!("the base of a tensor descriptor is a pointer, not {t}"))
        .with_hint("pass the pointer parameter (plus an offset) of the tensor's first element, e.g. `make_tensor_descriptor(a + off, [m, k], [k, 1], [64, 64])`")
}

/// The value an optional argument takes when it is left out.
fn default_of(name: &str) -> &'static str {
    match name {
        "pred" | "mask" => "true",
        "pendings" | "other" => "0",
        "writes" => "false (the stores have read their buffers)",
        // Into a field of a pipe slot (`slot.x`), the stage's full barrier.
        "barrier" => "the pipe slot's",
        "remote_cta_rank" => "none (a remote view's)",
        "reuse" => "none (fresh bytes)",
        "multicast_targets" | "mbarriers" => "[]",
        "use_acc" => "true",
        "two_ctas" => "false",
        "storage" => "\"smem\"",
        "store_reduce" => "\"\" (a plain store)",
        _ => "1",
    }
}

fn hint(prim: Prim) -> String {
    match prim {
        Prim::DescriptorLoad => {
            return "`desc.load([o0, o1, ...])` takes one offset per dimension of the \
                    descriptor's block, outermost first, each an i32; see docs/language.md, \
                    \"Tensor descriptors\""
                .into()
        }
        Prim::AsyncDescriptorPrefetch => {
            return "`async_descriptor_prefetch(desc, [o0, o1, ...])` takes a tensor descriptor \
                    and one i32 offset per dimension of its block, outermost first, as \
                    `async_descriptor_load` does; see docs/language.md, \"TLX primitives\""
                .into()
        }
        Prim::DescriptorStore => {
            return "`desc.store([o0, o1, ...], value)` takes one offset per dimension of the \
                    descriptor's block, outermost first, and a value of the block's shape; see \
                    docs/language.md, \"Tensor descriptors\""
                .into()
        }
        _ => {}
    }
    let surface = prim.def().surface;
    let required = surface.required;
    let params: Vec<String> = surface
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i < required {
                p.to_string()
            } else {
                format!("{p} = {}", default_of(p))
            }
        })
        .collect();
    format!(
        "`{}` takes ({}); see docs/language.md, \"TLX primitives\"",
        prim.mnemonic(),
        params.join(", ")
    )
}
