"""Compile the engines' kernels into numba's on-disk cache before the first query needs them.

``make install`` runs it (``dfs-cer warm`` does too): a first query in a fresh install otherwise
waits for the row-pattern VM, the CER engine's joins and the filters to compile (about a minute
on a small machine, once), with nothing on screen. Each step runs a tiny query through the same
entry points real queries use, so the compiled signatures are the ones they load."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

#: the queries compiled: the row-pattern VM (conditions across variables, a running aggregate,
#: WITHIN, SKIP TO), the CER engine (ALL MATCHES) and a PREV-only pattern
QUERIES: tuple[tuple[str, str], ...] = (
    (
        "row-pattern matcher",
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > LAST(B.v) + sum(A.v))",
    ),
    (
        "row-pattern matcher with WITHIN",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS s "
        "AFTER MATCH SKIP TO LAST B PATTERN (A B+ C) WITHIN 10 SECONDS "
        "DEFINE B AS B.v < PREV(B.v), C AS C.v > FIRST(A.v))",
    ),
    (
        "CER engine",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, C.ts AS c "
        "ALL MATCHES PATTERN (A N*? B+ N*? C) WITHIN 30 SECONDS "
        "DEFINE A AS v = 1, B AS v = 2, C AS v = 3)",
    ),
)


def _table() -> pa.Table:
    i = np.arange(64, dtype=np.int64)
    return pa.table({"k": i % 2, "ts": pa.array(i * 1_000_000, pa.timestamp("us")), "v": i % 4})


def warm(progress: Callable[[str], None] | None = None) -> list[tuple[str, float]]:
    """Run every query of :data:`QUERIES` once; returns (step, seconds) per step."""
    from dfs_cer.local import match_recognize

    table = _table()
    took = []
    for name, sql in QUERIES:
        if progress:
            progress(f"compiling the {name}")
        began = time.perf_counter()
        match_recognize(table, sql)
        took.append((name, time.perf_counter() - began))
    if progress:
        progress("compiling the filters")
    began = time.perf_counter()
    _filters()
    took.append(("filters", time.perf_counter() - began))
    return took


def _filters() -> None:
    from dfs_cer.filters import IntervalSet, ShrinkingWindowFilter

    ts = np.arange(0, 4000, 40, dtype=np.int64)
    swf = ShrinkingWindowFilter.from_intervals(ts[:10], ts[:10] + 100, 100)
    swf.contains(ts)
    IntervalSet.around(ts, 0, 100).contains(ts)


if __name__ == "__main__":
    for step, seconds in warm(lambda text: print(f"{text} ...", flush=True)):
        print(f"  {step}: {seconds:.1f} s")
