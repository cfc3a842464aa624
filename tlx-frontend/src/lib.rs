//! The frontend: a `#[tlx::kernel]` Rust function (syn) lowered to
//! tlx-core's IR,
//! one kernel per configuration of its const generics.
//!
//! - [`attr`](parse_attr): the attribute; [`signature`](parse_signature): the fn signature;
//! - `lower`: the body, with shape and dtype inference, SSA for mutable
//!   variables and structured control flow;
//! - `value`, `scan`: compile-time values and syntactic pre-scans the lowering uses.

mod attr;
pub mod diag;
pub mod lang;
mod lower;
mod scan;
mod signature;
mod value;

#[cfg(test)]
mod tests;

pub use attr::parse_attr;
pub use signature::parse_signature;

use crate::diag::{Diagnostic, Diagnostics};
use syn::spanned::Spanned;
use tlx_core::ir;

/// The parsed `#[tlx::kernel(...)]` attribute.
#[derive(Clone, Debug)]
pub struct KernelAttr {
    pub options: ir::KernelOptions,
    pub arches: Vec<ir::Arch>,
    pub configs: Vec<ConfigAttr>,
    /// Whether the protocol checker runs (`check_protocol = false` opts out).
    pub check_protocol: bool,
    /// Whether every global access is checked against its buffer's length
    /// at run time (`check_bounds = true`, or `TLX_CHECK_BOUNDS=1` at build
    /// time): see [`tlx_core::instrument`].
    pub check_bounds: bool,
    /// Whether the GPU code records a timeline of each program's tasks and
    /// barrier waits (`timeline = true`, or `TLX_TRACE` set at build time):
    /// see `tlx_core::instrument::instrument_timeline`.
    pub timeline: bool,
    /// The scalar parameters whose values key the kernel's `autotune`
    /// choices (`key = [m, n, k]`); `None`: every scalar parameter.
    pub autotune_key: Option<Vec<syn::Ident>>,
    /// Pointer parameters `autotune`'s trial launches overwrite and must
    /// restore (`restore = [c]`).
    pub restore: Vec<syn::Ident>,
}

/// One entry of `configs = [...]`: a value per const generic and the options
/// (kernel-level ones unless this config overrides them).
#[derive(Clone, Debug)]
pub struct ConfigAttr {
    pub consts: Vec<(String, i64)>,
    pub options: ir::KernelOptions,
}

/// The kernel's name, const generics and parameters.
#[derive(Clone, Debug)]
pub struct Signature {
    pub name: syn::Ident,
    pub consts: Vec<ConstParam>,
    pub params: Vec<(syn::Ident, SigParam)>,
}

/// A parameter's type as the signature writes it.
#[derive(Clone, Debug)]
pub enum SigParam {
    /// A pointer or scalar.
    Plain(ir::ParamKind),
    /// `TensorDesc<T, D0, D1, ...>`: a TMA descriptor moving blocks of
    /// `[D0, D1, ...]`, each a const generic's name or a literal, known per config.
    Desc {
        elem: ir::ScalarType,
        block: Vec<BlockDim>,
        span: proc_macro2::Span,
        /// Where each dimension of the block is written.
        dim_spans: Vec<proc_macro2::Span>,
    },
    /// `Strided<T, N>`: a global tensor of rank `N`, passed as a pointer
    /// and then its `N` extents and `N` strides (elements, `i32`), which
    /// the kernel reads as `x.shape(d)` and `x.stride(d)`.
    Strided { elem: ir::ScalarType, rank: usize },
    /// `Mesh` (one axis) or `Mesh<N>` (`N` axes): the device mesh a
    /// distributed kernel runs on, passed as this rank's index, the number
    /// of ranks, and the mesh's barrier words (a symmetric `i32` buffer
    /// with its table of peers' addresses, which also holds the extents),
    /// which `shard_id`, `shard_count` and `distributed_barrier` read.
    Mesh { axes: usize },
    /// `SymPtr<T>`: a symmetric buffer (one of the same length on every
    /// rank of a mesh), passed as this rank's pointer and a table of every
    /// rank's address of it (`i64`), which `remote(x, rank)` reads.
    Sym { elem: ir::ScalarType },
}

impl SigParam {
    /// The kernel parameters (IR params, launch arguments) this one
    /// parameter becomes.
    pub fn arg_count(&self) -> usize {
        1 + self.trailing_params("").len()
    }

