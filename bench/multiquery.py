"""Several queries over the same data: together (one scan per storage node, one shared final
pull) versus one by one.

Command:  .venv/bin/python bench/multiquery.py [--events 2000000] [--ks 1,5,10] [--strategy dfs]
          [--workload synthetic|variants] [--json]
Hardware: 3 storage node processes and the compute node on one machine, over loopback.
Runtime:  about 3-4 minutes for 2M events.
Output:   for k = 1, 5, 10 queries — ``synthetic``: the paper's workload (4 variables, 3-minute
          window, different event types per query); ``variants``: one of its queries with k
          thresholds on its third variable (what an analyst tuning a pattern runs) — storage
          scan seconds (the nodes' open
          rounds: one for the group, k one by one), bytes between compute and storage nodes
          (both ways), and total latency (pulls and matching) — with the storage nodes' shard
          cache off (every open reads the parquet shards, as from S3) and on (the default: a
          node keeps its decoded shard set after the first scan). Every query's matches are
          checked equal in both modes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from storage_node.launcher import LocalCluster


def _scan_seconds(trace: Any) -> float:
    return sum(r.seconds for r in trace.rounds if r.action == "open")


def _rows(table: Any) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def workload(name: str, k: int, events: Any) -> list[str]:
    if name == "synthetic":
        return synthetic_queries(k, seed=11)
    # the workload query with the most matches, with k thresholds on its third variable
    from dfs_cer import match_recognize

    candidates = synthetic_queries(10, seed=11)
    counts = [match_recognize(events, q, count_only=True)["matches"][0].as_py() for q in candidates]
    base = candidates[max(range(len(candidates)), key=lambda i: counts[i])]
    return [base.replace("C.a1 <= 200", f"C.a1 <= {200 + 40 * i}") for i in range(k)]


def measure(cluster: LocalCluster, queries: list[str], strategy: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    alone = []
    for q in queries:
        result = pull(strategy, q, cluster.endpoints, cluster.token)
        alone.append((result, match_pulled(result)))
    one_by_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    group = pull_many(strategy, queries, cluster.endpoints, cluster.token)
    together_matches = [match_pulled(r) for r in group.results]
    together = time.perf_counter() - t0
    for (_, want), got in zip(alone, together_matches, strict=True):
        assert _rows(want) == _rows(got), "together and one by one disagree"
    return {
        "matches": sum(m.num_rows for m in together_matches),
        "one_by_one": {
            "scan_s": sum(_scan_seconds(r.trace) for r, _ in alone),
            "bytes": sum(r.trace.bytes_to_cn + r.trace.bytes_to_sn for r, _ in alone),
            "latency_s": one_by_one,
        },
        "together": {
            "scan_s": _scan_seconds(group.trace)
            + sum(_scan_seconds(r.trace) for r in group.results),
            "bytes": group.bytes_to_cn + group.bytes_to_sn,
            "latency_s": together,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--ks", default="1,5,10")
    ap.add_argument("--strategy", default="dfs")
    ap.add_argument("--workload", choices=["synthetic", "variants"], default="synthetic")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    warnings.simplefilter("ignore")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="dfs-cer-multi-") as tmp:
        root = Path(tmp)
        events = synthetic_events(args.events, seed=3)
        queries = workload(args.workload, max(ks), events)
        pq.write_table(events, root / "events.parquet")
        shard(str(root / "events.parquet"), 3, str(root / "nodes"), name="synthetic")
        dirs = [str(root / "nodes" / f"node-{i:02d}") for i in range(3)]
        for cache in ("off", "on"):
            env = {"DFS_CER__STORAGE__CACHE_BYTES": "0"} if cache == "off" else {}
            with LocalCluster(dirs, env=env) as cluster:
                pull(
                    args.strategy, queries[0], cluster.endpoints, cluster.token
                )  # warm-up (JIT, page cache)
                for k in ks:
                    row = measure(cluster, queries[:k], args.strategy)
                    results[f"cache {cache}, k={k}"] = row
                    if not args.json:
                        a, t = row["one_by_one"], row["together"]
                        print(
                            f"cache {cache:3} k={k:2}: scan {a['scan_s']:6.2f} s -> "
                            f"{t['scan_s']:5.2f} s, bytes {a['bytes'] / 1e6:7.2f} MB -> "
                            f"{t['bytes'] / 1e6:6.2f} MB, latency {a['latency_s']:6.2f} s "
                            f"-> {t['latency_s']:5.2f} s ({row['matches']:,} matches)",
                            flush=True,
                        )
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
