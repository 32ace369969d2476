"""Differential fuzzing, long profile: every pull strategy (through real storage node processes)
against the local engine over random worlds and queries (``tests/fixtures/fuzz.py``).

Command:  .venv/bin/python bench/fuzz.py [--seeds 0:400] [--queries 6] [--json out.json]
          [--no-spark]   (``make fuzz`` runs the default)
Hardware: the storage nodes and the compute node on one machine, over loopback; one local Spark
          session (local[2]) for the run, started at the first world read through Spark.
Runtime:  about 20-30 s per world on a 2-core machine (a world: ~100 comparisons, and the CSV,
          copies, halo-limit, Spark-split and work-bound checks); Spark's start adds about a
          minute; 400 worlds take two to three hours there.
Output:   comparisons run, agreed refusals, findings (each with its world seed, layout, query,
          expected and actual rows) and the number of cases per dimension: column types of the
          time and value columns and the type column's encoding, column-name case, layout
          (partitioning x nodes) and empty storage nodes, late files and the ``--since-run``
          re-runs, event copies (dedup on/off, across partitions), pattern shapes and query
          features (input filters over copies), strategies, several queries in one scan, and
          match ids compared with the local engine's; and the edges: shard sets written
          separately and served together, schema differences between them (nullability, int32
          vs int64, string vs large_string, time units) and their outcome, times near int64's
          and timestamp[ns]'s ends with gaps of 2**40 to 2**62 and windows as wide as the type,
          zoned times read through the ``dfs_cer`` Spark data source, and CSV worlds at the
          edges of their types (kept exactly, or refused naming the row and then the named
          fix). Exit status 1 when there is a finding. A finding's world is rebuilt by
          ``fuzz.draw_world(seed)``; ``--seeds S:S+1`` re-runs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures import fuzz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:400", help="world seeds as START:STOP")
    parser.add_argument("--queries", type=int, default=6, help="queries per world")
    parser.add_argument("--json", help="write the report as JSON to this file")
    parser.add_argument(
        "--no-spark",
        action="store_true",
        help="leave out the reads through the Spark data source (no JVM started)",
    )
    args = parser.parse_args()
    start, stop = (int(x) for x in args.seeds.split(":"))

    def log(message: str) -> None:
        if (
            message.startswith("seed") and int(message.split()[1].rstrip(":")) % 25 == 0
        ) or message.startswith("FINDING"):
            print(message, flush=True)

    report = fuzz.run(range(start, stop), args.queries, log=log, spark=not args.no_spark)
    print(report.summary())
    for finding in report.findings:
        print("-" * 80)
        print(finding)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "seeds": [start, stop],
                    "queries_per_world": args.queries,
                    "comparisons": report.cases,
                    "agreed_refusals": report.agreed_refusals,
                    "seconds": round(report.seconds, 1),
                    "dimensions": {
                        f"{d}: {v}": n for (d, v), n in sorted(report.dimensions.items())
                    },
                    "findings": report.findings,
                },
                indent=1,
            )
        )
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
