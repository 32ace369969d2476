from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dfs_cer.filters import IntervalSet

pairs = st.lists(st.tuples(st.integers(-100, 100), st.integers(0, 30)), max_size=25)


def points(pairs_: list[tuple[int, int]]) -> set[int]:
    return {t for s, n in pairs_ for t in range(s, s + n + 1)}


def make(pairs_: list[tuple[int, int]]) -> IntervalSet:
    return IntervalSet([s for s, _ in pairs_], [s + n for s, n in pairs_])


@given(pairs, pairs)
def test_set_algebra_matches_python_sets(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    x, y = make(a), make(b)
    universe = np.arange(-150, 200)
    assert set(universe[x.contains(universe)]) == points(a)
    assert set(universe[x.union(y).contains(universe)]) == points(a) | points(b)
    assert set(universe[x.intersection(y).contains(universe)]) == points(a) & points(b)
    assert x.total_length() == len(points(a))
    # canonical form: sorted, disjoint, non-touching
    assert np.all(x.starts[1:] > x.ends[:-1] + 1)
    assert IntervalSet.from_bytes(x.to_bytes()) == x
    assert set(x.windows(7).tolist()) == {t // 7 for t in points(a)}


def test_eq1_around() -> None:
    s = IntervalSet.around([10, 15, 100], 0, 5)
    assert s.starts.tolist() == [10, 100] and s.ends.tolist() == [20, 105]
    assert IntervalSet().intersection(s).is_empty


@given(pairs, st.integers(-150, 150), st.integers(0, 120))
def test_clip_keeps_the_points_inside_a_range(a: list[tuple[int, int]], lo: int, n: int) -> None:
    x, hi = make(a), lo + n
    part = x.clip(lo, hi)
    assert part == x.intersection(IntervalSet([lo], [hi]))  # canonical: equal as arrays
    assert set(range(lo, hi + 1)) & points(a) == points([(s, e - s) for s, e in part_pairs(part)])
    assert IntervalSet.from_bytes(part.to_bytes()) == part
    assert len(part) <= len(x)


def part_pairs(x: IntervalSet) -> list[tuple[int, int]]:
    return list(zip(x.starts.tolist(), x.ends.tolist(), strict=True))


@given(pairs, st.integers(0, 40))
def test_bridging_fills_exactly_the_holes_up_to_the_gap(a: list[tuple[int, int]], gap: int) -> None:
    x = make(a)
    wide = x.bridged(gap)
    covered = points(a)
    holes = {
        t
        for s, e in zip(x.ends[:-1].tolist(), x.starts[1:].tolist(), strict=True)
        if e - s - 1 <= gap
        for t in range(s + 1, e)
    }
    universe = np.arange(-150, 250)
    assert set(universe[wide.contains(universe)]) == covered | holes
    assert IntervalSet(wide.starts, wide.ends) == wide  # canonical: sorted, merged
    assert len(wide) <= len(x)
