"""The ``dfs_cer`` Spark data source reading a query of independent matches in time slices: the
same query read as 1, 2, 4 and 8 executor tasks, from parquet and from storage nodes.

Command:  .venv/bin/python bench/source.py [--events 2000000] [--json out.json]
Hardware: whatever runs it (Spark ``local[N]`` with N the machine's cores); a few minutes.
Output:   per input and partitions: seconds (best of 3 after a warm-up; ``count()`` of the
          DataFrame: planning, every task's read or pull and its matching), the matches (the same
          for every row of one input), and the speed-up over one task.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUERY = """SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts
  MEASURES A.ts AS a_ts, B.ts AS b_ts, C.ts AS c_ts ALL MATCHES
  PATTERN (A B C) WITHIN INTERVAL '2' MINUTE
  DEFINE A AS A.type = 'T_02', B AS B.type = 'T_15' AND B.a2 = A.a2,
         C AS C.type = 'T_09' AND C.a1 < 500)"""


def _time(frame: Any, runs: int = 3) -> tuple[float, int]:
    count = frame.count()  # warm-up
    best = float("inf")
    for _ in range(runs):
        began = time.perf_counter()
        count = frame.count()
        best = min(best, time.perf_counter() - began)
    return best, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--partitions", default="1,2,4,8")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import pyarrow.parquet as pq

    from dfs_cer.datasets import synthetic_events
    from dfs_cer.io.shard import shard
    from dfs_cer.spark import local_session
    from storage_node.launcher import LocalCluster

    cores = os.cpu_count() or 1
    spark = local_session(cores)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "events.parquet"
        pq.write_table(synthetic_events(args.events, seed=7), data)
        shard(str(data), 3, str(Path(tmp) / "nodes"))
        with LocalCluster([str(Path(tmp) / "nodes" / f"node-{i:02d}") for i in range(3)]) as cl:
            for source in ("parquet", "nodes"):
                base = None
                for n in [int(x) for x in args.partitions.split(",")]:
                    reader = spark.read.format("dfs_cer").option("query", QUERY)
                    reader = reader.option("partitions", str(n))
                    if source == "parquet":
                        frame = reader.load(str(data))
                    else:
                        frame = (
                            reader.option("endpoints", ",".join(cl.endpoints))
                            .option("token", cl.token)
                            .load()
                        )
                    seconds, matches = _time(frame)
                    base = base or seconds
                    row = {
                        "input": source,
                        "partitions": n,
                        "tasks": frame.rdd.getNumPartitions(),
                        "seconds": round(seconds, 3),
                        "matches": matches,
                        "speedup": round(base / seconds, 2),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    spark.stop()
    doc = {
        "events": args.events,
        "cores": cores,
        "machine": platform.platform(),
        "date": dt.date.today().isoformat(),
        "rows": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
