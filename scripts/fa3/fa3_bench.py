#!/usr/bin/env python3
"""FlashAttention-3 (hopper/, built by build.sh into libfa3.so) timed in the same
setting as ../attention_anchors.py: 16k tokens, 16 heads of 128 (and 32 heads of 64
when libfa3 has them), bf16, causal and not. Measurement tool, not project code.

For each shape it first checks FA3's O, dQ, dK, dV against torch SDPA on the cuDNN
backend (max abs error / max |ref|), then prints one line per measurement:

    anchor fa3 <fwd|bwd> d<head_dim> causal=<0|1> S=<seq> <TFLOP/s>

(the backward counted as 2.5 forwards, as in attention_anchors.py; the timed backward
is the FA3 backward call alone, given O and lse from one forward run before).

    python3 scripts/fa3/fa3_bench.py [head-dim prefix, e.g. 128]

libfa3.so is looked up in $FA3_LIB, $FA3_BUILD, $OUT/fa3, then build/ beside this file.
"""
import ctypes
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 2e-2  # relative max error above which a check is flagged MISMATCH


def bench(fn):
    return do_bench(fn, warmup=25, rep=200, return_mode="median")


def find_lib():
    cands = []
    if os.environ.get("FA3_LIB"):
        cands.append(os.environ["FA3_LIB"])
    if os.environ.get("FA3_BUILD"):
        cands.append(os.path.join(os.environ["FA3_BUILD"], "libfa3.so"))
    if os.environ.get("OUT"):
        cands.append(os.path.join(os.environ["OUT"], "fa3", "libfa3.so"))
    cands.append(os.path.join(HERE, "build", "libfa3.so"))
    for c in cands:
        if os.path.isfile(c):
            return c
    raise SystemExit("libfa3.so not found (run build.sh first); tried: " + ", ".join(cands))


def load_lib(path):
    lib = ctypes.CDLL(path)
    i, f, p, sz = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
    lib.fa3_has_head_dim.argtypes = [i]
    lib.fa3_has_head_dim.restype = i
    # (batch, seqlen_q, seqlen_k, heads, heads_k, head_dim, causal)
    lib.fa3_fwd_workspace_size.argtypes = [i] * 7
    lib.fa3_fwd_workspace_size.restype = sz
    # q, k, v, o, lse, batch, seqlen_q, seqlen_k, heads, heads_k, head_dim, scale, causal, scratch, stream
    lib.fa3_fwd.argtypes = [p] * 5 + [i] * 6 + [f, i, p, p]
    lib.fa3_fwd.restype = i
    # dims..., causal, size_t sizes[4]
    lib.fa3_bwd_workspace_sizes.argtypes = [i] * 7 + [ctypes.POINTER(sz)]
    lib.fa3_bwd_workspace_sizes.restype = i
    # q, k, v, o, dout, lse, dq, dk, dv, dq_accum, dsoftmax_sum, softmax_lse_log2, dq_semaphore,
    # batch, seqlen_q, seqlen_k, heads, heads_k, head_dim, scale, causal, stream
    lib.fa3_bwd.argtypes = [p] * 13 + [i] * 6 + [f, i, p]
    lib.fa3_bwd.restype = i
    return lib


