"""A long matcher run reports where it is to a listener, from the compiled loop's own counters."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dfs_cer import match_recognize
from dfs_cer.config import Config, MatcherConfig
from dfs_cer.errors import MatchBudgetError
from dfs_cer.match import progress
from dfs_cer.match.progress import MatchProgress, listening


def test_a_long_run_reports_partitions_rows_and_steps_then_that_it_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "FIRST_REPORT", 0.05)
    monkeypatch.setattr(progress, "EVERY", 0.05)
    n = 1500
    i = np.arange(n, dtype=np.int64)
    table = pa.table({"k": i // 500, "ts": i, "v": i % 7})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > LAST(B.v, 1) + 100)"
    )
    seen: list[MatchProgress] = []
    with listening(seen.append), pytest.raises(MatchBudgetError):
        match_recognize(table, sql, config=Config(matcher=MatcherConfig(max_steps=10**8)))
    assert len(seen) >= 2 and seen[-1].finished, seen
    running = seen[:-1]
    assert all(p.partitions == 3 and p.rows == n and not p.finished for p in running)
    steps = [p.steps for p in running]
    assert steps == sorted(steps) and "thread steps" in running[-1].line()
    assert running[-1].rows_done == 500 * running[-1].partitions_done


def test_a_run_waiting_for_the_compiler_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first run after an install compiles the matcher for a minute or two: the report says
    that, not "0 rows, 0 thread steps"."""
    import threading

    monkeypatch.setattr(progress, "FIRST_REPORT", 0.02)
    monkeypatch.setattr(progress, "EVERY", 0.02)
    stop = np.zeros(8, np.int64)
    ready = threading.Event()
    seen: list[MatchProgress] = []
    with (
        listening(seen.append),
        progress.reporting(stop, np.array([0, 10]), 0, 1, 2, ready.is_set),
    ):
        while not any(p.compiling for p in seen):
            threading.Event().wait(0.01)
        ready.set()
        count = len(seen)
        while len(seen) < count + 2:
            threading.Event().wait(0.01)
    first = next(p for p in seen if p.compiling)
    assert first.line() == (
        "matching: compiling the matcher (once after an install, a minute or two; dfs-cer warm "
        "does it ahead)"
    )
    assert not seen[-2].compiling and "thread steps" in seen[-2].line()
