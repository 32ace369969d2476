"""Conformance with the standard as Trino implements it: each case's data and expected rows come
from a case of Trino's TestRowPatternMatching (written there in window form; here one row per
match, in match order)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dfs_cer import match_recognize
from dfs_cer.errors import MatchError

EMPTY = (None, None)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("()* | B", [EMPTY] * 4),  # an alternative that matches empty is preferred like any other
        ("()+ | B", [EMPTY] * 4),
        ("(){5,} | B", [EMPTY] * 4),  # empty iterations up to the minimum
        ("B | ()*", [EMPTY, (80, "B"), (80, "B"), EMPTY]),
        (
            "(B ()*)*",
            [EMPTY, (80, "B"), EMPTY],
        ),  # rows 2-3 in one match: the loop goes on after a non-empty iteration
        ("(B ()*)*?", [EMPTY] * 4),
    ],
)
def test_empty_cycles(pattern: str, expected: list[tuple[object, object]]) -> None:
    t = pa.table({"id": [1, 2, 3, 4], "value": [70, 80, 80, 70]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING LAST(value) AS val, "
        "CLASSIFIER() AS label ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN "
        f"({pattern}) DEFINE B AS B.value >= NEXT(B.value))"
    )
    assert [(r["val"], r["label"]) for r in match_recognize(t, sql).to_pylist()] == expected


SKIP_QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS s, RUNNING "
    "LAST(value) AS val, CLASSIFIER() AS label ONE ROW PER MATCH AFTER MATCH {skip} PATTERN "
    "(A B+ C+ D?) SUBSET U = (C, D) DEFINE B AS B.value < PREV(B.value), C AS C.value > "
    "PREV(C.value), D AS false)"
)
SKIP_DATA = pa.table({"id": [1, 2, 3, 4, 5, 6], "value": [90, 80, 70, 80, 70, 100]})


@pytest.mark.parametrize("skip", ["SKIP TO FIRST C", "SKIP TO LAST B", "SKIP TO B", "SKIP TO U"])
def test_after_match_skip_to_a_label(skip: str) -> None:
    rows = match_recognize(SKIP_DATA, SKIP_QUERY.format(skip=skip)).to_pylist()
    assert [(r["s"], r["val"], r["label"]) for r in rows] == [(1, 80, "C"), (4, 100, "C")]


@pytest.mark.parametrize(
    ("skip", "message"),
    [
        (
            "SKIP TO A",
            "would skip to the first row of the match",
        ),  # Trino: cannot skip to first row of match
        (
            "SKIP TO D",
            "found no row labelled D in the match",
        ),  # Trino: pattern variable is not present in match
    ],
)
def test_after_match_skip_errors(skip: str, message: str) -> None:
    with pytest.raises(MatchError, match=message):
        match_recognize(SKIP_DATA, SKIP_QUERY.format(skip=skip))


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (
            "(A* | B)?",
            [(0, None), (0, None)],
        ),  # bounded: the iteration's first alternative matches empty
        ("(A* | B){0,2}", [(0, None), (0, None)]),
        # a loop's first iteration takes the empty alternative; the way back into the loop is cut
        # (its start was visited at this row) and the exit, reached before the B alternative, wins
        ("(A* | B)*", [(0, None), (0, None)]),
        ("(A* | B)+", [(0, None), (0, None)]),
        ("(B | A*)*", [(2, "B")]),  # B first: iterations consume rows
    ],
)
def test_empty_iterations_of_bounded_and_looping_quantifiers(
    pattern: str, expected: list[tuple[int, object]]
) -> None:
    """Trino compiles {n,m} and ? by unrolling (an empty iteration is an iteration like any other)
    and a loop as its body then a split back to the body's start; its matcher drops a thread that
    reaches an instruction twice at one row. Expected rows follow that program by hand."""
    t = pa.table({"id": [1, 2], "v": [5, 5]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS c, CLASSIFIER() "
        f"AS l ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) DEFINE "
        "A AS A.v > 9, B AS B.v < 9)"
    )
    assert [(r["c"], r["l"]) for r in match_recognize(t, sql).to_pylist()] == expected


# ----------------------------------------------------- Trino's TestAggregationsInRowPatternMatching

PARTS = pa.table(
    {
        "id": [1, 2, 6, 2, 2, 1, 3, 4, 5, 1, 3, 3],
        "part": ["p1", "p1", "p1", "p2", "p3", "p3", "p1", "p1", "p1", "p2", "p3", "p2"],
        "value": [1, 1, 1, 10, 100, 100, 1, 1, 1, 10, 100, 10],
    }
)


def _rows(table: pa.Table, sql: str, *columns: str) -> list[tuple[object, ...]]:
    out = match_recognize(table, sql)
    return [tuple(r[c] for c in columns) for r in out.to_pylist()]


def test_running_sum_over_all_rows() -> None:
    t = pa.table({"id": list(range(1, 9))})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING sum(id) AS s ALL "
        "ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A*) DEFINE A AS true)"
    )
    assert _rows(t, sql, "s") == [(1,), (3,), (6,), (10,), (15,), (21,), (28,), (36,)]


@pytest.mark.parametrize(
    ("skip", "expected"),
    [
        ("PAST LAST ROW", [1, 2, 3, 4, 5, 6, 10, 20, 30, 100, 200, 300]),
        (
            "TO NEXT ROW",
            [
                1,
                2,
                3,
                4,
                5,
                6,
                1,
                2,
                3,
                4,
                5,
                1,
                2,
                3,
                4,
                1,
                2,
                3,
                1,
                2,
                1,
                10,
                20,
                30,
                10,
                20,
                10,
                100,
                200,
                300,
                100,
                200,
                100,
            ],
        ),
    ],
)
def test_running_sum_per_partition_and_match(skip: str, expected: list[int]) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY id MEASURES RUNNING "
        f"sum(value) AS s, MATCH_NUMBER() AS mn ALL ROWS PER MATCH AFTER MATCH SKIP {skip} "
        "PATTERN (B+) DEFINE B AS true)"
    )
    got = match_recognize(PARTS, sql)
    assert (
        got.sort_by([("part", "ascending"), ("mn", "ascending"), ("id", "ascending")])[
            "s"
        ].to_pylist()
        == expected
    )


@pytest.mark.parametrize(
    ("data", "define", "measure", "expected"),
    [
        # a tentative label's row counts in its own aggregate (running semantics in DEFINE)
        ([4, 6, 0], "A AS avg(B.value) = 5", "avg(B.value)", [("B", 4.0), ("B", 5.0), ("A", 5.0)]),
        (
            [4, 6, 0, 5],
            "A AS avg(A.value) = 5",
            "avg(A.value)",
            [("B", None), ("B", None), ("B", None), ("A", 5.0)],
        ),
        (
            [1, 1, 1, 1, 1],
            "A AS sum(value) > 4",
            "sum(value)",
            [("B", 1), ("B", 2), ("B", 3), ("B", 4), ("A", 5)],
        ),
        (
            [2, 2, 2, 2, 2],
            "A AS sum(value) > 4",
            "sum(value)",
            [("B", 2), ("B", 4), ("A", 6), ("A", 8), ("A", 10)],
        ),
        (
            [1, 2, 3, 4, 5],
            "A AS max(value) > 4",
            "max(value)",
            [("B", 1), ("B", 2), ("B", 3), ("B", 4), ("A", 5)],
        ),
        (
            [2, 4, 6, 8, 10],
            "A AS max(value) > 4",
            "max(value)",
            [("B", 2), ("B", 4), ("A", 6), ("A", 8), ("A", 10)],
        ),
    ],
)
def test_tentative_label_match(
    data: list[int], define: str, measure: str, expected: list[tuple[object, object]]
) -> None:
    t = pa.table({"id": list(range(1, len(data) + 1)), "value": data})
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING {measure} AS m, "
        "CLASSIFIER() AS c ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | "
        f"B)*) DEFINE {define})"
    )
    assert _rows(t, sql, "c", "m") == expected


def test_tentative_label_dropped_in_a_fixed_length_pattern() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY id MEASURES RUNNING "
        "sum(value) AS s ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (B (A | "
        "B) B) DEFINE A AS sum(value) > 1000)"
    )
    got = match_recognize(PARTS, sql).sort_by([("part", "ascending"), ("id", "ascending")])
    assert got["s"].to_pylist() == [1, 2, 3, 1, 2, 3, 10, 20, 30, 100, 200, 300]


def test_count_aggregations() -> None:
    t = pa.table({"id": [1, 2, 3, 4], "value": ["a", "b", "c", "d"]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING count(*) AS r, FINAL "
        "count(*) AS f, count(C.*) AS c, count(U.*) AS u ALL ROWS PER MATCH AFTER MATCH "
        "SKIP PAST LAST ROW PATTERN (A B C D) SUBSET U = (B, D) DEFINE A AS true)"
    )
    assert _rows(t, sql, "id", "r", "f", "c", "u") == [
        (1, 1, 4, 0, 0),
        (2, 2, 4, 0, 1),
        (3, 3, 4, 1, 1),
        (4, 4, 4, 1, 2),
    ]
    skip_first = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS r ALL ROWS PER MATCH "
        "PATTERN (X Y Z) DEFINE X AS id > 1)"
    )
    assert _rows(t, skip_first, "id", "r") == [(2, 1), (3, 2), (4, 3)]


def test_classifier_in_define_and_over_a_subset() -> None:
    """CLASSIFIER() in DEFINE sees the tentative label; PREV(CLASSIFIER()) the previous row's."""
    t = pa.table({"id": [1, 2, 3, 4, 5], "v": [1, 2, 3, 4, 5]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c, "
        "CLASSIFIER(U) AS cu ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((X "
        "| Y | Z)+) SUBSET U = (X, Z) DEFINE X AS PREV(CLASSIFIER()) IS NULL OR "
        "PREV(CLASSIFIER()) = 'Z', Y AS CLASSIFIER(U) = 'X' AND PREV(CLASSIFIER()) = 'X', Z "
        "AS count(Y.*) >= count(Z.*))"
    )
    assert _rows(t, sql, "c", "cu") == [("X", "X"), ("Y", "X"), ("Z", "Z"), ("X", "X"), ("Y", "X")]


def test_output_column_order() -> None:
    """ONE ROW PER MATCH: partition columns, then measures; ALL ROWS PER MATCH: partition
    columns, ORDER BY columns, measures, then the remaining input columns in their order."""
    t = pa.table({"v": [1, 2, 3], "ts": [1, 2, 3], "k": ["a", "a", "a"], "z": [0, 0, 0]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS "
        "n, FIRST(v) AS f {} PATTERN (A+) DEFINE A AS true)"
    )
    assert match_recognize(t, sql.format("ONE ROW PER MATCH")).column_names == ["k", "n", "f"]
    assert match_recognize(t, sql.format("ALL ROWS PER MATCH")).column_names == [
        "k",
        "ts",
        "n",
        "f",
        "v",
        "z",
    ]


def test_nulls_in_conditions_navigation_and_aggregates() -> None:
    """A NULL condition does not hold; navigation past the match or partition gives NULL;
    aggregates skip NULLs (count(x) counts values, count(*) rows)."""
    t = pa.table({"id": [1, 2, 3, 4, 5], "x": [1, None, 3, None, 5]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS rows_, count(x) "
        "AS xs, sum(x) AS s, CLASSIFIER() AS c ALL ROWS PER MATCH AFTER MATCH SKIP PAST "
        "LAST ROW PATTERN (A B*) DEFINE A AS PREV(x) IS NULL, B AS x > PREV(x) OR x IS NULL)"
    )
    got = [
        (r["id"], r["c"], r["rows_"], r["xs"], r["s"]) for r in match_recognize(t, sql).to_pylist()
    ]
    # row 1: PREV is outside the partition (NULL) -> A; row 2: x NULL -> B;
    # row 3: 3 > NULL is NULL -> not B, and PREV(x) is NULL -> A; row 4 NULL -> B;
    # row 5: 5 > NULL is NULL, PREV NULL -> A
    assert got == [
        (1, "A", 1, 1, 1),
        (2, "B", 2, 1, 1),
        (3, "A", 1, 1, 3),
        (4, "B", 2, 1, 3),
        (5, "A", 1, 1, 5),
    ]


def test_classifier_with_exclusion_subset_and_navigation() -> None:
    """Excluded rows are not output but keep their labels: CLASSIFIER(U) and PREV(CLASSIFIER())
    see them; MEASURES see the labels of the whole match, also past the current row (Trino's
    testClassifierFunctionPastCurrentRow)."""
    t = pa.table({"id": [1, 2, 3, 4], "v": [1, 2, 3, 4]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c, "
        "PREV(CLASSIFIER()) AS pc, NEXT(CLASSIFIER()) AS nc, FINAL LAST(CLASSIFIER(), 1) AS "
        "fl, CLASSIFIER(U) AS cu, count(B.*) AS nb ALL ROWS PER MATCH PATTERN (A {- B+ -} "
        "C) SUBSET U = (A, B) DEFINE A AS v = 1, C AS v = 4)"
    )
    got = [
        (r["id"], r["c"], r["pc"], r["nc"], r["fl"], r["cu"], r["nb"])
        for r in match_recognize(t, sql).to_pylist()
    ]
    assert got == [(1, "A", None, "B", "B", "A", 0), (4, "C", "B", None, "B", "B", 2)]


def test_classifier_of_an_empty_pattern_is_null() -> None:
    """PATTERN (()) matches empty at every row: CLASSIFIER() is NULL there (no row, no label)."""
    log = pa.table({"id": [0, 1, 2], "ts": [0, 1, 5]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS cls "
        "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (()))"
    )
    assert match_recognize(log, sql).to_pylist() == [{"cls": None}] * 3


def test_a_window_over_a_date64_column_counts_days() -> None:
    """date64 holds milliseconds (at midnights): WITHIN INTERVAL '1' DAY spans one day there as
    over date32."""
    days = np.array([0, 1, 2, 10, 11], np.int64)
    t64 = pa.table(
        {"id": [0, 1, 2, 3, 4], "ts": pa.array(days * 86_400_000).cast(pa.date64()),
         "type": list("ABABA")}
    )  # fmt: skip
    t32 = t64.set_column(1, "ts", t64.column("ts").cast(pa.date32()))
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b ALL MATCHES "
        "PATTERN (A B) WITHIN INTERVAL '1' DAY DEFINE A AS A.type = 'A', B AS B.type = 'B')"
    )
    want = [{"a": 0, "b": 1}]
    assert match_recognize(t32, sql).to_pylist() == want
    assert match_recognize(t64, sql).to_pylist() == want
