#!/usr/bin/env bash
# Builds libfa3.so: FlashAttention-3 (hopper/) bf16 sm90 forward + backward for head dim 128
# (and 64 with FA3_HDIM64=1), plus shim.cu's C ABI. Measurement tool, not project code.
#
#   bash scripts/fa3/build.sh          (from anywhere; paths are relative to this script)
#
# Environment:
#   FA3_BUILD       where objects, logs and libfa3.so go (default $OUT/fa3 if OUT is set, else ./build
#                   beside this script)
#   FA3_PREBUILT    optional folder of objects from an earlier run (e.g. a carried-back $OUT/fa3):
#                   a TU whose .o is there (with a matching .stamp, or no .stamp) is not recompiled
#   FA3_HDIM64=1    also compile the hdim64 fwd/bwd TUs (libfa3 then takes head_dim 64 too)
#   FA3_TRIM=0      compile the untrimmed backward (all GQA/deterministic variants; slower build)
#   FA3_SPLIT_COMPILE=N  pass --split-compile=N to nvcc (faster, but nvcc says it may change the code)
#   NVCC_THREADS    nvcc --threads (default 2, as FA3's setup.py)
#   CUDA_HOME / NVCC  toolkit (default /usr/local/cuda)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="${NVCC:-$CUDA_HOME/bin/nvcc}"
if [ -n "${FA3_BUILD:-}" ]; then B="$FA3_BUILD"
elif [ -n "${OUT:-}" ]; then B="$OUT/fa3"
else B="$HERE/build"; fi
mkdir -p "$B" && B="$(cd "$B" && pwd)" || { echo "fa3 build: cannot create $B"; exit 1; }

SRC="$HERE/src"
if [ ! -d "$SRC/hopper" ] || [ ! -d "$SRC/cutlass/include" ]; then
  if [ ! -f "$HERE/src.tgz" ]; then echo "fa3 build: neither $SRC nor $HERE/src.tgz"; exit 1; fi
  t0=$SECONDS
  tar xzf "$HERE/src.tgz" -C "$HERE" || { echo "fa3 build: cannot extract src.tgz"; exit 1; }
  echo "fa3 build: extracted src.tgz ($((SECONDS - t0)) s)"
fi

[ -x "$NVCC" ] || { echo "fa3 build: no nvcc at $NVCC"; exit 1; }
"$NVCC" --version | tail -2
echo "fa3 build: objects in $B; $(nproc) cores"

# nvcc 13 puts CCCL in include/cccl and its nvcc.profile adds it; FA3's setup.py (CUDA >= 13)
# puts it on CPLUS_INCLUDE_PATH for its host-compiled flash_api.cpp. Add it only if the profile
# does not.
CCCL_FLAGS=()
if [ -d "$CUDA_HOME/include/cccl" ] && ! grep -qs 'include/cccl' "$(dirname "$NVCC")/nvcc.profile"; then
  CCCL_FLAGS=(-isystem "$CUDA_HOME/include/cccl")
fi

# FA3's hopper/setup.py nvcc flags for *_sm90.cu (less -lineinfo and --resource-usage, which only
# add line tables / print register counts), torch's CUDAExtension defaults (the __CUDA_NO_HALF*
# defines, --expt-relaxed-constexpr, -fPIC), and the FLASHATTENTION_DISABLE_* defines that the
# compiled code checks and that we do not use (see README.txt).
FLAGS=(
  -O3 -std=c++17 --ftemplate-backtrace-limit=0 --use_fast_math
  -gencode arch=compute_90a,code=sm_90a
  --threads "${NVCC_THREADS:-2}"
  -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90
  -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG
  -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
  -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__
  --expt-relaxed-constexpr --expt-extended-lambda
  -Xcompiler -fPIC
  -DFLASHATTENTION_DISABLE_LOCAL -DFLASHATTENTION_DISABLE_VARLEN -DFLASHATTENTION_DISABLE_APPENDKV
  -I"$SRC/hopper" -I"$SRC/cutlass/include"
  "${CCCL_FLAGS[@]}"
)
[ "${FA3_TRIM:-1}" = "1" ] && FLAGS+=(-DFA3_BENCH_TRIM)
[ -n "${FA3_SPLIT_COMPILE:-}" ] && FLAGS+=("--split-compile=$FA3_SPLIT_COMPILE")

I="$SRC/hopper/instantiations"
# name|source|extra flags
TUS=(
  "flash_fwd_hdim128_bf16_sm90|$I/flash_fwd_hdim128_bf16_sm90.cu|"
  "flash_bwd_hdim128_bf16_sm90|$I/flash_bwd_hdim128_bf16_sm90.cu|"
  "flash_prepare_scheduler|$SRC/hopper/flash_prepare_scheduler.cu|"
  "shim|$HERE/shim.cu|"
)
if [ "${FA3_HDIM64:-0}" = "1" ]; then
  TUS+=(
    "flash_fwd_hdim64_bf16_sm90|$I/flash_fwd_hdim64_bf16_sm90.cu|"
    "flash_bwd_hdim64_bf16_sm90|$I/flash_bwd_hdim64_bf16_sm90.cu|"
    "shim_h64|$HERE/shim.cu|-DFA3_WITH_HDIM64"
  )
fi

