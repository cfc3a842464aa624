#!/usr/bin/env bash
# Builds release binaries here and copies them into .gpu/ (git-ignored) for
# the GPU machine, which has no cargo: every example, benchmark and test
# binary of the workspace, also packed as .gpu.tgz (carry that one). Extra
# cargo target flags may be passed (e.g. `--example softmax`); the default
# is all examples and benches.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/examples .gpu/tests .gpu/benches
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(--examples --benches)
# Every target, `tlx::ops` included.
targets+=(--features ops)
collect() { # folder, then cargo args
  local folder=$1; shift
  cargo "$@" --release --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys, os
folder = sys.argv[1]
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        kinds = msg["target"]["kind"]
        dest = {"example": "examples", "bench": "benches"}.get(kinds[0], folder)
        if folder == "examples" and kinds[0] not in ("example", "bench"):
            continue
        shutil.copy(msg["executable"], os.path.join(".gpu", dest, msg["target"]["name"]))
' "$folder"
}
collect examples build "${targets[@]}"
# The facade's and the runtime's tests: the ones that use a GPU.
collect tests test -p tlx -p tlx-runtime --features tlx/ops --no-run
cp ../shared/anchors.py .gpu/ 2>/dev/null || true
cp scripts/torch_fp8.py scripts/attention_anchors.py scripts/attention_table.py \
  scripts/cudnn_bwd_sequence.py .gpu/
# FlashAttention-3, the attention sitting's third reference, when its sources
# are packed (scripts/fa3/README.md): gpu-suite.sh builds it there.
if [ -f scripts/fa3/src.tgz ]; then
  mkdir -p .gpu/fa3
  cp scripts/fa3/build.sh scripts/fa3/shim.cu scripts/fa3/fa3_bench.py scripts/fa3/src.tgz .gpu/fa3/
fi
# The trybuild suite needs cargo and the proc-macro's tests the toolchain's
# libstd, neither of which the GPU machine has; neither needs a GPU.
rm -f .gpu/tests/ui .gpu/tests/tlx_macros
# LLVM is linked statically (see Cargo.toml), so its C++ symbols tell.
links_llvm() { [ "$(nm "$1" 2>/dev/null | grep -c ' _ZN4llvm')" -gt 0 ]; }
# A test that carries LLVM is a compiler test, which needs no GPU: leave it out.
for f in .gpu/tests/*; do
  if links_llvm "$f"; then rm "$f"; fi
done
# Examples and benchmarks are what users ship: they must not contain LLVM.
for f in .gpu/examples/* .gpu/benches/*; do
  if links_llvm "$f"; then echo "error: $f contains LLVM" >&2; exit 1; fi
done
# The device tool carries at most 64 MiB: stripped (after the LLVM check,
# which reads symbols) and packed, the binaries fit; gpu-suite.sh unpacks.
strip .gpu/examples/* .gpu/benches/* .gpu/tests/* 2>/dev/null || true
tar czf .gpu.tgz .gpu
ls .gpu/*; du -sh .gpu .gpu.tgz
