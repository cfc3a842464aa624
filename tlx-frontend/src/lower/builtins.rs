//! The builtin functions of the language (see docs/language.md), except the
//! memory ones: indices, constants, casts, math, shape ops, reductions,
//! scans, tiles and `dot`.

use super::calls::{choice, str_arg, CallArgs};
use super::expr::is_power_of_two;
use super::typing::check_tile_size;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{
    AtomicOp, DotPrecision, Elem, OpKind, ReduceKind, ScalarType, Type, UnaryOp, ValueId,
};

const PRECISION: &[(&str, DotPrecision)] =
    &[("tf32", DotPrecision::Tf32), ("ieee", DotPrecision::Ieee)];

fn unary_math(name: &str) -> Option<UnaryOp> {
    Some(match name {
        "exp" => UnaryOp::Exp,
        "exp2" => UnaryOp::Exp2,
        "log" => UnaryOp::Log,
        "log2" => UnaryOp::Log2,
        "sqrt" => UnaryOp::Sqrt,
        "rsqrt" => UnaryOp::Rsqrt,
        "sin" => UnaryOp::Sin,
        "cos" => UnaryOp::Cos,
        "abs" => UnaryOp::Abs,
        "floor" => UnaryOp::Floor,
        "ceil" => UnaryOp::Ceil,
        "tanh" => UnaryOp::Tanh,
        "round" => UnaryOp::Round,
        "trunc" => UnaryOp::Trunc,
        _ => return None,
    })
}

fn reduce_kind(name: &str) -> Option<ReduceKind> {
    Some(match name {
        "sum" => ReduceKind::Sum,
        "max" => ReduceKind::Max,
        "min" => ReduceKind::Min,
        "argmax" => ReduceKind::Argmax,
        "argmin" => ReduceKind::Argmin,
        _ => return None,
    })
}

fn atomic_op(name: &str) -> Option<AtomicOp> {
    Some(match name {
        "atomic_add" => AtomicOp::Add,
        "atomic_max" => AtomicOp::Max,
        "atomic_min" => AtomicOp::Min,
        "atomic_and" => AtomicOp::And,
        "atomic_or" => AtomicOp::Or,
        "atomic_xor" => AtomicOp::Xor,
        "atomic_xchg" => AtomicOp::Exchange,
        _ => return None,
    })
}

