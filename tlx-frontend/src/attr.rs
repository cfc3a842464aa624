//! Parsing of the `#[tlx::kernel(...)]` attribute: options, target
//! architectures and the list of const-generic configurations.

use super::{ConfigAttr, KernelAttr};
use crate::diag::{Diagnostic, Diagnostics};
use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Token};
use tlx_core::ir::{Arch, KernelOptions};

const ATTR_HINT: &str = "write e.g. `#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024)])]`";

pub fn parse_attr(attr: TokenStream) -> Result<KernelAttr, Diagnostics> {
    let entries = Punctuated::<Expr, Token![,]>::parse_terminated
        .parse2(attr)
        .map_err(|e| Diagnostic::new(e.span(), e.to_string()).with_hint(ATTR_HINT))?;
    let mut options = KernelOptions::default();
    let mut arches = None;
    let mut configs = Vec::new();
    let mut check_protocol = true;
    let mut check_bounds = None;
    let mut timeline = None;
    let mut mbar_timeout_ns = None;
    let mut launch_pdl = false;
    let mut autotune_key = None;
    let mut restore = Vec::new();
    let mut errors = Vec::new();
    for entry in &entries {
        let result = (|| -> Result<(), Diagnostic> {
            let (key, value) = key_value(entry)?;
            match key.as_str() {
                "num_warps" | "num_stages" | "ctas_per_cga" | "maxnreg" => {
                    set_option(&mut options, &key, value)
                }
                "arch" => {
                    arches = Some(parse_arches(value)?);
                    Ok(())
                }
                "configs" => {
                    configs = parse_configs(value)?;
                    Ok(())
                }
                "check_protocol" => {
                    check_protocol = parse_bool(value, "check_protocol = false")?;
                    Ok(())
                }
                "check_bounds" => {
                    check_bounds = Some(parse_bool(value, "check_bounds = true")?);
                    Ok(())
                }
                "timeline" => {
                    timeline = Some(parse_bool(value, "timeline = true")?);
                    Ok(())
                }
                "mbar_timeout_ns" => {
                    mbar_timeout_ns = Some(timeout_value(value)?);
                    Ok(())
                }
                "launch_pdl" => {
                    launch_pdl = parse_bool(value, "launch_pdl = true")?;
                    Ok(())
                }
                "key" => {
                    autotune_key = Some(parameter_names(value, "key = [m, n, k]")?);
                    Ok(())
                }
                "restore" => {
                    restore = parameter_names(value, "restore = [c]")?;
                    Ok(())
                }
                _ => Err(Diagnostic::new(
                    entry.span(),
                    format!("unknown kernel attribute key `{key}`"),
                )
                .with_hint(
                    "the keys are `num_warps`, `num_stages`, `ctas_per_cga`, `maxnreg`, `arch`, \
                     `configs`, `check_protocol`, `check_bounds`, `timeline`, \
                     `mbar_timeout_ns`, `launch_pdl`, `key` and `restore`",
                )),
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
    options.mbar_timeout_ns = match mbar_timeout_ns {
        Some(ns) => Some(ns),
        None => timeout_from_env()?,
    };
    options.launch_pdl = launch_pdl;
    // Options given at the top apply to every config unless the config overrides them.
    for config in &mut configs {
        if config.options.num_warps == UNSET {
            config.options.num_warps = options.num_warps;
        }
        if config.options.num_stages == UNSET {
            config.options.num_stages = options.num_stages;
        }
        if config.options.cluster == [UNSET; 3] {
            config.options.cluster = options.cluster;
        }
        config.options.maxnreg = config.options.maxnreg.or(options.maxnreg);
        config.options.mbar_timeout_ns = options.mbar_timeout_ns;
        config.options.launch_pdl = options.launch_pdl;
    }
    Ok(KernelAttr {
        options,
        arches,
        configs,
        check_protocol,
        check_bounds: match check_bounds {
            Some(on) => on,
            None => check_bounds_from_env()?,
        },
        timeline: timeline.unwrap_or_else(timeline_from_env),
        autotune_key,
        restore,
    })
}

/// `[a, b, ...]`: names of the kernel's parameters (checked against the
/// signature where the launcher is made).
fn parameter_names(value: &Expr, example: &str) -> Result<Vec<syn::Ident>, Diagnostic> {
    let Expr::Array(list) = value else {
        return Err(
            Diagnostic::new(value.span(), "expected a list of parameter names")
                .with_hint(format!("e.g. `{example}`")),
        );
    };
    list.elems
        .iter()
        .map(|e| {
            let name = match e {
                Expr::Path(p) => p.path.get_ident().cloned(),
                _ => None,
            };
            name.ok_or_else(|| {
                Diagnostic::new(e.span(), "expected a parameter name")
                    .with_hint(format!("e.g. `{example}`"))
            })
        })
        .collect()
}

/// `TLX_MBAR_TIMEOUT_NS`: the timeout of every kernel that does not set one.
fn timeout_from_env() -> Result<Option<u64>, Diagnostic> {
    match std::env::var("TLX_MBAR_TIMEOUT_NS") {
        Ok(text) if !text.trim().is_empty() => match text.trim().parse::<u64>() {
            Ok(ns) if ns > 0 => Ok(Some(ns)),
            _ => Err(Diagnostic::new(
                Span::call_site(),
                format!("TLX_MBAR_TIMEOUT_NS={text} is not a positive number of nanoseconds"),
            )
            .with_hint("e.g. TLX_MBAR_TIMEOUT_NS=1000000000 for one second, or unset it")),
        },
        _ => Ok(None),
    }
}

/// `TLX_CHECK_BOUNDS`: checked global accesses for every kernel that does
/// not say otherwise.
fn check_bounds_from_env() -> Result<bool, Diagnostic> {
    match std::env::var("TLX_CHECK_BOUNDS") {
        Ok(text) => match text.trim() {
            "" | "0" => Ok(false),
            "1" => Ok(true),
            other => Err(Diagnostic::new(
                Span::call_site(),
                format!("TLX_CHECK_BOUNDS={other} is not 0 or 1"),
            )
            .with_hint(
                "TLX_CHECK_BOUNDS=1 checks every global access at run time; unset it for none",
            )),
        },
        Err(_) => Ok(false),
    }
}

/// `TLX_TRACE` set at build time: every kernel that does not say otherwise
/// records GPU timelines, so that `TLX_TRACE=out.json cargo run ...`
/// builds what it runs. Its value, the file, matters only when the binary
/// runs.
fn timeline_from_env() -> bool {
    std::env::var_os("TLX_TRACE").is_some_and(|v| !v.is_empty())
}

/// A positive number of nanoseconds.
fn timeout_value(value: &Expr) -> Result<u64, Diagnostic> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => match i.base10_parse::<u64>() {
            Ok(ns) if ns > 0 => Ok(ns),
            _ => Err(Diagnostic::new(
                value.span(),
                "mbar_timeout_ns must be a positive number of nanoseconds",
            )
            .with_hint("e.g. `mbar_timeout_ns = 1_000_000_000` for one second")),
        },
        _ => Err(
            Diagnostic::new(value.span(), "expected a number of nanoseconds")
                .with_hint("e.g. `mbar_timeout_ns = 1_000_000_000` for one second"),
        ),
    }
}

/// `true` or `false`.
fn parse_bool(value: &Expr, example: &str) -> Result<bool, Diagnostic> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(b),
            ..
        }) => Ok(b.value),
        _ => Err(Diagnostic::new(value.span(), "expected `true` or `false`")
            .with_hint(format!("e.g. `{example}`"))),
    }
}

