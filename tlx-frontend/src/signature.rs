//! Parsing of the kernel's Rust signature: const generics and parameters.

use super::{BlockDim, ConstParam, SigParam, Signature};
use crate::diag::{Diagnostic, Diagnostics};
use syn::spanned::Spanned;
use tlx_core::ir::{ParamKind, ScalarType};

const POINTEES: &[ScalarType] = &[
    ScalarType::F32,
    ScalarType::F64,
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
    ScalarType::F64,
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
                    written: c.ty.clone(),
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
                        "use `Ptr<T>` (T one of f32 f64 f16 bf16 f8e4m3 f8e5m2 i8 u8 i32 u32 \
                         i64), `Strided<T, N>` (a pointer with N = 1 to 4 extents and strides), \
                         `SymPtr<T>` (a symmetric buffer of a mesh), `Mesh` or `Mesh<N>` (N = 2 or 3 axes), \
                         a scalar `i32`, `i64`, `u32`, `f32`, `f64`, `bool`, or a tensor \
                         descriptor \
                         `TensorDesc<T, BLOCK_0, BLOCK_1, ...>`",
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

/// `Mesh<N>` with `N` from 1 to `MAX_MESH_AXES`.
fn mesh_axes(ty: &syn::Type) -> Option<usize> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let [syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Int(n),
        ..
    }))] = args.args.iter().collect::<Vec<_>>()[..]
    else {
        return None;
    };
    let axes: usize = n.base10_parse().ok()?;
    (last.ident == "Mesh" && (1..=tlx_core::ir::MAX_MESH_AXES).contains(&axes)).then_some(axes)
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

fn param_kind(ty: &syn::Type) -> Option<SigParam> {
    if type_name(ty).as_deref() == Some("Mesh") {
        return Some(SigParam::Mesh { axes: 1 });
    }
    if let Some(axes) = mesh_axes(ty) {
        return Some(SigParam::Mesh { axes });
    }
    if let Some(name) = type_name(ty) {
        let s = ScalarType::from_name(&name).filter(|s| SCALARS.contains(s))?;
        return Some(SigParam::Plain(ParamKind::Scalar(s)));
    }
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut generics = args.args.iter();
    let elem = match generics.next()? {
        syn::GenericArgument::Type(inner) => ScalarType::from_name(&type_name(inner)?)?,
        _ => return None,
    };
    if !POINTEES.contains(&elem) {
        return None;
    }
    match last.ident.to_string().as_str() {
        "Ptr" if args.args.len() == 1 => Some(SigParam::Plain(ParamKind::Ptr(elem))),
        "SymPtr" if args.args.len() == 1 => Some(SigParam::Sym { elem }),
        "Strided" if args.args.len() == 2 => match generics.next()? {
            syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            })) => {
                let rank: usize = i.base10_parse().ok()?;
                (1..=super::MAX_STRIDED_RANK)
                    .contains(&rank)
                    .then_some(SigParam::Strided { elem, rank })
            }
            _ => None,
        },
        "TensorDesc" if (2..=6).contains(&args.args.len()) => {
            let dims: Vec<&syn::GenericArgument> = generics.collect();
            let block = dims
                .iter()
                .copied()
                .map(block_dim)
                .collect::<Option<Vec<_>>>()?;
            Some(SigParam::Desc {
                elem,
                block,
                span: ty.span(),
                dim_spans: dims.iter().map(|d| d.span()).collect(),
            })
        }
        _ => None,
    }
}

/// `BLOCK_M` (a const generic) or `64` in `TensorDesc<T, ...>`.
fn block_dim(arg: &syn::GenericArgument) -> Option<BlockDim> {
    match arg {
        syn::GenericArgument::Type(t) => type_name(t).map(BlockDim::Const),
        syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        })) => i.base10_parse().ok().map(BlockDim::Literal),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_consts_and_params() {
        let item: syn::ItemFn = syn::parse_quote!(
            fn k<const B: usize, const FLAG: bool>(x: Ptr<bf16>, n: i64, on: bool) {}
        );
        let sig = parse_signature(&item).expect("valid signature");
        assert_eq!(sig.name, "k");
        let consts: Vec<(String, ScalarType)> = sig
            .consts
            .iter()
            .map(|c| (c.name.to_string(), c.ty))
            .collect();
        assert_eq!(
            consts,
            [
                ("B".to_string(), ScalarType::I32),
                ("FLAG".to_string(), ScalarType::Bool)
            ]
        );
        let params: Vec<ParamKind> = sig
            .params
            .iter()
            .filter_map(|p| match p.1 {
                SigParam::Plain(kind) => Some(kind),
                _ => None,
            })
            .collect();
        assert_eq!(
            params,
            [
                ParamKind::Ptr(ScalarType::BF16),
                ParamKind::Scalar(ScalarType::I64),
                ParamKind::Scalar(ScalarType::Bool)
            ]
        );
    }

    #[test]
    fn rejects_type_generics_and_return_types() {
        let item: syn::ItemFn = syn::parse_quote!(
            fn k<T>(x: Ptr<bool>) -> i32 {}
        );
        let err = parse_signature(&item).expect_err("three errors");
        let messages: Vec<&str> = err.0.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "a kernel returns nothing",
                "a kernel takes only const generics",
                "unsupported kernel parameter type"
            ]
        );
    }
}
