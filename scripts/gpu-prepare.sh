#!/usr/bin/env bash
# Builds release binaries here and copies them into .gpu/ (listed in
# .git/info/exclude) for the GPU machine, which has no cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/examples .gpu/tests .gpu/benches
cargo build --release --examples --benches 2>&1 | tail -n 2
cargo test --release --workspace --no-run 2>&1 | tail -n 2
for ex in examples/*.rs; do
  name=$(basename "$ex" .rs)
  cp "target/release/examples/$name" .gpu/examples/
done
for b in benches/*.rs; do
  name=$(basename "$b" .rs)
  cp "$(ls -t target/release/deps/"$name"-* | grep -v '\.d$' | head -n 1)" ".gpu/benches/$name"
done
for t in tests/*.rs; do
  name=$(basename "$t" .rs)
  cp "$(ls -t target/release/deps/"$name"-* | grep -v '\.d$' | head -n 1)" ".gpu/tests/$name"
done
cp ../shared/anchors.py .gpu/ 2>/dev/null || true
du -sh .gpu
for f in .gpu/*/*; do
  if ldd "$f" | grep -qi llvm; then echo "error: $f links libLLVM" >&2; exit 1; fi
done
