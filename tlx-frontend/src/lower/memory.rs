//! Memory builtins: `load`, `store` and the atomics, with their masks,
//! `other` values and cache/eviction/ordering options.

use super::calls::{choice, str_arg, CallArgs};
use super::typing::broadcast_shapes;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{
    cas_takes, AtomicOp, CacheModifier, Elem, EvictionPolicy, MemScope, MemSem, OpKind, ScalarType,
    Type, ValueId,
};

const CACHE: &[(&str, CacheModifier)] = &[
    ("", CacheModifier::None),
    (".ca", CacheModifier::Ca),
    (".cg", CacheModifier::Cg),
    (".cs", CacheModifier::Cs),
    (".wb", CacheModifier::Wb),
    (".wt", CacheModifier::Wt),
];
const EVICTION: &[(&str, EvictionPolicy)] = &[
    ("", EvictionPolicy::Normal),
    ("evict_normal", EvictionPolicy::Normal),
    ("evict_first", EvictionPolicy::EvictFirst),
    ("evict_last", EvictionPolicy::EvictLast),
];
const SEM: &[(&str, MemSem)] = &[
    ("relaxed", MemSem::Relaxed),
    ("acquire", MemSem::Acquire),
    ("release", MemSem::Release),
    ("acq_rel", MemSem::AcqRel),
];
const SCOPE: &[(&str, MemScope)] = &[
    ("cta", MemScope::Cta),
    ("gpu", MemScope::Gpu),
    ("sys", MemScope::System),
];

impl<'a> Lowerer<'a> {
    pub(super) fn pointee(&self, ptr: ValueId, span: Span) -> R<ScalarType> {
        self.ty(ptr).elem().pointee().ok_or_else(|| {
            Diagnostic::new(
                span,
                format!("expected a pointer, found `{}`", self.ty(ptr)),
            )
            .with_hint("pass a `Ptr<T>` parameter plus offsets, e.g. `x + offs`")
        })
    }

    /// Broadcasts a pointer and its operands to one shape; operands are converted to the pointee type.
    fn unify_ptr_operands(
        &mut self,
        ptr: ValueId,
        operands: &[Val],
        pointee: ScalarType,
        span: Span,
    ) -> R<Vec<ValueId>> {
        let mut shape = self.ty(ptr).shape().to_vec();
        let mut ids = Vec::new();
        for v in operands {
            let id = match v {
                Val::Const(c) => self.constant(*c, Type::scalar(pointee)),
                other => {
                    let id = self.materialize(other, span)?;
                    self.cast(id, pointee, span)?
                }
            };
            shape = broadcast_shapes(&shape, self.ty(id).shape(), span)?;
            ids.push(id);
        }
        let mut out = vec![self.broadcast_to(ptr, &shape, span)?];
        for id in ids {
            out.push(self.broadcast_to(id, &shape, span)?);
        }
        Ok(out)
    }

    /// A mask broadcast to `shape`, checked to be bool.
    fn mask_arg(&mut self, e: Option<&'a Expr>) -> R<Option<ValueId>> {
        let Some(e) = e else { return Ok(None) };
        let v = self.lower_expr(e)?;
        let id = self.materialize(&v, e.span())?;
        if self.scalar_elem(id, e.span(), "a mask")? != ScalarType::Bool {
            return Err(Diagnostic::new(
                e.span(),
                format!("a mask must be `bool`, found `{}`", self.ty(id)),
            )
            .with_hint("build masks with comparisons, e.g. `offs < n`"));
        }
        Ok(Some(id))
    }

