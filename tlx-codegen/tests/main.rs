//! The compiler's integration tests (frontend, interpreter and code
//! generation end to end), as one test binary: every binary that links code
//! generation links LLVM statically (~90 MB each), so one binary keeps CI's
//! disk and link time small. Run one part with a filter, e.g.
//! `cargo test -p tlx-codegen --test compiler golden_ptx::`.

mod codegen_common;
mod kernels;

mod async_dot_forms;
mod bounds;
mod cluster_prims;
mod codegen_dot;
mod codegen_elementwise;
mod codegen_misc;
mod codegen_reduce;
mod codegen_tasks;
mod dot_operands;
mod examples_ptx;
mod golden_ptx;
mod ice_guards;
mod launch_control;
mod loop_exits;
mod macro_templates;
mod math;
mod pair_mma;
mod protocol;
mod random;
mod random_kernels;
mod scaled_mma;
mod scans;
mod tensor_memory;
mod timeline;
mod tlx_prims;