impl<'a> Lowerer<'a> {
    pub(super) fn builtin(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let name = args.name.as_str();
        if let Some(prim) = tlx_core::ir::Prim::from_mnemonic(name) {
            return self.prim_call(prim, args);
        }
        if let Some(op) = unary_math(name) {
            let a = args.bind(&["x"], 1)?;
            return self.math(name, op, a[0], args.span);
        }
        if super::composite::FUNCTIONS.contains(&name) {
            return self.composite_math(args);
        }
        if super::warp::FUNCTIONS.contains(&name) {
            return self.warp_function(args);
        }
        if super::random::FUNCTIONS.contains(&name) {
            return self.random(args);
        }
        if super::mesh::FUNCTIONS.contains(&name) {
            return self.mesh_function(args);
        }
        if super::clc::FUNCTIONS.contains(&name) {
            return self.clc_function(args);
        }
        if name == "mean" {
            let a = args.bind(&["x", "axis", "keep_dims"], 1)?;
            return self.mean(&a, args.span);
        }
        if let Some(kind) = reduce_kind(name) {
            let a = args.bind(&["x", "axis", "keep_dims"], 1)?;
            return self.reduce(kind, &a, args.span);
        }
        if let Some(op) = atomic_op(name) {
            let a = args.bind(&["ptr", "val", "mask", "sem", "scope"], 2)?;
            return self.atomic_rmw(name, op, &a, args.span);
        }
        match name {
            "program_id" | "num_programs" => {
                let a = args.bind(&["axis"], 1)?;
                let axis = self.expr_arg(a[0])?;
                let axis_value = self.const_int(axis, "an axis")?;
                if !(0..3).contains(&axis_value) {
                    return Err(Diagnostic::new(axis.span(), format!("grid axis {axis_value} is out of range"))
                        .with_hint("the grid has axes 0, 1 and 2"));
                }
                let axis = axis_value as u8;
                let kind = if name == "program_id" { OpKind::ProgramId { axis } } else { OpKind::NumPrograms { axis } };
                Ok(Val::Ir(self.b.push1(kind, Type::scalar(ScalarType::I32))))
            }
            "multiple_of" => {
                let a = args.bind(&["x", "factor"], 2)?;
                let x = self.ir_arg(a[0])?;
                let factor_expr = self.expr_arg(a[1])?;
                let factor = self.const_int(factor_expr, "a `multiple_of` factor")?;
                if !(1..=1 << 20).contains(&factor) || !is_power_of_two(factor) {
                    return Err(Diagnostic::new(factor_expr.span(), format!("`multiple_of` factor {factor} is not a power of two up to 2^20"))
                        .with_hint("alignment facts are powers of two, e.g. `multiple_of(stride, 8)`"));
                }
                let ty = self.ty(x).clone();
                if !ty.is_scalar() || !ty.elem().is_integral() {
                    return Err(Diagnostic::new(args.span, format!("`multiple_of` takes an integer or pointer scalar, not {ty}"))
                        .with_hint("promise alignment on the scalar (a stride, a base pointer) the offsets are built from"));
                }
                Ok(Val::Ir(self.b.push1(OpKind::MultipleOf { value: x, factor: factor as u32 }, ty)))
            }
            // TLX's `size_of(dtype)`: bytes per element, a compile-time integer
            // (`barrier_expect_bytes(bar, size_of(dtype_of(desc)) * BM * BK)`).
            "size_of" => {
                let a = args.bind(&["dtype"], 1)?;
                let dtype = self.dtype_of_expr(self.expr_arg(a[0])?)?;
                Ok(Val::Const(ConstVal::Int(dtype.size_bytes() as i64)))
            }
            "cluster_cta_rank" => {
                args.bind(&[], 0)?;
                Ok(Val::Ir(self.b.push1(OpKind::ClusterCtaRank, Type::scalar(ScalarType::I32))))
            }
            "async_task_replica_id" => {
                args.bind(&[], 0)?;
                if self.task.task_outer_scopes.is_none() {
                    return Err(Diagnostic::new(args.span, "`async_task_replica_id()` outside a task")
                        .with_hint("call it inside a `task(...) { ... }` of `async_tasks!`, where each replica gets its own id"));
                }
                Ok(Val::Ir(self.b.push1(OpKind::AsyncTaskReplicaId, Type::scalar(ScalarType::I32))))
            }
            "cluster_num_ctas" => {
                args.bind(&[], 0)?;
                Ok(Val::Const(ConstVal::Int(i64::from(self.b.options().cluster_size()))))
            }
            "cluster_barrier" => {
                args.bind(&[], 0)?;
                if self.task.task_outer_scopes.is_some() {
                    return Err(Diagnostic::new(args.span, "`cluster_barrier()` inside a task")
                        .with_hint("every thread of every program of the cluster must arrive, and a task has only some of them: call it before or after `async_tasks!`"));
                }
                // The op carries the call's own location, so that the cluster
                // check can point at this call.
                let loc = self.b.loc();
                let call = super::loc_of(args.span);
                self.b.set_loc(call);
                self.b.push(OpKind::ClusterBarrier, vec![]);
                self.b.set_loc(loc);
                self.cluster_barriers.push((call, args.span));
                Ok(Val::Unit)
            }
            "arange" => {
                let a = args.bind(&["start", "end"], 2)?;
                let (s, e) = (self.expr_arg(a[0])?, self.expr_arg(a[1])?);
                let start = self.const_int(s, "an `arange` bound")?;
                let end = self.const_int(e, "an `arange` bound")?;
                if !is_power_of_two(end - start) {
                    return Err(Diagnostic::new(args.span, format!("`arange({start}, {end})` has {} elements, not a power of two", end - start))
                        .with_hint("block shapes must be powers of two; mask the extra lanes instead"));
                }
                let shape = vec![(end - start) as usize];
                check_tile_size(&shape, args.span)?;
                let ty = Type::tensor(Elem::Scalar(ScalarType::I32), shape);
                Ok(Val::Ir(self.b.push1(OpKind::Arange { start, end }, ty)))
            }
            "zeros" => {
                let a = args.bind(&["shape", "dtype"], 2)?;
                let shape = self.shape_arg(self.expr_arg(a[0])?)?;
                let dtype = self.dtype_of_expr(self.expr_arg(a[1])?)?;
                let ty = Type::tensor(Elem::Scalar(dtype), shape);
                Ok(Val::Ir(self.constant(ConstVal::Int(0), ty)))
            }
            "full" => {
                let a = args.bind(&["shape", "value", "dtype"], 3)?;
                let shape = self.shape_arg(self.expr_arg(a[0])?)?;
                let dtype = self.dtype_of_expr(self.expr_arg(a[2])?)?;
                let value_expr = self.expr_arg(a[1])?;
                match self.lower_expr(value_expr)? {
                    Val::Const(c) => Ok(Val::Ir(self.constant(c, Type::tensor(Elem::Scalar(dtype), shape)))),
                    other => {
                        let id = self.materialize(&other, value_expr.span())?;
                        if !self.ty(id).is_scalar() {
                            return Err(Diagnostic::new(value_expr.span(), "the value of `full` must be a scalar"));
                        }
                        let id = self.cast(id, dtype, value_expr.span())?;
                        Ok(Val::Ir(self.broadcast_to(id, &shape, value_expr.span())?))
                    }
                }
            }
            "to" | "bitcast" => {
                let a = args.bind(&["x", "dtype"], 2)?;
                let dtype = self.dtype_of_expr(self.expr_arg(a[1])?)?;
                let x_expr = self.expr_arg(a[0])?;
                let x = self.lower_expr(x_expr)?;
                if name == "to" {
                    return self.cast_val(x, dtype, args.span);
                }
                let id = self.materialize(&x, x_expr.span())?;
                let from = self.scalar_elem(id, x_expr.span(), "a bitcast operand")?;
                if from == ScalarType::Bool || dtype == ScalarType::Bool {
                    return Err(Diagnostic::new(args.span, format!("cannot bitcast `{from}` to `{dtype}`: a `bool` has no bit pattern of its own"))
                        .with_hint("convert with `.to(...)` (`x != 0` makes a bool, `b.to(u8)` a number)"));
                }
                if from.size_bytes() != dtype.size_bytes() {
                    return Err(Diagnostic::new(args.span, format!("cannot bitcast `{from}` to `{dtype}`: sizes differ"))
                        .with_hint("bitcast needs types of the same size; use `.to(...)` to convert values"));
                }
                let ty = self.ty(id).with_elem(Elem::Scalar(dtype));
                Ok(Val::Ir(self.b.push1(OpKind::Bitcast(id), ty)))
            }
            "load" => self.load(args),
            "store" => self.store(args),
            "make_block_ptr" => self.make_block_ptr(args),
            "advance" => self.advance(args),
            "expand_dims" => {
                let a = args.bind(&["x", "axis"], 2)?;
                let x = self.ir_arg(a[0])?;
                let rank = self.ty(x).rank();
                let axis = self.axis_arg(a[1], rank + 1)?;
                let ty = self.ty(x);
                let mut shape = ty.shape().to_vec();
                shape.insert(axis, 1);
                Ok(Val::Ir(self.b.push1(OpKind::ExpandDims { value: x, axis }, ty.with_shape(shape))))
            }
            "broadcast_to" => {
                let a = args.bind(&["x", "shape"], 2)?;
                let x = self.ir_arg(a[0])?;
                let shape = self.shape_arg(self.expr_arg(a[1])?)?;
                Ok(Val::Ir(self.broadcast_to(x, &shape, args.span)?))
            }
            "reshape" => {
                let a = args.bind(&["x", "shape"], 2)?;
                let x = self.ir_arg(a[0])?;
                let shape = self.shape_arg(self.expr_arg(a[1])?)?;
                let ty = self.ty(x);
                if shape.iter().product::<usize>() != ty.numel() {
                    return Err(Diagnostic::new(args.span, format!("cannot reshape {:?} to {:?}: element counts differ", ty.shape(), shape)));
                }
                Ok(Val::Ir(self.b.push1(OpKind::Reshape(x), ty.with_shape(shape))))
            }
            "trans" | "permute" => {
                let a = args.bind(&["x", "dims"], if name == "permute" { 2 } else { 1 })?;
                let x = self.ir_arg(a[0])?;
                let ty = self.ty(x);
                let perm = match a[1] {
                    None if ty.rank() == 2 => vec![1, 0],
                    None => return Err(Diagnostic::new(args.span, "`trans(x)` without a permutation needs a 2-D tensor")
                        .with_hint("give the permutation: `trans(x, [2, 0, 1])`")),
                    Some(e) => self.index_list(e, "a permutation")?,
                };
                let mut sorted = perm.clone();
                sorted.sort_unstable();
                if sorted != (0..ty.rank()).collect::<Vec<_>>() {
                    return Err(Diagnostic::new(args.span, format!("{perm:?} is not a permutation of the {} dimensions", ty.rank())));
                }
                let shape = perm.iter().map(|&p| ty.shape()[p]).collect();
                Ok(Val::Ir(self.b.push1(OpKind::Trans { value: x, perm }, ty.with_shape(shape))))
            }
            "clamp" => {
                // `minimum(maximum(x, lo), hi)`, as Triton's `clamp`.
                let a = args.bind(&["x", "min", "max"], 3)?;
                let x = self.val_arg(a[0])?;
                let (lo, hi) = (self.val_arg(a[1])?, self.val_arg(a[2])?);
                let at_least = self.extremum(tlx_core::ir::BinaryOp::Max, x, lo, args.span)?;
                self.extremum(tlx_core::ir::BinaryOp::Min, at_least, hi, args.span)
            }
            "static_assert" => {
                // Triton's `tl.static_assert`: a failed one stops the build here.
                let a = args.bind(&["cond", "msg"], 1)?;
                let cond = self.expr_arg(a[0])?;
                let ConstVal::Bool(holds) = self.eval_const(cond, "a `static_assert` condition")? else {
                    return Err(Diagnostic::new(cond.span(), "`static_assert` needs a `bool` condition")
                        .with_hint("compare constants, e.g. `static_assert(BLOCK % 16 == 0, \"...\")`"));
                };
                if !holds {
                    let message = match a[1] {
                        Some(m) => str_arg(m)?,
                        None => "a `static_assert` failed".to_string(),
                    };
                    return Err(Diagnostic::new(cond.span(), message)
                        .with_hint("this configuration breaks the kernel's own requirement; change the constants it is compiled with"));
                }
                Ok(Val::Unit)
            }
            "fdiv" | "div_rn" => {
                // Triton's `fdiv(x, y, ieee_rounding=False)`: the GPU's fast
                // division (`div.full.f32`, within 2 ulp); `div_rn` and
                // `ieee_rounding = true` round correctly, as `/` does.
                // 16-bit floats divide in f32, rounded once at the end.
                let a = if name == "fdiv" {
                    args.bind(&["x", "y", "ieee_rounding"], 2)?
                } else {
                    args.bind(&["x", "y"], 2)?
                };
                let (x, y) = (self.val_arg(a[0])?, self.val_arg(a[1])?);
                let elem = self.common_elem(&[&x, &y], args.span)?;
                if !elem.is_float() || matches!(elem, ScalarType::F8E4M3 | ScalarType::F8E5M2) {
                    return Err(Diagnostic::new(args.span, format!("`{name}` divides f32, f16 or bf16, not `{elem}`"))
                        .with_hint("integers divide with `/` (rounding toward zero); cast to f32 first for a float quotient"));
                }
                let ieee = self.const_bool_or(a.get(2).copied().flatten(), name == "div_rn")?;
                let ids = self.unify_as(&[&x, &y], ScalarType::F32, args.span)?;
                let op = if ieee { tlx_core::ir::BinaryOp::Div } else { tlx_core::ir::BinaryOp::DivFull };
                let quotient = self.binary_op(op, ids[0], ids[1]);
                Ok(Val::Ir(self.cast(quotient, elem, args.span)?))
            }
            "umulhi" => {
                // Triton's `umulhi`: the high half of the double-width product.
                let a = args.bind(&["x", "y"], 2)?;
                let (x, y) = (self.val_arg(a[0])?, self.val_arg(a[1])?);
                let elem = self.common_elem(&[&x, &y], args.span)?;
                if !elem.is_int() {
                    return Err(Diagnostic::new(args.span, format!("`umulhi` takes integers, found `{elem}`"))
                        .with_hint("`umulhi(x, y)` is the high 32 (or 64) bits of the integer product `x * y`"));
                }
                let ids = self.unify_as(&[&x, &y], elem, args.span)?;
                Ok(Val::Ir(self.binary_op(tlx_core::ir::BinaryOp::MulHi, ids[0], ids[1])))
            }
            "maximum" | "minimum" => {
                let a = args.bind(&["x", "y"], 2)?;
                let (x, y) = (self.val_arg(a[0])?, self.val_arg(a[1])?);
                let op = if name == "maximum" { tlx_core::ir::BinaryOp::Max } else { tlx_core::ir::BinaryOp::Min };
                self.extremum(op, x, y, args.span)
            }
            "fma" => {
                let a = args.bind(&["a", "b", "c"], 3)?;
                let vals = [self.val_arg(a[0])?, self.val_arg(a[1])?, self.val_arg(a[2])?];
                let elem = self.common_elem(&[&vals[0], &vals[1], &vals[2]], args.span)?;
                let elem = if elem.is_float() { elem } else { ScalarType::F32 };
                let ids = self.unify_as(&[&vals[0], &vals[1], &vals[2]], elem, args.span)?;
                let ty = self.ty(ids[0]);
                Ok(Val::Ir(self.b.push1(OpKind::Fma { a: ids[0], b: ids[1], c: ids[2] }, ty)))
            }
            "select" | "where" => {
                let a = args.bind(&["cond", "x", "y"], 3)?;
                let cond = self.val_arg(a[0])?;
                let (x, y) = (self.val_arg(a[1])?, self.val_arg(a[2])?);
                let cond_id = self.materialize(&cond, args.span)?;
                if self.scalar_elem(cond_id, args.span, "a condition")? != ScalarType::Bool {
                    return Err(Diagnostic::new(self.expr_arg(a[0])?.span(), "the condition of `select` must be `bool`")
                        .with_hint("compare to get a bool, e.g. `x > 0`"));
                }
                self.select_val(Val::Ir(cond_id), x, y, args.span)
            }
            "cdiv" => {
                let a = args.bind(&["x", "div"], 2)?;
                let (x, d) = (self.val_arg(a[0])?, self.val_arg(a[1])?);
                let add = syn::BinOp::Add(Default::default());
                let sub = syn::BinOp::Sub(Default::default());
                let div = syn::BinOp::Div(Default::default());
                let sum = self.binary(&add, x, d.clone(), args.span)?;
                let sum = self.binary(&sub, sum, Val::Const(ConstVal::Int(1)), args.span)?;
                self.binary(&div, sum, d, args.span)
            }
            "cumsum" | "cumprod" | "cummax" | "cummin" => self.scan(args),
            "reduce" => self.reduce_with_combine(args),
            "associative_scan" => self.scan_with_combine(args),
            "sort" | "topk" => self.sort_call(args),
            "join" | "interleave" => {
                // Triton's `join` (a new last dimension of 2) and `interleave`
                // (the same, merged into the last dimension).
                let a = args.bind(&["a", "b"], 2)?;
                let (x, y) = (self.val_arg(a[0])?, self.val_arg(a[1])?);
                let ids = self.unify(&[&x, &y], args.span)?;
                let ty = self.ty(ids[0]);
                if name == "interleave" && ty.rank() == 0 {
                    return Err(Diagnostic::new(args.span, "`interleave` takes tensors, not scalars")
                        .with_hint("`join(a, b)` pairs two scalars into a tensor of 2"));
                }
                let mut shape = ty.shape().to_vec();
                shape.push(2);
                let joined = self.b.push1(OpKind::Join { a: ids[0], b: ids[1] }, ty.with_shape(shape.clone()));
                if name == "join" {
                    return Ok(Val::Ir(joined));
                }
                shape.pop();
                if let Some(last) = shape.last_mut() {
                    *last *= 2;
                }
                Ok(Val::Ir(self.b.push1(OpKind::Reshape(joined), ty.with_shape(shape))))
            }
            "split" => {
                let a = args.bind(&["x"], 1)?;
                let x = self.ir_arg(a[0])?;
                let ty = self.ty(x);
                if ty.shape().last() != Some(&2) {
                    return Err(Diagnostic::new(args.span, format!("`split` needs a last dimension of size 2, found shape {:?}", ty.shape()))
                        .with_hint("reshape first, e.g. `reshape(x, [n / 2, 2])`, to split even and odd elements"));
                }
                let half = ty.with_shape(ty.shape()[..ty.rank() - 1].to_vec());
                let results = self.b.push(OpKind::Split(x), vec![half.clone(), half]);
                Ok(Val::Tuple(results.into_iter().map(Val::Ir).collect()))
            }
            "extract_tile" => {
                let a = args.bind(&["x", "index", "tile_shape"], 3)?;
                let x = self.ir_arg(a[0])?;
                let index = self.index_list(self.expr_arg(a[1])?, "a tile index")?;
                let tile = self.shape_arg(self.expr_arg(a[2])?)?;
                let ty = self.ty(x);
                self.check_tile(ty.shape(), &tile, &index, args.span)?;
                Ok(Val::Ir(self.b.push1(OpKind::ExtractTile { value: x, index }, ty.with_shape(tile))))
            }
            "insert_tile" => {
                let a = args.bind(&["x", "tile", "index"], 3)?;
                let x = self.ir_arg(a[0])?;
                let ty = self.ty(x);
                let tile_val = self.val_arg(a[1])?;
                let elem = self.scalar_elem(x, args.span, "the tensor")?;
                let tile = self.materialize(&tile_val, args.span)?;
                let tile = self.cast(tile, elem, args.span)?;
                let index = self.index_list(self.expr_arg(a[2])?, "a tile index")?;
                let tile_shape = self.ty(tile).shape().to_vec();
                self.check_tile(ty.shape(), &tile_shape, &index, args.span)?;
                Ok(Val::Ir(self.b.push1(OpKind::InsertTile { value: x, tile, index }, ty)))
            }
            "dot" => self.dot(args),
            "atomic_cas" => {
                let a = args.bind(&["ptr", "cmp", "val", "sem", "scope"], 3)?;
                self.atomic_cas(&a, args.span)
            }
            "device_print" => {
                let Some(first) = args.positional.first() else {
                    return Err(Diagnostic::new(args.span, "`device_print` needs a prefix string")
                        .with_hint("write `device_print(\"x =\", x)`"));
                };
                if let Some((_, _, span)) = args.keywords.first() {
                    return Err(Diagnostic::new(*span, "`device_print` takes no keyword arguments"));
                }
                let prefix = str_arg(first)?;
                let mut values = Vec::new();
                for e in &args.positional[1..] {
                    let v = self.lower_expr(e)?;
                    values.push(self.materialize(&v, e.span())?);
                }
                self.b.push(OpKind::Print { prefix, values }, vec![]);
                Ok(Val::Unit)
            }
            "device_assert" => {
                let a = args.bind(&["cond", "msg"], 1)?;
                let cond = self.ir_arg(a[0])?;
                if self.scalar_elem(cond, args.span, "a condition")? != ScalarType::Bool {
                    return Err(Diagnostic::new(args.span, "the condition of `device_assert` must be `bool`"));
                }
                let message = match a[1] { Some(e) => str_arg(e)?, None => String::new() };
                self.b.push(OpKind::Assert { cond, message }, vec![]);
                Ok(Val::Unit)
            }
            "dtype_of" => Err(Diagnostic::new(args.span, "`dtype_of(x)` names a type, not a value")
                .with_hint("write it where a dtype is taken: `zeros([64], dtype_of(x))`, `v.to(dtype_of(x))`, `size_of(dtype_of(x))`")),
            "range" | "static_range" => Err(Diagnostic::new(args.span, format!("`{name}` is only valid as a `for` loop's iterator"))
                .with_hint(format!("write `for i in {name}(a, b) {{ ... }}`"))),
            _ => Err(Diagnostic::new(args.span, format!("unknown function `{name}`"))
                .with_hint("see docs/language.md for the builtins, or declare a helper `fn` in the kernel body")),
        }
    }

