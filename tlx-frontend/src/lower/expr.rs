//! Expressions: literals, names, operators, casts, indexing, and the
//! compile-time evaluator for places that need constants (shapes, axes).

use super::typing::check_tile_size;
use super::{loc_of, macro_error, Lowerer, R};
use crate::diag::Diagnostic;
use crate::scan::is_compound_assign;
use crate::value::{fold_binary, fold_compare, ConstVal, Val};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{BinaryOp, CmpPred, Elem, OpKind, ScalarType, Type, UnaryOp, ValueId};

/// What a Rust binary operator means in the IR.
enum BinKind {
    Arith(BinaryOp),
    Cmp(CmpPred),
    /// `&&` / `||`: elementwise on bools, no short-circuit.
    Logic(BinaryOp),
}

fn bin_kind(op: &syn::BinOp) -> Option<BinKind> {
    use syn::BinOp as B;
    Some(match op {
        B::Add(_) | B::AddAssign(_) => BinKind::Arith(BinaryOp::Add),
        B::Sub(_) | B::SubAssign(_) => BinKind::Arith(BinaryOp::Sub),
        B::Mul(_) | B::MulAssign(_) => BinKind::Arith(BinaryOp::Mul),
        B::Div(_) | B::DivAssign(_) => BinKind::Arith(BinaryOp::Div),
        B::Rem(_) | B::RemAssign(_) => BinKind::Arith(BinaryOp::Rem),
        B::BitAnd(_) | B::BitAndAssign(_) => BinKind::Arith(BinaryOp::And),
        B::BitOr(_) | B::BitOrAssign(_) => BinKind::Arith(BinaryOp::Or),
        B::BitXor(_) | B::BitXorAssign(_) => BinKind::Arith(BinaryOp::Xor),
        B::Shl(_) | B::ShlAssign(_) => BinKind::Arith(BinaryOp::Shl),
        B::Shr(_) | B::ShrAssign(_) => BinKind::Arith(BinaryOp::Shr),
        B::And(_) => BinKind::Logic(BinaryOp::And),
        B::Or(_) => BinKind::Logic(BinaryOp::Or),
        B::Eq(_) => BinKind::Cmp(CmpPred::Eq),
        B::Ne(_) => BinKind::Cmp(CmpPred::Ne),
        B::Lt(_) => BinKind::Cmp(CmpPred::Lt),
        B::Le(_) => BinKind::Cmp(CmpPred::Le),
        B::Gt(_) => BinKind::Cmp(CmpPred::Gt),
        B::Ge(_) => BinKind::Cmp(CmpPred::Ge),
        _ => return None,
    })
}

/// Named constants of the scalar types (`f32::INFINITY`, `i32::MAX`, ...).
fn type_constant(ty: &str, name: &str) -> Option<ConstVal> {
    Some(match (ty, name) {
        ("f32" | "f16" | "bf16", "INFINITY") => ConstVal::Float(f64::INFINITY),
        ("f32" | "f16" | "bf16", "NEG_INFINITY") => ConstVal::Float(f64::NEG_INFINITY),
        ("f32" | "f16" | "bf16", "NAN") => ConstVal::Float(f64::NAN),
        ("f32", "MAX") => ConstVal::Float(f64::from(f32::MAX)),
        ("f32", "MIN") => ConstVal::Float(f64::from(f32::MIN)),
        ("i32", "MAX") => ConstVal::Int(i64::from(i32::MAX)),
        ("i32", "MIN") => ConstVal::Int(i64::from(i32::MIN)),
        ("u32", "MAX") => ConstVal::Int(i64::from(u32::MAX)),
        ("i64", "MAX") => ConstVal::Int(i64::MAX),
        ("i64", "MIN") => ConstVal::Int(i64::MIN),
        _ => return None,
    })
}

pub(super) fn is_power_of_two(n: i64) -> bool {
    n > 0 && (n & (n - 1)) == 0
}

impl<'a> Lowerer<'a> {
    /// Lowers an expression; ops it creates carry its source location.
    pub(super) fn lower_expr(&mut self, e: &'a Expr) -> R<Val> {
        let saved = self.b.loc();
        self.b.set_loc(loc_of(e.span()));
        let result = self.lower_expr_here(e);
        self.b.set_loc(saved);
        result
    }

