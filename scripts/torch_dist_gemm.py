# PyTorch's own all-gather + GEMM across GPUs (issue 54's third reference
# beside NCCL-then-tlx::ops::gemm and NCCL-then-cuBLAS in benches/dist.rs):
# one process per GPU (torch.multiprocessing), the NCCL backend, A split by
# rows across the ranks, `dist.all_gather_into_tensor` then `torch.matmul`
# of the gathered A [M, K] with B [K, N] (bf16), timed from a barrier to the
# last rank's end (CUDA events on each rank, the slowest rank counted),
# median of 20 runs after 5 warm-ups. Shapes: the TLX paper's GD1-GD5 and
# the small M = 1024 ones, each at its rank count where the machine has
# that many GPUs. NVLink multicast stays off.
#   python3 scripts/torch_dist_gemm.py
import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SHAPES = [
    ("GD1", 2, (8192, 2048, 16384)),
    ("GD2", 4, (8192, 2048, 16384)),
    ("GD3", 4, (8192, 8192, 16384)),
    ("GD4", 4, (4096, 8192, 16384)),
    ("GD5", 4, (16384, 4096, 8192)),
    ("small-2", 2, (1024, 2048, 16384)),
    ("small-4", 4, (1024, 2048, 16384)),
]


def worker(rank, ranks, port, shapes, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=ranks, device_id=torch.device("cuda", rank))
    for name, (m, n, k) in shapes:
        split = m // ranks
        a = torch.randn(split, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)

        def step():
            dist.all_gather_into_tensor(full, a)
            return torch.matmul(full, b)

        for _ in range(5):
            step()
        times = []
        for _ in range(20):
            dist.barrier()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            ms = torch.tensor([start.elapsed_time(end)], device="cuda")
            dist.all_reduce(ms, op=dist.ReduceOp.MAX)
            times.append(ms.item())
        times.sort()
        if rank == 0:
            ms = times[len(times) // 2]
            results[name] = (ms, 2.0 * m * n * k / (ms * 1e-3) / 1e12)
    dist.destroy_process_group()


def main():
    gpus = torch.cuda.device_count()
    print("torch", torch.__version__, "on", gpus, "x", torch.cuda.get_device_name() if gpus else "no GPU")
    print("| shape | ranks | M x N x K | torch all-gather + matmul ms | TFLOP/s (all ranks) |")
    print("| --- | --- | --- | --- | --- |")
    for ranks in (2, 4):
        shapes = [(name, shape) for name, r, shape in SHAPES if r == ranks]
        if gpus < ranks:
            for name, shape in shapes:
                print("| %s | %d | %s | skipped: %d GPU(s) | |" % (name, ranks, "x".join(map(str, shape)), gpus))
            continue
        results = mp.Manager().dict()
        mp.spawn(worker, args=(ranks, 29500 + ranks, shapes, results), nprocs=ranks, join=True)
        for name, shape in shapes:
            ms, tflops = results[name]
            print("| %s | %d | %s | %.3f | %.0f |" % (name, ranks, "x".join(map(str, shape)), ms, tflops))


if __name__ == "__main__":
    main()
