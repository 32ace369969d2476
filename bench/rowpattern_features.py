"""Row-pattern engine: what SQL:2016 features cost.

Command:  .venv/bin/python bench/rowpattern_features.py [--rows 1000000] [--json]
Hardware: one core (numba kernels are single-threaded).
Runtime:  under a minute for 1M rows.
Output:   rows per second and the matcher's peak working memory for
          - a baseline with row-local conditions only (masks, no per-thread programs),
          - the same pattern with a cross-variable condition, a running aggregate,
            PREV(CLASSIFIER()), an expression aggregate with FILTER, count_if, functions and
            COALESCE across variables in DEFINE (per-thread programs; aggregates walk the path),
          - MEASURES with expression aggregates, FILTER, DISTINCT, array_agg and min_by,
          - pathological patterns on 10,000 rows of one label, which stay polynomial.
Every figure is the best of three runs after a warm-up run (JIT compilation excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa

from dfs_cer import analyze, parse
from dfs_cer.calibrate import best_time as best_of
from dfs_cer.match.rowpattern.engine import run_row_pattern

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES {measures} ONE ROW PER MATCH
  PATTERN (A B+ C) SUBSET U = (A, B)
  DEFINE A AS A.x > 80, B AS B.x < PREV(B.x) {extra}, C AS C.x > PREV(C.x))"""
MEASURES = "FIRST(A.ts) AS s, count(B.*) AS nb"

VARIANTS = {
    "row-local conditions only": "",
    "B.x > A.x / 4 (cross-variable)": "AND B.x > A.x / 4",
    "sum(B.x) < 60 (running aggregate)": "AND sum(B.x) < 60",
    "avg(U.x) > 50 over SUBSET U": "AND avg(U.x) > 50",
    "PREV(CLASSIFIER()) IN ('A', 'B')": "AND PREV(CLASSIFIER()) IN ('A', 'B')",
    "sum(B.x * 2 + 1) FILTER (...) < 200": "AND sum(B.x * 2 + 1) FILTER (WHERE B.x > 10) < 200",
    "count_if(B.x > 50) <= 2": "AND count_if(B.x > 50) <= 2",
    "length(CAST(B.x AS VARCHAR)) >= length(A)": "AND length(CAST(B.x AS VARCHAR)) >= "
    "length(CAST(A.x AS VARCHAR))",
    "coalesce(PREV(B.x), 0) > FIRST(abs(A.x - 90))": "AND coalesce(PREV(B.x), 0) > "
    "FIRST(abs(A.x - 90))",
}
#: MEASURES over the row-local query: expression aggregates, FILTER, DISTINCT, lists
MEASURE_VARIANTS = {
    "MEASURES sum(B.x * 2 + 1) FILTER (WHERE ...)": "sum(B.x * 2 + 1) FILTER (WHERE B.x > 10) AS s",
    "MEASURES sum(CASE WHEN CLASSIFIER() ...)": "sum(CASE WHEN CLASSIFIER() = 'B' THEN x END) AS s",
    "MEASURES count(DISTINCT x), stddev(x)": "count(DISTINCT x) AS d, stddev(x) AS sd",
    "MEASURES array_agg(CLASSIFIER()), min_by": "array_agg(CLASSIFIER()) AS "
    "labels, min_by(ts, x) AS low",
}

PATHOLOGICAL = ["(A | A A)* B", "(A+)+ B", "(A*)* B", "(A+)+ $"]


def _best(fn, repeat: int = 3) -> float:
    fn()  # warm-up: JIT compilation
    return best_of(fn, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.rows
    table = pa.table(
        {"k": rng.integers(0, 100, n), "ts": np.arange(n), "x": rng.integers(0, 100, n)}
    )
    results: dict[str, dict[str, float]] = {}
    cases = [
        (label, QUERY.format(measures=MEASURES, extra=extra)) for label, extra in VARIANTS.items()
    ]
    cases += [
        (label, QUERY.format(measures=measures, extra=""))
        for label, measures in MEASURE_VARIANTS.items()
    ]
    for label, sql in cases:
        analysis = analyze(parse(sql), table.schema)
        out = run_row_pattern(table, analysis)
        seconds = _best(lambda a=analysis: run_row_pattern(table, a))
        results[label] = {
            "rows_per_s": n / seconds,
            "matches": out.matches,
            "work_bytes": out.work_bytes,
        }
    m = 10_000
    ones = pa.table({"ts": np.arange(m), "v": np.ones(m, np.int64)})
    for pattern in PATHOLOGICAL:
        define = "A AS A.v = 1, B AS B.v = 2" if "B" in pattern else "A AS A.v = 1"
        sql = (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS c ONE ROW "
            f"PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE {define})"
        )
        analysis = analyze(parse(sql), ones.schema)
        out = run_row_pattern(ones, analysis)
        seconds = _best(lambda a=analysis: run_row_pattern(ones, a), repeat=1)
        results[f"{pattern} on {m:,} A rows"] = {
            "seconds": seconds,
            "matches": out.matches,
            "work_bytes": out.work_bytes,
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'case':<48}{'rows/s or s':>16}{'matches':>10}{'work memory':>14}")
    for label, r in results.items():
        speed = f"{r['rows_per_s'] / 1e6:.2f} M/s" if "rows_per_s" in r else f"{r['seconds']:.3f} s"
        print(f"{label:<48}{speed:>16}{int(r['matches']):>10,}{int(r['work_bytes']):>13,}B")


if __name__ == "__main__":
    main()
