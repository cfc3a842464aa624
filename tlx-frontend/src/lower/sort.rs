//! Triton's `sort(x, descending)` and `topk(x, k)` along the last axis: a
//! bitonic sorting network built from ops that exist. Each compare-exchange
//! step pairs the elements `i` and `i ^ j` by moving that index bit last
//! (`reshape`, `trans`) and `split`ting it off, swaps where the pair is out
//! of its direction's order, and `join`s the halves back. A pair swaps only
//! when strictly out of order, so NaNs stay (somewhere) and no value is lost.

use proc_macro2::Span;
use syn::spanned::Spanned;

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use tlx_core::ir::{OpKind, ScalarType, ValueId};

impl<'a> Lowerer<'a> {
    /// `sort(x, dim = -1, descending = false)` and `topk(x, k, dim = -1)`.
    pub(super) fn sort_call(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let topk = args.name == "topk";
        let a = if topk {
            args.bind(&["x", "k", "dim"], 2)?
        } else {
            args.bind(&["x", "dim", "descending"], 1)?
        };
        let x = self.ir_arg(a[0])?;
        let ty = self.ty(x);
        let rank = ty.rank();
        if rank == 0 {
            return Err(Diagnostic::new(
                span,
                format!("`{}` takes a tensor, not a scalar", args.name),
            )
            .with_hint("load a block, e.g. `load(x + arange(0, 128))`, and sort that"));
        }
        if self.scalar_elem(x, span, "a sorted tensor")? == ScalarType::Bool {
            return Err(
                Diagnostic::new(span, format!("`{}` needs numbers, not bools", args.name))
                    .with_hint("convert first: `x.to(i32)`"),
            );
        }
        let dim_arg = if topk { a[2] } else { a[1] };
        if let Some(e) = dim_arg {
            let dim = self.const_int(e, "a sort dimension")?;
            if dim != -1 && dim != rank as i64 - 1 {
                return Err(Diagnostic::new(
                    e.span(),
                    "only the last dimension can be sorted, as in Triton",
                )
                .with_hint("`trans` or `permute` the axis to sort into the last place first"));
            }
        }
        let descending = match (topk, a[2]) {
            (true, _) => true,
            (false, Some(e)) => self.const_bool(e)?,
            (false, None) => false,
        };
        let sorted = self.bitonic_sort(x, descending, span)?;
        if !topk {
            return Ok(Val::Ir(sorted));
        }
        let k_expr = self.expr_arg(a[1])?;
        let n = ty.shape()[rank - 1];
        let k = self.const_int(k_expr, "`k`")?;
        if k < 1 || k as usize > n || !(k as usize).is_power_of_two() {
            return Err(Diagnostic::new(
                k_expr.span(),
                format!("`k` = {k} must be a power of two from 1 to {n}"),
            )
            .with_hint("block shapes are powers of two; take the top 8 or 16 and mask the rest"));
        }
        Ok(Val::Ir(self.leading(sorted, k as usize)))
    }

    /// `x` sorted along its last axis by Batcher's bitonic network.
    fn bitonic_sort(&mut self, x: ValueId, descending: bool, span: Span) -> R<ValueId> {
        let n = *self.ty(x).shape().last().unwrap_or(&1);
        let mut v = x;
        let mut k = 2;
        while k <= n {
            let mut j = k / 2;
            while j >= 1 {
                v = self.compare_exchange(v, k, j, descending, span)?;
                j /= 2;
            }
            k *= 2;
        }
        Ok(v)
    }

