"""Pull strategies side by side (paper Fig. 11/12 shape): bytes between compute and storage nodes
and events received, per strategy, on the paper's synthetic data and default workload.

Command:  .venv/bin/python bench/strategies.py [--events 1000000] [--queries 20] [--json] [--big]
              [--compression zstd,none]   (how pulled events travel, comma-separated; the
              first codec gets every figure, the others their bytes beside it; default zstd,
              the product's, then none, the paper's uncompressed comparison; all: every codec)
          .venv/bin/python bench/strategies.py --workload navigation [--events 1000000]
              [--queries 10]
          (queries with PREV/NEXT: see bench/navigation.py)
Hardware: 3 storage node processes and the compute node on one machine, over loopback.
Runtime:  about 2-3 minutes for 1M events (--big: 10M events).
Output:   mean payload bytes (both directions) and mean events received per strategy, the lower
          bound (candidate events inside the exact union of match intervals), and the ratios
          dfs_over_pushdown_bytes, dfs_over_pushpull_bytes, dfs_over_lower_bound_bytes (--json;
          of the first codec, and with a _<codec> suffix for each codec, e.g.
          dfs_over_pushdown_bytes_none; mean_<strategy>_bytes_<codec> likewise).

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

import pyarrow.parquet as pq

from bench.harness import exact, lower_bound
from dfs_cer.config import StrategyConfig
from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from storage_node.launcher import LocalCluster

STRATEGIES = ("push_down", "push_pull", "naive_dfs", "dfs", "swf_only", "dfs_v1", "dfs_v2")
CODECS = ("zstd", "none", "lz4")
__all__ = ["lower_bound", "main"]  # lower_bound lives in bench/harness.py now


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
        default="zstd,none",
        help="how pulled events travel (strategy.transfer_compression), comma-separated: zstd "
        "(the product's default), none (the paper's comparison), lz4; all: each codec",
    )
    parser.add_argument(
        "--workload",
        choices=["default", "navigation"],
        default="default",
        help="navigation: queries with PREV/NEXT (bench/navigation.py)",
    )
    args = parser.parse_args()
    codecs = list(CODECS) if args.compression == "all" else args.compression.split(",")
    if not codecs or any(c not in CODECS for c in codecs):
        parser.error(f"--compression {args.compression!r}: give some of zstd,none,lz4 or all")
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
    first = codecs[0]
    for c in codecs:
        sums.update({f"{s}_bytes_{c}": [] for s in (*chosen, "lower_bound")})
    with tempfile.TemporaryDirectory(prefix="dfs-cer-strategies-") as tmp:
        pq.write_table(events, Path(tmp) / "events.parquet")
        shard(
            str(Path(tmp) / "events.parquet"),
            args.nodes,
            str(Path(tmp) / "nodes"),
            name="synthetic",
        )
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
                        sums[f"{s}_bytes_{codec}"].append(r.trace.bytes_to_cn + r.trace.bytes_to_sn)
                        if codec != first:
                            continue
                        if s == "dfs":  # where DFS's bytes go: per action, both directions
                            for rd in r.trace.rounds:
                                by_action.setdefault(rd.action, [0.0] * len(sqls))[i] += (
                                    rd.bytes_to_sn + rd.bytes_to_cn
                                )
                        sums[f"{s}_seconds"].append(time.perf_counter() - start)
                        sums[f"{s}_bytes"].append(r.trace.bytes_to_cn + r.trace.bytes_to_sn)
                        sums[f"{s}_events"].append(r.trace.events_received)
                lb = exact(events, sql, tuple(codecs))
                sums["lower_bound_events"].append(lb.lb_events)
                sums["lower_bound_bytes"].append(lb.lb_bytes)
                sums["lower_bound_seconds"].append(0.0)
                for c in codecs:  # the rows inside the intervals as that codec's stream
                    sums[f"lower_bound_bytes_{c}"].append(lb.lb_stream_bytes[c])
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
        "codecs": codecs,
    }
    for c in codecs:
        figures[f"dfs_over_pushdown_bytes_{c}"] = (
            means[f"dfs_bytes_{c}"] / means[f"push_down_bytes_{c}"]
        )
        figures[f"dfs_over_pushpull_bytes_{c}"] = (
            means[f"dfs_bytes_{c}"] / means[f"push_pull_bytes_{c}"]
        )
        figures[f"dfs_over_lower_bound_bytes_{c}"] = means[f"dfs_bytes_{c}"] / max(
            1.0, means[f"lower_bound_bytes_{c}"]
        )
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{n:,} synthetic events, {args.nodes} storage nodes, {len(sqls)} default "
        f"4-variable queries, cost model {args.cost_model}; pulled events travel {first}"
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
            + f" | {codecs[1]} / {first} |\n|---|"
            + "---:|" * (len(codecs) + 1)
        )
        for s in (*chosen, "lower_bound"):
            row = [means[f"{s}_bytes_{c}"] for c in codecs]
            print(
                f"| {s} | "
                + " | ".join(f"{b:,.0f}" for b in row)
                + f" | {row[1] / max(1.0, row[0]):.3f} |"
            )
        print("(lower_bound: the rows inside the exact intervals as one stream of that codec)")
    print("\n| DFS action | mean bytes per query (both ways) | share |\n|---|---:|---:|")
    for a, b in sorted(figures["dfs_bytes_by_action"].items(), key=lambda x: -x[1]):
        print(f"| {a} | {b:,.0f} | {b / means['dfs_bytes']:.0%} |")
    for c in codecs:
        print(
            f"{c}: DFS / push-down bytes {figures[f'dfs_over_pushdown_bytes_{c}']:.3f} (target "
            f"<= 0.2), DFS / push-pull {figures[f'dfs_over_pushpull_bytes_{c}']:.3f} (<= 0.5), "
            f"DFS / lower bound {figures[f'dfs_over_lower_bound_bytes_{c}']:.3f} (<= 2)"
        )


if __name__ == "__main__":
    main()
