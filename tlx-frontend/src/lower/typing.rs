//! Implicit typing made explicit: constants materialized, Triton's type
//! promotion, casts, and NumPy-style broadcasting, each inserted as IR ops.

use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use proc_macro2::Span;
use tlx_core::ir::{Elem, OpKind, ScalarType, Type, ValueId};

/// The common type of two element types, as Triton promotes them.
pub(super) fn promote(a: ScalarType, b: ScalarType) -> ScalarType {
    use ScalarType::*;
    if a == b {
        return a;
    }
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (x, y) if x.is_float() && !y.is_float() => x,
        (x, y) if y.is_float() && !x.is_float() => y,
        (x, y) if x.is_float() => {
            let (small, large) = if x.size_bytes() <= y.size_bytes() {
                (x, y)
            } else {
                (y, x)
            };
            if small.size_bytes() == large.size_bytes() {
                // f16 with bf16, or the two fp8 formats: neither holds the other.
                if large.size_bytes() == 1 {
                    F16
                } else {
                    F32
                }
            } else {
                large
            }
        }
        (x, y) => {
            if x.size_bytes() != y.size_bytes() {
                if x.size_bytes() > y.size_bytes() {
                    x
                } else {
                    y
                }
            } else if x.is_signed_int() {
                y
            } else {
                x
            }
        }
    }
}

/// The most elements a block tensor may have (Triton's limit too): it
/// lives in registers or shared memory, which hold far less.
pub(super) const MAX_TILE_ELEMENTS: usize = 1 << 20;

/// Refuses a block shape of more than [`MAX_TILE_ELEMENTS`] elements.
pub(super) fn check_tile_size(shape: &[usize], span: Span) -> R<()> {
    let numel = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .unwrap_or(usize::MAX);
    if numel <= MAX_TILE_ELEMENTS {
        return Ok(());
    }
    Err(Diagnostic::new(
        span,
        format!("a block of shape {shape:?} has {numel} elements; a block tensor holds at most {MAX_TILE_ELEMENTS}"),
    )
    .with_hint("a block is one program's tile, held in registers or shared memory: cover a larger tensor with more programs or a loop over smaller blocks"))
}

pub(super) fn broadcast_shapes(a: &[usize], b: &[usize], span: Span) -> R<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        let offset = rank - s.len();
        if i < offset {
            1
        } else {
            s[i - offset]
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(Diagnostic::new(
                span,
                format!("shapes {a:?} and {b:?} cannot be broadcast together"),
            )
            .with_hint("dimensions must match or be 1; insert dimensions with `x[(.., None)]`")),
        })
        .collect::<R<Vec<usize>>>()
        .and_then(|shape| check_tile_size(&shape, span).map(|()| shape))
}