    fn check_tile(&self, shape: &[usize], tile: &[usize], index: &[usize], span: Span) -> R<()> {
        if tile.len() != shape.len() || index.len() != shape.len() {
            return Err(Diagnostic::new(
                span,
                format!(
                    "a tile of a rank-{} tensor needs {} indices and {} tile dimensions",
                    shape.len(),
                    shape.len(),
                    shape.len()
                ),
            ));
        }
        for ((&d, &t), &i) in shape.iter().zip(tile).zip(index) {
            if t == 0 || d % t != 0 {
                return Err(Diagnostic::new(
                    span,
                    format!("tile shape {tile:?} does not divide shape {shape:?}"),
                ));
            }
            if i >= d / t {
                return Err(Diagnostic::new(
                    span,
                    format!("tile index {index:?} is out of range for tiles {tile:?} of {shape:?}"),
                ));
            }
        }
        Ok(())
    }

    /// `maximum` or `minimum` of two values (folded when both are constants).
    /// TLE's `cumsum` (exclusive prefix and total) and Triton's inclusive
    /// `cumprod`, `cummax` and `cummin`, all on one scan op.
    fn scan(&mut self, args: &CallArgs<'a>) -> R<Val> {
        use tlx_core::ir::BinaryOp;
        let name = args.name.as_str();
        let a = args.bind(&["x", "axis", "reverse"], 1)?;
        let x = self.ir_arg(a[0])?;
        let combine = match name {
            "cumsum" => BinaryOp::Add,
            "cumprod" => BinaryOp::Mul,
            "cummax" => BinaryOp::Max,
            _ => BinaryOp::Min,
        };
        let x = match combine {
            BinaryOp::Add | BinaryOp::Mul => self.widen_for_sum(x, args.span)?,
            _ => x,
        };
        if self.scalar_elem(x, args.span, "a scanned tensor")? == ScalarType::Bool {
            return Err(
                Diagnostic::new(args.span, format!("`{name}` needs numbers, not bools"))
                    .with_hint("convert first: `x.to(i32)`"),
            );
        }
        let ty = self.ty(x);
        if ty.rank() == 0 {
            return Err(Diagnostic::new(
                args.span,
                format!("`{name}` of a scalar: it scans a tensor along an axis"),
            )
            .with_hint("scan a tensor, e.g. `cumsum(x, axis = 0)`"));
        }
        let axis = match a[1] {
            Some(_) => self.axis_arg(a[1], ty.rank())?,
            None => 0,
        };
        let reverse = self.const_bool_or(a[2], false)?;
        let mut total_shape = ty.shape().to_vec();
        total_shape.remove(axis);
        let results = self.b.push(
            OpKind::Scan {
                value: x,
                axis,
                reverse,
                combine,
            },
            vec![ty.clone(), ty.with_shape(total_shape)],
        );
        if combine == BinaryOp::Add {
            return Ok(Val::Tuple(results.into_iter().map(Val::Ir).collect()));
        }
        // Triton's scans are inclusive: each element joins its prefix.
        Ok(Val::Ir(self.binary_op(combine, results[0], x)))
    }

