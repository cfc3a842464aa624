#!/usr/bin/env bash
# The synchronization checks that need a GPU (issue 52): random kernels on
# the GPU against the interpreter and their reference, the DSM ring stress
# test and the tile swap through TMA after a proxy fence (tests/clusters.rs),
# the timelines test with a buffer too small for the waits
# (tests/timelines.rs), programs waiting on each other's flags
# (tests/signals.rs), and compute-sanitizer's racecheck and synccheck over
# the small cluster_exchange and the swap. `prepare` (here) builds them into
# .gpu/, packed as .gpu.tgz; `run` (on the GPU machine, carrying .gpu.tgz)
# writes a log per run and a table to $OUT.
#
#   bash scripts/gpu-sync-checks.sh prepare
#   bash scripts/gpu-sync-checks.sh run      # there
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
prepare)
  set -e
  rm -rf .gpu && mkdir -p .gpu
  cargo test --release -p tlx --test clusters --test timelines --test signals --no-run --message-format=json |
    python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        shutil.copy(msg["executable"], ".gpu/" + msg["target"]["name"])
'
  # The compiler's test binary (it links LLVM: the random kernels are
  # generated and compiled on the GPU machine), in the dev profile.
  cargo test -p tlx-codegen --test compiler --no-run --message-format=json |
    python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        shutil.copy(msg["executable"], ".gpu/compiler")
'
  cargo build --release --example cluster_exchange
  cp target/release/examples/cluster_exchange .gpu/
  strip .gpu/* 2>/dev/null || true
  tar czf .gpu.tgz .gpu
  ;;
run)
  [ -d .gpu ] || tar xzf .gpu.tgz || exit 1
  out=${OUT:-gpu-out}
  mkdir -p "$out"
  table="$out/table.md"
  printf '| run | result |\n| --- | --- |\n' > "$table"
  check() { # name, then the command
    local name=$1; shift
    local start=$SECONDS
    timeout 300 "$@" > "$out/$name.log" 2>&1
    local rc=$?
    local last
    last=$(grep -E 'test result|PASS|FAIL|ERROR SUMMARY|RACECHECK SUMMARY|random kernels: .* in ' "$out/$name.log" | tail -2 | tr '\n' ' ')
    echo "| $name | rc $rc, $((SECONDS - start)) s, $last |" >> "$table"
  }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
  check clusters .gpu/clusters --include-ignored
  check timelines .gpu/timelines --include-ignored
  check signals .gpu/signals --include-ignored
  check cluster_exchange .gpu/cluster_exchange
  TLX_RANDOM_KERNELS=${TLX_RANDOM_KERNELS:-2000} check random_kernels .gpu/compiler --include-ignored --nocapture random_kernels_match_on_the_gpu
  export TLX_EXAMPLE_SIZE=small
  check racecheck_cluster_exchange compute-sanitizer --tool racecheck .gpu/cluster_exchange
  swap=peers_swap_tiles_and_send_them_out_by_tma_on_the_gpu
  check racecheck_swap compute-sanitizer --tool racecheck .gpu/clusters --include-ignored "$swap"
  check synccheck_swap compute-sanitizer --tool synccheck .gpu/clusters --include-ignored "$swap"
  cat "$out/device.txt" "$table"
  ;;
*)
  echo "usage: $0 prepare | run" >&2
  exit 2
  ;;
esac
