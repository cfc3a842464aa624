//! TLX's per-thread and warp-level functions in the tile model:
//! `thread_id(0)`, `vote_ballot_sync(mask, pred)` and `warp_redux(x, op)`.
//!
//! In TLX a thread id is a scalar that differs per thread, and a ballot or
//! warp reduction of a tensor depends on which thread holds which element.
//! Here values are whole tiles with no such dependence, so a per-thread
//! value is a tile with one element per thread of the task (or program):
//! `thread_id(0)` is `[T]` of `0..T`, element `i` standing for thread `i`.
//! Warp-level functions take such `[n]` tiles (`n` a multiple of 32) and
//! act on each run of 32 elements, a warp's lanes: element `i`'s ballot
//! has bit `j` set when element `32 * (i / 32) + j` holds and mask bit `j`
//! is set; its reduction is over the same 32 elements. Built from reshape,
//! reduce and broadcast, they mean the same on the interpreter and the GPU
//! whatever layout the code generator picks.

use proc_macro2::Span;
use syn::spanned::Spanned;

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use tlx_core::ir::{BinaryOp, Elem, OpKind, ReduceKind, ScalarType, Type, UnaryOp, ValueId};

/// The functions this module builds.
pub(super) const FUNCTIONS: &[&str] = &["thread_id", "vote_ballot_sync", "warp_redux"];

/// Lanes of a warp.
const WARP: usize = 32;

impl<'a> Lowerer<'a> {
    /// One of [`FUNCTIONS`], by name.
    pub(super) fn warp_function(&mut self, args: &CallArgs<'a>) -> R<Val> {
        match args.name.as_str() {
            "thread_id" => self.thread_id(args),
            "vote_ballot_sync" => self.vote_ballot_sync(args),
            _ => self.warp_redux(args),
        }
    }

    /// `thread_id(axis)`: `[T]` of `0..T` for the `T` threads of the task
    /// (or of the program, outside `async_tasks!`).
    fn thread_id(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(&["axis"], 1)?;
        let axis_expr = self.expr_arg(a[0])?;
        if self.const_int(axis_expr, "the axis")? != 0 {
            return Err(Diagnostic::new(
                axis_expr.span(),
                "threads are numbered along axis 0 only",
            )
            .with_hint("a program's threads form one dimension here: use `thread_id(0)`"));
        }
        let warps = match self.task.task_warps {
            Some(w) => w,
            None if !self.task.task_regions.is_empty() => return Err(Diagnostic::new(
                args.span,
                "`thread_id` outside the tasks of a warp-specialized kernel",
            )
            .with_hint(
                "call it inside a `task(..) { .. }` of `async_tasks!`, whose threads it numbers",
            )),
            None => self.b.options().num_warps,
        };
        let threads = warps as usize * WARP;
        if !threads.is_power_of_two() {
            return Err(Diagnostic::new(
                args.span,
                format!("{warps} warps: `thread_id` numbers a power-of-two count of threads"),
            )
            .with_hint("tiles have power-of-two sizes: give the task 1, 2, 4 or 8 warps"));
        }
        let ty = Type::tensor(Elem::Scalar(ScalarType::I32), vec![threads]);
        Ok(Val::Ir(self.b.push1(
            OpKind::Arange {
                start: 0,
                end: threads as i64,
            },
            ty,
        )))
    }

    /// `vote_ballot_sync(mask, pred)`: for each element, the i32 whose bit
    /// `j` is lane `j`'s predicate (and mask bit `j`) in its run of 32.
    fn vote_ballot_sync(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let a = args.bind(&["mask", "pred"], 2)?;
        let mask_expr = self.expr_arg(a[0])?;
        let mask = self.const_int(mask_expr, "the lane mask")?;
        if !(0..=u32::MAX as i64).contains(&mask) && !(i32::MIN as i64..0).contains(&mask) {
            return Err(Diagnostic::new(
                mask_expr.span(),
                format!("lane mask {mask} is not 32 bits"),
            )
            .with_hint("one bit per lane: `0xFFFFFFFF` for the whole warp"));
        }
        let pred = self.ir_arg(a[1])?;
        // A number votes for itself when it is not zero, as in TLX.
        let pred = match self.scalar_elem(pred, span, "a ballot's predicate")? {
            ScalarType::Bool => pred,
            _ => {
                let ne = syn::BinOp::Ne(Default::default());
                let zero = Val::Const(ConstVal::Int(0));
                let voted = self.binary(&ne, Val::Ir(pred), zero, span)?;
                self.materialize(&voted, span)?
            }
        };
        let lanes = self.warp_runs(pred, span, "vote_ballot_sync")?;
        let shape = self.ty(lanes).shape().to_vec();
        // Lane j's bit, where its predicate and mask bit hold: the bits are
        // distinct, so their u32 sum is the ballot.
        let lane = self.b.push1(
            OpKind::Arange {
                start: 0,
                end: WARP as i64,
            },
            Type::tensor(Elem::Scalar(ScalarType::I32), vec![WARP]),
        );
        let lane = self.b.push1(
            OpKind::Bitcast(lane),
            Type::tensor(Elem::Scalar(ScalarType::U32), vec![WARP]),
        );
        let lane = self.expand_leading(lane, &shape, span)?;
        let one = self.u32_tile(1, &shape, span)?;
        let bit = self.binary_op(BinaryOp::Shl, one, lane);
        let mask_tile = self.u32_tile(mask as u32 as i64, &shape, span)?;
        let bit = self.binary_op(BinaryOp::And, bit, mask_tile);
        let voted = self.select_val(
            Val::Ir(lanes),
            Val::Ir(bit),
            Val::Const(ConstVal::Int(0)),
            span,
        )?;
        let voted = self.materialize(&voted, span)?;
        let ballot = self.reduce_runs(voted, ReduceKind::Sum, span)?;
        let ballot_ty = self.ty(ballot).with_elem(Elem::Scalar(ScalarType::I32));
        Ok(Val::Ir(self.b.push1(OpKind::Bitcast(ballot), ballot_ty)))
    }

