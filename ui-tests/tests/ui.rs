//! trybuild: every misuse the compiler catches fails `cargo build` with a
//! message at the user's tokens (`fail/`), and accepted forms compile (`pass/`).
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/fail/*.rs");
    t.pass("tests/pass/*.rs");
}
