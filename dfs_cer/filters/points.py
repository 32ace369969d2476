"""Compact, exact wire encodings for the per-node rounds of dual filtering.

Time is cut into *slices* of ``quantum`` units from a ``base`` the compute node picks (about a
sixteenth of the pattern's window). A storage node describes where a variable's candidates lie
as :class:`Points`: their slice ids, sorted and delta-encoded as LEB128 varints, with an optional
short hash of each equality column's value (the compute node checks equalities on them; a
collision only keeps a candidate, never drops one). The compute node sends a node the part of
the interval set that can touch its candidates as :class:`SliceRuns`: runs of slices, also
varint-encoded. Both compress further with the messages' zstd, and both are far smaller than a
cuckoo table or a Bloom filter of the same set, whose bits look random to a compressor.

Pure numpy: arrays in, bytes out, no I/O.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.events.saturate import grid_times, span
from dfs_cer.filters import rice_kernels as rice
from dfs_cer.filters import wire
from dfs_cer.filters.intervals import IntervalSet
from dfs_cer.filters.keys import KeyKind, hash_keys, normalize

POINTS_MAGIC = b"DPTS"
RUNS_MAGIC = b"DSLR"
_POINTS_HEADER = struct.Struct("<H")  # variables
_RUNS_HEADER = struct.Struct("<")  # base, quantum, runs and the first slice: varints
#: slices per pattern window (finer: tighter intervals, more bits per point)
SLICES_PER_WINDOW = 16
#: hash widths a node may be asked for (bits); 0 in a hash marks a NULL (never equal)
HASH_BITS = range(4, 17)
MAX_POINTS = 1 << 31


def varint_encode(values: np.ndarray) -> bytes:
    """LEB128 varints of non-negative integers (7 bits per byte, high bit: more follows)."""
    x = np.ascontiguousarray(values, dtype=np.uint64)
    if x.size == 0:
        return b""
    lengths = np.ones(x.size, np.int64)
    rest = x >> np.uint64(7)
    while rest.any():
        lengths += rest > 0
        rest >>= np.uint64(7)
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(lengths.sum()), np.uint8)
    for k in range(int(lengths.max())):
        live = lengths > k
        byte = ((x[live] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        more = (lengths[live] > k + 1).astype(np.uint8) << 7
        out[starts[live] + k] = byte | more
    return out.tobytes()


def varint_decode(buf: bytes | memoryview, count: int, what: str) -> tuple[np.ndarray, int]:
    """``count`` varints from the start of ``buf``: the values and the bytes they took."""
    if count == 0:
        return np.empty(0, np.uint64), 0
    raw = np.frombuffer(buf, np.uint8)
    ends = np.flatnonzero(raw < 0x80)
    wire.expect(ends.size >= count, what, f"{ends.size} varints where {count} are listed")
    used = int(ends[count - 1]) + 1
    raw = raw[:used]
    ends = ends[:count]
    starts = np.concatenate([[0], ends[:-1] + 1])
    wire.expect(bool(np.all(ends - starts < 10)), what, "a varint is longer than 64 bits")
    position = np.arange(used) - np.repeat(starts, ends - starts + 1)
    parts = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.add.reduceat(parts, starts), used


def value_hashes(values: object, kind: KeyKind, bits: int) -> np.ndarray:
    """A ``bits``-wide hash of each value, equal for values SQL finds equal (the join filters'
    normalization), 1.. for a value and 0 for NULL (or NaN), which equals nothing."""
    if bits not in HASH_BITS:
        raise ValueError(f"hash bits must be one of {HASH_BITS}, got {bits}")
    if kind == KeyKind.STRING and isinstance(values, pa.Array | pa.ChunkedArray):
        # each distinct string hashed once (a log's text columns repeat few values)
        array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        if not pa.types.is_dictionary(array.type):
            array = pc.dictionary_encode(array)
        distinct = _hashes(array.dictionary, kind, bits)
        codes = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        out = distinct[codes] if distinct.size else np.zeros(codes.size, np.uint16)
        out[~np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)] = 0
        return out
    return _hashes(values, kind, bits)


def _hashes(values: object, kind: KeyKind, bits: int) -> np.ndarray:
    normal, valid = normalize(values, kind)
    full = hash_keys(normal, kind, np.zeros(valid.size, np.int64), 0)
    span = np.uint64((1 << bits) - 1)
    out = (full % span + np.uint64(1)).astype(np.uint16)
    out[~valid] = 0
    return out


class Points:
    """Where one variable's candidates lie on one node: slice ids (ascending) and, per hashed
    column, each candidate's value hash (a row of ``hashes``); duplicates dropped."""

    __slots__ = ("hashes", "slices")

    def __init__(self, slices: np.ndarray, hashes: np.ndarray | None = None) -> None:
        s = np.asarray(slices, np.int64)
        h = np.zeros((0, s.size), np.uint16) if hashes is None else np.asarray(hashes)
        if h.ndim != 2 or h.shape[1] != s.size:
            raise ValueError(f"hashes must be (columns, {s.size}), got {h.shape}")
        if s.size:  # sorted by slice, then by the hashes; a (slice, hashes) point once
            order = np.lexsort([*h[::-1], s])  # (``np.unique(axis=1)`` compares row by row)
            s, h = s[order], h[:, order]
            new = np.empty(s.size, bool)
            new[0] = True
            new[1:] = s[1:] != s[:-1]
            for row in h:
                new[1:] |= row[1:] != row[:-1]
            s, h = s[new], h[:, new]
        self.slices, self.hashes = s, h

    def __len__(self) -> int:
        return int(self.slices.size)


