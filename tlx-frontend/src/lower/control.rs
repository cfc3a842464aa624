//! Structured control flow: `if`/`else` with merged variables, `for` and
//! `while` loops with loop-carried variables, unrolled `static_range`, and
//! `return` (a hidden flag guarding the rest of the program).

use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::scan::{self, BROKEN, CONTINUED, RETURNED};
use crate::value::{ConstVal, Val};
use proc_macro2::Span;
use std::collections::BTreeSet;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{Block, OpKind, ScalarType, Type, ValueId};

/// Whether the rest of a statement list runs, given the exit flags
/// (`return`, `break`, `continue`).
pub(super) enum Go {
    Always,
    Never,
    /// While this `bool` holds.
    If(ValueId),
}

/// One arm of an `if`: a block, the tail of a statement list, an `else if`, or nothing.
#[derive(Clone, Copy)]
pub(super) enum Branch<'a> {
    Stmts(&'a [syn::Stmt]),
    Expr(&'a Expr),
    Empty,
}

impl<'a> Branch<'a> {
    fn assigned(self) -> BTreeSet<String> {
        match self {
            Branch::Stmts(s) => scan::assigned_in_stmts(s),
            Branch::Expr(e) => scan::assigned_in_expr(e),
            Branch::Empty => BTreeSet::new(),
        }
    }
}

/// What a `for` loop iterates over: `lower..upper` by `step` (1 if absent).
struct LoopRange<'a> {
    lower: &'a Expr,
    upper: &'a Expr,
    step: Option<&'a Expr>,
    /// `static_range`: unrolled at compile time.
    unrolled: bool,
}

impl<'a> Lowerer<'a> {
    /// Lowers a branch in its own scope; gives its trailing value (or `Unit`).
    fn lower_branch(&mut self, branch: Branch<'a>) -> R<Val> {
        self.push_scope();
        let result = match branch {
            Branch::Stmts(s) => self.lower_stmts(s),
            Branch::Expr(e) => self.lower_expr(e),
            Branch::Empty => Ok(Val::Unit),
        };
        self.pop_scope();
        result
    }

    /// The variables of the current frame among `names`, in a fixed order.
    fn visible(&self, names: BTreeSet<String>) -> Vec<String> {
        names.into_iter().filter(|n| self.is_local(n)).collect()
    }

    fn current(&self, name: &str, span: Span) -> R<Val> {
        match self.lookup(name) {
            Some(v @ (Val::Ir(_) | Val::Const(_))) => Ok(v.clone()),
            _ => Err(Diagnostic::new(
                span,
                format!("`{name}` cannot be changed inside control flow"),
            )
            .with_hint(
                "only tensor and scalar variables can be reassigned in `if`/loops; not tuples",
            )),
        }
    }

    /// A scalar bool condition: a constant, or an IR value.
    fn condition(&mut self, e: &'a Expr) -> R<Val> {
        let v = self.lower_expr(e)?;
        match v {
            Val::Const(ConstVal::Bool(_)) => Ok(v),
            Val::Ir(id) if self.ty(id) == Type::scalar(ScalarType::Bool) => Ok(v),
            Val::Ir(id) => Err(Diagnostic::new(
                e.span(),
                format!(
                    "a condition must be a scalar `bool`, found `{}`",
                    self.ty(id)
                ),
            )
            .with_hint(
                "compare to get a bool (e.g. `n > 0`); for tensors use `select(cond, a, b)`",
            )),
            _ => Err(
                Diagnostic::new(e.span(), "a condition must be a scalar `bool`")
                    .with_hint("compare to get a bool, e.g. `n > 0`"),
            ),
        }
    }

    pub(super) fn lower_if_expr(&mut self, i: &'a syn::ExprIf) -> R<Val> {
        let then = Branch::Stmts(&i.then_branch.stmts);
        let otherwise = match &i.else_branch {
            Some((_, e)) => Branch::Expr(e),
            None => Branch::Empty,
        };
        match self.condition(&i.cond)? {
            Val::Const(ConstVal::Bool(c)) => self.lower_branch(if c { then } else { otherwise }),
            Val::Ir(c) => self.lower_if(c, then, otherwise, i.if_token.span),
            _ => Ok(Val::Unit),
        }
    }