impl Lowerer<'_> {
    pub(super) fn ty(&self, v: ValueId) -> Type {
        self.b.type_of(v).clone()
    }

    pub(super) fn scalar_elem(&self, v: ValueId, span: Span, what: &str) -> R<ScalarType> {
        self.expect_tensor(v, span, what)?;
        match self.b.type_of(v).elem() {
            Elem::Scalar(s) => Ok(s),
            Elem::Ptr(..) => Err(Diagnostic::new(span, format!("{what} cannot be a pointer"))
                .with_hint("load the value first with `load(ptr)`")),
        }
    }

    /// A `Constant` of type `ty`; the value is converted into the type's range (as `as` would).
    pub(super) fn constant(&mut self, c: ConstVal, ty: Type) -> ValueId {
        let s = ty.elem().scalar().unwrap_or(ScalarType::I32);
        self.b.push1(OpKind::Constant(c.cast(s).literal_for(s)), ty)
    }

    /// An IR value for `v`: constants get their default type.
    pub(super) fn materialize(&mut self, v: &Val, span: Span) -> R<ValueId> {
        match v {
            Val::Ir(id) => Ok(*id),
            Val::Const(c) => Ok(self.constant(*c, Type::scalar(c.default_type()))),
            Val::Tuple(_) => Err(
                Diagnostic::new(span, "a tuple cannot be used as a value here")
                    .with_hint("destructure it first: `let (a, b) = ...;`"),
            ),
            Val::Pipe(_) => Err(Diagnostic::new(
                span,
                "a pipe, endpoint or slot cannot be used as a value here",
            )
            .with_hint("use a slot's fields (`slot.x`), or call the endpoint's methods")),
            Val::BlockPtr(_) => Err(Diagnostic::new(
                span,
                "a block pointer cannot be used as a value here",
            )
            .with_hint("read its window with `load(ptr, boundary_check = (0, 1))`, move it with `advance(ptr, offsets)`")),
            Val::Mesh(_) => Err(Diagnostic::new(span, "a mesh cannot be used as a value here")
                .with_hint("read this rank with `shard_id(mesh, 0)` and the number of ranks with `shard_count(mesh, 0)`")),
            Val::Clc(_) => Err(Diagnostic::new(span, "a cluster-launch-control context cannot be used as a value here")
                .with_hint("pass it to `clc_producer(ctx, phase)` and `clc_consumer(ctx, phase)`")),
            Val::Unit => Err(Diagnostic::new(span, "this expression has no value")),
        }
    }

    /// `v` checked against a type annotation `s` (`let x: f32 = ...`, a
    /// helper's `a: f32`), as Rust checks one: a constant takes the type, a
    /// tensor or scalar must already have elements of `s` (no silent
    /// conversion: `.to(s)` says it).
    pub(super) fn annotated(&mut self, v: Val, s: ScalarType, what: &str, span: Span) -> R<Val> {
        let id = match &v {
            Val::Const(_) => return self.cast_val(v, s, span),
            Val::Ir(id) => *id,
            _ => {
                let id = self.materialize(&v, span)?;
                return Ok(Val::Ir(id));
            }
        };
        let ty = self.ty(id);
        match ty.elem() {
            Elem::Scalar(have) if have == s => Ok(v),
            Elem::Scalar(have) => {
                let found = if ty.rank() == 0 {
                    format!("a {have} scalar")
                } else {
                    format!("a {:?} tensor of {have}", ty.shape())
                };
                Err(Diagnostic::new(
                    span,
                    format!("{what} is annotated `{s}`, but the value is {found}"),
                )
                .with_hint(format!(
                    "convert it where it is made (`.to({s})`), or annotate it `{have}`"
                )))
            }
            Elem::Ptr(..) => Err(Diagnostic::new(
                span,
                format!("{what} is annotated `{s}`, but the value is a pointer"),
            )
            .with_hint("pointers take no annotation in kernels: drop it")),
        }
    }

    /// `v` converted to element type `s` (a constant folds, an IR value gets a `Cast`).
    pub(super) fn cast_val(&mut self, v: Val, s: ScalarType, span: Span) -> R<Val> {
        match v {
            Val::Const(c) => Ok(Val::Ir(self.constant(c.cast(s), Type::scalar(s)))),
            other => {
                let id = self.materialize(&other, span)?;
                Ok(Val::Ir(self.cast(id, s, span)?))
            }
        }
    }

    /// An error unless `v` is a block tensor (or scalar): a buffer,
    /// barrier or descriptor handle goes only to the primitives taking it.
    pub(super) fn expect_tensor(&self, v: ValueId, span: Span, what: &str) -> R<()> {
        match handle_noun(self.b.type_of(v)) {
            None => Ok(()),
            Some(handle) => Err(Diagnostic::new(span, format!("{what} must be a tensor, not {handle}"))
                .with_hint("TLX handles go to the primitives that take them; read a buffer with `local_load(view)`")),
        }
    }

    pub(super) fn cast(&mut self, v: ValueId, s: ScalarType, span: Span) -> R<ValueId> {
        self.expect_tensor(v, span, "a value")?;
        let ty = self.ty(v);
        match ty.elem() {
            Elem::Scalar(from) if from == s => Ok(v),
            Elem::Scalar(_) => Ok(self.b.push1(OpKind::Cast(v), ty.with_elem(Elem::Scalar(s)))),
            Elem::Ptr(..) => Err(Diagnostic::new(span, "a pointer cannot be cast")
                .with_hint("offset pointers with `+`; load values with `load`")),
        }
    }

    /// `v` broadcast to `shape`: scalars splat, missing leading dims are
    /// inserted with `ExpandDims`, size-1 dims stretch with `Broadcast`.
    pub(super) fn broadcast_to(&mut self, v: ValueId, shape: &[usize], span: Span) -> R<ValueId> {
        self.expect_tensor(v, span, "a value")?;
        let ty = self.ty(v);
        if ty.shape() == shape {
            return Ok(v);
        }
        if ty.is_scalar() {
            return Ok(self
                .b
                .push1(OpKind::Splat(v), ty.with_shape(shape.to_vec())));
        }
        if ty.rank() > shape.len() {
            return Err(Diagnostic::new(
                span,
                format!("cannot broadcast shape {:?} to {:?}", ty.shape(), shape),
            ));
        }
        let mut cur = v;
        let mut cur_shape = ty.shape().to_vec();
        while cur_shape.len() < shape.len() {
            cur_shape.insert(0, 1);
            cur = self.b.push1(
                OpKind::ExpandDims {
                    value: cur,
                    axis: 0,
                },
                ty.with_shape(cur_shape.clone()),
            );
        }
        for (have, want) in cur_shape.iter().zip(shape) {
            if have != want && *have != 1 {
                return Err(Diagnostic::new(
                    span,
                    format!("cannot broadcast shape {:?} to {:?}", ty.shape(), shape),
                )
                .with_hint("only dimensions of size 1 can stretch"));
            }
        }
        if cur_shape == shape {
            return Ok(cur);
        }
        Ok(self
            .b
            .push1(OpKind::Broadcast(cur), ty.with_shape(shape.to_vec())))
    }

    /// The element type values combine at: typed values promote; constants
    /// adopt it (an int constant with a bool gives i32, a float constant with
    /// an int gives f32).
    pub(super) fn common_elem(&self, vals: &[&Val], span: Span) -> R<ScalarType> {
        let mut elem: Option<ScalarType> = None;
        for v in vals {
            if let Val::Ir(id) = v {
                let s = self.scalar_elem(*id, span, "an operand")?;
                elem = Some(elem.map_or(s, |e| promote(e, s)));
            }
        }
        for v in vals {
            if let Val::Const(c) = v {
                elem = Some(match (elem, c) {
                    (None, c) => c.default_type(),
                    (Some(ScalarType::Bool), ConstVal::Int(_)) => ScalarType::I32,
                    (Some(e), ConstVal::Float(_)) if !e.is_float() => ScalarType::F32,
                    (Some(e), _) => e,
                });
            }
        }
        elem.ok_or_else(|| Diagnostic::new(span, "expected a value"))
    }

    /// Converts values to one element type and one shape, ready for an elementwise op.
    pub(super) fn unify(&mut self, vals: &[&Val], span: Span) -> R<Vec<ValueId>> {
        let elem = self.common_elem(vals, span)?;
        self.unify_as(vals, elem, span)
    }

    /// Converts values to element type `elem` and their common shape.
    pub(super) fn unify_as(
        &mut self,
        vals: &[&Val],
        elem: ScalarType,
        span: Span,
    ) -> R<Vec<ValueId>> {
        let mut shape = Vec::new();
        for v in vals {
            if let Val::Ir(id) = v {
                shape = broadcast_shapes(&shape, self.ty(*id).shape(), span)?;
            }
        }
        let mut out = Vec::with_capacity(vals.len());
        for v in vals {
            let id = match v {
                Val::Const(c) => self.constant(*c, Type::scalar(elem)),
                other => {
                    let id = self.materialize(other, span)?;
                    self.cast(id, elem, span)?
                }
            };
            out.push(self.broadcast_to(id, &shape, span)?);
        }
        Ok(out)
    }
}

