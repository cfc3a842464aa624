//! Parsing of the kernel's Rust signature: const generics and parameters.

use super::{ConstParam, Signature};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{ParamKind, ScalarType};
use syn::spanned::Spanned;

const POINTEES: &[ScalarType] = &[
    ScalarType::F32,
    ScalarType::F16,
    ScalarType::BF16,
    ScalarType::F8E4M3,
    ScalarType::F8E5M2,
    ScalarType::I8,
    ScalarType::U8,
    ScalarType::I32,
    ScalarType::U32,
    ScalarType::I64,
];
const SCALARS: &[ScalarType] = &[
    ScalarType::I32,
    ScalarType::I64,
    ScalarType::U32,
    ScalarType::F32,
    ScalarType::Bool,
];

pub fn parse_signature(item: &syn::ItemFn) -> Result<Signature, Diagnostics> {
    let sig = &item.sig;
    let mut errors = Vec::new();
    if let Some(t) = &sig.asyncness {
        errors.push(Diagnostic::new(t.span(), "a kernel cannot be `async`"));
    }
    if let Some(t) = &sig.unsafety {
        errors.push(Diagnostic::new(t.span(), "a kernel cannot be `unsafe`"));
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        errors.push(
            Diagnostic::new(ty.span(), "a kernel returns nothing")
                .with_hint("write results to memory with `store(ptr, value)`"),
        );
    }
    let mut consts = Vec::new();
    for param in &sig.generics.params {
        match param {
            syn::GenericParam::Const(c) => match const_type(&c.ty) {
                Some(ty) => consts.push(ConstParam {
                    name: c.ident.clone(),
                    ty,
                }),
                None => errors.push(
                    Diagnostic::new(c.ty.span(), "unsupported const generic type")
                        .with_hint("use `usize`, `i32`, `i64`, `u32` or `bool`"),
                ),
            },
            other => errors.push(
                Diagnostic::new(other.span(), "a kernel takes only const generics")
                    .with_hint("write e.g. `const BLOCK: usize`"),
            ),
        }
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            syn::FnArg::Typed(pt) => match (&*pt.pat, param_kind(&pt.ty)) {
                (syn::Pat::Ident(id), Some(kind)) => params.push((id.ident.clone(), kind)),
                (syn::Pat::Ident(_), None) => errors.push(
                    Diagnostic::new(pt.ty.span(), "unsupported kernel parameter type").with_hint(
                        "use `Ptr<T>` (T one of f32 f16 bf16 f8e4m3 f8e5m2 i8 u8 i32 u32 i64) \
                         or a scalar `i32`, `i64`, `u32`, `f32`, `bool`",
                    ),
                ),
                (pat, _) => errors.push(
                    Diagnostic::new(pat.span(), "a kernel parameter must be a plain name")
                        .with_hint("write e.g. `x: Ptr<f32>`"),
                ),
            },
            syn::FnArg::Receiver(r) => {
                errors.push(Diagnostic::new(r.span(), "a kernel cannot take `self`"))
            }
        }
    }
    if !errors.is_empty() {
        return Err(Diagnostics(errors));
    }
    Ok(Signature {
        name: sig.ident.clone(),
        consts,
        params,
    })
}

fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

fn const_type(ty: &syn::Type) -> Option<ScalarType> {
    match type_name(ty)?.as_str() {
        "usize" | "i32" => Some(ScalarType::I32),
        "i64" => Some(ScalarType::I64),
        "u32" => Some(ScalarType::U32),
        "bool" => Some(ScalarType::Bool),
        _ => None,
    }
}

fn param_kind(ty: &syn::Type) -> Option<ParamKind> {
    if let Some(name) = type_name(ty) {
        let s = ScalarType::from_name(&name).filter(|s| SCALARS.contains(s))?;
        return Some(ParamKind::Scalar(s));
    }
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Ptr" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(inner) if args.args.len() == 1 => {
            let s = ScalarType::from_name(&type_name(inner)?)?;
            POINTEES.contains(&s).then_some(ParamKind::Ptr(s))
        }
        _ => None,
    }
}