    /// An `If` op; variables assigned in either branch are yielded and rebound.
    /// When both branches end in a value, the `if` gives their merge.
    pub(super) fn lower_if(
        &mut self,
        cond: ValueId,
        then: Branch<'a>,
        otherwise: Branch<'a>,
        span: Span,
    ) -> R<Val> {
        let mut names = then.assigned();
        names.extend(otherwise.assigned());
        let names = self.visible(names);
        let before: Vec<Val> = names
            .iter()
            .map(|n| self.current(n, span))
            .collect::<R<_>>()?;

        self.b.begin_block(vec![]);
        let then_done = self.lower_branch(then);
        let then_vals: R<Vec<Val>> = names.iter().map(|n| self.current(n, span)).collect();
        let mut then_block = self.b.end_block();
        let then_tail = then_done?;
        let then_vals = then_vals?;
        for (n, v) in names.iter().zip(&before) {
            self.assign(n, v.clone(), span)?;
        }
        self.b.begin_block(vec![]);
        let else_done = self.lower_branch(otherwise);
        let else_vals: R<Vec<Val>> = names.iter().map(|n| self.current(n, span)).collect();
        let mut else_block = self.b.end_block();
        let else_tail = else_done?;
        let else_vals = else_vals?;

        // Each entry: the variable (None for the `if`'s own value) and its value per branch.
        let mut entries: Vec<(Option<&String>, Val, Val)> = names
            .iter()
            .zip(then_vals)
            .zip(else_vals)
            .map(|((n, t), e)| (Some(n), t, e))
            .collect();
        let has_value = |v: &Val| matches!(v, Val::Ir(_) | Val::Const(_));
        if has_value(&then_tail) && has_value(&else_tail) {
            entries.push((None, then_tail, else_tail));
        }
        let mut merged = Vec::new();
        let (mut then_yield, mut else_yield, mut types) = (Vec::new(), Vec::new(), Vec::new());
        for (name, t, e) in entries {
            if let (Val::Const(a), Val::Const(b)) = (&t, &e) {
                if a == b || (a.as_f64().is_nan() && b.as_f64().is_nan()) {
                    merged.push((name, Some(t.clone())));
                    continue;
                }
            }
            let label = match name {
                Some(n) => format!("`{n}`"),
                None => "the value of this `if`".to_string(),
            };
            let ty = self.merged_type(&label, &t, &e, span)?;
            then_yield.push(self.value_in(&mut then_block, &t, &ty));
            else_yield.push(self.value_in(&mut else_block, &e, &ty));
            types.push(ty);
            merged.push((name, None));
        }
        self.terminate(&mut then_block, OpKind::Yield(then_yield));
        self.terminate(&mut else_block, OpKind::Yield(else_yield));
        let results = self.b.push(
            OpKind::If {
                cond,
                then_block,
                else_block,
            },
            types,
        );
        let mut results = results.into_iter();
        let mut value = Val::Unit;
        for (name, fixed) in merged {
            let v = match fixed {
                Some(v) => v,
                None => Val::Ir(
                    results
                        .next()
                        .ok_or_else(|| Diagnostic::new(span, "internal: missing if result"))?,
                ),
            };
            match name {
                Some(n) => self.assign(n, v, span)?,
                None => value = v,
            }
        }
        Ok(value)
    }

    /// The type a variable (or the `if`'s value) has after an `if`: both branches must agree.
    fn merged_type(&self, label: &str, t: &Val, e: &Val, span: Span) -> R<Type> {
        match (t, e) {
            (Val::Ir(a), Val::Ir(b)) => {
                let (ta, tb) = (self.ty(*a), self.ty(*b));
                if ta != tb {
                    return Err(Diagnostic::new(span, format!(
                        "{label} is {ta} after the `if` branch but {tb} after the `else` branch"
                    ))
                    .with_hint(format!("give {label} the same type and shape in both branches, e.g. with `.to(...)`")));
                }
                Ok(ta)
            }
            (Val::Ir(a), Val::Const(_)) | (Val::Const(_), Val::Ir(a)) => {
                let ty = self.ty(*a);
                if ty.elem().pointee().is_some() {
                    return Err(pointer_and_constant(label, span));
                }
                Ok(ty)
            }
            (Val::Const(a), Val::Const(b)) => {
                let s = super::typing::promote(a.default_type(), b.default_type());
                Ok(Type::scalar(s))
            }
            _ => Err(Diagnostic::new(
                span,
                format!("{label} cannot be changed inside control flow"),
            )),
        }
    }

