//! `#[tlx::kernel]`: the thin layer between rustc and tlx-core.
//!
//! It parses the attribute and the function with syn, asks tlx-core's
//! frontend for one IR kernel per configuration and its code generator for
//! PTX per arch, and replaces the function with a launcher type that embeds
//! the PTX and the IR text (the CPU interpreter runs the latter). Every
//! compiler diagnostic becomes a `compile_error!` at the user's tokens.

mod dump;
mod emit;

use proc_macro::TokenStream;

/// Compiles a block-level kernel at build time. See `docs/language.md`.
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
    emit::expand(attr.into(), &function).into()
}