    /// One step of the network: elements `i` and `i ^ j` (bit `j` of `i`
    /// clear) put in ascending order where bit `k` of `i` is clear, else
    /// descending (the other way round when `descending`).
    fn compare_exchange(
        &mut self,
        v: ValueId,
        k: usize,
        j: usize,
        descending: bool,
        span: Span,
    ) -> R<ValueId> {
        let ty = self.ty(v);
        let shape = ty.shape().to_vec();
        let rank = shape.len();
        let n = shape[rank - 1];
        let blocks = n / (2 * j);
        let (low, high) = self.split_at_stride(v, j);
        let half_shape = self.ty(low).shape().to_vec();
        let mut paired_shape = half_shape.clone();
        paired_shape.push(2);
        // Ascending where bit k of the index is clear: in block coordinates,
        // bit k / (2j) of the block number.
        let block_index = self.index_tensor(blocks);
        let and = syn::BinOp::BitAnd(Default::default());
        let bit = self.binary(&and, Val::Ir(block_index), int((k / (2 * j)) as i64), span)?;
        // The last merge (k = n) has the bit clear everywhere: one direction.
        let test = if descending {
            syn::BinOp::Ne(Default::default())
        } else {
            syn::BinOp::Eq(Default::default())
        };
        let ascending = self.binary(&test, bit, int(0), span)?;
        let ascending = self.materialize(&ascending, span)?;
        let mut column: Vec<usize> = vec![1; half_shape.len() - 2];
        column.extend([blocks, 1]);
        let ascending = self.b.push1(
            OpKind::Reshape(ascending),
            self.ty(ascending).with_shape(column),
        );
        let ascending = Val::Ir(self.broadcast_to(ascending, &half_shape, span)?);
        // Swap only where strictly out of order.
        let gt = syn::BinOp::Gt(Default::default());
        let lt = syn::BinOp::Lt(Default::default());
        let rising = self.binary(&gt, Val::Ir(low), Val::Ir(high), span)?;
        let falling = self.binary(&lt, Val::Ir(low), Val::Ir(high), span)?;
        let swap = self.select_val(ascending, rising, falling, span)?;
        let new_low = self.select_val(swap.clone(), Val::Ir(high), Val::Ir(low), span)?;
        let new_high = self.select_val(swap, Val::Ir(low), Val::Ir(high), span)?;
        let new_low = self.materialize(&new_low, span)?;
        let new_high = self.materialize(&new_high, span)?;
        let joined = self.b.push1(
            OpKind::Join {
                a: new_low,
                b: new_high,
            },
            ty.with_shape(paired_shape.clone()),
        );
        // Back to [.., blocks, 2, j] (swapping the last two axes undoes
        // itself), then to [.., n].
        let rank = paired_shape.len();
        let mut perm: Vec<usize> = (0..rank - 2).collect();
        perm.extend([rank - 1, rank - 2]);
        let regrouped = self.permuted(joined, &perm);
        Ok(self
            .b
            .push1(OpKind::Reshape(regrouped), ty.with_shape(shape)))
    }

    /// Elements `i` and `i + stride` (bit `stride` of `i` clear) of the last
    /// axis, as two tensors of `[.., n / (2 stride), stride]`: the axis seen
    /// as `[.., blocks, 2, stride]`, the 2 moved last and split off.
    fn split_at_stride(&mut self, v: ValueId, stride: usize) -> (ValueId, ValueId) {
        let ty = self.ty(v);
        let shape = ty.shape().to_vec();
        let rank = shape.len();
        let blocks = shape[rank - 1] / (2 * stride);
        let mut grouped = shape[..rank - 1].to_vec();
        grouped.extend([blocks, 2, stride]);
        let grouped = self.b.push1(OpKind::Reshape(v), ty.with_shape(grouped));
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.extend([rank + 1, rank]);
        let paired = self.permuted(grouped, &perm);
        let mut half = shape[..rank - 1].to_vec();
        half.extend([blocks, stride]);
        let halves = self.b.push(
            OpKind::Split(paired),
            vec![ty.with_shape(half.clone()), ty.with_shape(half)],
        );
        (halves[0], halves[1])
    }

    /// The first `k` elements along the last axis, by halving it.
    fn leading(&mut self, v: ValueId, k: usize) -> ValueId {
        let mut v = v;
        loop {
            let ty = self.ty(v);
            let shape = ty.shape().to_vec();
            let rank = shape.len();
            let n = shape[rank - 1];
            if n <= k {
                return v;
            }
            // Elements `i` and `i + n / 2`: keep the first half.
            let (first, _) = self.split_at_stride(v, n / 2);
            v = self.b.push1(
                OpKind::Reshape(first),
                ty.with_shape(shape[..rank - 1].iter().copied().chain([n / 2]).collect()),
            );
        }
    }
}

fn int(x: i64) -> Val {
    Val::Const(ConstVal::Int(x))
}