    /// `v` as a value of type `ty` at the end of a closed block.
    fn value_in(&mut self, block: &mut Block, v: &Val, ty: &Type) -> ValueId {
        match v {
            Val::Ir(id) => *id,
            Val::Const(c) => {
                let s = ty.elem().scalar().unwrap_or(ScalarType::I32);
                let id = self.b.new_value(ty.clone());
                let kind = OpKind::Constant(c.cast(s).literal_for(s));
                block.ops.push(self.b.op(kind, vec![id]));
                id
            }
            Val::Tuple(_)
            | Val::Pipe(_)
            | Val::BlockPtr(_)
            | Val::Mesh(_)
            | Val::Clc(_)
            | Val::Unit => self.b.new_value(ty.clone()),
        }
    }

    fn terminate(&self, block: &mut Block, kind: OpKind) {
        block.ops.push(self.b.op(kind, vec![]));
    }

    /// Loop-carried variables: their names and IR initial values, block
    /// pointers carried as their scalars (see `block_ptr.rs`).
    fn carried(&mut self, names: BTreeSet<String>, span: Span) -> R<Carried> {
        let names = self.visible(names);
        let (names, block_ptrs) = self.unpack_block_ptrs(names);
        let mut inits = Vec::new();
        for n in &names {
            let v = self.current(n, span)?;
            inits.push(self.materialize(&v, span)?);
        }
        Ok(Carried {
            names,
            inits,
            block_ptrs,
        })
    }

    /// Binds the carried variables to `values` (block args or results).
    fn bind_carried(&mut self, carried: &Carried, values: &[ValueId], span: Span) -> R<()> {
        for (n, v) in carried.names.iter().zip(values) {
            self.assign(n, Val::Ir(*v), span)?;
        }
        self.repack_block_ptrs(&carried.block_ptrs, span)
    }

    /// The carried variables' values at the end of a body, checked against their types.
    fn yields(&mut self, names: &[String], types: &[Type], span: Span) -> R<Vec<ValueId>> {
        let mut out = Vec::new();
        for (n, ty) in names.iter().zip(types) {
            let id = match self.current(n, span)? {
                Val::Const(_) if ty.elem().pointee().is_some() => {
                    return Err(pointer_and_constant(&format!("`{n}`"), span));
                }
                Val::Const(c) => self.constant(c, ty.clone()),
                v => self.materialize(&v, span)?,
            };
            let got = self.ty(id);
            if &got != ty {
                let hint = if got.shape() != ty.shape() {
                    format!(
                        "initialize `{n}` with its final shape, e.g. `zeros({:?}, {})`",
                        got.shape(),
                        got.elem()
                    )
                } else {
                    format!("convert it back: `{n} = (...).to({})`", ty.elem())
                };
                return Err(Diagnostic::new(
                    span,
                    format!("loop-carried variable `{n}` changes from {ty} to {got} in the loop"),
                )
                .with_hint(hint));
            }
            out.push(id);
        }
        Ok(out)
    }

    fn loop_range(&self, f: &'a syn::ExprForLoop) -> R<LoopRange<'a>> {
        let unsupported = || {
            Diagnostic::new(f.expr.span(), "unsupported loop iterator").with_hint(
                "write `0..n`, `(a..b).step_by(s)`, `range(a, b, s)` or `static_range(a, b)`",
            )
        };
        let range_of = |e: &'a Expr| -> R<(&'a Expr, &'a Expr)> {
            let e = match e {
                Expr::Paren(p) => &*p.expr,
                other => other,
            };
            match e {
                Expr::Range(r) if matches!(r.limits, syn::RangeLimits::HalfOpen(_)) => {
                    match (&r.start, &r.end) {
                        (Some(a), Some(b)) => Ok((a, b)),
                        _ => Err(unsupported()),
                    }
                }
                Expr::Range(r) => Err(Diagnostic::new(
                    r.span(),
                    "inclusive ranges are not supported",
                )
                .with_hint("write `a..b + 1`")),
                _ => Err(unsupported()),
            }
        };
        match &*f.expr {
            Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                let (lower, upper) = range_of(&m.receiver)?;
                Ok(LoopRange {
                    lower,
                    upper,
                    step: m.args.first(),
                    unrolled: false,
                })
            }
            Expr::Call(c) => {
                let name = match &*c.func {
                    Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                let args: Vec<&'a Expr> = c.args.iter().collect();
                let (lower, upper, step) = match args.as_slice() {
                    [a, b] => (*a, *b, None),
                    [a, b, s] => (*a, *b, Some(*s)),
                    _ => {
                        return Err(Diagnostic::new(
                            c.span(),
                            "a range takes `(start, end)` or `(start, end, step)`",
                        ))
                    }
                };
                let unrolled = match name.as_deref() {
                    Some("range") => false,
                    Some("static_range") => true,
                    _ => return Err(unsupported()),
                };
                Ok(LoopRange {
                    lower,
                    upper,
                    step,
                    unrolled,
                })
            }
            other => {
                let (lower, upper) = range_of(other)?;
                Ok(LoopRange {
                    lower,
                    upper,
                    step: None,
                    unrolled: false,
                })
            }
        }
    }