def rice_parameter(steps: np.ndarray) -> int:
    """The Golomb-Rice ``k`` that codes ``steps`` in the fewest bits: the one their mean suggests
    (right for steps about geometric) or a smaller one, which wins when a few long jumps (a
    node's data in a few time windows far apart) inflate the mean; each is counted exactly."""
    if steps.size == 0:
        return 0
    mean = float(steps.mean())
    guess = int(max(0, min(40, np.floor(np.log2(max(1.0, mean * 0.69))))))
    costs = {
        k: int(rice.encoded_bits(steps, np.int64(k))) for k in range(max(0, guess - 6), guess + 2)
    }
    return min(costs, key=lambda k: (costs[k], k))


def pack_points(parts: list[Points], width: int) -> bytes:
    """Several variables' points in one framed blob: per variable its count, first slice
    (zigzag), Rice parameter, bitstream length and, per hashed column, the number of distinct
    hashes it is coded with (0: none, each hash in ``width`` bits) as varints; then the
    Golomb-Rice coded slice steps; then each column's hashes, bit-packed: ``width`` bits each,
    or, where fewer bits, its ``d`` distinct hashes (``width`` bits each) and every point's
    index among them (``ceil(log2 d)`` bits). Hashes are near-random bits: packed, they cost
    what they carry, even in the few hundred bytes a node among many sends (a byte-aligned form
    would need a compressor, which a small message does not pay for). The reader knows each
    variable's hashed columns and the width (it asked for them)."""
    body = []
    for p in parts:
        n = len(p)
        first = int(p.slices[0]) if n else 0
        steps = np.diff(p.slices).astype(np.uint64)
        k = rice_parameter(steps)
        stream = _packed(steps, k, _NO_HASHES, 0)
        zig = _zigzag(first)
        modes, blocks = [], []
        for column in p.hashes:
            distinct, index = np.unique(column, return_inverse=True)
            d, b = int(distinct.size), _index_bits(int(distinct.size))
            if n and (d * width + 7) // 8 + (n * b + 7) // 8 < (n * width + 7) // 8:
                modes.append(d)
                blocks.append(_bits(distinct, width) + _bits(index, b))
            else:
                modes.append(0)
                blocks.append(_bits(column, width))
        head = varint_encode(np.array([n, zig, k, len(stream), *modes], np.uint64))
        body += [head, stream, *blocks]
    return wire.pack(POINTS_MAGIC, _POINTS_HEADER, (len(parts),), b"".join(body))


