#!/usr/bin/env bash
# Installs what building tlx needs and is missing: LLVM 22 (Debian's
# llvm-22-dev, for the PTX code generator) and, with --ptxas, NVIDIA's ptxas
# from the PyPI wheel into target/ptxas (the tests assemble every kernel's
# PTX with it).
# scripts/find-ptxas.sh finds the installed copy (scripts/test.sh uses it).
set -euo pipefail

want_ptxas=0
for arg in "$@"; do
  case "$arg" in
    --ptxas) want_ptxas=1 ;;
    *) echo "usage: $0 [--ptxas]" >&2; exit 2 ;;
  esac
done

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# LLVM is linked statically into the proc macro (see Cargo.toml), which also
# needs zlib's and zstd's development libraries.
have_llvm_dev() {
  [ -x /usr/lib/llvm-22/bin/llvm-config ] || return 1
  if command -v dpkg-query >/dev/null 2>&1; then
    installed=$(dpkg-query -W -f='${Status}\n' zlib1g-dev libzstd-dev 2>/dev/null | grep -c "install ok installed" || true)
    [ "$installed" -eq 2 ] || return 1
  fi
  return 0
}

if ! have_llvm_dev; then
  echo "tlx: installing LLVM 22 (llvm-22-dev) from Debian's packages"
  sudo_if_needed apt-get update -qq
  if ! sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      llvm-22-dev libpolly-22-dev zlib1g-dev libzstd-dev >/dev/null; then
    echo "tlx: could not install llvm-22-dev; install LLVM 22 and set LLVM_SYS_221_PREFIX to its prefix" >&2
    exit 1
  fi
fi

if [ "$want_ptxas" -eq 1 ] && [ -z "${TLX_PTXAS:-}" ] && ! command -v ptxas >/dev/null 2>&1; then
  if ! scripts/find-ptxas.sh >/dev/null 2>&1; then
    # Into the project's target folder, not the system's Python: `cargo clean`
    # removes it, and nothing outside the checkout changes.
    echo "tlx: installing ptxas (PyPI nvidia-cuda-nvcc-cu12==12.9.86) into target/ptxas"
    python3 -m pip install -q --disable-pip-version-check --no-deps \
        --target target/ptxas nvidia-cuda-nvcc-cu12==12.9.86 2>&1 \
      | grep -v "Running pip as the 'root' user" || true
  fi
  scripts/find-ptxas.sh >/dev/null || { echo "tlx: ptxas not found after installing" >&2; exit 1; }
fi
