"""Exact (attribute value, window id) sets: the hash tables naive-DFS and the ablations ship,
and the ground truth for the window-wise join filter in tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from dfs_cer.filters.keys import KeyKind, normalize

Values: TypeAlias = "pa.Array | pa.ChunkedArray | np.ndarray[Any, Any]"


def _pairs(values: object, windows: np.ndarray) -> np.ndarray:
    assert isinstance(values, np.ndarray)
    bits = (
        values.view(np.int64) if values.dtype == np.float64 else values.astype(np.int64, copy=False)
    )
    stacked = np.ascontiguousarray(np.stack([bits, windows], axis=1))
    return stacked.view(np.dtype((np.void, 16))).ravel()


class JoinSet:
    """The set of (value, window id) pairs of a variable's events, exactly."""

    def __init__(self, window: int, kind: KeyKind) -> None:
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        self.window = int(window)
        self.kind = KeyKind(kind)
        self._numeric = np.empty(0, np.dtype((np.void, 16)))
        self._strings: set[tuple[str, int]] = set()

    def __len__(self) -> int:
        return len(self._strings) if self.kind == KeyKind.STRING else int(self._numeric.size)

    def add(self, values: Values, ts: np.ndarray | Sequence[int]) -> None:
        normalized, valid = normalize(values, self.kind)
        windows = np.floor_divide(np.asarray(ts, dtype=np.int64), self.window)
        if self.kind == KeyKind.STRING:
            assert isinstance(normalized, list)
            self._strings.update(
                (v, int(w))
                for v, w, ok in zip(normalized, windows.tolist(), valid, strict=True)
                if ok
            )
            return
        assert isinstance(normalized, np.ndarray)
        self._numeric = np.unique(
            np.concatenate([self._numeric, _pairs(normalized[valid], windows[valid])])
        )

    def contains(
        self, values: Values, ts: np.ndarray | Sequence[int], direction: int
    ) -> np.ndarray:
        """Exact counterpart of :meth:`WindowJoinFilter.might_contain` (same ``direction``)."""
        normalized, valid = normalize(values, self.kind)
        windows = np.floor_divide(np.asarray(ts, dtype=np.int64), self.window)
        offsets = (0, direction) if direction else (-1, 0, 1)
        out = np.zeros(valid.shape[0], bool)
        for offset in offsets:
            if self.kind == KeyKind.STRING:
                assert isinstance(normalized, list)
                out |= np.fromiter(
                    (
                        (v, int(w)) in self._strings
                        for v, w in zip(normalized, (windows + offset).tolist(), strict=True)
                    ),
                    bool,
                    len(normalized),
                )
            else:
                keys = _pairs(normalized, windows + offset)
                i = np.searchsorted(self._numeric, keys)
                i = np.minimum(i, max(self._numeric.size - 1, 0))
                out |= (
                    (self._numeric.size > 0) & (self._numeric[i] == keys)
                    if self._numeric.size
                    else False
                )
        return out & valid

    def size_in_bytes(self) -> int:
        """Bytes of the pairs on the wire (8-byte window id plus the value)."""
        if self.kind == KeyKind.STRING:
            return sum(8 + len(v.encode()) for v, _ in self._strings)
        return 16 * len(self)