    fn lower_expr_here(&mut self, e: &'a Expr) -> R<Val> {
        match e {
            Expr::Lit(lit) => self.lower_lit(&lit.lit),
            Expr::Path(p) => self.lower_path(p),
            Expr::Paren(p) => self.lower_expr(&p.expr),
            Expr::Group(g) => self.lower_expr(&g.expr),
            Expr::Binary(bin) if is_compound_assign(&bin.op) => {
                let name = assign_target(&bin.left)?;
                let current = self.lower_expr(&bin.left)?;
                let rhs = self.lower_expr(&bin.right)?;
                let value = self.binary(&bin.op, current, rhs, bin.op.span())?;
                self.assign_checked(&name, value, bin.left.span())?;
                Ok(Val::Unit)
            }
            Expr::Binary(bin) => {
                let lhs = self.lower_expr(&bin.left)?;
                let rhs = self.lower_expr(&bin.right)?;
                self.binary(&bin.op, lhs, rhs, bin.op.span())
            }
            Expr::Assign(a) => {
                let name = assign_target(&a.left)?;
                let value = self.lower_expr(&a.right)?;
                self.assign_checked(&name, value, a.left.span())?;
                Ok(Val::Unit)
            }
            Expr::Unary(u) => self.lower_unary(u),
            Expr::Cast(c) => {
                let v = self.lower_expr(&c.expr)?;
                if is_usize(&c.ty) {
                    return match v {
                        Val::Const(ConstVal::Int(i)) => Ok(Val::Const(ConstVal::Int(i))),
                        _ => Err(Diagnostic::new(
                            c.ty.span(),
                            "`as usize` applies only to constants",
                        )
                        .with_hint("cast run-time values to `i32`, `i64` or `u32`")),
                    };
                }
                if let Some(pointee) = pointer_type(&c.ty) {
                    return self.address_to_pointer(v, pointee, c.span());
                }
                let ty = self.dtype_of_type(&c.ty)?;
                self.cast_val(v, ty, c.span())
            }
            Expr::Tuple(t) => Ok(Val::Tuple(
                t.elems
                    .iter()
                    .map(|e| self.lower_expr(e))
                    .collect::<R<_>>()?,
            )),
            Expr::Field(f) => {
                let base = self.lower_expr(&f.base)?;
                match (&f.member, base) {
                    (syn::Member::Named(name), Val::Pipe(slot)) => {
                        self.pipe_field(&slot, &name.to_string(), f.member.span())
                    }
                    (syn::Member::Unnamed(i), Val::Tuple(items)) => {
                        items.into_iter().nth(i.index as usize).ok_or_else(|| {
                            Diagnostic::new(f.member.span(), "tuple index out of range")
                        })
                    }
                    _ => Err(
                        Diagnostic::new(f.member.span(), "field access is not supported")
                            .with_hint("only tuple elements (`t.0`) can be accessed"),
                    ),
                }
            }
            Expr::Index(ix) => self.lower_index(ix),
            Expr::Call(call) => self.lower_call(call),
            Expr::MethodCall(m) => self.lower_method_call(m),
            Expr::Block(b) => {
                if let Some(label) = &b.label {
                    return Err(Diagnostic::new(label.span(), "labels are not supported"));
                }
                self.push_scope();
                let v = self.lower_stmts(&b.block.stmts);
                self.pop_scope();
                v
            }
            Expr::If(i) => self.lower_if_expr(i),
            Expr::ForLoop(f) => self.lower_for(f),
            Expr::While(w) => self.lower_while(w),
            Expr::Return(r) => self.lower_return(r),
            Expr::Closure(c) => Err(Diagnostic::new(
                c.or1_token.span,
                "closures are not supported in kernels",
            )
            .with_hint("declare a helper `fn` inside the kernel body instead")),
            Expr::Match(m) => Err(Diagnostic::new(
                m.match_token.span,
                "`match` is not supported in kernels",
            )
            .with_hint("use `if`/`else`, or `select(cond, a, b)` for tensors")),
            Expr::Loop(l) => Err(Diagnostic::new(
                l.loop_token.span,
                "`loop` is not supported in kernels",
            )
            .with_hint("use `while cond { ... }` or `for i in 0..n { ... }`")),
            Expr::Break(b) => self.lower_loop_exit(
                crate::scan::BROKEN,
                b.label.is_some() || b.expr.is_some(),
                b.break_token.span,
            ),
            Expr::Continue(c) => self.lower_loop_exit(
                crate::scan::CONTINUED,
                c.label.is_some(),
                c.continue_token.span,
            ),
            Expr::Reference(r) => Err(Diagnostic::new(
                r.and_token.span,
                "references are not supported in kernels",
            )
            .with_hint("pass values directly; tensors are values")),
            Expr::Macro(m) if m.mac.path.is_ident("pipe") => self.lower_pipe_macro(&m.mac),
            Expr::Macro(m) => Err(macro_error(&m.mac)),
            Expr::Array(a) => Err(Diagnostic::new(
                a.span(),
                "an array is only valid as a shape or index list",
            )
            .with_hint("e.g. `zeros([BLOCK_M, BLOCK_N], f32)`")),
            Expr::Range(r) => Err(Diagnostic::new(
                r.span(),
                "a range is only valid as a `for` loop's iterator",
            )
            .with_hint("use `arange(start, end)` for a tensor of indices")),
            other => Err(Diagnostic::new(
                other.span(),
                "this Rust syntax is not part of the kernel language",
            )
            .with_hint("see docs/language.md for the supported syntax")),
        }
    }

