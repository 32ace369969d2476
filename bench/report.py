"""Tables, plots and headline ratios from bench/run.py's results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TARGETS = {
    "transmission_vs_pushdown": 0.22,
    "transmission_vs_pushpull": 0.29,
    "latency_vs_best_baseline": 1.2,
    "sn_memory_vs_pushdown": 1.04,
}


def headline(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    main = results.get("main")
    if main:
        dfs = main["dfs"]["summary"]
        pd, pp = main["push_down"]["summary"], main["push_pull"]["summary"]
        out["transmission_vs_pushdown"] = dfs["bytes"] / pd["bytes"]
        out["transmission_vs_pushpull"] = dfs["bytes"] / pp["bytes"]
        best = min(pd["latency"], pp["latency"])
        out["latency_vs_best_baseline"] = best / dfs["latency"]
        out["best_baseline"] = "push_down" if pd["latency"] <= pp["latency"] else "push_pull"
        # every codec of the run (the first is the one above): zstd, the product's; none, the
        # paper's uncompressed comparison
        for c in dfs.get("bytes_by_codec", {}):
            d = dfs["bytes_by_codec"][c]
            out[f"transmission_vs_pushdown_{c}"] = d / pd["bytes_by_codec"][c]
            out[f"transmission_vs_pushpull_{c}"] = d / pp["bytes_by_codec"][c]
    memory = results.get("memory")
    if memory:
        out["sn_memory_vs_pushdown"] = (
            memory["dfs"]["peak_bytes"] / memory["push_down"]["peak_bytes"]
        )
    met = {}
    targets = dict(TARGETS)
    for key in [k for k in out if k.startswith("transmission_vs_") and k.count("_") == 3]:
        targets[key] = TARGETS[key.rsplit("_", 1)[0]]
    for key, target in targets.items():
        if key in out:
            met[key] = (
                out[key] >= target if key == "latency_vs_best_baseline" else out[key] <= target
            )
    out["targets_met"] = met
    out["mode"] = results["mode"]
    out["events"] = results["events"]
    return out


def _mb(b: float | None) -> str:
    return "–" if b is None else f"{b / 1e6:,.2f}"


def markdown(results: dict[str, Any], mode: str | None = None, images: str = "results/") -> str:
    """The results as RESULTS.md tables; with the run's ``mode`` (``net-1gbit``...), each table
    is followed by its plot (``<images>fig_<name>-<mode>.png``, written by :func:`plots`)."""
    lines: list[str] = []

    def figure(name: str, title: str) -> None:
        if mode is not None:
            lines.append(f"\n![{title}]({images}fig_{name}-{mode}.png)")

    net = results.get("net")
    link = (
        (
            f"{net['rate']} per node link, {net['qdisc']}"
            + (f", {net['delay']} delay" if net["delay_applied"] else " (no delay: netem missing)")
        )
        if net
        else "loopback"
    )
    lines.append(
        f"{results['events']:,} synthetic events, {results['storage_nodes']} storage nodes, "
        f"{link}; {results['queries']} default queries × {results['repeat']} runs (medians "
        f"per query, means over queries); {results['started']} – {results['finished']}.\n"
    )
    main = results.get("main")
    if main:
        base = main["push_down"]["summary"]["bytes"]
        codecs = list(main["dfs"]["summary"].get("bytes_by_codec", {}))
        if codecs:
            lines.append(f"Pulled events travel {codecs[0]}.\n")
        lines.append(
            "| strategy | MB (both ways) | MB to CN | MB to SN | wire MB | events received "
            "| latency s | bytes vs push-down | round trips |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s, v in main.items():
            m = v["summary"]
            lines.append(
                f"| {s} | {_mb(m['bytes'])} | {_mb(m['bytes_to_cn'])} | {_mb(m['bytes_to_sn'])} | "
                f"{_mb(m['wire_bytes'])} | {m['events']:,.0f} | {m['latency']:.3f} | "
                f"{m['bytes'] / base:.3f} | {m['rounds']:.1f} |"
            )
        if len(codecs) > 1:
            lines.append(
                "\nBytes per codec (MB both ways; the first is the codec of every other figure):\n"
            )
            lines.append(
                "| strategy | "
                + " | ".join(f"MB, {c} | vs push-down, {c}" for c in codecs)
                + " |\n|---|"
                + "---:|---:|" * len(codecs)
            )
            pd_codec = main["push_down"]["summary"]["bytes_by_codec"]
            for s, v in main.items():
                b = v["summary"]["bytes_by_codec"]
                lines.append(
                    f"| {s} | "
                    + " | ".join(f"{_mb(b[c])} | {b[c] / pd_codec[c]:.3f}" for c in codecs)
                    + " |"
                )
        figure("transmission", "bytes per strategy")
        lines.append("\nLatency by phase (seconds, mean per query; paper Table II shape):\n")
        lines.append(
            "| strategy | open (SN scan) | filter round trips | pull | match (CN) | total "
            "| of the rounds: CN before | nodes | wire |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s, v in main.items():
            p = v["summary"]["phases"]
            split = " | ".join(f"{p[k]:.3f}" if k in p else "-" for k in ("cn", "nodes", "wire"))
            lines.append(
                f"| {s} | {p['open']:.3f} | {p['filter']:.3f} | {p['pull']:.3f} | "
                f"{p['match']:.3f} | {v['summary']['latency']:.3f} | {split} |"
            )
        figure("latency", "latency by phase")
    for name, points in results.get("sweeps", {}).items():
        lines.append(f"\nSweep of {name} (MB both ways / latency s per query):\n")
        lines.append(
            f"| {name} | push_down | push_pull | dfs | dfs / push-down | dfs / push-pull |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|")
        for value, point in points.items():
            pd, pp, d = point["push_down"], point["push_pull"], point["dfs"]
            lines.append(
                f"| {value} | {_mb(pd['bytes'])} / {pd['latency']:.2f} | {_mb(pp['bytes'])} / "
                f"{pp['latency']:.2f} | {_mb(d['bytes'])} / {d['latency']:.2f} | "
                f"{d['bytes'] / pd['bytes']:.3f} | {d['bytes'] / pp['bytes']:.3f} |"
            )
    if results.get("sweeps"):
        figure("sweeps", "sweeps of window, selectivity and variables")
    if results.get("nodes"):
        lines.append("\nNumber of storage nodes (MB both ways / latency s per query):\n")
        lines.append("| nodes | push_down | push_pull | dfs | dfs / push-down |")
        lines.append("|---|---:|---:|---:|---:|")
        for n, point in results["nodes"].items():
            pd, pp, d = point["push_down"], point["push_pull"], point["dfs"]
            lines.append(
                f"| {n} | {_mb(pd['bytes'])} / {pd['latency']:.2f} | {_mb(pp['bytes'])} / "
                f"{pp['latency']:.2f} | {_mb(d['bytes'])} / {d['latency']:.2f} | "
                f"{d['bytes'] / pd['bytes']:.3f} |"
            )
        figure("nodes", "storage nodes")
    cm = results.get("costmodel")
    if cm:
        lines.append("\nDFS under each cost model, and with R misestimated (× factor):\n")
        lines.append("| setting | MB both ways | latency s | round trips |")
        lines.append("|---|---:|---:|---:|")
        for m, v in cm["models"].items():
            lines.append(
                f"| model {m} | {_mb(v['bytes'])} | {v['latency']:.3f} | {v['rounds']:.1f} |"
            )
        for k, v in cm["rate_scale"].items():
            lines.append(
                f"| adaptive, R × {k} | {_mb(v['bytes'])} | {v['latency']:.3f} | "
                f"{v['rounds']:.1f} |"
            )
        figure("costmodel", "cost models")
    memory = results.get("memory")
    if memory:
        lines.append(
            "\nStorage nodes' peak resident memory (sum over nodes, after the workload):\n"
        )
        lines.append("| strategy | peak MB | peak MB at start | vs push-down |")
        lines.append("|---|---:|---:|---:|")
        for s, v in memory.items():
            lines.append(
                f"| {s} | {_mb(v['peak_bytes'])} | {_mb(v['idle_peak_bytes'])} | "
                f"{v['peak_bytes'] / memory['push_down']['peak_bytes']:.3f} |"
            )
        figure("memory", "storage node memory")
    h = results.get("headline", {})
    if h:
        lines.append("\nHeadline (targets in parentheses):\n")
        for key, target in TARGETS.items():
            if key in h:
                sign = ">=" if key == "latency_vs_best_baseline" else "<="
                lines.append(
                    f"- {key}: {h[key]:.3f} ({sign} {target}) — "
                    f"{'met' if h['targets_met'][key] else 'missed'}"
                )
    return "\n".join(lines) + "\n"


#: the strategies drawn as lines in the sweep and node plots, with their colours
SERIES = (("push_down", "#c44e52"), ("push_pull", "#dd8452"), ("dfs", "#4c72b0"))


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plots(results: dict[str, Any], out: Path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = results.get("main")
    if main:
        names = list(main)
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        axes[0].bar(names, [main[s]["summary"]["bytes"] / 1e6 for s in names], color="#4c72b0")
        axes[0].set_ylabel("MB per query (both ways)")
        axes[0].set_yscale("log")
        axes[0].set_title("transmission cost (Fig. 11)")
        axes[1].bar(names, [main[s]["summary"]["events"] for s in names], color="#55a868")
        axes[1].set_ylabel("events received per query")
        axes[1].set_yscale("log")
        axes[1].set_title("events received (Fig. 12)")
        for ax in axes:
            ax.tick_params(axis="x", rotation=30)
        _save(fig, out / f"fig_transmission-{mode}.png")
        fig, ax = plt.subplots(figsize=(7, 3.8))
        bottom = [0.0] * len(names)
        for phase, color in (
            ("open", "#8172b2"),
            ("filter", "#dd8452"),
            ("pull", "#4c72b0"),
            ("match", "#55a868"),
        ):
            vals = [main[s]["summary"]["phases"][phase] for s in names]
            ax.bar(names, vals, bottom=bottom, label=phase, color=color)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_ylabel("seconds per query")
        ax.set_title(f"latency by phase ({mode})")
        ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.tick_params(axis="x", rotation=30)
        _save(fig, out / f"fig_latency-{mode}.png")
    sweeps = results.get("sweeps")
    if sweeps:
        fig, axes = plt.subplots(1, len(sweeps), figsize=(4 * len(sweeps), 3.5), squeeze=False)
        for ax, (name, points) in zip(axes[0], sweeps.items(), strict=True):
            xs = list(points)
            for s, color in SERIES:
                ax.plot(
                    xs, [points[x][s]["bytes"] / 1e6 for x in xs], marker="o", label=s, color=color
                )
            ax.set_yscale("log")
            ax.set_xlabel(name)
            ax.set_ylabel("MB per query")
        axes[0][0].legend(frameon=False)
        fig.suptitle("sweeps (Fig. 18-20)")
        _save(fig, out / f"fig_sweeps-{mode}.png")
    nodes = results.get("nodes")
    if nodes:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        xs = [int(n) for n in nodes]
        for s, color in SERIES:
            axes[0].plot(
                xs, [nodes[str(n)][s]["bytes"] / 1e6 for n in xs], marker="o", label=s, color=color
            )
            axes[1].plot(
                xs, [nodes[str(n)][s]["latency"] for n in xs], marker="o", label=s, color=color
            )
        axes[0].set_ylabel("MB per query")
        axes[1].set_ylabel("seconds per query")
        for ax in axes:
            ax.set_xlabel("storage nodes")
        axes[0].legend(frameon=False)
        fig.suptitle("number of storage nodes (Fig. 23)")
        _save(fig, out / f"fig_nodes-{mode}.png")
    cm = results.get("costmodel")
    if cm:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        ms = list(cm["models"])
        axes[0].bar(ms, [cm["models"][m]["latency"] for m in ms], color="#4c72b0")
        axes[0].set_ylabel("DFS seconds per query")
        axes[0].set_title("cost models (Fig. 26)")
        ks = list(cm["rate_scale"])
        axes[1].plot(
            [float(k) for k in ks], [cm["rate_scale"][k]["latency"] for k in ks], marker="o"
        )
        axes[1].set_xscale("log")
        axes[1].set_xlabel("R estimate / measured R")
        axes[1].set_ylabel("DFS seconds per query")
        axes[1].set_title("misestimated R (Fig. 27)")
        _save(fig, out / f"fig_costmodel-{mode}.png")
    memory = results.get("memory")
    if memory:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ss = list(memory)
        ax.bar(ss, [memory[s]["peak_bytes"] / 1e6 for s in ss], color="#8172b2")
        ax.set_ylabel("storage nodes' peak MB (sum)")
        ax.set_title("storage node memory (Fig. 13)")
        _save(fig, out / f"fig_memory-{mode}.png")


if __name__ == "__main__":  # re-render: python bench/report.py bench/results/run-net-1gbit.json
    import json
    import sys

    path = Path(sys.argv[1])
    doc = json.loads(path.read_text())
    plots(doc, path.parent, doc["mode"])
    path.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