    pub(super) fn extremum(
        &mut self,
        op: tlx_core::ir::BinaryOp,
        x: Val,
        y: Val,
        span: Span,
    ) -> R<Val> {
        if let (Val::Const(p), Val::Const(q)) = (&x, &y) {
            return crate::value::fold_binary(op, *p, *q)
                .map(Val::Const)
                .ok_or_else(|| Diagnostic::new(span, "invalid constant operands"));
        }
        let ids = self.unify(&[&x, &y], span)?;
        if self.scalar_elem(ids[0], span, "an operand")? == ScalarType::Bool {
            return Err(Diagnostic::new(
                span,
                "`maximum`, `minimum` and `clamp` need numbers, not bools",
            ));
        }
        Ok(Val::Ir(self.binary_op(op, ids[0], ids[1])))
    }

    fn math(&mut self, name: &str, op: UnaryOp, x: Option<&'a Expr>, span: Span) -> R<Val> {
        let x = self.ir_arg(x)?;
        let x = self.math_operand(op, x, span)?;
        if !op.is_exact() {
            self.refuse_f64(name, x, span)?;
        }
        Ok(Val::Ir(self.unary(op, x)))
    }

    /// `Err` when `x` is f64: the GPU approximates transcendental functions
    /// in f32 only, and this compiler has no f64 library for them.
    pub(super) fn refuse_f64(&self, name: &str, x: ValueId, span: Span) -> R<()> {
        if self.scalar_elem(x, span, "a math operand")? != ScalarType::F64 {
            return Ok(());
        }
        Err(
            Diagnostic::new(span, format!("`{name}` of f64 is not available")).with_hint(format!(
                "PTX approximates `{name}` in f32 only; compute it in f32 and widen \
                 the result: `{name}(x.to(f32)).to(f64)`"
            )),
        )
    }

