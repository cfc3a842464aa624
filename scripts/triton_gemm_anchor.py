# Upstream Triton's GEMM on the paper's H100 shapes, in the two ways a Triton
# user writes it: pointer loads (the tutorial's kernel) and tensor
# descriptors (TMA). Run on the GPU machine in the same sitting as
# `benches/gemm`; prints TFLOP/s per shape, the best of a few configurations.
import torch, triton, triton.language as tl
from triton.testing import do_bench

dev = "cuda"
torch.manual_seed(0)
GH = {"GH1": (8192, 8192, 1024), "GH2": (8192, 8192, 2048), "GH3": (8192, 8192, 4096),
      "GH4": (8192, 8192, 8192), "GH5": (8192, 8192, 16384), "GH6": (2304, 12800, 32768),
      "GH7": (2285568, 256, 256)}
CONFIGS = ((128, 256, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 64, 4, 4))


@triton.jit
def tile_of(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GM: tl.constexpr):
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    first = pid // (GM * npn) * GM
    rows = min(npm - first, GM)
    return first + (pid % (GM * npn)) % rows, (pid % (GM * npn)) // rows


@triton.jit
def mm_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pm, pn = tile_of(tl.program_id(0), M, N, BM, BN, GM)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        ks = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mm_descriptors(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pm, pn = tile_of(tl.program_id(0), M, N, BM, BN, GM)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pm * BM, k * BK]), b_desc.load([k * BK, pn * BN]), acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(name, M, N, K):
    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    c = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
    want = (a.float() @ b.float())
    results = {}
    for kind in ("pointers", "descriptors"):
        best, label = 0.0, "none"
        for (BM, BN, BK, st, nw) in CONFIGS:
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
            try:
                if kind == "pointers":
                    fn = lambda: mm_pointers[grid](a, b, c, M, N, K, BM, BN, BK, 8, num_stages=st, num_warps=nw)
                else:
                    from triton.tools.tensor_descriptor import TensorDescriptor
                    ad = TensorDescriptor.from_tensor(a, [BM, BK])
                    bd = TensorDescriptor.from_tensor(b, [BK, BN])
                    fn = lambda: mm_descriptors[grid](ad, bd, c, M, N, K, BM, BN, BK, 8, num_stages=st, num_warps=nw)
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = ((c.float() - want).norm() / want.norm()).item()
                if not err < 1e-2:
                    print(name, kind, (BM, BN, BK, st, nw), "WRONG", err, flush=True)
                    continue
                ms = do_bench(fn, warmup=25, rep=200, return_mode="median")
                t = 2 * M * N * K / ms / 1e9
                if t > best:
                    best, label = t, f"{BM}x{BN}x{BK} s{st} w{nw}"
            except Exception as e:
                print(name, kind, (BM, BN, BK, st, nw), "failed:", str(e).splitlines()[0] if str(e) else type(e).__name__, flush=True)
        results[kind] = (best, label)
    print(f"| {name} | {results['pointers'][0]:.0f} ({results['pointers'][1]}) | {results['descriptors'][0]:.0f} ({results['descriptors'][1]}) |", flush=True)


print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name())
print("| shape | Triton pointers TFLOP/s | Triton descriptors TFLOP/s |")
print("| --- | --- | --- |")
for name, shape in GH.items():
    run(name, *shape)
