//! Blackwell's cluster launch control as TLX spells it (docs/language.md,
//! "Cluster launch control"): `clc_create_context(num_consumers)` allocates
//! the answer buffer and its two barriers, `clc_producer(ctx, phase)` asks
//! for the work of a cluster that has not started, `clc_consumer(ctx,
//! phase)` waits for the answer, decodes it (-1: no work left) and
//! releases the context. Each lowers to the primitives `clc_try_cancel`
//! and `clc_query` among ordinary barrier operations, so the checker and
//! the interpreter see the protocol as written.
//!
//! In a cluster of several programs (`ctas_per_cga`), program 0 asks for
//! the whole cluster and the answer is multicast: every program waits on
//! its own barrier, gets the cancelled cluster's first program id plus its
//! own rank, and releases program 0's context ("arrive remote, wait local").

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ClcContext, ConstVal, Val};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{
    shared_swizzle, BarrierType, CmpPred, OpKind, Prim, ScalarType, SharedMemoryType, Type,
    ValueId, CLC_RESPONSE_SHAPE,
};

/// The functions this file lowers.
pub(super) const FUNCTIONS: &[&str] = &["clc_create_context", "clc_producer", "clc_consumer"];

/// The bytes of an answer, which the full barrier expects.
const ANSWER_BYTES: i64 = 16;

impl<'a> Lowerer<'a> {
    pub(super) fn clc_function(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        match args.name.as_str() {
            "clc_create_context" => {
                let a = args.bind(&["num_consumers"], 1)?;
                let e = self.expr_arg(a[0])?;
                let consumers = self.const_int(e, "the number of consumers")?;
                if !(1..=1024).contains(&consumers) {
                    return Err(Diagnostic::new(e.span(), format!("{consumers} consumers"))
                        .with_hint("every `clc_consumer` call of a round releases the context once: count the tasks (and, in a cluster, the programs) that call it, 1 to 1024"));
                }
                self.clc_create_context(consumers, span)
            }
            "clc_producer" => {
                let a = args.bind(&["context", "p_producer", "multi_ctas"], 2)?;
                let ctx = self.clc_context_arg(a[0])?;
                let phase = self.int_arg(a[1])?;
                let multi = self.clc_multi_ctas(a[2])?;
                self.clc_producer(ctx, phase, multi, span)?;
                Ok(Val::Unit)
            }
            _ => {
                let a = args.bind(&["context", "p_consumer", "multi_ctas", "return_3d"], 2)?;
                let ctx = self.clc_context_arg(a[0])?;
                let phase = self.int_arg(a[1])?;
                let multi = self.clc_multi_ctas(a[2])?;
                let three = self.const_bool_or(a[3], false)?;
                self.clc_consumer(ctx, phase, multi, three, span)
            }
        }
    }

    fn clc_create_context(&mut self, consumers: i64, span: Span) -> R<Val> {
        if self.b.depth() > 0 {
            return Err(Diagnostic::new(span, "`clc_create_context` inside a loop, branch or task")
                .with_hint("create it once, at the top of the kernel body before `async_tasks!`, like the buffers and barriers it allocates"));
        }
        let shape = CLC_RESPONSE_SHAPE.to_vec();
        let swizzle = shared_swizzle(ScalarType::I32, &shape);
        let response = SharedMemoryType::new(ScalarType::I32, shape, 1, swizzle, true);
        let response = self.emit_prim(
            Prim::LocalAlloc,
            vec![],
            vec![],
            vec![Type::SharedMemory(response)],
            span,
        )?;
        let one = Type::Barriers(BarrierType::new(1));
        let full = self.emit_prim(
            Prim::AllocBarriers,
            vec![],
            vec![1],
            vec![one.clone()],
            span,
        )?;
        let empty = self.emit_prim(
            Prim::AllocBarriers,
            vec![],
            vec![consumers],
            vec![one],
            span,
        )?;
        let (Some(response), Some(full), Some(empty)) = (response, full, empty) else {
            return Err(Diagnostic::new(
                span,
                "internal: an allocation gave no value",
            ));
        };
        Ok(Val::Clc(ClcContext {
            response,
            full,
            empty,
        }))
    }

    fn clc_context_arg(&mut self, e: Option<&'a Expr>) -> R<ClcContext> {
        let e = self.expr_arg(e)?;
        match self.lower_expr(e)? {
            Val::Clc(ctx) => Ok(ctx),
            _ => Err(Diagnostic::new(e.span(), "expected a cluster-launch-control context")
                .with_hint("make one with `let clc = clc_create_context(num_consumers);` at the top of the kernel")),
        }
    }