    pub(super) fn load(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(
            &[
                "ptr",
                "mask",
                "other",
                "cache_modifier",
                "eviction_policy",
                "volatile",
                "boundary_check",
                "padding_option",
            ],
            1,
        )?;
        let span = args.span;
        let (ptr, mask, other) = match self.val_arg(a[0])? {
            Val::BlockPtr(p) => {
                if let Some(e) = a[1].or(a[2]) {
                    return Err(Diagnostic::new(e.span(), "a block pointer's load takes no `mask` or `other`")
                        .with_hint("mask its edges with `boundary_check = (0, 1)` and fill them with `padding_option = \"zero\"` (or `\"nan\"`)"));
                }
                let checked = self.boundary_check(a[6])?;
                let (ptr, mask) = self.block_ptr_addresses(&p, &checked, span)?;
                let other = match a[7].map(str_arg).transpose()?.as_deref() {
                    None | Some("") => None,
                    Some("zero") => Some(Val::Const(ConstVal::Int(0))),
                    Some("nan") => Some(Val::Const(ConstVal::Float(f64::NAN))),
                    Some(other) => {
                        return Err(Diagnostic::new(span, format!("unknown `padding_option` \"{other}\""))
                            .with_hint("write \"zero\" or \"nan\" (or leave it out: out-of-bounds elements are then undefined)"))
                    }
                };
                (ptr, mask, other)
            }
            v => {
                if let Some(e) = a[6].or(a[7]) {
                    return Err(Diagnostic::new(
                        e.span(),
                        "`boundary_check` and `padding_option` apply to block pointers",
                    )
                    .with_hint("for a tensor of pointers give `mask = ...` and `other = ...`"));
                }
                let ptr = self.materialize(&v, self.expr_arg(a[0])?.span())?;
                let mask = self.mask_arg(a[1])?;
                let other = match a[2] {
                    Some(e) => Some(self.lower_expr(e)?),
                    None => None,
                };
                (ptr, mask, other)
            }
        };
        let pointee = self.pointee(ptr, self.expr_arg(a[0])?.span())?;
        if matches!(other, Some(Val::Const(ConstVal::Float(x))) if x.is_nan())
            && !pointee.is_float()
        {
            return Err(Diagnostic::new(
                span,
                format!("`padding_option = \"nan\"` needs float elements, found `{pointee}`"),
            )
            .with_hint("pad integers with `padding_option = \"zero\"`"));
        }
        let cache = choice(a[3], CACHE, CacheModifier::None)?;
        let eviction = choice(a[4], EVICTION, EvictionPolicy::Normal)?;
        let volatile = self.const_bool_or(a[5], false)?;
        let mut shape = self.ty(ptr).shape().to_vec();
        if let Some(m) = mask {
            shape = broadcast_shapes(&shape, self.ty(m).shape(), span)?;
        }
        let other = match other {
            Some(v) => {
                let ids = self.unify_ptr_operands(ptr, &[v], pointee, span)?;
                shape = broadcast_shapes(&shape, self.ty(ids[1]).shape(), span)?;
                Some(ids[1])
            }
            None => None,
        };
        let ptr = self.broadcast_to(ptr, &shape, span)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape, span)?),
            None => None,
        };
        let other = match other {
            Some(o) => Some(self.broadcast_to(o, &shape, span)?),
            None => None,
        };
        let ty = Type::tensor(Elem::Scalar(pointee), shape);
        Ok(Val::Ir(self.b.push1(
            OpKind::Load {
                ptr,
                mask,
                other,
                cache,
                eviction,
                volatile,
            },
            ty,
        )))
    }

    pub(super) fn store(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let a = args.bind(
            &[
                "ptr",
                "value",
                "mask",
                "cache_modifier",
                "eviction_policy",
                "boundary_check",
            ],
            2,
        )?;
        let span = args.span;
        let (ptr, mask) = match self.val_arg(a[0])? {
            Val::BlockPtr(p) => {
                if let Some(e) = a[2] {
                    return Err(Diagnostic::new(
                        e.span(),
                        "a block pointer's store takes no `mask`",
                    )
                    .with_hint("mask its edges with `boundary_check = (0, 1)`"));
                }
                let checked = self.boundary_check(a[5])?;
                self.block_ptr_addresses(&p, &checked, span)?
            }
            v => {
                if let Some(e) = a[5] {
                    return Err(Diagnostic::new(
                        e.span(),
                        "`boundary_check` applies to block pointers",
                    )
                    .with_hint("for a tensor of pointers give `mask = ...`"));
                }
                (
                    self.materialize(&v, self.expr_arg(a[0])?.span())?,
                    self.mask_arg(a[2])?,
                )
            }
        };
        let pointee = self.pointee(ptr, self.expr_arg(a[0])?.span())?;
        let value = self.val_arg(a[1])?;
        let cache = choice(a[3], CACHE, CacheModifier::None)?;
        let eviction = choice(a[4], EVICTION, EvictionPolicy::Normal)?;
        let (ptr, value, mask) = self.ptr_value_mask(ptr, value, mask, pointee, span)?;
        self.b.push(
            OpKind::Store {
                ptr,
                value,
                mask,
                cache,
                eviction,
            },
            vec![],
        );
        Ok(Val::Unit)
    }

    /// The pointer, value and mask of a store or atomic, converted to the
    /// pointee type and broadcast to one common shape.
    pub(super) fn ptr_value_mask(
        &mut self,
        ptr: ValueId,
        value: Val,
        mask: Option<ValueId>,
        pointee: ScalarType,
        span: Span,
    ) -> R<(ValueId, ValueId, Option<ValueId>)> {
        let ids = self.unify_ptr_operands(ptr, &[value], pointee, span)?;
        let mut shape = self.ty(ids[0]).shape().to_vec();
        if let Some(m) = mask {
            shape = broadcast_shapes(&shape, self.ty(m).shape(), span)?;
        }
        let ptr = self.broadcast_to(ids[0], &shape, span)?;
        let value = self.broadcast_to(ids[1], &shape, span)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape, span)?),
            None => None,
        };
        Ok((ptr, value, mask))
    }

    /// `name` (`atomic_add`, ...) performing `op`.
    pub(super) fn atomic_rmw(
        &mut self,
        name: &str,
        op: AtomicOp,
        a: &[Option<&'a Expr>],
        span: Span,
    ) -> R<Val> {
        let ptr = self.ir_arg(a[0])?;
        let pointee = self.pointee(ptr, span)?;
        if !op.takes(pointee) {
            return Err(Diagnostic::new(
                span,
                format!("`{name}` has no PTX instruction for {pointee} values"),
            )
            .with_hint(atomic_hint(pointee)));
        }
        let value = self.val_arg(a[1])?;
        let mask = self.mask_arg(a[2])?;
        let sem = choice(a[3], SEM, MemSem::default())?;
        let scope = choice(a[4], SCOPE, MemScope::default())?;
        let (ptr, value, mask) = self.ptr_value_mask(ptr, value, mask, pointee, span)?;
        let ty = self.ty(value);
        Ok(Val::Ir(self.b.push1(
            OpKind::AtomicRmw {
                op,
                ptr,
                value,
                mask,
                sem,
                scope,
            },
            ty,
        )))
    }

    pub(super) fn atomic_cas(&mut self, a: &[Option<&'a Expr>], span: Span) -> R<Val> {
        let ptr = self.ir_arg(a[0])?;
        let pointee = self.pointee(ptr, span)?;
        if !cas_takes(pointee) {
            return Err(Diagnostic::new(
                span,
                format!("`atomic_cas` has no PTX instruction for {pointee} values"),
            )
            .with_hint(
                "compare-and-swap takes 32- and 64-bit values (i32, u32, i64, f32, f64): keep \
                 the values it updates in a buffer of one of those",
            ));
        }
        let (cmp, val) = (self.val_arg(a[1])?, self.val_arg(a[2])?);
        let ids = self.unify_ptr_operands(ptr, &[cmp, val], pointee, span)?;
        let sem = choice(a[3], SEM, MemSem::default())?;
        let scope = choice(a[4], SCOPE, MemScope::default())?;
        let ty = self.ty(ids[1]);
        Ok(Val::Ir(self.b.push1(
            OpKind::AtomicCas {
                ptr: ids[0],
                cmp: ids[1],
                value: ids[2],
                sem,
                scope,
            },
            ty,
        )))
    }
}

/// What to write instead of an atomic PTX lacks for `s` values.
fn atomic_hint(s: ScalarType) -> &'static str {
    match s {
        ScalarType::F32 | ScalarType::F64 => {
            "floats have `atomic_add` and `atomic_xchg`; for a maximum or minimum, loop on \
             `atomic_cas`, or store an order-preserving integer encoding of the value"
        }
        ScalarType::F16 | ScalarType::BF16 => {
            "16-bit floats have `atomic_add` only: for the other operations keep the values in \
             an f32 buffer"
        }
        _ => {
            "PTX's atomics take 32- and 64-bit integers (i32, u32, i64), and floats for \
             `atomic_add`: keep the values in an i32 buffer (a counter of bytes or flags too)"
        }
    }
}
