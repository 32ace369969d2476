"""Times anywhere in int64, gaps of any size: the saturating arithmetic, the interval sets and
slice grids built on it, and the CER engine, against Python's unbounded integers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.config import Config, QueryConfig
from dfs_cer.events.saturate import MAX, MIN, after, before, minus, plus, shift, span
from dfs_cer.filters.intervals import IntervalSet
from dfs_cer.filters.points import SliceRuns, slice_ids
from dfs_cer.plan.narrow import MAX_SLICE, Grid
from tests.fixtures.timeline import compact

EDGES = [MIN, MIN + 1, -(2**62), -1, 0, 1, 2**61, 2**62, MAX - 1, MAX]
times = st.one_of(
    st.integers(MIN, MAX),
    st.builds(lambda e, d: min(MAX, max(MIN, e + d)), st.sampled_from(EDGES), st.integers(-9, 9)),
)


def clamp(x: int) -> int:
    return min(MAX, max(MIN, x))


@given(times, times, st.integers(0, 2**62), st.integers(0, 3))
def test_saturating_arithmetic_equals_unbounded_integers(t: int, u: int, d: int, g: int) -> None:
    assert int(plus(t, d)) == clamp(t + d) and int(minus(t, d)) == clamp(t - d)
    assert int(shift(t, -d)) == clamp(t - d) and int(shift(t, MIN)) == clamp(t + MIN)
    lo, hi = min(t, u), max(t, u)
    assert int(span(lo, hi)) == hi - lo
    assert bool(after(u, t, g)) == (u >= t + g) and bool(before(u, t, g)) == (u <= t - g)


def _points(s: IntervalSet) -> set[int]:
    return {
        x for a, b in zip(s.starts.tolist(), s.ends.tolist(), strict=True) for x in range(a, b + 1)
    }


intervals = st.lists(
    st.tuples(st.sampled_from([MIN, -(2**62), 0, MAX - 40]), st.integers(0, 30), st.integers(0, 9)),
    max_size=6,
).map(lambda xs: IntervalSet([b + o for b, o, _ in xs], [b + o + n for b, o, n in xs]))


@given(intervals, intervals, st.sampled_from([0, 1, 5, 2**62]), st.integers(0, 3))
def test_interval_sets_at_the_ends_of_int64(a: IntervalSet, b: IntervalSet, w: int, g: int) -> None:
    pa_, pb = _points(a), _points(b)
    assert _points(a.union(b)) == pa_ | pb
    assert _points(a.intersection(b)) == pa_ & pb
    assert a.total_length() == len(pa_)
    assert IntervalSet.from_bytes(a.to_bytes()) == a
    assert _points(a.bridged(g)) >= pa_
    probe = np.array(sorted(pa_ | pb | {MIN, MAX}), np.int64)
    assert a.contains(probe).tolist() == [int(x) in pa_ for x in probe]
    if w <= 5:  # Eq. 1 around each time, clipped to int64 (no time lies beyond it)
        ts = sorted(pa_)[:5]
        near = IntervalSet.around(ts, -w, w)
        assert _points(near) == {clamp(t + d) for t in ts for d in range(-w, w + 1)}


@given(st.sampled_from([MIN, -1, 0, 2**62]), st.integers(1, 2**62), st.integers(1, 5))
def test_slice_grid_covers_any_span(base: int, window: int, runs: int) -> None:
    grid = Grid.of(base, window, MAX)  # rows from base to int64's end
    ids = grid.slices(np.array([base, MAX], np.int64))
    assert 0 <= int(ids[0]) <= int(ids[1]) < MAX_SLICE
    assert ids.tolist() == [(t - base) // grid.quantum for t in (base, MAX)]
    # runs far apart (gaps of 2**40 slices and more) travel and map back to time exactly
    starts = np.array([k * (MAX_SLICE // 8) for k in range(runs)], np.int64)
    sent = SliceRuns(base, grid.quantum, IntervalSet(starts, starts + 1))
    back = SliceRuns.from_bytes(sent.to_bytes())
    assert back.runs == sent.runs
    q = grid.quantum  # slices past int64's end end there: no time lies beyond it
    assert back.to_time() == IntervalSet(
        [clamp(base + int(s) * q) for s in starts],
        [clamp(base + (int(s) + 2) * q - 1) for s in starts],
    )
    assert slice_ids(np.array([MAX]), base, grid.quantum).tolist() == [int(ids[1])]


QUERIES = [
    "PARTITION BY k ORDER BY ts MEASURES A.ts AS a, B.ts AS b ALL MATCHES "
    "PATTERN (A N*? B) WITHIN 5 DEFINE A AS A.v = 1, B AS B.v = 2",
    "ORDER BY ts MEASURES A.ts AS a, C.ts AS c ALL MATCHES "
    "PATTERN (A ~B C) WITHIN 5 DEFINE A AS A.v = 1, B AS B.v = 0, C AS C.v = 2",
    "ORDER BY ts MEASURES A.ts AS a, LAST(B.ts) AS b ALL MATCHES "
    "PATTERN (A N*? B+ N*? C) WITHIN 6 DEFINE A AS A.v = 1, B AS B.v = 2, C AS C.v = 3",
    "ORDER BY ts MEASURES A.ts AS a, B.ts AS b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A N*? B) WITHIN 5 DEFINE A AS A.v = 1, B AS B.v = 2",
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 1)), max_size=40),
    st.sampled_from([MIN, -(2**62), 2**61, 2**62, MAX - 200]),
    st.sampled_from([2**40, 2**56, 2**63]),
    st.sampled_from(QUERIES),
)
def test_the_cer_engine_matches_anywhere_in_int64(
    rows: list[tuple[int, int, int]], base: int, gap: int, body: str
) -> None:
    """The engines compare spans, so moving every time by one amount, or widening a gap already
    longer than the window, changes no match."""
    ts, at = [], base
    for i, (step, _, _) in enumerate(rows):
        at = clamp(at + (gap if i == len(rows) // 2 else step))
        ts.append(at)
    table = pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "v": pa.array([v for _, v, _ in rows], pa.int64()),
            "k": pa.array([k for *_, k in rows], pa.int64()),
        }
    )
    sql = f"SELECT * FROM t MATCH_RECOGNIZE ({body})"
    small = compact(ts, 6)
    back = {v: k for k, v in small.items()}
    shortened = table.set_column(0, "ts", pa.array([small[t] for t in ts], pa.int64()))
    config = Config(query=QueryConfig(dedup=False))

    def canonical(t: pa.Table, undo: dict[int, int] | None = None) -> list[Any]:
        return sorted(
            repr(
                {
                    k: (undo[v] if undo and isinstance(v, int) and k != "k" else v)
                    for k, v in r.items()
                }
            )
            for r in t.to_pylist()
        )

    expected = canonical(match_recognize(shortened, sql, config=config), back)
    assert canonical(match_recognize(table, sql, config=config)) == expected
