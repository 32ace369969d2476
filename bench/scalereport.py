"""bench/scale.py's figures as markdown tables."""

from __future__ import annotations

from typing import Any


def markdown(f: dict[str, Any]) -> str:
    lines = [
        f"{f['events']:,} synthetic events, {f['queries']} queries per workload, storage nodes "
        f"{', '.join(map(str, f['nodes']))}, loopback ({f['machine']}, {f['date']}); every "
        f"strategy exact: {'yes' if f['exact'] else 'NO'}",
        "",
        "| workload | layout | nodes | codec | strategy | bytes / query | bytes / node, mean | "
        "max | round trips | events received | latency s | exact |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in f["points"]:
        lines.append(
            f"| {p['workload']} | {p['layout']} | {p['nodes']} | {p['compression']} | "
            f"{p['strategy']} | {p['bytes']:,.0f} | {p['node_bytes_mean']:,.0f} | "
            f"{p['node_bytes_max']:,.0f} | {p['rounds']:.1f} | {p['events']:,.0f} | "
            f"{p['latency_s']:.3f} | {'yes' if p['exact'] else 'NO'} |"
        )
    lines += [
        "",
        "| workload | layout | nodes | codec | DFS / push-down | DFS / push-pull | "
        "DFS / lower bound |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for r in f["ratios"]:
        cells = [r.get(k) for k in ("dfs_over_push_down", "dfs_over_push_pull")]
        text = " | ".join("-" if v is None else f"{v:.3f}" for v in cells)
        lb = r["dfs_over_lower_bound"]
        lines.append(
            f"| {r['workload']} | {r['layout']} | {r['nodes']} | {r['compression']} | {text} | "
            + ("-" if lb is None else f"{lb:.2f}")
            + " |"
        )
    if f["growth"]:
        g0 = f["growth"][0]
        lines += [
            "",
            f"| workload | layout | codec | strategy | bytes growth, {g0['from_nodes']} -> "
            f"{g0['to_nodes']} nodes |",
            "|---|---|---|---|---:|",
        ]
        lines += [
            f"| {g['workload']} | {g['layout']} | {g['compression']} | {g['strategy']} | "
            f"{g['growth']:.2f}x |"
            for g in f["growth"]
        ]
    lines += [
        "",
        "| workload | DFS action | codec | nodes | mean bytes / query |",
        "|---|---|---|---:|---:|",
    ]
    for p in f["points"]:
        if p["strategy"] == "dfs" and p["layout"] == f["layouts"][0]:
            for a, b in sorted(p["bytes_by_action"].items(), key=lambda x: -x[1]):
                if b:
                    lines.append(
                        f"| {p['workload']} | {a} | {p['compression']} | {p['nodes']} | {b:,.0f} |"
                    )
    return "\n".join(lines) + "\n"