_NO_HASHES = np.zeros((0, 0), np.uint16)
_NO_STEPS = np.zeros(0, np.uint64)


def _packed(steps: np.ndarray, k: int, hashes: np.ndarray, width: int) -> bytes:
    out = np.zeros(
        (int(rice.encoded_bits(steps, np.int64(k))) + hashes.size * width + 7) // 8, np.uint8
    )
    rice.encode(steps, np.int64(k), hashes, np.int64(width), out)
    return out.tobytes()


def _bits(values: np.ndarray, width: int) -> bytes:
    """``values`` in ``width`` bits each, little-endian, padded to a byte."""
    return _packed(_NO_STEPS, 0, np.asarray(values, np.uint16).reshape(1, -1), width)


def _index_bits(d: int) -> int:
    return max(1, int(d - 1).bit_length())


def _unbits(buf: np.ndarray, count: int, width: int, what: str) -> np.ndarray:
    _, values, read = rice.decode(
        buf, np.int64(0), np.int64(0), np.int64(1), np.int64(width), np.int64(count)
    )
    wire.expect(int(read) >= 0, what, "the hashes are cut short")
    return values[0]


def load_kernels() -> None:
    """Load :func:`unpack_points`' compiled decoder (from numba's cache) now, e.g. in a thread
    while the first round is on the wire, instead of when the points arrive."""
    none = np.zeros(1, np.uint8)
    rice.decode(none, np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0))


