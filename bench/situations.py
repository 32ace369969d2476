"""Situations and Allen patterns: the situation engine against the plain SQL:2016
encoding of the same queries (TPStream's straw man 1: MATCH_RECOGNIZE ``X+`` runs per
situation, then a join), and bytes moved from storage nodes with and without DFS.

Command:  .venv/bin/python bench/situations.py [--events 1000000] [--keys 10] [--json]
Hardware: one core for the engines; 3 storage node processes on loopback for the bytes.
Runtime:  about 1-2 minutes for 1M events.
Output:   per query: matches, situation engine seconds, encoding seconds and their ratio (results
          checked equal); bytes to the compute node for ``dfs`` (nodes derive situation
          fragments over time-partitioned shards, the compute node pulls only the rows of the
          matched situations for MEASURES) and ``pull_all`` (every row).
Data:     TPStream's synthetic generator: per key, 1 reading/s, boolean attributes a, b, c true
          for 10-100 s and false for 10-50 s (uniform), a numeric v and payload columns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from dfs_cer.datasets.situational import situation_events
from dfs_cer.io.shard import shard
from dfs_cer.situations import parse_situations, run_situations
from dfs_cer.situations.encoding import encoded_matches
from dfs_cer.strategies.situations import pull_situations
from storage_node.launcher import LocalCluster

QUERIES = {
    "A overlaps B, B overlaps C, A before C": (
        "SELECT * FROM s SITUATIONS (PARTITION BY key ORDER BY ts DEFINE A AS a, B AS b, C AS c "
        "PATTERN A overlaps B AND B overlaps C AND A before C WITHIN INTERVAL '10' MINUTE "
        "MEASURES avg(B.v) AS avg_v)"
    ),
    "A before B overlaps C (disconnected in time)": (
        "SELECT * FROM s SITUATIONS (PARTITION BY key ORDER BY ts DEFINE A AS a AT LEAST "
        "INTERVAL '1' MINUTE, B AS b, C AS c PATTERN A before B AND B overlaps C WITHIN "
        "INTERVAL '5' MINUTE MEASURES max(C.v) AS max_v)"
    ),
    "A during B or A starts B, no measures": (
        "SELECT * FROM s SITUATIONS (PARTITION BY key ORDER BY ts DEFINE A AS a AND NOT c, B AS b "
        "PATTERN A during B; A starts B WITHIN INTERVAL '5' MINUTE)"
    ),
}


def _rows(table: Any) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    events = situation_events(args.events, args.keys)
    results: dict[str, dict[str, Any]] = {}
    for label, sql in QUERIES.items():
        query = parse_situations(sql)
        run_situations(events.slice(0, 10_000), query)  # warm-up
        t0 = time.perf_counter()
        mine = run_situations(events, query)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        theirs = encoded_matches(events, query)
        encoding = time.perf_counter() - t0
        cols = [c for c in theirs.column_names]
        assert _rows(mine.select(cols)) == _rows(theirs), label
        results[label] = {
            "matches": mine.num_rows,
            "engine_s": ours,
            "encoding_s": encoding,
            "speedup": encoding / ours,
        }
    with tempfile.TemporaryDirectory(prefix="dfs-cer-situations-") as tmp:
        root = Path(tmp)
        pq.write_table(events, root / "events.parquet")
        shard(str(root / "events.parquet"), 3, str(root / "nodes"), partitioning="time", name="s")
        with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as cluster:
            for label, sql in QUERIES.items():
                row = results[label]
                for strategy in ("dfs", "pull_all"):
                    t0 = time.perf_counter()
                    got = pull_situations(sql, cluster.endpoints, cluster.token, strategy=strategy)
                    row[f"{strategy}_s"] = time.perf_counter() - t0
                    row[f"{strategy}_bytes"] = got.trace.bytes_to_cn + got.trace.bytes_to_sn
                    assert got.relation.num_rows == row["matches"], (label, strategy)
                row["dfs_over_pull_all_bytes"] = row["dfs_bytes"] / row["pull_all_bytes"]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.events:,} events, {args.keys} keys")
    for label, r in results.items():
        print(
            f"{label}: {r['matches']:,} matches; engine {r['engine_s']:.3f} s vs encoding "
            f"{r['encoding_s']:.2f} s ({r['speedup']:.0f}x); bytes dfs "
            f"{r['dfs_bytes'] / 1e6:.2f} MB vs pull_all {r['pull_all_bytes'] / 1e6:.2f} MB "
            f"({r['dfs_over_pull_all_bytes']:.3f}); seconds dfs {r['dfs_s']:.2f} vs "
            f"pull_all {r['pull_all_s']:.2f}"
        )


if __name__ == "__main__":
    main()
