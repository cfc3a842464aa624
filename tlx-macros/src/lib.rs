//! `#[tlx::kernel]`: the thin layer between rustc and tlx-core.
//!
//! It parses the attribute and the function with syn, asks tlx-core's
//! frontend for one IR kernel per configuration and its code generator for
//! PTX per arch, and replaces the function with a launcher type that embeds
//! the PTX and the IR text (the CPU interpreter runs the latter). Every
//! compiler diagnostic becomes a `compile_error!` at the user's tokens.

mod autotune;
mod cache;
mod dump;
mod emit;
mod environment;
#[cfg(test)]
mod fuzz;
mod rustc;

use proc_macro::TokenStream;
use quote::quote;

/// Compiles a kernel at build time and replaces the function with its
/// launcher.
///
/// The body is the kernel language (Triton's block tensors and TLX's
/// primitives in Rust syntax: `program_id`, `arange`, `load`, `store`,
/// `dot`, `local_alloc`, `barrier_wait`, `async_tasks!`, ...), compiled by
/// tlx-core to PTX for each architecture and to IR for the CPU interpreter.
/// Mistakes are compile errors at the offending tokens, with a hint; so is a
/// barrier protocol that would hang.
///
/// ```ignore
/// use tlx::prelude::*;
///
/// #[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024), (BLOCK = 4096, num_warps = 8)])]
/// fn scale<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
///     let offs = program_id(0) * BLOCK + arange(0, BLOCK);
///     let mask = offs < n;
///     store(out + offs, load(x + offs, mask = mask) * 2.0, mask = mask);
/// }
///
/// // `scale` is now a type: the const arguments pick a compiled configuration.
/// scale::<1024>::launch(&device, n.div_ceil(1024) as u32, &x, &out, n as i32)?;
/// ```
///
/// Attribute keys, all optional: `num_warps`, `num_stages` (software
/// pipelining of loops), `ctas_per_cga` (clusters), `maxnreg`, `arch`
/// (`"sm_90a"`, `"sm_100a"`), `configs = [(NAME = value, ...), ...]` (one
/// compiled specialization per tuple; required when the function has const
/// generics), `check_protocol = false` (turns off the compile-time barrier
/// checker), `check_bounds = true` (every global access checked at run time,
/// reported as `Error::KernelOutOfBounds`), `mbar_timeout_ns` (barrier
/// waits that trap instead of hanging) and `launch_pdl = true` (launched as
/// a programmatic dependent of the kernel before it: see `gdc_wait()`).
///
/// Build-time environment: `TLX_ARCH`, `TLX_CHECK_BOUNDS=1`,
/// `TLX_MBAR_TIMEOUT_NS`, `TLX_DUMP`/`TLX_DUMP_DIR` (LLVM IR, PTX and
/// compile timings), and `TLX_CACHE=0` or `TLX_CACHE_DIR` (the cache of
/// protocol reports and PTX, by IR and compiler, in `target/tlx-cache`). The whole language, with the TLX and Triton name of each
/// primitive, is `docs/language.md` in the repository.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function: syn::ItemFn = match syn::parse(item) {
        Ok(f) => f,
        Err(e) => {
            let hint = "`#[tlx::kernel]` goes on a function: `fn name<const BLOCK: usize>(x: Ptr<f32>, n: i32) { ... }`";
            let msg = format!("{e}\n  = help: {hint}");
            return syn::Error::new(e.span(), msg).to_compile_error().into();
        }
    };
    let mut expanded = emit::expand(attr.into(), &function, &emit::BuildEnv::from_env());
    expanded.extend(environment::warnings(function.sig.ident.span()));
    expanded.into()
}

/// The items of `tlx::lang`: one documented marker per builtin that
/// `docs/language.md` describes (see `tlx_frontend::lang`). Used once,
/// by the `tlx` crate.
#[doc(hidden)]
#[proc_macro]
pub fn __lang_items(_: TokenStream) -> TokenStream {
    let items = tlx_frontend::lang::builtins().iter().filter_map(|builtin| {
        let ident: syn::Ident = syn::parse_str(&builtin.name).ok()?;
        let (name, doc) = (&builtin.name, &builtin.doc);
        Some(quote! {
            #[doc = #doc]
            #[allow(non_upper_case_globals)]
            pub const #ident: Builtin = Builtin { name: #name };
        })
    });
    quote! { #(#items)* }.into()
}
