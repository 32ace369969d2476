"""MATCH_RECOGNIZE shapes of DuckDB's micro-benchmarks, timed for dfs-cer's row-pattern engine
on one core, next to the figures DuckDB's pull request published for DuckDB and Trino.

The shapes (data and queries as that pull request describes them; ours in our own words):

- scan: 2M rows of one partition, ``v = i % 5``, ``PATTERN (A B)`` with ``A AS v = 0``,
  ``B AS v = 1``, one row per match;
- partitions: the same rows in 20,000 partitions of 100 rows (``p = i / 100``);
- quantifier: 500k rows, ``v = i % 17``, ``PATTERN (A+ B+ A+)`` with ``A AS v < 12``,
  ``B AS v >= 12``, all rows per match (greedy quantifiers that back off);
- navigation: 200k rows, ``v = i * 2654435761 % 1000``, ``PATTERN (A B+)`` with
  ``A AS true``, ``B AS v > LAST(A.v)`` (a condition reading another variable's row).

Anchors (the pull request's table: a 16-core M-series laptop, warm data, seconds): DuckDB
0.146 / 0.057 / 0.072 / 0.055, Trino 476 1.48 / 1.21 / 0.29 / 0.44 for scan / partitions /
quantifier / navigation. dfs-cer's target: one core under Trino's figure on 16.

Command:  .venv/bin/python bench/shapes.py [--json out.json]
Hardware: one core of whatever runs it; about half a minute.
Output:   per shape: rows, seconds (best of 3 after a warm-up; the whole engine call: sorting,
          masks, the VM and the relation), matches (rows out), rows/s and the anchors.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa

from dfs_cer import analyze, parse
from dfs_cer.match.rowpattern.engine import run_row_pattern

#: shape -> (rows, query, DuckDB seconds, Trino seconds)
SHAPES: dict[str, tuple[int, str, float, float]] = {
    "scan": (
        2_000_000,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES i AS start_i ONE ROW PER MATCH "
        "PATTERN (A B) DEFINE A AS v = 0, B AS v = 1)",
        0.146,
        1.48,
    ),
    "partitions": (
        2_000_000,
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY i MEASURES i AS start_i "
        "ONE ROW PER MATCH PATTERN (A B) DEFINE A AS v = 0, B AS v = 1)",
        0.057,
        1.21,
    ),
    "quantifier": (
        500_000,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES i AS start_i ALL ROWS PER MATCH "
        "PATTERN (A+ B+ A+) DEFINE A AS v < 12, B AS v >= 12)",
        0.072,
        0.29,
    ),
    "navigation": (
        200_000,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES i AS start_i ONE ROW PER MATCH "
        "PATTERN (A B+) DEFINE A AS true, B AS v > LAST(A.v))",
        0.055,
        0.44,
    ),
}


def table(shape: str, rows: int) -> pa.Table:
    i = np.arange(rows, dtype=np.int64)
    if shape == "quantifier":
        v = i % 17
    elif shape == "navigation":
        v = (i * 2654435761) % 1000
    else:
        v = i % 5
    return pa.table({"p": i // 100, "i": i, "v": v})


def run_shape(shape: str, scale: float = 1.0) -> dict[str, Any]:
    rows, sql, duck, trino = SHAPES[shape]
    rows = max(10, int(rows * scale))
    t = table(shape, rows)
    analysis = analyze(parse(sql), t.schema)
    out = run_row_pattern(t, analysis)  # warm-up (and compile)
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        run_row_pattern(t, analysis)
        best = min(best, time.perf_counter() - began)
    return {
        "shape": shape,
        "rows": rows,
        "seconds": best,
        "rows_out": out.table.num_rows,
        "rows_per_s": rows / best,
        "duckdb_16_cores": duck,
        "trino_16_cores": trino,
    }


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| shape | rows | dfs-cer, 1 core (s) | rows out | rows/s | DuckDB, 16 cores | "
        "Trino, 16 cores |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['shape']} | {r['rows']:,} | {r['seconds']:.3f} | {r['rows_out']:,} | "
            f"{r['rows_per_s'] / 1e6:.1f} M | {r['duckdb_16_cores']} | {r['trino_16_cores']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--json", default=None, help="write the figures to this file")
    ap.add_argument("--scale", type=float, default=1.0, help="rows times this (tests: 0.01)")
    args = ap.parse_args(argv)
    runs = [run_shape(s, args.scale) for s in args.shapes.split(",") if s]
    doc = {
        "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.machine()})",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
    }
    print(markdown(runs))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main()
