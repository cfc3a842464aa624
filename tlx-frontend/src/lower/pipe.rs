//! TLE's typed pipes (`pipe!`), lowered in the frontend to the same
//! primitives a hand-written protocol uses, so they cost nothing over it:
//! a pipe of `capacity` stages owns two mbarrier arrays, `full` (the writer
//! commits a stage) and `empty` (the readers release it); `iter` picks stage
//! `iter % capacity` and the phase `(iter / capacity) % 2`, so writer and
//! readers agree by construction.
//!
//! ```text
//! let p = pipe!(capacity = 3, a = a_bufs, b = b_bufs);
//! let (w, r) = (p.writer(), p.reader());
//! let slot = w.acquire(it);                 // waits until the stage is free
//! async_descriptor_load(desc, slot.a, [..]);  // the barrier is the pipe's
//! w.commit(it);                             // expect the copies' bytes (or arrive)
//! let ready = r.wait(it);                   // waits until it is committed
//! ... ready.a ...
//! r.release(it);
//! ```
//!
//! Transport is inferred, as TLE asks: `commit` announces the bytes of the
//! TMA copies issued into the stage's fields since `acquire`, or, when none
//! were, makes the writer's stores visible and arrives. The number of
//! arrivals a release needs is the number of reader tasks (replicas
//! included) that call `release`, counted once the kernel is lowered.

use std::collections::HashMap;
use std::rc::Rc;

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Pipe, PipeVal, Val};
use proc_macro2::Span;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{BarrierType, Block, OpKind, Prim, ScalarType, Type, ValueId};

/// What lowering learns about a pipe as it goes.
#[derive(Debug, Default)]
pub(super) struct PipeState {
    /// Bytes of TMA copies into the stage acquired last, not yet committed.
    pending_bytes: i64,
    /// How deeply nested (loops, branches) the last `acquire` was: a copy or
    /// `commit` at another depth would make `commit`'s byte count depend on
    /// control flow it cannot see.
    acquired_at_depth: Option<usize>,
    /// Tasks (by index in their region) that release, with their replicas;
    /// `usize::MAX` for code outside `async_tasks!`.
    releasers: HashMap<usize, u32>,
    empty: Option<ValueId>,
}

/// A field view of an acquired stage, as TMA copies into it see it.
#[derive(Copy, Clone, Debug)]
pub(super) struct SlotField {
    pipe: usize,
    /// `full[stage]`, the barrier the copy completes on.
    full: ValueId,
}

