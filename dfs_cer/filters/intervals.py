"""Exact time interval sets: sorted, merged arrays of closed integer intervals.

:class:`IntervalSet` is what the SWF approximates. Naive-DFS and the ablations ship it as is, and
tests use it as ground truth (an SWF must contain every timestamp the exact set contains).
Maintaining it costs a sort, O(N log N), where the SWF is O(N) (paper §III-A).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from dfs_cer.events.saturate import shift, span
from dfs_cer.filters import wire

MAGIC = b"DIVS"
_HEADER = struct.Struct("<Q")


def _merge_sorted(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge closed integer intervals sorted by start; touching ones ([1,3],[4,5]) merge too."""
    if starts.size == 0:
        return starts, ends
    reach = np.maximum.accumulate(ends)
    new_run = np.empty(starts.size, bool)
    new_run[0] = True
    # a start more than one past the reach so far (``reach + 1`` would wrap at int64's end)
    new_run[1:] = (starts[1:] > reach[:-1]) & (span(reach[:-1], starts[1:]) != 1)
    run_starts = starts[new_run]
    last_of_run = np.append(np.nonzero(new_run)[0][1:] - 1, starts.size - 1)
    return run_starts, reach[last_of_run]


class IntervalSet:
    """A set of closed intervals ``[start, end]`` over integer timestamps,
    kept sorted and merged."""

    __slots__ = ("ends", "starts")

    def __init__(
        self, starts: np.ndarray | Sequence[int] = (), ends: np.ndarray | Sequence[int] = ()
    ) -> None:
        s = np.asarray(starts, dtype=np.int64).ravel()
        e = np.asarray(ends, dtype=np.int64).ravel()
        if s.shape != e.shape:
            raise ValueError(f"starts and ends differ in length: {s.shape} vs {e.shape}")
        keep = e >= s
        s, e = s[keep], e[keep]
        order = np.argsort(s, kind="stable")
        self.starts, self.ends = _merge_sorted(s[order], e[order])

    @classmethod
    def around(cls, ts: np.ndarray | Sequence[int], lo: int, hi: int) -> IntervalSet:
        """Eq. 1 intervals ``[t + lo, t + hi]`` for every timestamp, merged (saturating at
        int64's ends: no time lies beyond them)."""
        t = np.asarray(ts, dtype=np.int64)
        return cls(shift(t, lo), shift(t, hi))

    def __len__(self) -> int:
        return int(self.starts.size)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, IntervalSet)
            and np.array_equal(self.starts, other.starts)
            and np.array_equal(self.ends, other.ends)
        )

    def __hash__(self) -> int:
        return hash((self.starts.tobytes(), self.ends.tobytes()))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"[{s}, {e}]" for s, e in zip(self.starts[:4], self.ends[:4], strict=True)
        )
        more = f", ... ({len(self)} intervals)" if len(self) > 4 else ""
        return f"IntervalSet({shown}{more})"

    @property
    def is_empty(self) -> bool:
        return self.starts.size == 0

    def total_length(self) -> int:
        """Number of integer timestamps covered (up to 2**64)."""
        lengths = span(self.starts, self.ends)
        if lengths.size and float(np.sum(lengths, dtype=np.float64)) >= 2.0**62:
            return sum(int(x) + 1 for x in lengths)  # beyond int64: exact in Python integers
        return int(np.sum(lengths.astype(np.int64) + 1))

    def contains(self, ts: np.ndarray | Sequence[int]) -> np.ndarray:
        t = np.asarray(ts, dtype=np.int64)
        i = np.searchsorted(self.starts, t, side="right") - 1
        ok = i >= 0
        out = np.zeros(t.shape, bool)
        out[ok] = t[ok] <= self.ends[i[ok]]
        return out

    def union(self, *others: IntervalSet) -> IntervalSet:
        return IntervalSet(
            np.concatenate([self.starts, *(o.starts for o in others)]),
            np.concatenate([self.ends, *(o.ends for o in others)]),
        )

    def intersection(self, other: IntervalSet) -> IntervalSet:
        """Points in both sets: each interval of one against the intervals of the other that
        overlap it (binary searches; closed ends, so nothing is added to a time)."""
        if self.is_empty or other.is_empty:
            return IntervalSet()
        first = np.searchsorted(other.ends, self.starts, side="left")
        last = np.searchsorted(other.starts, self.ends, side="right")
        counts = np.maximum(last - first, 0)
        mine = np.repeat(np.arange(len(self)), counts)
        theirs = np.repeat(first, counts) + (
            np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        out = IntervalSet.__new__(IntervalSet)
        out.starts = np.maximum(self.starts[mine], other.starts[theirs])
        out.ends = np.minimum(self.ends[mine], other.ends[theirs])
        return out

    def bridged(self, gap: int) -> IntervalSet:
        """The set with every hole of at most ``gap`` points filled: a superset in fewer
        intervals (cheaper to send, a little less selective)."""
        if len(self) < 2 or gap <= 0:
            return self
        holes = span(self.ends[:-1], self.starts[1:]) - np.uint64(1)  # exact beyond int64 too
        split = np.flatnonzero(holes > np.uint64(gap)) + 1
        out = IntervalSet.__new__(IntervalSet)
        out.starts = self.starts[np.concatenate([[0], split])]
        out.ends = self.ends[np.concatenate([split - 1, [len(self) - 1]])]
        return out

    def clip(self, lo: int, hi: int) -> IntervalSet:
        """The part of the set inside the closed range ``[lo, hi]``: binary searches and a copy
        of the intervals that overlap it, O(log n + k)."""
        first = int(np.searchsorted(self.ends, lo, side="left"))  # the first ending at or past lo
        end = max(first, int(np.searchsorted(self.starts, hi, side="right")))
        out = IntervalSet.__new__(IntervalSet)
        out.starts, out.ends = self.starts[first:end].copy(), self.ends[first:end].copy()
        if out.starts.size:
            out.starts[0] = max(int(out.starts[0]), lo)
            out.ends[-1] = min(int(out.ends[-1]), hi)
        return out

    def windows(self, window: int) -> np.ndarray:
        """Distinct window ids ``floor(t / w)`` the set touches (sizes the initial SWF)."""
        ws, we = np.floor_divide(self.starts, window), np.floor_divide(self.ends, window)
        counts = we - ws + 1
        out = np.repeat(ws, counts) + (
            np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        return np.unique(out)

    def to_bytes(self) -> bytes:
        payload = np.stack([self.starts, self.ends], axis=1).astype("<i8").tobytes()
        return wire.pack(MAGIC, _HEADER, (len(self),), payload)

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview) -> IntervalSet:
        what = "interval set"
        _, (n,), payload = wire.unpack(buf, MAGIC, _HEADER, what)
        n = int(n)
        wire.expect(
            len(payload) == 16 * n, what, f"payload of {len(payload)} bytes for {n} intervals"
        )
        pairs = np.frombuffer(payload, "<i8").reshape(-1, 2).astype(np.int64)
        out = cls.__new__(cls)
        out.starts, out.ends = pairs[:, 0].copy(), pairs[:, 1].copy()
        wire.expect(bool(np.all(out.ends >= out.starts)), what, "an interval ends before it starts")
        wire.expect(
            bool(np.all(out.starts[1:] > out.ends[:-1]))
            and bool(np.all(span(out.ends[:-1], out.starts[1:]) > 1)),
            what,
            "intervals are not sorted and merged",
        )
        return out