/// Marks a config option the config does not override (valid values are >= 1).
const UNSET: u32 = 0;

fn arches_from_env() -> Result<Vec<Arch>, Diagnostic> {
    match std::env::var("TLX_ARCH") {
        Ok(list) => arch_list(&list),
        Err(_) => Ok(vec![Arch::Sm90a]),
    }
}

/// A comma-separated list of architecture names, as `TLX_ARCH` gives them.
fn arch_list(list: &str) -> Result<Vec<Arch>, Diagnostic> {
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

/// An integer literal, or in a config the name of one of its constants
/// (`(NW = 8, num_warps = NW)`).
fn option_value(expr: &Expr, consts: &[(String, i64)]) -> Result<i64, Diagnostic> {
    if let Expr::Path(p) = expr {
        if let Some(ident) = p.path.get_ident() {
            return consts
                .iter()
                .find(|(name, _)| ident == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    Diagnostic::new(
                        expr.span(),
                        format!("`{ident}` is not a constant of this config"),
                    )
                    .with_hint("use an integer, or a constant set in the same config")
                });
        }
    }
    int_value(expr)
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
    set_partial(&mut partial, key, value, &[])?;
    options.num_warps = partial.num_warps.unwrap_or(options.num_warps);
    options.num_stages = partial.num_stages.unwrap_or(options.num_stages);
    options.cluster = partial.cluster.unwrap_or(options.cluster);
    options.maxnreg = partial.maxnreg.or(options.maxnreg);
    Ok(())
}