impl<'a> Lowerer<'a> {
    /// `pipe!(capacity = N, field = buffers, ...)`.
    pub(super) fn lower_pipe_macro(&mut self, mac: &'a syn::Macro) -> R<Val> {
        let span = mac.span();
        if self.b.depth() > 0 || self.frames.len() > 1 {
            return Err(Diagnostic::new(span, "`pipe!` inside a loop, branch, task or helper")
                .with_hint("declare pipes at the top of the kernel body, before `async_tasks!`, next to the buffers they carry"));
        }
        let entries = mac
            .parse_body_with(Punctuated::<Expr, syn::Token![,]>::parse_terminated)
            .map_err(|e| {
                Diagnostic::new(e.span(), format!("cannot read this `pipe!`: {e}"))
                    .with_hint("write `pipe!(capacity = 2, x = x_bufs)`")
            })?;
        let mut capacity = None;
        let mut one_shot = false;
        let mut readers = Vec::new();
        let mut fields = Vec::new();
        for entry in &entries {
            let Expr::Assign(kv) = entry else {
                return Err(Diagnostic::new(entry.span(), "expected `key = value`")
                    .with_hint("write `pipe!(capacity = 2, x = x_bufs)`"));
            };
            let key = match &*kv.left {
                Expr::Path(p) if p.path.get_ident().is_some() => p
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                other => return Err(Diagnostic::new(other.span(), "expected a name")),
            };
            match key.as_str() {
                "capacity" => {
                    capacity = Some((self.const_int(&kv.right, "the capacity")?, kv.right.span()))
                }
                "one_shot" => one_shot = self.const_bool(&kv.right)?,
                "scope" | "name" => {
                    super::calls::str_arg(&kv.right)?;
                }
                "readers" => {
                    let Expr::Array(list) = &*kv.right else {
                        return Err(Diagnostic::new(
                            kv.right.span(),
                            "expected a list of reader names, e.g. `[\"mma\", \"epilogue\"]`",
                        ));
                    };
                    for e in &list.elems {
                        readers.push(super::calls::str_arg(e)?);
                    }
                }
                _ => {
                    // A field names the buffers it travels in (a variable).
                    let name = match &*kv.right {
                        Expr::Path(p) => p.path.get_ident().map(ToString::to_string),
                        _ => None,
                    };
                    let buffers = match name.as_deref().and_then(|n| self.lookup(n)) {
                        Some(Val::Ir(v)) => *v,
                        _ => {
                            return Err(Diagnostic::new(kv.right.span(), format!("field `{key}` must name a variable holding shared buffers"))
                                .with_hint(format!("allocate them first: `let {key}_bufs = local_alloc(shape, dtype, capacity);` then `{key} = {key}_bufs`")));
                        }
                    };
                    fields.push((key, buffers, kv.right.span()));
                }
            }
        }
        let Some((capacity, capacity_span)) = capacity else {
            return Err(Diagnostic::new(span, "`pipe!` needs `capacity = N`")
                .with_hint("the number of stages the fields' buffers hold"));
        };
        if !(1..=64).contains(&capacity) {
            return Err(Diagnostic::new(
                capacity_span,
                format!("capacity {capacity} is not in 1..=64"),
            ));
        }
        if fields.is_empty() {
            return Err(Diagnostic::new(span, "a pipe carries at least one field")
                .with_hint("name the buffers it carries: `pipe!(capacity = 2, x = x_bufs)`"));
        }
        for (name, buffers, field_span) in &fields {
            let message = match self.ty(*buffers) {
                Type::SharedMemory(m) if i64::from(m.buffers()) == capacity => continue,
                Type::SharedMemory(m) => format!(
                    "field `{name}` holds {} shared buffers; a pipe of capacity {capacity} needs {capacity}",
                    m.buffers()
                ),
                other => format!("field `{name}` is {other}, not {capacity} shared buffers"),
            };
            return Err(Diagnostic::new(*field_span, message).with_hint(format!(
                "allocate it with `local_alloc(shape, dtype, {capacity})`: one buffer per stage"
            )));
        }
        let bars = Type::Barriers(BarrierType::new(capacity as usize));
        let full = self.emit_prim(
            Prim::AllocBarriers,
            vec![],
            vec![1],
            vec![bars.clone()],
            span,
        )?;
        // The arrive count is fixed once the readers are known (`finish_pipes`).
        let empty = self.emit_prim(Prim::AllocBarriers, vec![], vec![1], vec![bars], span)?;
        let (Some(full), Some(empty)) = (full, empty) else {
            return Err(Diagnostic::new(
                span,
                "internal: barrier allocation gave no value",
            ));
        };
        let id = self.pipes.len();
        self.pipes.push(PipeState {
            empty: Some(empty),
            ..PipeState::default()
        });
        Ok(Val::Pipe(PipeVal::Pipe(Rc::new(Pipe {
            id,
            capacity,
            fields: fields.into_iter().map(|(n, b, _)| (n, b)).collect(),
            full,
            empty,
            one_shot,
            readers,
        }))))
    }

    /// A method of a pipe, endpoint or slot; `None` when `receiver` is none of them.
    pub(super) fn pipe_method(&mut self, receiver: &Val, args: &CallArgs<'a>) -> Option<R<Val>> {
        let Val::Pipe(pv) = receiver else {
            return None;
        };
        Some(self.pipe_method_of(pv, args))
    }

