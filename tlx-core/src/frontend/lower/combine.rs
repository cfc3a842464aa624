//! Triton's `reduce(x, axis, combine)` with a user combine function (a
//! helper `fn` of the kernel), also over several tensors at once (`(values,
//! indices)` for an argmax of one's own). Built from ops that exist: the
//! reduced axis is moved last, then halved log2(n) times, each time pairing
//! neighbours with `split` and joining them with the helper inlined on the
//! halves. Neighbours keep their order, so the combine needs to be
//! associative, not commutative; GPU and interpreter run the same tree.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::frontend::value::Val;
use crate::ir::{OpKind, ValueId};

impl<'a> Lowerer<'a> {
    /// `reduce(x, axis, combine, keep_dims = false)`; `x` a tensor or a tuple
    /// of tensors of one shape, `axis` a constant or `None` (all elements).
    pub(super) fn reduce_with_combine(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let a = args.bind(&["x", "axis", "combine_fn", "keep_dims"], 3)?;
        let helper = self.combine_helper(a[2])?;
        let x_expr = self.expr_arg(a[0])?;
        let (operands, tupled) = match self.lower_expr(x_expr)? {
            Val::Tuple(items) => {
                let mut ids = Vec::with_capacity(items.len());
                for item in &items {
                    ids.push(self.materialize(item, x_expr.span())?);
                }
                (ids, true)
            }
            other => (vec![self.materialize(&other, x_expr.span())?], false),
        };
        let shape = self.ty(operands[0]).shape().to_vec();
        if shape.is_empty() {
            return Err(Diagnostic::new(
                x_expr.span(),
                "`reduce` takes tensors, not scalars",
            ));
        }
        if let Some(&other) = operands
            .iter()
            .find(|&&o| self.ty(o).shape() != shape.as_slice())
        {
            return Err(Diagnostic::new(
                x_expr.span(),
                format!(
                    "the reduced tensors differ in shape: {:?} and {:?}",
                    shape,
                    self.ty(other).shape()
                ),
            )
            .with_hint("broadcast them to one shape first"));
        }
        let wanted = 2 * operands.len();
        if helper.sig.inputs.len() != wanted {
            let combine_span = self.expr_arg(a[2])?.span();
            return Err(Diagnostic::new(
                combine_span,
                format!(
                    "`{}` takes {} arguments, but a combine function for {} tensor{} takes {wanted}",
                    helper.sig.ident,
                    helper.sig.inputs.len(),
                    operands.len(),
                    if operands.len() == 1 { "" } else { "s" }
                ),
            )
            .with_hint("it is called with the left elements, then the right ones: `fn f(a0, .., b0, ..)`"));
        }
        let keep_dims = match a[3] {
            Some(e) => self.const_bool(e)?,
            None => false,
        };
        let given = match a[1] {
            Some(Expr::Path(p)) if p.path.is_ident("None") => None,
            Some(_) => Some(self.axis_arg(a[1], shape.len())?),
            None => None,
        };
        // Everything reduced: one flat axis.
        let (mut values, axis) = match given {
            Some(axis) => (operands.clone(), axis),
            None => {
                let flat = vec![shape.iter().product::<usize>()];
                let ids = operands
                    .iter()
                    .map(|&o| {
                        self.b
                            .push1(OpKind::Reshape(o), self.ty(o).with_shape(flat.clone()))
                    })
                    .collect();
                (ids, 0)
            }
        };
        let rank = self.ty(values[0]).rank();
        if axis + 1 != rank {
            let perm: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
            values = values
                .iter()
                .map(|&v| {
                    let ty = self.ty(v);
                    let moved = perm.iter().map(|&p| ty.shape()[p]).collect();
                    self.b.push1(
                        OpKind::Trans {
                            value: v,
                            perm: perm.clone(),
                        },
                        ty.with_shape(moved),
                    )
                })
                .collect();
        }
        while self.ty(values[0]).shape()[rank - 1] > 1 {
            values = self.combine_neighbours(helper, &values, span)?;
        }
        // The size-1 axis left over dropped, or kept where it was.
        let result_shape: Vec<usize> = match (given, keep_dims) {
            (Some(axis), true) => (0..shape.len())
                .map(|d| if d == axis { 1 } else { shape[d] })
                .collect(),
            (Some(axis), false) => (0..shape.len())
                .filter(|&d| d != axis)
                .map(|d| shape[d])
                .collect(),
            (None, true) => vec![1; shape.len()],
            (None, false) => Vec::new(),
        };
        let mut results = Vec::with_capacity(values.len());
        for v in values {
            let ty = self.ty(v).with_shape(result_shape.clone());
            results.push(Val::Ir(self.b.push1(OpKind::Reshape(v), ty)));
        }
        Ok(if tupled {
            Val::Tuple(results)
        } else {
            results.remove(0)
        })
    }

