"""Pattern families that blow up MATCH_RECOGNIZE engines on long partitions, timed on one core.

Every family runs over one partition (all rows of one key, ``v = i % 7``, no WITHIN) at each
size: where the row-pattern VM's thread pruning applies (threads that agree on what later
conditions read, running aggregates included, are one; of threads ordered by a running sum,
min, max or count that conditions read monotonically the better one is kept; states a failed
attempt reached stop later attempts) the work grows about linearly; where it cannot (a condition
reading a row a logical offset away keeps every split of the rows apart) the run ends with the
budget's error (``matcher.max_steps`` or ``matcher.max_seconds``), and the table says how long
that took.

The families: the classic shapes (``cubic`` ... ``reluctant``); running aggregates (``sum``,
``agg_max``, ``agg_sum``, ``agg_sum_match``); navigation (``nav_prev``, ``nav_next``,
``nav_offset``).

Command:  .venv/bin/python bench/pathological.py [--rows 1000,5000,100000,1000000]
              [--max-steps 200000000] [--max-seconds 10] [--families cubic,...] [--json out.json]
Hardware: one core of whatever runs it; the default sizes take a few minutes.
Output:   a markdown table (family, rows, seconds, matches or the budget error) and, with
          ``--json``, the figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer import match_recognize
from dfs_cer.config import Config, MatcherConfig
from dfs_cer.errors import MatchBudgetError

HEAD = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
#: family -> (pattern and DEFINE, what makes it hard)
FAMILIES: dict[str, tuple[str, str]] = {
    "cubic": (
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > LAST(B.v) + 100)",
        "every start tries every split into A's and B's (Trino #18036's shape)",
    ),
    "first": (
        "PATTERN (A+ B+) DEFINE B AS B.v > FIRST(A.v) + 100)",
        "B reads the start row: no two starts share a state",
    ),
    "alt_star": (
        "PATTERN ((A | B)* C) DEFINE A AS v < 3, B AS v >= 3, C AS v > 100)",
        "an alternation under Kleene star, C never holds",
    ),
    "optional_plus": (
        "PATTERN ((A B?)+ C) DEFINE A AS v < 7, B AS v >= 0, C AS v > 100)",
        "an optional inside Kleene plus, C never holds",
    ),
    "reluctant": (
        "PATTERN (A+? B+ C) DEFINE B AS B.v >= LAST(A.v) - 7, C AS C.v > LAST(B.v) + 100)",
        "a reluctant chain with conditions across variables",
    ),
    "sum": (
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > sum(B.v) + 100)",
        "C reads a running sum of B: a smaller one never hurts, so the preferred split (the "
        "shortest B) leaves the others nothing",
    ),
    "agg_max": (
        "PATTERN ((A | B)+ C) DEFINE C AS C.v > max(A.v) + 100)",
        "every labelling of the rows is a thread; C reads the max of the A rows",
    ),
    "agg_sum": (
        "PATTERN (A B+ C) DEFINE C AS sum(B.latitude) > 1000000000)",
        "C reads a running sum that never gets there: each start runs to the end",
    ),
    "agg_sum_match": (
        "PATTERN (A B+ C) DEFINE C AS sum(B.latitude) > 1000)",
        "one match over the whole partition; each row's C reads the sum so far",
    ),
    "nav_prev": (
        "PATTERN (A B+ C) DEFINE B AS B.v > PREV(B.v) - 7, C AS C.v > PREV(LAST(B.v), 1) + 100)",
        "C reads the row before B's last; each start runs to the end",
    ),
    "nav_next": (
        "PATTERN (A+ B+ C) DEFINE A AS A.v <= NEXT(A.v) + 7, C AS C.v > NEXT(FIRST(B.v), 2) + 100)",
        "every split of the rows; C reads two rows past B's first",
    ),
    "nav_offset": (
        "PATTERN (A+ B+ C) DEFINE C AS v > LAST(B.v, 1) + 100)",
        "C reads the row before B's last by a logical offset: every split is kept apart (no "
        "pruning: a budget ends it)",
    ),
}


def table(rows: int) -> pa.Table:
    i = np.arange(rows, dtype=np.int64)
    # a latitude-like double (41.6 .. 42.0), for the sums
    latitude = 41.6 + ((i * 7919) % 401) / 1000.0
    return pa.table({"k": np.zeros(rows, np.int64), "ts": i, "v": i % 7, "latitude": latitude})


def run_one(family: str, rows: int, max_steps: int, max_seconds: float) -> dict[str, Any]:
    sql = HEAD + FAMILIES[family][0]
    config = Config(matcher=MatcherConfig(max_steps=max_steps, max_seconds=max_seconds))
    t = table(rows)
    began = time.perf_counter()
    try:
        out = match_recognize(t, sql, config=config)
        outcome, matches = "ok", out.num_rows
    except MatchBudgetError as e:
        outcome, matches = ("time" if "max_seconds" in str(e) else "budget"), None
    return {
        "family": family,
        "rows": rows,
        "seconds": time.perf_counter() - began,
        "outcome": outcome,
        "matches": matches,
    }


def markdown(runs: list[dict[str, Any]], max_steps: int, max_seconds: float) -> str:
    lines = [
        f"| family | what makes it hard | rows | seconds | result (budget {max_steps:,} steps, "
        f"{max_seconds:g} s a partition) |",
        "|---|---|---:|---:|---|",
    ]
    for r in runs:
        result = {
            "ok": f"{r['matches']:,} matches" if r["matches"] is not None else "",
            "budget": "budget error (steps)",
            "time": "budget error (seconds)",
        }[r["outcome"]]
        lines.append(
            f"| `{FAMILIES[r['family']][0].split(' DEFINE')[0]}` ({r['family']}) | "
            f"{FAMILIES[r['family']][1]} | {r['rows']:,} | {r['seconds']:.3f} | {result} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000,5000,100000,1000000")
    ap.add_argument("--max-steps", type=int, default=200_000_000)
    ap.add_argument("--max-seconds", type=float, default=10.0)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SystemExit(f"error: unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    sizes = [int(x) for x in args.rows.split(",") if x]
    run_one("cubic", 20, args.max_steps, args.max_seconds)  # compiles the engine (untimed)
    runs = []
    for family in families:
        for rows in sizes:
            got = run_one(family, rows, args.max_steps, args.max_seconds)
            runs.append(got)
            print(
                f"{family:14s} {rows:>9,} rows {got['seconds']:8.3f} s  {got['outcome']}",
                file=sys.stderr,
                flush=True,
            )
    figures = {
        "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.machine()})",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "max_steps": args.max_steps,
        "max_seconds": args.max_seconds,
        "runs": runs,
    }
    print(markdown(runs, args.max_steps, args.max_seconds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return figures


if __name__ == "__main__":
    main()