    /// Assigns a variable, keeping tuples and values apart.
    fn assign_checked(&mut self, name: &str, value: Val, span: Span) -> R<()> {
        if matches!(value, Val::Unit) {
            return Err(Diagnostic::new(
                span,
                "the assigned expression has no value",
            ));
        }
        self.assign(name, value, span)
    }

    fn lower_lit(&mut self, lit: &syn::Lit) -> R<Val> {
        match lit {
            syn::Lit::Int(i) => {
                let value: i64 = i
                    .base10_parse()
                    .map_err(|e| Diagnostic::new(i.span(), e.to_string()))?;
                self.suffixed(ConstVal::Int(value), i.suffix(), i.span())
            }
            syn::Lit::Float(f) => {
                let value: f64 = f
                    .base10_parse()
                    .map_err(|e| Diagnostic::new(f.span(), e.to_string()))?;
                self.suffixed(ConstVal::Float(value), f.suffix(), f.span())
            }
            syn::Lit::Bool(b) => Ok(Val::Const(ConstVal::Bool(b.value))),
            syn::Lit::Str(s) => Err(Diagnostic::new(
                s.span(),
                "a string is only allowed in `device_print`, `device_assert` and string options",
            )
            .with_hint("strings are not values in kernels")),
            other => Err(Diagnostic::new(other.span(), "unsupported literal")),
        }
    }

    /// A literal with a type suffix is typed; without one it stays a constant.
    fn suffixed(&mut self, c: ConstVal, suffix: &str, span: Span) -> R<Val> {
        if suffix.is_empty() || suffix == "usize" {
            return Ok(Val::Const(c));
        }
        let ty = ScalarType::from_name(suffix).ok_or_else(|| {
            Diagnostic::new(span, format!("unsupported literal suffix `{suffix}`"))
        })?;
        Ok(Val::Ir(self.constant(c.cast(ty), Type::scalar(ty))))
    }

