//! Whole-kernel tests: kernels built with `ir::Builder`, run on the
//! interpreter, compared with CPU references.
