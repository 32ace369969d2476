"""Independent matching units and their grouping into balanced tasks (distributed matching).

No match spans a time gap longer than the query's window, crosses a final-interval segment of a
contiguous pattern, or leaves its PARTITION BY group; so the events split at those places into
units an executor can match alone, and the union of the units' matches is the whole result.
"""

from __future__ import annotations

import numpy as np


def unit_starts(ts: np.ndarray, window: int | None, segments: np.ndarray | None = None) -> np.ndarray:
    """Start times of the units of sorted timestamps ``ts``: after every gap longer than
    ``window`` and at every segment start (no splitting without either)."""
    ts = np.asarray(ts, np.int64)
    if ts.size == 0:
        return np.zeros(0, np.int64)
    starts = [ts[:1]]
    if window is not None:
        gap = np.nonzero(np.diff(ts) > window)[0] + 1
        starts.append(ts[gap])
    if segments is not None:
        starts.append(np.asarray(segments, np.int64))
    return np.unique(np.concatenate(starts))


def balanced_tasks(sizes: np.ndarray, tasks: int) -> np.ndarray:
    """Task id of each unit (units in order, contiguous runs) so that the tasks hold about the
    same number of rows; never more tasks than units."""
    sizes = np.asarray(sizes, np.int64)
    if sizes.size == 0:
        return np.zeros(0, np.int64)
    tasks = max(1, min(int(tasks), int(sizes.size)))
    before = np.cumsum(sizes) - sizes  # rows ahead of each unit
    return np.minimum(before * tasks // max(1, int(sizes.sum())), tasks - 1).astype(np.int64)