    fn pipe_method_of(&mut self, pv: &PipeVal, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let name = args.name.as_str();
        match (pv, name) {
            (PipeVal::Pipe(p), "writer") => {
                args.bind(&[], 0)?;
                Ok(Val::Pipe(PipeVal::Writer(Rc::clone(p))))
            }
            (PipeVal::Pipe(p), "reader") => {
                let a = args.bind(&["name", "fields"], 0)?;
                if let Some(e) = a[0] {
                    let reader = super::calls::str_arg(e)?;
                    if !p.readers.contains(&reader) {
                        return Err(Diagnostic::new(e.span(), format!("the pipe declares no reader `{reader}`"))
                            .with_hint(format!("declared readers: {:?}; add it to `readers = [...]` in `pipe!`", p.readers)));
                    }
                } else if !p.readers.is_empty() {
                    return Err(Diagnostic::new(span, "this pipe has named readers: say which one")
                        .with_hint(format!("e.g. `p.reader(\"{}\")`", p.readers[0])));
                }
                let fields = match a[1] {
                    Some(e) => Some(self.field_names(p, e)?),
                    None => None,
                };
                Ok(Val::Pipe(PipeVal::Reader {
                    pipe: Rc::clone(p),
                    fields,
                }))
            }
            (PipeVal::Writer(p), "acquire") => {
                let it = self.iter_arg(args)?;
                let (stage, phase) = self.stage_and_phase(p, it, span)?;
                if !p.one_shot {
                    let free = self.flip(phase, span)?;
                    let bar = self.view(p.empty, stage, span)?;
                    self.wait_on(bar, free, span)?;
                }
                let full = self.view(p.full, stage, span)?;
                self.pipes[p.id].pending_bytes = 0;
                self.pipes[p.id].acquired_at_depth = Some(self.b.depth());
                let fields = self.field_views(p, None, stage, span)?;
                for (_, view) in &fields {
                    self.shared.slot_fields.insert(*view, SlotField { pipe: p.id, full });
                }
                Ok(Val::Pipe(PipeVal::Slot(fields)))
            }
            (PipeVal::Writer(p), "commit") => {
                if self.pipes[p.id].acquired_at_depth.is_some_and(|d| d != self.b.depth()) {
                    return Err(Diagnostic::new(span, "`commit` inside a loop or branch that its `acquire` is not in")
                        .with_hint("acquire, fill and commit a stage in the same block, so that every acquired stage is committed once with the bytes its copies bring"));
                }
                let it = self.iter_arg(args)?;
                let (stage, _) = self.stage_and_phase(p, it, span)?;
                let full = self.view(p.full, stage, span)?;
                let bytes = std::mem::take(&mut self.pipes[p.id].pending_bytes);
                let yes = self.bool_const(true);
                if bytes > 0 {
                    let bytes = self.constant(ConstVal::Int(bytes), Type::scalar(ScalarType::I32));
                    self.emit_prim(Prim::BarrierExpectBytes, vec![full, bytes, yes], vec![], vec![], span)?;
                } else {
                    self.emit_prim(Prim::FenceAsyncShared, vec![], vec![], vec![], span)?;
                    self.emit_prim(Prim::BarrierArrive, vec![full, yes], vec![1], vec![], span)?;
                }
                Ok(Val::Unit)
            }
            (PipeVal::Reader { pipe, fields }, "wait") => {
                let it = self.iter_arg(args)?;
                let (stage, phase) = self.stage_and_phase(pipe, it, span)?;
                let full = self.view(pipe.full, stage, span)?;
                self.wait_on(full, phase, span)?;
                let views = self.field_views(pipe, fields.as_deref(), stage, span)?;
                Ok(Val::Pipe(PipeVal::Slot(views)))
            }
            (PipeVal::Reader { pipe, .. }, "release") => {
                let it = self.iter_arg(args)?;
                if pipe.one_shot {
                    return Err(Diagnostic::new(span, "a one-shot pipe is never released")
                        .with_hint("drop the `release`, or make the pipe cyclic (no `one_shot`)"));
                }
                let (stage, _) = self.stage_and_phase(pipe, it, span)?;
                let empty = self.view(pipe.empty, stage, span)?;
                let yes = self.bool_const(true);
                self.emit_prim(Prim::BarrierArrive, vec![empty, yes], vec![1], vec![], span)?;
                let task = self.task.current_task.map_or(usize::MAX, |(index, _)| index);
                let replicas = self.task.current_task.map_or(1, |(_, r)| r);
                self.pipes[pipe.id].releasers.insert(task, replicas);
                Ok(Val::Unit)
            }
            // TLE's `reader.wait(it).slot`: the slot is the wait's result here.
            (PipeVal::Slot(_), "slot") => Ok(Val::Pipe(pv.clone())),
            (other, _) => Err(Diagnostic::new(span, format!("{} has no method `{name}`", other.describe()))
                .with_hint("a pipe has `writer()` and `reader(..)`; a writer `acquire(it)` and `commit(it)`; a reader `wait(it)` and `release(it)`")),
        }
    }

