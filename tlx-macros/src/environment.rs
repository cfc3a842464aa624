//! Warns about `TLX_*` environment variables nothing reads (a misspelt
//! `TLX_MBAR_TIMEOUT` would otherwise be ignored without a word): once per
//! crate the build compiles, at the first kernel.

use std::sync::atomic::{AtomicBool, Ordering};

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote_spanned};

/// Whether this rustc process (one crate) has warned already.
static WARNED: AtomicBool = AtomicBool::new(false);

/// A warning at `span` for each unknown variable, the first time only.
pub(crate) fn warnings(span: Span) -> TokenStream {
    if WARNED.swap(true, Ordering::Relaxed) {
        return TokenStream::new();
    }
    tlx_core::env::unknown_in_environment()
        .iter()
        .enumerate()
        .map(|(index, unknown)| {
            let note = format!("environment: {unknown}");
            let item = format_ident!("__tlx_environment_warning_{}", index);
            quote_spanned! {span=>
                const _: () = {
                    #[deprecated(note = #note)]
                    #[allow(non_camel_case_types)]
                    struct #item;
                    let _ = #item;
                };
            }
        })
        .collect()
}
