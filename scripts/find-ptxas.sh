#!/usr/bin/env bash
# Prints the path of ptxas: $TLX_PTXAS, then PATH, then the PyPI wheel's copy
# (installed by install-deps.sh under target/ptxas, or in Python's own path).
set -euo pipefail
if [ -n "${TLX_PTXAS:-}" ] && [ -x "$TLX_PTXAS" ]; then echo "$TLX_PTXAS"; exit 0; fi
if command -v ptxas >/dev/null 2>&1; then command -v ptxas; exit 0; fi
cd "$(dirname "$0")/.."
local_copy=target/ptxas/nvidia/cuda_nvcc/bin/ptxas
if [ -x "$local_copy" ]; then echo "$PWD/$local_copy"; exit 0; fi
path=$(python3 - <<'PY' 2>/dev/null || true
import os
try:
    import nvidia.cuda_nvcc as m
    for root in m.__path__:
        p = os.path.join(root, "bin", "ptxas")
        if os.access(p, os.X_OK):
            print(p)
            break
except ImportError:
    pass
PY
)
[ -n "$path" ] || exit 1
echo "$path"
