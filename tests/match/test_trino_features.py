"""Conformance of the expression features inside MATCH_RECOGNIZE with Trino's answers: each case
is a query of Trino's TestRowPatternMatching or TestAggregationsInRowPatternMatching with the rows
Trino returns (its VALUES data as an Arrow table; its expected rows as tuples)."""

from __future__ import annotations

import pickle
import re
from typing import cast

import pyarrow as pa
import pytest

from dfs_cer import match_recognize, parse
from dfs_cer.errors import QueryValidationError, UnsupportedFeatureError

FOUR = pa.table({"id": [1, 2, 3, 4], "value": [90, 80, 70, 80]})
EIGHT = pa.table({"id": list(range(1, 9))})
PARTS = pa.table(
    {
        "id": [1, 2, 6, 2, 2, 1, 3, 4, 5, 1, 3, 3],
        "part": ["p1", "p1", "p1", "p2", "p3", "p3", "p1", "p1", "p1", "p2", "p3", "p2"],
        "value": [1, 1, 1, 10, 100, 100, 1, 1, 1, 10, 100, 10],
    }
)


def rows(table: pa.Table, sql: str, columns: list[str]) -> list[tuple[object, ...]]:
    out = match_recognize(table, sql)
    query = parse(sql)
    assert parse(query.to_sql()) == query  # every form prints back to SQL that parses the same
    return [tuple(r[c] for c in columns) for r in out.to_pylist()]


def test_classifier_past_the_current_row_in_measures() -> None:
    # testClassifierFunctionPastCurrentRow: MEASURES see the whole match
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS label, "
        "NEXT(CLASSIFIER()) AS next_label ALL ROWS PER MATCH PATTERN (A B+ C+) DEFINE B AS "
        "B.value < PREV(B.value), C AS C.value > PREV(C.value))"
    )
    assert rows(FOUR, sql, ["id", "value", "label", "next_label"]) == [
        (1, 90, "A", "B"),
        (2, 80, "B", "B"),
        (3, 70, "B", "C"),
        (4, 80, "C", None),
    ]


def test_classifier_past_the_current_row_in_define_is_null() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES value AS val ALL ROWS PER "
        "MATCH PATTERN (A+) DEFINE A AS NEXT(CLASSIFIER()) = 'A')"
    )
    assert rows(FOUR, sql, ["id"]) == []


def test_nested_navigation_of_a_classifier_past_the_current_row() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES NEXT(RUNNING "
        "LAST(CLASSIFIER(U), 1), 2) AS x ALL ROWS PER MATCH PATTERN (A B+ C+) SUBSET U = "
        "(A, C) DEFINE B AS B.value < PREV(B.value), C AS C.value > PREV(C.value))"
    )
    # rows 1-3: no second-to-last U row yet; row 4: U rows are 1 and 4, so row 1 + 2 = row 3 (B)
    assert rows(FOUR, sql, ["id", "x"]) == [(1, None), (2, None), (3, None), (4, "B")]


def test_scalar_functions_and_a_varchar_cast() -> None:
    # testScalarFunctions
    t = pa.table({"id": [1, 2, 3], "value": [90, 80, 60]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "CAST(lower(LAST(CLASSIFIER())) || '_label' AS varchar(7)) AS label ALL ROWS PER "
        "MATCH PATTERN (A B+) DEFINE B AS B.value + 10 < abs(PREV (B.value)))"
    )
    assert rows(t, sql, ["id", "label"]) == [(2, "a_label"), (3, "b_label")]


def test_running_sum_over_all_rows() -> None:
    # TestAggregationsInRowPatternMatching.testSimpleQuery
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
        "MEASURES RUNNING sum(id) AS running_sum ALL ROWS PER MATCH "
        "AFTER MATCH SKIP PAST LAST ROW PATTERN (A*) DEFINE A AS true)"
    )
    assert rows(EIGHT, sql, ["id", "running_sum"]) == [(i, i * (i + 1) // 2) for i in range(1, 9)]


def test_array_agg_of_a_classifier() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING "
        "array_agg(CLASSIFIER(A)) AS labels ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST "
        "ROW PATTERN (A*) DEFINE A AS true)"
    )
    assert rows(EIGHT, sql, ["id", "labels"]) == [(i, ["A"] * i) for i in range(1, 9)]


def test_array_agg_of_a_subset_classifier() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
        "MEASURES RUNNING array_agg(lower(CLASSIFIER(U))) AS labels ALL "
        'ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (M A X X T C H "!") '
        'SUBSET U = (M, A, T, C, H, "!") DEFINE M AS true)'
    )
    got = ["".join(cast(list[str], labels)) for _, labels in rows(EIGHT, sql, ["id", "labels"])]
    assert got == ["m", "ma", "ma", "ma", "mat", "matc", "match", "match!"]


