//! Triton's `reduce(x, axis, combine)` and `associative_scan(x, axis,
//! combine, reverse)` with a user combine function (a helper `fn` of the
//! kernel), also over several tensors at once (`(values, indices)` for an
//! argmax of one's own). Built from ops that exist: the axis is moved last,
//! then halved log2(n) times, each time pairing neighbours with `split` and
//! combining them with the helper inlined on the halves; a scan recurses on
//! the pair results and interleaves the answers back with `join`.
//! Neighbours keep their order, so the combine needs to be associative, not
//! commutative; GPU and interpreter run the same tree.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::ConstVal;
use crate::value::Val;
use tlx_core::ir::{Elem, OpKind, ScalarType, Type, ValueId};

impl<'a> Lowerer<'a> {
    /// `reduce(x, axis, combine, keep_dims = false)`; `x` a tensor or a tuple
    /// of tensors of one shape, `axis` a constant or `None` (all elements).
    pub(super) fn reduce_with_combine(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let a = args.bind(&["x", "axis", "combine_fn", "keep_dims"], 3)?;
        let (helper, operands, tupled) = self.combine_operands(a[0], a[2])?;
        let shape = self.ty(operands[0]).shape().to_vec();
        let keep_dims = self.const_bool_or(a[3], false)?;
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
            values = values.iter().map(|&v| self.permuted(v, &perm)).collect();
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

    /// The tensors (one, or a tuple of one shape) and the helper of a
    /// `reduce` or `associative_scan`, its arity checked against them.
    fn combine_operands(
        &mut self,
        x: Option<&'a Expr>,
        combine: Option<&'a Expr>,
    ) -> R<(&'a syn::ItemFn, Vec<ValueId>, bool)> {
        let helper = self.combine_helper(combine)?;
        let x_expr = self.expr_arg(x)?;
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
                "a combine function works on tensors, not scalars",
            ));
        }
        if let Some(&other) = operands
            .iter()
            .find(|&&o| self.ty(o).shape() != shape.as_slice())
        {
            return Err(Diagnostic::new(
                x_expr.span(),
                format!(
                    "the tensors differ in shape: {:?} and {:?}",
                    shape,
                    self.ty(other).shape()
                ),
            )
            .with_hint("broadcast them to one shape first"));
        }
        let wanted = 2 * operands.len();
        if helper.sig.inputs.len() != wanted {
            let combine_span = self.expr_arg(combine)?.span();
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
        Ok((helper, operands, tupled))
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
        let (evens, odds) = self.split_neighbours(values);
        self.apply_combine(helper, &evens, &odds, span)
    }

    /// Each tensor's last axis split into its even and odd elements.
    fn split_neighbours(&mut self, values: &[ValueId]) -> (Vec<ValueId>, Vec<ValueId>) {
        let mut evens = Vec::with_capacity(values.len());
        let mut odds = Vec::with_capacity(values.len());
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
            evens.push(halves[0]);
            odds.push(halves[1]);
        }
        (evens, odds)
    }

    /// The helper inlined on `(lefts.., rights..)`, its results checked
    /// against the operands' element types and broadcast to their shape.
    fn apply_combine(
        &mut self,
        helper: &'a syn::ItemFn,
        lefts: &[ValueId],
        rights: &[ValueId],
        span: Span,
    ) -> R<Vec<ValueId>> {
        let args = lefts.iter().chain(rights).map(|&v| Val::Ir(v)).collect();
        let combined = match self.inline_helper_with(helper, args, span)? {
            Val::Tuple(items) => items,
            single => vec![single],
        };
        if combined.len() != lefts.len() {
            return Err(Diagnostic::new(
                helper.sig.ident.span(),
                format!(
                    "the combine function returns {} value{} for {} reduced tensor{}",
                    combined.len(),
                    if combined.len() == 1 { "" } else { "s" },
                    lefts.len(),
                    if lefts.len() == 1 { "" } else { "s" }
                ),
            )
            .with_hint("take `(a0, .., b0, ..)` and return one value per reduced tensor, as a tuple when several"));
        }
        let mut out = Vec::with_capacity(lefts.len());
        for (value, &operand) in combined.iter().zip(lefts) {
            let want = self.ty(operand);
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
            out.push(self.broadcast_to(id, want.shape(), span)?);
        }
        Ok(out)
    }

    /// `associative_scan(x, axis, combine, reverse = false)`: the inclusive
    /// scan of `x` (a tensor or a tuple of tensors of one shape) by `combine`.
    pub(super) fn scan_with_combine(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let a = args.bind(&["x", "axis", "combine_fn", "reverse"], 3)?;
        let (helper, operands, tupled) = self.combine_operands(a[0], a[2])?;
        let shape = self.ty(operands[0]).shape().to_vec();
        let axis = self.axis_arg(a[1], shape.len())?;
        let reverse = self.const_bool_or(a[3], false)?;
        let rank = shape.len();
        let perm: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
        let mut values = operands;
        if axis + 1 != rank {
            values = values.iter().map(|&v| self.permuted(v, &perm)).collect();
        }
        let (mut scanned, _) = self.scan_level(helper, &values, reverse, span)?;
        if axis + 1 != rank {
            let mut back = vec![0; rank];
            for (i, &p) in perm.iter().enumerate() {
                back[p] = i;
            }
            scanned = scanned.iter().map(|&v| self.permuted(v, &back)).collect();
        }
        let mut results: Vec<Val> = scanned.into_iter().map(Val::Ir).collect();
        Ok(if tupled {
            Val::Tuple(results)
        } else {
            results.remove(0)
        })
    }

    /// `v` with its dimensions permuted (`trans`).
    pub(super) fn permuted(&mut self, v: ValueId, perm: &[usize]) -> ValueId {
        let ty = self.ty(v);
        let shape = perm.iter().map(|&p| ty.shape()[p]).collect();
        self.b.push1(
            OpKind::Trans {
                value: v,
                perm: perm.to_vec(),
            },
            ty.with_shape(shape),
        )
    }

    /// The scans of `values` along their last axis, inclusive, and each
    /// position's scan without its own element (the one before it, or after
    /// it when `reverse`; meaningless at the first position). Pairs of
    /// neighbours are combined and scanned at half the length; the two
    /// answers there give both answers here with one more combine, and no
    /// element ever moves by one position.
    fn scan_level(
        &mut self,
        helper: &'a syn::ItemFn,
        values: &[ValueId],
        reverse: bool,
        span: Span,
    ) -> R<(Vec<ValueId>, Vec<ValueId>)> {
        let shape = self.ty(values[0]).shape().to_vec();
        let n = shape.last().copied().unwrap_or(1);
        if n == 1 {
            return Ok((values.to_vec(), values.to_vec()));
        }
        let (evens, odds) = self.split_neighbours(values);
        // Reversed is Triton's flip, scan, flip: the later element comes first.
        let (first, second) = if reverse {
            (&odds, &evens)
        } else {
            (&evens, &odds)
        };
        let pairs = self.apply_combine(helper, first, second, span)?;
        let (inclusive, before) = self.scan_level(helper, &pairs, reverse, span)?;
        let mut half = shape.clone();
        half.pop();
        half.push(n / 2);
        // Forward, even position 2j: everything before the pair, then itself
        // (alone at j = 0); odd 2j+1: the pair's inclusive scan. Reversed,
        // the mirror image (the odd element is the pair's first).
        let edge = if reverse { n / 2 - 1 } else { 0 };
        let at_edge = self.position_is(&half, edge, span)?;
        let joined = self.apply_combine(helper, &before, first, span)?;
        let (fixed_in, fixed_out) = (first.clone(), joined);
        let mut fixed = Vec::with_capacity(values.len());
        for (&alone, &joined) in fixed_in.iter().zip(&fixed_out) {
            let chosen =
                self.select_val(Val::Ir(at_edge), Val::Ir(alone), Val::Ir(joined), span)?;
            fixed.push(self.materialize(&chosen, span)?);
        }
        let (inc_even, inc_odd, before_even, before_odd) = if reverse {
            (&inclusive, &fixed, &fixed, &before)
        } else {
            (&fixed, &inclusive, &before, &fixed)
        };
        let inclusive = self.interleaved(inc_even, inc_odd);
        let before = self.interleaved(before_even, before_odd);
        Ok((inclusive, before))
    }

    /// A bool tensor of `shape`, true where the last coordinate is `position`.
    fn position_is(&mut self, shape: &[usize], position: usize, span: Span) -> R<ValueId> {
        let n = shape.last().copied().unwrap_or(1);
        let index = self.index_tensor(n);
        let eq = syn::BinOp::Eq(Default::default());
        let at = self.binary(
            &eq,
            Val::Ir(index),
            Val::Const(ConstVal::Int(position as i64)),
            span,
        )?;
        let at = self.materialize(&at, span)?;
        self.broadcast_to(at, shape, span)
    }

    /// `arange(0, n)`.
    pub(super) fn index_tensor(&mut self, n: usize) -> ValueId {
        self.b.push1(
            OpKind::Arange {
                start: 0,
                end: n as i64,
            },
            Type::tensor(Elem::Scalar(ScalarType::I32), vec![n]),
        )
    }

    /// `evens` and `odds` merged back along their last axis.
    fn interleaved(&mut self, evens: &[ValueId], odds: &[ValueId]) -> Vec<ValueId> {
        evens
            .iter()
            .zip(odds)
            .map(|(&e, &o)| {
                let ty = self.ty(e);
                let mut pairs = ty.shape().to_vec();
                pairs.push(2);
                let joined = self
                    .b
                    .push1(OpKind::Join { a: e, b: o }, ty.with_shape(pairs.clone()));
                pairs.pop();
                if let Some(last) = pairs.last_mut() {
                    *last *= 2;
                }
                self.b.push1(OpKind::Reshape(joined), ty.with_shape(pairs))
            })
            .collect()
    }
}
