"""The (value, window) "hash table" of the paper's ablations DFS-V1 and DFS-V2 and of Naive-DFS.

Where the window-wise join filter is a Bloom filter over ``(value, floor(t / w))`` pairs, this holds
the pairs themselves, as sorted distinct 64-bit fingerprints (the same hash the join filter uses,
seed 0). It is 8 bytes per distinct pair on the wire: exact up to 64-bit fingerprint collisions,
which can only keep an event, never drop one, so the filter still never loses a match.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from dfs_cer.filters import wire
from dfs_cer.filters.keys import KeyKind, hash_keys, normalize
from dfs_cer.filters.wjf import Values

MAGIC = b"DWKS"
_HEADER = struct.Struct("<QqB")


class WindowKeySet:
    """Distinct (value, window id) pairs of one variable's events, probed like a join filter."""

    def __init__(self, window: int, kind: KeyKind, keys: np.ndarray | None = None) -> None:
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        self.window = int(window)
        self.kind = KeyKind(kind)
        self.keys = (
            np.zeros(0, np.uint64) if keys is None else np.unique(np.asarray(keys, np.uint64))
        )

    def _hashes(
        self, values: Values, ts: np.ndarray | Sequence[int], offset: int
    ) -> tuple[np.ndarray, np.ndarray]:
        normalized, valid = normalize(values, self.kind)
        windows = np.floor_divide(np.asarray(ts, np.int64), self.window) + offset
        if windows.shape[0] != valid.shape[0]:
            raise ValueError(f"{valid.shape[0]} values but {windows.shape[0]} timestamps")
        return hash_keys(normalized, self.kind, windows, 0), valid

    def add(self, values: Values, ts: np.ndarray | Sequence[int]) -> None:
        hashes, valid = self._hashes(values, ts, 0)
        self.keys = np.union1d(self.keys, hashes[valid])

    def might_contain(
        self, values: Values, ts: np.ndarray | Sequence[int], direction: int
    ) -> np.ndarray:
        """True where the value is present at the event's window or its neighbour (see
        :meth:`WindowJoinFilter.might_contain` for ``direction``)."""
        if direction not in (-1, 0, 1):
            raise ValueError(f"direction must be -1, 0 or 1, got {direction}")
        out: np.ndarray | None = None
        valid = np.zeros(0, np.bool_)
        for offset in (0, direction) if direction else (-1, 0, 1):
            hashes, valid = self._hashes(values, ts, offset)
            hit = np.isin(hashes, self.keys, assume_unique=False)
            out = hit if out is None else out | hit
        assert out is not None
        return out & valid

    @classmethod
    def union(cls, sets: Sequence[WindowKeySet]) -> WindowKeySet:
        if not sets:
            raise ValueError("no key sets to merge")
        if any((s.window, s.kind) != (sets[0].window, sets[0].kind) for s in sets):
            raise ValueError("cannot merge key sets with different windows or key kinds")
        return cls(sets[0].window, sets[0].kind, np.concatenate([s.keys for s in sets]))

    def __len__(self) -> int:
        return int(self.keys.size)

    def to_bytes(self) -> bytes:
        return wire.pack(
            MAGIC,
            _HEADER,
            (len(self), self.window, int(self.kind)),
            self.keys.astype("<u8").tobytes(),
        )

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview) -> WindowKeySet:
        what = "window key set"
        _, (n, window, kind), payload = wire.unpack(buf, MAGIC, _HEADER, what)
        wire.expect(
            len(payload) == 8 * int(n), what, f"payload of {len(payload)} bytes for {n} keys"
        )
        wire.expect(int(window) > 0, what, f"window {window} is not positive")
        wire.expect(int(kind) in {k.value for k in KeyKind}, what, f"unknown key kind {kind}")
        keys = np.frombuffer(payload, "<u8").astype(np.uint64)
        wire.expect(bool(np.all(keys[1:] > keys[:-1])), what, "keys are not sorted and distinct")
        out = cls.__new__(cls)
        out.window, out.kind, out.keys = int(window), KeyKind(int(kind)), keys
        return out