    fn lower_path(&mut self, p: &syn::ExprPath) -> R<Val> {
        let span = p.span();
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            if let Some(v) = self.lookup(&name) {
                return Ok(v.clone());
            }
            if name == "None" {
                return Err(
                    Diagnostic::new(span, "`None` is only valid inside an index")
                        .with_hint("write `x[(.., None)]` to insert a dimension"),
                );
            }
            if ScalarType::from_name(&name).is_some() {
                return Err(
                    Diagnostic::new(span, format!("the type `{name}` is not a value")).with_hint(
                        "type names are dtype arguments, e.g. `zeros([N], f32)` or `x.to(f16)`",
                    ),
                );
            }
            return Err(Diagnostic::new(span, format!("unknown name `{name}`"))
                .with_hint("declare it with `let`, or as a kernel parameter or const generic"));
        }
        let segments: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if let [ty, name] = segments.as_slice() {
            if let Some(c) = type_constant(ty, name) {
                return Ok(Val::Const(c));
            }
        }
        Err(Diagnostic::new(span, format!("unknown path `{}`", segments.join("::")))
            .with_hint("constants available: `f32::INFINITY`, `f32::NEG_INFINITY`, `f32::NAN`, `f32::MAX`, `i32::MAX`, ..."))
    }

    fn lower_unary(&mut self, u: &'a syn::ExprUnary) -> R<Val> {
        let span = u.op.span();
        let v = self.lower_expr(&u.expr)?;
        let op = match u.op {
            syn::UnOp::Neg(_) => UnaryOp::Neg,
            syn::UnOp::Not(_) => UnaryOp::Not,
            _ => {
                return Err(
                    Diagnostic::new(span, "dereferencing is not supported in kernels")
                        .with_hint("pointers are read with `load(ptr)`"),
                )
            }
        };
        match v {
            Val::Const(c) => {
                let folded = match (op, c) {
                    (UnaryOp::Neg, ConstVal::Int(i)) => i.checked_neg().map(ConstVal::Int),
                    (UnaryOp::Neg, ConstVal::Float(f)) => Some(ConstVal::Float(-f)),
                    (UnaryOp::Not, ConstVal::Bool(b)) => Some(ConstVal::Bool(!b)),
                    (UnaryOp::Not, ConstVal::Int(i)) => Some(ConstVal::Int(!i)),
                    _ => None,
                };
                folded.map(Val::Const).ok_or_else(|| {
                    Diagnostic::new(span, "this operator does not apply to this constant")
                })
            }
            other => {
                let id = self.materialize(&other, span)?;
                let s = self.scalar_elem(id, span, "the operand")?;
                let ok = match op {
                    UnaryOp::Neg => s != ScalarType::Bool,
                    _ => !s.is_float(),
                };
                if !ok {
                    return Err(Diagnostic::new(
                        span,
                        format!("this operator does not apply to `{s}`"),
                    )
                    .with_hint("`-` applies to numbers; `!` to bools and integers"));
                }
                Ok(Val::Ir(self.unary(op, id)))
            }
        }
    }

    pub(super) fn unary(&mut self, op: UnaryOp, value: ValueId) -> ValueId {
        let ty = self.ty(value);
        self.b.push1(OpKind::Unary { op, value }, ty)
    }

    /// A binary operator on two values, with promotion and broadcasting.
    pub(super) fn binary(&mut self, op: &syn::BinOp, a: Val, b: Val, span: Span) -> R<Val> {
        let kind = bin_kind(op).ok_or_else(|| Diagnostic::new(span, "unsupported operator"))?;
        if let (Val::Const(x), Val::Const(y)) = (&a, &b) {
            let folded = match &kind {
                BinKind::Arith(o) | BinKind::Logic(o) => fold_binary(*o, *x, *y),
                BinKind::Cmp(p) => fold_compare(*p, *x, *y).map(ConstVal::Bool),
            };
            return folded.map(Val::Const).ok_or_else(|| {
                Diagnostic::new(span, "this operation on constants is invalid (division by zero, overflow, or wrong operand types)")
            });
        }
        if let Some(known) = self.absorbed(&kind, &a, &b) {
            return Ok(Val::Const(known));
        }
        match kind {
            BinKind::Arith(o @ (BinaryOp::Add | BinaryOp::Sub))
                if self.is_ptr(&a) || self.is_ptr(&b) =>
            {
                self.pointer_arith(o, a, b, span)
            }
            BinKind::Arith(o) => {
                let ids = self.unify(&[&a, &b], span)?;
                let s = self.scalar_elem(ids[0], span, "an operand")?;
                let valid = match o {
                    BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => !s.is_float(),
                    BinaryOp::Shl | BinaryOp::Shr | BinaryOp::MulHi => s.is_int(),
                    BinaryOp::DivFull => s == ScalarType::F32,
                    _ => s != ScalarType::Bool,
                };
                if !valid {
                    return Err(Diagnostic::new(span, format!("this operator does not apply to `{s}` values"))
                        .with_hint("bit operations need integers (or bools for `& | ^`); arithmetic needs numbers"));
                }
                Ok(Val::Ir(self.binary_op(o, ids[0], ids[1])))
            }
            BinKind::Logic(o) => {
                let ids = self.unify(&[&a, &b], span)?;
                if self.scalar_elem(ids[0], span, "an operand")? != ScalarType::Bool {
                    return Err(Diagnostic::new(span, "`&&` and `||` need `bool` operands")
                        .with_hint("compare first, e.g. `(x > 0) && (y > 0)`"));
                }
                Ok(Val::Ir(self.binary_op(o, ids[0], ids[1])))
            }
            BinKind::Cmp(pred) => {
                let ids = self.unify(&[&a, &b], span)?;
                let ty = self.ty(ids[0]).with_elem(Elem::Scalar(ScalarType::Bool));
                Ok(Val::Ir(self.b.push1(
                    OpKind::Compare {
                        pred,
                        lhs: ids[0],
                        rhs: ids[1],
                    },
                    ty,
                )))
            }
        }
    }

    /// `false & c` and `true | c` (either order, `&&`/`||` too) for a
    /// scalar `bool` known only at run time: the constant, so that
    /// `if CAUSAL & (row < n) { .. }` leaves nothing behind when `CAUSAL` is
    /// false, as `if CAUSAL { .. }` does (the branch may hold code that
    /// only compiles for some configurations). `c` is already evaluated,
    /// so dropping it drops no effect.
    fn absorbed(&self, kind: &BinKind, a: &Val, b: &Val) -> Option<ConstVal> {
        let (BinKind::Arith(op) | BinKind::Logic(op)) = kind else {
            return None;
        };
        let absorbing = match op {
            BinaryOp::And => false,
            BinaryOp::Or => true,
            _ => return None,
        };
        let scalar_bool = |v: &Val| matches!(v, Val::Ir(id) if *self.b.type_of(*id) == Type::scalar(ScalarType::Bool));
        let known = |v: &Val| matches!(v, Val::Const(ConstVal::Bool(c)) if *c == absorbing);
        ((known(a) && scalar_bool(b)) || (scalar_bool(a) && known(b)))
            .then_some(ConstVal::Bool(absorbing))
    }

    pub(super) fn binary_op(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.ty(lhs);
        self.b.push1(OpKind::Binary { op, lhs, rhs }, ty)
    }

    fn is_ptr(&self, v: &Val) -> bool {
        matches!(v, Val::Ir(id) if matches!(self.b.type_of(*id).elem(), Elem::Ptr(..)))
    }

    /// `ptr + offset`, `offset + ptr`, `ptr - offset`.
    fn pointer_arith(&mut self, op: BinaryOp, a: Val, b: Val, span: Span) -> R<Val> {
        let (a_ptr, b_ptr) = (self.is_ptr(&a), self.is_ptr(&b));
        let (ptr, offset) = match (a, b) {
            (Val::Ir(p), off) if a_ptr && !b_ptr => (p, off),
            (off, Val::Ir(p)) if b_ptr && !a_ptr && op == BinaryOp::Add => (p, off),
            _ if a_ptr && b_ptr => {
                return Err(
                    Diagnostic::new(span, "two pointers cannot be added or subtracted")
                        .with_hint("offset a pointer by an integer: `ptr + offs`"),
                )
            }
            _ => {
                return Err(Diagnostic::new(span, "unsupported pointer arithmetic")
                    .with_hint("write `ptr + offset` or `ptr - offset` with an integer offset"))
            }
        };
        let offset = match (op, offset) {
            (BinaryOp::Sub, Val::Const(c)) => Val::Const(
                fold_binary(BinaryOp::Sub, ConstVal::Int(0), c)
                    .ok_or_else(|| Diagnostic::new(span, "a pointer offset must be an integer"))?,
            ),
            (BinaryOp::Sub, other) => {
                let id = self.materialize(&other, span)?;
                Val::Ir(self.unary(UnaryOp::Neg, id))
            }
            (_, other) => other,
        };
        let off = match offset {
            Val::Const(ConstVal::Int(i)) => {
                self.constant(ConstVal::Int(i), Type::scalar(ScalarType::I32))
            }
            other => self.materialize(&other, span)?,
        };
        if !self.ty(off).elem().scalar().is_some_and(|s| s.is_int()) {
            return Err(Diagnostic::new(
                span,
                format!(
                    "a pointer offset must be an integer, found `{}`",
                    self.ty(off).elem()
                ),
            )
            .with_hint("cast it: `offs.to(i32)`"));
        }
        let shape =
            super::typing::broadcast_shapes(self.ty(ptr).shape(), self.ty(off).shape(), span)?;
        let ptr = self.broadcast_to(ptr, &shape, span)?;
        let off = self.broadcast_to(off, &shape, span)?;
        let ty = self.ty(ptr);
        Ok(Val::Ir(
            self.b.push1(OpKind::AddPtr { ptr, offset: off }, ty),
        ))
    }

    /// `x[(.., None)]`-style indexing: `..` keeps a dimension, `None` inserts one.
    fn lower_index(&mut self, ix: &'a syn::ExprIndex) -> R<Val> {
        let base = self.lower_expr(&ix.expr)?;
        let id = self.materialize(&base, ix.expr.span())?;
        let items: Vec<&Expr> = match &*ix.index {
            Expr::Tuple(t) => t.elems.iter().collect(),
            Expr::Paren(p) => vec![&*p.expr],
            other => vec![other],
        };
        let rank = self.ty(id).rank();
        let mut out = id;
        // `dim`: the dimension of `out` the next item applies to;
        // `consumed`: how many of the indexed tensor's dimensions the items
        // so far kept (`..`) or took away (an integer).
        let mut dim = 0;
        let mut consumed = 0;
        for item in items {
            let is_new_axis = matches!(item, Expr::Path(p) if p.path.is_ident("None"));
            if !is_new_axis {
                consumed += 1;
                if consumed > rank {
                    return Err(Diagnostic::new(
                        item.span(),
                        format!("too many indices for a tensor of rank {rank}"),
                    )
                    .with_hint(
                        "give at most one `..` or integer per dimension (`None` adds one)",
                    ));
                }
            }
            match item {
                Expr::Range(r) if r.start.is_none() && r.end.is_none() => dim += 1,
                _ if is_new_axis => {
                    let ty = self.ty(out);
                    let mut shape = ty.shape().to_vec();
                    shape.insert(dim, 1);
                    out = self.b.push1(
                        OpKind::ExpandDims {
                            value: out,
                            axis: dim,
                        },
                        ty.with_shape(shape),
                    );
                    dim += 1;
                }
                Expr::Range(r) => {
                    return Err(Diagnostic::new(
                        r.span(),
                        "only a full `..` range is supported in an index",
                    )
                    .with_hint("take a sub-tile with `x.extract_tile([i, j], [h, w])`"))
                }
                other => {
                    let index = self.lower_expr(other)?;
                    out = self.index_along(out, dim, index, other.span())?;
                }
            }
        }
        Ok(Val::Ir(out))
    }

    /// A dtype argument: a scalar type name such as `f32`, or TLX's
    /// `dtype_of(x)`: the element type of a variable (a tensor, pointer,
    /// buffer or descriptor).
    pub(super) fn dtype_of_expr(&self, e: &Expr) -> R<ScalarType> {
        if let Expr::Call(call) = e {
            let is_dtype_of = matches!(&*call.func, Expr::Path(p) if p.path.is_ident("dtype_of"));
            if let (true, Some(Expr::Path(arg))) = (is_dtype_of, call.args.first()) {
                let name = arg
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let elem = match self.lookup(&name) {
                    Some(Val::Ir(v)) => {
                        let t = self.ty(*v);
                        t.elem().scalar().or_else(|| t.elem().pointee())
                    }
                    _ => None,
                };
                return elem.ok_or_else(|| {
                    Diagnostic::new(
                        arg.span(),
                        format!("`dtype_of({name})`: `{name}` is not a value with an element type"),
                    )
                    .with_hint("pass a tensor, pointer, buffer or descriptor variable")
                });
            }
        }
        if let Expr::Path(p) = e {
            if let Some(s) = p
                .path
                .get_ident()
                .and_then(|i| ScalarType::from_name(&i.to_string()))
            {
                return Ok(s);
            }
        }
        Err(Diagnostic::new(e.span(), "expected a type name")
            .with_hint("one of bool i8 u8 i32 u32 i64 f16 bf16 f32 f8e4m3 f8e5m2"))
    }

    pub(super) fn dtype_of_type(&self, t: &syn::Type) -> R<ScalarType> {
        if let syn::Type::Path(p) = t {
            if let Some(s) = p
                .path
                .get_ident()
                .and_then(|i| ScalarType::from_name(&i.to_string()))
            {
                return Ok(s);
            }
        }
        Err(Diagnostic::new(t.span(), "expected a scalar type")
            .with_hint("one of bool i8 u8 i32 u32 i64 f16 bf16 f32 f8e4m3 f8e5m2"))
    }

    /// Evaluates an expression that must be a compile-time constant; `what`
    /// names the place for the message ("a shape", "an axis").
    pub(super) fn eval_const(&self, e: &Expr, what: &str) -> R<ConstVal> {
        let span = e.span();
        match e {
            Expr::Lit(l) => match &l.lit {
                syn::Lit::Int(i) => i.base10_parse().map(ConstVal::Int).map_err(|x| Diagnostic::new(span, x.to_string())),
                syn::Lit::Float(f) => f.base10_parse().map(ConstVal::Float).map_err(|x| Diagnostic::new(span, x.to_string())),
                syn::Lit::Bool(b) => Ok(ConstVal::Bool(b.value)),
                _ => Err(Diagnostic::new(span, format!("{what} must be a number"))),
            },
            Expr::Path(p) => {
                let name = p.path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>();
                match (self.lookup(&name.join("::")), name.as_slice()) {
                    (Some(Val::Const(c)), _) => Ok(*c),
                    (Some(_), _) => Err(Diagnostic::new(
                        span,
                        format!("`{}` is a run-time value; {what} must be a compile-time constant", name.join("::")),
                    )
                    .with_hint("use a const generic, e.g. `const BLOCK: usize`")),
                    (None, [ty, n]) if type_constant(ty, n).is_some() => type_constant(ty, n).ok_or_else(|| Diagnostic::new(span, "unknown constant")),
                    (None, _) => Err(Diagnostic::new(span, format!("unknown name `{}`", name.join("::")))
                        .with_hint("declare it as a const generic, e.g. `const BLOCK: usize`")),
                }
            }
            Expr::Paren(p) => self.eval_const(&p.expr, what),
            Expr::Group(g) => self.eval_const(&g.expr, what),
            Expr::Unary(u) => {
                let v = self.eval_const(&u.expr, what)?;
                match (&u.op, v) {
                    (syn::UnOp::Neg(_), ConstVal::Int(i)) => Ok(ConstVal::Int(-i)),
                    (syn::UnOp::Neg(_), ConstVal::Float(f)) => Ok(ConstVal::Float(-f)),
                    (syn::UnOp::Not(_), ConstVal::Bool(b)) => Ok(ConstVal::Bool(!b)),
                    _ => Err(Diagnostic::new(span, format!("unsupported operator in {what}"))),
                }
            }
            Expr::Binary(b) => {
                let x = self.eval_const(&b.left, what)?;
                let y = self.eval_const(&b.right, what)?;
                let folded = match bin_kind(&b.op) {
                    Some(BinKind::Arith(o) | BinKind::Logic(o)) if !is_compound_assign(&b.op) => fold_binary(o, x, y),
                    Some(BinKind::Cmp(p)) => fold_compare(p, x, y).map(ConstVal::Bool),
                    _ => None,
                };
                folded.ok_or_else(|| Diagnostic::new(span, format!("cannot evaluate {what} at compile time (invalid operation or division by zero)")))
            }
            Expr::Cast(c) => {
                let v = self.eval_const(&c.expr, what)?;
                if is_usize(&c.ty) {
                    return Ok(v.cast(ScalarType::I64));
                }
                Ok(v.cast(self.dtype_of_type(&c.ty)?))
            }
            Expr::Call(call) => {
                let name = match &*call.func {
                    Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                let op = match name.as_deref() {
                    Some("min") => BinaryOp::Min,
                    Some("max") => BinaryOp::Max,
                    _ => return Err(Diagnostic::new(span, format!("{what} must be a compile-time constant"))
                        .with_hint("constants are built from literals, const generics, arithmetic, `min`, `max` and `as`")),
                };
                let args: Vec<&Expr> = call.args.iter().collect();
                let [x, y] = args.as_slice() else {
                    return Err(Diagnostic::new(span, "`min`/`max` of constants take two arguments"));
                };
                let (x, y) = (self.eval_const(x, what)?, self.eval_const(y, what)?);
                fold_binary(op, x, y).ok_or_else(|| Diagnostic::new(span, "invalid constant operands"))
            }
            _ => Err(Diagnostic::new(span, format!("{what} must be a compile-time constant"))
                .with_hint("constants are built from literals, const generics, arithmetic, `min`, `max` and `as`")),
        }
    }

    pub(super) fn const_int(&self, e: &Expr, what: &str) -> R<i64> {
        match self.eval_const(e, what)? {
            ConstVal::Int(i) => Ok(i),
            ConstVal::Bool(b) => Ok(i64::from(b)),
            ConstVal::Float(_) => Err(Diagnostic::new(
                e.span(),
                format!("{what} must be an integer"),
            )),
        }
    }

    /// A block shape `[d0, d1, ...]` of compile-time powers of two.
    pub(super) fn shape_arg(&self, e: &Expr) -> R<Vec<usize>> {
        let Expr::Array(a) = e else {
            return Err(Diagnostic::new(
                e.span(),
                "expected a shape like `[BLOCK_M, BLOCK_N]`",
            ));
        };
        a.elems
            .iter()
            .map(|d| {
                let n = self.const_int(d, "a shape")?;
                if !is_power_of_two(n) {
                    return Err(Diagnostic::new(
                        d.span(),
                        format!("block dimension {n} is not a power of two"),
                    )
                    .with_hint(
                        "block shapes must be powers of two; mask the extra lanes instead",
                    ));
                }
                Ok(n as usize)
            })
            .collect::<R<Vec<usize>>>()
            .and_then(|shape| check_tile_size(&shape, e.span()).map(|()| shape))
    }
}

