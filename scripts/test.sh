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
# Only tlx-codegen links LLVM (statically, ~90 MB a binary): its `compiler`
# test binary and the proc macro; every other test binary is LLVM-free.
cargo test --workspace
echo "tlx: the test suite took $SECONDS s so far"
# The examples once more in the interpreter's checked mode: reads of memory
# nobody wrote and uses of undefined masked-off lanes are errors there.
# `--workspace` again, so that features resolve as above and nothing rebuilds.
TLX_CHECK_UNINIT=1 cargo test --workspace --test examples_on_interpreter
# The public API's documentation: missing docs are compile errors already;
# rustdoc also rejects broken links.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p tlx -p tlx-runtime
echo "tlx: all tests passed in $SECONDS s"
