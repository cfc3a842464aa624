#!/usr/bin/env python3
"""Draws a TLX_TRACE file (Chrome trace JSON, optionally gzipped) as a
timeline: one row per track (interpreter: program and task; GPU: SM and
warp), the program as a grey bar, tasks as light bars over it, barrier
waits as red bars over those, one panel per launch. Writes SVG with no
dependencies, or PNG with matplotlib (pip install matplotlib).

    TLX_TRACE=/tmp/ws.json cargo run --release --example hopper_gemm_ws
    python3 scripts/trace_plot.py /tmp/ws.json /tmp/ws.png --tracks 12

--tracks keeps the first N tracks of each launch (in track order: a few
SMs' warps, or a few programs' tasks); --sms keeps those SMs' tracks
(GPU); --launch keeps one launch (by its number in the file); --window
START:END keeps that stretch, in the trace's microseconds (GPU) or task
steps (interpreter). --stats prints, per track kind, the share of task time
spent waiting.
"""

import argparse
import gzip
import html
import json
import re
import sys
from collections import defaultdict

ROW, GAP, LEFT, WIDTH, TOP = 16, 4, 230, 900, 30
COLORS = {"program": "#d5d8dc", "task": "#aed6f1", "wait": "#c0392b"}
INSET = {"program": 0, "task": 2, "wait": 5}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def panels(events, args):
    names = {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e["name"] == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
        elif e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    by_pid = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            by_pid[e["pid"]].append(e)
    for pid in sorted(by_pid):
        if args.launch is not None and pid != args.launch:
            continue
        slices = by_pid[pid]
        if args.window:
            lo, hi = args.window
            slices = [e for e in slices if e["ts"] < hi and e["ts"] + e["dur"] > lo]
        tids = sorted({e["tid"] for e in slices})
        if args.sms is not None:
            keep = set(args.sms)
            tids = [t for t in tids if sm_of(names.get((pid, t), "")) in keep]
        tids = tids[: args.tracks]
        chosen = set(tids)
        slices = [e for e in slices if e["tid"] in chosen]
        yield names.get((pid, None), f"launch {pid}"), tids, names, pid, slices


def sm_of(track):
    parts = track.split()
    if len(parts) >= 2 and parts[0] == "SM" and parts[1].isdigit():
        return int(parts[1])
    return None


def extent(slices, args):
    if args.window:
        return args.window
    start = min((e["ts"] for e in slices), default=0)
    end = max((e["ts"] + e["dur"] for e in slices), default=1)
    return start, max(end, start + 1e-9)


def layered(slices):
    """Programs first, then tasks, then waits, so that each draws over the last."""
    order = {"program": 0, "task": 1, "wait": 2}
    return sorted(slices, key=lambda e: order.get(e.get("cat"), 1))


def unit(title):
    return "task steps" if "task steps" in title else "µs"


def draw_svg(path_out, parts_in):
    parts, y = [], TOP
    for title, tids, names, pid, slices, (lo, hi) in parts_in:
        scale = WIDTH / (hi - lo)
        parts.append(f'<text x="4" y="{y - 8}" font-weight="bold">{html.escape(title)}</text>')
        rows = {tid: row for row, tid in enumerate(tids)}
        for tid in tids:
            top = y + rows[tid] * (ROW + GAP)
            label = names.get((pid, tid), f"track {tid}")
            parts.append(f'<text x="4" y="{top + ROW - 4}">{html.escape(label)}</text>')
        for e in layered(slices):
            top = y + rows[e["tid"]] * (ROW + GAP)
            cat = e.get("cat", "task")
            inset = INSET.get(cat, 0)
            x0 = max(e["ts"], lo)
            x1 = min(e["ts"] + e["dur"], hi)
            x, w = LEFT + (x0 - lo) * scale, max((x1 - x0) * scale, 0.5)
            parts.append(
                f'<rect x="{x:.1f}" y="{top + inset}" width="{w:.1f}" height="{ROW - 2 * inset}" '
                f'fill="{COLORS.get(cat, "#aed6f1")}"><title>{html.escape(e["name"])}: '
                f'{e["ts"]} + {e["dur"]}</title></rect>'
            )
        parts.append(
            f'<text x="{LEFT}" y="{y + len(tids) * (ROW + GAP) + 12}">{lo:g} to {hi:g} {unit(title)} '
            f"(grey: program, light: task, red: waiting)</text>"
        )
        y += len(tids) * (ROW + GAP) + 2 * TOP
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{y}" '
        f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>'
        + "".join(parts)
        + "</svg>\n"
    )
    with open(path_out, "w") as f:
        f.write(svg)


