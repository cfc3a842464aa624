#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing (LLVM 22,
# ptxas), then runs every test. GPU tests skip with a message when there is
# no GPU; the examples run on the CPU interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --ptxas
echo "tlx: dependencies ready after $SECONDS s"
TLX_PTXAS=$(bash scripts/find-ptxas.sh)
export TLX_PTXAS
echo "tlx: ptxas is $TLX_PTXAS ($("$TLX_PTXAS" --version | tail -n 1))"
# Only tlx-codegen links LLVM (statically, ~90 MB a binary): its `compiler`
# test binary and the proc macro; every other test binary is LLVM-free.
cargo test --workspace --features tlx/ops
echo "tlx: the test suite took $SECONDS s so far"
# The examples once more in the interpreter's checked mode: reads of memory
# nobody wrote and uses of undefined masked-off lanes are errors there. The
# binary the run above built is run as it is: selecting it with `--test`
# would resolve the proc macro's build differently and rebuild it.
examples=$(cargo test --workspace --features tlx/ops --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "examples_on_interpreter" and m.get("executable"):
        print(m["executable"])')
[ -n "$examples" ] || { echo "tlx: the examples_on_interpreter test was not built" >&2; exit 1; }
TLX_CHECK_UNINIT=1 "$examples"
echo "tlx: the examples in checked mode done after $SECONDS s"
# The public API's documentation: missing docs are compile errors already;
# rustdoc also rejects broken links.
# (It reuses the proc macro the tests built: see the profiles in Cargo.toml.)
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p tlx -p tlx-runtime --features tlx/ops
echo "tlx: all tests passed in $SECONDS s"
