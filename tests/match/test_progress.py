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
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > sum(B.v) + 100)"
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