def draw_png(path_out, parts_in):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("trace_plot: PNG output needs matplotlib (pip install matplotlib); SVG does not")
    heights = [max(len(p[1]), 1) * 0.22 + 0.8 for p in parts_in]
    fig, axes = plt.subplots(len(parts_in), 1, figsize=(13, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, tids, names, pid, slices, (lo, hi)) in zip(axes[:, 0], parts_in):
        rows = {tid: row for row, tid in enumerate(tids)}
        for cat in ("program", "task", "wait"):
            bars = defaultdict(list)
            for e in slices:
                if e.get("cat", "task") == cat:
                    bars[rows[e["tid"]]].append((e["ts"], e["dur"]))
            inset = INSET[cat] / ROW
            for row, spans in bars.items():
                ax.broken_barh(spans, (row + inset - 0.5, 1 - 2 * inset - 0.1), facecolors=COLORS[cat],
                               linewidth=0)
        ax.set_yticks(range(len(tids)))
        ax.set_yticklabels([names.get((pid, t), f"track {t}") for t in tids], fontsize=7)
        ax.set_ylim(len(tids) - 0.5, -0.5)
        ax.set_xlim(lo, hi)
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xlabel(f"{unit(title)}  (grey: program, blue: task, red: waiting on a barrier)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path_out, dpi=110)


def stats(parts_in):
    """Per task label: task time, and the share of it spent in waits."""
    for title, tids, names, pid, slices, _ in parts_in:
        print(title)
        busy, waiting, count = defaultdict(float), defaultdict(float), defaultdict(int)
        tasks = defaultdict(list)
        for e in slices:
            if e.get("cat") == "task":
                tasks[(e["tid"], e["args"].get("program") if "args" in e else None)].append(e)
                busy[e["name"]] += e["dur"]
                count[e["name"]] += 1
        for e in slices:
            if e.get("cat") != "wait":
                continue
            key = (e["tid"], e["args"].get("program") if "args" in e else None)
            owner = next((t for t in tasks.get(key, []) if t["ts"] <= e["ts"] <= t["ts"] + t["dur"]), None)
            if owner is not None:
                # The interpreter names the phase: one line per barrier.
                what = re.sub(r", phase \d+", "", e["name"])
                waiting[(owner["name"], what)] += e["dur"]
        for name in sorted(busy):
            print(f"  {name}: {count[name]} slices, {busy[name]:.1f} {unit(title)} in all")
            for (task, wait), t in sorted(waiting.items(), key=lambda kv: -kv[1]):
                if task == name and busy[name] > 0:
                    print(f"    {wait}: {100 * t / busy[name]:.1f}% of the task's time")


def window(text):
    lo, _, hi = text.partition(":")
    return float(lo), float(hi)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("out", help="the picture: .svg, or .png (needs matplotlib)")
    parser.add_argument("--tracks", type=int, default=12)
    parser.add_argument("--sms", type=lambda s: [int(x) for x in s.split(",")], default=None)
    parser.add_argument("--launch", type=int, default=None)
    parser.add_argument("--window", type=window, default=None)
    parser.add_argument("--stats", action="store_true")
    args = parser.parse_args()
    try:
        events = load(args.trace)
        parts = [(*p, extent(p[4], args)) for p in panels(events, args)]
        if not parts:
            sys.exit(f"trace_plot: {args.trace}: no slices to draw")
        if args.stats:
            stats(parts)
        if args.out.endswith(".png"):
            draw_png(args.out, parts)
        else:
            draw_svg(args.out, parts)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_plot: {args.trace}: {e}")


if __name__ == "__main__":
    main()