    /// `warp_redux(x, op)`: each element replaced by the `op` ("max", "min",
    /// "abs_max", "abs_min", or "sum") of its run of 32.
    fn warp_redux(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let a = args.bind(&["x", "op"], 2)?;
        let x = self.ir_arg(a[0])?;
        let op_expr = self.expr_arg(a[1])?;
        let op = match op_expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => s.value(),
            _ => String::new(),
        };
        let (kind, abs) = match op.as_str() {
            "max" => (ReduceKind::Max, false),
            "min" => (ReduceKind::Min, false),
            "abs_max" => (ReduceKind::Max, true),
            "abs_min" => (ReduceKind::Min, true),
            "sum" => (ReduceKind::Sum, false),
            _ => {
                return Err(Diagnostic::new(op_expr.span(), "unknown warp reduction")
                    .with_hint("write one of \"max\", \"min\", \"abs_max\", \"abs_min\", \"sum\""))
            }
        };
        if self.scalar_elem(x, span, "a warp reduction's operand")? == ScalarType::Bool {
            return Err(
                Diagnostic::new(span, "`warp_redux` needs numbers, not bools")
                    .with_hint("convert first: `x.to(i32)`"),
            );
        }
        let x = if abs { self.unary(UnaryOp::Abs, x) } else { x };
        let runs = self.warp_runs(x, span, "warp_redux")?;
        Ok(Val::Ir(self.reduce_runs(runs, kind, span)?))
    }

    /// A 1-D tile of `n` elements (a multiple of 32) as `[n / 32, 32]`.
    fn warp_runs(&mut self, x: ValueId, span: Span, what: &str) -> R<ValueId> {
        let ty = self.ty(x);
        match ty.shape() {
            [n] if n % WARP == 0 => {
                let shape = vec![n / WARP, WARP];
                Ok(self.b.push1(OpKind::Reshape(x), ty.with_shape(shape)))
            }
            other => Err(Diagnostic::new(span, format!("`{what}` of a tile of shape {other:?}"))
                .with_hint("warp-level functions take a 1-D tile with one element per thread, a multiple of 32 long, like `thread_id(0)` and values computed from it")),
        }
    }

    /// The `kind` reduction of each run of `[runs, 32]`, given back to each
    /// of its 32 elements as a `[runs * 32]` tile.
    fn reduce_runs(&mut self, runs: ValueId, kind: ReduceKind, span: Span) -> R<ValueId> {
        let ty = self.ty(runs);
        let shape = ty.shape().to_vec();
        let reduced = self.b.push1(
            OpKind::Reduce {
                value: runs,
                axis: 1,
                kind,
            },
            ty.with_shape(vec![shape[0]]),
        );
        let column = self.b.push1(
            OpKind::ExpandDims {
                value: reduced,
                axis: 1,
            },
            ty.with_shape(vec![shape[0], 1]),
        );
        let spread = self.broadcast_to(column, &shape, span)?;
        Ok(self.b.push1(
            OpKind::Reshape(spread),
            ty.with_shape(vec![shape[0] * WARP]),
        ))
    }

    /// `v` (`[32]`) repeated along a leading axis to `shape` (`[runs, 32]`).
    fn expand_leading(&mut self, v: ValueId, shape: &[usize], span: Span) -> R<ValueId> {
        let ty = self.ty(v);
        let row = self.b.push1(
            OpKind::ExpandDims { value: v, axis: 0 },
            ty.with_shape(vec![1, WARP]),
        );
        self.broadcast_to(row, shape, span)
    }

    /// A u32 tile of `shape` holding `value`.
    fn u32_tile(&mut self, value: i64, shape: &[usize], span: Span) -> R<ValueId> {
        let c = self.constant(ConstVal::Int(value), Type::scalar(ScalarType::U32));
        self.broadcast_to(c, shape, span)
    }
}