def test_running_sum_per_match_with_match_numbers() -> None:
    # testPartitioning, second case: every match of every partition
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY id MEASURES RUNNING "
        "sum(value) AS running_sum, MATCH_NUMBER() AS match_no ALL ROWS PER MATCH AFTER "
        "MATCH SKIP TO NEXT ROW PATTERN (B+) DEFINE B AS true)"
    )
    got = rows(PARTS, sql, ["part", "match_no", "id", "running_sum"])
    expected = []
    for part, value, n in (("p1", 1, 6), ("p2", 10, 3), ("p3", 100, 3)):
        for start in range(1, n + 1):
            expected += [(part, start, i, value * (i - start + 1)) for i in range(start, n + 1)]
    assert got == expected


@pytest.mark.parametrize(
    ("define", "measure", "expected"),
    [
        # testTentativeLabelMatch: an aggregate in DEFINE sees the rows matched so far
        (
            "A AS avg(B.value) = 5",
            "RUNNING avg(B.value) AS agg",
            [(1, "B", 4.0), (2, "B", 5.0), (3, "A", 5.0)],
        ),
    ],
)
def test_tentative_label_match(
    define: str, measure: str, expected: list[tuple[object, ...]]
) -> None:
    t = pa.table({"id": [1, 2, 3], "value": [4, 6, 0]})
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {measure}, CLASSIFIER() AS "
        "classy ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ((A | B)*) "
        f"DEFINE {define})"
    )
    assert rows(t, sql, ["id", "classy", "agg"]) == expected


def test_tentative_label_dropped_with_sums() -> None:
    t = pa.table(
        {"id": [1, 2, 3, 4, 5] * 2, "part": ["p1"] * 5 + ["p2"] * 5, "value": [1] * 5 + [2] * 5}
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY id MEASURES RUNNING "
        "sum(value) AS running_sum, CLASSIFIER() AS classy ALL ROWS PER MATCH AFTER MATCH "
        "SKIP PAST LAST ROW PATTERN ((A | B)*) DEFINE A AS sum(value) > 4)"
    )
    assert rows(t, sql, ["part", "id", "classy", "running_sum"]) == [
        ("p1", 1, "B", 1),
        ("p1", 2, "B", 2),
        ("p1", 3, "B", 3),
        ("p1", 4, "B", 4),
        ("p1", 5, "A", 5),
        ("p2", 1, "B", 2),
        ("p2", 2, "B", 4),
        ("p2", 3, "A", 6),
        ("p2", 4, "A", 8),
        ("p2", 5, "A", 10),
    ]


def test_match_number_in_define() -> None:
    # Trino accepts MATCH_NUMBER() in DEFINE: the number of the match being attempted
    t = pa.table({"id": list(range(1, 7))})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS n, count(*) AS c "
        "ONE ROW PER MATCH PATTERN (A+) DEFINE A AS count(*) <= MATCH_NUMBER())"
    )
    assert rows(t, sql, ["n", "c"]) == [(1, 1), (2, 2), (3, 3)]


