"""The per-node round encodings: varints, candidate points and slice runs decode to what was
encoded, refuse what is not theirs, and hash SQL-equal values alike."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.errors import FilterFormatError
from dfs_cer.events.saturate import grid_times
from dfs_cer.filters import IntervalSet, KeyKind
from dfs_cer.filters.points import (
    Points,
    SliceRuns,
    pack_points,
    unpack_points,
    value_hashes,
    varint_decode,
    varint_encode,
)


@given(st.lists(st.integers(0, 2**63 - 1), max_size=200))
def test_varints_round_trip(values: list[int]) -> None:
    raw = varint_encode(np.array(values, np.uint64))
    back, used = varint_decode(raw, len(values), "test")
    assert back.tolist() == values and used == len(raw)


points_st = st.lists(
    st.tuples(st.integers(-(2**40), 2**40), st.integers(0, 255)), max_size=300
).map(
    lambda pairs: Points(
        np.array([p[0] for p in pairs], np.int64),
        np.array([[p[1] for p in pairs]], np.uint8).reshape(1, len(pairs)),
    )
)


@settings(max_examples=60)
@given(st.lists(points_st, min_size=1, max_size=4))
def test_points_round_trip(parts: list[Points]) -> None:
    back = unpack_points(pack_points(parts, 8), [1] * len(parts), 8)
    for a, b in zip(parts, back, strict=True):
        assert a.slices.tolist() == b.slices.tolist()
        assert a.hashes.tolist() == b.hashes.tolist()
        assert b.slices.tolist() == sorted(b.slices.tolist())


def test_points_drop_duplicates_and_take_few_bytes() -> None:
    rng = np.random.default_rng(1)
    slices = np.sort(rng.integers(0, 30_000, 1000))
    p = Points(np.concatenate([slices, slices]))
    assert len(p) == np.unique(slices).size
    assert len(pack_points([p], 8)) < 0.8 * len(p) + 32  # under a byte per point


def test_points_refuse_a_wrong_shape_and_trailing_bytes() -> None:
    blob = pack_points([Points(np.array([1, 5, 9]))], 8)
    with pytest.raises(FilterFormatError, match="variables"):
        unpack_points(blob, [0, 0], 8)
    with pytest.raises(FilterFormatError):
        unpack_points(blob, [1], 8)  # hashes the blob does not hold
    with pytest.raises(FilterFormatError, match="corrupted"):
        unpack_points(blob[:-5] + b"\x00" + blob[-4:], [0], 8)


@settings(max_examples=40)
@given(
    st.lists(st.integers(0, 2**61), min_size=1, max_size=200, unique=True),
    st.integers(4, 16),
    st.integers(0, 3),
)
def test_points_with_far_gaps_and_any_width(slices: list[int], width: int, columns: int) -> None:
    rng = np.random.default_rng(len(slices))
    hashes = rng.integers(0, 2**width, (columns, len(slices))).astype(np.uint16)
    p = Points(np.array(slices, np.int64), hashes)
    (back,) = unpack_points(pack_points([p], width), [columns], width)
    assert back.slices.tolist() == p.slices.tolist() and back.hashes.tolist() == p.hashes.tolist()


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(-(10**6), 10**6), st.integers(0, 500)), max_size=100))
def test_slice_runs_round_trip_and_map_to_time(pairs: list[tuple[int, int]]) -> None:
    runs = IntervalSet([a for a, _ in pairs], [a + n for a, n in pairs])
    wire = SliceRuns(-17, 250, runs)
    back = SliceRuns.from_bytes(wire.to_bytes())
    assert back.runs == runs and (back.base, back.quantum) == (-17, 250)
    time = back.to_time()
    for s, e in zip(runs.starts, runs.ends, strict=True):
        lo, hi = -17 + s * 250, -17 + (e + 1) * 250 - 1
        assert time.contains(np.array([lo, hi])).all()
        assert not time.contains(np.array([lo - 1])).any() or runs.contains(np.array([s - 1]))


def test_slice_runs_refuse_overlaps() -> None:
    good = SliceRuns(0, 10, IntervalSet([0, 10], [2, 12])).to_bytes()
    assert SliceRuns.from_bytes(good).runs == IntervalSet([0, 10], [2, 12])
    with pytest.raises(FilterFormatError):
        SliceRuns.from_bytes(good[:-6] + good[-4:])


def test_value_hashes_equal_values_alike_and_null_equals_nothing() -> None:
    ints = value_hashes(pa.array([1, 2, None, 1], pa.int64()), KeyKind.FLOAT, 16)
    floats = value_hashes(pa.array([1.0, 2.0, 3.0, float("nan")]), KeyKind.FLOAT, 16)
    assert ints[0] == ints[3] == floats[0] and ints[1] == floats[1]
    assert ints[2] == 0 and floats[3] == 0 and (ints[[0, 1, 3]] != 0).all()
    words = value_hashes(pa.array(["x", "y", None, "x"]), KeyKind.STRING, 8)
    assert words.max() < 256 and words[0] == words[3] and words[2] == 0
    with pytest.raises(ValueError, match="hash bits"):
        value_hashes(pa.array([1]), KeyKind.INT, 17)


@pytest.mark.parametrize("distinct", [1, 3, 40, 400])
def test_hashes_cost_their_bits_even_in_a_small_blob(distinct: int) -> None:
    """A node among many sends a few hundred points: packed hashes cost their width (or the
    index among few distinct values), without a compressor's help."""
    rng = np.random.default_rng(distinct)
    n, width = 300, 9
    slices = np.sort(rng.choice(20_000, n, replace=False))
    values = rng.choice(rng.choice(np.arange(1, 512), distinct, replace=False), n)
    p = Points(slices, values.reshape(1, n).astype(np.uint16))
    blob = pack_points([p], width)
    (back,) = unpack_points(blob, [1], width)
    assert back.slices.tolist() == p.slices.tolist() and back.hashes.tolist() == p.hashes.tolist()
    index_bits = max(1, (distinct - 1).bit_length())
    hash_bits = min(width, index_bits + distinct * width / n)
    step_bits = np.log2(20_000 / n) + 2  # Rice: log2 of the mean step, plus about 2
    assert len(blob) <= n * (hash_bits + step_bits) / 8 + 24, (len(blob), hash_bits)


