//! Diagnostics: user-facing compile errors with a source span and an
//! optional hint, turned into `compile_error!` invocations for the macro.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use std::fmt;

/// One compile error at the user's tokens.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub message: String,
    pub span: Span,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            span,
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// The message as `compile_error!` shows it: message, then the hint on its own line.
    fn full_message(&self) -> String {
        match &self.hint {
            Some(hint) => format!("{}\n  = help: {hint}", self.message),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let start = self.span.start();
        write!(
            f,
            "{}:{}: {}",
            start.line,
            start.column,
            self.full_message()
        )
    }
}

/// Every error found in one kernel (at least one).
#[derive(Clone, Debug)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// One `compile_error!` per diagnostic, each spanned at the offending tokens.
    pub fn to_compile_errors(&self) -> TokenStream {
        self.0
            .iter()
            .map(|d| {
                let message = d.full_message();
                quote_spanned!(d.span=> compile_error!(#message);)
            })
            .collect()
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Diagnostics {
        Diagnostics(vec![d])
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_errors_carry_message_and_hint() {
        let d = Diagnostic::new(Span::call_site(), "bad thing").with_hint("do this");
        let ts = Diagnostics(vec![d.clone(), Diagnostic::new(Span::call_site(), "other")])
            .to_compile_errors()
            .to_string();
        assert_eq!(ts.matches("compile_error").count(), 2);
        assert!(ts.contains("bad thing\\n  = help: do this"));
        assert!(d.to_string().ends_with("bad thing\n  = help: do this"));
    }
}
