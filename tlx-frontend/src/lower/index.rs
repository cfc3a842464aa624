//! Indexing a tensor with an integer: `t[3]` (an element of a vector, a
//! rank-0 value), `t[i]` or `t[(i, ..)]` (a row: the tensor with that
//! dimension taken away). A constant index extracts the element or row;
//! a run-time one selects it out of the whole dimension and sums that
//! dimension away, exactly (every other element becomes the sum's identity,
//! `-0.0` for floats, so `x + -0.0 == x` keeps even the sign of a zero),
//! and asserts that the index is in bounds.

use proc_macro2::Span;

use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use tlx_core::ir::{CmpPred, Elem, OpKind, ReduceKind, ScalarType, Type, ValueId};

impl Lowerer<'_> {
    /// `value` with dimension `dim` taken away at position `index`.
    pub(super) fn index_along(
        &mut self,
        value: ValueId,
        dim: usize,
        index: Val,
        span: Span,
    ) -> R<ValueId> {
        let ty = self.ty(value);
        let size = ty.shape()[dim];
        match index {
            Val::Const(ConstVal::Int(i)) => {
                if i < 0 || i >= size as i64 {
                    return Err(Diagnostic::new(
                        span,
                        format!("index {i} is out of bounds for dimension {dim} of size {size}"),
                    )
                    .with_hint(format!("an index of this dimension is in `0..{size}`")));
                }
                let mut tile = ty.shape().to_vec();
                tile[dim] = 1;
                let mut at = vec![0; ty.rank()];
                at[dim] = i as usize;
                let row = self.b.push1(
                    OpKind::ExtractTile { value, index: at },
                    ty.with_shape(tile.clone()),
                );
                tile.remove(dim);
                Ok(self.b.push1(OpKind::Reshape(row), ty.with_shape(tile)))
            }
            Val::Ir(i) if self.ty(i).is_scalar() && self.ty(i).elem().scalar().is_some_and(ScalarType::is_int) => {
                self.select_along(value, dim, i, span)
            }
            _ => Err(Diagnostic::new(span, "a tensor index must be an integer, `..` or `None`")
                .with_hint("index with an integer scalar (`t[i]`, `t[(i, ..)]`), keep a dimension with `..`, add one with `None`")),
        }
    }

    /// `value` at the run-time position `index` of dimension `dim`.
    fn select_along(
        &mut self,
        value: ValueId,
        dim: usize,
        index: ValueId,
        span: Span,
    ) -> R<ValueId> {
        let ty = self.ty(value);
        let size = ty.shape()[dim];
        let Elem::Scalar(elem) = ty.elem() else {
            return Err(
                Diagnostic::new(span, "a tensor of pointers takes only constant indices")
                    .with_hint(
                        "index the offsets before adding them to the pointer: `base + offs[i]`",
                    ),
            );
        };
        let index = self.cast(index, ScalarType::I32, span)?;
        self.assert_in_bounds(index, size, span);
        // The dimension's positions, shaped to broadcast along `dim` only.
        let positions = self.index_tensor(size);
        let mut along = vec![1; ty.rank()];
        along[dim] = size;
        let positions = self.b.push1(
            OpKind::Reshape(positions),
            Type::tensor(Elem::Scalar(ScalarType::I32), along),
        );
        let wanted = self.compare(CmpPred::Eq, positions, index, span)?;
        let wanted = self.broadcast_to(wanted, ty.shape(), span)?;
        // Summed in a type whose sum is exact and has a -0.0 or 0 identity.
        let wide = match elem {
            ScalarType::F64
            | ScalarType::F32
            | ScalarType::I32
            | ScalarType::U32
            | ScalarType::I64 => elem,
            s if s.is_float() => ScalarType::F32,
            _ => ScalarType::I32,
        };
        let widened = self.cast(value, wide, span)?;
        let identity = if wide.is_float() {
            ConstVal::Float(-0.0)
        } else {
            ConstVal::Int(0)
        };
        let identity = self.constant(identity, Type::scalar(wide));
        let identity = self.broadcast_to(identity, ty.shape(), span)?;
        let kept = self.b.push1(
            OpKind::Select {
                cond: wanted,
                on_true: widened,
                on_false: identity,
            },
            ty.with_elem(Elem::Scalar(wide)),
        );
        let mut shape = ty.shape().to_vec();
        shape.remove(dim);
        let picked = self.b.push1(
            OpKind::Reduce {
                value: kept,
                axis: dim,
                kind: ReduceKind::Sum,
            },
            Type::tensor(Elem::Scalar(wide), shape.clone()),
        );
        if elem == ScalarType::Bool {
            let zero = self.constant(ConstVal::Int(0), Type::scalar(wide));
            let zero = self.broadcast_to(zero, &shape, span)?;
            return self.compare(CmpPred::Ne, picked, zero, span);
        }
        self.cast(picked, elem, span)
    }

    /// `lhs <pred> rhs` for two integer values, `rhs` broadcast to `lhs`'s shape.
    fn compare(&mut self, pred: CmpPred, lhs: ValueId, rhs: ValueId, span: Span) -> R<ValueId> {
        let shape = self.ty(lhs).shape().to_vec();
        let rhs = self.broadcast_to(rhs, &shape, span)?;
        Ok(self.b.push1(
            OpKind::Compare { pred, lhs, rhs },
            Type::tensor(Elem::Scalar(ScalarType::Bool), shape),
        ))
    }

    /// A device assertion that the i32 `index` is in `0..size`.
    fn assert_in_bounds(&mut self, index: ValueId, size: usize, span: Span) {
        let size_value = self.constant(ConstVal::Int(size as i64), Type::scalar(ScalarType::I32));
        let below = self.b.push1(
            OpKind::Compare {
                pred: CmpPred::Lt,
                lhs: index,
                rhs: size_value,
            },
            Type::scalar(ScalarType::Bool),
        );
        let zero = self.constant(ConstVal::Int(0), Type::scalar(ScalarType::I32));
        let above = self.b.push1(
            OpKind::Compare {
                pred: CmpPred::Ge,
                lhs: index,
                rhs: zero,
            },
            Type::scalar(ScalarType::Bool),
        );
        let cond = self.binary_op(tlx_core::ir::BinaryOp::And, below, above);
        let line = span.start().line;
        let message =
            format!("tensor index out of bounds (line {line}): a dimension of size {size}");
        self.b.push(OpKind::Assert { cond, message }, vec![]);
    }
}
