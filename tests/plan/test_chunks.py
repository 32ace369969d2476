"""Time chunks of a dense input give exactly the single run's matches: every SKIP mode, ALL ROWS
variants, PARTITION BY, PREV/NEXT, ties, duplicates, and chunks narrower than the window (so a
match, and the fix-up chain, crosses several chunks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dfs_cer.config import QueryConfig
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.match.chunked import run_split
from dfs_cer.match.rowpattern.engine import run_row_pattern
from dfs_cer.plan.chunks import NEG, ChunkPlan, assign, plan_chunks, split_reason, time_quantiles
from dfs_cer.query import analyze, parse

SKIPS = [
    "",
    "AFTER MATCH SKIP TO NEXT ROW",
    "AFTER MATCH SKIP TO FIRST B",
    "AFTER MATCH SKIP TO LAST B",
    "AFTER MATCH SKIP PAST LAST ROW",
]
ROWS = [
    "ONE ROW PER MATCH",
    "ALL ROWS PER MATCH",
    "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
    "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
]
PATTERNS = [
    ("A B+ C", "A.v < 3", "B.v >= A.v", "C.v > 5"),
    ("A B* C?", "A.v < 5", "B.v > 2", "C.v = 0"),
    ("A+ B", "A.v < 6", "B.v >= 6", "TRUE"),
    ("A B C", "A.v < PREV(A.v)", "B.v > PREV(B.v, 2)", "C.v < NEXT(C.v)"),
    ("A B+", "A.v > NEXT(A.v, 2)", "B.v <> PREV(B.v)", ""),
    ("(A | B)+ C", "A.v % 2 = 0", "B.v > 6", "C.v < 2"),
    ("A* B", "A.v > 3", "B.v < 4", "TRUE"),
    # anchors hold only at the input's edges, never at a chunk's; empty matches at every row
    ("^ A B*", "A.v < 5", "B.v > 2", ""),
    ("A+ B $", "A.v > 1", "B.v < 7", ""),
    ("(^ A | B) C*", "A.v < 4", "B.v > 6", "C.v < 5"),
    ("A* B?", "A.v < 5", "B.v > 7", ""),
]


def _sql(
    pattern: tuple[str, str, str, str], skip: str, rows: str, partition: bool, window: int
) -> str:
    p, a, b, c = pattern
    part = "PARTITION BY g" if partition else ""
    measures = "FIRST(ts) AS first_ts, LAST(ts) AS last_ts, COUNT(*) AS n, MATCH_NUMBER() AS mn"
    if rows != "ONE ROW PER MATCH":
        measures += ", CLASSIFIER() AS cls"
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE ({part} ORDER BY ts MEASURES {measures} {rows} "
        f"{skip} PATTERN ({p}) WITHIN {window} SECONDS DEFINE A AS {a}, B AS "
        f"{b}{f', C AS {c}' if 'C' in p else ''})"
    )


def _canonical(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(repr(v) for v in r.values()) for r in t.to_pylist())


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(0, 120))
    step = draw(st.sampled_from([0, 1, 2]))
    ts = (
        np.cumsum(
            np.array(
                draw(st.lists(st.integers(0, 3 if step else 1), min_size=n, max_size=n)), np.int64
            )
        )
        if n
        else np.zeros(0, np.int64)
    )
    v = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    g = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    perm = draw(st.permutations(list(range(n))))
    table = pa.table(
        {
            "ts": pa.array(ts[perm] if n else ts, pa.int64()),
            "v": pa.array([v[i] for i in perm], pa.int64()),
            "g": pa.array([g[i] for i in perm], pa.int64()),
        }
    )
    if n and draw(st.booleans()):  # duplicates
        table = pa.concat_tables([table, table.slice(0, draw(st.integers(0, n)))])
    pattern = draw(st.sampled_from(PATTERNS))
    skip = draw(st.sampled_from(SKIPS))
    rows = draw(st.sampled_from(ROWS))
    partition = draw(st.booleans()) and not any(
        nav in "".join(pattern) for nav in ("PREV", "NEXT", "^", "$")
    )
    window = draw(st.integers(1, 12))
    cuts = sorted(set(draw(st.lists(st.integers(0, int(ts.max()) + 2 if n else 2), max_size=12))))
    # times anywhere in int64: the same rows moved to either end of the range
    top = int(ts.max()) + 2 if n else 2
    base = draw(st.sampled_from([0, 0, 2**62, 2**63 - 1 - top, -(2**63)]))
    if base:
        table = table.set_column(0, "ts", pc.add(table.column("ts"), base))
        cuts = [c + base for c in cuts]
    return table, _sql(pattern, skip, rows, partition, window), cuts


def _run(table: pa.Table, sql: str, cuts: list[int]) -> None:
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    if ("FIRST B" in sql or "LAST B" in sql) and ("B*" in sql or "B?" in sql or "| B" in sql):
        return  # a skip to a label the match may lack is an error in both runs
    try:
        single = run_row_pattern(table, analysis).table
    except Exception as e:
        with pytest.raises(type(e)):
            run_split(table, analysis, _plan(analysis, table, cuts))
        return
    assert split_reason(analysis) is None
    split, _ = run_split(table, analysis, _plan(analysis, table, cuts))
    assert _canonical(split) == _canonical(single), sql


def _plan(analysis, table: pa.Table, cuts: list[int]) -> ChunkPlan:
    ts = np.asarray(table.column("ts").to_numpy(), np.int64)
    cuts = [c for c in cuts if c > NEG]
    base = plan_chunks(
        analysis,
        mins=[int(ts.min()) if ts.size else 0],
        maxs=[int(ts.max()) if ts.size else 0],
        rows=[ts.size],
        chunks=4,
    )
    assert base.mode == "time"
    starts = np.array([NEG, *cuts], np.int64)
    # a tight lead/tail: the fix-up (widening) must cope when PREV/NEXT reach past it
    return ChunkPlan(
        "time",
        starts,
        lead=min(base.lead, 1),
        tail=base.tail - (1 if base.tail > (analysis.window_units or 0) else 0),
        first=base.first,
        last=base.last,
    )


@settings(max_examples=300, deadline=None)
@given(cases())
@example(
    (
        pa.table(
            {
                "ts": pa.array([0, 1, 2, 3, 4, 5], pa.int64()),
                "v": pa.array([1, 4, 6, 2, 7, 8], pa.int64()),
                "g": pa.array([0] * 6, pa.int64()),
            }
        ),
        _sql(PATTERNS[0], "", ROWS[0], False, 10),
        [2, 3, 4],
    )
)
def test_split_equals_single_run(case: tuple[Any, ...]) -> None:
    table, sql, cuts = case
    _run(table, sql, cuts)


def test_a_chunk_from_int64_s_last_time_finds_nothing_twice() -> None:
    """A chunk starting at int64's last time owned it alone, and so did the chunk before it (an
    owned range ending there holds it): the empty matches at that time were reported twice."""
    top = 2**63 - 1
    table = pa.table(
        {
            "ts": pa.array([top - 9, top - 5, top - 1, top, top], pa.int64()),
            "v": pa.array([3, 6, 1, 3, 6], pa.int64()),
            "g": pa.array([0] * 5, pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS mn, "
        "count(*) AS n ONE ROW PER MATCH PATTERN ((A B)?) WITHIN 3 "
        "DEFINE A AS v > 2, B AS v > 5)"
    )
    _run(table, sql, [top - 5, top])


def test_chain_across_many_chunks() -> None:
    """Back-to-back long matches: each chunk's fresh run is wrong,
    the fix-up chain crosses them all."""
    n = 400
    table = pa.table(
        {
            "ts": pa.array(np.arange(n), pa.int64()),
            "v": pa.array(np.arange(n) % 7, pa.int64()),
            "g": pa.array(np.zeros(n, np.int64)),
        }
    )
    sql = _sql(("A+ B", "A.v < 6", "B.v >= 6", "TRUE"), "", "ONE ROW PER MATCH", False, 30)
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    plan = ChunkPlan(
        "time", np.array([NEG, *range(3, n, 3)], np.int64), tail=30, first=0, last=n - 1
    )
    split, reruns = run_split(table, analysis, plan)
    assert _canonical(split) == _canonical(run_row_pattern(table, analysis).table)
    assert reruns > 0


def test_all_matches_split() -> None:
    rng = np.random.default_rng(3)
    n = 300
    table = pa.table(
        {
            "ts": pa.array(np.sort(rng.integers(0, 200, n)), pa.int64()),
            "v": pa.array(rng.integers(0, 10, n), pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ALL MATCHES "
        "PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v = 1, B AS B.v = 2)"
    )
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    plan = ChunkPlan("time", np.array([NEG, 30, 31, 90, 150], np.int64), tail=5, first=0, last=199)
    split, _ = run_split(table, analysis, plan)
    assert _canonical(split) == _canonical(run_cer(table, analysis).table)


def test_unsplittable_patterns_say_why() -> None:
    schema = pa.schema([("ts", pa.int64()), ("v", pa.int64()), ("g", pa.int64())])
    cfg = QueryConfig(integer_time_unit="s")
    no_window = analyze(
        parse(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS a PATTERN (A B) "
            "DEFINE A AS A.v = 1, B AS B.v = 2)"
        ),
        schema,
        cfg,
    )
    assert "WITHIN" in (split_reason(no_window) or "")
    plan = plan_chunks(no_window, mins=[0], maxs=[100], rows=[100], chunks=4)
    assert plan.mode == "single" and plan.chunks == 1
    numbered = analyze(
        parse(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS m "
            "PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v = 1, B AS B.v = 2)"
        ),
        schema,
        cfg,
    )
    assert split_reason(numbered) is None, (
        "a measure MATCH_NUMBER() alone is renumbered after the chunks"
    )
    for other in (
        "MEASURES MATCH_NUMBER() + 1 AS m PATTERN (A B) "
        "WITHIN 5 SECONDS DEFINE A AS A.v = 1, B AS B.v = 2",
        "MEASURES A.v AS m PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v = 1, B AS "
        "MATCH_NUMBER() > 2",
    ):
        expr = analyze(parse(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {other})"), schema, cfg)
        assert "MATCH_NUMBER" in (split_reason(expr) or ""), other
    nav = analyze(
        parse(
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g ORDER BY ts MEASURES A.v AS a "
            "PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v > PREV(A.v), B AS B.v = 2)"
        ),
        schema,
        cfg,
    )
    plan = plan_chunks(nav, mins=[0], maxs=[100], rows=[100], chunks=4)
    assert plan.mode == "partition" and "PREV" in (plan.reason or "")


def test_assign_covers_read_ranges() -> None:
    plan = ChunkPlan("time", np.array([NEG, 10, 20], np.int64), lead=2, tail=3)
    rows, chunk = assign(np.array([0, 8, 9, 10, 12, 13, 14, 22, 23, 30]), plan)
    got = {(int(r), int(c)) for r, c in zip(rows, chunk, strict=True)}
    # chunk 0 reads (-inf, 13], chunk 1 reads [8, 23], chunk 2 reads [18, inf)
    want = {
        (0, 0),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
        (3, 0),
        (3, 1),
        (4, 0),
        (4, 1),
        (5, 0),
        (5, 1),
        (6, 1),
        (7, 1),
        (7, 2),
        (8, 1),
        (8, 2),
        (9, 2),
    }
    assert got == want


def test_assign_with_a_tail_past_int64() -> None:
    """A window as wide as the type plus NEXT's reach is a tail past int64 (it overflowed numpy):
    read ranges stop at the type's ends, and a lead past 2**63 still reads back exactly."""
    pos = 2**63 - 1
    plan = ChunkPlan("time", np.array([NEG, -5, 10], np.int64), lead=2**63 + 4, tail=2**63 + 7)
    rows, chunk = assign(np.array([NEG, -6, 0, 11, pos], np.int64), plan)
    # every chunk reads to int64's end; chunk 2 (from 10) reads back to 6 - 2**63, not to NEG
    assert {(int(r), int(c)) for r, c in zip(rows, chunk, strict=True)} == {
        (r, c) for r in range(5) for c in range(3)
    } - {(0, 2)}
    # a lead of 2**63 - 1 from 10 reads back to 11 - 2**63 exactly
    narrow = ChunkPlan("time", np.array([NEG, 10], np.int64), lead=pos, tail=0)
    rows, chunk = assign(np.array([NEG, 10 - pos - 1, 10 - pos], np.int64), narrow)
    assert {(int(r), int(c)) for r, c in zip(rows, chunk, strict=True)} == {
        (0, 0),
        (1, 0),
        (2, 0),
        (2, 1),
    }


