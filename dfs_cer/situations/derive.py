"""Situation derivation (gaps and islands, vectorised): maximal runs of consecutive rows of a
partition where a condition holds, as half-open intervals ``[ts of the first row, ts of the
row after the last)``, with per-situation aggregates.

Edges: a run that reaches the end of its partition (or of the rows given) has no closing row,
so its end is unknown and it is dropped (it may go on in data not read yet); a run that starts
at the partition's first row starts there. A run whose closing row has its start time (equal
timestamps) is empty (``ts == te``) and dropped: situations have ``ts < te``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import UnsupportedFeatureError


@dataclass
class Derived:
    """One symbol's situations, in (partition, ts) order: partition id, start, end (time
    units), and first and last row (indices into the sorted rows)."""

    part: np.ndarray
    ts: np.ndarray
    te: np.ndarray
    first: np.ndarray
    last: np.ndarray

    def __len__(self) -> int:
        return int(self.ts.size)

    def take(self, keep: np.ndarray) -> Derived:
        return Derived(
            self.part[keep], self.ts[keep], self.te[keep], self.first[keep], self.last[keep]
        )


def runs(
    mask: np.ndarray, part: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of ``mask`` within each partition: first and last row, whether a closing
    row follows in the partition, and whether the run starts at the partition's first row."""
    n = mask.size
    if n == 0:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0, bool), np.zeros(0, bool)
    new_part = np.ones(n, bool)
    new_part[1:] = part[1:] != part[:-1]
    prev = np.zeros(n, bool)
    prev[1:] = mask[:-1]
    start = mask & (~prev | new_part)
    last_part = np.ones(n, bool)
    last_part[:-1] = new_part[1:]
    nxt = np.zeros(n, bool)
    nxt[:-1] = mask[1:]
    end = mask & (~nxt | last_part)
    first = np.flatnonzero(start)
    last = np.flatnonzero(end)
    return first, last, ~last_part[last], new_part[first]


def derive(
    mask: np.ndarray,
    part: np.ndarray,
    ts: np.ndarray,
    min_duration: int | None = None,
    max_duration: int | None = None,
) -> Derived:
    """Situations where ``mask`` holds, over rows sorted by (partition, time); ``part`` is each
    row's partition id. Durations ``te - ts`` must lie in ``[min_duration, max_duration]``."""
    n = mask.size
    if n == 0:
        e = np.zeros(0, np.int64)
        return Derived(e, e, e, e, e)
    first, last, closed, _ = runs(mask, part)
    first, last = first[closed], last[closed]
    s, t = ts[first], ts[last + 1]
    keep = s < t
    if min_duration is not None:
        keep &= (t - s) >= min_duration
    if max_duration is not None:
        keep &= (t - s) <= max_duration
    first, last = first[keep], last[keep]
    return Derived(part[first], s[keep], t[keep], first.astype(np.int64), last.astype(np.int64))


def keyed(
    table: pa.Table, columns: list[str], rows: np.ndarray, **extra: pa.Array | np.ndarray
) -> pa.Table:
    """``columns`` of ``table`` at ``rows``, then ``extra`` columns (also with no key columns:
    pyarrow's take on a table without columns returns no rows)."""
    index = pa.array(np.asarray(rows, np.int64))
    out = {c: table.column(c).take(index) for c in columns}
    out.update({k: v if isinstance(v, pa.Array) else pa.array(v) for k, v in extra.items()})
    return (
        pa.table(out)
        if out
        else pa.table({"__rows": pa.array(np.zeros(len(rows), np.int8))}).drop(["__rows"])
    )


def aggregate(function: str, column: pa.Array | None, situations: Derived) -> pa.Array:
    """``function`` over each situation's rows ``[first, last]`` of ``column`` (NULLs skipped;
    ``count`` without a column counts rows)."""
    m = len(situations)
    if function == "count" and column is None:
        return pa.array(situations.last - situations.first + 1, pa.int64())
    assert column is not None
    if function in ("first", "last"):
        return column.take(pa.array(situations.first if function == "first" else situations.last))
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), bool)
    counts = _segment_sum(valid.astype(np.int64), situations)
    if function == "count":
        return pa.array(counts, pa.int64())
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise UnsupportedFeatureError(
            f"{function} over a {column.type} column",
            clause="MEASURES",
            hint="sum, avg, min and max take numeric columns; first, last and count any",
            code="unsupported",
        )
    integer = pa.types.is_integer(column.type)
    # integers stay integers (exact sums, min and max beyond 2**53); floats stay floats
    dtype, zero = (np.int64, 0) if integer else (np.float64, 0.0)
    values = np.asarray(
        pc.cast(column, pa.int64() if integer else pa.float64())
        .fill_null(zero)
        .to_numpy(zero_copy_only=False),
        dtype,
    )
    empty = counts == 0
    if function in ("sum", "avg"):
        sums = _segment_sum(values, situations)
        if function == "avg":
            return pa.array(np.where(empty, 0.0, sums / np.maximum(counts, 1)), mask=empty)
        return pa.array(sums, mask=empty)
    fill: float | int
    if integer:
        info = np.iinfo(np.int64)
        fill = int(info.max if function == "min" else info.min)
    else:
        fill = np.inf if function == "min" else -np.inf
    filled = np.where(valid, values, fill).astype(dtype)
    ufunc = np.minimum if function == "min" else np.maximum
    got = _segment_reduce(ufunc, filled, situations) if m else np.zeros(0, dtype)
    return pa.array(np.where(empty, zero, got), mask=empty)


def _segment_sum(values: np.ndarray, s: Derived) -> np.ndarray:
    """Sums over each situation's own rows only (not prefix-sum differences), so the same rows
    sum to the same float wherever they sit in the input."""
    if len(s) == 0:
        return np.zeros(0, values.dtype)
    return _segment_reduce(np.add, values, s)


def _segment_reduce(ufunc: np.ufunc, values: np.ndarray, s: Derived) -> np.ndarray:
    """``ufunc`` over ``values[first:last + 1]`` per situation (segments do not overlap)."""
    idx = np.empty(2 * len(s), np.int64)
    idx[0::2] = s.first
    idx[1::2] = s.last + 1
    padded = np.append(values, values[-1:] if values.size else np.zeros(1, values.dtype))
    return ufunc.reduceat(padded, idx)[0::2]
