#!/usr/bin/env python3
"""cuDNN's attention backward timed the way `benches/attention.rs` times
ours, for comparing the two where the timing procedure matters (the power
cap at 16k tokens): per repetition, 23 forwards, then 12 backwards each
timed with CUDA events, median. Prints one line per repetition.

    python3 scripts/cudnn_bwd_sequence.py [seq] [heads] [head_dim] [repetitions]
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    defaults = ["16384", "16", "128", "5"]
    given = sys.argv[1:]
    seq, heads, head_dim, reps = (int(a) for a in given + defaults[len(given):])
    shape = (16384 // seq, heads, seq, head_dim)
    q, k, v = (
        torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3)
    )
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    flops = 4 * shape[0] * heads * seq * seq * head_dim
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(reps):
            for _ in range(23):
                out = F.scaled_dot_product_attention(q, k, v)
            times = []
            for _ in range(12):
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            times.sort()
            ms = [round(t, 2) for t in times]
            print(f"cudnn bwd median {2.5 * flops / times[6] / 1e9:.1f} TFLOP/s, ms {ms}", flush=True)


if __name__ == "__main__":
    main()
