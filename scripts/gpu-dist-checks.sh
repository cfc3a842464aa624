#!/usr/bin/env bash
# The distributed kernels on the GPU (issue 53): tests/distributed.rs and
# tests/dist_ops.rs with their kernels built with a 5 s deadline on every
# wait (a broken protocol traps instead of hanging), and benches/dist.rs
# (built without it) with PyTorch's all-gather + matmul beside it
# (scripts/torch_dist_gemm.py, one process per GPU). With fewer GPUs than ranks the ranks share GPU 0.
# Also the grouped GEMMs (issue 55): tests/grouped_gemm.rs, the example,
# benches/grouped_gemm.rs and PyTorch's grouped kernels on its cases
# (scripts/torch_grouped_gemm.py). `ONLY="grouped dist"` runs those parts
# (dist: the tests and example; dist-bench; grouped).
# NCCL is PyTorch's where it is installed (linked as the bindings want).
# `prepare` (here) builds them into .gpu/, packed as .gpu.tgz; `run` (on the
# GPU machine, carrying .gpu.tgz) writes a log per run and a table to $OUT.
#
#   bash scripts/gpu-dist-checks.sh prepare
#   bash scripts/gpu-dist-checks.sh run      # there
set -uo pipefail
cd "$(dirname "$0")/.."
copy_artifacts() { # the test or bench executables cargo's JSON names, into .gpu/
  python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        suffix = "-bench" if "bench" in msg["target"]["kind"] else ""
        shutil.copy(msg["executable"], ".gpu/" + msg["target"]["name"] + suffix)
'
}
case "${1:-}" in
prepare)
  set -e
  rm -rf .gpu && mkdir -p .gpu
  TLX_MBAR_TIMEOUT_NS=5000000000 cargo test --release -p tlx --features ops-dist,ops-grouped \
    --test distributed --test dist_ops --test grouped_gemm --no-run --message-format=json | copy_artifacts
  cargo bench --features ops-dist,ops-gemm,ops-grouped --bench dist --bench grouped_gemm \
    --no-run --message-format=json | copy_artifacts
  cargo build --release --features ops-dist,ops-grouped --example dist_gemm --example hopper_grouped_gemm \
    --example hopper_grouped_gemm_fp8
  cp target/release/examples/{dist_gemm,hopper_grouped_gemm,hopper_grouped_gemm_fp8} .gpu/
  cp scripts/torch_grouped_gemm.py scripts/torch_dist_gemm.py .gpu/
  strip .gpu/* 2>/dev/null || true
  tar czf .gpu.tgz .gpu
  ;;
run)
  [ -d .gpu ] || tar xzf .gpu.tgz || exit 1
  out=${OUT:-gpu-out}
  mkdir -p "$out"
  export NCCL_NVLS_ENABLE=0
  # NCCL from PyTorch's wheel (nvidia-nccl-cu12) ships only libnccl.so.2;
  # the CUDA bindings load libnccl.so, so link it where they look.
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ]; then
    mkdir -p /tmp/tlx-nccl && ln -sf "$nccl_dir/libnccl.so.2" /tmp/tlx-nccl/libnccl.so
    export LD_LIBRARY_PATH="/tmp/tlx-nccl:$nccl_dir:${LD_LIBRARY_PATH:-}"
  fi
  table="$out/table.md"
  printf '| run | result |\n| --- | --- |\n' > "$table"
  check() { # name, then the command
    local name=$1; shift
    local start=$SECONDS
    timeout "${LIMIT:-240}" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    local last
    last=$(grep -E 'test result|panicked|PASS|FAIL' "$out/$name.log" | tail -2 | tr '\n' ' ')
    echo "| $name | rc $rc, $((SECONDS - start)) s, $last |" >> "$table"
  }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
  # ONLY: a list of the parts to run (dist, grouped, dist-bench); all by default.
  want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
  if want grouped; then
    check grouped_gemm .gpu/grouped_gemm --test-threads=1
    check hopper_grouped_gemm .gpu/hopper_grouped_gemm
    check hopper_grouped_gemm_fp8 .gpu/hopper_grouped_gemm_fp8
    # The autotuner's choices per shape come back in $out/tlx-cache.
    TLX_CACHE_DIR="$out/tlx-cache" TLX_GROUPED_CASES="$out/grouped_cases.json" LIMIT=400 \
      check bench_grouped .gpu/grouped_gemm-bench
    LIMIT=300 check torch_grouped python3 .gpu/torch_grouped_gemm.py "$out/grouped_cases.json"
  fi
  if want dist; then
    check distributed .gpu/distributed --test-threads=1
    check dist_ops .gpu/dist_ops --test-threads=1
    check dist_gemm .gpu/dist_gemm
    # Issue 54: memcheck clean on the examples across (2+) real GPUs.
    if [ "$(nvidia-smi -L | wc -l)" -ge 2 ] && command -v compute-sanitizer > /dev/null; then
      LIMIT=400 check memcheck_dist_gemm compute-sanitizer --tool memcheck --error-exitcode 1 .gpu/dist_gemm
    fi
  fi
  if want dist-bench; then
    LIMIT=400 check bench_dist .gpu/dist-bench
    # PyTorch's own all-gather + matmul, one process per GPU (needs 2+ GPUs).
    LIMIT=300 check torch_dist python3 .gpu/torch_dist_gemm.py
  fi
  cat "$out/device.txt" "$table"
  for log in bench_dist torch_dist bench_grouped torch_grouped; do
    [ -e "$out/$log.log" ] && grep -E '^\||^note|^device|^torch' "$out/$log.log"
  done
  ;;
*)
  echo "usage: $0 prepare | run" >&2
  exit 2
  ;;
esac