/// Options a config overrides; `None` keeps the kernel-level value.
#[derive(Default)]
struct PartialOptions {
    num_warps: Option<u32>,
    num_stages: Option<u32>,
    cluster: Option<[u32; 3]>,
    maxnreg: Option<u32>,
}

/// The register caps ptxas accepts for `.maxnreg` (a thread has at most 255).
const MIN_MAXNREG: i64 = 16;
const MAX_MAXNREG: i64 = 255;

/// The most programs a cluster may have: 8 run on every sm_90+ GPU (the
/// portable size), 16 on H100 and H200, where the runtime opts a kernel in.
const MAX_CLUSTER: i64 = 16;

const CLUSTER_HINT: &str = "write `ctas_per_cga = 2` or `ctas_per_cga = (2, 1, 1)`: at most 16 \
     programs per cluster (more than 8 needs a GPU that allows non-portable clusters, as H100 does)";

/// `ctas_per_cga = k` (a cluster of `k` programs along x) or `(x, y, z)`.
fn cluster_value(value: &Expr, consts: &[(String, i64)]) -> Result<[u32; 3], Diagnostic> {
    let dims: Vec<i64> = match value {
        Expr::Tuple(t) => t
            .elems
            .iter()
            .map(|e| option_value(e, consts))
            .collect::<Result<_, _>>()?,
        Expr::Paren(p) => vec![option_value(&p.expr, consts)?],
        other => vec![option_value(other, consts)?],
    };
    let bad = |message: String| Diagnostic::new(value.span(), message).with_hint(CLUSTER_HINT);
    if dims.is_empty() || dims.len() > 3 {
        return Err(bad(format!(
            "`ctas_per_cga` has {} dimensions, not 1 to 3",
            dims.len()
        )));
    }
    if let Some(d) = dims.iter().find(|d| **d < 1) {
        return Err(bad(format!("a cluster dimension of {d} is not allowed")));
    }
    let size = dims.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d));
    if size.is_none_or(|s| s > MAX_CLUSTER) {
        return Err(bad(format!(
            "a cluster of {} programs is more than {MAX_CLUSTER}",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(" x ")
        )));
    }
    let mut cluster = [1u32; 3];
    for (slot, d) in cluster.iter_mut().zip(dims) {
        *slot = d as u32;
    }
    Ok(cluster)
}