    /// `slot.field`.
    pub(super) fn pipe_field(&self, slot: &PipeVal, field: &str, span: Span) -> R<Val> {
        let PipeVal::Slot(fields) = slot else {
            return Err(
                Diagnostic::new(span, format!("{} has no fields", slot.describe()))
                    .with_hint("fields belong to the slot `acquire(it)` or `wait(it)` gives"),
            );
        };
        fields
            .iter()
            .find(|(n, _)| n == field)
            .map(|(_, v)| Val::Ir(*v))
            .ok_or_else(|| {
                let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
                Diagnostic::new(span, format!("this slot has no field `{field}`"))
                    .with_hint(format!("its fields: {}", names.join(", ")))
            })
    }

    /// The barrier a TMA copy into `buffer` completes on, when `buffer` is a
    /// field of an acquired stage: the stage's `full`, whose commit will
    /// announce these bytes.
    /// `Ok(None)` when `buffer` is no stage's field; an error when the copy
    /// sits in a loop or branch its stage's `acquire` is not in, where
    /// `commit` could not know whether (or how often) it ran.
    pub(super) fn pipe_copy_barrier(
        &mut self,
        buffer: ValueId,
        bytes: i64,
        span: Span,
    ) -> R<Option<ValueId>> {
        let Some(field) = self.shared.slot_fields.get(&buffer).copied() else {
            return Ok(None);
        };
        let state = &mut self.pipes[field.pipe];
        if state.acquired_at_depth.is_some_and(|d| d != self.b.depth()) {
            return Err(Diagnostic::new(span, "a copy into a pipe stage inside a loop or branch that the stage's `acquire` is not in")
                .with_hint("`commit` announces the bytes of the copies between `acquire` and `commit`, which must run exactly once each: move the copy out of the `if`/loop, or pass the barrier and expected bytes by hand"));
        }
        state.pending_bytes += bytes;
        Ok(Some(field.full))
    }

    fn field_names(&self, p: &Pipe, e: &Expr) -> R<Vec<String>> {
        let Expr::Array(list) = e else {
            return Err(Diagnostic::new(
                e.span(),
                "expected a list of field names, e.g. `[\"q\"]`",
            ));
        };
        let mut names = Vec::new();
        for item in &list.elems {
            let name = super::calls::str_arg(item)?;
            if !p.fields.iter().any(|(n, _)| *n == name) {
                return Err(Diagnostic::new(
                    item.span(),
                    format!("the pipe has no field `{name}`"),
                ));
            }
            if names.contains(&name) {
                return Err(Diagnostic::new(
                    item.span(),
                    format!("field `{name}` is listed twice"),
                ));
            }
            names.push(name);
        }
        if names.is_empty() {
            return Err(Diagnostic::new(
                e.span(),
                "a reader subscribes to at least one field",
            ));
        }
        Ok(names)
    }

