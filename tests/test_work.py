"""A query's work (dfs_cer.work): its deadline and cancellation stop it at the next check."""

from __future__ import annotations

import time

import pytest

from dfs_cer.errors import WorkCancelledError
from dfs_cer.work import Work


def test_work_stops_at_its_deadline_and_when_cancelled() -> None:
    work = Work("q1", " on node X", deadline=time.monotonic() + 60)
    work.check()
    call = work.call()
    work.cancel("its compute node closed it")
    with pytest.raises(
        WorkCancelledError, match="query q1 on node X: stopped, its compute node closed it"
    ):
        call.check()
    late = Work("q2", deadline=time.monotonic() - 1)
    with pytest.raises(WorkCancelledError, match="query q2: stopped at its deadline"):
        late.charge(1)
