#!/usr/bin/env python3
"""Draws a TLX_TRACE file (Chrome trace JSON) as an SVG timeline, with no
dependencies: one row per track (program and task), tasks as light bars,
waits as dark bars over them, one panel per launch.

    TLX_INTERPRET=1 TLX_TRACE=/tmp/ws.json cargo run --release --example hopper_gemm_ws
    python3 scripts/trace_plot.py /tmp/ws.json /tmp/ws.svg --tracks 12

--tracks keeps the first N tracks of each launch (a few programs' tasks);
--launch keeps one launch (by its number in the file).
"""

import argparse
import html
import json
import sys

ROW, GAP, LEFT, WIDTH, TOP = 16, 4, 260, 900, 30


def panels(events, launch, tracks):
    names = {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e["name"] == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
        elif e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    pids = sorted({e["pid"] for e in events if e.get("ph") == "X"})
    if launch is not None:
        pids = [p for p in pids if p == launch]
    for pid in pids:
        slices = [e for e in events if e.get("ph") == "X" and e["pid"] == pid]
        tids = sorted({e["tid"] for e in slices})[:tracks]
        slices = [e for e in slices if e["tid"] in tids]
        yield names.get((pid, None), f"launch {pid}"), tids, names, pid, slices


def draw(path_in, path_out, launch, tracks):
    with open(path_in) as f:
        events = json.load(f)["traceEvents"]
    parts, y = [], TOP
    for title, tids, names, pid, slices in panels(events, launch, tracks):
        end = max((e["ts"] + e["dur"] for e in slices), default=1) or 1
        scale = WIDTH / end
        parts.append(f'<text x="4" y="{y - 8}" font-weight="bold">{html.escape(title)}</text>')
        for row, tid in enumerate(tids):
            top = y + row * (ROW + GAP)
            label = names.get((pid, tid), f"track {tid}")
            parts.append(f'<text x="4" y="{top + ROW - 4}">{html.escape(label)}</text>')
            for e in (e for e in slices if e["tid"] == tid):
                wait = e.get("cat") == "wait"
                color = "#c0392b" if wait else "#aed6f1"
                x, w = LEFT + e["ts"] * scale, max(e["dur"] * scale, 0.5)
                inset = 3 if wait else 0
                parts.append(
                    f'<rect x="{x:.1f}" y="{top + inset}" width="{w:.1f}" height="{ROW - 2 * inset}" '
                    f'fill="{color}"><title>{html.escape(e["name"])}: {e["ts"]} + {e["dur"]}</title></rect>'
                )
        y += len(tids) * (ROW + GAP) + 2 * TOP
    height = y
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
        f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>'
        + "".join(parts)
        + f'<text x="{LEFT}" y="{height - 8}">task steps (light: running, red: waiting)</text></svg>\n'
    )
    with open(path_out, "w") as f:
        f.write(svg)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("svg")
    parser.add_argument("--tracks", type=int, default=12)
    parser.add_argument("--launch", type=int, default=None)
    args = parser.parse_args()
    try:
        draw(args.trace, args.svg, args.launch, args.tracks)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_plot: {args.trace}: {e}")


if __name__ == "__main__":
    main()
