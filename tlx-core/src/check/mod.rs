//! Checks over the IR that every stage may rely on.
//!
//! - [`verify`]: structure and types (operands defined before use, each op's
//!   typing rule, terminators in place).

mod verify;

pub use verify::{verify, VerifyError};
