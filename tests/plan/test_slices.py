"""Time slices of a query whose matches depend only on their own rows: the union of the slices'
owned matches is the query's relation, whatever the data and the number of slices (the Spark data
source reads such a query as slices, one executor task each)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.config import MatcherConfig
from dfs_cer.local import run_outer
from dfs_cer.match.sliced import match_slice
from dfs_cer.plan.slices import FIRST, PAST_LAST, slice_reason, time_slices
from dfs_cer.query import analyze, parse
from dfs_cer.query.parser import parse_statement

SPLIT = [
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b, C.id AS c "
    "ALL MATCHES PATTERN (A B C) WITHIN 6 DEFINE A AS A.type = 'A', B AS B.type = 'B', "
    "C AS C.type = 'C' AND C.v > A.v)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(A.id) AS a, "
    "count(B.*) AS nb, LAST(C.id) AS c ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A B+ C) WITHIN 8 DEFINE A AS A.type = 'A', B AS B.type <> 'C', C AS C.type = 'C')",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS cls "
    "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A {- N* -} B) WITHIN 5 "
    "DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v >= A.v)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(id) AS first, "
    "count(*) AS n, sum(B.v) AS s ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A? B*) WITHIN 4 DEFINE A AS A.type = 'A', B AS B.v > 3)",
    # a leading negation looks back from the match's last row, before its first
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, C.id AS c ALL MATCHES "
    "PATTERN (~B A C) WITHIN 4 DEFINE A AS A.type = 'A', B AS B.type = 'B', C AS C.type = 'C')",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b ALL MATCHES "
    "PATTERN (A B) WITHIN 3 DEFINE A AS A.type = 'A', B AS B.type = 'B') AS mr "
    "WHERE mr.a < mr.b + 100",
]


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@st.composite
def logs(draw: Any) -> pa.Table:
    n = draw(st.integers(0, 120))
    steps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))  # 0: a tie on time
    return pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "ts": np.cumsum(np.array(steps, np.int64)),
            "k": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
            or pa.array([], pa.int64()),
            "type": draw(st.lists(st.sampled_from("ABCN"), min_size=n, max_size=n))
            or pa.array([], pa.string()),
            "v": draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
            or pa.array([], pa.int64()),
        }
    )


@pytest.mark.parametrize("sql", SPLIT)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs(), count=st.integers(2, 9))
def test_the_slices_matches_are_the_query_s(sql: str, log: pa.Table, count: int) -> None:
    _same(sql, log, count, MatcherConfig())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs(), count=st.integers(2, 9))
def test_maximal_kleene_sets_are_the_same_in_slices(log: pa.Table, count: int) -> None:
    """Whether an A+ set is maximal depends on A events before the match's first row."""
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.id) AS fa, LAST(A.id) AS "
        "la, B.id AS b ALL MATCHES PATTERN (A+ B) WITHIN 5 DEFINE A AS A.type = 'A', "
        "B AS B.type = 'B')"
    )
    _same(sql, log, count, MatcherConfig(kleene="maximal"))


def _same(sql: str, log: pa.Table, count: int, matcher: MatcherConfig) -> None:
    query = parse(sql)
    analysis = analyze(query, log.schema)
    assert slice_reason(query, analysis, parse_statement(sql).simple) is None
    want = match_recognize(log, sql, kleene=matcher.kleene)
    if log.num_rows == 0:
        return
    ts = log.column("ts").to_numpy()
    pieces = time_slices(int(ts.min()), int(ts.max()), int(analysis.window_units or 0), count)
    got = pa.concat_tables(
        [run_outer(query, match_slice(log, analysis, p, matcher)) for p in pieces]
    )
    assert _rows(got) == _rows(want)


def test_the_reviewer_s_cases() -> None:
    """A B just before a slice negates a match in it; an earlier A makes a set not maximal."""
    neg = pa.table(
        {"id": list(range(8)), "ts": [0, 2, 4, 6, 8, 10, 12, 14], "type": list("NNBACNNN"),
         "k": [0] * 8, "v": [0] * 8}
    )  # fmt: skip
    _same(SPLIT[4], neg, 3, MatcherConfig())
    maxi = pa.table(
        {"id": list(range(5)), "ts": [0, 3, 5, 7, 9], "type": list("NAABN"), "k": [0] * 5,
         "v": [0] * 5}
    )  # fmt: skip
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.id) AS fa, LAST(A.id) AS "
        "la, B.id AS b ALL MATCHES PATTERN (A+ B) WITHIN 5 DEFINE A AS A.type = 'A', "
        "B AS B.type = 'B')"
    )
    _same(sql, maxi, 2, MatcherConfig(kleene="maximal"))


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (SPLIT[1].replace("SKIP TO NEXT ROW", "SKIP PAST LAST ROW"), "chains matches"),
        (SPLIT[1].replace("B.type <> 'C'", "B.v > PREV(B.v)"), "PREV/NEXT"),
        (SPLIT[0].replace("C.id AS c", "MATCH_NUMBER() AS c"), "MATCH_NUMBER"),
        (SPLIT[0].replace("SELECT *", "SELECT count(*) AS n"), "plain SELECT"),
        (SPLIT[0].replace("WITHIN 6 ", ""), "no WITHIN"),
        (SPLIT[0].replace("ORDER BY ts", "ORDER BY ts DESC"), "DESC"),
        (
            SPLIT[0] + " AS mr WHERE NOT EXISTS (SELECT 1 FROM __dfs_cer_matches AS m2 "
            "WHERE m2.a > mr.a)",
            "subquery",
        ),
    ],
)
def test_a_query_whose_matches_interact_is_read_whole(sql: str, why: str) -> None:
    query = parse(sql)
    schema = pa.schema(
        [("id", pa.int64()), ("ts", pa.int64()), ("k", pa.int64()), ("type", pa.string()),
         ("v", pa.int64())]
    )  # fmt: skip
    reason = slice_reason(query, analyze(query, schema), parse_statement(sql).simple)
    assert reason is not None and why in reason


def test_slices_cover_the_span_and_are_a_window_wide() -> None:
    pieces = time_slices(0, 99, 10, 4)
    assert [(p.lo, p.hi) for p in pieces] == [(FIRST, 25), (25, 50), (50, 75), (75, PAST_LAST)]
    assert [p.read for p in pieces] == [(FIRST, 34), (15, 59), (40, 84), (65, PAST_LAST - 1)]
    assert len(time_slices(0, 99, 40, 8)) == 2  # never narrower than the window
    assert len(time_slices(5, 5, 10, 8)) == 1