    pub(super) fn lower_for(&mut self, f: &'a syn::ExprForLoop) -> R<Val> {
        if let Some(label) = &f.label {
            return Err(Diagnostic::new(
                label.span(),
                "loop labels are not supported",
            ));
        }
        let var = match &*f.pat {
            syn::Pat::Ident(p) => Some(p.ident.to_string()),
            syn::Pat::Wild(_) => None,
            other => {
                return Err(Diagnostic::new(
                    other.span(),
                    "a loop variable must be a name or `_`",
                ))
            }
        };
        let LoopRange {
            lower,
            upper,
            step,
            unrolled,
        } = self.loop_range(f)?;
        self.breakable(&f.body.stmts, |this| {
            if unrolled {
                this.unroll(f, var, lower, upper, step)
            } else {
                this.runtime_for(f, var, lower, upper, step)
            }
        })
    }

    fn unroll(
        &mut self,
        f: &'a syn::ExprForLoop,
        var: Option<String>,
        lower: &Expr,
        upper: &Expr,
        step: Option<&Expr>,
    ) -> R<Val> {
        let what = "a `static_range` bound";
        let (lo, hi) = (self.const_int(lower, what)?, self.const_int(upper, what)?);
        let st = match step {
            Some(s) => self.const_int(s, what)?,
            None => 1,
        };
        if st <= 0 {
            return Err(Diagnostic::new(
                f.expr.span(),
                "a loop step must be positive",
            ));
        }
        let mut i = lo;
        while i < hi {
            self.push_scope();
            if let Some(v) = &var {
                self.define(v.clone(), Val::Const(ConstVal::Int(i)));
            }
            let result = self.guarded_body(&f.body.stmts, f.body.span());
            self.pop_scope();
            result?;
            i += st;
        }
        Ok(Val::Unit)
    }

    /// A loop body; once the kernel has returned or the loop was broken,
    /// the rest of the iterations do nothing. A `continue` skips the rest
    /// of its own iteration only.
    fn guarded_body(&mut self, stmts: &'a [syn::Stmt], span: Span) -> R<()> {
        let assigned = scan::assigned_in_stmts(stmts);
        if assigned.contains(CONTINUED) {
            self.define(CONTINUED.to_string(), Val::Const(ConstVal::Bool(false)));
        }
        let carried: Vec<&str> = [RETURNED, BROKEN]
            .into_iter()
            .filter(|f| assigned.contains(*f))
            .collect();
        match self.keep_going(&carried) {
            Go::If(go) => self
                .lower_if(go, Branch::Stmts(stmts), Branch::Empty, span)
                .map(drop),
            Go::Never => Ok(()),
            Go::Always => self.lower_stmts(stmts).map(drop),
        }
    }

    /// Whether to go on, given exit `flags` (those defined): never once
    /// one is known set, always while none can be, else while none is.
    pub(super) fn keep_going(&mut self, flags: &[&str]) -> Go {
        let mut set = Vec::new();
        for flag in flags {
            match self.lookup(flag).cloned() {
                Some(Val::Const(ConstVal::Bool(true))) => return Go::Never,
                Some(Val::Ir(v)) => set.push(v),
                _ => {}
            }
        }
        let Some((&first, rest)) = set.split_first() else {
            return Go::Always;
        };
        let any = rest.iter().fold(first, |acc, &v| {
            self.binary_op(tlx_core::ir::BinaryOp::Or, acc, v)
        });
        Go::If(self.logical_not(any))
    }

