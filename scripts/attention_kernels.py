#!/usr/bin/env python3
"""The kernels torch's attention references launch for a forward pass, with
their launch shapes: which cuDNN and flash kernel runs a given shape, its
grid and block, registers a thread, shared memory and duration (one forward
under torch's profiler, after three warm-up calls). Run on the GPU machine:

    python3 scripts/attention_kernels.py [D:CAUSAL:SEQ ...]

e.g. `64:1:512 128:0:4096` (default: a few d64/d128 shapes of the bench's
setting, 16k tokens, bf16, inputs that require grad as in training).
"""
import json
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

DEFAULT = ["64:1:512", "64:1:2048", "64:0:512", "128:1:512", "128:0:4096"]
BACKENDS = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))


def kernels(fn):
    """(name, args) of each kernel `fn` launches."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    return [(e["name"], e.get("dur"), e.get("args", {})) for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def main():
    for spec in sys.argv[1:] or DEFAULT:
        head_dim, causal, seq = (int(x) for x in spec.split(":"))
        heads, batch = 2048 // head_dim, 16384 // seq
        shape = (batch, heads, seq, head_dim)
        q, k, v = (
            torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3)
        )
        for name, backend in BACKENDS:
            with sdpa_kernel(backend):
                found = kernels(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))
            for kernel, dur, a in found:
                print(
                    f"{name} d{head_dim} causal={causal} S={seq}: {kernel[:120]} {dur} us"
                    f" grid={a.get('grid')} block={a.get('block')}"
                    f" regs={a.get('registers per thread')} smem={a.get('shared memory')}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