fn is_usize(t: &syn::Type) -> bool {
    matches!(t, syn::Type::Path(p) if p.path.is_ident("usize"))
}

fn assign_target(e: &Expr) -> R<String> {
    match e {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()).ok_or_else(|| Diagnostic::new(e.span(), "cannot assign to a path")),
        Expr::Index(_) => Err(Diagnostic::new(e.span(), "cannot assign to an element of a tensor")
            .with_hint("write memory with `store(ptr, value)`, or replace a tile with `x.insert_tile(tile, [i, j])`")),
        other => Err(Diagnostic::new(other.span(), "only variables can be assigned")
            .with_hint("write `x = ...` with `x` declared by `let mut x`")),
    }
}

/// `T` of a written `Ptr<T>` type (`addresses as Ptr<bf16>`), if it is one.
fn pointer_type(ty: &syn::Type) -> Option<ScalarType> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Ptr" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(syn::Type::Path(inner)) => {
            ScalarType::from_name(&inner.path.get_ident()?.to_string())
        }
        _ => None,
    }
}

impl Lowerer<'_> {
    /// `addresses as Ptr<T>`: `i64` addresses (a table a kernel loads, as
    /// Triton's grouped GEMM loads its operands' pointers) as pointers.
    fn address_to_pointer(&mut self, v: Val, pointee: ScalarType, span: Span) -> R<Val> {
        let v = self.materialize(&v, span)?;
        let ty = self.ty(v);
        if ty.elem() != Elem::Scalar(ScalarType::I64) {
            return Err(Diagnostic::new(span, format!("only i64 addresses become pointers, not {ty}"))
                .with_hint("load the addresses from a `Ptr<i64>` table (`Buffer::kernel_address` gives a buffer's)"));
        }
        Ok(Val::Ir(self.b.push1(
            OpKind::Cast(v),
            ty.with_elem(Elem::global_ptr(pointee)),
        )))
    }
}