    /// Lowers a loop (`lower`) whose body may `break`: the flag lives
    /// around the loop, carried through its iterations.
    fn breakable(&mut self, body: &[syn::Stmt], lower: impl FnOnce(&mut Self) -> R<Val>) -> R<Val> {
        if !scan::assigned_in_stmts(body).contains(BROKEN) {
            return lower(self);
        }
        self.push_scope();
        self.define(BROKEN.to_string(), Val::Const(ConstVal::Bool(false)));
        let result = lower(self);
        self.pop_scope();
        result
    }

    /// `break` and `continue`: set the loop's flag.
    pub(super) fn lower_loop_exit(&mut self, flag: &str, label: bool, span: Span) -> R<Val> {
        let word = if flag == BROKEN { "break" } else { "continue" };
        if label {
            return Err(Diagnostic::new(
                span,
                format!("a labelled or valued `{word}` is not supported"),
            )
            .with_hint(format!(
                "write a plain `{word};`, which acts on the innermost loop"
            )));
        }
        if !self.is_local(flag) {
            return Err(Diagnostic::new(span, format!("`{word}` outside a loop"))
                .with_hint("`break` and `continue` work in the `for` and `while` loops of the kernel itself, not in helper functions"));
        }
        self.assign(flag, Val::Const(ConstVal::Bool(true)), span)?;
        Ok(Val::Unit)
    }

    fn runtime_for(
        &mut self,
        f: &'a syn::ExprForLoop,
        var: Option<String>,
        lower: &'a Expr,
        upper: &'a Expr,
        step: Option<&'a Expr>,
    ) -> R<Val> {
        let span = f.for_token.span;
        let lo = self.lower_expr(lower)?;
        let hi = self.lower_expr(upper)?;
        let st = match step {
            Some(s) => self.lower_expr(s)?,
            None => Val::Const(ConstVal::Int(1)),
        };
        if let Val::Const(ConstVal::Int(s)) = st {
            if s <= 0 {
                return Err(Diagnostic::new(
                    step.map_or(span, |s| s.span()),
                    "a loop step must be positive",
                ));
            }
        }
        let bounds = self.unify(&[&lo, &hi, &st], f.expr.span())?;
        let index_ty = self.ty(bounds[0]);
        if !index_ty.is_scalar() || !index_ty.elem().scalar().is_some_and(|s| s.is_int()) {
            return Err(Diagnostic::new(
                f.expr.span(),
                format!("loop bounds must be scalar integers, found {index_ty}"),
            )
            .with_hint("use `i32` or `i64` scalars"));
        }
        let carried = self.carried(scan::assigned_in_stmts(&f.body.stmts), span)?;
        let types: Vec<Type> = carried.inits.iter().map(|v| self.ty(*v)).collect();
        let mut arg_types = vec![index_ty];
        arg_types.extend(types.iter().cloned());
        let args = self.b.begin_block(arg_types);
        let body = self.loop_body(
            &carried,
            &args[1..],
            &types,
            |this| {
                if let Some(v) = &var {
                    this.define(v.clone(), Val::Ir(args[0]));
                }
                this.guarded_body(&f.body.stmts, f.body.span())
            },
            span,
        );
        let body = match body {
            Ok(yields) => {
                self.b.push(OpKind::Yield(yields), vec![]);
                self.b.end_block()
            }
            Err(e) => {
                self.b.end_block();
                return Err(e);
            }
        };
        let results = self.b.push(
            OpKind::For {
                lower: bounds[0],
                upper: bounds[1],
                step: bounds[2],
                inits: carried.inits.clone(),
                body,
            },
            types,
        );
        self.bind_carried(&carried, &results, span)?;
        Ok(Val::Unit)
    }

    /// Binds the carried variables to block args, lowers `inner` in a new scope,
    /// and returns the values to yield.
    fn loop_body(
        &mut self,
        carried: &Carried,
        args: &[ValueId],
        types: &[Type],
        inner: impl FnOnce(&mut Self) -> R<()>,
        span: Span,
    ) -> R<Vec<ValueId>> {
        self.bind_carried(carried, args, span)?;
        self.push_scope();
        let result = inner(self);
        self.pop_scope();
        result?;
        self.split_block_ptrs(&carried.block_ptrs, span)?;
        self.yields(&carried.names, types, span)
    }

