"""Bytes at cloud scale: push-down, push-pull and DFS as the number of storage nodes grows, per
data layout, workload and transfer compression.

Command:  .venv/bin/python bench/scale.py [--events 1000000] [--queries 8] [--nodes 3,12,48,96]
              [--compression zstd,none] [--strategies push_down,push_pull,dfs]
              [--layouts random,time,iceberg] [--workloads default,navigation] [--json]
          (default: the paper's synthetic workload, 4-variable queries; navigation: the skip
          patterns with PREV/NEXT of bench/navigation.py; layouts: `dfs-cer shard` at random and
          by time, and an Iceberg table served in place with files assigned to nodes by time)
Hardware: every storage node process and the compute node on one machine, over loopback; one
          generated log for the whole run.
Runtime:  on 2 cores, 4.5 minutes at --events 200000 --nodes 3,6 --queries 3 (every layout and
          workload), 2.5 minutes at --events 600000 --nodes 3,6,9,12 --queries 3 --layouts random
          --workloads default; the defaults start up to 96 node processes at once (memory: 96 x a
          node's idle size).
Output:   per workload, layout, node count, codec and strategy: mean bytes per query (both
          directions; zstd is what users pay for, none the paper's comparison), bytes per action,
          bytes per storage node (mean and max over nodes), round trips, events received, the
          loopback latency (pull and match), and whether every strategy returned exactly the
          local engine's matches; the lower bound (candidate events inside the exact match
          intervals, bytes as each codec's stream); ratios DFS / push-down, DFS / push-pull,
          DFS / lower bound; growth of each strategy's bytes from the fewest to the most nodes.
          --json prints everything (bench/costsim.py --calibrate reads it); else markdown.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import Exact, exact, node_bytes, recording_clients
from bench.navigation import skip_queries
from bench.scalereport import markdown
from dfs_cer.config import StrategyConfig, TablesConfig
from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

STRATEGIES = ("push_down", "push_pull", "dfs")
LAYOUTS = ("random", "time", "iceberg")
WORKLOADS = ("default", "navigation")
CODECS = ("zstd", "none", "lz4")
__all__ = ["main", "markdown", "run"]


#: nodes load their query handlers at start, as a long-running service has (not on the first
#: query, where a fleet of processes on few cores would spend the call's deadline on it)
WARM = {"DFS_CER__STORAGE__WARM_UP": "true"}
#: seconds per call: 96 node processes share this machine's 2 cores
CALL_TIMEOUT = 120.0


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def workload(name: str, queries: int) -> list[str]:
    return synthetic_queries(queries) if name == "default" else skip_queries(queries)


def digest(table: pa.Table) -> str:
    """The result's rows, order-free."""
    rows = sorted(repr(tuple(r.values())) for r in table.to_pylist())
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


class Layouts:
    """The log as each layout serves it, per node count: shard sets written once (random, time)
    or an Iceberg table written once and assigned to the nodes by time."""

    def __init__(self, root: Path, events: pa.Table, files: int, start_timeout: float) -> None:
        self.root, self.files, self.start_timeout = root, files, start_timeout
        self.log = root / "events.parquet"
        pq.write_table(events, self.log)
        self.tables: TablesConfig | None = None
        self.events = events

    def iceberg_env(self) -> dict[str, str]:
        if self.tables is None:
            from bench.tables import build_table

            self.tables = TablesConfig(
                catalog_uri=f"sqlite:///{self.root}/catalog.db",
                warehouse=str(self.root / "wh"),
                assignments_dir=str(self.root / "assign"),
            )
            say(f"writing an Iceberg table of {self.files} files ...")
            build_table(self.events, self.files, self.tables)
        return {
            "DFS_CER__TABLES__CATALOG_URI": self.tables.catalog_uri,
            "DFS_CER__TABLES__WAREHOUSE": self.tables.warehouse,
            "DFS_CER__TABLES__ASSIGNMENTS_DIR": self.tables.assignments_dir,
        }

    @contextmanager
    def cluster(self, layout: str, nodes: int) -> Iterator[LocalCluster]:
        if layout == "iceberg":
            env = self.iceberg_env()
            refs = [f"iceberg://local/bench.events?node={i}/{nodes}" for i in range(nodes)]
            c = LocalCluster(refs, env={**env, **WARM})
        else:
            out = self.root / f"{layout}-{nodes}"
            if not out.exists():
                shard(str(self.log), nodes, str(out), partitioning=layout, name="synthetic")
            c = LocalCluster([str(out / f"node-{i:02d}") for i in range(nodes)], env=WARM)
        began = time.perf_counter()
        try:  # many node processes sharing few cores start slowly: a longer start-up limit
            c.start(timeout=self.start_timeout)
            say(f"  {nodes} storage nodes ready in {time.perf_counter() - began:.0f} s")
            yield c
        finally:
            c.stop()
            c.tmp.cleanup()


