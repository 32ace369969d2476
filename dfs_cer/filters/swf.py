"""Shrinking window filter (SWF, paper §IV-B1): an approximate time interval set.

Time is cut into windows of the pattern's length ``w``; each window present in the interval set
gets one cuckoo-hashed entry holding a 12-bit fingerprint of its id and a 20-bit slice tag (bit
j covers the j-th twentieth of the window). Inserting an interval and looking up a timestamp are
O(1); a lookup may say "maybe" for a timestamp outside the set (fingerprint collision, or a
partly covered slice) but never "no" for one inside it.

Round trips (reference-implementation-notes §3.5):

1. compute node (CN): :meth:`ShrinkingWindowFilter.from_intervals` over the merged Eq. 1
   intervals of the first variable, then ``to_bytes()`` to every storage node (SN);
2. SN: :meth:`refresh` from the timestamps of the events that survived verification: slices of
   their Eq. 1 intervals, only in windows already present, as :class:`RefreshTags`;
3. CN: :meth:`apply_refresh` ORs the SNs' tags, ANDs them into the slice tags (the
   intersection with the previous set), clears empty entries and compacts the table.

A cuckoo insertion that runs out of kicks grows the table and reinserts everything: a window is
never dropped (the reference code ignored that failure).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dfs_cer.errors import FilterFormatError
from dfs_cer.events.saturate import MAX, MIN, plus
from dfs_cer.filters import swf_kernels as k
from dfs_cer.filters import wire
from dfs_cer.filters.intervals import IntervalSet
from dfs_cer.filters.sizing import SWF_MAX_LOAD, next_pow2, swf_buckets

MAGIC = b"DSWF"
REFRESH_MAGIC = b"DSRT"
MAX_KICKS = 500
FINGERPRINT_BITS = 12
SLICE_BITS = 20
ENTRIES_PER_BUCKET = k.SLOTS
#: compaction halves the table while its load stays under this (reference: 0.5 * 0.78)
COMPACTION_LOAD = 0.39
MIN_BUCKETS = 16
MAX_BUCKETS = 1 << 30
_HEADER = struct.Struct("<IBBBBqQI")  # m, d, lf, lt, reserved, w, seed, entries
_REFRESH_HEADER = struct.Struct("<IIIq")  # slot count, table crc, nonzero count, w

#: Eq. 1 offsets (lo, hi) of a variable's interval around its event time t
ROLE_OFFSETS = {"head": (0, 1), "tail": (-1, 0), "middle": (-1, 1)}


def eq1_offsets(role: str, window: int) -> tuple[int, int]:
    """Offsets of the Eq. 1 interval ``[t + lo, t + hi]`` for a head, tail or middle variable."""
    try:
        lo, hi = ROLE_OFFSETS[role]
    except KeyError:
        raise ValueError(f"role must be head, tail or middle, got {role!r}") from None
    return lo * window, hi * window


def _as_int64(a: np.ndarray | Sequence[int]) -> np.ndarray:
    arr = np.asarray(a)
    if arr.size == 0:
        return np.empty(0, np.int64)
    if arr.dtype != np.int64:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"timestamps must be integers, got {arr.dtype}")
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr)


@dataclass(frozen=True, slots=True)
class RefreshTags:
    """Per-slot refresh tags one SN sends back (fingerprints and slice tags stay on the CN)."""

    tags: np.ndarray  # uint32, one per slot
    table_crc: int  # identifies the SWF these tags refer to
    window: int

    def to_bytes(self) -> bytes:
        """Sparse encoding: a bitmap of non-zero slots, then their 20-bit tags packed in pairs."""
        nonzero = self.tags != 0
        values = self.tags[nonzero].astype(np.uint64)
        if values.size % 2:
            values = np.append(values, np.uint64(0))
        pairs = values[0::2] | (values[1::2] << np.uint64(20))
        packed = pairs.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :5].tobytes()
        payload = np.packbits(nonzero, bitorder="little").tobytes() + packed
        return wire.pack(
            REFRESH_MAGIC,
            _REFRESH_HEADER,
            (self.tags.size, self.table_crc, int(nonzero.sum()), self.window),
            payload,
        )

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview) -> RefreshTags:
        what = "SWF refresh tags"
        _, (slots, crc, count, window), payload = wire.unpack(
            buf, REFRESH_MAGIC, _REFRESH_HEADER, what
        )
        slots, count = int(slots), int(count)
        wire.expect(
            slots % ENTRIES_PER_BUCKET == 0 and slots <= MAX_BUCKETS * 4,
            what,
            f"slot count {slots}",
        )
        bitmap_len = (slots + 7) // 8
        wire.expect(
            len(payload) == bitmap_len + 5 * ((count + 1) // 2),
            what,
            f"payload of {len(payload)} bytes does not fit {slots} slots and {count} tags",
        )
        nonzero = np.unpackbits(
            np.frombuffer(payload[:bitmap_len], np.uint8), count=slots, bitorder="little"
        ).astype(bool)
        wire.expect(int(nonzero.sum()) == count, what, "bitmap and tag count disagree")
        raw = np.frombuffer(payload[bitmap_len:], np.uint8).reshape(-1, 5)
        eight = np.zeros((raw.shape[0], 8), np.uint8)
        eight[:, :5] = raw
        pairs = eight.view("<u8").ravel()
        values = np.empty(pairs.size * 2, np.uint64)
        values[0::2] = pairs & np.uint64(k.FULL_TAG)
        values[1::2] = pairs >> np.uint64(20)
        wire.expect(not np.any(values >> np.uint64(20)), what, "tag out of range")
        tags = np.zeros(slots, np.uint32)
        tags[nonzero] = values[:count].astype(np.uint32)
        wire.expect(bool(np.all(tags[nonzero] != 0)), what, "a listed tag is zero")
        return cls(tags, int(crc), int(window))

    @staticmethod
    def union(parts: Sequence[RefreshTags]) -> np.ndarray:
        """OR of several SNs' tags (they must refer to the same table)."""
        if not parts:
            raise ValueError("no refresh tags to merge")
        first = parts[0]
        out = first.tags.copy()
        for p in parts[1:]:
            if p.table_crc != first.table_crc or p.tags.size != out.size:
                raise ValueError("refresh tags refer to different filters")
            out |= p.tags
        return out