    /// `x` as `op` takes it: floats as they are, integers converted to f32
    /// (but kept for `abs`), bools rejected.
    pub(super) fn math_operand(&mut self, op: UnaryOp, x: ValueId, span: Span) -> R<ValueId> {
        let s = self.scalar_elem(x, span, "a math operand")?;
        if s.is_float() || (op == UnaryOp::Abs && s.is_int()) {
            Ok(x)
        } else if s.is_int() {
            self.cast(x, ScalarType::F32, span)
        } else {
            Err(Diagnostic::new(
                span,
                "math functions need numbers, not bools",
            ))
        }
    }

    /// Sums of bools and 8-bit ints accumulate in i32, as in Triton.
    fn widen_for_sum(&mut self, x: ValueId, span: Span) -> R<ValueId> {
        match self.scalar_elem(x, span, "a reduction operand")? {
            ScalarType::Bool | ScalarType::I8 | ScalarType::U8 => {
                self.cast(x, ScalarType::I32, span)
            }
            _ => Ok(x),
        }
    }

    fn reduce(&mut self, kind: ReduceKind, a: &[Option<&'a Expr>], span: Span) -> R<Val> {
        let x = self.ir_arg(a[0])?;
        self.reduce_value(kind, x, a, span)
    }

    /// `mean(x, axis, keep_dims)`: the sum over the count, in f32 for
    /// integer and bool inputs.
    fn mean(&mut self, a: &[Option<&'a Expr>], span: Span) -> R<Val> {
        let x = self.ir_arg(a[0])?;
        let x = self.math_operand(UnaryOp::Exp, x, span)?;
        let ty = self.ty(x);
        let count = match a[1] {
            Some(_) if !ty.is_scalar() => ty.shape()[self.axis_arg(a[1], ty.rank())?],
            _ => ty.numel(),
        };
        let sum = self.reduce_value(ReduceKind::Sum, x, a, span)?;
        let div = syn::BinOp::Div(Default::default());
        self.binary(&div, sum, Val::Const(ConstVal::Float(count as f64)), span)
    }

    /// [`Lowerer::reduce`] of a value already lowered (`a[0]` is not read).
    fn reduce_value(
        &mut self,
        kind: ReduceKind,
        mut x: ValueId,
        a: &[Option<&'a Expr>],
        span: Span,
    ) -> R<Val> {
        // Pointers have no order or sum: refused here, at the call.
        self.scalar_elem(x, span, "a reduction operand")?;
        if kind == ReduceKind::Sum {
            x = self.widen_for_sum(x, span)?;
        }
        let ty = self.ty(x);
        if ty.is_scalar() {
            return Err(Diagnostic::new(span, "cannot reduce a scalar")
                .with_hint("reductions need a tensor"));
        }
        let keep_dims = self.const_bool_or(a[2], false)?;
        let (value, axis) = match a[1] {
            Some(_) => {
                let axis = self.axis_arg(a[1], ty.rank()).map_err(|d| match kind {
                    ReduceKind::Max | ReduceKind::Min => d.with_hint(
                        "`max`/`min` reduce along an axis; for two tensors use `maximum(a, b)` / `minimum(a, b)`",
                    ),
                    _ => d,
                })?;
                (x, axis)
            }
            None if ty.rank() == 1 => (x, 0),
            None => (
                self.b
                    .push1(OpKind::Reshape(x), ty.with_shape(vec![ty.numel()])),
                0,
            ),
        };
        let vty = self.ty(value);
        let mut shape = vty.shape().to_vec();
        shape.remove(axis);
        let elem = match kind {
            ReduceKind::Argmax | ReduceKind::Argmin => Elem::Scalar(ScalarType::I32),
            _ => vty.elem(),
        };
        let mut out = self.b.push1(
            OpKind::Reduce { value, axis, kind },
            Type::tensor(elem, shape),
        );
        if keep_dims {
            if a[1].is_none() {
                let ones = vec![1; ty.rank()];
                let oty = self.ty(out).with_shape(ones);
                out = self.b.push1(OpKind::Reshape(out), oty);
            } else {
                let oty = self.ty(out);
                let mut kept = oty.shape().to_vec();
                kept.insert(axis, 1);
                out = self.b.push1(
                    OpKind::ExpandDims { value: out, axis },
                    oty.with_shape(kept),
                );
            }
        }
        Ok(Val::Ir(out))
    }

    fn dot(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(&["a", "b", "acc", "input_precision"], 2)?;
        let span = args.span;
        let x = self.ir_arg(a[0])?;
        let y = self.ir_arg(a[1])?;
        let (xt, yt) = (self.ty(x), self.ty(y));
        if xt.rank() != 2 || yt.rank() != 2 {
            return Err(Diagnostic::new(
                span,
                format!("`dot` needs 2-D operands, found {} and {}", xt, yt),
            ));
        }
        let (m, k, k2, n) = (xt.shape()[0], xt.shape()[1], yt.shape()[0], yt.shape()[1]);
        if k != k2 {
            return Err(Diagnostic::new(
                span,
                format!("`dot` inner dimensions differ: [{m}, {k}] x [{k2}, {n}]"),
            )
            .with_hint("the first operand's columns must equal the second's rows"));
        }
        if m < 16 || n < 16 || k < 16 {
            return Err(Diagnostic::new(
                span,
                format!("`dot` needs M, N and K of at least 16, found M={m}, N={n}, K={k}"),
            ));
        }
        let (xe, ye) = (
            self.scalar_elem(x, span, "a dot operand")?,
            self.scalar_elem(y, span, "a dot operand")?,
        );
        if xe != ye {
            return Err(Diagnostic::new(
                span,
                format!("`dot` operands have different types `{xe}` and `{ye}`"),
            )
            .with_hint("convert one with `.to(...)`"));
        }
        let acc_elem = match xe {
            ScalarType::I8 => ScalarType::I32,
            s if s.is_float() && s != ScalarType::F64 => ScalarType::F32,
            s => {
                return Err(
                    Diagnostic::new(span, format!("`dot` does not support `{s}` operands"))
                        .with_hint("use f16, bf16, f32, fp8 or i8"),
                )
            }
        };
        let acc_ty = Type::tensor(Elem::Scalar(acc_elem), vec![m, n]);
        let acc = match a[2] {
            None => self.constant(ConstVal::Int(0), acc_ty.clone()),
            Some(e) => {
                let acc = self.lower_expr(e)?;
                let id = self.materialize(&acc, e.span())?;
                if self.ty(id) != acc_ty {
                    return Err(Diagnostic::new(
                        e.span(),
                        format!(
                            "the `dot` accumulator must be {acc_ty}, found {}",
                            self.ty(id)
                        ),
                    )
                    .with_hint(format!("create it with `zeros([{m}, {n}], {acc_elem})`")));
                }
                id
            }
        };
        let precision = choice(a[3], PRECISION, DotPrecision::Tf32)?;
        // fp8 values are f16 values too: widened, they multiply exactly on
        // any architecture's 16-bit tensor cores, accumulating in f32 as the
        // language's `dot` promises (`async_dot` is for fp8 at its own rate).
        let (x, y) = if matches!(xe, ScalarType::F8E4M3 | ScalarType::F8E5M2) {
            (
                self.cast(x, ScalarType::F16, span)?,
                self.cast(y, ScalarType::F16, span)?,
            )
        } else {
            (x, y)
        };
        Ok(Val::Ir(self.b.push1(
            OpKind::Dot {
                a: x,
                b: y,
                acc,
                precision,
            },
            acc_ty,
        )))
    }
}
