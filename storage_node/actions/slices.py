"""An executor's time slice of a final pull (``slice``: ``[lo, hi]``, inclusive): the node selects
the rows of that time range first (a query's rows are sorted by time, so a binary search) and
applies the pull's candidates and interval set to those rows only, never the whole pull then a
cut. A pull with halo rows is the exception: its reply is built whole and cut to the range."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import ProtocolError
from dfs_cer.work import Work
from storage_node.actions.base import int_times
from storage_node.rows import keep
from storage_node.state import QueryState


def time_slice(header: dict[str, Any], kind: str) -> tuple[int, int] | None:
    """The request's ``slice`` (``(lo, hi)``), or None when it takes the whole pull."""
    raw = header.get("slice")
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(
            isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63 for x in raw
        )
        or raw[0] > raw[1]
    ):
        raise ProtocolError(
            f"{kind}: slice must be [lo, hi], two 64-bit integers (times) with lo <= hi"
        )
    return int(raw[0]), int(raw[1])


def row_range(ts: np.ndarray, window: tuple[int, int]) -> tuple[int, int]:
    """The rows ``[first, end)`` of an ascending time array inside the inclusive ``window``."""
    first = int(np.searchsorted(ts, window[0], side="left"))
    return first, max(first, int(np.searchsorted(ts, window[1], side="right")))


def candidates_within(state: QueryState, window: tuple[int, int]) -> tuple[np.ndarray, int]:
    """The rows some variable holds as a candidate inside ``window``, ascending (as
    :func:`storage_node.actions.base.union_rows` over the whole query), and the number of the
    query's rows in the window: binary searches of each variable's candidates (ascending row
    indices: an open finds them in row order and every round keeps a subset in order)."""
    first, end = row_range(state.ts, window)
    mask = np.zeros(end - first, bool)
    for rows in state.candidates.values():
        lo, hi = np.searchsorted(rows, [first, end], side="left")
        mask[rows[lo:hi] - first] = True
    return first + np.flatnonzero(mask), end - first


def cut(
    table: pa.Table, window: tuple[int, int] | None, column: str, work: Work | None = None
) -> pa.Table:
    """The rows of a reply built whole inside ``window`` (``column``: the time column; the copy
    charged to ``work``)."""
    if window is None or table.num_rows == 0:
        return table
    ts = int_times(table.column(column))
    return keep(table, (ts >= window[0]) & (ts <= window[1]), work)
