"""Incremental re-runs (``--since-run``): the rows and match starts new files affect."""

from __future__ import annotations

import numpy as np

from dfs_cer.plan.changelog import affected, in_ranges

LEAST, MOST = -(2**63), 2**63 - 1


def test_ranges_around_new_files_stay_in_int64() -> None:
    """New files near int64's ends under a window of 2**62: the ranges a window or two around
    them reached past int64, and a storage node's open failed converting them."""
    files: list[dict[str, object]] = [
        {"min_ts": LEAST + 7, "max_ts": LEAST + 9},
        {"min_ts": MOST - 3, "max_ts": MOST},
    ]
    read, starts = affected(files, 2**62)
    assert read == [(LEAST, MOST)]  # two windows either side: every time, merged
    assert starts == [(LEAST, LEAST + 9 + 2**62), (MOST - 3 - 2**62, MOST)]
    times = np.array([LEAST, 0, MOST], np.int64)
    assert in_ranges(times, read).tolist() == [True, True, True]
    assert in_ranges(times, starts).tolist() == [True, False, True]
