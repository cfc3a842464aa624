#!/usr/bin/env bash
# Regenerates the golden PTX files (tlx-codegen/tests/golden/*.ptx) from the
# current compiler, then shows what changed so the change can be reviewed
# before it is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
TLX_BLESS=1 cargo test -p tlx-codegen --test compiler golden_ptx:: "$@"
git status --short -- tlx-codegen/tests/golden
git --no-pager diff --stat -- tlx-codegen/tests/golden
echo "review with: git diff -- tlx-codegen/tests/golden"
