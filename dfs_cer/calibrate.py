"""``dfs-cer calibrate``: measure the cost model's per-event constants on this machine.

- ``c_p1``: verifying one event's timestamp against a shrinking window filter (s/event);
- ``c_p2``: probing one event against a window-wise join filter (s/event and equality);
- ``c_b``: inserting one (value, window) pair into a join filter (s/pair);
- ``beta``: matching one event, per engine, on a 5000-event sample of the synthetic workload.

Each filter constant is a table over input sizes (the cost model interpolates it piecewise
linearly): per-event costs fall with batch size as fixed overheads amortize. The network rate R
is not calibrated: the compute node measures it from the first round trip of every query.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from dfs_cer.filters import IntervalSet, KeyKind, ShrinkingWindowFilter, WindowJoinFilter

SIZES = (1_000, 10_000, 100_000, 1_000_000)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _filter_tables(
    sizes: Sequence[int], repeat: int, window: int = 180
) -> dict[str, list[list[float]]]:
    rng = np.random.default_rng(0)
    tables: dict[str, list[list[float]]] = {"c_p1": [], "c_p2": [], "c_b": []}
    for n in sizes:
        span = n * 10
        ts = np.sort(rng.integers(0, span, n))
        centres = rng.integers(0, span, max(1, n // 50))
        tis = IntervalSet.around(centres, -window, window)
        swf = ShrinkingWindowFilter.from_intervals(tis.starts, tis.ends, window)
        swf.contains(ts[:10])  # compile the kernels outside the timing
        tables["c_p1"].append([n, best_time(partial(swf.contains, ts), repeat) / n])
        values = rng.integers(0, n // 4 + 1, n)
        wjf = WindowJoinFilter.with_estimates(n, window, KeyKind.INT)
        wjf.add(values[:10], ts[:10])
        tables["c_b"].append([n, best_time(partial(wjf.add, values, ts), repeat) / n])
        tables["c_p2"].append([n, best_time(partial(wjf.might_contain, values, ts, 0), repeat) / n])
    return tables


def _beta(sample_events: int, repeat: int) -> dict[str, float]:
    """Seconds per event of each engine on the synthetic workload's first query."""
    from dfs_cer.datasets.synthetic import synthetic_events, synthetic_queries
    from dfs_cer.match.cer.engine import run_cer
    from dfs_cer.match.rowpattern.engine import run_row_pattern
    from dfs_cer.query import analyze, parse

    events = synthetic_events(sample_events).sort_by("ts")
    cer = analyze(parse(synthetic_queries(1)[0]), events.schema)
    rows = analyze(parse(synthetic_queries(1, cer=False)[0]), events.schema)
    run_cer(events, cer)
    run_row_pattern(events, rows)
    return {
        "cer": best_time(lambda: run_cer(events, cer), repeat) / sample_events,
        "rowpattern": best_time(lambda: run_row_pattern(events, rows), repeat) / sample_events,
    }


def calibrate(
    sizes: Sequence[int] = SIZES,
    *,
    sample_events: int = 5000,
    repeat: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure and return the calibration document the cost model reads (JSON-serializable)."""
    say = progress or (lambda _: None)
    say(f"join and window filters on {', '.join(f'{n:,}' for n in sizes)} events")
    tables = _filter_tables(sizes, repeat)
    say(f"matching engines on a {sample_events:,}-event sample")
    beta = _beta(sample_events, repeat)
    return {
        "version": 1,
        "tables": tables,
        "beta": beta,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
