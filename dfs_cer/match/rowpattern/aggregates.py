"""Aggregates of MEASURES over a match's rows, RUNNING or FINAL, vectorised.

The rows of every match lie flattened in match order. An aggregate's argument (any expression
of a row: columns, CLASSIFIER(), MATCH_NUMBER()) is evaluated once over all flattened rows; its
``FILTER (WHERE ...)``, its variable's rows and DISTINCT (first occurrence of a value in its
match) narrow which rows count. Each output row then reads the aggregate over its match's rows
up to the flattened row it stands at (``at``; the match's last row under FINAL, -1 for an empty
match): compiled running scans give the scalar aggregates, offset arithmetic builds
``array_agg`` / ``string_agg`` lists.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from dfs_cer.query.numeric import to_double


@njit(cache=True)
def running_moments(
    values: np.ndarray, valid: np.ndarray, seg_first: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per flattened row: count, mean and sum of squared deviations (Welford) so far in its
    match."""
    n = values.shape[0]
    cnt = np.zeros(n, np.int64)
    mean = np.zeros(n, np.float64)
    m2 = np.zeros(n, np.float64)
    c, mu, s = 0, 0.0, 0.0
    for i in range(n):
        if seg_first[i]:
            c, mu, s = 0, 0.0, 0.0
        if valid[i]:
            c += 1
            delta = values[i] - mu
            mu += delta / c
            s += delta * (values[i] - mu)
        cnt[i], mean[i], m2[i] = c, mu, s
    return cnt, mean, m2


@njit(cache=True)
def running_pick(
    keys: np.ndarray, valid: np.ndarray, seg_first: np.ndarray, mode: int
) -> np.ndarray:
    """Per flattened row: the flattened index of the row picked so far in its match (-1: none).
    ``mode`` 0: the first valid row; 1: the smallest key (first on ties); 2: the largest key."""
    out = np.empty(keys.shape[0], np.int64)
    best = -1
    for i in range(keys.shape[0]):
        if seg_first[i]:
            best = -1
        if valid[i] and (
            best < 0 or (mode == 1 and keys[i] < keys[best]) or (mode == 2 and keys[i] > keys[best])
        ):
            best = i
        out[i] = best
    return out


def first_occurrences(match: np.ndarray, values: pa.Array, rows: np.ndarray) -> np.ndarray:
    """Of the flattened ``rows`` (ascending), those holding the first occurrence of their value
    in their match (NULL is one value)."""
    if rows.size == 0:
        return rows
    taken = values.take(pa.array(rows))
    if pa.types.is_dictionary(taken.type):
        taken = taken.dictionary_decode()
    codes = np.asarray(
        pc.fill_null(pc.cast(pc.dictionary_encode(taken).indices, pa.int64()), -1).to_numpy(
            zero_copy_only=False
        ),
        np.int64,
    )
    if pa.types.is_floating(taken.type):  # NaN equals NaN, -0.0 equals 0.0 (as GROUP BY)
        doubles = np.asarray(
            to_double(taken).fill_null(0.0).to_numpy(zero_copy_only=False), np.float64
        )
        _, codes_f = np.unique(
            np.where(np.isnan(doubles), np.inf, doubles) + 0.0, return_inverse=True
        )
        codes = np.where(codes < 0, -1, codes_f)
    matches = match[rows]
    width = int(codes.max()) + 2 if codes.size else 1
    if matches.size and int(matches.max()) < (1 << 62) // width:  # one integer per (match, value)
        _, first = np.unique(matches * width + (codes + 1), return_index=True)
    else:
        _, first = np.unique(np.stack([matches, codes], axis=1), axis=0, return_index=True)
    return np.sort(rows[first])


def prefix_lists(
    values: pa.Array,
    flagged: np.ndarray,
    match_of_out: np.ndarray,
    at: np.ndarray,
    flat_start: np.ndarray,
) -> tuple[pa.Array, np.ndarray]:
    """For each output row, the list of ``values`` at the ``flagged`` flattened rows (ascending)
    of its match up to flattened row ``at``; returns the list array (NULL where empty) and the
    number of elements per output row."""
    valid_at = at >= 0
    begin = (
        np.searchsorted(flagged, flat_start[match_of_out])
        if match_of_out.size
        else np.zeros(0, np.int64)
    )
    end = np.where(
        valid_at, np.searchsorted(flagged, np.where(valid_at, at, 0), side="right"), begin
    )
    counts = np.maximum(end - begin, 0).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    total = int(offsets[-1])
    if total >= 2**31:
        from dfs_cer.errors import MatchError

        raise MatchError(
            f"array_agg / string_agg would hold {total:,} elements over all output rows; use FINAL "
            "or ONE ROW PER MATCH"
        )
    idx = (
        np.arange(total, dtype=np.int64)
        - np.repeat(offsets[:-1], counts)
        + np.repeat(begin, counts)
    )
    items = values.take(pa.array(flagged[idx] if total else np.zeros(0, np.int64)))
    lists = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), items, mask=pa.array(counts == 0)
    )
    return lists, counts