def rel_err(x, ref):
    ref = ref.float()
    return ((x.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


class FA3:
    """One problem shape: preallocated outputs and scratch, fwd() and bwd() closures."""

    def __init__(self, lib, q, k, v, dout, causal):
        self.lib = lib
        b, s, h, d = q.shape
        self.dims = (b, s, s, h, h, d)
        self.scale = 1.0 / math.sqrt(d)
        self.causal = int(causal)
        self.stream = torch.cuda.current_stream().cuda_stream
        dev = q.device
        self.q, self.k, self.v, self.dout = q, k, v, dout
        self.o = torch.empty_like(q)
        self.lse = torch.empty((b, h, s), device=dev, dtype=torch.float32)
        nbytes = lib.fa3_fwd_workspace_size(*self.dims, self.causal)
        self.fwd_scratch = torch.empty(nbytes, device=dev, dtype=torch.uint8) if nbytes else None
        sizes = (ctypes.c_size_t * 4)()
        if lib.fa3_bwd_workspace_sizes(*self.dims, self.causal, sizes) != 0:
            raise RuntimeError("fa3_bwd_workspace_sizes failed (see stderr)")
        # dq_accum, dsoftmax_sum, softmax_lse_log2 (float32), dq_semaphore (int32)
        self.bwd_scratch = [torch.empty(n, device=dev, dtype=torch.uint8) for n in sizes]
        self.dq, self.dk, self.dv = (torch.empty_like(t) for t in (q, k, v))

    def fwd(self):
        scratch = self.fwd_scratch.data_ptr() if self.fwd_scratch is not None else None
        rc = self.lib.fa3_fwd(
            self.q.data_ptr(), self.k.data_ptr(), self.v.data_ptr(), self.o.data_ptr(),
            self.lse.data_ptr(), *self.dims, self.scale, self.causal, scratch, self.stream,
        )
        if rc != 0:
            raise RuntimeError(f"fa3_fwd returned {rc} (see stderr)")

    def bwd(self):
        rc = self.lib.fa3_bwd(
            self.q.data_ptr(), self.k.data_ptr(), self.v.data_ptr(), self.o.data_ptr(),
            self.dout.data_ptr(), self.lse.data_ptr(),
            self.dq.data_ptr(), self.dk.data_ptr(), self.dv.data_ptr(),
            *(t.data_ptr() for t in self.bwd_scratch),
            *self.dims, self.scale, self.causal, self.stream,
        )
        if rc != 0:
            raise RuntimeError(f"fa3_bwd returned {rc} (see stderr)")


def reference(q, k, v, dout, causal, scale):
    """cuDNN SDPA on (b, h, s, d) views; returns O, dQ, dK, dV in (b, s, h, d)."""
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    dq, dk, dv = torch.autograd.grad(out, (qt, kt, vt), dout.transpose(1, 2))
    return tuple(t.transpose(1, 2) for t in (out.detach(), dq, dk, dv))


def main():
    dev = "cuda"
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    path = find_lib()
    lib = load_lib(path)
    print(f"# fa3 lib {path} on {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for head_dim, heads in ((128, 16), (64, 32)):
        if not str(head_dim).startswith(only):
            continue
        if not lib.fa3_has_head_dim(head_dim):
            print(f"# fa3 d{head_dim}: not in this libfa3 (build with FA3_HDIM64=1)", flush=True)
            continue
        for causal in (False, True):
            for seq in (512, 1024, 2048, 4096, 8192, 16384):
                batch = 16384 // seq
                shape = (batch, seq, heads, head_dim)
                tag = f"d{head_dim} causal={int(causal)} S={seq}"
                flops = 4 * batch * heads * seq * seq * head_dim / (2 if causal else 1)
                try:
                    q, k, v = (torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(3))
                    dout = torch.randn(shape, device=dev, dtype=torch.bfloat16)
                    fa = FA3(lib, q, k, v, dout, causal)
                    fa.fwd()
                    fa.bwd()
                    torch.cuda.synchronize()
                    try:
                        ref = reference(q, k, v, dout, causal, fa.scale)
                        errs = [rel_err(x, r) for x, r in zip((fa.o, fa.dq, fa.dk, fa.dv), ref)]
                        verdict = "ok" if max(errs) <= TOL else "MISMATCH"
                        print(f"check fa3 {tag} vs cudnn: o {errs[0]:.2e} dq {errs[1]:.2e} "
                              f"dk {errs[2]:.2e} dv {errs[3]:.2e} {verdict}", flush=True)
                        del ref
                    except Exception as e:  # the reference missing for a shape
                        print(f"check fa3 {tag}: no cudnn reference: {e}", flush=True)
                    ms = bench(fa.fwd)
                    print(f"anchor fa3 fwd {tag} {flops / ms / 1e9:.1f}", flush=True)
                    fa.fwd()  # O and lse for the backward (bench left them as the last call did)
                    ms = bench(fa.bwd)
                    print(f"anchor fa3 bwd {tag} {2.5 * flops / ms / 1e9:.1f}", flush=True)
                    del fa, q, k, v, dout
                except Exception as e:
                    print(f"anchor fa3 failed {tag}: {e}", flush=True)


if __name__ == "__main__":
    main()