def measure(cluster: LocalCluster, strategy: str, sql: str, codec: str) -> dict[str, Any]:
    """One query under one strategy: the trace's figures, bytes per node and the result."""
    started = time.perf_counter()
    with warnings.catch_warnings(), recording_clients() as clients:
        warnings.simplefilter("ignore")
        result = pull(
            strategy,
            sql,
            cluster.endpoints,
            cluster.token,
            config=StrategyConfig(
                transfer_compression=codec,  # type: ignore[arg-type]
                call_timeout_seconds=CALL_TIMEOUT,
                query_timeout_seconds=10 * CALL_TIMEOUT,
            ),
        )
        pulled = time.perf_counter()
        rows = match_pulled(result)
    done = time.perf_counter()
    t = result.trace
    per_node = node_bytes(clients, list(cluster.endpoints))
    by_action: dict[str, int] = {}
    for r in t.rounds:
        by_action[r.action] = by_action.get(r.action, 0) + r.bytes_to_sn + r.bytes_to_cn
    return {
        "bytes": t.bytes_to_cn + t.bytes_to_sn,
        "bytes_to_sn": t.bytes_to_sn,
        "bytes_to_cn": t.bytes_to_cn,
        "bytes_by_action": by_action,
        "node_bytes_mean": statistics.mean(per_node),
        "node_bytes_max": max(per_node),
        "node_bytes_sum": sum(per_node),
        "rounds": len(t.rounds),
        "events": t.events_received,
        "pull_s": pulled - started,
        "latency_s": done - started,
        "matches": rows.num_rows,
        "digest": digest(rows),
    }


def mean_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        k: statistics.mean(float(r[k]) for r in runs)
        for k in runs[0]
        if isinstance(runs[0][k], int | float)
        and not isinstance(runs[0][k], bool)
        and k not in ("nodes", "query")
    }
    actions = sorted({a for r in runs for a in r["bytes_by_action"]})
    out["bytes_by_action"] = {
        a: statistics.mean(r["bytes_by_action"].get(a, 0) for r in runs) for a in actions
    }
    out["per_query_bytes"] = [r["bytes"] for r in runs]
    return out


def run(args: argparse.Namespace, progress: Callable[[str], None] = say) -> dict[str, Any]:
    nodes = sorted(int(n) for n in args.nodes.split(","))
    codecs = pick(args.compression, CODECS, "--compression")
    strategies = pick(args.strategies, STRATEGIES, "--strategies")
    layouts = pick(args.layouts, LAYOUTS, "--layouts")
    workloads = pick(args.workloads, WORKLOADS, "--workloads")
    if not nodes or nodes[0] < 1:
        raise SystemExit(f"error: --nodes must be positive integers, got {args.nodes!r}")
    figures: dict[str, Any] = {
        "events": args.events,
        "queries": args.queries,
        "nodes": nodes,
        "compression": codecs,
        "strategies": strategies,
        "layouts": layouts,
        "workloads": workloads,
        "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.machine()})",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "lower_bound": {},
        "runs": [],
    }
    progress(f"generating {args.events:,} synthetic events ...")
    events = synthetic_events(args.events)
    sqls = {w: workload(w, args.queries) for w in workloads}
    truth: dict[str, list[Exact]] = {}
    local: dict[str, list[int]] = {}
    for w, qs in sqls.items():
        progress(f"{w}: the local engine's matches and the lower bound ...")
        truth[w] = [exact(events, q, tuple(codecs)) for q in qs]
        local[w] = [t.matches for t in truth[w]]
        figures["lower_bound"][w] = {
            "matches": statistics.mean(t.matches for t in truth[w]),
            "candidates": statistics.mean(t.candidates for t in truth[w]),
            "events": statistics.mean(t.lb_events for t in truth[w]),
            "bytes": statistics.mean(t.lb_bytes for t in truth[w]),
            **{
                f"bytes_{c}": statistics.mean(t.lb_stream_bytes[c] for t in truth[w])
                for c in codecs
            },
        }
    files = args.files or max(20, 2 * nodes[-1])
    with tempfile.TemporaryDirectory(prefix="dfs-cer-scale-") as tmp:
        layout_data = Layouts(Path(tmp), events, files, args.start_timeout)
        for layout in layouts:
            for n in nodes:
                progress(f"{layout} layout, {n} storage nodes: starting ...")
                with layout_data.cluster(layout, n) as cluster:
                    for w, qs in sqls.items():
                        for i, sql in enumerate(qs):
                            if args.warm:  # untimed: the nodes build their indexes
                                measure(cluster, "dfs", sql, codecs[0])
                            for s in strategies:
                                for c in codecs:
                                    got = measure(cluster, s, sql, c)
                                    got["exact"] = got["matches"] == local[w][i]
                                    figures["runs"].append(
                                        {"workload": w, "layout": layout, "nodes": n,
                                         "compression": c, "strategy": s, "query": i, **got}
                                    )  # fmt: skip
                            progress(f"  {layout}, {n} nodes, {w}: query {i + 1}/{len(qs)}")
    return summarize(figures)