def test_the_aggregate_set() -> None:
    t = pa.table({"id": [1, 2, 3, 4, 5], "v": [5, 3, None, 3, 9], "s": ["a", "b", "c", None, "e"]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES sum(B.v * 2 + 1) AS expr, "
        "sum(CASE WHEN CLASSIFIER() = 'A' THEN v END) AS by_label, coalesce(sum(C.v), 0) AS "
        "none, count(*) FILTER (WHERE v > 3) AS big, count(DISTINCT v) AS kinds, "
        "array_agg(DISTINCT v) AS seen, min_by(s, v) AS cheapest, max_by(s, v) AS dearest, "
        "arbitrary(s) AS any, count_if(v > 4) AS over4, bool_and(v > 1) AS all1, bool_or(v "
        "> 8) AS any8, listagg(s, '-') AS names, stddev(v) AS sd, variance(v) AS var, "
        "var_pop(v) AS vp, array_agg(MATCH_NUMBER()) AS numbers ONE ROW PER MATCH PATTERN "
        "(A B+ C*) DEFINE B AS true, C AS false)"
    )
    (row,) = match_recognize(t, sql).to_pylist()
    assert row["expr"] == 7 + 7 + 19 and row["by_label"] == 5 and row["none"] == 0
    assert row["big"] == 2 and row["kinds"] == 3 and row["seen"] == [5, 3, None, 9]
    assert (row["cheapest"], row["dearest"], row["any"]) == ("b", "e", "a")  # ties: the first row
    assert (row["over4"], row["all1"], row["any8"], row["names"]) == (2, True, True, "a-b-c-e")
    assert row["var"] == pytest.approx(8.0) and row["sd"] == pytest.approx(8.0**0.5)
    assert row["vp"] == pytest.approx(6.0) and row["numbers"] == [1] * 5


def test_define_aggregates_over_expressions_and_filters() -> None:
    t = pa.table(
        {
            "id": list(range(1, 8)),
            "w": ["aa", "b", "ccc", None, "eeee", "f", "ff"],
            "x": [5, 3, None, 4, 8, 2, 2],
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS s, LAST(id) AS "
        "e ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS length(B.w) <= length(A.w) + 1 AND "
        "count_if(B.x > 2) <= 2 AND sum(B.x * 2) FILTER (WHERE B.x < 9) < 100 AND "
        "bool_or(B.x IS NULL OR B.x < 9))"
    )
    assert rows(t, sql, ["s", "e"]) == [(1, 3), (5, 7)]


@pytest.mark.parametrize(
    ("define", "message"),
    [
        ("B AS array_agg(B.x) IS NULL", "aggregate array_agg\\(\\) in DEFINE"),
        ("B AS count(DISTINCT B.x) > 1", "DISTINCT in count"),
        ("B AS sum(CASE WHEN CLASSIFIER() = 'A' THEN x END) > 1", "inside an aggregate in DEFINE"),
    ],
)
def test_what_define_refuses(define: str, message: str) -> None:
    t = pa.table({"id": [1, 2], "x": [1, 2]})
    with pytest.raises(UnsupportedFeatureError, match=message):
        match_recognize(
            t, f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A B) DEFINE {define})"
        )


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^* A", [1, 2, 3, 4]),  # zero repetitions of ^ are allowed: a match at every row
        ("^+ A", [1]),
        ("(^ A)+", [1]),  # the second iteration's ^ fails after row 1
        ("(^ A){2}", []),
        ("A $+", [4]),
        ("A $*", [1, 2, 3, 4]),
        ("^{2,3} A", [1]),  # a zero-width anchor repeats at one row
    ],
)
def test_quantified_anchors(pattern: str, expected: list[int]) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a ONE ROW PER MATCH "
        f"AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE A AS true)"
    )
    assert [r[0] for r in rows(FOUR, sql, ["a"])] == expected


def test_without_order_by_rows_match_in_input_order() -> None:
    t = pa.table(
        {"id": [5, 2, 1, 4, 3], "part": ["a", "b", "a", "b", "a"], "value": [10, 90, 80, 20, 30]}
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part MEASURES A.id AS a, B.id AS b "
        "ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.value > A.value)"
    )
    assert rows(t, sql, ["part", "a", "b"]) == [
        ("a", 5, 1)
    ]  # a: 10 then 80 in input order; b: 90 then 20


def test_qualified_and_expression_keys() -> None:
    t = pa.table({"id": [1, 2, 3, 4], "part": ["x", "X", "y", "Y"], "value": [90, 80, 70, 80]})
    qualified = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY t.part ORDER BY t.id DESC MEASURES "
        "A.id AS a ONE ROW PER MATCH PATTERN (A) DEFINE A AS true)"
    )
    assert rows(t, qualified, ["part", "a"]) == [("X", 2), ("Y", 4), ("x", 1), ("y", 3)]
    computed = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY lower(part) ORDER BY value * -1, id "
        "MEASURES A.id AS a, B.id AS b ONE ROW PER MATCH PATTERN (A B) DEFINE A AS true)"
    )
    got = match_recognize(t, computed)
    assert got.column_names[0] == "LOWER(part)"
    assert [tuple(r.values()) for r in got.to_pylist()] == [("x", 1, 2), ("y", 4, 3)]


# ----------------------------------------------------------- conformance: accepted as Trino accepts

SIX = pa.table({"id": [1, 2, 3, 4, 5, 6], "value": [90, 80, 70, 80, 60, 95]})