class ShrinkingWindowFilter:
    """The SWF: ``m`` buckets × 4 entries of 12-bit fingerprint + 20-bit slice tag.

    Args:
        window: the pattern window ``w`` in timestamp units (> 0).
        buckets: number of buckets, a power of two.
        seed: hash seed (stored in the serialized header).
        max_kicks: cuckoo kicks before the table grows.
    """

    def __init__(
        self, window: int, buckets: int = 1, *, seed: int = 0, max_kicks: int = MAX_KICKS
    ) -> None:
        if int(window) <= 0:
            raise ValueError(f"window must be positive, got {window}")
        if buckets < 1 or buckets & (buckets - 1) or buckets > MAX_BUCKETS:
            raise ValueError(f"buckets must be a power of two in [1, 2^30], got {buckets}")
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed must fit in 64 bits, got {seed}")
        self.window = int(window)
        self.seed = int(seed)
        self.max_kicks = int(max_kicks)
        self.table = np.zeros(buckets * k.SLOTS, np.uint32)
        self.keys: np.ndarray | None = np.full(buckets * k.SLOTS, -1, np.int64)
        self._rng = np.array([np.uint64(0x2545F4914F6CDD1D) ^ np.uint64(self.seed)], np.uint64)
        self.grow_count = 0

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_intervals(
        cls,
        starts: np.ndarray | Sequence[int],
        ends: np.ndarray | Sequence[int],
        window: int,
        *,
        seed: int = 0,
        max_kicks: int = MAX_KICKS,
    ) -> ShrinkingWindowFilter:
        """Build the initial SWF (CN) from closed intervals, sized for the windows they cover."""
        s, e = _as_int64(starts), _as_int64(ends)
        windows, tags = k.expand_intervals(s, e, np.int64(window))
        n = np.unique(windows).size
        swf = cls(
            window, swf_buckets(n, ENTRIES_PER_BUCKET, SWF_MAX_LOAD), seed=seed, max_kicks=max_kicks
        )
        swf._put(windows, tags)
        return swf

    @property
    def buckets(self) -> int:
        return self.table.size // k.SLOTS

    def insert_intervals(
        self, starts: np.ndarray | Sequence[int], ends: np.ndarray | Sequence[int]
    ) -> None:
        """Add closed intervals ``[starts[i], ends[i]]`` (CN side)."""
        s, e = _as_int64(starts), _as_int64(ends)
        if s.shape != e.shape:
            raise ValueError(f"starts and ends differ in length: {s.shape} vs {e.shape}")
        windows, tags = k.expand_intervals(s, e, np.int64(self.window))
        self._put(windows, tags)

    def _require_keys(self) -> np.ndarray:
        if self.keys is None:
            raise ValueError(
                "this SWF was received over the wire: it can be looked up and refreshed, "
                "not modified"
            )
        return self.keys

    def _put(self, windows: np.ndarray, tags: np.ndarray) -> None:
        keys = self._require_keys()
        victim = np.zeros(2, np.int64)
        while True:
            failed = k.put_many(
                self.table,
                keys,
                windows,
                tags,
                np.uint64(self.seed),
                np.int64(self.max_kicks),
                self._rng,
                victim,
            )
            if failed < 0:
                return
            # out of kicks: grow and reinsert what is stored, the homeless entry and the rest
            live = (self.table & np.uint32(k.FULL_TAG)) != 0
            old_windows = np.concatenate([keys[live], victim[:1], windows[failed + 1 :]])
            old_tags = np.concatenate(
                [
                    self.table[live] & np.uint32(k.FULL_TAG),
                    np.array([victim[1] & k.FULL_TAG], np.uint32),
                    tags[failed + 1 :],
                ]
            )
            self._reset(self.buckets * 2)
            self.grow_count += 1
            keys = self._require_keys()
            windows, tags = old_windows, old_tags

    def _reset(self, buckets: int) -> None:
        if buckets > MAX_BUCKETS:
            raise MemoryError(f"shrinking window filter would need more than {MAX_BUCKETS} buckets")
        self.table = np.zeros(buckets * k.SLOTS, np.uint32)
        self.keys = np.full(buckets * k.SLOTS, -1, np.int64)

    # ---------------------------------------------------------------------------- queries

    def contains(self, ts: np.ndarray | Sequence[int]) -> np.ndarray:
        """Boolean mask: True where the timestamp may lie in the interval set."""
        return k.contains(self.table, _as_int64(ts), np.int64(self.window), np.uint64(self.seed))

    @property
    def entry_count(self) -> int:
        return int(np.count_nonzero(self.table & np.uint32(k.FULL_TAG)))

    @property
    def load_factor(self) -> float:
        return self.entry_count / self.table.size

    @property
    def slice_count(self) -> int:
        return int(k.popcount_tags(self.table))

    @property
    def covered_length(self) -> float:
        """ℓ, the covered length of the interval set (slices × w / 20), for the cost model."""
        return self.slice_count * self.window / k.SLICES

    @property
    def is_empty(self) -> bool:
        """True when no time is covered: the query has no match and nothing needs pulling."""
        return not bool(np.any(self.table & np.uint32(k.FULL_TAG)))

    def size_in_bytes(self) -> int:
        return int(self.table.nbytes + (0 if self.keys is None else self.keys.nbytes))

    def table_crc(self) -> int:
        """Identity of the current table contents (refresh tags name the table they refer to)."""
        return zlib.crc32(self.table.astype("<u4", copy=False).tobytes()) ^ self.buckets

    def covered_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """The covered time as sorted, merged closed ``[start, end]`` arrays (needs window
        ids). A slice's end past int64's end is int64's end: no time lies beyond it."""
        keys = self._require_keys()
        live = (self.table & np.uint32(k.FULL_TAG)) != 0
        windows, tags = keys[live], self.table[live] & np.uint32(k.FULL_TAG)
        bits = ((tags[:, None] >> np.arange(k.SLICES, dtype=np.uint32)) & 1).astype(bool)
        win_idx, slc = np.nonzero(bits)
        w = np.int64(self.window)
        win = windows[win_idx]
        # ceil(j * w / SLICES) without j * w, which overflows for the widest windows
        q, m = w // k.SLICES, w % k.SLICES
        first = slc * q + (slc * m + k.SLICES - 1) // k.SLICES
        past = (slc + 1) * q + ((slc + 1) * m + k.SLICES - 1) // k.SLICES
        # a window's start ``win * w`` lies in int64 except the window holding int64's least
        # time when w does not divide it: its start (and some of its slices) lie below it
        lowest = MIN // self.window
        with np.errstate(over="ignore"):
            base = np.where(win == lowest, np.int64(0), win * w)
        starts, ends = plus(base, first), plus(base, past - 1)
        keep = np.ones(starts.size, bool)
        for i in np.flatnonzero(win == lowest):  # at most SLICES of them, in Python integers
            lo, hi = lowest * self.window + int(first[i]), lowest * self.window + int(past[i]) - 1
            keep[i] = hi >= MIN  # (a slice wholly below int64 covers no time)
            starts[i], ends[i] = max(MIN, lo), min(MAX, max(MIN, hi))
        # empty slices (end < start) dropped, touching ones merged
        covered = IntervalSet(starts[keep], ends[keep])
        return covered.starts, covered.ends

    # ---------------------------------------------------------------------------- shrinking

    def refresh(self, ts: np.ndarray | Sequence[int], role: str) -> RefreshTags:
        """SN side: refresh tags from surviving events of a variable with the given Eq. 1 role."""
        lo, hi = eq1_offsets(role, self.window)
        return self.refresh_offsets(ts, lo, hi)

    def refresh_offsets(self, ts: np.ndarray | Sequence[int], lo: int, hi: int) -> RefreshTags:
        """Refresh tags from intervals ``[t + lo, t + hi]``, only in windows already present."""
        out = np.zeros(self.table.size, np.uint32)
        k.refresh(
            self.table,
            _as_int64(ts),
            np.int64(lo),
            np.int64(hi),
            np.int64(self.window),
            np.uint64(self.seed),
            out,
        )
        return RefreshTags(out, self.table_crc(), self.window)

    def apply_refresh(
        self,
        parts: Sequence[RefreshTags],
        *,
        compaction_load: float = COMPACTION_LOAD,
        min_buckets: int = MIN_BUCKETS,
    ) -> None:
        """CN side: OR every SN's tags, AND them into the slice tags, clear empties, compact."""
        crc = self.table_crc()
        for p in parts:
            if p.table_crc != crc or p.tags.size != self.table.size or p.window != self.window:
                raise ValueError("refresh tags do not belong to this filter (stale round trip?)")
        refresh = RefreshTags.union(parts) if parts else np.zeros(self.table.size, np.uint32)
        self.table &= refresh | np.uint32(~np.uint32(k.FULL_TAG))
        empty = (self.table & np.uint32(k.FULL_TAG)) == 0
        self.table[empty] = 0
        if self.keys is not None:
            self.keys[empty] = -1
            self.compact(compaction_load=compaction_load, min_buckets=min_buckets)

    def compact(
        self, *, compaction_load: float = COMPACTION_LOAD, min_buckets: int = MIN_BUCKETS
    ) -> None:
        """Halve the table while its load is below ``compaction_load`` (floor ``min_buckets``);
        if reinsertion into the smaller table fails, keep the next larger size (roll back)."""
        keys = self._require_keys()
        count = self.entry_count
        target = self.buckets
        floor = min(self.buckets, next_pow2(min_buckets))
        while target // 2 >= floor and count < compaction_load * k.SLOTS * target:
            target //= 2
        if target == self.buckets:
            return
        live = (self.table & np.uint32(k.FULL_TAG)) != 0
        windows, tags = keys[live].copy(), (self.table[live] & np.uint32(k.FULL_TAG)).copy()
        saved = (self.table, self.keys)
        while target < self.buckets:
            candidate = ShrinkingWindowFilter(
                self.window, target, seed=self.seed, max_kicks=self.max_kicks
            )
            victim = np.zeros(2, np.int64)
            assert candidate.keys is not None
            if (
                k.put_many(
                    candidate.table,
                    candidate.keys,
                    windows,
                    tags,
                    np.uint64(self.seed),
                    np.int64(self.max_kicks),
                    self._rng,
                    victim,
                )
                < 0
            ):
                self.table, self.keys = candidate.table, candidate.keys
                return
            target *= 2
        self.table, self.keys = saved

    # ---------------------------------------------------------------------------- wire format

    def to_bytes(self) -> bytes:
        """CN -> SN encoding: header and the fingerprint + slice tag entries (no refresh tags)."""
        values = (
            self.buckets,
            k.SLOTS,
            FINGERPRINT_BITS,
            SLICE_BITS,
            0,
            self.window,
            self.seed,
            self.entry_count,
        )
        return wire.pack(MAGIC, _HEADER, values, self.table.astype("<u4", copy=False).tobytes())

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview) -> ShrinkingWindowFilter:
        """Decode a filter sent by the CN; the result supports lookups and refresh only."""
        what = "shrinking window filter"
        _, values, payload = wire.unpack(buf, MAGIC, _HEADER, what)
        m, d, lf, lt, reserved, w, seed, entries = (int(v) for v in values)
        wire.expect(
            d == k.SLOTS and lf == FINGERPRINT_BITS and lt == SLICE_BITS,
            what,
            f"layout d={d}, fingerprint={lf}, slice={lt} bits (this build reads 4/12/20)",
        )
        wire.expect(reserved == 0, what, "reserved header byte is not zero")
        wire.expect(1 <= m <= MAX_BUCKETS and m & (m - 1) == 0, what, f"bucket count {m}")
        wire.expect(w > 0, what, f"window {w}")
        wire.expect(
            len(payload) == m * d * 4, what, f"payload of {len(payload)} bytes for {m} buckets"
        )
        swf = cls(w, m, seed=seed)
        swf.table = np.frombuffer(payload, "<u4").astype(np.uint32)
        swf.keys = None
        wire.expect(
            swf.entry_count == entries, what, f"entry count {entries} does not match the table"
        )
        return swf

    def __repr__(self) -> str:
        return (
            f"ShrinkingWindowFilter(window={self.window}, buckets={self.buckets}, "
            f"entries={self.entry_count}, slices={self.slice_count})"
        )


__all__ = ["FilterFormatError", "RefreshTags", "ShrinkingWindowFilter", "eq1_offsets"]
