"""Plot bench/scale.py runs: mean bytes per query against the number of storage nodes, per
strategy, layout and event count (log-log), and DFS / push-down beside it.

Command:  .venv/bin/python bench/scaleplot.py run-1m.json[,run-10m.json,...]
              [--compression zstd] [--out bench/results/fig_scale.png]
Hardware: none (reads the JSON scale.py wrote); about a second.
Output:   the PNG (two panels) and its path on stdout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def series(runs: list[dict[str, Any]], compression: str) -> dict[tuple[str, ...], list[Any]]:
    """(strategy, layout, events) -> sorted [(nodes, bytes)] of the default workload."""
    out: dict[tuple[str, ...], list[Any]] = {}
    for run in runs:
        label = f"{run['events'] / 1e6:g}M"
        for p in run["points"]:
            if p["compression"] != compression or p["workload"] != "default":
                continue
            key = (p["strategy"], p["layout"], label)
            out.setdefault(key, []).append((p["nodes"], p["bytes"]))
    return {k: sorted(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", help="comma-separated scale.py --json outputs")
    parser.add_argument("--compression", default="zstd")
    parser.add_argument("--out", default="bench/results/fig_scale.png")
    args = parser.parse_args()
    runs = [json.loads(Path(p).read_text()) for p in args.runs.split(",") if p]
    lines = series(runs, args.compression)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (strategy, layout, label), points in sorted(lines.items()):
        nodes, size = zip(*points, strict=True)
        style = "-" if strategy == "dfs" else "--"
        left.plot(nodes, size, style, marker="o", label=f"{strategy}, {layout}, {label}")
    for (strategy, layout, label), points in sorted(lines.items()):
        base = dict(lines.get(("push_down", layout, label), []))
        if strategy != "dfs" or not base:
            continue
        ratio = [(n, b / base[n]) for n, b in points if n in base]
        left_n, r = zip(*ratio, strict=True)
        right.plot(left_n, r, marker="o", label=f"{layout}, {label}")
    left.set(xscale="log", yscale="log", xlabel="storage nodes", ylabel="bytes per query")
    left.set_title(f"wire bytes per query ({args.compression})")
    right.set(xscale="log", xlabel="storage nodes", ylabel="DFS / push-down bytes")
    right.axhline(0.25, color="grey", lw=0.8, ls=":")
    right.axhline(0.2, color="grey", lw=0.8, ls=":")
    right.set_title("DFS / push-down")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