@settings(max_examples=60)
@given(st.lists(st.integers(0, 1 << 20), min_size=1, max_size=200))
def test_the_rice_parameter_is_the_cheapest_near_the_means(steps: list[int]) -> None:
    from dfs_cer.filters import rice_kernels as rice
    from dfs_cer.filters.points import rice_parameter

    s = np.array(steps, np.uint64)
    k = rice_parameter(s)
    guess = int(max(0, min(40, np.floor(np.log2(max(1.0, float(s.mean()) * 0.69))))))
    assert rice.encoded_bits(s, np.int64(k)) <= rice.encoded_bits(s, np.int64(guess))


def test_a_few_long_jumps_do_not_inflate_every_step() -> None:
    """A node holding two time windows far apart: short steps inside them, one long jump."""
    from dfs_cer.filters.points import rice_parameter

    rng = np.random.default_rng(3)
    inside = rng.geometric(1 / 8, 60)
    slices = np.cumsum(np.concatenate([inside[:30], [50_000], inside[30:]]))
    blob = pack_points([Points(slices)], 8)
    assert rice_parameter(np.diff(slices).astype(np.uint64)) <= 4
    assert len(blob) < 60 * 5.5 / 8 + 11 + 24  # ~5 bits a short step, the jump escaped once


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-50, 50), st.integers(0, 5), st.integers(0, 3)),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 2),
)
def test_points_sort_and_drop_duplicates_by_slice_then_hashes(
    rows: list[tuple[int, int, int]], columns: int
) -> None:
    slices = np.array([r[0] for r in rows], np.int64)
    hashes = np.array([[r[1 + c] for r in rows] for c in range(columns)], np.uint16).reshape(
        columns, len(rows)
    )
    p = Points(slices, hashes)
    expected = sorted({(r[0], *r[1 : 1 + columns]) for r in rows})
    assert [(int(s), *(int(h) for h in p.hashes[:, i])) for i, s in enumerate(p.slices)] == (
        expected
    )
    assert p.hashes.dtype == np.uint16


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(2**63), 2**63 - 1),
    st.lists(st.one_of(st.integers(-1000, 1000), st.integers(-(2**63), 2**63 - 1)), max_size=8),
    st.one_of(st.integers(1, 1000), st.integers(1, 2**62)),
    st.data(),
)
def test_grid_times_is_the_exact_time_saturated_at_int64_s_ends(
    base: int, ids: list[int], quantum: int, data: st.DataObject
) -> None:
    extra = data.draw(st.integers(0, quantum - 1))
    got = grid_times(base, np.array(ids, np.int64), quantum, extra)
    want = [min(max(base + i * quantum + extra, -(2**63)), 2**63 - 1) for i in ids]
    assert got.tolist() == want and got.dtype == np.int64
