"""PyTorch's softmax, rms_norm and layer_norm on the shapes of the bandwidth
bench's `tlx::ops` rows, timed as that bench times ours: before each timed
run the GPU reads a 256 MiB buffer (L2 cold but clean), then one launch
between two events; the median of 20 runs after 3 warm-ups. Bytes counted:
x read once, y written once.

python3 scripts/torch_rows.py   (on the GPU machine; prints a table)
"""

import torch
import torch.nn.functional as F

SHAPES = {
    torch.bfloat16: [
        (65536, 4096),
        (4096, 65536),
        (1152, 16384),
        (1152, 65536),
        (4, 16384),
        (4, 32768),
        (4, 65536),
    ],
    torch.float32: [(65536, 4096), (4096, 65536), (4, 65536)],
}


def median_ms(fn, flush):
    for _ in range(3):
        fn()
    times = []
    for _ in range(20):
        flush.sum()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    dev = torch.device("cuda")
    flush = torch.zeros(64 << 20, dtype=torch.float32, device=dev)
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    rows = []
    for dtype, shapes in SHAPES.items():
        for rows_n, cols in shapes:
            x = torch.rand(rows_n, cols, device=dev, dtype=dtype) * 2 - 1
            w = torch.ones(cols, device=dev, dtype=dtype)
            b = torch.zeros(cols, device=dev, dtype=dtype)
            ops = {
                "softmax": lambda: torch.softmax(x, dim=-1),
                "rms_norm": lambda: F.rms_norm(x, (cols,), w, 1e-6),
                "layer_norm": lambda: F.layer_norm(x, (cols,), w, b, 1e-5),
            }
            nbytes = 2 * x.numel() * x.element_size()
            for name, fn in ops.items():
                ms = median_ms(fn, flush)
                tb = nbytes / (ms * 1e-3) / 1e12
                name_dtype = str(dtype).replace("torch.", "")
                rows.append(f"| torch {name_dtype} {rows_n}x{cols} {name} | {ms:.4f} | {tb:.3f} |")
    print("\n| kernel | ms | TB/s |\n| --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
