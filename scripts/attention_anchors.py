#!/usr/bin/env python3
"""Reference attention numbers for `benches/attention.rs`, measured on the
GPU machine in the same sitting: torch's scaled_dot_product_attention with
the cuDNN and the flash (FA2) backends, forward and backward, in the FA3
paper's setting (16k tokens, 16 heads of 128; 32 heads of 64, 8 of 256), bf16,
causal and not. Prints one line per measurement:

    anchor <backend> <fwd|bwd> d<head_dim> causal=<0|1> S=<seq> <TFLOP/s>

(the backward counted as 2.5 forwards, as the bench does). Combine with the
bench's output using `scripts/attention_table.py`.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def main():
    dev = "cuda"
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for head_dim, heads in ((128, 16), (64, 32), (256, 8)):
        if not str(head_dim).startswith(only):
            continue
        for causal in (False, True):
            for seq in (512, 1024, 2048, 4096, 8192, 16384):
                batch = 16384 // seq
                shape = (batch, heads, seq, head_dim)
                q, k, v = (
                    torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    for _ in range(3)
                )
                grad = torch.randn(shape, device=dev, dtype=torch.bfloat16)
                flops = 4 * batch * heads * seq * seq * head_dim / (2 if causal else 1)
                backends = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))
                for name, backend in backends:
                    tag = f"d{head_dim} causal={int(causal)} S={seq}"
                    try:
                        with sdpa_kernel(backend):
                            fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            ms = bench(fwd)
                            print(f"anchor {name} fwd {tag} {flops / ms / 1e9:.1f}", flush=True)
                            out = fwd()
                            bwd = lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
                            ms = bench(bwd)
                            print(f"anchor {name} bwd {tag} {2.5 * flops / ms / 1e9:.1f}", flush=True)
                    except Exception as e:  # a backend missing for a shape
                        print(f"anchor {name} failed {tag}: {e}", flush=True)


if __name__ == "__main__":
    main()
