"""A fleet of storage nodes on one machine: start-up time and memory at rest per node.

Command:  .venv/bin/python bench/fleet.py [--nodes 3,12,48] [--events-per-node 2000] [--json]
          [--env KEY=VALUE ...]
          .venv/bin/python bench/fleet.py --nodes 1 --events-per-node 2000000  (bytes per event)
Hardware: every node on this machine (LocalCluster on loopback, started in parallel).
Runtime:  seconds per fleet size (about 0.3 s of CPU per node on this 2-core VM).
Output:   per fleet size: seconds until every node is ready, and per node (from /proc) the
          resident memory (RSS), its anonymous part, and the proportional share (PSS: shared
          library pages divided among the processes mapping them, which is what N nodes add up
          to); totals over the fleet. Nodes hold a small shard each, so this is their fixed cost.
          From 100,000 events per node on: the bytes per event a node holds beyond a bare node
          (one with 1,000 events, measured first), at its peak (VmHWM: loading and indexing its
          rows) and at rest.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from dfs_cer.datasets import synthetic_events
from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster

MB = 1024**2


def memory(pid: int) -> dict[str, int]:
    """RSS, PSS and anonymous bytes of process ``pid`` (``/proc/PID/smaps_rollup``)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss", "Anonymous"):
            out[key.lower()] = int(rest.split()[0]) * 1024
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            out["peak"] = int(line.split()[1]) * 1024
    return out


def fleet(n: int, events_per_node: int, env: dict[str, str], settle: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dfs-cer-fleet-") as tmp:
        source = Path(tmp) / "events.parquet"
        pq.write_table(synthetic_events(n * events_per_node, seed=n), source)
        shard(str(source), n, str(Path(tmp) / "nodes"))
        dirs = [str(Path(tmp) / "nodes" / f"node-{i:02d}") for i in range(n)]
        started = time.perf_counter()
        with LocalCluster(dirs, env=env) as cluster:
            seconds = time.perf_counter() - started
            time.sleep(settle)
            nodes = [memory(p.pid) for p in cluster.procs]
    rss = [m["rss"] for m in nodes]
    return {
        "nodes": n,
        "start_s": round(seconds, 2),
        "rss_mb_mean": round(sum(rss) / n / MB, 1),
        "rss_mb_max": round(max(rss) / MB, 1),
        "peak_mb_mean": round(sum(m["peak"] for m in nodes) / n / MB, 1),
        "anon_mb_mean": round(sum(m["anonymous"] for m in nodes) / n / MB, 1),
        "pss_mb_mean": round(sum(m["pss"] for m in nodes) / n / MB, 1),
        "rss_gb_total": round(sum(rss) / 1024**3, 2),
        "pss_gb_total": round(sum(m["pss"] for m in nodes) / 1024**3, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="3,12,48", help="fleet sizes, comma-separated")
    parser.add_argument("--events-per-node", type=int, default=2000)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds at rest before reading")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for every node")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    rows = [
        fleet(int(n), args.events_per_node, env, args.settle) for n in args.nodes.split(",") if n
    ]
    per_event: dict[str, float] = {}
    if args.events_per_node >= 100_000:
        bare = fleet(1, 1000, env, args.settle)
        for what, key in (("peak", "peak_mb_mean"), ("rest", "rss_mb_mean")):
            extra = sum(r[key] for r in rows) / len(rows) - bare["rss_mb_mean"]
            per_event[f"{what}_bytes_per_event"] = round(extra * MB / args.events_per_node, 1)
        per_event["bare_rss_mb"] = bare["rss_mb_mean"]
    if args.json:
        out = {"events_per_node": args.events_per_node, "env": env, "fleets": rows, **per_event}
        print(json.dumps(out))
        return
    print(f"storage nodes at rest ({args.events_per_node:,} events each; env {env or 'none'})")
    print(
        "| nodes | start s | RSS MB/node (max) | peak MB/node | anon MB/node | PSS MB/node "
        "| RSS GB | PSS GB |\n|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for r in rows:
        print(
            f"| {r['nodes']} | {r['start_s']:.1f} | {r['rss_mb_mean']:.0f} ({r['rss_mb_max']:.0f}) "
            f"| {r['peak_mb_mean']:.0f} | {r['anon_mb_mean']:.0f} | {r['pss_mb_mean']:.0f} "
            f"| {r['rss_gb_total']:.2f} | {r['pss_gb_total']:.2f} |"
        )
    if per_event:
        print(
            f"beyond a bare node ({per_event['bare_rss_mb']:.0f} MB): "
            f"{per_event['peak_bytes_per_event']:.0f} B/event at the peak, "
            f"{per_event['rest_bytes_per_event']:.0f} B/event at rest"
        )


if __name__ == "__main__":
    main()