/// What a value that is not a block tensor is, in the user's words.
pub(super) fn handle_noun(ty: &Type) -> Option<&'static str> {
    match ty {
        Type::Tensor(_) => None,
        Type::SharedMemory(_) => Some("shared-memory buffers (from `local_alloc`)"),
        Type::TensorMemory(_) => Some("tensor memory (from `local_alloc(..., storage = tmem)`)"),
        Type::Barriers(_) => Some("mbarriers (from `alloc_barriers`)"),
        Type::TensorDescriptor(_) => Some("a tensor descriptor"),
        Type::AsyncToken => Some("an async token"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType::*;

    #[test]
    fn promotion_follows_triton() {
        assert_eq!(promote(I32, F16), F16);
        assert_eq!(promote(F16, BF16), F32);
        assert_eq!(promote(I32, I64), I64);
        assert_eq!(promote(I32, U32), U32);
        assert_eq!(promote(Bool, I8), I8);
        assert_eq!(promote(F8E4M3, F16), F16);
        assert_eq!(promote(F8E4M3, F8E5M2), F16);
        assert_eq!(promote(F32, F64), F64);
        assert_eq!(promote(I64, F64), F64);
    }

    #[test]
    fn shapes_broadcast_numpy_style() {
        let s = Span::call_site();
        assert_eq!(broadcast_shapes(&[4, 1], &[8], s).ok(), Some(vec![4, 8]));
        assert_eq!(broadcast_shapes(&[], &[8], s).ok(), Some(vec![8]));
        assert!(broadcast_shapes(&[4], &[8], s).is_err());
    }
}
