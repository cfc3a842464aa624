//! A kernel's call-site autotuner: `kernel::autotune(&device, grid, args..)`
//! launches the compiled configuration the runtime's autotuner finds
//! fastest for the values of the kernel's `key` parameters on this GPU, and
//! returns it as a `<Kernel>Config` (the configuration's constants by name,
//! which the caller's `grid` function also reads).
//!
//! `autotune` is an associated function of the launcher type with every
//! const generic at a default value (zero), so `kernel::autotune` needs no
//! const arguments: the struct declares those defaults, and the impl names
//! that one instance.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use tlx_core::ir::ParamKind;
use tlx_frontend::diag::{Diagnostic, Diagnostics};
use tlx_frontend::{SigParam, Signature};

/// What the attribute says about autotuning, checked against the signature.
pub struct AutotunePlan {
    /// The scalar parameters whose values key the choice, by name.
    key: Vec<syn::Ident>,
    /// Launch-argument indices of the pointer parameters to restore
    /// between trials.
    restore: Vec<usize>,
}

impl AutotunePlan {
    /// Keyed by every scalar parameter, nothing restored: the plan of a
    /// kernel whose attribute says nothing (or could not be read).
    pub fn every_scalar(signature: &Signature) -> AutotunePlan {
        AutotunePlan {
            key: signature
                .params
                .iter()
                .filter(|(_, p)| matches!(p, SigParam::Plain(ParamKind::Scalar(_))))
                .map(|(i, _)| i.clone())
                .collect(),
            restore: Vec::new(),
        }
    }

    /// `key` (every scalar parameter when `None`) and `restore` checked:
    /// keys must be scalar parameters, restored ones pointers.
    pub fn new(
        signature: &Signature,
        key: Option<&[syn::Ident]>,
        restore: &[syn::Ident],
    ) -> Result<AutotunePlan, Diagnostics> {
        let scalar = |p: &SigParam| matches!(p, SigParam::Plain(ParamKind::Scalar(_)));
        let pointer = |p: &SigParam| matches!(p, SigParam::Plain(ParamKind::Ptr(_)));
        let position = |name: &syn::Ident| signature.params.iter().position(|(i, _)| i == name);
        let mut errors = Vec::new();
        let key = match key {
            None => Self::every_scalar(signature).key,
            Some(names) => {
                for name in names {
                    if !position(name).is_some_and(|i| scalar(&signature.params[i].1)) {
                        errors.push(
                            Diagnostic::new(name.span(), format!("`{name}` is not a scalar parameter of this kernel"))
                                .with_hint("`key` names the scalar parameters (sizes) whose values decide which configuration is fastest, e.g. `key = [m, n, k]`"),
                        );
                    }
                }
                names.to_vec()
            }
        };
        let mut restored = Vec::new();
        for name in restore {
            match position(name).filter(|&i| pointer(&signature.params[i].1)) {
                // A `Strided` parameter before it passes several arguments.
                Some(i) => restored.push(
                    signature.params[..i]
                        .iter()
                        .map(|(_, p)| p.arg_count())
                        .sum::<usize>(),
                ),
                None => errors.push(
                    Diagnostic::new(name.span(), format!("`{name}` is not a pointer parameter of this kernel"))
                        .with_hint("`restore` names the buffers the kernel both reads and writes (e.g. an accumulated output), which autotuning trials must put back"),
                ),
            }
        }
        if !errors.is_empty() {
            return Err(Diagnostics(errors));
        }
        Ok(AutotunePlan {
            key,
            restore: restored,
        })
    }
}

/// The consts of one compiled configuration and its warps.
pub struct ConfigValues {
    pub consts: Vec<TokenStream>,
    pub num_warps: u32,
}

/// Everything of the launcher `autotune` reuses.
pub struct Launcher<'a> {
    pub vis: &'a syn::Visibility,
    pub name: &'a syn::Ident,
    pub spec_name: &'a syn::Ident,
    pub signature: &'a Signature,
    /// The const generics' types and default values.
    pub const_types: &'a [TokenStream],
    pub const_defaults: &'a [TokenStream],
    pub launch_params: &'a [TokenStream],
    pub launch_args: &'a [TokenStream],
}

