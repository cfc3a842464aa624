//! Triton's block pointers: `make_block_ptr(base, shape, strides, offsets,
//! block_shape, order)` names a `block_shape` window at `offsets` of a
//! strided tensor; `advance(p, deltas)` moves it; `load(p, boundary_check,
//! padding_option)` and `store(p, value, boundary_check)` read and write the
//! window, masking the dimensions listed in `boundary_check` to the
//! tensor's extents. A block pointer is a compile-time bundle of i32 IR
//! scalars (no IR type of its own): loads and stores lower to pointer
//! arithmetic and masks, and a loop that advances one carries its scalars.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;

use super::calls::CallArgs;
use super::typing::check_tile_size;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{BlockPtr, ConstVal, Val};
use tlx_core::ir::{ScalarType, Type, ValueId};

/// A block-pointer variable a loop carries: its name and the names of the
/// variables that carry its scalars (`parts`, in [`BlockPtr::parts`] order).
pub(super) struct PackedBlockPtr {
    name: String,
    template: BlockPtr,
    parts: Vec<String>,
}

impl<'a> Lowerer<'a> {
    /// `make_block_ptr(base, shape, strides, offsets, block_shape, order)`.
    pub(super) fn make_block_ptr(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(
            &[
                "base",
                "shape",
                "strides",
                "offsets",
                "block_shape",
                "order",
            ],
            6,
        )?;
        let span = args.span;
        let base = self.ir_arg(a[0])?;
        let base_ty = self.ty(base);
        if !base_ty.is_scalar() || base_ty.elem().pointee().is_none() {
            return Err(Diagnostic::new(
                self.expr_arg(a[0])?.span(),
                format!("the base of a block pointer must be a scalar pointer, found `{base_ty}`"),
            )
            .with_hint("pass a `Ptr<T>` parameter (plus a scalar offset)"));
        }
        let block_shape = self.block_shape(self.expr_arg(a[4])?)?;
        let rank = block_shape.len();
        let shape = self.scalar_list(self.expr_arg(a[1])?, rank, "shape")?;
        let strides = self.scalar_list(self.expr_arg(a[2])?, rank, "strides")?;
        let offsets = self.scalar_list(self.expr_arg(a[3])?, rank, "offsets")?;
        let order = self.dims(self.expr_arg(a[5])?, "`order`")?;
        let mut sorted = order.clone();
        sorted.sort_unstable();
        if sorted != (0..rank).collect::<Vec<_>>() {
            return Err(Diagnostic::new(
                self.expr_arg(a[5])?.span(),
                format!("`order` must list the {rank} dimensions once each, found {order:?}"),
            )
            .with_hint("for a row-major 2-D tensor write `order = (1, 0)`"));
        }
        let _ = span;
        Ok(Val::BlockPtr(BlockPtr {
            base,
            shape,
            strides,
            offsets,
            block_shape,
            order,
        }))
    }

    /// `advance(ptr, deltas)`: the same window moved by `deltas`.
    pub(super) fn advance(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(&["base", "offsets"], 2)?;
        let ptr = self.block_ptr_arg(a[0])?;
        let deltas = self.scalar_list(self.expr_arg(a[1])?, ptr.block_shape.len(), "offsets")?;
        let offsets = ptr
            .offsets
            .iter()
            .zip(deltas)
            .map(|(&o, d)| self.binary_op(tlx_core::ir::BinaryOp::Add, o, d))
            .collect();
        Ok(Val::BlockPtr(BlockPtr { offsets, ..ptr }))
    }

    /// Constant integers written as a tuple (Triton's way), an array or
    /// one value.
    fn const_items(&self, e: &'a Expr, what: &str) -> R<Vec<i64>> {
        let items: Vec<&Expr> = match e {
            Expr::Tuple(t) => t.elems.iter().collect(),
            Expr::Array(a) => a.elems.iter().collect(),
            Expr::Paren(p) => vec![&*p.expr],
            other => vec![other],
        };
        items
            .into_iter()
            .map(|item| self.const_int(item, what))
            .collect()
    }

