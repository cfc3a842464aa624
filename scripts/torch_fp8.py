# cuBLASLt fp8 reference for the fp8 GEMM bench: torch._scaled_mm at 8192^3,
# e4m3 in, bf16 out, with and without fast accumulation. Run on the GPU
# machine in the same sitting as `TLX_BENCH_ONLY=fp8 .gpu/benches/gemm`.
import torch

M = N = K = 8192
a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
one = torch.tensor(1.0, device="cuda")
for fast in (False, True):
    f = lambda: torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
    for _ in range(3):
        f()
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        f()
    e.record()
    torch.cuda.synchronize()
    ms = s.elapsed_time(e) / 20
    print("torch._scaled_mm fp8 8192^3 use_fast_accum=%s: %.1f TFLOP/s" % (fast, 2 * M * N * K / ms / 1e9))
