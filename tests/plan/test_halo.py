"""Halo logic: multiset subtraction of re-pulled candidates, per-point reach, and which rows
need neighbours for which variable."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import analyze, parse
from dfs_cer.plan.halo import around_points, subtract_rows

ROWS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None])), max_size=30)


@settings(max_examples=200)
@given(ROWS, st.data())
def test_subtract_rows_is_a_multiset_difference(
    values: list[tuple[int, str | None]], data: st.DataObject
) -> None:
    taken = (
        data.draw(st.lists(st.sampled_from(values), max_size=len(values), unique_by=None))
        if values
        else []
    )
    taken = [r for r in taken if Counter(taken)[r] <= Counter(values)[r]]  # a sub-multiset
    table = pa.table(
        {"i": [v[0] for v in values], "s": [v[1] for v in values]},
        schema=pa.schema([("i", pa.int64()), ("s", pa.string())]),
    )
    other = pa.table({"i": [v[0] for v in taken], "s": [v[1] for v in taken]}, schema=table.schema)
    keep = subtract_rows(table, other)
    left = Counter(zip(table.column("i").to_pylist(), table.column("s").to_pylist(), strict=True))
    left.subtract(Counter(taken))
    kept = Counter(v for v, k in zip(values, keep, strict=True) if k)
    assert kept == +left


def test_subtract_rows_removes_every_re_pulled_candidate() -> None:
    t = pa.table({"a": [3, 1, 2, 1], "b": ["x", "y", "z", "y"]})
    assert subtract_rows(t, t).tolist() == [False] * 4
    assert subtract_rows(t, t.slice(1, 1)).tolist() == [True, False, True, True]


@settings(max_examples=100)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30)), min_size=1, max_size=40),
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 3), st.integers(0, 3)),
        max_size=8,
    ),
)
def test_per_point_reach_is_the_union_of_single_reach_calls(
    rows: list[tuple[int, int]], points: list[tuple[int, int, int, int]]
) -> None:
    rows = sorted(rows)
    pid, t = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    points = sorted(points)
    ppid = np.array([p[0] for p in points], np.int64)
    pt = np.array([p[1] for p in points], np.int64)
    before = np.array([p[2] for p in points], np.int64)
    after = np.array([p[3] for p in points], np.int64)
    expected = np.zeros(len(rows), bool)
    for i in range(len(points)):  # a point asking for no neighbours still gets its tie group
        expected |= around_points(
            pid, t, ppid[i : i + 1], pt[i : i + 1], int(before[i]), int(after[i])
        )
    assert around_points(pid, t, ppid, pt, before, after).tolist() == expected.tolist()


def test_variable_reach_anchors_nested_and_unqualified_navigation() -> None:
    q = parse(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES PREV(x, 3) AS p ONE ROW PER MATCH "
        "PATTERN (A B+ C) WITHIN 10 DEFINE B AS B.x > PREV(LAST(A.x), 2), C AS NEXT(x, 2) > 0)"
    )
    reach = dict((v, (b, a)) for v, b, a in analyze(q).variable_reach)
    # MEASURES' unqualified PREV(x, 3) may read around any row; PREV(LAST(A.x), 2) around A's
    # rows; C's unqualified NEXT(x, 2) around C's
    assert reach == {"A": (3, 0), "B": (3, 0), "C": (3, 2)}