    /// `multi_ctas`: whether the cluster has several programs; the kernel's
    /// `ctas_per_cga` decides it, and a flag that says otherwise is refused.
    fn clc_multi_ctas(&self, e: Option<&'a Expr>) -> R<bool> {
        let size = self.b.options().cluster_size();
        let multi = size > 1;
        match e {
            Some(e) if self.const_bool(e)? != multi => Err(Diagnostic::new(
                e.span(),
                format!("`multi_ctas = {}` in a cluster of {size} program(s)", !multi),
            )
            .with_hint("leave `multi_ctas` out: it follows the kernel's `ctas_per_cga` (several programs per cluster: program 0 asks for the whole cluster and the answer reaches every program)")),
            _ => Ok(multi),
        }
    }

    /// Program 0's rank test in a cluster of several, else `true`.
    fn clc_first_program(&mut self, multi: bool) -> ValueId {
        if !multi {
            return self.bool_const(true);
        }
        let rank = self
            .b
            .push1(OpKind::ClusterCtaRank, Type::scalar(ScalarType::I32));
        let zero = self.constant(ConstVal::Int(0), Type::scalar(ScalarType::I32));
        self.b.push1(
            OpKind::Compare {
                pred: CmpPred::Eq,
                lhs: rank,
                rhs: zero,
            },
            Type::scalar(ScalarType::Bool),
        )
    }

    fn clc_producer(&mut self, ctx: ClcContext, phase: ValueId, multi: bool, span: Span) -> R<()> {
        let first = self.clc_first_program(multi);
        let yes = self.bool_const(true);
        // Program 0 waits until every consumer released the last answer
        // (the others' consumers arrive on its barrier).
        self.emit_prim(
            Prim::BarrierWait,
            vec![ctx.empty, phase, first],
            vec![],
            vec![],
            span,
        )?;
        // Every program expects the answer on its own barrier.
        let bytes = self.constant(ConstVal::Int(ANSWER_BYTES), Type::scalar(ScalarType::I32));
        self.emit_prim(
            Prim::BarrierExpectBytes,
            vec![ctx.full, bytes, yes],
            vec![],
            vec![],
            span,
        )?;
        self.emit_prim(
            Prim::ClcTryCancel,
            vec![ctx.response, ctx.full, first],
            vec![i64::from(multi)],
            vec![],
            span,
        )?;
        Ok(())
    }

    fn clc_consumer(
        &mut self,
        ctx: ClcContext,
        phase: ValueId,
        multi: bool,
        three: bool,
        span: Span,
    ) -> R<Val> {
        let yes = self.bool_const(true);
        self.emit_prim(
            Prim::BarrierWait,
            vec![ctx.full, phase, yes],
            vec![],
            vec![],
            span,
        )?;
        let i32t = Type::scalar(ScalarType::I32);
        let mut ids = Vec::with_capacity(3);
        for dim in 0..if three { 3 } else { 1 } {
            let id = self.emit_prim(
                Prim::ClcQuery,
                vec![ctx.response],
                vec![dim],
                vec![i32t.clone()],
                span,
            )?;
            ids.push(
                id.ok_or_else(|| Diagnostic::new(span, "internal: `clc_query` gave no value"))?,
            );
        }
        // In a cluster, program r of the cancelled cluster's work is its
        // first program id plus r along x (-1 stays -1).
        if multi {
            let rank = self.b.push1(OpKind::ClusterCtaRank, i32t.clone());
            let none = self.constant(ConstVal::Int(-1), i32t.clone());
            let found = self.b.push1(
                OpKind::Compare {
                    pred: CmpPred::Ne,
                    lhs: ids[0],
                    rhs: none,
                },
                Type::scalar(ScalarType::Bool),
            );
            let own = self.binary_op(tlx_core::ir::BinaryOp::Add, ids[0], rank);
            ids[0] = self.b.push1(
                OpKind::Select {
                    cond: found,
                    on_true: own,
                    on_false: none,
                },
                i32t.clone(),
            );
        }
        let empty = match multi {
            false => ctx.empty,
            true => {
                let zero = self.constant(ConstVal::Int(0), i32t);
                let remote = Type::Barriers(BarrierType::new(1).to_remote());
                self.emit_prim(
                    Prim::RemoteView,
                    vec![ctx.empty, zero],
                    vec![],
                    vec![remote],
                    span,
                )?
                .ok_or_else(|| Diagnostic::new(span, "internal: `remote_view` gave no value"))?
            }
        };
        self.emit_prim(Prim::BarrierArrive, vec![empty, yes], vec![1], vec![], span)?;
        Ok(match three {
            false => Val::Ir(ids[0]),
            true => Val::Tuple(ids.into_iter().map(Val::Ir).collect()),
        })
    }
}
