#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing (LLVM 22,
# ptxas), then runs every test. GPU tests skip with a message when there is
# no GPU; the examples run on the CPU interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --ptxas
TLX_PTXAS=$(bash scripts/find-ptxas.sh)
export TLX_PTXAS
echo "tlx: ptxas is $TLX_PTXAS ($("$TLX_PTXAS" --version | tail -n 1))"
# Two passes, so that only the compiler's own tests link LLVM (statically,
# ~90 MB a binary): the crates that users link never see the `llvm` feature,
# while a plain `cargo test --workspace` would unify it into every test
# binary through the proc macro's dependency on tlx-core.
WITHOUT_LLVM=(--workspace --exclude tlx-core --exclude tlx-macros)
cargo test "${WITHOUT_LLVM[@]}"
echo "tlx: the tests of tlx, tlx-runtime and ui-tests took $SECONDS s so far"
cargo test -p tlx-core --features llvm
echo "tlx: the test suite took $SECONDS s so far"
# The examples once more in the interpreter's checked mode: reads of memory
# nobody wrote and uses of undefined masked-off lanes are errors there.
# The same package selection as the first pass, so nothing rebuilds.
TLX_CHECK_UNINIT=1 cargo test "${WITHOUT_LLVM[@]}" --test examples_on_interpreter
# The public API's documentation: missing docs are compile errors already;
# rustdoc also rejects broken links.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p tlx -p tlx-runtime
echo "tlx: all tests passed in $SECONDS s"