@pytest.mark.parametrize(
    ("define", "expected"),
    [
        # NEXT over FIRST over a SUBSET's CLASSIFIER: row 1 (the first U) + 2 is row 3;
        # in DEFINE the current row carries the variable under test, so C matches row 3
        # (and row 4 still sees row 3)
        ("C AS NEXT(FIRST(CLASSIFIER(U)), 2) = 'C'", [(1, "A"), (2, "B"), (3, "C"), (4, "C")]),
        ("C AS NEXT(FIRST(CLASSIFIER(U)), 3) = 'C'", [(1, "A"), (2, "B"), (3, "B"), (4, "C")]),
        # past the current row a label is unknown (NULL) in DEFINE: never 'C'
        ("C AS NEXT(LAST(CLASSIFIER(U)), 2) = 'C'", []),
        ("C AS PREV(LAST(CLASSIFIER(U), 1)) = 'A'", [(1, "A"), (2, "B"), (3, "B"), (4, "C")]),
        (
            "C AS PREV(FIRST(U.value), 0) = 90 AND NEXT(LAST(CLASSIFIER(U))) = 'C'",
            [(1, "A"), (2, "B"), (3, "B"), (4, "C")],
        ),
    ],
)
def test_physical_over_logical_navigation_of_a_subset_classifier_in_define(
    define: str, expected: list[tuple[object, ...]]
) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS label ALL "
        "ROWS PER MATCH PATTERN (A B+ C+) SUBSET U = (A, B) DEFINE B AS B.value < "
        f"PREV(B.value), {define})"
    )
    assert rows(FOUR, sql, ["id", "label"]) == expected


@pytest.mark.parametrize(
    ("pattern", "define", "expected"),
    [
        ("A? B+", "A AS NULL", [(1, "B"), (2, "B"), (3, "B"), (4, "B")]),  # NULL is not true
        ("A B", "A AS NULL", []),
        ("A? B+", "A AS NULL OR value > 85", [(1, "A"), (2, "B"), (3, "B"), (4, "B")]),
        ("A? B+", "A AS NOT NULL", [(1, "B"), (2, "B"), (3, "B"), (4, "B")]),
        (
            "A? B+",
            "A AS CAST(NULL AS BOOLEAN) AND PREV(value) IS NULL",
            [(1, "B"), (2, "B"), (3, "B"), (4, "B")],
        ),
    ],
)
def test_a_null_condition_is_not_true(
    pattern: str, define: str, expected: list[tuple[object, ...]]
) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS label ALL "
        f"ROWS PER MATCH PATTERN ({pattern}) DEFINE {define})"
    )
    assert rows(FOUR, sql, ["id", "label"]) == expected


def test_aggregate_filter_reading_a_pattern_variable_in_measures() -> None:
    # the arguments choose the rows (count(*), unqualified: all rows of the match); in FILTER,
    # B.value reads a row mapped to B (NULL elsewhere), value reads the row itself. A = 1, B = 2, 3.
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) FILTER (WHERE "
        "B.value > 75) AS big_b, sum(value) FILTER (WHERE B.value > 75) AS sum_big_b, "
        "count(*) FILTER (WHERE value > 75) AS big, count(B.*) FILTER (WHERE value < 75) AS "
        "small_b, array_agg(value) FILTER (WHERE CLASSIFIER(B) = 'B') AS b_values ONE ROW "
        "PER MATCH PATTERN (A B+) DEFINE B AS B.value < PREV(B.value))"
    )
    assert rows(FOUR, sql, ["big_b", "sum_big_b", "big", "small_b", "b_values"]) == [
        (1, 80, 2, 1, [80, 70])
    ]
    running = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
        "MEASURES count(*) FILTER (WHERE B.value > 75) AS big_b ALL "
        "ROWS PER MATCH PATTERN (A B+) DEFINE B AS B.value < PREV(B.value))"
    )
    assert rows(FOUR, running, ["id", "big_b"]) == [(1, 0), (2, 1), (3, 1)]


