"""The (value, window) key set of Naive-DFS and the DFS-V1/V2 ablations."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.errors import FilterFormatError
from dfs_cer.filters import JoinSet, KeyKind, WindowKeySet


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 10_000)), min_size=1, max_size=200),
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 10_000)), min_size=1, max_size=200),
    st.integers(1, 500),
    st.sampled_from([-1, 0, 1]),
)
def test_agrees_with_the_exact_join_set(
    built: list[tuple[int, int]], probed: list[tuple[int, int]], window: int, direction: int
) -> None:
    values, ts = (np.array(x, np.int64) for x in zip(*built, strict=True))
    pv, pt = (np.array(x, np.int64) for x in zip(*probed, strict=True))
    exact = JoinSet(window, KeyKind.INT)
    exact.add(values, ts)
    # two storage nodes each build half; the compute node merges them after a trip over the wire
    half = len(values) // 2
    parts = [WindowKeySet(window, KeyKind.INT), WindowKeySet(window, KeyKind.INT)]
    parts[0].add(values[:half], ts[:half])
    parts[1].add(values[half:], ts[half:])
    merged = WindowKeySet.from_bytes(WindowKeySet.union(parts).to_bytes())
    assert np.array_equal(
        merged.might_contain(pv, pt, direction), exact.contains(pv, pt, direction)
    )


def test_strings_and_nulls() -> None:
    s = WindowKeySet(10, KeyKind.STRING)
    s.add(pa.array(["a", "b", None]), [5, 25, 5])
    got = s.might_contain(pa.array(["a", "a", "b", None]), [15, 15, 15, 5], -1)
    assert got.tolist() == [True, True, False, False]
    assert len(s) == 2


def test_corrupt_buffers_raise_a_named_error() -> None:
    s = WindowKeySet(10, KeyKind.INT)
    s.add(np.array([1, 2]), [0, 100])
    buf = bytearray(s.to_bytes())
    buf[12] ^= 0xFF
    with pytest.raises(FilterFormatError, match="window key set"):
        WindowKeySet.from_bytes(bytes(buf))
    with pytest.raises(FilterFormatError, match="not a window key set"):
        WindowKeySet.from_bytes(b"DSWF" + bytes(40))
