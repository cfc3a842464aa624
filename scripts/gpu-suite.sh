#!/usr/bin/env bash
# Runs on the GPU machine (no cargo there): every prebuilt example and test
# binary in .gpu/, the benchmarks, and compute-sanitizer over the examples.
# Each step has a timeout so one hang cannot eat the sitting. Logs go to
# $OUT (or ./gpu-out); a summary table is printed last.
# TLX_SANITIZE=0 skips compute-sanitizer, 1 (the default) runs memcheck, 2
# adds racecheck and synccheck; TLX_ANCHORS=1 adds the reference numbers,
# and with TLX_FA3=1 FlashAttention-3's beside them (a few minutes of nvcc;
# needs .gpu/fa3, which gpu-prepare.sh packs when scripts/fa3/src.tgz exists).
#
# Prepare here with: bash scripts/gpu-prepare.sh, and carry .gpu.tgz (the
# unpacked .gpu/ is over the device tool's 64 MiB).
set -uo pipefail
[ -d .gpu ] || tar xzf .gpu.tgz || {
  echo "no .gpu/ or .gpu.tgz here: run scripts/gpu-prepare.sh and carry .gpu.tgz" >&2
  exit 1
}
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=.gpu
summary=()
step() { # name timeout command...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local verdict=ok
  [ $rc -eq 124 ] && verdict=TIMEOUT
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && verdict="FAIL($rc)"
  summary+=("| $name | $verdict | $((SECONDS - start)) s | $(grep -E '^(PASS|FAIL)' "$out/$name.log" | head -3 | tr '\n' ' ') |")
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt" 2>&1
for ex in "$bin"/examples/*; do
  [ -x "$ex" ] && step "example-$(basename "$ex")" 120 "$ex"
done
for t in "$bin"/tests/*; do
  # GPU-only tests are #[ignore]d so that runs without a GPU show them as not run.
  [ -x "$t" ] && step "test-$(basename "$t")" 300 "$t" --test-threads=1 --nocapture --include-ignored
done
if [ "${TLX_SANITIZE:-1}" != 0 ] && command -v compute-sanitizer >/dev/null; then
  for ex in "$bin"/examples/*; do
    [ -x "$ex" ] && step "memcheck-$(basename "$ex")" 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$ex"
  done
  # The warp-specialized kernels' shared-memory races and barrier misuse
  # (slow: TLX_SANITIZE=2 only), on the examples' small problems: racecheck
  # runs them hundreds of times slower, and the small set has every case
  # kind (ragged lengths, GQA, causal, each head dim) of the full one.
  [ "${TLX_SANITIZE:-1}" = 2 ] && for ex in "$bin"/examples/hopper_fa_* "$bin"/examples/hopper_gemm_ws "$bin"/examples/cluster_exchange; do
    for tool in racecheck synccheck; do
      [ -x "$ex" ] && step "$tool-$(basename "$ex")" 300 env TLX_EXAMPLE_SIZE=small \
        compute-sanitizer --tool "$tool" --error-exitcode 9 "$ex"
    done
  done
fi
for b in "$bin"/benches/*; do
  [ -x "$b" ] && step "bench-$(basename "$b")" 300 "$b"
done
if [ "${TLX_ANCHORS:-0}" = 1 ] && [ -f .gpu/anchors.py ]; then
  step anchors 200 python3 .gpu/anchors.py
fi
# Attention: cuDNN and torch flash forward and backward in the same sitting,
# then the combined table and plot.
if [ "${TLX_ANCHORS:-0}" = 1 ] && [ -f .gpu/attention_anchors.py ]; then
  step attention-anchors 300 python3 .gpu/attention_anchors.py
  if [ "${TLX_FA3:-0}" = 1 ] && [ -f .gpu/fa3/build.sh ]; then
    step fa3-build 600 env FA3_BUILD="$out/fa3" bash .gpu/fa3/build.sh
    step fa3-anchors 300 env FA3_LIB="$out/fa3/libfa3.so" python3 .gpu/fa3/fa3_bench.py
    cat "$out/fa3-anchors.log" >> "$out/attention-anchors.log"
  fi
  [ -f "$out/bench-attention.log" ] && python3 .gpu/attention_table.py \
    "$out/bench-attention.log" "$out/attention-anchors.log" "$out/attention" > "$out/attention-table.md" 2>&1
fi
echo "device: $(cat "$out/device.txt")"
for b in "$out"/bench-*.log; do [ -f "$b" ] && { echo "== $b"; grep '^|' "$b"; }; done
echo "| step | result | time | verdict lines |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${summary[@]}"