# A stamp (hash of nvcc version, flags and the TU's own source) guards against reusing an object
# built differently. Headers are not hashed: they are fixed by src.tgz.
NVCC_ID="$("$NVCC" --version | tail -1)"
stamp_of() { # src extra
  { echo "$NVCC_ID"; printf '%s\n' "${FLAGS[@]}" | sed "s#$SRC#SRC#g; s#$HERE#HERE#g"; echo "$2"; cat "$1"; } | md5sum | cut -c1-16
}
reusable() { # dir name stamp
  [ -f "$1/$2.o" ] || return 1
  [ -f "$1/$2.stamp" ] || return 0
  [ "$(cat "$1/$2.stamp")" = "$3" ]
}

declare -A PID STATUS
START=$SECONDS
for tu in "${TUS[@]}"; do
  IFS='|' read -r name src extra <<< "$tu"
  st="$(stamp_of "$src" "$extra")"
  if reusable "$B" "$name" "$st"; then STATUS[$name]="reused"; continue; fi
  if [ -n "${FA3_PREBUILT:-}" ] && [ "$(cd "$FA3_PREBUILT" 2>/dev/null && pwd)" != "$B" ] \
      && reusable "$FA3_PREBUILT" "$name" "$st"; then
    cp "$FA3_PREBUILT/$name.o" "$B/$name.o" && echo "$st" > "$B/$name.stamp" && STATUS[$name]="prebuilt" && continue
  fi
  rm -f "$B/$name.o" "$B/$name.stamp"
  # shellcheck disable=SC2086
  cmd=("$NVCC" "${FLAGS[@]}" $extra -c "$src" -o "$B/$name.o.tmp")
  (
    t0=$(date +%s.%N)
    { printf '%q ' "${cmd[@]}"; echo; echo; } > "$B/$name.log"
    "${cmd[@]}" >> "$B/$name.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    echo "rc=$rc wall=${secs}s" >> "$B/$name.log"
    if [ $rc -eq 0 ]; then mv "$B/$name.o.tmp" "$B/$name.o" && echo "$st" > "$B/$name.stamp"; fi
    echo "fa3 build: TU $name rc=$rc ${secs} s"
    exit $rc
  ) &
  PID[$name]=$!
  STATUS[$name]="compiling"
done
for name in "${!PID[@]}"; do
  if wait "${PID[$name]}"; then STATUS[$name]="built"; else
    STATUS[$name]="FAILED"
    echo "----- $name.log (tail) -----"; tail -n 40 "$B/$name.log"; echo "-----"
  fi
done
for tu in "${TUS[@]}"; do IFS='|' read -r name _ _ <<< "$tu"; echo "fa3 build: $name: ${STATUS[$name]}"; done
echo "fa3 build: compile phase $((SECONDS - START)) s"
[ -f "$B/flash_fwd_hdim128_bf16_sm90.log" ] && { echo "fa3 build: nvcc command line (fwd128):"; head -n 1 "$B/flash_fwd_hdim128_bf16_sm90.log"; }

ok() { [ -f "$B/$1.o" ]; }
for req in flash_fwd_hdim128_bf16_sm90 flash_bwd_hdim128_bf16_sm90 shim; do
  ok "$req" || { echo "fa3 build: missing $req.o, not linking"; exit 1; }
done
OBJS=("$B/flash_fwd_hdim128_bf16_sm90.o" "$B/flash_bwd_hdim128_bf16_sm90.o")
HAS64=0
if [ "${FA3_HDIM64:-0}" = "1" ] && ok flash_fwd_hdim64_bf16_sm90 && ok flash_bwd_hdim64_bf16_sm90 && ok shim_h64; then
  OBJS+=("$B/flash_fwd_hdim64_bf16_sm90.o" "$B/flash_bwd_hdim64_bf16_sm90.o" "$B/shim_h64.o"); HAS64=1
else
  OBJS+=("$B/shim.o")
fi
if ok flash_prepare_scheduler; then OBJS+=("$B/flash_prepare_scheduler.o")
else echo "fa3 build: flash_prepare_scheduler.o missing; linking the shim's weak stand-in (varlen unused)"; fi

LINK=("$NVCC" -shared -Xcompiler -fPIC --cudart static -o "$B/libfa3.so.tmp" "${OBJS[@]}")
printf '%q ' "${LINK[@]}" > "$B/link.log"; echo >> "$B/link.log"
if ! "${LINK[@]}" >> "$B/link.log" 2>&1; then echo "fa3 build: link failed"; cat "$B/link.log"; exit 1; fi
mv "$B/libfa3.so.tmp" "$B/libfa3.so"
echo "fa3 build: linked $B/libfa3.so ($(du -h "$B/libfa3.so" | cut -f1), hdim64=$HAS64) in $((SECONDS - START)) s total"
nm -D --defined-only "$B/libfa3.so" | awk '$3 ~ /^fa3_/ { print "  export " $3 }'
if command -v ldd > /dev/null; then
  undef=$(ldd -r "$B/libfa3.so" 2>&1 | grep -c 'undefined symbol' || true)
  [ "$undef" = "0" ] || { echo "fa3 build: WARNING $undef undefined symbols:"; ldd -r "$B/libfa3.so" 2>&1 | grep 'undefined symbol' | head; }
fi
exit 0
