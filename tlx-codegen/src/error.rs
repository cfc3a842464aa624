//! The code generator's result type and the errors every module builds:
//! malformed IR (a bug before code generation) and constructs refused
//! upstream. A leaf: it names nothing of the crate but [`CodegenError`].

use super::CodegenError;

pub type Result<T> = std::result::Result<T, CodegenError>;

pub fn malformed(what: impl Into<String>) -> CodegenError {
    CodegenError::MalformedIr(what.into())
}

/// A construct the frontend (or the verifier) refuses, met here: a bug
/// upstream, not a gap in code generation. `tests/ice_guards.rs` names the
/// test that shows each one refused at the user's token.
pub fn refused_upstream(what: impl Into<String>) -> CodegenError {
    CodegenError::MalformedIr(format!(
        "{}, which is refused before code generation",
        what.into()
    ))
}
