//! Parsing of the `#[tlx::kernel(...)]` attribute: options, target
//! architectures and the list of const-generic configurations.

use super::{ConfigAttr, KernelAttr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{Arch, KernelOptions};
use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Token};

const ATTR_HINT: &str = "write e.g. `#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024)])]`";

pub fn parse_attr(attr: TokenStream) -> Result<KernelAttr, Diagnostics> {
    let entries = Punctuated::<Expr, Token![,]>::parse_terminated
        .parse2(attr)
        .map_err(|e| Diagnostic::new(e.span(), e.to_string()).with_hint(ATTR_HINT))?;
    let mut options = KernelOptions::default();
    let mut arches = None;
    let mut configs = Vec::new();
    let mut errors = Vec::new();
    for entry in &entries {
        let result = (|| -> Result<(), Diagnostic> {
            let (key, value) = key_value(entry)?;
            match key.as_str() {
                "num_warps" | "num_stages" => set_option(&mut options, &key, value),
                "arch" => {
                    arches = Some(parse_arches(value)?);
                    Ok(())
                }
                "configs" => {
                    configs = parse_configs(value)?;
                    Ok(())
                }
                _ => Err(Diagnostic::new(
                    entry.span(),
                    format!("unknown kernel attribute key `{key}`"),
                )
                .with_hint("the keys are `num_warps`, `num_stages`, `arch` and `configs`")),
            }
        })();
        if let Err(e) = result {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(Diagnostics(errors));
    }
    let arches = match arches {
        Some(a) => a,
        None => arches_from_env()?,
    };
    // Options given at the top apply to every config unless the config overrides them.
    for config in &mut configs {
        if config.options.num_warps == UNSET {
            config.options.num_warps = options.num_warps;
        }
        if config.options.num_stages == UNSET {
            config.options.num_stages = options.num_stages;
        }
    }
    Ok(KernelAttr {
        options,
        arches,
        configs,
    })
}

/// Marks a config option the config does not override (valid values are >= 1).
const UNSET: u32 = 0;

fn arches_from_env() -> Result<Vec<Arch>, Diagnostic> {
    let Ok(list) = std::env::var("TLX_ARCH") else {
        return Ok(vec![Arch::Sm90a]);
    };
    list.split(',')
        .map(|name| {
            Arch::from_name(name.trim()).ok_or_else(|| {
                Diagnostic::new(
                    Span::call_site(),
                    format!("unknown architecture `{}` in TLX_ARCH", name.trim()),
                )
                .with_hint(arch_hint())
            })
        })
        .collect()
}

fn arch_hint() -> String {
    let names: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
    format!("the supported architectures are {}", names.join(", "))
}

fn key_value(entry: &Expr) -> Result<(String, &Expr), Diagnostic> {
    if let Expr::Assign(assign) = entry {
        if let Expr::Path(p) = &*assign.left {
            if let Some(ident) = p.path.get_ident() {
                return Ok((ident.to_string(), &assign.right));
            }
        }
    }
    Err(Diagnostic::new(entry.span(), "expected `key = value`").with_hint(ATTR_HINT))
}

fn int_value(expr: &Expr) -> Result<i64, Diagnostic> {
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i
            .base10_parse::<i64>()
            .map_err(|e| Diagnostic::new(i.span(), e.to_string())),
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(b),
            ..
        }) => Ok(i64::from(b.value)),
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => Ok(-int_value(expr)?),
        _ => Err(Diagnostic::new(expr.span(), "expected an integer literal")),
    }
}

fn set_option(options: &mut KernelOptions, key: &str, value: &Expr) -> Result<(), Diagnostic> {
    let mut partial = PartialOptions::default();
    set_partial(&mut partial, key, value)?;
    options.num_warps = partial.num_warps.unwrap_or(options.num_warps);
    options.num_stages = partial.num_stages.unwrap_or(options.num_stages);
    Ok(())
}

/// Options a config overrides; `None` keeps the kernel-level value.
#[derive(Default)]
struct PartialOptions {
    num_warps: Option<u32>,
    num_stages: Option<u32>,
}

fn set_partial(options: &mut PartialOptions, key: &str, value: &Expr) -> Result<(), Diagnostic> {
    let v = int_value(value)?;
    if key == "num_warps" {
        if ![1, 2, 4, 8, 16, 32].contains(&v) {
            return Err(
                Diagnostic::new(value.span(), format!("num_warps = {v} is not supported"))
                    .with_hint("use 1, 2, 4, 8, 16 or 32"),
            );
        }
        options.num_warps = Some(v as u32);
    } else {
        if !(1..=16).contains(&v) {
            return Err(Diagnostic::new(
                value.span(),
                format!("num_stages = {v} is not supported"),
            )
            .with_hint("use a value from 1 to 16"));
        }
        options.num_stages = Some(v as u32);
    }
    Ok(())
}

fn parse_arches(value: &Expr) -> Result<Vec<Arch>, Diagnostic> {
    let items: Vec<&Expr> = match value {
        Expr::Array(a) => a.elems.iter().collect(),
        other => vec![other],
    };
    items
        .into_iter()
        .map(|item| match item {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Arch::from_name(&s.value()).ok_or_else(|| {
                Diagnostic::new(s.span(), format!("unknown architecture `{}`", s.value()))
                    .with_hint(arch_hint())
            }),
            other => Err(
                Diagnostic::new(other.span(), "expected an architecture name string").with_hint(
                    "write e.g. `arch = \"sm_90a\"` or `arch = [\"sm_90a\", \"sm_100a\"]`",
                ),
            ),
        })
        .collect()
}

fn parse_configs(value: &Expr) -> Result<Vec<ConfigAttr>, Diagnostic> {
    let Expr::Array(list) = value else {
        return Err(Diagnostic::new(value.span(), "expected a list of configs")
            .with_hint("write e.g. `configs = [(BLOCK = 1024), (BLOCK = 4096, num_warps = 8)]`"));
    };
    list.elems.iter().map(parse_config).collect()
}

fn parse_config(config: &Expr) -> Result<ConfigAttr, Diagnostic> {
    let entries: Vec<&Expr> = match config {
        Expr::Paren(p) => vec![&*p.expr],
        Expr::Tuple(t) => t.elems.iter().collect(),
        other => {
            return Err(
                Diagnostic::new(other.span(), "expected a parenthesized config")
                    .with_hint("write e.g. `(BLOCK = 1024, num_warps = 8)`"),
            )
        }
    };
    let mut consts: Vec<(String, i64)> = Vec::new();
    let mut partial = PartialOptions::default();
    for entry in entries {
        let (key, value) = key_value(entry)?;
        if key == "num_warps" || key == "num_stages" {
            set_partial(&mut partial, &key, value)?;
        } else if consts.iter().any(|(k, _)| *k == key) {
            return Err(Diagnostic::new(
                entry.span(),
                format!("`{key}` is given twice in this config"),
            ));
        } else {
            consts.push((key, int_value(value)?));
        }
    }
    Ok(ConfigAttr {
        consts,
        options: KernelOptions {
            num_warps: partial.num_warps.unwrap_or(UNSET),
            num_stages: partial.num_stages.unwrap_or(UNSET),
        },
    })
}
