"""Matching engine benchmark: dfs-cer's CER engine and row-pattern engine on the paper's
synthetic data, next to a hand-written DuckDB self-join of the same query.

Command:  .venv/bin/python bench/engines.py [--events 1000000] [--json]
Hardware: one core of whatever runs it (numba kernels are single-threaded; DuckDB is pinned to
          one thread for the comparison).
Runtime:  about 1-2 minutes for 1M events.
Output:   events (rows) per second for each engine and query, with the results of the CER engine
          and of DuckDB checked equal. ``--json`` prints cer_events_per_s, sql_rows_per_s,
          sql_q1_rows_per_s and duckdb_selfjoin_rows_per_s (peers measured in their own virtual
          environments are added by bench/peers/ when available).

Targets: CER engine >= 6 M events/s (median) on the default 4-variable skip-till-any-match
workload (3-minute window) and >= 3 M events/s under every selection strategy (skip-till-next-
match on the CER engine, strict contiguity on the row-pattern engine, which evaluates it); SQL
engine >= 3 M rows/s on bench/rowpattern_features.py's cases (see there) and >= 1 M rows/s on
PATTERN (A B+ C) with PREV conditions and on Q1-style patterns; no slower than the DuckDB
self-join of the same 3-variable query.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from dfs_cer import analyze, match_recognize, parse
from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.match.rowpattern.engine import run_row_pattern

V_SHAPE = """SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts
  MEASURES FIRST(A.ts) AS s, LAST(C.ts) AS e ONE ROW PER MATCH
  PATTERN (A B+ C+) DEFINE B AS B.a1 < PREV(B.a1), C AS C.a1 > PREV(C.a1))"""

THREE = (
    "SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS "
    "b_ts, C.ts AS c_ts ALL MATCHES PATTERN (A B C) WITHIN INTERVAL '3' MINUTE DEFINE A AS "
    "A.type = 'T_01' AND A.a1 <= 200, B AS B.type = 'T_02' AND B.a1 <= 200, C AS C.type = "
    "'T_03' AND C.a1 <= 200 AND C.a2 = B.a2)"
)

THREE_DUCKDB = """SELECT a.ts AS a_ts, b.ts AS b_ts, c.ts AS c_ts
FROM synthetic a JOIN synthetic b ON b.ts > a.ts AND b.ts <= a.ts + INTERVAL 3 MINUTE
JOIN synthetic c ON c.ts > b.ts AND c.ts <= a.ts + INTERVAL 3 MINUTE AND c.a2 = b.a2
WHERE a.type = 'T_01' AND a.a1 <= 200 AND b.type = 'T_02' AND b.a1 <= 200
  AND c.type = 'T_03' AND c.a1 <= 200"""


def timed(fn: Callable[[], object], reps: int) -> tuple[float, object]:
    fn()  # warm up: numba compiles or loads its cache
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument(
        "--queries", type=int, default=20, help="default-workload queries for the CER engine"
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run pycer, bobocep, PyFlink and pandas-match-recognize (bench/peers/run.py)",
    )
    args = parser.parse_args()
    events = synthetic_events(args.events)
    n = events.num_rows
    figures: dict[str, float] = {"events": n}

    cer_rates = []
    for sql in synthetic_queries(args.queries):
        analysis = analyze(parse(sql), events.schema)
        dt, _ = timed(functools.partial(run_cer, events, analysis), args.reps)
        cer_rates.append(n / dt)
    figures["cer_events_per_s"] = statistics.median(cer_rates)
    figures["cer_events_per_s_min"] = min(cer_rates)
    for selection in ("skip_till_next_match", "strict_contiguity"):
        rates = []
        for sql in synthetic_queries(args.queries):
            run = functools.partial(match_recognize, events, sql, selection=selection)
            dt, _ = timed(run, args.reps)
            rates.append(n / dt)
        figures[f"{selection}_events_per_s"] = statistics.median(rates)
        figures[f"{selection}_events_per_s_min"] = min(rates)

    analysis = analyze(parse(V_SHAPE), events.schema)
    dt, out = timed(lambda: run_row_pattern(events, analysis), args.reps)
    figures["sql_rows_per_s"] = n / dt
    figures["sql_v_shape_matches"] = out.matches  # type: ignore[attr-defined]

    q1_rates = []
    for sql in synthetic_queries(5, variables=3, cer=False):
        analysis = analyze(parse(sql), events.schema)
        dt, _ = timed(functools.partial(run_row_pattern, events, analysis), 1)
        q1_rates.append(n / dt)
    figures["sql_q1_rows_per_s"] = statistics.median(q1_rates)

    analysis = analyze(parse(THREE), events.schema)
    dt, cer_out = timed(lambda: run_cer(events, analysis), args.reps)
    figures["cer_three_rows_per_s"] = n / dt
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("synthetic", events)
    dt_duck, duck = timed(lambda: con.sql(THREE_DUCKDB).to_arrow_table(), args.reps)
    figures["duckdb_selfjoin_rows_per_s"] = n / dt_duck
    figures["duckdb_selfjoin_seconds"] = dt_duck
    figures["cer_three_seconds"] = dt
    ours = sorted(tuple(r.values()) for r in cer_out.table.to_pylist())  # type: ignore[attr-defined]
    theirs = sorted(tuple(r.values()) for r in duck.to_pylist())  # type: ignore[attr-defined]
    figures["three_matches"] = len(ours)
    figures["three_results_equal"] = float(ours == theirs)
    peers: list[str] = []
    if args.peers:
        import subprocess

        script = Path(__file__).resolve().parent / "peers" / "run.py"
        done = subprocess.run(
            [sys.executable, str(script), "--json"], capture_output=True, text=True, check=True
        )
        peer_figures = json.loads(done.stdout)
        figures.update(peer_figures)
        peers = [k.removesuffix("_events") for k in peer_figures if k.endswith("_events")]
    if args.json:
        print(json.dumps(figures, indent=2, default=float))
        return
    print(f"{n:,} synthetic events, one core")
    print("| engine / query | rate | target |\n|---|---:|---:|")
    print(
        f"| CER engine, default 4-variable STAM workload ({args.queries} queries, median; "
        f"min) | {figures['cer_events_per_s'] / 1e6:.2f} M events/s "
        f"({figures['cer_events_per_s_min'] / 1e6:.2f}) | >= 6 |"
    )
    for selection in ("skip_till_next_match", "strict_contiguity"):
        print(
            f"| same workload, {selection.replace('_', '-')} (median; min) | "
            f"{figures[f'{selection}_events_per_s'] / 1e6:.2f} M events/s "
            f"({figures[f'{selection}_events_per_s_min'] / 1e6:.2f}) | >= 3 |"
        )
    print(
        "| row-pattern engine, PATTERN (A B+ C+) with PREV | "
        f"{figures['sql_rows_per_s'] / 1e6:.2f} M rows/s | >= 1 |"
    )
    print(
        f"| row-pattern engine, Q1-style (A N*? B N*? C, 3 min, SKIP TO NEXT ROW; median of 5) | "
        f"{figures['sql_q1_rows_per_s'] / 1e6:.2f} M rows/s | >= 1 |"
    )
    print(f"| CER engine, 3-variable query | {cer_out.matches} matches in {dt:.3f} s |  |")  # type: ignore[attr-defined]
    print(
        f"| DuckDB self-join, same query (1 thread) | {len(theirs)} matches in {dt_duck:.3f} s | |"
    )
    print(f"results equal: {ours == theirs}")
    if peers:
        print(
            "\n| peer | events | matches | peer events/s | "
            "dfs-cer events/s (same events) | same matches |"
        )
        print("|---|---:|---:|---:|---:|---|")
        for p in peers:
            print(
                f"| {p} | {figures[p + '_events']:,} | {figures[p + '_matches']} | "
                f"{figures[p + '_rows_per_s']:,.0f} | "
                f"{figures[p + '_dfs_cer_rows_per_s']:,.0f} | "
                f"{figures[p + '_results_equal']} |"
            )


if __name__ == "__main__":
    main()