def unpack_points(
    buf: bytes | bytearray | memoryview, columns: list[int], width: int
) -> list[Points]:
    """The points of :func:`pack_points`; ``columns``: each variable's hashed columns, as asked,
    and the hashes' ``width`` in bits."""
    what = "candidate points"
    _, (count,), payload = wire.unpack(buf, POINTS_MAGIC, _POINTS_HEADER, what)
    wire.expect(int(count) == len(columns), what, f"{count} variables, {len(columns)} asked")
    wire.expect(width in HASH_BITS, what, f"hash width {width}")
    out, at = [], 0
    for c in columns:
        head, used = varint_decode(payload[at:], 4 + c, what)
        at += used
        n, zig, k, size = (int(x) for x in head[:4])
        modes = [int(x) for x in head[4:]]
        wire.expect(n <= MAX_POINTS and k <= 63, what, f"{n} points, Rice parameter {k}")
        wire.expect(size <= len(payload) - at, what, f"a bitstream of {size} bytes")
        first = _unzigzag(zig)
        stream = np.frombuffer(payload[at : at + size], np.uint8)
        at += size
        steps, _, bits_read = rice.decode(
            stream, np.int64(max(0, n - 1)), np.int64(k), np.int64(0), np.int64(0), np.int64(0)
        )
        read = int(bits_read)
        wire.expect(read >= 0 and (read + 7) // 8 == size, what, "the bitstream does not fit")
        wire.expect(
            bool(np.all(steps < (1 << 62)))
            and abs(first) < (1 << 62)
            and float(np.sum(steps, dtype=np.float64)) + abs(first) < 2.0**62,
            what,
            "a slice step out of range",
        )
        hashes = np.zeros((c, n), np.uint16)
        for j, d in enumerate(modes):
            wire.expect(d <= n, what, f"{d} distinct hashes of {n} points")
            sizes = [(d * width + 7) // 8, (n * _index_bits(d) + 7) // 8] if d else [0, 0]
            if not d:
                sizes[0] = (n * width + 7) // 8
            wire.expect(sum(sizes) <= len(payload) - at, what, "the hashes are cut short")
            values_block = np.frombuffer(payload[at : at + sizes[0]], np.uint8)
            second = np.frombuffer(payload[at + sizes[0] : at + sum(sizes)], np.uint8)
            at += sum(sizes)
            if d:
                distinct = _unbits(values_block, d, width, what)
                index = _unbits(second, n, _index_bits(d), what).astype(np.int64)
                wire.expect(bool(np.all(index < d)), what, "a hash index out of range")
                hashes[j] = distinct[index]
            else:
                hashes[j] = _unbits(values_block, n, width, what)
        p = Points.__new__(Points)
        p.slices = first + np.concatenate([[0], np.cumsum(steps.astype(np.int64))])[:n]
        p.hashes = hashes
        out.append(p)
    wire.expect(at == len(payload), what, "trailing bytes after the points")
    return out


def slice_ids(ts: np.ndarray, base: int, quantum: int) -> np.ndarray:
    """The slices of times ``ts`` (none before ``base``) on the grid ``base + k * quantum``: the
    offsets as exact unsigned spans, so a grid may cover all of int64's range."""
    offsets = span(int(base), np.asarray(ts, np.int64))
    return (offsets // np.uint64(quantum)).astype(np.int64)


def _zigzag(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)


def _unzigzag(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


class SliceRuns:
    """A set of slices as sorted, merged runs ``[start, end]`` (in slice ids), with the grid
    that maps them to time: slice ``s`` covers ``[base + s*quantum, base + (s+1)*quantum - 1]``."""

    __slots__ = ("base", "quantum", "runs")

    def __init__(self, base: int, quantum: int, runs: IntervalSet) -> None:
        if quantum <= 0:
            raise ValueError(f"quantum must be positive, got {quantum}")
        self.base, self.quantum, self.runs = int(base), int(quantum), runs

    def to_time(self) -> IntervalSet:
        """The covered time as closed intervals (a last slice reaching past int64's end ends
        there: no time lies beyond it)."""
        q = self.quantum
        return IntervalSet(
            grid_times(self.base, self.runs.starts, q),
            grid_times(self.base, self.runs.ends, q, q - 1),
        )

    def contains(self, ts: np.ndarray) -> np.ndarray:
        return self.to_time().contains(ts)

    @property
    def is_empty(self) -> bool:
        return self.runs.is_empty

    def to_bytes(self) -> bytes:
        s, e = self.runs.starts, self.runs.ends
        n = int(s.size)
        gaps = np.empty(2 * n, np.int64)
        if n:
            gaps[0::2] = np.concatenate([[0], s[1:] - e[:-1]])  # from the previous run's end
            gaps[1::2] = e - s
        first = int(s[0]) if n else 0
        head = np.array([_zigzag(self.base), self.quantum, n, _zigzag(first)], np.uint64)
        payload = varint_encode(head) + varint_encode(gaps)
        return wire.pack(RUNS_MAGIC, _RUNS_HEADER, (), payload)

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview) -> SliceRuns:
        what = "slice runs"
        _, _, payload = wire.unpack(buf, RUNS_MAGIC, _RUNS_HEADER, what)
        head, at = varint_decode(payload, 4, what)
        base, quantum, n, first = (int(v) for v in head)
        base, first = _unzigzag(base), _unzigzag(first)
        wire.expect(quantum > 0 and n <= MAX_POINTS, what, f"quantum {quantum}, {n} runs")
        gaps, used = varint_decode(payload[at:], 2 * n, what)
        wire.expect(used == len(payload) - at, what, "trailing bytes after the runs")
        # slice ids stay inside int64 (the grid keeps them below 2**62): every step and their sum
        wire.expect(
            bool(np.all(gaps < (1 << 62)))
            and abs(first) < (1 << 62)
            and float(np.sum(gaps, dtype=np.float64)) + abs(first) < 2.0**62,
            what,
            "a run out of range",
        )
        g = gaps.astype(np.int64)
        lengths, steps = g[1::2], g[0::2]
        # start_k = start_{k-1} + length_{k-1} + step_k (steps[0] is 0)
        starts = first + np.cumsum(steps + np.concatenate([[0], lengths[:-1]]))
        ends = starts + lengths
        wire.expect(
            n == 0 or bool(np.all(starts[1:] > ends[:-1] + 1)), what, "runs overlap or touch"
        )
        return cls(base, quantum, IntervalSet(starts, ends))


__all__ = [
    "HASH_BITS",
    "SLICES_PER_WINDOW",
    "Points",
    "SliceRuns",
    "pack_points",
    "slice_ids",
    "unpack_points",
    "value_hashes",
]