@pytest.mark.parametrize(
    ("pattern", "define", "expected"),
    [
        # running count of A rows with value > 75: rows 1, 2, 4 count;
        # the third stops the first match
        ("A+", "A AS count(*) FILTER (WHERE A.value > 75) <= 2", [(1, 3), (2, 3)]),
        # B rows above 75 sum to 80, 80, 160, 160, then 255 at row 6
        ("A B+", "B AS sum(value) FILTER (WHERE B.value > 75) < 170", [(1, 5)]),
        # MATCH_NUMBER() is the same on every row of a match: sum = number x rows
        ("A+", "A AS sum(MATCH_NUMBER()) <= 2", [(1, 2), (2, 1)]),
        (
            "A+",
            "A AS avg(MATCH_NUMBER()) = 1 AND max(MATCH_NUMBER()) = min(MATCH_NUMBER())",
            [(1, 6)],
        ),
        ("A+", "A AS count(MATCH_NUMBER()) < 3", [(1, 2), (2, 2), (3, 2)]),
        # no B row above 75 yet: sum over no rows is NULL
        (
            "A B+",
            "B AS sum(MATCH_NUMBER()) FILTER (WHERE B.value > 75) IS NULL OR B.value < 75",
            [(1, 2), (2, 2)],
        ),
    ],
)
def test_filter_and_match_number_in_define_aggregates(
    pattern: str, define: str, expected: list[tuple[object, ...]]
) -> None:
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS m, count(*) AS n "
        f"PATTERN ({pattern}) DEFINE {define})"
    )
    assert rows(SIX, sql, ["m", "n"]) == expected


def test_a_column_alias_list_renames_the_relation() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS m, "
        "CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B+) DEFINE B AS B.value < "
        "PREV(B.value)) AS mr(i, n, l, v)"
    )
    got = match_recognize(FOUR, sql)
    assert got.column_names == ["i", "n", "l", "v"]
    assert [tuple(r.values()) for r in got.to_pylist()] == [
        (1, 1, "A", 90),
        (2, 1, "B", 80),
        (3, 1, "B", 70),
    ]
    query = parse(sql)
    assert query.alias_columns == ("i", "n", "l", "v") and parse(query.to_sql()) == query
    assert (
        type(query).from_json(query.to_json()) == query
        and pickle.loads(pickle.dumps(query)) == query
    )
    one = (
        "SELECT mr.k FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n PATTERN "
        "(X+) DEFINE X AS true) AS mr(k)"
    )
    assert match_recognize(FOUR, one).to_pylist() == [{"k": 4}]


VALUES = "(VALUES (1, 90), (2, 80), (3, 70), (4, 80)) t(id, value)"
INNER = (
    "SELECT * FROM {} MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
    "PATTERN (A B+) DEFINE B AS B.value < PREV(B.value))"
)
OUTER = (
    "MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n, LAST(X.c) AS lc, sum(Y.value) AS "
    "s ONE ROW PER MATCH PATTERN (X Y+) DEFINE X AS c = 'A', Y AS Y.c = 'B') AS mr(k, l, s)"
)


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT * FROM ({INNER.format('t')}) {OUTER}",
        f"SELECT * FROM ({INNER.format('t')}) AS inner_matches {OUTER}",
        # Trino's tests read VALUES with a column alias list
        f"SELECT * FROM ({INNER.format(VALUES)}) {OUTER}",
    ],
)
def test_match_recognize_over_a_match_recognize(sql: str) -> None:
    # the inner clause labels rows 1-3 A B B; the outer one matches them as X Y+
    table = None if VALUES in sql else FOUR
    assert match_recognize(table, sql).to_pylist() == [{"k": 3, "l": "A", "s": 150}]


def test_an_input_with_a_column_alias_list() -> None:
    sql = INNER.format(VALUES)
    assert match_recognize(None, sql).to_pylist() == [
        {"id": 1, "c": "A", "value": 90},
        {"id": 2, "c": "B", "value": 80},
        {"id": 3, "c": "B", "value": 70},
    ]
    renamed = INNER.format("t AS q(id, value)")
    assert (
        match_recognize(
            pa.table({"a": [1, 2, 3, 4], "b": [90, 80, 70, 80]}),
            renamed,
            tables={"t": pa.table({"a": [1, 2, 3, 4], "b": [90, 80, 70, 80]})},
        ).num_rows
        == 3
    )


@pytest.mark.parametrize(
    "where", ["MEASURES t.value AS v", "DEFINE A AS t.value > 0", "DEFINE A AS q.value > 0"]
)
def test_columns_qualified_by_the_input_table_are_refused_as_trino(where: str) -> None:
    # the standard and Trino refuse them (DuckDB accepts); the message says which and what to write
    measures, define = (where, "DEFINE A AS true") if where.startswith("MEASURES") else ("", where)
    sql = f"SELECT * FROM t AS q MATCH_RECOGNIZE (ORDER BY id {measures} PATTERN (A+) {define})"
    with pytest.raises(
        QueryValidationError,
        match=re.escape("not the table or its alias (as the standard and Trino"),
    ):
        match_recognize(FOUR, sql)
