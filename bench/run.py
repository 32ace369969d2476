"""The paper's evaluation in one run: every strategy on the same shards, side by side.

Command:  .venv/bin/python bench/run.py [--events 10000000 | --full] [--net] [--sections ...]
              [--json]
          (network mode: `sudo bench/net.sh up --nodes 6` first; the harness uses as many of its
          namespaces as a section needs)
Hardware: the compute node and the storage node processes share this machine (2 cores here).
Runtime:  about 25 minutes at the default 10M synthetic events; --quick (200k events, fewer
          queries) about 2 minutes; --full runs 50M.
Output:   bench/results/run-<mode>.json, bench/results/run-<mode>.md (tables for RESULTS.md),
          bench/results/fig_*-<mode>.png, and with --json the headline ratios on stdout:
          transmission_vs_pushdown, transmission_vs_pushpull (DFS bytes / baseline bytes, both
          directions), latency_vs_best_baseline (best baseline latency / DFS latency) and
          sn_memory_vs_pushdown (storage nodes' peak memory under DFS / under push-down); with
          several codecs (--compression zstd,none, the default) every figure is of the first
          (zstd: the product's), and the main section also moves each query's bytes under the
          others (none: the paper's uncompressed comparison), reported beside it
          (transmission_vs_pushdown_none, ..., bytes_by_codec).

Sections (paper figures): main (Fig. 11/12 transmission and events, Table II latency by phase,
Fig. 25 filter ablations), sweeps (Fig. 18-20 window, selectivity, variables), nodes (Fig. 23),
costmodel (Fig. 26/27 cost-model ablations and misestimated R), memory (Fig. 13).

Targets: transmission >= 78% lower than push-down and >= 71% lower than push-pull,
latency >= 1.2x better than the best baseline under the 1 Gbit/s link, storage node peak memory
within 4% of push-down.
"""

from __future__ import annotations

import argparse
import json
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


from bench.harness import NetConfig, phases, sn_peak_memory, wire_bytes
from dfs_cer.config import StrategyConfig
from dfs_cer.datasets.generate import write_parquet
from dfs_cer.datasets.synthetic import synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

BASELINES = ("push_down", "push_pull")
MAIN = ("push_down", "push_pull", "naive_dfs", "dfs", "swf_only", "dfs_v1", "dfs_v2")
SECTIONS = ("main", "sweeps", "nodes", "costmodel", "memory")
RESULTS = Path(__file__).resolve().parent / "results"


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path, net: NetConfig | None) -> None:
        self.args, self.root, self.net = args, root, net
        self.calibration = args.calibration
        #: how pulled events travel (strategy.transfer_compression): the first codec of the run
        #: (zstd: the product's default); the main section's bytes under the others beside it
        self.codecs: list[str] = args.codecs
        self.config = StrategyConfig(transfer_compression=args.codecs[0])
        self.shards: dict[int, list[str]] = {}
        #: every query of the run, opened once untimed on each cluster started (see cluster)
        self.warm_queries: list[str] = []
        self.log = root / "events.parquet"

    def data(self, progress: Callable[[str, int, int], None]) -> None:
        write_parquet(
            "synthetic",
            self.args.events,
            str(self.log),
            batch=1_000_000,
            progress=lambda n: progress("generating", n, self.args.events),
        )

    def shards_for(self, nodes: int) -> list[str]:
        if nodes not in self.shards:
            out = self.root / f"nodes-{nodes}"
            shard(str(self.log), nodes, str(out), batch_rows=1_000_000, name="synthetic")
            self.shards[nodes] = [str(out / f"node-{i:02d}") for i in range(nodes)]
        return self.shards[nodes]

    @contextmanager
    def cluster(self, nodes: int, warm: bool = True) -> Iterator[LocalCluster]:
        dirs = self.shards_for(nodes)
        kw: dict[str, Any] = {}
        if self.net is not None:
            if self.net.nodes < nodes:
                raise SystemExit(
                    f"error: bench/net.sh set up {self.net.nodes} namespaces, this section needs "
                    f"{nodes}; run sudo bench/net.sh up --nodes {nodes}"
                )
            kw = {"netns": self.net.namespaces[:nodes], "hosts": self.net.hosts[:nodes]}
        with LocalCluster(dirs, **kw) as c:
            # untimed: each query once, so that the value indexes and sorted projections its
            # conditions use exist before any strategy is timed (nodes build them on first use;
            # whichever strategy ran first would pay for them)
            for sql in self.warm_queries if warm else ():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pull(
                        "dfs",
                        sql,
                        c.endpoints,
                        c.token,
                        calibration_file=self.calibration,
                        config=self.config,
                    )
            yield c

    def run(self, cluster: LocalCluster, strategy: str, sql: str, **options: Any) -> dict[str, Any]:
        options.setdefault("calibration_file", self.calibration)
        options.setdefault("config", self.config)
        devices = self.net.devices[: len(cluster.endpoints)] if self.net else []
        wire0 = wire_bytes(devices)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pull(strategy, sql, cluster.endpoints, cluster.token, **options)
        pulled = time.perf_counter()
        matches = match_pulled(result).num_rows
        done = time.perf_counter()
        trace = result.trace
        return {
            "bytes": trace.bytes_to_cn + trace.bytes_to_sn,
            "bytes_to_cn": trace.bytes_to_cn,
            "bytes_to_sn": trace.bytes_to_sn,
            "wire_bytes": wire_bytes(devices) - wire0 if devices else None,
            "events": trace.events_received,
            "latency": done - started,
            "matches": matches,
            "rounds": len(trace.rounds),
            "fallback": trace.fallback,
            "phases": {**phases(trace), "match": done - pulled},
        }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-query median over repeats (bytes and events are equal across repeats for fixed
    decisions; the adaptive model may differ, so they take the median too)."""
    out: dict[str, Any] = {}
    for key in ("bytes", "bytes_to_cn", "bytes_to_sn", "events", "latency", "matches", "rounds"):
        out[key] = statistics.median(r[key] for r in runs)
    wires = [r["wire_bytes"] for r in runs if r["wire_bytes"] is not None]
    out["wire_bytes"] = statistics.median(wires) if wires else None
    out["phases"] = {p: statistics.median(r["phases"][p] for r in runs) for p in runs[0]["phases"]}
    out["fallback"] = runs[0]["fallback"]
    if "bytes_by_codec" in runs[0]:
        out["bytes_by_codec"] = runs[0]["bytes_by_codec"]
    return out


def summarize(per_query: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over queries of the per-query medians."""
    out: dict[str, Any] = {
        k: statistics.mean(q[k] for q in per_query)
        for k in ("bytes", "bytes_to_cn", "bytes_to_sn", "events", "latency", "matches", "rounds")
    }
    wires = [q["wire_bytes"] for q in per_query if q["wire_bytes"] is not None]
    out["wire_bytes"] = statistics.mean(wires) if wires else None
    out["phases"] = {
        p: statistics.mean(q["phases"][p] for q in per_query) for p in per_query[0]["phases"]
    }
    if "bytes_by_codec" in per_query[0]:
        out["bytes_by_codec"] = {
            c: statistics.mean(q["bytes_by_codec"][c] for q in per_query)
            for c in per_query[0]["bytes_by_codec"]
        }
    return out


