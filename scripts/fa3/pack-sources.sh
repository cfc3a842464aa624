#!/usr/bin/env bash
# Packs src.tgz for build.sh: FlashAttention-3's hopper/ code (headers, the bf16 sm90 head dim 64 and
# 128 instantiation files, flash_prepare_scheduler.cu) and CUTLASS's include/, both at the commits
# below, from local git clones. The GPU machine has no network: pack here, carry the tarball.
#
#   bash scripts/fa3/pack-sources.sh FLASH_ATTENTION_GIT_DIR CUTLASS_GIT_DIR [OUT.tgz]
#
# (The device tool's `fetch github:Dao-AILab/flash-attention` and `fetch github:NVIDIA/cutlass` give
# such clones.) One edit is made to FA3's code: with -DFA3_BENCH_TRIM (build.sh's default) the
# backward instantiates only its GQA=false, deterministic=false kernels, the ones the shim runs.
set -euo pipefail
fa=${1:?usage: pack-sources.sh FLASH_ATTENTION_GIT_DIR CUTLASS_GIT_DIR [OUT.tgz]}
cutlass=${2:?usage: pack-sources.sh FLASH_ATTENTION_GIT_DIR CUTLASS_GIT_DIR [OUT.tgz]}
out=${3:-$(cd "$(dirname "$0")" && pwd)/src.tgz}
FA3_COMMIT=0251105a2fb19d2957484b7f023cd8c115286ced
CUTLASS_COMMIT=7127592069c2fe01b041e174ba4345ef9b279671 # FA3's csrc/cutlass submodule at FA3_COMMIT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/cutlass"
git -C "$fa" archive --prefix=hopper/ "$FA3_COMMIT:hopper" | tar -x -C "$tmp/src" --wildcards \
  'hopper/*.h' 'hopper/*.hpp' hopper/flash_prepare_scheduler.cu \
  hopper/instantiations/flash_fwd_hdim128_bf16_sm90.cu hopper/instantiations/flash_bwd_hdim128_bf16_sm90.cu \
  hopper/instantiations/flash_fwd_hdim64_bf16_sm90.cu hopper/instantiations/flash_bwd_hdim64_bf16_sm90.cu
git -C "$fa" show "$FA3_COMMIT:LICENSE" > "$tmp/src/hopper/LICENSE"
git -C "$cutlass" archive --prefix=include/ "$CUTLASS_COMMIT:include" | tar -x -C "$tmp/src/cutlass"
git -C "$cutlass" show "$CUTLASS_COMMIT:LICENSE.txt" > "$tmp/src/cutlass/LICENSE.txt"
launch="$tmp/src/hopper/flash_bwd_launch_template.h"
grep -q 'BOOL_SWITCH(params.h != params.h_k, GQA' "$launch" || { echo "pack: $launch changed; update the trim"; exit 1; }
sed -i 's/BOOL_SWITCH(params.h != params.h_k, GQA,/FA3_BENCH_TRIM_SWITCH(params.h != params.h_k, GQA,/;
        s/BOOL_SWITCH(params.deterministic, Deterministic_,/FA3_BENCH_TRIM_SWITCH(params.deterministic, Deterministic_,/' "$launch"
trim="$tmp/trim.h"
cat > "$trim" <<'H'
// [pack-sources.sh] With -DFA3_BENCH_TRIM the two switches below compile only their `false` case.
#ifdef FA3_BENCH_TRIM
  #define FA3_BENCH_TRIM_SWITCH(COND, CONST_NAME, ...) \
  [&] {                                                \
    constexpr static bool CONST_NAME = false;          \
    return __VA_ARGS__();                              \
  }()
#else
  #define FA3_BENCH_TRIM_SWITCH BOOL_SWITCH
#endif
H
sed -i "/^using namespace cute;/r $trim" "$launch"
echo "flash-attention $FA3_COMMIT hopper/ ; cutlass $CUTLASS_COMMIT include/" > "$tmp/src/SOURCES.txt"
tar czf "$out" -C "$tmp" src
echo "pack: $out ($(du -h "$out" | cut -f1))"
