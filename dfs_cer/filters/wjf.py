"""Window-wise join filter (WJF, paper §IV-B2): a Bloom filter over (attribute value, window id).

For an equality ``M.district = B.district`` between a processed variable B and the current
variable M, each SN inserts ``(B.district, floor(t / w))`` for B's events; the CN ORs the SNs'
filters and sends the union back; an M event at time t survives only if its value is present at
window ``W = floor(t / w)`` or the adjacent one (``W - 1`` when B precedes M in the pattern,
``W + 1`` when it follows, both when the order is unknown). Two events at most w apart are in
the same or adjacent windows, so no event that can satisfy the equality within the window is
dropped.

Sized per lookup for the paper's ε* = 0.02 over two probed windows (ε ≈ 0.0101, k = 7).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from dfs_cer.filters import wire
from dfs_cer.filters import wjf_kernels as kern
from dfs_cer.filters.keys import KeyKind, hash_keys, normalize
from dfs_cer.filters.sizing import bloom_parameters, per_lookup_fpr

MAGIC = b"DWJF"
DEFAULT_TARGET_FPR = 0.02
_HEADER = struct.Struct("<BBHIQqQ")  # k, key kind, reserved, reserved, bits, window, seed
MAX_BITS = 1 << 36

Values: TypeAlias = "pa.Array | pa.ChunkedArray | np.ndarray[Any, Any]"


def _windows(ts: np.ndarray | Sequence[int], window: int) -> np.ndarray:
    arr = np.asarray(ts)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"timestamps must be integers, got {arr.dtype}")
    return np.floor_divide(arr.astype(np.int64, copy=False), window)


class WindowJoinFilter:
    """Bloom filter of (value, window id) pairs.

    Args:
        bits: size of the bit array (a multiple of 64).
        hashes: probes per key (k).
        window: the pattern window w in timestamp units.
        kind: how values are normalised and hashed (both sides of an equality must agree).
        seed: hash seed (stored in the serialized header).
    """

    def __init__(
        self, bits: int, hashes: int, window: int, kind: KeyKind, *, seed: int = 0
    ) -> None:
        if bits <= 0 or bits % 64 or bits > MAX_BITS:
            raise ValueError(f"bits must be a positive multiple of 64 up to 2^36, got {bits}")
        if not 1 <= hashes <= 32:
            raise ValueError(f"hashes must be in 1..32, got {hashes}")
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}")
        self.words = np.zeros(bits // 64, np.uint64)
        self.hashes = int(hashes)
        self.window = int(window)
        self.kind = KeyKind(kind)
        self.seed = int(seed)

    @classmethod
    def with_estimates(
        cls,
        n: int,
        window: int,
        kind: KeyKind,
        *,
        target_fpr: float = DEFAULT_TARGET_FPR,
        probes: int = 2,
        seed: int = 0,
    ) -> WindowJoinFilter:
        """Sized for ``n`` distinct pairs so that ``probes`` window lookups err
        with ``target_fpr``."""
        bits, hashes = bloom_parameters(n, per_lookup_fpr(target_fpr, probes))
        return cls(bits, hashes, window, kind, seed=seed)

    @property
    def bits(self) -> int:
        return int(self.words.size * 64)

    def size_in_bytes(self) -> int:
        return int(self.words.nbytes)

    def add(self, values: Values, ts: np.ndarray | Sequence[int]) -> None:
        """Insert (value, window of ts) for every non-null value."""
        normalized, valid = normalize(values, self.kind)
        windows = _windows(ts, self.window)
        if windows.shape[0] != valid.shape[0]:
            raise ValueError(f"{valid.shape[0]} values but {windows.shape[0]} timestamps")
        kern.insert(
            self.words,
            hash_keys(normalized, self.kind, windows, self.seed),
            valid,
            np.int64(self.hashes),
        )

    def might_contain(
        self, values: Values, ts: np.ndarray | Sequence[int], direction: int
    ) -> np.ndarray:
        """True where the value may be present at the event's window or its neighbour.

        Args:
            direction: -1 checks W and W-1 (the inserted variable precedes the probed one),
                +1 checks W and W+1 (it follows), 0 checks W-1, W and W+1 (order unknown).
        """
        if direction not in (-1, 0, 1):
            raise ValueError(f"direction must be -1, 0 or 1, got {direction}")
        normalized, valid = normalize(values, self.kind)
        windows = _windows(ts, self.window)
        if windows.shape[0] != valid.shape[0]:
            raise ValueError(f"{valid.shape[0]} values but {windows.shape[0]} timestamps")
        out = np.zeros(valid.shape[0], np.bool_)
        offsets = (0, direction) if direction else (-1, 0, 1)
        k = np.int64(self.hashes)
        for offset in offsets:
            kern.probe(
                self.words, hash_keys(normalized, self.kind, windows + offset, self.seed), k, out
            )
        return out & valid

    def compatible(self, other: WindowJoinFilter) -> bool:
        return (self.bits, self.hashes, self.window, self.kind, self.seed) == (
            other.bits,
            other.hashes,
            other.window,
            other.kind,
            other.seed,
        )

    def merge(self, other: WindowJoinFilter) -> None:
        """OR another SN's filter into this one (same size, hashes, window, kind and seed)."""
        if not self.compatible(other):
            raise ValueError("cannot merge window-wise join filters with different parameters")
        self.words |= other.words

    @classmethod
    def union(cls, filters: Sequence[WindowJoinFilter]) -> WindowJoinFilter:
        if not filters:
            raise ValueError("no filters to merge")
        out = cls(
            filters[0].bits,
            filters[0].hashes,
            filters[0].window,
            filters[0].kind,
            seed=filters[0].seed,
        )
        for f in filters:
            out.merge(f)
        return out

    def fill_ratio(self) -> float:
        return float(np.unpackbits(self.words.view(np.uint8)).mean())

    def to_bytes(self) -> bytes:
        values = (self.hashes, int(self.kind), 0, 0, self.bits, self.window, self.seed)
        return wire.pack(MAGIC, _HEADER, values, self.words.astype("<u8", copy=False).tobytes())

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview) -> WindowJoinFilter:
        what = "window-wise join filter"
        _, values, payload = wire.unpack(buf, MAGIC, _HEADER, what)
        k, kind, r1, r2, bits, window, seed = (int(v) for v in values)
        wire.expect(r1 == 0 and r2 == 0, what, "reserved header fields are not zero")
        wire.expect(1 <= k <= 32, what, f"hash count {k}")
        wire.expect(kind in {int(x) for x in KeyKind}, what, f"key kind {kind}")
        wire.expect(0 < bits <= MAX_BITS and bits % 64 == 0, what, f"bit count {bits}")
        wire.expect(window > 0, what, f"window {window}")
        wire.expect(
            len(payload) == bits // 8, what, f"payload of {len(payload)} bytes for {bits} bits"
        )
        out = cls(bits, k, window, KeyKind(kind), seed=seed)
        out.words = np.frombuffer(payload, "<u8").astype(np.uint64)
        return out

    def __repr__(self) -> str:
        return (
            f"WindowJoinFilter(bits={self.bits}, hashes={self.hashes}, window={self.window}, "
            f"kind={self.kind.name})"
        )