def pick(text: str, allowed: tuple[str, ...], option: str) -> list[str]:
    chosen = [x for x in text.split(",") if x]
    bad = [x for x in chosen if x not in allowed]
    if bad or not chosen:
        raise SystemExit(
            f"error: {option} {text!r}: choose from {', '.join(allowed)} (comma-separated)"
        )
    return chosen


def summarize(figures: dict[str, Any]) -> dict[str, Any]:
    """Means over queries per (workload, layout, nodes, codec, strategy); the ratios; growth."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in figures.pop("runs"):
        key = (r["workload"], r["layout"], r["nodes"], r["compression"], r["strategy"])
        groups.setdefault(key, []).append(r)
    points = []
    for (w, layout, n, c, s), runs in groups.items():
        digests = {r["query"]: r["digest"] for r in runs}
        base = groups.get((w, layout, n, c, "push_down"))
        same = base is None or all(digests[r["query"]] == r["digest"] for r in base)
        points.append(
            {
                "workload": w,
                "layout": layout,
                "nodes": n,
                "compression": c,
                "strategy": s,
                **mean_of(runs),
                "exact": all(r["exact"] for r in runs) and same,
            }
        )
    figures["points"] = points
    at = {
        (p["workload"], p["layout"], p["nodes"], p["compression"], p["strategy"]): p for p in points
    }
    ratios, growth = [], []
    for w, layout, n, c, s in at:
        if s != "dfs":
            continue
        dfs = at[(w, layout, n, c, s)]["bytes"]
        lb = figures["lower_bound"][w].get(f"bytes_{c}", 0.0)
        row = {"workload": w, "layout": layout, "nodes": n, "compression": c}
        for other in ("push_down", "push_pull"):
            if (w, layout, n, c, other) in at:
                row[f"dfs_over_{other}"] = dfs / max(1.0, at[(w, layout, n, c, other)]["bytes"])
        row["dfs_over_lower_bound"] = dfs / lb if lb else None  # no match: no bound
        ratios.append(row)
    nodes = figures["nodes"]
    for w, layout, n, c, s in at:
        if n == nodes[0] and (w, layout, nodes[-1], c, s) in at and len(nodes) > 1:
            lo, hi = at[(w, layout, n, c, s)]["bytes"], at[(w, layout, nodes[-1], c, s)]["bytes"]
            growth.append(
                {"workload": w, "layout": layout, "compression": c, "strategy": s,
                 "from_nodes": n, "to_nodes": nodes[-1], "bytes_from": lo, "bytes_to": hi,
                 "growth": hi / max(1.0, lo)}
            )  # fmt: skip
    figures["ratios"] = ratios
    figures["growth"] = growth
    figures["exact"] = all(p["exact"] for p in points)
    return figures


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--nodes", default="3,12,48,96", help="storage node counts, comma-separated")
    ap.add_argument("--compression", default="zstd,none", help="codecs of pulled events")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument(
        "--files", type=int, default=0, help="Iceberg data files (default: 2 per node, >= 20)"
    )
    ap.add_argument(
        "--start-timeout",
        type=float,
        default=1800.0,
        help="seconds every node of a cluster may take to start",
    )
    ap.add_argument(
        "--no-warm",
        dest="warm",
        action="store_false",
        help="skip the untimed DFS run of each query before the timed ones",
    )
    ap.add_argument("--json", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        sys.stdout.write(markdown(figures))
    return figures


if __name__ == "__main__":
    main()