def main() -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bench.report import headline, markdown, plots

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--full", action="store_true", help="50M events")
    parser.add_argument(
        "--quick", action="store_true", help="200k events, 3 queries, 1 repeat (a smoke run)"
    )
    parser.add_argument("--queries", type=int, default=10, help="queries in the main section")
    parser.add_argument("--sweep-queries", type=int, default=5, help="queries per sweep point")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per query and strategy (medians)"
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--node-counts", default="1,2,3,4,6")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument(
        "--net", action="store_true", help="use bench/net.sh's namespaces (rate-limited links)"
    )
    parser.add_argument(
        "--net-state", default="/run/dfs-cer-net.json", help="bench/net.sh's state file"
    )
    parser.add_argument("--calibration", default="conf/calibration.json")
    parser.add_argument(
        "--compression",
        default="zstd,none",
        help="how pulled events travel, comma-separated: every figure under the first (zstd, the "
        "product's default), the main section's bytes also under the others (none: the paper's "
        "uncompressed comparison); the results' mode names the first unless it is none",
    )
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--json", action="store_true", help="print the headline ratios as JSON")
    args = parser.parse_args()
    if args.full:
        args.events = 50_000_000
    if args.quick:
        args.events, args.queries, args.sweep_queries, args.repeat = 200_000, 3, 2, 1
        args.node_counts = "1,3"
    args.codecs = [c for c in args.compression.split(",") if c]
    if not args.codecs or any(c not in ("zstd", "none", "lz4") for c in args.codecs):
        raise SystemExit(
            f"error: --compression {args.compression!r}: give some of zstd,none,lz4 (first: the "
            "codec of every figure)"
        )
    sections = [s for s in args.sections.split(",") if s]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise SystemExit(
            f"error: unknown section {unknown[0]!r}; choose from {', '.join(SECTIONS)}"
        )
    net = NetConfig.load(Path(args.net_state)) if args.net else None
    mode = (f"net-{net.rate}" if net else "loopback") + (
        "" if args.codecs[0] == "none" else f"-{args.codecs[0]}"
    )
    node_counts = [int(n) for n in args.node_counts.split(",")]
    queries = synthetic_queries(args.queries)
    sweep_points: list[tuple[str, Any, list[str]]] = []
    if "sweeps" in sections:
        sweep_points += [
            ("window_min", w, synthetic_queries(args.sweep_queries, window_minutes=w))
            for w in (1, 3, 5, 7)
        ]
        sweep_points += [
            ("selectivity", s, synthetic_queries(args.sweep_queries, selectivity=s))
            for s in (50, 100, 200, 300)
        ]
        sweep_points += [
            ("variables", v, synthetic_queries(args.sweep_queries, variables=v))
            for v in (2, 4, 6, 8)
        ]
    rates = (0.01, 0.1, 1.0, 10.0, 100.0)
    models = ("adaptive", "always_on", "always_off", "naive", "fixed")
    total = (
        (
            len(MAIN) * len(queries) * (args.repeat + len(args.codecs) - 1)
            if "main" in sections
            else 0
        )
        + sum(3 * len(q) for _, _, q in sweep_points)
        + (len(node_counts) * 3 * args.sweep_queries if "nodes" in sections else 0)
        + ((len(models) + len(rates)) * len(queries) if "costmodel" in sections else 0)
        + (3 * len(queries) if "memory" in sections else 0)
    )
    results: dict[str, Any] = {
        "events": args.events,
        "mode": mode,
        "net": net.__dict__ if net else None,
        "storage_nodes": args.nodes,
        "queries": len(queries),
        "repeat": args.repeat,
        "compression": args.codecs,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    columns = (
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with (
        tempfile.TemporaryDirectory(prefix="dfs-cer-bench-") as tmp,
        Progress(*columns, transient=False) as bar,
    ):
        bench = Bench(args, Path(tmp), net)
        bench.warm_queries = list(
            dict.fromkeys([*queries, *(q for _, _, qs in sweep_points for q in qs)])
        )
        steps: dict[str, Any] = {}

        def progress(step: str, done: int, of: int) -> None:
            if step not in steps:
                steps[step] = bar.add_task(step, total=of)
            bar.update(steps[step], completed=done)

        bench.data(progress)
        task = bar.add_task("runs", total=total)

        def tick(text: str) -> None:
            bar.update(task, advance=1, description=text[:28])

        with bench.cluster(args.nodes) as c:  # warm-up: compile the engines, open connections
            for s in MAIN:
                bench.run(c, s, queries[0])
        if "main" in sections:
            per: dict[str, list[dict[str, Any]]] = {s: [] for s in MAIN}
            with bench.cluster(args.nodes) as c:
                for qi, sql in enumerate(queries):
                    for s in MAIN:
                        runs = []
                        for _ in range(args.repeat):
                            runs.append(bench.run(c, s, sql))
                            tick(f"main q{qi + 1} {s}")
                        runs[0]["bytes_by_codec"] = {bench.codecs[0]: runs[0]["bytes"]}
                        for codec in bench.codecs[1:]:  # bytes only: one run per other codec
                            other = StrategyConfig(transfer_compression=codec)  # type: ignore[arg-type]
                            runs[0]["bytes_by_codec"][codec] = bench.run(c, s, sql, config=other)[
                                "bytes"
                            ]
                            tick(f"main q{qi + 1} {s} {codec}")
                        per[s].append(median_run(runs))
            results["main"] = {s: {"summary": summarize(v), "per_query": v} for s, v in per.items()}
        if sweep_points:
            results["sweeps"] = {}
            with bench.cluster(args.nodes) as c:
                for name, value, sqls in sweep_points:
                    point = {}
                    for s in (*BASELINES, "dfs"):
                        runs = []
                        for sql in sqls:
                            runs.append(bench.run(c, s, sql))
                            tick(f"{name}={value} {s}")
                        point[s] = summarize(runs)
                    results["sweeps"].setdefault(name, {})[str(value)] = point
        if "nodes" in sections:
            results["nodes"] = {}
            for n in node_counts:
                point = {}
                with bench.cluster(n) as c:
                    for s in (*BASELINES, "dfs"):
                        runs = []
                        for sql in queries[: args.sweep_queries]:
                            runs.append(bench.run(c, s, sql))
                            tick(f"nodes={n} {s}")
                        point[s] = summarize(runs)
                results["nodes"][str(n)] = point
        if "costmodel" in sections:
            results["costmodel"] = {"models": {}, "rate_scale": {}}
            with bench.cluster(args.nodes) as c:
                for m in models:
                    runs = []
                    for sql in queries:
                        runs.append(bench.run(c, "dfs", sql, cost_model=m))
                        tick(f"cost model {m}")
                    results["costmodel"]["models"][m] = summarize(runs)
                for k in rates:
                    runs = []
                    for sql in queries:
                        runs.append(bench.run(c, "dfs", sql, rate_scale=k))
                        tick(f"R x {k}")
                    results["costmodel"]["rate_scale"][str(k)] = summarize(runs)
        if "memory" in sections:
            results["memory"] = {}
            for s in (*BASELINES, "dfs"):
                with bench.cluster(args.nodes, warm=False) as c:  # peaks of this strategy alone
                    idle = sn_peak_memory(c)
                    for sql in queries:
                        bench.run(c, s, sql)
                        tick(f"memory {s}")
                    results["memory"][s] = {
                        "peak_bytes": sn_peak_memory(c),
                        "idle_peak_bytes": idle,
                    }
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    results["headline"] = headline(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"run-{mode}.json").write_text(json.dumps(results, indent=1, default=str))
    (out / f"run-{mode}.md").write_text(markdown(results, mode, images=""))  # beside the plots
    plots(results, out, mode)
    if args.json:
        print(json.dumps(results["headline"], indent=2))
    else:
        print(markdown(results))


if __name__ == "__main__":
    main()
