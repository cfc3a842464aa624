# PyTorch's grouped GEMMs on the cases `benches/grouped_gemm.rs` wrote
# (TLX_GROUPED_CASES=cases.json): torch._grouped_mm (bf16, CUTLASS's grouped
# kernel on sm90) and torch._scaled_grouped_mm (fp8 e4m3, rowwise scales),
# timed as the bench times ours (triton's do_bench: 25 ms warm-up, 200 ms
# of runs, median). Contiguous cases: A [rows, K] sorted by expert, weights
# [E, N, K] passed transposed (their natural layout), int32 end offsets.
# Masked (decode) cases: the batched [E, m_max, K] x [E, K, N] form, every
# expert's m_max rows. Run on the GPU machine in the same sitting:
#   python3 scripts/torch_grouped_gemm.py cases.json
import json
import sys

import torch
from triton.testing import do_bench


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def pad16(sizes):
    return [(s + 15) // 16 * 16 for s in sizes]


def contiguous(case, fp8):
    k, n, sizes = case["k"], case["n"], case["sizes"]
    e = len(sizes)
    note = ""
    for attempt in ("as given", "padded to 16"):
        used = sizes if attempt == "as given" else pad16(sizes)
        rows = sum(used)
        a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16)
        offs = torch.tensor(used, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
        if fp8:
            a8 = a.to(torch.float8_e4m3fn)
            w8 = w.to(torch.float8_e4m3fn)
            sa = torch.rand(rows, device="cuda", dtype=torch.float32) + 0.5
            sb = torch.rand(e, n, device="cuda", dtype=torch.float32) + 0.5
            del a, w
            f = lambda: torch._scaled_grouped_mm(
                a8, w8.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True
            )
        else:
            f = lambda: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
        try:
            f()
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 - the table says what failed
            note = "%s: %s" % (attempt, str(err).splitlines()[0][:120])
            f = None
        if f is not None:
            ms = do_bench(f, warmup=25, rep=200)
            flops = 2.0 * sum(sizes) * n * k
            return tflops(flops, ms), ("" if attempt == "as given" else "group sizes padded to 16")
    return None, note


def masked(case, fp8):
    k, n, sizes, m_max = case["k"], case["n"], case["sizes"], case["m_max"]
    e = len(sizes)
    a = torch.randn(e, m_max, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(e, n, k, device="cuda", dtype=torch.bfloat16)
    if fp8:
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        sa = torch.rand(e, m_max, device="cuda", dtype=torch.float32) + 0.5
        sb = torch.rand(e, n, device="cuda", dtype=torch.float32) + 0.5
        f = lambda: torch._scaled_grouped_mm(
            a8, w8.transpose(-2, -1), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True
        )
    else:
        f = lambda: torch._grouped_mm(a, w.transpose(-2, -1))
    try:
        f()
        torch.cuda.synchronize()
    except Exception as err:  # noqa: BLE001
        return None, str(err).splitlines()[0][:120]
    ms = do_bench(f, warmup=25, rep=200)
    # Counted as the bench counts ours: the routed rows only.
    return tflops(2.0 * sum(sizes) * n * k, ms), "all m_max rows computed"


def main():
    cases = json.load(open(sys.argv[1]))
    print("torch", torch.__version__, "on", torch.cuda.get_device_name())
    print("| case | torch._grouped_mm bf16 TFLOP/s | torch._scaled_grouped_mm fp8 TFLOP/s | notes |")
    print("| --- | --- | --- | --- |")
    for case in cases:
        run = masked if case["m_max"] is not None else contiguous
        results = [run(case, fp8) for fp8 in (False, True)]
        cells = ["%.0f" % r if r is not None else "failed" for r, _ in results]
        notes = "; ".join(n for _, n in results if n)
        print("| %s | %s | %s | %s |" % (case["name"], cells[0], cells[1], notes))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
