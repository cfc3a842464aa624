//! Calls of TLX primitives (`local_alloc`, `barrier_wait`,
//! `async_descriptor_load`, `async_dot`, ...): arguments bound by TLX's
//! names, compile-time ones evaluated, run-time ones converted to the types
//! the primitive's row of the op table asks for, and the row's typing rule
//! run at the call, so a misuse points at the user's tokens.

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::frontend::value::{ConstVal, Val};
use crate::ir::{
    shared_swizzle, BarrierType, OpKind, Prim, ScalarType, SharedMemoryType, Type, ValueId,
};
use syn::spanned::Spanned;
use syn::Expr;

impl<'a> Lowerer<'a> {
    pub(super) fn prim_call(&mut self, prim: Prim, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        if matches!(prim, Prim::LocalAlloc | Prim::AllocBarriers) && self.b.depth() > 0 {
            return Err(Diagnostic::new(span, format!("`{}` inside a loop, branch or task", prim.mnemonic()))
                .with_hint("allocate shared buffers and barriers once, at the top of the kernel body before `async_tasks!`, and pick one with `local_view(x, i)` where it is used"));
        }
        let (params, required) = arguments(prim);
        let a = args.bind(params, required)?;
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
                let swizzle = shared_swizzle(elem, &shape);
                let ty = SharedMemoryType::new(elem, shape, num as u32, swizzle, true);
                (vec![], vec![], vec![Type::SharedMemory(ty)])
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
                let buffers = self.ir_arg(a[0])?;
                let index = self.int_arg(a[1])?;
                let view = match self.ty(buffers) {
                    Type::SharedMemory(m) => Type::SharedMemory(m.one_buffer()),
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
                let buffer = self.ir_arg(a[0])?;
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
                let buffer = self.ir_arg(a[0])?;
                let offsets = self.offsets_arg(self.expr_arg(a[1])?)?;
                let shape = self.shape_arg(self.expr_arg(a[2])?)?;
                let Type::SharedMemory(m) = self.ty(buffer) else {
                    return Err(Diagnostic::new(span, "`local_slice` takes a shared buffer")
                        .with_hint("pick one buffer with `local_view(buffers, i)` first"));
                };
                let sliced = SharedMemoryType::new(m.elem(), shape, 1, m.swizzle(), m.mutable());
                let mut operands = vec![buffer];
                operands.extend(offsets);
                (operands, vec![], vec![Type::SharedMemory(sliced)])
            }
            Prim::LocalLoad => {
                let buffer = self.ir_arg(a[0])?;
                let t = self.ty(buffer);
                let result = Type::tensor(t.elem(), t.shape().to_vec());
                (vec![buffer], vec![], vec![result])
            }
            Prim::LocalStore => {
                let buffer = self.ir_arg(a[0])?;
                let t = self.ty(buffer);
                let value = self.tile_arg(a[1], &t)?;
                (vec![buffer, value], vec![], vec![])
            }
            Prim::BarrierWait => {
                let bar = self.ir_arg(a[0])?;
                let phase = self.int_arg(a[1])?;
                let pred = self.pred_arg(a[2])?;
                (vec![bar, phase, pred], vec![], vec![])
            }
            Prim::BarrierArrive => {
                let bar = self.ir_arg(a[0])?;
                let count = self.const_or(a[1], 1, "the arrive count")?;
                let pred = self.pred_arg(a[2])?;
                (vec![bar, pred], vec![count], vec![])
            }
            Prim::BarrierExpectBytes => {
                let bar = self.ir_arg(a[0])?;
                let bytes = self.int_arg(a[1])?;
                let pred = self.pred_arg(a[2])?;
                (vec![bar, bytes, pred], vec![], vec![])
            }
            Prim::FenceAsyncShared => (vec![], vec![], vec![]),
            Prim::AsyncDescriptorLoad => {
                let desc = self.ir_arg(a[0])?;
                let buffer = self.ir_arg(a[1])?;
                let barrier = match a[3] {
                    Some(e) => self.ir_arg(Some(e))?,
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
                operands.extend(self.offsets_arg(self.expr_arg(a[2])?)?);
                (operands, vec![], vec![])
            }
            Prim::AsyncDescriptorStore => {
                let desc = self.ir_arg(a[0])?;
                let buffer = self.ir_arg(a[1])?;
                let mut operands = vec![desc, buffer];
                operands.extend(self.offsets_arg(self.expr_arg(a[2])?)?);
                (operands, vec![], vec![])
            }
            Prim::AsyncDescriptorStoreWait => {
                (vec![], vec![self.const_or(a[0], 0, "pendings")?], vec![])
            }
            Prim::AsyncDot => {
                let x = self.ir_arg(a[0])?;
                let y = self.ir_arg(a[1])?;
                let acc = self.ir_arg(a[2])?;
                let result = self.ty(acc);
                (vec![x, y, acc], vec![], vec![result])
            }
            Prim::AsyncDotWait => {
                let pendings = self.const_int(self.expr_arg(a[0])?, "pendings")?;
                let acc = self.ir_arg(a[1])?;
                let result = self.ty(acc);
                (vec![acc], vec![pendings], vec![result])
            }
            Prim::AsyncLoad => {
                let ptrs = self.ir_arg(a[0])?;
                let buffer = self.ir_arg(a[1])?;
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
            Prim::AsyncLoadCommitGroup => (vec![], vec![], vec![]),
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
        };
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
        Ok(self.b.push(kind, results).first().copied())
    }

    /// A compile-time integer argument, `default` when absent.
    fn const_or(&self, e: Option<&Expr>, default: i64, what: &str) -> R<i64> {
        match e {
            Some(e) => self.const_int(e, what),
            None => Ok(default),
        }
    }

    /// A run-time i32 scalar (integers and bools convert).
    fn int_arg(&mut self, e: Option<&'a Expr>) -> R<ValueId> {
        let e = self.expr_arg(e)?;
        let v = self.lower_expr(e)?;
        let id = self.materialize(&v, e.span())?;
        let t = self.ty(id);
        if !t.is_tensor() || !t.is_scalar() || t.elem().scalar().is_none() {
            return Err(Diagnostic::new(
                e.span(),
                format!("expected an integer scalar, found {t}"),
            ));
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
fn arguments(prim: Prim) -> (&'static [&'static str], usize) {
    match prim {
        Prim::LocalAlloc => (&["shape", "dtype", "num"], 2),
        Prim::LocalView => (&["buffers", "index"], 2),
        Prim::LocalLoad => (&["buffer"], 1),
        Prim::LocalStore => (&["buffer", "value"], 2),
        Prim::LocalSlice => (&["buffer", "offsets", "shapes"], 3),
        Prim::LocalTrans => (&["buffer"], 1),
        Prim::AllocBarriers => (&["num_barriers", "arrive_count"], 1),
        Prim::BarrierWait => (&["bar", "phase", "pred"], 2),
        Prim::BarrierArrive => (&["bar", "arrive_count", "pred"], 1),
        Prim::BarrierExpectBytes => (&["bar", "bytes", "pred"], 2),
        Prim::FenceAsyncShared => (&[], 0),
        Prim::AsyncDescriptorLoad => (&["desc", "buffer", "offsets", "barrier"], 3),
        Prim::AsyncDescriptorStore => (&["desc", "buffer", "offsets"], 3),
        Prim::AsyncDescriptorStoreWait => (&["pendings"], 0),
        Prim::AsyncDot => (&["a", "b", "acc"], 3),
        Prim::AsyncDotWait => (&["pendings", "acc"], 2),
        Prim::AsyncLoad => (&["ptrs", "buffer", "mask", "other"], 2),
        Prim::AsyncLoadCommitGroup => (&[], 0),
        Prim::AsyncLoadWaitGroup => (&["pendings"], 1),
        Prim::NamedBarrierWait | Prim::NamedBarrierArrive => (&["bar_id", "num_threads"], 2),
    }
}

/// The value an optional argument takes when it is left out.
fn default_of(name: &str) -> &'static str {
    match name {
        "pred" | "mask" => "true",
        "pendings" | "other" => "0",
        // Into a field of a pipe slot (`slot.x`), the stage's full barrier.
        "barrier" => "the pipe slot's",
        _ => "1",
    }
}

fn hint(prim: Prim) -> String {
    let (params, required) = arguments(prim);
    let params: Vec<String> = params
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
