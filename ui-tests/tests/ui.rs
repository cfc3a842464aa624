//! trybuild: every misuse the compiler catches fails `cargo build` with a
//! message at the user's tokens (`fail/`). Regenerate the `.stderr` files
//! with `TRYBUILD=overwrite` and review the diff. The accepted forms
//! (`pass/`) are compiled by `tests/accepted.rs`: with no pass case here,
//! trybuild only type-checks, and checks every failing case in one cargo
//! invocation instead of one each.

#[test]
fn ui() {
    // trybuild builds its own copy of every dependency, and the cases are
    // only checked, never run: no debug info (7 of the 35 s that build
    // takes on 2 cores). Its cargo inherits this process's environment.
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false");
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/fail/*.rs");
}
