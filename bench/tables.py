"""An Iceberg table served in place by the storage nodes, against the same rows copied into
shard sets first (``dfs-cer shard``).

Command:  .venv/bin/python bench/tables.py [--events 10000000] [--files 20] [--nodes 3]
          [--queries 5] [--repeat 3] [--json] [--plot bench/results/fig_tables.png]
Hardware: the storage nodes and the compute node on one machine, over loopback.
Runtime:  about 6 minutes for 10M events on 2 cores.
Output:   - ready seconds: from nothing to nodes that answer (in place: the nodes plan the table,
            read their files and sort them; re-sharded: ``dfs-cer shard`` copying every row, then
            the nodes loading their shard sets); bytes written by the copy;
          - per query (the synthetic workload under DFS): median latency and bytes moved,
            both layouts, matches checked equal;
          - pruning: with the nodes' cache off (every query reads its files from storage, as
            from S3), files and bytes read per query over the whole table, and over a time range
            of a tenth of it (Iceberg column metrics skip the other files).

The table is written as ``--files`` appends (snapshots) of consecutive time slices in shuffled
order, each file's rows out of time order, as a table loaded by a daily job looks.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa

from dfs_cer.config import TablesConfig
from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.io.tables import load_catalog, plan_table
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.transport.client import StorageClient
from storage_node.launcher import LocalCluster


def _rows(table: Any) -> list[tuple[object, ...]]:
    return sorted(tuple(map(str, r.values())) for r in table.to_pylist())


def _stats(cluster: LocalCluster) -> list[dict[str, Any]]:
    out = []
    for e in cluster.endpoints:
        c = StorageClient(e, cluster.token)
        try:
            out.append(c.action("stats", {})[0])
        finally:
            c.close()
    return out


def build_table(events: pa.Table, files: int, tables: TablesConfig) -> dict[str, Any]:
    """The events as ``files`` appends of consecutive time slices, in shuffled order."""
    events = events.sort_by("ts")
    events = events.cast(
        pa.schema(
            [pa.field("ts", pa.timestamp("us")) if f.name == "ts" else f for f in events.schema]
        )
    )
    catalog = load_catalog("local", tables)
    catalog.create_namespace_if_not_exists("bench")
    table = catalog.create_table("bench.events", schema=events.schema)
    rng = np.random.default_rng(3)
    size = -(-events.num_rows // files)
    began = time.perf_counter()
    for k in rng.permutation(files):
        piece = events.slice(int(k) * size, size)
        table.append(piece.take(pa.array(rng.permutation(piece.num_rows))))
    return {"files": files, "write_s": round(time.perf_counter() - began, 1)}


def run_queries(
    cluster: LocalCluster, queries: list[str], repeat: int, **options: Any
) -> tuple[list[dict[str, Any]], list[list[tuple[object, ...]]]]:
    out, matches = [], []
    for q in queries:
        seconds, last = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                last = pull("dfs", q, cluster.endpoints, cluster.token, **options)
            got = match_pulled(last)
            seconds.append(time.perf_counter() - t0)
        assert last is not None
        out.append(
            {
                "latency_s": statistics.median(seconds),
                "bytes": last.trace.bytes_to_cn + last.trace.bytes_to_sn,
                "matches": got.num_rows,
            }
        )
        matches.append(_rows(got))
    return out, matches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    report: dict[str, Any] = {"events": args.events, "nodes": args.nodes}
    with tempfile.TemporaryDirectory(prefix="dfs-cer-tables-") as tmp:
        root = Path(tmp)
        tables = TablesConfig(
            catalog_uri=f"sqlite:///{root}/catalog.db",
            warehouse=str(root / "wh"),
            assignments_dir=str(root / "assign"),
        )
        env = {
            "DFS_CER__TABLES__CATALOG_URI": tables.catalog_uri,
            "DFS_CER__TABLES__WAREHOUSE": tables.warehouse,
            "DFS_CER__TABLES__ASSIGNMENTS_DIR": tables.assignments_dir,
        }
        print(f"generating {args.events:,} events ...", file=sys.stderr, flush=True)
        events = synthetic_events(args.events)
        report["table"] = build_table(events, args.files, tables)
        del events
        plan = plan_table("iceberg://local/bench.events", tables=tables)
        report["table"]["bytes"] = sum(f.bytes for f in plan.files)
        # the table's name, as the nodes serving it in place (and its shard sets) name the log
        queries = [
            q.replace("FROM synthetic", "FROM events")
            for q in synthetic_queries(args.queries, seed=11)
        ]
        refs = [f"iceberg://local/bench.events?node={i}/{args.nodes}" for i in range(args.nodes)]

        print("in place: starting nodes ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        with LocalCluster(refs, env=env) as cluster:
            ready = time.perf_counter() - t0
            in_place, want = run_queries(cluster, queries, args.repeat)
        report["in_place"] = {"ready_s": round(ready, 1), "copy_bytes": 0, "queries": in_place}

        print("re-sharded: copying the table into shard sets ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        manifests = shard(
            "iceberg://local/bench.events",
            args.nodes,
            str(root / "shards"),
            partitioning="random",
            tables=tables,
        )
        copy_s = time.perf_counter() - t0
        assert sum(m.rows for m in manifests) == args.events
        copied = sum(p.stat().st_size for p in (root / "shards").rglob("*.parquet"))
        t0 = time.perf_counter()
        with LocalCluster(
            [str(root / "shards" / f"node-{i:02d}") for i in range(args.nodes)]
        ) as cluster:
            start_s = time.perf_counter() - t0
            sharded, got = run_queries(cluster, queries, args.repeat)
        assert got == want, "in place and re-sharded disagree"
        report["resharded"] = {
            "ready_s": round(copy_s + start_s, 1),
            "copy_s": round(copy_s, 1),
            "start_s": round(start_s, 1),
            "copy_bytes": copied,
            "queries": sharded,
        }

        print("pruning: cache off ...", file=sys.stderr, flush=True)
        span = (plan.files[0].min_ts, max(int(f.max_ts or 0) for f in plan.files))
        assert span[0] is not None
        tenth = (
            int(span[0]) + (span[1] - int(span[0])) * 4 // 10,
            int(span[0]) + (span[1] - int(span[0])) // 2,
        )
        with LocalCluster(refs, env={**env, "DFS_CER__STORAGE__CACHE_BYTES": "0"}) as cluster:
            pruning = {}
            for label, ranges in (("whole table", None), ("a tenth of the time", [tenth])):
                before = _stats(cluster)
                t0 = time.perf_counter()
                for q in queries:
                    pull("dfs", q, cluster.endpoints, cluster.token, time_ranges=ranges)
                seconds = (time.perf_counter() - t0) / len(queries)
                after = _stats(cluster)
                pruning[label] = {
                    "files_per_query": sum(
                        a["files_read"] - b["files_read"]
                        for a, b in zip(after, before, strict=True)
                    )
                    / len(queries),
                    "bytes_per_query": sum(
                        a["bytes_read"] - b["bytes_read"]
                        for a, b in zip(after, before, strict=True)
                    )
                    // len(queries),
                    "latency_s": round(seconds, 3),
                }
        report["pruning"] = {"table_files": len(plan.files), **pruning}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            f"ready: in place {report['in_place']['ready_s']} s; re-sharded "
            f"{report['resharded']['ready_s']} s (copy {report['resharded']['copy_s']} s, "
            f"{report['resharded']['copy_bytes']:,} bytes)"
        )
        for a, b in zip(report["in_place"]["queries"], report["resharded"]["queries"], strict=True):
            print(
                f"query: in place {a['latency_s']:.3f} s {a['bytes']:,} B; re-sharded "
                f"{b['latency_s']:.3f} s {b['bytes']:,} B; {a['matches']} matches"
            )
        for label, p in pruning.items():
            print(
                f"cache off, {label}: {p['files_per_query']:.1f} files, "
                f"{p['bytes_per_query']:,} bytes read per query, {p['latency_s']} s"
            )
    if args.plot:
        plot(report, args.plot)


def plot(report: dict[str, Any], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    ip, rs = report["in_place"], report["resharded"]
    axes[0].bar(["in place"], [ip["ready_s"]], color="#4c72b0")
    axes[0].bar(["re-sharded"], [rs["start_s"]], color="#4c72b0", label="nodes load")
    axes[0].bar(
        ["re-sharded"],
        [rs["copy_s"]],
        bottom=[rs["start_s"]],
        color="#dd8452",
        label="copy (shard)",
    )
    axes[0].set_ylabel("seconds until nodes answer")
    axes[0].legend(frameon=False, fontsize=8)
    x = np.arange(len(ip["queries"]))
    axes[1].bar(x - 0.2, [q["latency_s"] * 1e3 for q in ip["queries"]], 0.4, label="in place")
    axes[1].bar(x + 0.2, [q["latency_s"] * 1e3 for q in rs["queries"]], 0.4, label="re-sharded")
    axes[1].set_xlabel("query")
    axes[1].set_ylabel("DFS latency (ms)")
    axes[1].legend(frameon=False, fontsize=8, loc="lower right")
    pr = {k: v for k, v in report["pruning"].items() if isinstance(v, dict)}
    axes[2].bar(list(pr), [v["bytes_per_query"] / 1e6 for v in pr.values()], color="#55a868")
    axes[2].set_ylabel("MB read from storage per query")
    axes[2].set_title("cache off", fontsize=9)
    fig.suptitle(f"{report['events']:,} events, {report['nodes']} storage nodes")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