    /// The helper named by `combine_fn`.
    fn combine_helper(&self, e: Option<&'a Expr>) -> R<&'a syn::ItemFn> {
        let e = self.expr_arg(e)?;
        let name = match e {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        name.and_then(|n| self.helpers.get(&n).copied()).ok_or_else(|| {
            Diagnostic::new(e.span(), "the combine function must name a helper `fn` of the kernel")
                .with_hint("declare `fn combine(a: f32, b: f32) -> f32 { ... }` in the kernel body and pass `combine`")
        })
    }

    /// One halving of the last axis: neighbours `2i` and `2i + 1` combined.
    fn combine_neighbours(
        &mut self,
        helper: &'a syn::ItemFn,
        values: &[ValueId],
        span: Span,
    ) -> R<Vec<ValueId>> {
        let mut lows = Vec::with_capacity(values.len());
        let mut highs = Vec::with_capacity(values.len());
        for &v in values {
            let ty = self.ty(v);
            let mut half = ty.shape().to_vec();
            if let Some(last) = half.last_mut() {
                *last /= 2;
            }
            let mut pairs = half.clone();
            pairs.push(2);
            let paired = self.b.push1(OpKind::Reshape(v), ty.with_shape(pairs));
            let halves = self.b.push(
                OpKind::Split(paired),
                vec![ty.with_shape(half.clone()), ty.with_shape(half)],
            );
            lows.push(Val::Ir(halves[0]));
            highs.push(Val::Ir(halves[1]));
        }
        let args = lows.into_iter().chain(highs).collect();
        let combined = self.inline_helper_with(helper, args, span)?;
        let combined = match combined {
            Val::Tuple(items) => items,
            single => vec![single],
        };
        if combined.len() != values.len() {
            return Err(Diagnostic::new(
                helper.sig.ident.span(),
                format!(
                    "the combine function returns {} value{} for {} reduced tensor{}",
                    combined.len(),
                    if combined.len() == 1 { "" } else { "s" },
                    values.len(),
                    if values.len() == 1 { "" } else { "s" }
                ),
            )
            .with_hint("take `(a0, .., b0, ..)` and return one value per reduced tensor, as a tuple when several"));
        }
        let mut out = Vec::with_capacity(values.len());
        for (value, &operand) in combined.iter().zip(values) {
            let want = self.ty(operand);
            let mut shape = want.shape().to_vec();
            if let Some(last) = shape.last_mut() {
                *last /= 2;
            }
            let id = self.materialize(value, span)?;
            if self.ty(id).elem() != want.elem() {
                return Err(Diagnostic::new(
                    helper.sig.ident.span(),
                    format!(
                        "the combine function returns `{}` for a `{}` tensor",
                        self.ty(id),
                        want
                    ),
                )
                .with_hint("return the element type it is given (cast with `.to(...)`)"));
            }
            out.push(self.broadcast_to(id, &shape, span)?);
        }
        Ok(out)
    }
}
