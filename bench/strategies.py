"""Pull strategies side by side (paper Fig. 11/12 shape): bytes between compute and storage nodes
and events received, per strategy, on the paper's synthetic data and default workload.

Command:  .venv/bin/python bench/strategies.py [--events 1000000] [--queries 20] [--json] [--big]
              [--compression none|zstd|lz4|all]   (how pulled events travel; default none, the
              paper's comparison; all: every codec, bytes side by side)
          .venv/bin/python bench/strategies.py --workload navigation [--events 1000000]
              [--queries 10]
          (queries with PREV/NEXT: see bench/navigation.py)
Hardware: 3 storage node processes and the compute node on one machine, over loopback.
Runtime:  about 2-3 minutes for 1M events (--big: 10M events).
Output:   mean payload bytes (both directions) and mean events received per strategy, the lower
          bound (candidate events inside the exact union of match intervals), and the ratios
          dfs_over_pushdown_bytes, dfs_over_pushpull_bytes, dfs_over_lower_bound_bytes (--json).

Targets: DFS <= 0.2x push-down bytes, <= 0.5x push-pull, <= 2x the lower bound.
With --json (and in the table) DFS's bytes per action show where they go.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dfs_cer import analyze, parse
from dfs_cer.config import StrategyConfig
from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.filters import IntervalSet
from dfs_cer.io.shard import shard
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.query.arrow_filter import union_filter
from dfs_cer.strategies import pull
from storage_node.launcher import LocalCluster

STRATEGIES = ("push_down", "push_pull", "naive_dfs", "dfs", "swf_only", "dfs_v1", "dfs_v2")


def lower_bound(events: pa.Table, sql: str) -> tuple[int, float]:
    """Candidate events inside the union of the exact match intervals, and their payload bytes."""
    import pyarrow.dataset as ds

    analysis = analyze(parse(sql), events.schema)
    out = run_cer(events, analysis).table
    ts_cols = [c for c in out.column_names if c.endswith("_ts")]
    if out.num_rows == 0:
        return 0, 0.0
    times = np.stack([out.column(c).cast(pa.int64()).to_numpy() for c in ts_cols])
    spans = IntervalSet(times.min(axis=0), times.max(axis=0))
    filt = union_filter([v.independent for v in analysis.variables if not v.any_row])
    cands = ds.dataset(events).to_table(filter=filt) if filt is not None else events
    inside = spans.contains(cands.column("ts").cast(pa.int64()).to_numpy())
    n = int(inside.sum())
    return n, n * cands.nbytes / max(1, cands.num_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--big", action="store_true", help="10M events")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument(
        "--cost-model",
        default="adaptive",
        choices=["adaptive", "always_on", "always_off", "naive", "fixed"],
    )
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help="comma-separated; dfs, push_down and push_pull are always run",
    )
    parser.add_argument(
        "--calibration",
        default="conf/calibration.json",
        help="dfs-cer calibrate's tables for the adaptive model (ignored when missing)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--compression",
        choices=["none", "zstd", "lz4", "all"],
        default="none",
        help="how pulled events travel (strategy.transfer_compression); all: each codec",
    )
    parser.add_argument(
        "--workload",
        choices=["default", "navigation"],
        default="default",
        help="navigation: queries with PREV/NEXT (bench/navigation.py)",
    )
    args = parser.parse_args()
    if args.workload == "navigation":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import navigation

        figures = navigation.run(
            10_000_000 if args.big else args.events,
            args.queries,
            args.nodes,
            args.cost_model,
            lambda line: print(line, file=sys.stderr, flush=True),
        )
        if args.json:
            print(json.dumps(figures, indent=2))
        else:
            navigation.report(figures)
        return
    chosen = tuple(dict.fromkeys(["push_down", "push_pull", "dfs", *args.strategies.split(",")]))
    n = 10_000_000 if args.big else args.events
    events = synthetic_events(n)
    sqls = synthetic_queries(args.queries)
    sums: dict[str, list[float]] = {
        f"{s}_{k}": [] for s in (*chosen, "lower_bound") for k in ("bytes", "events", "seconds")
    }
    by_action: dict[str, list[float]] = {}
    codecs = ["none", "zstd", "lz4"] if args.compression == "all" else [args.compression]
    first = codecs[0]
    for c in codecs[1:]:
        sums.update({f"{s}_bytes_{c}": [] for s in chosen})
    with tempfile.TemporaryDirectory(prefix="dfs-cer-strategies-") as tmp:
        pq.write_table(events, Path(tmp) / "events.parquet")
        shard(str(Path(tmp) / "events.parquet"), args.nodes, str(Path(tmp) / "nodes"))
        dirs = [str(Path(tmp) / "nodes" / f"node-{i:02d}") for i in range(args.nodes)]
        with LocalCluster(dirs) as cluster:
            for i, sql in enumerate(sqls):
                for s in chosen:
                    for codec in codecs:
                        start = time.perf_counter()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            r = pull(
                                s,
                                sql,
                                cluster.endpoints,
                                cluster.token,
                                cost_model=args.cost_model,
                                calibration_file=args.calibration,
                                config=StrategyConfig(transfer_compression=codec),  # type: ignore[arg-type]
                            )
                        if codec != first:
                            sums[f"{s}_bytes_{codec}"].append(
                                r.trace.bytes_to_cn + r.trace.bytes_to_sn
                            )
                            continue
                        if s == "dfs":  # where DFS's bytes go: per action, both directions
                            for rd in r.trace.rounds:
                                by_action.setdefault(rd.action, [0.0] * len(sqls))[i] += (
                                    rd.bytes_to_sn + rd.bytes_to_cn
                                )
                        sums[f"{s}_seconds"].append(time.perf_counter() - start)
                        sums[f"{s}_bytes"].append(r.trace.bytes_to_cn + r.trace.bytes_to_sn)
                        sums[f"{s}_events"].append(r.trace.events_received)
                lb_events, lb_bytes = lower_bound(events, sql)
                sums["lower_bound_events"].append(lb_events)
                sums["lower_bound_bytes"].append(lb_bytes)
                sums["lower_bound_seconds"].append(0.0)
                print(f"  query {i + 1}/{len(sqls)}", file=sys.stderr, flush=True)
    means = {k: statistics.mean(v) for k, v in sums.items()}
    figures = {
        "events": n,
        "queries": len(sqls),
        "nodes": args.nodes,
        "compression": first,
        **{f"mean_{k}": v for k, v in means.items()},
        "dfs_over_pushdown_bytes": means["dfs_bytes"] / means["push_down_bytes"],
        "dfs_over_pushpull_bytes": means["dfs_bytes"] / means["push_pull_bytes"],
        "dfs_over_lower_bound_bytes": means["dfs_bytes"] / max(1.0, means["lower_bound_bytes"]),
        "dfs_bytes_by_action": {a: statistics.mean(v) for a, v in by_action.items() if any(v)},
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{n:,} synthetic events, {args.nodes} storage nodes, {len(sqls)} default "
        f"4-variable queries, cost model {args.cost_model}"
    )
    print(
        "| strategy | mean bytes (both ways) | mean events received | mean pull seconds "
        "(loopback) |\n|---|---:|---:|---:|"
    )
    for s in (*chosen, "lower_bound"):
        print(
            f"| {s} | {means[s + '_bytes']:,.0f} | {means[s + '_events']:,.1f} | "
            f"{means[s + '_seconds']:.3f} |"
        )
    if len(codecs) > 1:
        print(
            "\n| strategy | "
            + " | ".join(f"mean bytes, {c}" for c in codecs)
            + " | zstd / none |\n|---|"
            + "---:|" * (len(codecs) + 1)
        )
        for s in chosen:
            row = [means[f"{s}_bytes"]] + [means[f"{s}_bytes_{c}"] for c in codecs[1:]]
            print(
                f"| {s} | " + " | ".join(f"{b:,.0f}" for b in row) + f" | {row[1] / row[0]:.3f} |"
            )
    print("\n| DFS action | mean bytes per query (both ways) | share |\n|---|---:|---:|")
    for a, b in sorted(figures["dfs_bytes_by_action"].items(), key=lambda x: -x[1]):
        print(f"| {a} | {b:,.0f} | {b / means['dfs_bytes']:.0%} |")
    print(f"DFS / push-down bytes: {figures['dfs_over_pushdown_bytes']:.3f} (target <= 0.2)")
    print(f"DFS / push-pull bytes: {figures['dfs_over_pushpull_bytes']:.3f} (target <= 0.5)")
    print(f"DFS / lower bound bytes: {figures['dfs_over_lower_bound_bytes']:.3f} (target <= 2)")


if __name__ == "__main__":
    main()
