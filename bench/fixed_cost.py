"""The fixed protocol cost of one query per storage node: the bytes of the rounds every query
pays whatever its data (reserve, open, release, close) and the bytes of each pull's ticket.

Command:  .venv/bin/python bench/fixed_cost.py [--events 30000] [--nodes 3] [--json]
Hardware: the storage node processes and the compute node on one machine, over loopback.
Runtime:  about 10-20 seconds.
Output:   per strategy, bytes per node per query of the fixed rounds (both ways; open's reply
          counted without its Arrow schema blob, sent to node 0 only) and of the pull tickets
          (compute node to storage node), from the strategies' own traces; every strategy's
          matches are checked equal to pull_all's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.query import parse
from dfs_cer.strategies import Trace, pull
from dfs_cer.strategies.base import Session
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.transport.actions import PULLS
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.messages import encode
from dfs_cer.transport.protocol import Close
from storage_node.launcher import LocalCluster

#: rounds every query pays on every node whatever its data
FIXED = ("reserve", "open", "release", "close")
STRATEGIES = ("pull_all", "push_down", "push_pull", "naive_dfs", "dfs")


def measure(events: int, nodes: int) -> dict[str, Any]:
    table = synthetic_events(events, seed=7)
    sql = synthetic_queries(1, seed=7)[0]
    with tempfile.TemporaryDirectory(prefix="fixed-cost-") as tmp:
        root = Path(tmp)
        pq.write_table(table, root / "e.parquet")
        shard(str(root / "e.parquet"), nodes, str(root / "nodes"), name="synthetic")
        dirs = [str(root / "nodes" / f"node-{i:02d}") for i in range(nodes)]
        # the query's text in open's request (JSON-escaped), inside the open figures
        text = len(encode({"sql": parse(sql).to_sql()})) - len(encode({}))
        out: dict[str, Any] = {"events": events, "nodes": nodes, "sql": text, "strategies": {}}
        with LocalCluster(dirs) as cluster:
            client = StorageClient(cluster.endpoints[0], cluster.token)
            blob = client.action("schema")[1][0]
            client.close()
            # the schema blob's wire bytes (open sends it to node 0 only)
            schema = len(encode({}, [blob])) - len(encode({}))
            # close is not a round of the trace: its request and reply, as framed
            probe = Session([], Trace("probe"))  # a query id as long as the sessions'
            probe.close_connections()
            close = len(encode(Close(probe.query_id).header())) + len(encode({"closed": True}))
            expected = None
            for name in STRATEGIES:
                result = pull(name, sql, cluster.endpoints, cluster.token)
                rows = sorted(map(str, match_pulled(result).to_pylist()))
                expected = rows if expected is None else expected
                assert rows == expected, f"{name} differs from pull_all"
                per: dict[str, float] = {}
                for r in result.trace.rounds:
                    if r.action in FIXED:
                        both = r.bytes_to_sn + r.bytes_to_cn
                        both -= schema if r.action == "open" else 0
                        per[r.action] = per.get(r.action, 0) + both / nodes
                    elif r.action in PULLS:
                        per["tickets"] = per.get("tickets", 0) + r.bytes_to_sn / nodes
                per["close"] = close
                per["fixed"] = sum(v for k, v in per.items() if k in FIXED)
                out["strategies"][name] = {k: round(v) for k, v in per.items()}
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=30_000)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    out = measure(a.events, a.nodes)
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{a.events} events, {a.nodes} nodes: bytes per node per query "
        f"(open includes the query text, {out['sql']} B)"
    )
    for name, per in out["strategies"].items():
        print(f"  {name:10s} " + "  ".join(f"{k} {v}" for k, v in per.items()))


if __name__ == "__main__":
    main()
