#!/usr/bin/env python3
"""Combines `benches/attention.rs` output with `scripts/attention_anchors.py`
output from the same sitting into the BENCHMARKS.md table (TFLOP/s and
ratios against cuDNN and torch's flash attention) and a plot of TFLOP/s
against sequence length (PNG with matplotlib, else SVG).

    python3 scripts/attention_table.py bench.log anchors.log [plot-stem]
"""
import re
import sys
from collections import defaultdict

OURS = re.compile(
    r"attn d(\d+) causal (true|false) S (\d+): fwd ([\d.]+) bwd ([\d.]+|-) TFLOP/s"
)
ANCHOR = re.compile(r"anchor (\w+) (fwd|bwd) d(\d+) causal=([01]) S=(\d+) ([\d.]+)")


def read(bench_path, anchors_path):
    """{(pass, d, causal, seq): {source: TFLOP/s}}"""
    rows = defaultdict(dict)
    with open(bench_path) as f:
        for line in f:
            m = OURS.search(line)
            if m:
                d, causal, seq = int(m[1]), m[2] == "true", int(m[3])
                rows[("fwd", d, causal, seq)]["tlx"] = float(m[4])
                if m[5] != "-":  # head dim 256 has no backward
                    rows[("bwd", d, causal, seq)]["tlx"] = float(m[5])
    with open(anchors_path) as f:
        for line in f:
            m = ANCHOR.search(line)
            if m:
                key = (m[2], int(m[3]), m[4] == "1", int(m[5]))
                rows[key][m[1]] = float(m[6])
    return rows


def table(rows):
    # FlashAttention-3 (scripts/fa3) gets its columns when the anchors hold it.
    fa3 = any("fa3" in r for r in rows.values())
    extra = " FA3 | tlx / FA3 |" if fa3 else ""
    out = [
        "| pass | head dim | causal | seq | tlx | cuDNN | flash | tlx / cuDNN | tlx / flash |" + extra,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + " --- | --- |" * fa3,
    ]
    for key in sorted(rows):
        r = rows[key]
        tlx, cudnn, flash = r.get("tlx"), r.get("cudnn"), r.get("flash")
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
        num = lambda x: f"{x:.0f}" if x else "-"
        p, d, causal, seq = key
        line = (
            f"| {p} | {d} | {causal} | {seq} | {num(tlx)} | {num(cudnn)} | {num(flash)} "
            f"| {ratio(tlx, cudnn)} | {ratio(tlx, flash)} |"
        )
        if fa3:
            line += f" {num(r.get('fa3'))} | {ratio(tlx, r.get('fa3'))} |"
        out.append(line)
    return "\n".join(out)


def plot(rows, stem):
    panels = [(p, c) for p in ("fwd", "bwd") for c in (False, True)]
    series = ("tlx", "cudnn", "flash", "fa3")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return plot_svg(rows, stem, panels, series)
    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    for ax, (p, causal) in zip(axes, panels):
        for s in series:
            pts = sorted(
                (seq, r[s])
                for (pp, d, c, seq), r in rows.items()
                if pp == p and d == 128 and c == causal and s in r
            )
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{p}, {'causal' if causal else 'non-causal'}, d128")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.legend()
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=100)
    return stem + ".png"


def plot_svg(rows, stem, panels, series):
    colors = {"tlx": "#d62728", "cudnn": "#1f77b4", "flash": "#2ca02c", "fa3": "#9467bd"}
    series = [s for s in series if any(s in r for r in rows.values())]
    w, h, pad = 300, 220, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{4 * w}" height="{h + 30}">']
    top = max([v for r in rows.values() for v in r.values()] + [1])
    for i, (p, causal) in enumerate(panels):
        x0 = i * w
        parts.append(
            f'<text x="{x0 + pad}" y="15" font-size="12">{p}, '
            f'{"causal" if causal else "non-causal"}, d128 (TFLOP/s, max {top:.0f})</text>'
        )
        for s in series:
            pts = sorted(
                (seq, r[s])
                for (pp, d, c, seq), r in rows.items()
                if pp == p and d == 128 and c == causal and s in r
            )
            if not pts:
                continue
            coords = []
            for seq, y in pts:
                xs = x0 + pad + (seq.bit_length() - 10) * (w - 2 * pad) / 5
                ys = h - (y / top) * (h - pad)
                coords.append(f"{xs:.1f},{ys:.1f}")
            parts.append(
                f'<polyline fill="none" stroke="{colors[s]}" stroke-width="2" '
                f'points="{" ".join(coords)}"/>'
            )
        for j, s in enumerate(series):
            parts.append(
                f'<text x="{x0 + pad + 60 * j}" y="{h + 20}" font-size="11" '
                f'fill="{colors[s]}">{s}</text>'
            )
    parts.append("</svg>")
    with open(stem + ".svg", "w") as f:
        f.write("\n".join(parts))
    return stem + ".svg"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = read(sys.argv[1], sys.argv[2])
    print(table(rows))
    stem = sys.argv[3] if len(sys.argv) > 3 else "attention"
    print(f"plot: {plot(rows, stem)}")


if __name__ == "__main__":
    main()