    /// `block_shape`: constant powers of two.
    fn block_shape(&self, e: &'a Expr) -> R<Vec<usize>> {
        self.const_items(e, "a block dimension")?
            .into_iter()
            .map(|n| match usize::try_from(n) {
                Ok(n) if n.is_power_of_two() => Ok(n),
                _ => Err(Diagnostic::new(
                    e.span(),
                    format!("block dimension {n} is not a power of two"),
                )
                .with_hint("block shapes are powers of two, e.g. `(64, 32)`")),
            })
            .collect::<R<Vec<usize>>>()
            .and_then(|shape| check_tile_size(&shape, e.span()).map(|()| shape))
    }

    /// Dimensions named by constants (`order`, `boundary_check`).
    fn dims(&self, e: &'a Expr, what: &str) -> R<Vec<usize>> {
        self.const_items(e, what)?
            .into_iter()
            .map(|d| {
                usize::try_from(d).map_err(|_| {
                    Diagnostic::new(
                        e.span(),
                        format!("{what} names dimension {d}, which is negative"),
                    )
                })
            })
            .collect()
    }

    fn block_ptr_arg(&mut self, e: Option<&'a Expr>) -> R<BlockPtr> {
        let e = self.expr_arg(e)?;
        match self.lower_expr(e)? {
            Val::BlockPtr(p) => Ok(p),
            _ => Err(Diagnostic::new(e.span(), "expected a block pointer")
                .with_hint("make one with `make_block_ptr(base, shape, strides, offsets, block_shape, order)`")),
        }
    }

