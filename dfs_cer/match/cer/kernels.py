"""Compiled loops of the CER engine: band-join expansion of partial matches (numba).

The kernels release the GIL (``nogil``): a storage node's control calls run beside them.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def expand_ranges(
    lo_row: np.ndarray,
    hi_row: np.ndarray,
    t_lo: np.ndarray,
    t_hi: np.ndarray,
    cand: np.ndarray,
    cand_ts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For every partial match i, the slice ``[first[i], last[i])`` of ``cand`` with row in
    ``[lo_row[i], hi_row[i])`` and time in ``[t_lo[i], t_hi[i]]`` (the pairs' count is known
    before any pair is made)."""
    n = lo_row.shape[0]
    first = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    for i in range(n):
        a0 = np.searchsorted(cand, lo_row[i], side="left")
        b0 = np.searchsorted(cand, hi_row[i], side="left")
        a = a0
        b = a0
        if a0 < b0 and t_lo[i] <= t_hi[i]:
            a = a0 + np.searchsorted(cand_ts[a0:b0], t_lo[i], side="left")
            b = a0 + np.searchsorted(cand_ts[a0:b0], t_hi[i], side="right")
        first[i] = a
        last[i] = max(a, b)
    return first, last


@njit(cache=True, nogil=True)
def expand_pairs(
    first: np.ndarray, last: np.ndarray, cand: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(partial match index, candidate row) for every pair of :func:`expand_ranges`' slices."""
    n = first.shape[0]
    total = 0
    for i in range(n):
        total += last[i] - first[i]
    out_i = np.empty(total, np.int64)
    out_r = np.empty(total, np.int64)
    k = 0
    for i in range(n):
        for j in range(first[i], last[i]):
            out_i[k] = i
            out_r[k] = cand[j]
            k += 1
    return out_i, out_r


def expand(
    lo_row: np.ndarray,
    hi_row: np.ndarray,
    t_lo: np.ndarray,
    t_hi: np.ndarray,
    cand: np.ndarray,
    cand_ts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For every partial match i, the candidates c with row in [lo_row[i], hi_row[i]) and time in
    [t_lo[i], t_hi[i]]; returns (partial match index, candidate row) pairs.

    ``cand`` is sorted by row (so by partition, then time); rows of one partition are contiguous.
    """
    first, last = expand_ranges(lo_row, hi_row, t_lo, t_hi, cand, cand_ts)
    return expand_pairs(first, last, cand)
