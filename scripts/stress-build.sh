#!/usr/bin/env bash
# Rebuilds example crates many times, several at once, and reports any rustc
# crash. Not part of CI: it guards the proc macro's private copy of LLVM.
#
# Why: the proc macro runs LLVM inside rustc, and rustc has its own LLVM 22
# (libLLVM.so.22.1-rust-*) with the same versioned symbol names as Debian's.
# Linked dynamically, Debian's library and our macro bound ~1,800 symbols to
# rustc's copy (vtables, globals, every LLVM C function we call): two LLVMs
# mixed in one process, and a rare SIGSEGV in `free` at rustc's exit. LLVM is
# now linked statically into the macro, where rustc's version script hides
# every symbol; this script checks both that nothing binds across (exact) and
# that repeated builds under load do not crash (statistical).
#
# usage: scripts/stress-build.sh [ROUNDS] [PARALLEL] [EXAMPLE...]
#   defaults: 50 rounds, 4 at once, every example under examples/
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-50}
parallel=${2:-4}
shift $(( $# < 2 ? $# : 2 ))
if [ $# -gt 0 ]; then
  examples=("$@")
else
  mapfile -t examples < <(find examples -maxdepth 1 -name '*.rs' -printf '%f\n' | sed 's/\.rs$//' | sort)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One build through cargo gives each example's rustc command line; the
# rounds then rerun rustc directly with a fresh incremental folder, so every
# run expands the macros and generates code from scratch.
cargo build -q --examples
for example in "${examples[@]}"; do
  touch "examples/$example.rs"
  cargo build -v --example "$example" 2>&1 \
    | grep -E "Running \`.*--crate-name $example " \
    | sed -e 's/^ *Running `//' -e 's/`$//' -e 's#-C incremental=[^ ]*#-C incremental="$INCREMENTAL"#' \
    > "$work/$example.cmd"
  [ -s "$work/$example.cmd" ] || { echo "stress-build: no rustc command found for $example" >&2; exit 1; }
done

# Exact check: with the loader's binding trace, no symbol of the proc macro
# may resolve into rustc's own LLVM. (zstd's functions are exempt: rustc's
# LLVM exports a copy of libzstd, a stable C API with no shared state.)
probe=${examples[0]}
INCREMENTAL="$work/probe-inc" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/bindings" \
  bash "$work/$probe.cmd" >/dev/null 2>&1
crossed=$(cat "$work"/bindings.* | grep -E "binding file [^ ]*libtlx_macros[^ ]* .* to [^ ]*-rust-[^ ]*" \
  | grep -v "symbol \`ZSTD_" || true)
if [ -n "$crossed" ]; then
  echo "stress-build: the proc macro binds symbols to rustc's LLVM:" >&2
  echo "$crossed" | head -n 20 >&2
  exit 1
fi
echo "stress-build: no proc-macro symbol binds to rustc's LLVM"

ok=0
crashed=0
for round in $(seq 1 "$rounds"); do
  for slot in $(seq 1 "$parallel"); do
    example=${examples[$(( (round * parallel + slot) % ${#examples[@]} ))]}
    (
      rm -rf "$work/inc-$slot"
      INCREMENTAL="$work/inc-$slot" bash "$work/$example.cmd" >"$work/log-$slot" 2>&1
      echo $? >"$work/rc-$slot"
    ) &
  done
  wait
  for slot in $(seq 1 "$parallel"); do
    if [ "$(cat "$work/rc-$slot")" = 0 ]; then
      ok=$((ok + 1))
    else
      crashed=$((crashed + 1))
      cp "$work/log-$slot" "target/stress-build-failure-$crashed.log"
      echo "stress-build: round $round failed; log in target/stress-build-failure-$crashed.log" >&2
    fi
  done
done
echo "stress-build: $ok builds passed, $crashed failed"
[ "$crashed" -eq 0 ]
