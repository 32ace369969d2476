"""Storage node benchmark: scan throughput of ``open`` (scan, independent-predicate filter,
per-variable candidate lists) on local disk and S3, and the memory a query holds.

Command:  .venv/bin/python bench/storage.py [--events 10000000] [--nodes 3] [--json] [--no-s3]
Hardware: storage nodes and the driver share the machine (2 cores here): nodes scan in parallel.
Runtime:  about 2-4 minutes for 10M events (generation and sharding included).
Output:   rows scanned per second per storage node and in total, bytes held per query (node
          stats), for local shards and for shards in S3 (moto's server mode on loopback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from dfs_cer import parse
from dfs_cer.config import StorageConfig
from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.replies import CloseReply, HealthReply, OpenReply
from storage_node.launcher import LocalCluster

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def write_events(path: Path, n: int, chunk: int = 2_000_000) -> None:
    writer = None
    for start in range(0, n, chunk):
        table = synthetic_events(min(chunk, n - start), start=start)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.close()


def measure(dirs: list[str], env: dict[str, str], query_json: str, reps: int) -> dict[str, float]:
    with LocalCluster(dirs, env=env) as cluster:
        nodes = [StorageClient(e, cluster.token) for e in cluster.endpoints]
        rows = sum(c.call(HealthReply)[0].rows or 0 for c in nodes)
        best, held = float("inf"), 0
        for r in range(reps):
            qid = f"bench-{r}"
            start = time.perf_counter()
            with ThreadPoolExecutor(len(nodes)) as pool:
                header = {"query_id": qid, "query": query_json, "integer_time_unit": "ms"}
                replies = list(pool.map(lambda c, h=header: c.call(OpenReply, h)[0], nodes))
            best = min(best, time.perf_counter() - start)
            held = sum(r_.held_bytes or 0 for r_ in replies)
            for c in nodes:
                c.call(CloseReply, {"query_id": qid})
        return {
            "rows": rows,
            "seconds": best,
            "rows_per_s": rows / best,
            "held_bytes_per_query": held,
            "candidates": sum(sum(v.count for v in r_.variables.values()) for r_ in replies),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    query_json = parse(synthetic_queries(1)[0]).to_json()
    out: dict[str, object] = {"events": args.events, "nodes": args.nodes}
    with tempfile.TemporaryDirectory(prefix="dfs-cer-bench-") as tmp:
        source = Path(tmp) / "events.parquet"
        write_events(source, args.events)
        shard(str(source), args.nodes, str(Path(tmp) / "local"), name="synthetic")
        dirs = [str(Path(tmp) / "local" / f"node-{i:02d}") for i in range(args.nodes)]
        out["local"] = measure(dirs, {}, query_json, args.reps)
        if not args.no_s3:
            import boto3
            from moto.server import ThreadedMotoServer

            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
            os.environ.update(CREDENTIALS)
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
            shard(
                str(source),
                args.nodes,
                "s3://bench/events",
                config=StorageConfig(s3_endpoint=endpoint),
                name="synthetic",
            )
            env = {**CREDENTIALS, "DFS_CER__STORAGE__S3_ENDPOINT": endpoint}
            out["s3"] = measure(
                [f"s3://bench/events/node-{i:02d}" for i in range(args.nodes)],
                env,
                query_json,
                args.reps,
            )
            server.stop()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{args.events:,} synthetic events on {args.nodes} storage nodes, open = scan + "
        "filter + candidates"
    )
    print(
        "| backend | rows/s (all nodes) | seconds | candidates | bytes held per query "
        "|\n|---|---:|---:|---:|---:|"
    )
    for backend in ("local", "s3"):
        r = out.get(backend)
        if isinstance(r, dict):
            print(
                f"| {backend} | {r['rows_per_s']:,.0f} | {r['seconds']:.2f} | "
                f"{r['candidates']:,} | {r['held_bytes_per_query']:,} |"
            )


if __name__ == "__main__":
    main()
