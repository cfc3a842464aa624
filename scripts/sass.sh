#!/usr/bin/env bash
# Turns dumped PTX into SASS on a machine without a GPU or CUDA toolkit:
# ptxas (scripts/find-ptxas.sh) assembles each kernel for the architecture in
# its file name, nvdisasm (PyPI's nvidia-cuda-nvdisasm, installed into
# target/nvdisasm on first use) disassembles it, and a census of each kernel
# is printed: registers and spills, instructions, and the commonest opcodes.
# The .sass files land beside the PTX.
#
#   TLX_DUMP=ptx TLX_DUMP_DIR=/tmp/d cargo run --example softmax
#   scripts/sass.sh /tmp/d [NAME-FILTER]
#
# (At build time the dump covers only the kernels rustc recompiles: touch
# their source file first; docs/testing.md, "Reading the SASS".)
set -euo pipefail
dir=${1:?usage: scripts/sass.sh DUMP_DIR [NAME-FILTER]}
filter=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
ptxas=$(bash "$root/scripts/find-ptxas.sh") || {
  echo "sass: no ptxas; run scripts/install-deps.sh (it installs one from PyPI)" >&2
  exit 1
}
nvdisasm=${TLX_NVDISASM:-}
if [ -z "$nvdisasm" ]; then
  nvdisasm=$(command -v nvdisasm || true)
fi
local_copy=$root/target/nvdisasm/nvidia/cu13/bin/nvdisasm
if [ -z "$nvdisasm" ]; then
  if [ ! -x "$local_copy" ]; then
    echo "sass: installing nvdisasm (PyPI nvidia-cuda-nvdisasm==13.5.37) into target/nvdisasm" >&2
    python3 -m pip install -q --disable-pip-version-check --no-deps \
      --target "$root/target/nvdisasm" nvidia-cuda-nvdisasm==13.5.37 2>&1 \
      | grep -v "Running pip as the 'root' user" >&2 || true
    chmod +x "$local_copy" 2>/dev/null || true
  fi
  [ -x "$local_copy" ] || { echo "sass: nvdisasm not found after installing" >&2; exit 1; }
  nvdisasm=$local_copy
fi
shopt -s nullglob
found=0
for ptx in "$dir"/*.ptx; do
  name=$(basename "$ptx" .ptx)
  [[ -z "$filter" || "$name" == *"$filter"* ]] || continue
  found=1
  # The dump names end in the target architecture (`...sm_90a.ptx`).
  arch=$(grep -m1 -o 'sm_[0-9]*a\?' <<<"${name##*.}" || true)
  arch=${arch:-$(grep -m1 -o '^\.target sm_[0-9]*a\?' "$ptx" | cut -d' ' -f2)}
  cubin=$(mktemp --suffix=.cubin)
  info=$("$ptxas" -arch="$arch" -v "$ptx" -o "$cubin" 2>&1) || {
    echo "sass: ptxas rejected $ptx:" >&2
    echo "$info" >&2
    rm -f "$cubin"
    exit 1
  }
  # nvdisasm warns that it switches to the older ELF format; the listing is whole.
  "$nvdisasm" -c "$cubin" 2>/dev/null >"$dir/$name.sass"
  rm -f "$cubin"
  echo "== $name ($arch): $dir/$name.sass"
  grep -o 'Used [0-9]* registers.*\|[0-9]* bytes spill stores, [0-9]* bytes spill loads' <<<"$info" \
    | sed 's/^/   /'
  # Instruction lines look like `/*0c60*/  @!P0 OPCODE.MODIFIERS operands ;`.
  opcodes=$(sed -n 's|^ */\*[0-9a-f]*\*/ *\(@!\?U\?P[0-9T] *\)\?\([A-Z0-9_]*\).*|\2|p' "$dir/$name.sass")
  echo "   $(wc -l <<<"$opcodes") instructions; commonest:" \
    "$(sort <<<"$opcodes" | uniq -c | sort -rn | head -12 | awk '{printf "%s %s, ", $2, $1}')"
done
[ "$found" = 1 ] || { echo "sass: no PTX in $dir matches '${filter}'" >&2; exit 1; }