    /// The kernel parameters after the first that this one becomes, named
    /// after the signature's `name`: a `Strided` one's extents and strides
    /// (`x.shape(0)`, ..., `x.stride(0)`, ...), a `Mesh`'s size and barrier
    /// words, a `SymPtr`'s table of peers' addresses.
    pub fn trailing_params(&self, name: &str) -> Vec<(String, ir::ParamKind)> {
        let i32 = ir::ParamKind::Scalar(ir::ScalarType::I32);
        let table = ir::ParamKind::Ptr(ir::ScalarType::I64);
        match self {
            SigParam::Strided { rank, .. } => {
                let shapes = (0..*rank).map(|d| format!("{name}.shape({d})"));
                shapes
                    .chain((0..*rank).map(|d| format!("{name}.stride({d})")))
                    .map(|n| (n, i32))
                    .collect()
            }
            SigParam::Mesh { .. } => vec![
                (format!("{name}.size"), i32),
                (
                    format!("{name}.sync"),
                    ir::ParamKind::Ptr(ir::ScalarType::I32),
                ),
                (format!("{name}.sync.peers"), table),
            ],
            SigParam::Sym { .. } => vec![(format!("{name}.peers"), table)],
            SigParam::Plain(_) | SigParam::Desc { .. } => Vec::new(),
        }
    }
}

/// The largest rank of a `Strided` parameter.
pub const MAX_STRIDED_RANK: usize = 4;

/// A dimension of a descriptor's block in the signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockDim {
    Const(String),
    Literal(usize),
}

#[derive(Clone, Debug)]
pub struct ConstParam {
    pub name: syn::Ident,
    pub ty: ir::ScalarType,
    /// The type as written (`usize`), which the launcher's generics keep.
    pub written: syn::Type,
}

/// Checks that the configs fit the signature: present when there are const
/// generics, and each giving every const generic exactly once.
pub fn check_configs(attr: &KernelAttr, item: &syn::ItemFn) -> Result<(), Diagnostics> {
    let sig = parse_signature(item)?;
    if sig.consts.is_empty() {
        return Ok(());
    }
    if attr.configs.is_empty() {
        let names: Vec<String> = sig
            .consts
            .iter()
            .map(|c| format!("{} = ...", c.name))
            .collect();
        return Err(Diagnostic::new(
            item.sig.generics.span(),
            "a kernel with const generics needs `configs` in its attribute",
        )
        .with_hint(format!(
            "list the values to compile, e.g. `#[tlx::kernel(configs = [({})])]`",
            names.join(", ")
        ))
        .into());
    }
    for config in &attr.configs {
        check_consts(item, &sig, &config.consts)?;
    }
    Ok(())
}

/// Each const generic given exactly once and nothing else.
fn check_consts(
    item: &syn::ItemFn,
    sig: &Signature,
    consts: &[(String, i64)],
) -> Result<(), Diagnostics> {
    let mut errors = Vec::new();
    for c in &sig.consts {
        let count = consts.iter().filter(|(n, _)| c.name == n).count();
        if count != 1 {
            let what = if count == 0 {
                "no value"
            } else {
                "more than one value"
            };
            errors.push(
                Diagnostic::new(
                    c.name.span(),
                    format!("a config gives {what} for `{}`", c.name),
                )
                .with_hint("give every const generic exactly once in each config"),
            );
        }
    }
    for (name, _) in consts {
        if !sig.consts.iter().any(|c| c.name == name) {
            errors.push(
                Diagnostic::new(
                    item.sig.ident.span(),
                    format!("a config sets `{name}`, which is not a const generic of this kernel"),
                )
                .with_hint("declare it as `const NAME: usize` or remove it from the configs"),
            );
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Diagnostics(errors))
    }
}

/// Lowers one configuration. `consts` gives a value for every const generic.
pub fn lower_kernel(
    item: &syn::ItemFn,
    consts: &[(String, i64)],
    options: &ir::KernelOptions,
) -> Result<ir::Kernel, Diagnostics> {
    let sig = parse_signature(item)?;
    check_consts(item, &sig, consts)?;
    let kernel = lower::lower_body(item, &sig, consts, options)?;
    tlx_core::check::verify(&kernel).map_err(|e| {
        Diagnostic::new(
            item.sig.ident.span(),
            format!("internal compiler error: the IR of this kernel is malformed: {e}"),
        )
        .with_hint("this is a bug in tlx; please report it with the kernel's source")
    })?;
    Ok(kernel)
}

/// Convenience for tests and tools: parse `src` (one `fn` item, attribute
/// optional) and lower every config.
pub fn compile_str(src: &str) -> Result<Vec<ir::Kernel>, Diagnostics> {
    let item: syn::ItemFn = syn::parse_str(src)
        .map_err(|e| Diagnostic::new(e.span(), format!("cannot parse the kernel: {e}")))?;
    let attr_tokens = item
        .attrs
        .iter()
        .find(|a| {
            a.path()
                .segments
                .last()
                .is_some_and(|s| s.ident == "kernel")
        })
        .map(|a| match &a.meta {
            syn::Meta::List(list) => list.tokens.clone(),
            _ => proc_macro2::TokenStream::new(),
        })
        .unwrap_or_default();
    let attr = parse_attr(attr_tokens)?;
    check_configs(&attr, &item)?;
    if attr.configs.is_empty() {
        return Ok(vec![lower_kernel(&item, &[], &attr.options)?]);
    }
    attr.configs
        .iter()
        .map(|c| lower_kernel(&item, &c.consts, &c.options))
        .collect()
}