    pub(super) fn lower_while(&mut self, w: &'a syn::ExprWhile) -> R<Val> {
        if let Some(label) = &w.label {
            return Err(Diagnostic::new(
                label.span(),
                "loop labels are not supported",
            ));
        }
        self.breakable(&w.body.stmts, |this| this.lower_while_loop(w))
    }

    fn lower_while_loop(&mut self, w: &'a syn::ExprWhile) -> R<Val> {
        let span = w.while_token.span;
        let mut assigned = scan::assigned_in_stmts(&w.body.stmts);
        assigned.extend(scan::assigned_in_expr(&w.cond));
        let carried = self.carried(assigned, span)?;
        let types: Vec<Type> = carried.inits.iter().map(|v| self.ty(*v)).collect();

        let cond_args = self.b.begin_block(types.clone());
        let cond = self.while_condition(&carried, &cond_args, &w.cond, span);
        let cond_block = self.b.end_block();
        let mut cond_block = cond_block;
        let cond = cond?;
        self.terminate(&mut cond_block, OpKind::Condition(cond));

        let body_args = self.b.begin_block(types.clone());
        let yields = self.loop_body(
            &carried,
            &body_args,
            &types,
            |this| this.lower_stmts(&w.body.stmts).map(drop),
            span,
        );
        let body = match yields {
            Ok(y) => {
                self.b.push(OpKind::Yield(y), vec![]);
                self.b.end_block()
            }
            Err(e) => {
                self.b.end_block();
                return Err(e);
            }
        };
        let results = self.b.push(
            OpKind::While {
                inits: carried.inits.clone(),
                cond: cond_block,
                body,
            },
            types,
        );
        self.bind_carried(&carried, &results, span)?;
        Ok(Val::Unit)
    }

    /// The `while` condition over the carried values, false once the kernel has returned.
    fn while_condition(
        &mut self,
        carried: &Carried,
        args: &[ValueId],
        cond: &'a Expr,
        span: Span,
    ) -> R<ValueId> {
        self.bind_carried(carried, args, span)?;
        let names = &carried.names;
        let c = match self.condition(cond)? {
            Val::Ir(id) => id,
            other => self.materialize(&other, cond.span())?,
        };
        // Only a loop that can return or break carries those flags; they
        // then stop the loop.
        let carried: Vec<&str> = [RETURNED, BROKEN]
            .into_iter()
            .filter(|f| names.iter().any(|n| n == f))
            .collect();
        match self.keep_going(&carried) {
            Go::If(go) => Ok(self.binary_op(tlx_core::ir::BinaryOp::And, c, go)),
            Go::Never => Ok(self.constant(
                ConstVal::Bool(false),
                Type::scalar(tlx_core::ir::ScalarType::Bool),
            )),
            Go::Always => Ok(c),
        }
    }

    pub(super) fn lower_return(&mut self, r: &'a syn::ExprReturn) -> R<Val> {
        if let Some(e) = &r.expr {
            return Err(Diagnostic::new(e.span(), "a kernel returns no value")
                .with_hint("write `return;` and store results with `store(ptr, value)`"));
        }
        if self.frames.len() > 1 || !self.is_local(RETURNED) {
            return Err(Diagnostic::new(r.span(), "`return` is not supported here")
                .with_hint("give a helper's result as its body's last expression"));
        }
        self.assign(RETURNED, Val::Const(ConstVal::Bool(true)), r.span())?;
        Ok(Val::Unit)
    }
}

/// What a loop carries: variables by name with their initial IR values,
/// and the block pointers whose scalars some of those names are.
struct Carried {
    names: Vec<String>,
    inits: Vec<ValueId>,
    block_ptrs: Vec<super::block_ptr::PackedBlockPtr>,
}

fn pointer_and_constant(label: &str, span: Span) -> Diagnostic {
    Diagnostic::new(
        span,
        format!("{label} is a pointer on one path and a number on another"),
    )
    .with_hint("a pointer variable can only be given pointers, e.g. `p = p + offs`")
}
