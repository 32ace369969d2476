"""Time arithmetic that holds anywhere in int64: instants plus or minus a span saturate at the
type's ends instead of wrapping, and spans between instants are exact up to 2**64 - 1.

Times are int64 in their column's units (:mod:`dfs_cer.events.time`), so nanoseconds since the
epoch pass 2**61 in 2043 and an integer time column may hold any value. A window added to a
time near the end of the range, or a gap of more than 2**63 units between two times, wraps in
plain int64 arithmetic and silently moves a time to the other end of the range.

Saturating is exact for a bound that moves *outward*: an upper bound ``t + window`` past
:data:`MAX` admits every later time, as the true bound does. A bound that moves *inward* (a
lower bound ``t + 1``: strictly after ``t``) is not: past :data:`MAX` nothing qualifies, while
the saturated bound admits :data:`MAX` itself. Such comparisons use :func:`after` and
:func:`before`, which compare spans instead of shifted times.

Pure numpy: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

MIN = int(np.iinfo(np.int64).min)
MAX = int(np.iinfo(np.int64).max)


def plus(t: np.ndarray | int, d: np.ndarray | int) -> np.ndarray:
    """``t + d`` for ``d >= 0``, at most :data:`MAX` (int64 arrays or scalars)."""
    t = np.asarray(t, np.int64)
    d = np.asarray(d, np.int64)
    with np.errstate(over="ignore"):
        s = t + d
    return np.where(t > MAX - d, np.int64(MAX), s)


def minus(t: np.ndarray | int, d: np.ndarray | int) -> np.ndarray:
    """``t - d`` for ``d >= 0``, at least :data:`MIN`."""
    t = np.asarray(t, np.int64)
    d = np.asarray(d, np.int64)
    with np.errstate(over="ignore"):
        s = t - d
    return np.where(t < MIN + d, np.int64(MIN), s)


def shift(t: np.ndarray | int, d: int) -> np.ndarray:
    """``t + d`` for any int64 ``d`` (either sign), saturating."""
    if d >= 0:
        return plus(t, d)
    t = np.asarray(t, np.int64)
    with np.errstate(over="ignore"):
        s = t + np.int64(d)
    return np.where(t < MIN - d, np.int64(MIN), s)


def span(lo: np.ndarray | int, hi: np.ndarray | int) -> np.ndarray:
    """``hi - lo`` for ``hi >= lo``, exact as uint64 (a span may exceed int64's range)."""
    a = np.asarray(lo, np.int64).view(np.uint64)
    b = np.asarray(hi, np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        return np.asarray(b - a, np.uint64)


def within(lo: np.ndarray | int, hi: np.ndarray | int, window: int) -> np.ndarray:
    """``lo <= hi <= lo + window``: is ``hi`` at most ``window`` after ``lo`` (``window >= 0``)?"""
    return (np.asarray(hi) >= np.asarray(lo)) & (np.asarray(hi) <= plus(lo, window))


def after(t: np.ndarray | int, lo: np.ndarray | int, gap: int) -> np.ndarray:
    """``t >= lo + gap`` exactly (``gap >= 0``): ``t`` at least ``gap`` after ``lo``."""
    return (np.asarray(t) >= np.asarray(lo)) & (span(lo, t) >= np.uint64(gap))


def before(t: np.ndarray | int, hi: np.ndarray | int, gap: int) -> np.ndarray:
    """``t <= hi - gap`` exactly (``gap >= 0``): ``t`` at least ``gap`` before ``hi``."""
    return (np.asarray(t) <= np.asarray(hi)) & (span(t, hi) >= np.uint64(gap))


def grid_times(base: int, ids: np.ndarray, quantum: int, extra: int = 0) -> np.ndarray:
    """``base + ids * quantum + extra`` for slice ids of either sign (``quantum >= 1``,
    ``0 <= extra < quantum``), saturating at int64's ends: a grid over all of int64 has slice
    offsets up to 2**64, which no int64 product holds."""
    ids = np.asarray(ids, np.int64)
    if ids.size == 0:
        return ids.copy()
    lo, hi = int(ids.min()), int(ids.max())
    low, high = lo * quantum, hi * quantum
    if (
        low >= MIN
        and high <= MAX
        and base + min(low, 0) >= MIN
        and base + max(high, 0) + extra <= MAX
    ):
        return base + ids * np.int64(quantum) + np.int64(extra)  # nothing to saturate
    q, top = np.uint64(quantum), np.uint64(2**64 - 1)
    negative = ids < 0
    # |ids| as uint64 (two's complement negation is exact there, MIN included)
    size = np.where(negative, (~ids.view(np.uint64)) + np.uint64(1), ids.view(np.uint64))
    # the offset passes 2**64 (a slice more than int64's whole range away): past either end
    huge = np.where(negative, size > top // q, size > (top - np.uint64(extra)) // q)
    with np.errstate(over="ignore"):
        scaled = size * q
        offset = np.where(negative, scaled - np.uint64(extra), scaled + np.uint64(extra))
        up = (np.uint64(base % 2**64) + offset).view(np.int64)
        down = (np.uint64(base % 2**64) - offset).view(np.int64)
    room_up = span(base, MAX)  # how far base may move up / down inside int64
    room_down = span(MIN, base)
    out = np.where(
        negative,
        np.where(huge | (offset > room_down), np.int64(MIN), down),
        np.where(huge | (offset > room_up), np.int64(MAX), up),
    )
    return np.asarray(out, np.int64)