fn set_partial(
    options: &mut PartialOptions,
    key: &str,
    value: &Expr,
    consts: &[(String, i64)],
) -> Result<(), Diagnostic> {
    if key == "ctas_per_cga" {
        options.cluster = Some(cluster_value(value, consts)?);
        return Ok(());
    }
    let v = option_value(value, consts)?;
    if key == "num_warps" {
        if ![1, 2, 4, 8, 16, 32].contains(&v) {
            return Err(
                Diagnostic::new(value.span(), format!("num_warps = {v} is not supported"))
                    .with_hint("use 1, 2, 4, 8, 16 or 32"),
            );
        }
        options.num_warps = Some(v as u32);
    } else if key == "maxnreg" {
        if !(MIN_MAXNREG..=MAX_MAXNREG).contains(&v) {
            return Err(
                Diagnostic::new(value.span(), format!("maxnreg = {v} is not supported")).with_hint(
                    format!("use {MIN_MAXNREG} to {MAX_MAXNREG} registers per thread"),
                ),
            );
        }
        options.maxnreg = Some(v as u32);
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
    let mut options = Vec::new();
    for entry in entries {
        let (key, value) = key_value(entry)?;
        if ["num_warps", "num_stages", "ctas_per_cga", "maxnreg"].contains(&key.as_str()) {
            options.push((key, value));
        } else if consts.iter().any(|(k, _)| *k == key) {
            return Err(Diagnostic::new(
                entry.span(),
                format!("`{key}` is given twice in this config"),
            ));
        } else {
            consts.push((key, int_value(value)?));
        }
    }
    // After the constants, which option values may name.
    let mut partial = PartialOptions::default();
    for (key, value) in options {
        set_partial(&mut partial, &key, value, &consts)?;
    }
    Ok(ConfigAttr {
        consts,
        options: KernelOptions {
            num_warps: partial.num_warps.unwrap_or(UNSET),
            num_stages: partial.num_stages.unwrap_or(UNSET),
            cluster: partial.cluster.unwrap_or([UNSET; 3]),
            maxnreg: partial.maxnreg,
            mbar_timeout_ns: None,
            // A kernel's, set from the top-level attribute.
            launch_pdl: false,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn configs_inherit_and_override_options() {
        let attr = parse_attr(quote!(
            num_stages = 2,
            launch_pdl = true,
            arch = ["sm_90a", "sm_100a"],
            configs = [
                (BLOCK = 64),
                (
                    num_warps = W,
                    BLOCK = 128,
                    W = 8,
                    C = 2,
                    ctas_per_cga = (2, C),
                    maxnreg = 80
                )
            ],
            num_warps = 2,
            maxnreg = 128
        ))
        .expect("valid attribute");
        assert_eq!(attr.arches, vec![Arch::Sm90a, Arch::Sm100a]);
        assert_eq!(
            attr.options,
            KernelOptions {
                num_warps: 2,
                num_stages: 2,
                cluster: [1, 1, 1],
                maxnreg: Some(128),
                mbar_timeout_ns: None,
                launch_pdl: true,
            }
        );
        assert_eq!(attr.configs.len(), 2);
        assert_eq!(attr.configs[0].consts, vec![("BLOCK".to_string(), 64)]);
        assert_eq!(
            attr.configs[0].options,
            KernelOptions {
                num_warps: 2,
                num_stages: 2,
                cluster: [1, 1, 1],
                maxnreg: Some(128),
                mbar_timeout_ns: None,
                launch_pdl: true,
            }
        );
        assert_eq!(
            attr.configs[1].options,
            KernelOptions {
                num_warps: 8,
                num_stages: 2,
                cluster: [2, 2, 1],
                maxnreg: Some(80),
                mbar_timeout_ns: None,
                launch_pdl: true,
            }
        );
    }

    #[test]
    fn a_single_arch_string_is_accepted() {
        let attr = parse_attr(quote!(arch = "sm_100a")).expect("valid attribute");
        assert_eq!(attr.arches, vec![Arch::Sm100a]);
        assert!(attr.configs.is_empty());
    }

    #[test]
    fn tlx_arch_lists_parse() {
        assert_eq!(
            arch_list("sm_90a, sm_100a").ok(),
            Some(vec![Arch::Sm90a, Arch::Sm100a])
        );
        let err = arch_list("sm_90a,sm_75").expect_err("unknown arch");
        assert_eq!(err.message, "unknown architecture `sm_75` in TLX_ARCH");
    }

    #[test]
    fn errors_are_collected() {
        let err =
            parse_attr(quote!(num_warps = 5, speed = 3, arch = "sm_80")).expect_err("three errors");
        let messages: Vec<&str> = err.0.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "num_warps = 5 is not supported",
                "unknown kernel attribute key `speed`",
                "unknown architecture `sm_80`"
            ]
        );
        let err = parse_attr(quote!(
            ctas_per_cga = 32,
            configs = [(B = 1, ctas_per_cga = (0, 1))]
        ))
        .expect_err("bad clusters");
        let messages: Vec<&str> = err.0.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "a cluster of 32 programs is more than 16",
                "a cluster dimension of 0 is not allowed"
            ]
        );
        let err = parse_attr(quote!(maxnreg = 8)).expect_err("too few registers");
        assert_eq!(err.0[0].message, "maxnreg = 8 is not supported");
        let err = parse_attr(quote!(configs = [(B = 1, B = 2)])).expect_err("duplicate");
        assert_eq!(err.0[0].message, "`B` is given twice in this config");
    }
}