    /// A tuple of `rank` integer scalars, as i32 IR values.
    fn scalar_list(&mut self, e: &'a Expr, rank: usize, what: &str) -> R<Vec<ValueId>> {
        let items: Vec<&'a Expr> = match e {
            Expr::Tuple(t) => t.elems.iter().collect(),
            Expr::Array(a) => a.elems.iter().collect(),
            Expr::Paren(p) => vec![&*p.expr],
            other => vec![other],
        };
        if items.len() != rank {
            return Err(Diagnostic::new(
                e.span(),
                format!(
                    "`{what}` needs {rank} values (one per dimension of `block_shape`), found {}",
                    items.len()
                ),
            ));
        }
        items
            .into_iter()
            .map(|item| {
                let v = self.lower_expr(item)?;
                let id = match v {
                    Val::Const(c @ ConstVal::Int(_)) => {
                        self.constant(c, Type::scalar(ScalarType::I32))
                    }
                    other => self.materialize(&other, item.span())?,
                };
                let ty = self.ty(id);
                if !ty.is_scalar() || !ty.elem().scalar().is_some_and(ScalarType::is_int) {
                    return Err(Diagnostic::new(
                        item.span(),
                        format!("each of `{what}` must be an integer scalar, found `{ty}`"),
                    ));
                }
                self.cast(id, ScalarType::I32, item.span())
            })
            .collect()
    }

    /// The pointer tensor of `p`'s window and, when `checked` names any
    /// dimension, the mask of its elements inside the tensor's extents.
    pub(super) fn block_ptr_addresses(
        &mut self,
        p: &BlockPtr,
        checked: &[usize],
        span: Span,
    ) -> R<(ValueId, Option<ValueId>)> {
        let rank = p.block_shape.len();
        if let Some(&d) = checked.iter().find(|&&d| d >= rank) {
            return Err(Diagnostic::new(
                span,
                format!("`boundary_check` names dimension {d} of a rank-{rank} block pointer"),
            ));
        }
        let add = syn::BinOp::Add(Default::default());
        let mul = syn::BinOp::Mul(Default::default());
        let and = syn::BinOp::BitAnd(Default::default());
        let mut address = Val::Ir(p.base);
        let mut mask: Option<Val> = None;
        for d in 0..rank {
            let n = p.block_shape[d];
            let positions = self.index_tensor(n);
            let mut along = vec![1; rank];
            along[d] = n;
            let positions = self.b.push1(
                tlx_core::ir::OpKind::Reshape(positions),
                Type::tensor(tlx_core::ir::Elem::Scalar(ScalarType::I32), along),
            );
            let index = self.binary(&add, Val::Ir(positions), Val::Ir(p.offsets[d]), span)?;
            let scaled = self.binary(&mul, index.clone(), Val::Ir(p.strides[d]), span)?;
            address = self.binary(&add, address, scaled, span)?;
            if checked.contains(&d) {
                let ge = syn::BinOp::Ge(Default::default());
                let lt = syn::BinOp::Lt(Default::default());
                let above = self.binary(&ge, index.clone(), Val::Const(ConstVal::Int(0)), span)?;
                let below = self.binary(&lt, index, Val::Ir(p.shape[d]), span)?;
                let inside = self.binary(&and, above, below, span)?;
                mask = Some(match mask {
                    Some(m) => self.binary(&and, m, inside, span)?,
                    None => inside,
                });
            }
        }
        let address = self.materialize(&address, span)?;
        let address = self.broadcast_to(address, &p.block_shape, span)?;
        let mask = match mask {
            Some(m) => {
                let m = self.materialize(&m, span)?;
                Some(self.broadcast_to(m, &p.block_shape, span)?)
            }
            None => None,
        };
        Ok((address, mask))
    }

    /// `boundary_check`'s dimensions (none when absent).
    pub(super) fn boundary_check(&self, e: Option<&'a Expr>) -> R<Vec<usize>> {
        match e {
            Some(e) => self.dims(e, "`boundary_check`"),
            None => Ok(Vec::new()),
        }
    }

    /// The variables among `names` that hold block pointers, replaced by
    /// variables for their scalars (defined here), so that a loop carries
    /// those as it carries any value.
    pub(super) fn unpack_block_ptrs(
        &mut self,
        names: Vec<String>,
    ) -> (Vec<String>, Vec<PackedBlockPtr>) {
        let mut out = Vec::new();
        let mut packed = Vec::new();
        for name in names {
            let Some(Val::BlockPtr(p)) = self.lookup(&name).cloned() else {
                out.push(name);
                continue;
            };
            let parts: Vec<String> = (0..p.parts().len())
                .map(|i| format!("{name} block_ptr.{i}"))
                .collect();
            for (part, v) in parts.iter().zip(p.parts()) {
                self.define(part.clone(), Val::Ir(v));
            }
            out.extend(parts.iter().cloned());
            packed.push(PackedBlockPtr {
                name,
                template: p,
                parts,
            });
        }
        (out, packed)
    }

    /// Binds each packed block pointer to the current values of its parts.
    pub(super) fn repack_block_ptrs(&mut self, packed: &[PackedBlockPtr], span: Span) -> R<()> {
        for p in packed {
            let mut parts = Vec::new();
            for part in &p.parts {
                match self.lookup(part) {
                    Some(Val::Ir(v)) => parts.push(*v),
                    _ => {
                        return Err(Diagnostic::new(
                            span,
                            format!("internal: block pointer `{}` lost a part", p.name),
                        ))
                    }
                }
            }
            self.assign(&p.name, Val::BlockPtr(p.template.with_parts(&parts)), span)?;
        }
        Ok(())
    }

    /// Before a loop body yields: each packed block pointer's scalars into
    /// its part variables, checked to still be a window of the same shape.
    pub(super) fn split_block_ptrs(&mut self, packed: &[PackedBlockPtr], span: Span) -> R<()> {
        for p in packed {
            let now = match self.lookup(&p.name) {
                Some(Val::BlockPtr(now)) if now.block_shape == p.template.block_shape => now.clone(),
                _ => {
                    return Err(Diagnostic::new(
                        span,
                        format!("`{}` must stay a block pointer of block shape {:?} through the loop", p.name, p.template.block_shape),
                    )
                    .with_hint("move it with `advance(ptr, offsets)`; make a block pointer of another shape under another name"))
                }
            };
            for (part, v) in p.parts.iter().zip(now.parts()) {
                self.assign(part, Val::Ir(v), span)?;
            }
        }
        Ok(())
    }
}