def test_quantiles_balance_rows() -> None:
    cuts = time_quantiles(np.array([0, 100]), np.array([99, 199]), np.array([1000, 3000]), 4)
    assert cuts.size == 3 and cuts[0] < 100 < cuts[1] < cuts[2]


@pytest.mark.parametrize("skip", ["", "AFTER MATCH SKIP TO LAST B", "AFTER MATCH SKIP TO FIRST C"])
def test_reruns_stop_where_the_runs_meet(skip: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide chunks: a re-run from the previous chunk's last match end meets the fresh run within a
    window or two, and only the rows before that are recomputed (the result is the same)."""
    import dfs_cer.match.chunked as chunked

    met = []
    real = chunked.rerun_chunk

    def spy(*args: object, **kw: object) -> chunked.ChunkResult:
        out = real(*args, **kw)  # type: ignore[arg-type]
        met.append(out.since is not None)
        return out

    monkeypatch.setattr(chunked, "rerun_chunk", spy)
    rng = np.random.default_rng(5)
    n = 3000
    table = pa.table(
        {
            "ts": pa.array(np.arange(n), pa.int64()),
            "v": pa.array(rng.integers(0, 10, n), pa.int64()),
            "g": pa.array(np.zeros(n, np.int64)),
        }
    )
    pattern = ("A B+ C", "A.v < 5", "B.v > 1", "C.v > 6")
    sql = _sql(pattern, skip, "ONE ROW PER MATCH", False, 25)
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    plan = ChunkPlan(
        "time", np.array([NEG, *range(300, n, 300)], np.int64), tail=25, first=0, last=n - 1
    )
    split, reruns = run_split(table, analysis, plan)
    assert _canonical(split) == _canonical(run_row_pattern(table, analysis).table)
    assert reruns > 0 and any(met), "some re-run met the fresh run before the chunk's end"


def _same(table: pa.Table, sql: str, plan: ChunkPlan, config: QueryConfig | None = None) -> None:
    analysis = analyze(parse(sql), table.schema, config or QueryConfig(integer_time_unit="s"))
    assert split_reason(analysis) is None
    split, _ = run_split(table, analysis, plan)
    assert _canonical(split) == _canonical(run_row_pattern(table, analysis).table)


def test_a_prefix_rerun_keeps_the_rows_next_reads() -> None:
    """Found by review: a re-run's prefix cut NEXT's rows off past a sparse stretch."""
    dense = 2000
    ts = list(range(9, 22)) + [40, 41] + [-100 + i % 20 for i in range(dense)]
    v = [1] * 11 + [0, 0] + [5, 5] + [9] * dense
    w = [0] + [1] * 10 + [0, 0] + [0, 0] + list(range(dense))
    table = pa.table(
        {"ts": pa.array(ts, pa.int64()), "v": pa.array(v, pa.int64()), "w": pa.array(w, pa.int64())}
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS f, LAST(ts) AS "
        "l ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) WITHIN 2 SECONDS "
        "DEFINE A AS A.v = 1, B AS B.v < NEXT(B.v, 3) OR B.w = 1)"
    )
    _same(
        table,
        sql,
        ChunkPlan("time", np.array([NEG, -90, 10], np.int64), tail=5, first=-100, last=41),
    )


def test_nanosecond_windows_and_far_prev_rows() -> None:
    """Found by review: widening a nanosecond plan overflowed int64."""
    s = 10**9
    ts = [0, 86400 * s, 86400 * s + s, 86400 * s + 2 * s]
    table = pa.table(
        {"ts": pa.array(ts, pa.timestamp("ns")), "v": pa.array([1, 2, 3, 4], pa.int64())}
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS f, "
        "LAST(ts) AS l ONE ROW PER MATCH PATTERN (A B) WITHIN 1 HOUR "
        "DEFINE A AS A.v > PREV(A.v, 2), B AS TRUE)"
    )
    _same(
        table,
        sql,
        ChunkPlan(
            "time",
            np.array([NEG, 86400 * s + s // 2], np.int64),
            lead=1,
            tail=3600 * s,
            first=ts[0],
            last=ts[-1],
        ),
        QueryConfig(),
    )


def test_list_partition_values() -> None:
    """Found by review: PARTITION BY a list column made the reports' keys unhashable."""
    table = pa.table(
        {
            "ts": pa.array([0, 1, 2, 3], pa.int64()),
            "v": pa.array([1, 2, 1, 2], pa.int64()),
            "g": pa.array([[1], [1], [1], [1]], pa.list_(pa.int64())),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g ORDER BY ts MEASURES FIRST(ts) AS "
        "f, LAST(ts) AS l ONE ROW PER MATCH PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v "
        "= 1, B AS B.v = 2)"
    )
    _same(table, sql, ChunkPlan("time", np.array([NEG, 1], np.int64), tail=5, first=0, last=3))


ANCHORED = (
    "SELECT * FROM t MATCH_RECOGNIZE ({part} ORDER BY ts MEASURES FIRST(ts) AS f, LAST(ts) AS l, "
    "MATCH_NUMBER() AS m {rows} PATTERN ({pattern}) WITHIN 5 SECONDS DEFINE A AS A.v < 5{more})"
)


@pytest.mark.parametrize(
    ("pattern", "rows"),
    [
        ("^ A", "ONE ROW PER MATCH"),
        ("A $", "ONE ROW PER MATCH"),
        ("(^ A | B)", "ONE ROW PER MATCH"),
        ("A B* $", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"),
        ("A*", "ALL ROWS PER MATCH SHOW EMPTY MATCHES"),
    ],
)
def test_anchors_hold_at_the_input_edges_not_at_chunk_edges(pattern: str, rows: str) -> None:
    """A chunk that leaves out rows before (after) its own holds no ``^`` (``$``) at its edge: one
    match at the input's first row for ``^ A``, not one per chunk."""
    n = 60
    v = np.where(
        np.isin(np.arange(n), [0, 14, 15, 20, 29, 30, 35, 44, 45, 50, 59]),
        1,
        np.random.default_rng(0).integers(5, 10, n),
    )
    table = pa.table({"ts": pa.array(np.arange(n), pa.int64()), "v": pa.array(v, pa.int64())})
    sql = ANCHORED.format(
        part="", rows=rows, pattern=pattern, more=", B AS B.v = 9" if "B" in pattern else ""
    )
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    plan = ChunkPlan("time", np.array([NEG, 15, 30, 45], np.int64), tail=5, first=0, last=n - 1)
    assert [plan.cut(k) for k in range(4)] == [
        (False, True),
        (True, True),
        (True, True),
        (True, False),
    ]
    split, _ = run_split(table, analysis, plan)
    single = run_row_pattern(table, analysis).table
    assert _canonical(split) == _canonical(single)
    if pattern == "^ A":
        assert single.num_rows == 1


def test_anchor_plans_need_exact_edges_and_whole_partitions() -> None:
    schema = pa.schema([("ts", pa.int64()), ("v", pa.int64()), ("g", pa.int64())])
    cfg = QueryConfig(integer_time_unit="s")
    anchored = analyze(
        parse(
            ANCHORED.format(part="", rows="", pattern="^ A", more="").replace(
                "MATCH_NUMBER() AS m", "COUNT(*) AS c"
            )
        ),
        schema,
        cfg,
    )
    assert plan_chunks(anchored, mins=[0], maxs=[1000], rows=[1000], chunks=4).mode == "time"
    bounds_only = plan_chunks(anchored, mins=[0], maxs=[1000], rows=[1000], chunks=4, exact=False)
    assert bounds_only.mode == "single" and "exact first and last time" in (
        bounds_only.reason or ""
    )
    partitioned = analyze(
        parse(
            ANCHORED.format(part="PARTITION BY g", rows="", pattern="A $", more="").replace(
                "MATCH_NUMBER() AS m", "COUNT(*) AS c"
            )
        ),
        schema,
        cfg,
    )
    plan = plan_chunks(partitioned, mins=[0], maxs=[1000], rows=[1000], chunks=4)
    assert plan.mode == "partition" and "^ or $ under PARTITION BY" in (plan.reason or "")


EMPTY_MATCH_ROWS = [
    "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
    "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
    "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
    "ONE ROW PER MATCH",
]


@pytest.mark.parametrize("rows", EMPTY_MATCH_ROWS)
@pytest.mark.parametrize("cuts", [[], [1], [1, 2]])
@pytest.mark.parametrize("partition", [False, True])
def test_empty_matches_keep_their_match_numbers(
    rows: str, cuts: list[int], partition: bool
) -> None:
    """Found by hypothesis: an empty match is a match (it has a MATCH_NUMBER()) even where the
    relation shows no row of it (OMIT EMPTY MATCHES, WITH UNMATCHED ROWS); the split run numbered
    the next match as if it were not there."""
    v = [0, 5, 8, 0, 0, 5, 0, 8, 5, 8]
    table = pa.table(
        {
            "ts": pa.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3], pa.int64()),
            "v": pa.array(v, pa.int64()),
            "g": pa.array([0, 0, 0, 0, 1, 1, 1, 0, 1, 1], pa.int64()),
        }
    )
    sql = _sql(PATTERNS[-1], "", rows, partition, 1)
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    single = run_row_pattern(table, analysis).table
    split, _ = run_split(table, analysis, _plan(analysis, table, cuts))
    assert _canonical(split) == _canonical(single), sql
    numbers = set(split.column("mn").drop_null().to_pylist())
    if rows == "ONE ROW PER MATCH" or "SHOW" in rows:
        assert numbers == set(range(1, max(numbers) + 1))  # a row per match, empty ones too
    else:  # the empty match at v = 5 (row 1) has no row, but its number is taken
        assert 2 not in numbers and 3 in numbers


def test_the_example_empty_match_is_match_two() -> None:
    """The hypothesis example: ts all 0, no cuts; row 1 (v = 5) is match 2, the next is 3."""
    table = pa.table(
        {
            "ts": pa.array([0] * 5, pa.int64()),
            "v": pa.array([0, 5, 8, 0, 0], pa.int64()),
            "g": pa.array([0] * 5, pa.int64()),
        }
    )
    sql = _sql(PATTERNS[-1], "", "ALL ROWS PER MATCH WITH UNMATCHED ROWS", False, 1)
    analysis = analyze(parse(sql), table.schema, QueryConfig(integer_time_unit="s"))
    split, _ = run_split(table, analysis, _plan(analysis, table, []))
    assert [(r["v"], r["mn"], r["cls"]) for r in split.to_pylist()] == [
        (0, 1, "A"),
        (5, None, None),
        (8, 3, "B"),
    ]  # (the last two rows repeat the first: the engine drops duplicate events)


def test_a_chunk_short_of_rows_for_prev_says_the_time_in_the_column_s_type() -> None:
    """A chunk that read too few rows before it for PREV says so (the split re-runs it reading
    further), with the time written as the time column's values are."""
    from dfs_cer.match.chunked import run_chunk

    base = 1_704_067_200  # 2024-01-01 00:00:00 in seconds
    table = pa.table(
        {
            "ts": pa.array(np.arange(base, base + 200, dtype=np.int64), pa.timestamp("s")),
            "v": pa.array(np.arange(200) % 7, pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS a ONE ROW PER MATCH "
        "PATTERN (A B) WITHIN INTERVAL '5' SECOND DEFINE A AS A.v > PREV(A.v), B AS B.v = 2)"
    )
    analysis = analyze(parse(sql), table.schema)
    plan = ChunkPlan(
        "time", np.array([NEG, base + 100], np.int64), lead=0, tail=5, first=base, last=base + 199
    )
    result = run_chunk(table.slice(100), analysis, plan, 1)
    assert result.short == "fewer than 1 rows before time 2024-01-01 00:01:40 for PREV"
