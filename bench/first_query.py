"""A question from the shell: `dfs-cer query` in a fresh process against storage nodes started
with `dfs-cer storage-node up`, against DuckDB answering the same question over the same parquet
in a fresh Python process, and `dfs-cer --help`.

Command:  .venv/bin/python bench/first_query.py [--events 1000000] [--runs 5] [--dir DIR]
Hardware: whatever runs it (figures in bench/RESULTS.md name the machine).
Runtime:  about a minute (generating and sharding the log once, under --dir).
Output:   median wall seconds per command, the phases `dfs-cer query` reports (start-up,
          planning, rounds, pull, matching, other; kernels loaded), and whether DuckDB and every
          strategy found the same matches. --json writes bench/results/first-query.json.

The question: a robbery then a motor vehicle theft on the same beat within 30 minutes, in a
CRIMES-shaped log. DuckDB has no MATCH_RECOGNIZE: its query says the same with window
functions (each robbery's next theft on its beat; of the robberies waiting for one theft, the
first within 30 minutes matches, AFTER MATCH SKIP PAST LAST ROW consuming the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).parent / "dfs-cer"

QUERY = """SELECT * FROM crimes MATCH_RECOGNIZE (
  PARTITION BY beat ORDER BY date
  MEASURES R.id AS robbery, M.id AS theft
  ONE ROW PER MATCH
  PATTERN (R X*? M) WITHIN INTERVAL '30' MINUTE
  DEFINE R AS R.primary_type = 'ROBBERY',
         M AS M.primary_type = 'MOTOR VEHICLE THEFT')
"""

DUCKDB = """
import json, sys, duckdb
rows = duckdb.sql('''
WITH e AS (
  SELECT beat, date, id, primary_type,
         row_number() OVER (PARTITION BY beat ORDER BY date, id) AS rn
  FROM read_parquet('crimes.parquet')
  WHERE primary_type IN ('ROBBERY', 'MOTOR VEHICLE THEFT')),
n AS (
  SELECT *, first_value(CASE WHEN primary_type = 'MOTOR VEHICLE THEFT' THEN rn END IGNORE NULLS)
         OVER (PARTITION BY beat ORDER BY rn ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
         AS m_rn
  FROM e),
j AS (
  SELECT r.beat, r.id AS robbery, m.id AS theft, r.rn AS r_rn, m.rn AS m_rn
  FROM n r JOIN e m ON m.beat = r.beat AND m.rn = r.m_rn
  WHERE r.primary_type = 'ROBBERY' AND m.date <= r.date + INTERVAL 30 MINUTE)
SELECT beat, arg_min(robbery, r_rn) AS robbery, any_value(theft) AS theft
FROM j GROUP BY beat, m_rn
''').fetchall()
print(json.dumps([[str(b), int(r), int(t)] for b, r, t in rows]))
"""

STRATEGIES = ("dfs", "push_down", "pull_all")


def timed(args: list[str], cwd: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    began = time.perf_counter()
    run = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - began
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed: {run.stderr.strip()}")
    return wall, run.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default="data/first-query")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "q.sql").write_text(QUERY)
    if not (work / "crimes.parquet").exists():
        print(f"generating {args.events:,} CRIMES-shaped events ...", flush=True)
        generate = ["generate", "crimes", "--events", str(args.events), "--out", "crimes.parquet"]
        timed([str(EXE), *generate], work)
        shard = ["shard", "--input", "crimes.parquet", "--nodes", "3", "--to", "shards"]
        timed([str(EXE), *shard, "--time-column", "date"], work)
    timed([str(EXE), "storage-node", "up", "--shards", "shards"], work)
    try:
        results: dict[str, dict[str, object]] = {}
        walls, _ = [], None
        for _ in range(args.runs):
            walls.append(timed([str(EXE), "--help"], work)[0])
        results["dfs-cer --help"] = {"wall": statistics.median(walls)}
        matches: dict[str, list[list[object]]] = {}
        for strategy in STRATEGIES:
            query = [str(EXE), "query", "--strategy", strategy, "--file", "q.sql"]
            timed([*query, "--format", "json"], work)  # the nodes' first query of its kind
            walls, phases = [], []
            for _ in range(args.runs):
                wall, out = timed([*query, "--format", "json"], work)
                doc = json.loads(out)
                walls.append(wall)
                phases.append(doc["trace"]["phases"])
                matches[strategy] = sorted(
                    [str(m["beat"]), int(m["robbery"]), int(m["theft"])] for m in doc["matches"]
                )
            mid = sorted(range(len(walls)), key=walls.__getitem__)[len(walls) // 2]
            results[f"dfs-cer query --strategy {strategy}"] = {
                "wall": walls[mid],
                "matches": len(matches[strategy]),
                "phases": {k: round(v, 4) for k, v in phases[mid].items()},
            }
        walls = []
        for _ in range(args.runs):
            wall, out = timed([sys.executable, "-c", DUCKDB], work)
            walls.append(wall)
            matches["duckdb"] = sorted(json.loads(out))
        results["duckdb (fresh python)"] = {
            "wall": statistics.median(walls),
            "matches": len(matches["duckdb"]),
        }
    finally:
        timed([str(EXE), "storage-node", "down"], work)
    same = all(m == matches["duckdb"] for m in matches.values())
    duck = float(results["duckdb (fresh python)"]["wall"])  # type: ignore[arg-type]
    print(f"{args.events:,} events, 3 nodes, median of {args.runs}; same matches: {same}")
    for name, r in results.items():
        wall = float(r["wall"])  # type: ignore[arg-type]
        line = f"  {name:<36} {wall:6.3f} s  ({wall / duck:4.2f}x DuckDB)"
        if "phases" in r:
            p = r["phases"]
            assert isinstance(p, dict)
            line += "  " + ", ".join(
                f"{k} {p[k] * 1e3:.0f}"
                for k in ("start-up", "planning", "rounds", "pull", "matching", "other", "kernels")
                if k in p
            )
        print(line)
    if args.json:
        target = ROOT / "bench" / "results" / "first-query.json"
        target.write_text(
            json.dumps(
                {
                    "events": args.events,
                    "runs": args.runs,
                    "same_matches": same,
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {target}")
    if not same:
        raise SystemExit("the matches differ")


if __name__ == "__main__":
    main()