/// `<Kernel>Config` and `autotune`; `configs` is `None` when compilation
/// failed (then `autotune` reports that, as `launch` does).
pub fn autotune_tokens(
    l: &Launcher<'_>,
    plan: &AutotunePlan,
    configs: Option<&[ConfigValues]>,
) -> TokenStream {
    let (vis, name, spec_name) = (l.vis, l.name, l.spec_name);
    let kernel_name = name.to_string();
    let config_name = format_ident!("{}Config", camel_case(&kernel_name), span = name.span());
    let const_names: Vec<&syn::Ident> = l.signature.consts.iter().map(|c| &c.name).collect();
    let const_types = l.const_types;
    let defaults = if const_names.is_empty() {
        quote! {}
    } else {
        let values = l.const_defaults;
        quote! { <#(#values),*> }
    };
    let key_names = plan.key.iter().map(|k| format!("{k}={{}}"));
    let key_format = key_names.collect::<Vec<_>>().join(", ");
    let key_idents = &plan.key;
    let restore = &plan.restore;
    let (launch_params, launch_args) = (l.launch_params, l.launch_args);
    let struct_doc = format!(
        "A configuration of the tlx kernel `{kernel_name}`: its constants by name, as \
         `{kernel_name}::autotune` passes it to the grid function and returns the one it chose."
    );
    let body = match configs {
        Some(configs) => {
            let values = configs.iter().map(|c| {
                let consts = &c.consts;
                let warps = c.num_warps;
                quote! { #config_name { #(#const_names: #consts,)* num_warps: #warps } }
            });
            quote! {
                const CONFIGS: &[#config_name] = &[#(#values),*];
                let key = ::std::format!(#key_format, #(#key_idents),*);
                let config = |index: usize| {
                    CONFIGS.get(index).copied().ok_or(::tlx::Error::ConfigIndex {
                        kernel: #kernel_name,
                        index,
                        count: CONFIGS.len(),
                    })
                };
                let chosen = ::tlx::__private::autotune_launch(
                    device,
                    &#spec_name,
                    &key,
                    &[#(#restore),*],
                    &|index| config(index).map(|c| grid(&c).into()),
                    &[#(#launch_args),*],
                )?;
                config(chosen)
            }
        }
        None => quote! {
            let _ = (device, grid);
            ::core::result::Result::Err(::tlx::Error::NotCompiled { kernel: #kernel_name })
        },
    };
    let unused = launch_params_unused(l.signature, configs.is_none());
    quote! {
        #[doc = #struct_doc]
        #[allow(non_snake_case, missing_docs)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #vis struct #config_name {
            #(pub #const_names: #const_types,)*
            pub num_warps: u32,
        }

        impl #name #defaults {
            /// Launches the configuration the autotuner finds fastest on this
            /// GPU for this call's `key` values (timed once on the call's own
            /// arguments, L2 flushed before each timed run, then remembered on
            /// disk; see `tlx::autotune` for the cache and `TLX_AUTOTUNE`),
            /// each on the grid `grid` gives for it, and returns that
            /// configuration. On the interpreter the first one runs.
            #[allow(clippy::too_many_arguments)]
            pub fn autotune<G: ::core::convert::Into<::tlx::Grid>>(
                device: &::tlx::Device,
                grid: impl ::core::ops::Fn(&#config_name) -> G,
                #(#launch_params),*
            ) -> ::core::result::Result<#config_name, ::tlx::Error> {
                #unused
                #body
            }
        }
    }
}

/// Without a compiled kernel the parameters are only named, not used.
fn launch_params_unused(signature: &Signature, failed: bool) -> TokenStream {
    if !failed {
        return quote! {};
    }
    let names = signature.params.iter().map(|(i, _)| i);
    quote! { let _ = (#(&#names,)*); }
}

/// `hopper_gemm_ws` -> `HopperGemmWs`.
pub fn camel_case(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect()
}
