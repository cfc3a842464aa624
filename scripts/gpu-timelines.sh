#!/usr/bin/env bash
# GPU timelines (TLX_TRACE) of the FA forward/backward and the WS GEMM, and
# what recording costs. `prepare` (here) builds the attention and GEMM
# benches and two examples twice, without and with timelines (TLX_TRACE set
# at build time), plus the timelines test, into .gpu/{plain,traced}, packed
# as .gpu.tgz; `run` (on the GPU machine, carrying .gpu.tgz) runs each
# bench both ways on one attention shape and GH4 (TLX_TIMELINE_ROUNDS
# times for the attention), records the traces, and leaves logs, traces
# and a table in $OUT/all.tgz.
#
#   bash scripts/gpu-timelines.sh prepare
#   bash scripts/gpu-timelines.sh run        # there
#   python3 scripts/trace_plot.py fa_4096.json.gz fa.png --sms 0,1 --stats
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
prepare)
  set -e
  rm -rf .gpu && mkdir -p .gpu/plain .gpu/traced
  copy() { # folder, then cargo args
    local dest=$1; shift
    cargo "$@" --release --message-format=json | python3 -c '
import json, shutil, sys, os
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        shutil.copy(msg["executable"], os.path.join(sys.argv[1], msg["target"]["name"]))
' "$dest"
  }
  targets=(--features ops --bench attention --bench gemm --example hopper_gemm_ws --example hopper_fa_fwd)
  copy .gpu/plain build "${targets[@]}"
  copy .gpu/plain test -p tlx --test timelines --no-run
  TLX_TRACE=on copy .gpu/traced build "${targets[@]}"
  strip .gpu/plain/* .gpu/traced/* 2>/dev/null || true
  tar czf .gpu.tgz .gpu
  ;;
run)
  [ -d .gpu ] || tar xzf .gpu.tgz || exit 1
  out=${OUT:-gpu-out}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
  step() { # name, then the command
    local name=$1; shift
    local start=$SECONDS
    timeout 150 "$@" > "$out/$name.log" 2>&1
    echo "| $name | rc=$? | $((SECONDS - start)) s |" | tee -a "$out/summary.txt"
  }
  shape=${TLX_TIMELINE_SHAPE:-128 false 4096}
  step test-timelines .gpu/plain/timelines --include-ignored --nocapture --test-threads=1
  step ex-gemm-ws-traced env TLX_TRACE="$out/gemm_ws_example.json" .gpu/traced/hopper_gemm_ws
  step ex-fa-fwd-traced env TLX_EXAMPLE_SIZE=small TLX_TRACE="$out/fa_fwd_small.json" \
    TLX_TRACE_LAUNCHES=1 .gpu/traced/hopper_fa_fwd
  # Each bench built plain and with timelines. The latter records the first
  # launches of each kernel (the check, and for the attention the first
  # warm-up run) and times later ones, which pass no buffer: what a kernel
  # built with timelines costs when nothing records. A recorded launch's
  # own span says what recording costs.
  for round in $(seq "${TLX_TIMELINE_ROUNDS:-1}"); do
    step "att-plain-$round" env TLX_BENCH_ONLY="$shape" .gpu/plain/attention
    step "att-traced-$round" env TLX_BENCH_ONLY="$shape" TLX_TRACE="$out/fa_4096_$round.json" \
      TLX_TRACE_LAUNCHES=2 TLX_TRACE_EVENTS=2400 .gpu/traced/attention
  done
  step gemm-plain env TLX_BENCH_ONLY=GH4 .gpu/plain/gemm
  step gemm-traced env TLX_BENCH_ONLY=GH4 TLX_TRACE="$out/gemm_gh4.json" \
    TLX_TRACE_LAUNCHES=1 TLX_TRACE_EVENTS=1200 .gpu/traced/gemm
  for f in "$out"/*.json; do gzip -9 "$f"; done
  (cd "$out" && tar czf all.tgz ./*.log ./*.txt ./*.json.gz && find . -type f ! -name all.tgz -delete)
  tar xzf "$out/all.tgz" -O ./summary.txt
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