    fn field_views(
        &mut self,
        p: &Pipe,
        only: Option<&[String]>,
        stage: ValueId,
        span: Span,
    ) -> R<Vec<(String, ValueId)>> {
        let mut out = Vec::new();
        for (name, buffers) in &p.fields {
            if only.is_some_and(|o| !o.contains(name)) {
                continue;
            }
            out.push((name.clone(), self.view(*buffers, stage, span)?));
        }
        Ok(out)
    }

    fn iter_arg(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(&["iter"], 1)?;
        self.val_arg(a[0])
    }

    /// `iter % capacity` and `(iter / capacity) % 2`, as i32 values.
    fn stage_and_phase(&mut self, p: &Pipe, it: Val, span: Span) -> R<(ValueId, ValueId)> {
        let cap = Val::Const(ConstVal::Int(p.capacity));
        let two = Val::Const(ConstVal::Int(2));
        let rem = syn::BinOp::Rem(Default::default());
        let div = syn::BinOp::Div(Default::default());
        let stage = self.binary(&rem, it.clone(), cap.clone(), span)?;
        let round = self.binary(&div, it, cap, span)?;
        let phase = self.binary(&rem, round, two, span)?;
        let stage = self.i32_value(stage, span)?;
        let phase = self.i32_value(phase, span)?;
        Ok((stage, phase))
    }

    fn flip(&mut self, phase: ValueId, span: Span) -> R<ValueId> {
        let xor = syn::BinOp::BitXor(Default::default());
        let flipped = self.binary(&xor, Val::Ir(phase), Val::Const(ConstVal::Int(1)), span)?;
        self.i32_value(flipped, span)
    }

    fn i32_value(&mut self, v: Val, span: Span) -> R<ValueId> {
        let id = self.materialize(&v, span)?;
        let t = self.ty(id);
        if !t.is_scalar() || !t.elem().is_integral() {
            return Err(Diagnostic::new(
                span,
                format!("a pipe's `iter` is an integer scalar, not {t}"),
            ));
        }
        self.cast(id, ScalarType::I32, span)
    }

    fn view(&mut self, of: ValueId, index: ValueId, span: Span) -> R<ValueId> {
        let ty = match self.ty(of) {
            Type::SharedMemory(m) => Type::SharedMemory(m.one_buffer()),
            _ => Type::Barriers(BarrierType::new(1)),
        };
        let v = self.emit_prim(Prim::LocalView, vec![of, index], vec![], vec![ty], span)?;
        v.ok_or_else(|| Diagnostic::new(span, "internal: a view gave no value"))
    }

    fn wait_on(&mut self, bar: ValueId, phase: ValueId, span: Span) -> R<()> {
        let yes = self.bool_const(true);
        self.emit_prim(
            Prim::BarrierWait,
            vec![bar, phase, yes],
            vec![],
            vec![],
            span,
        )?;
        Ok(())
    }

    pub(super) fn bool_const(&mut self, b: bool) -> ValueId {
        self.constant(ConstVal::Bool(b), Type::scalar(ScalarType::Bool))
    }
}

impl PipeVal {
    fn describe(&self) -> &'static str {
        match self {
            PipeVal::Pipe(_) => "a pipe",
            PipeVal::Writer(_) => "a pipe writer",
            PipeVal::Reader { .. } => "a pipe reader",
            PipeVal::Slot(_) => "a pipe slot",
        }
    }
}

/// Sets each pipe's `empty` arrive count to its readers' releases.
pub(super) fn finish_pipes(pipes: &[PipeState], body: &mut Block) {
    for state in pipes {
        let count: u32 = state.releasers.values().sum();
        if let Some(empty) = state.empty {
            set_arrive_count(body, empty, i64::from(count.max(1)));
        }
    }
}

fn set_arrive_count(block: &mut Block, bars: ValueId, count: i64) {
    for op in &mut block.ops {
        if let OpKind::Prim {
            prim: Prim::AllocBarriers,
            imms,
            ..
        } = &mut op.kind
        {
            if op.results.first() == Some(&bars) {
                imms[0] = count;
                return;
            }
        }
        for nested in op.kind.blocks_mut() {
            set_arrive_count(nested, bars, count);
        }
    }
}
