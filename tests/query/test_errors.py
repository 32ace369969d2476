"""Every error path of the front end: class, message, clause, position."""

from __future__ import annotations

import pickle
import re

import pyarrow as pa
import pytest

from dfs_cer import analyze, parse
from dfs_cer.errors import (
    QueryError,
    QuerySyntaxError,
    QueryValidationError,
    SourcePosition,
    UnsupportedFeatureError,
)


def mr(body: str, tail: str = "") -> str:
    return f"SELECT * FROM t MATCH_RECOGNIZE ({body}){tail}"


OK = "ORDER BY ts PATTERN (A B) DEFINE A AS A.x > 0"

SYNTAX, INVALID, UNSUPPORTED = QuerySyntaxError, QueryValidationError, UnsupportedFeatureError

CASES = [
    # statement level
    ("", SYNTAX, "the query is empty", None),
    ("SELECT * FROM t", SYNTAX, "has no MATCH_RECOGNIZE clause", None),
    (
        mr(OK) + " JOIN u MATCH_RECOGNIZE (ORDER BY ts PATTERN (A))",
        UNSUPPORTED,
        "more than one MATCH_RECOGNIZE",
        None,
    ),
    ("SELECT * FROM t MATCH_RECOGNIZE ORDER BY ts", SYNTAX, "must be followed by '('", None),
    (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A)",
        SYNTAX,
        "unbalanced parentheses",
        None,
    ),
    ("SELECT MATCH_RECOGNIZE (ORDER BY ts PATTERN (A))", SYNTAX, "must follow FROM", None),
    (
        "SELECT * FROM (SELECT * FROM t) MATCH_RECOGNIZE (ORDER BY ts PATTERN (A))",
        UNSUPPORTED,
        "a subquery as the input",
        None,
    ),
    (
        "SELECT * FROM t x y MATCH_RECOGNIZE (ORDER BY ts PATTERN (A))",
        SYNTAX,
        "between the table and MATCH_RECOGNIZE",
        "FROM",
    ),
    (
        mr(OK, " GROUP BY x"),
        UNSUPPORTED,
        "GROUP BY around MATCH_RECOGNIZE is not supported",
        "SELECT",
    ),
    (mr(OK, " AS m JOIN u ON m.x = u.x"), UNSUPPORTED, "JOIN around MATCH_RECOGNIZE", "SELECT"),
    (mr(OK, " LIMIT x"), INVALID, "LIMIT must be a non-negative integer", "LIMIT"),
    (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS A.s = 'x)",
        SYNTAX,
        "cannot tokenize",
        None,
    ),
    # clause structure
    (
        mr("FOO ORDER BY ts PATTERN (A)"),
        SYNTAX,
        "unexpected 'FOO' at the start of MATCH_RECOGNIZE",
        "MATCH_RECOGNIZE",
    ),
    (mr("ORDER BY ts PATTERN A"), SYNTAX, "PATTERN must be followed by '('", "PATTERN"),
    (mr("ORDER BY ts PATTERN (A) FOO"), SYNTAX, "unexpected 'FOO' after PATTERN", "PATTERN"),
    (mr("ORDER BY ts ORDER BY ts PATTERN (A)"), SYNTAX, "ORDER BY appears twice", "ORDER BY"),
    (
        mr("ORDER BY ts ONE ROW PER MATCH ALL ROWS PER MATCH PATTERN (A)"),
        SYNTAX,
        "ALL ROWS PER MATCH appears twice",
        None,
    ),
    (mr("PATTERN (A) ORDER BY ts"), SYNTAX, "ORDER BY must come before PATTERN", "ORDER BY"),
    (mr(""), SYNTAX, "MATCH_RECOGNIZE ( ) is empty", "MATCH_RECOGNIZE"),
    (mr("ORDER BY ts"), SYNTAX, "needs a PATTERN clause", "MATCH_RECOGNIZE"),
    (
        mr("PATTERN (A) WITHIN INTERVAL '1' SECOND"),
        SYNTAX,
        "WITHIN needs ORDER BY <time column>",
        "MATCH_RECOGNIZE",
    ),
    (mr("ORDER BY ts SEEK PATTERN (A)"), UNSUPPORTED, "SEEK is not supported", "SEEK"),
    (
        mr("ORDER BY ts ALL MATCHES x PATTERN (A)"),
        SYNTAX,
        "unexpected 'x' after ALL MATCHES",
        "ALL MATCHES",
    ),
    (mr("ORDER BY ts MEASURES PATTERN (A)"), SYNTAX, "MEASURES is empty", "MEASURES"),
    (
        mr("PARTITION BY sum(a) ORDER BY ts PATTERN (A)"),
        INVALID,
        "PARTITION BY takes expressions of one row",
        "PARTITION BY",
    ),
    (
        mr("PARTITION BY a, a ORDER BY ts PATTERN (A)"),
        INVALID,
        "column a appears twice in PARTITION BY",
        "PARTITION BY",
    ),
    (
        mr("ORDER BY count(ts) PATTERN (A)"),
        INVALID,
        "ORDER BY takes expressions of one row",
        "ORDER BY",
    ),
    (
        mr("ORDER BY ts NULLS PATTERN (A)"),
        SYNTAX,
        "NULLS must be followed by FIRST or LAST",
        "ORDER BY",
    ),
    (mr("ORDER BY ts,, x PATTERN (A)"), SYNTAX, "empty item in a comma-separated list", None),
    (mr("ORDER BY ts MEASURES A.x PATTERN (A)"), INVALID, "measure 'A.x' needs a name", "MEASURES"),
    (
        mr("ORDER BY ts MEASURES A.x AS v, A.y AS V PATTERN (A)"),
        INVALID,
        "measure v appears twice",
        "MEASURES",
    ),
    (
        mr("ORDER BY ts ALL ROWS PER MATCH SHOW ALL PATTERN (A)"),
        SYNTAX,
        "unexpected 'SHOW ALL' after ALL ROWS PER MATCH",
        "ALL ROWS PER MATCH",
    ),
    (
        mr("ORDER BY ts ONE ROW PER MATCH x PATTERN (A)"),
        SYNTAX,
        "after ONE ROW PER MATCH",
        "ONE ROW PER MATCH",
    ),
    (
        mr("ORDER BY ts AFTER MATCH SKIP TO PATTERN (A)"),
        SYNTAX,
        "unexpected AFTER MATCH SKIP 'TO'",
        "AFTER MATCH SKIP",
    ),
    (
        mr("ORDER BY ts AFTER MATCH SKIP PAST ROW PATTERN (A)"),
        SYNTAX,
        "unexpected AFTER MATCH SKIP",
        None,
    ),
    (mr("ORDER BY ts PATTERN (A) WITHIN DEFINE A AS A.x > 0"), SYNTAX, "WITHIN is empty", "WITHIN"),
    (
        mr("ORDER BY ts PATTERN (A) WITHIN 'x' MINUTE"),
        SYNTAX,
        "window value 'x' is not a number",
        "WITHIN",
    ),
    (
        mr("ORDER BY ts PATTERN (A) WITHIN '0' MINUTE"),
        INVALID,
        "the window must be positive, got 0",
        "WITHIN",
    ),
    (
        mr("ORDER BY ts PATTERN (A) WITHIN '-3' MINUTE"),
        INVALID,
        "the window must be positive",
        "WITHIN",
    ),
    (mr("ORDER BY ts PATTERN (A) WITHIN '3' WEEK"), SYNTAX, "unknown window unit 'WEEK'", "WITHIN"),
    (mr("ORDER BY ts PATTERN (A) WITHIN '3'"), SYNTAX, "the window '3' needs a unit", "WITHIN"),
    (mr("ORDER BY ts PATTERN (A) WITHIN x y z"), SYNTAX, "cannot read the window", "WITHIN"),
    (mr("ORDER BY ts PATTERN (A B) SUBSET U (A)"), SYNTAX, "cannot read SUBSET", "SUBSET"),
    (
        mr("ORDER BY ts PATTERN (A B) SUBSET U = (A B)"),
        SYNTAX,
        "expected a pattern variable, got 'A B'",
        "SUBSET",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE A A.x > 0"),
        SYNTAX,
        "cannot read the definition",
        "DEFINE",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE A AS A.x >"),
        SYNTAX,
        "incomplete expression",
        "DEFINE A",
    ),
    (mr("ORDER BY ts PATTERN (A B **)"), SYNTAX, "unexpected quantifier", "PATTERN"),
    # expressions
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS s.A.x > 0"),
        INVALID,
        "has too many qualifiers",
        "DEFINE A",
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.x IS TRUE"),
        UNSUPPORTED,
        "IS TRUE is not supported",
        "DEFINE A",
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.x IN (SELECT 1)"),
        UNSUPPORTED,
        "IN with a subquery",
        "DEFINE A",
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.x LIKE 'a' ESCAPE '!'"),
        UNSUPPORTED,
        "LIKE ... ESCAPE",
        None,
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.ts > INTERVAL '1' WEEK"),
        INVALID,
        "interval unit WEEK",
        None,
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS B.ts < A.ts + INTERVAL '0.0000000005' SECOND"),
        INVALID,
        "is not a whole number of nanoseconds",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.x > PREV(A.x, A.y)"),
        INVALID,
        "the offset of PREV must be a non-negative integer literal",
        "DEFINE A",
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.x > PREV(A.x, -1)"),
        INVALID,
        "non-negative integer literal",
        None,
    ),
    (
        mr("ORDER BY ts PATTERN (A) DEFINE A AS A.x > NEXT(A.x, 1, 2)"),
        INVALID,
        "NEXT takes an expression",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES FINAL A.x AS v PATTERN (A)"),
        INVALID,
        "FINAL applies to navigation",
        "MEASURES",
    ),
    (
        mr("ORDER BY ts MEASURES FINAL (A.x) AS v PATTERN (A)"),
        INVALID,
        "FINAL applies to navigation",
        "MEASURES",
    ),
    (
        mr("ORDER BY ts MEASURES CLASSIFIER(A, B) AS v PATTERN (A B)"),
        INVALID,
        "CLASSIFIER takes at most one",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES CLASSIFIER(A.x) AS v PATTERN (A)"),
        INVALID,
        "CLASSIFIER takes a pattern variable",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES MATCH_NUMBER(1) AS v PATTERN (A)"),
        INVALID,
        "MATCH_NUMBER takes no arguments",
        None,
    ),
    (mr("ORDER BY ts PATTERN (A) DEFINE A AS EXISTS (SELECT 1)"), UNSUPPORTED, "a subquery", None),
    (
        mr("ORDER BY ts MEASURES sum(A.x) OVER () AS v PATTERN (A)"),
        UNSUPPORTED,
        "a window function (OVER)",
        None,
    ),
    # rules of row pattern recognition
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS B.x > 0, B AS B.x < 9"),
        INVALID,
        "pattern variable B is defined twice in DEFINE",
        "DEFINE",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE C AS C.x > 0"),
        INVALID,
        "DEFINE defines C, which does not appear in PATTERN",
        "DEFINE",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) SUBSET U = (A), U = (B)"),
        INVALID,
        "SUBSET U is defined twice",
        "SUBSET",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) SUBSET A = (B)"),
        INVALID,
        "SUBSET name A is also a pattern variable",
        "SUBSET",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) SUBSET U = (A, C)"),
        INVALID,
        "SUBSET U names C, which does not appear",
        "SUBSET",
    ),
    (
        mr("ORDER BY ts AFTER MATCH SKIP TO FIRST C PATTERN (A B)"),
        INVALID,
        "C is not a pattern variable or SUBSET",
        "AFTER MATCH SKIP",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS B.x > C.x"),
        INVALID,
        "C.x refers to C, which is not a pattern",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS B.x > t.x"),
        INVALID,
        "qualify columns with pattern variables, not the",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts MEASURES sum(*) AS v PATTERN (A B)"),
        INVALID,
        "is only allowed as the argument of count",
        None,
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS count(CLASSIFIER()) > 1"),
        UNSUPPORTED,
        "CLASSIFIER() inside an aggregate in DEFINE",
        "DEFINE B",
    ),
    # rules of ISO/IEC 19075-5 (as Trino's analyzer)
    (
        mr("ORDER BY ts MEASURES RUNNING PREV(A.x) AS v PATTERN (A B)"),
        INVALID,
        "RUNNING cannot be applied to PREV",
        "MEASURES v",
    ),
    (
        mr("ORDER BY ts MEASURES FINAL NEXT(A.x, 2) AS v PATTERN (A B)"),
        INVALID,
        "FINAL cannot be applied to NEXT",
        "MEASURES v",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS RUNNING PREV(B.x) > 0"),
        INVALID,
        "RUNNING cannot be applied to PREV",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts PATTERN (A{0} B) DEFINE A AS A.x > 0"),
        INVALID,
        "the quantifier {0} has upper bound 0",
        "PATTERN",
    ),
    (
        mr("ORDER BY ts PATTERN (A B{,0}) DEFINE A AS A.x > 0"),
        INVALID,
        "upper bound must be at least 1",
        "PATTERN",
    ),
    (
        mr(
            "ORDER BY ts MEASURES array_agg(CLASSIFIER() "
            "|| CAST(A.x AS VARCHAR)) AS v PATTERN (A B)"
        ),
        INVALID,
        "mix pattern variables A and the universal one",
        "MEASURES v",
    ),
    (
        mr("ORDER BY ts MEASURES count(CLASSIFIER(A) || CAST(x AS VARCHAR)) AS v PATTERN (A B)"),
        INVALID,
        "mix pattern variables A and the universal one",
        "MEASURES v",
    ),
    (
        mr("ORDER BY ts MEASURES sum(A.x) FILTER (WHERE B.x > 0) AS v PATTERN (A B)"),
        INVALID,
        "FILTER of sum(A.x) FILTER (WHERE B.x > 0) reads pattern variables A, B",
        "MEASURES v",
    ),
    (
        mr("ORDER BY ts MEASURES count(*) FILTER (WHERE A.x > B.x) AS v PATTERN (A B)"),
        INVALID,
        "reads pattern variables A, B",
        "MEASURES v",
    ),
    (
        mr(
            "ORDER BY ts MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH WITH UNMATCHED ROWS "
            "PATTERN (A {- B -})"
        ),
        INVALID,
        "pattern exclusion {- ... -} cannot be used with ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        "PATTERN",
    ),
    (
        mr("ORDER BY ts ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A ({- B+ -})? C)"),
        INVALID,
        "neither output as matched nor as unmatched rows",
        "PATTERN",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS array_agg(B.x) IS NULL"),
        UNSUPPORTED,
        "aggregate array_agg() in DEFINE",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts MEASURES substr(A.x) AS v PATTERN (A B)"),
        INVALID,
        "substr() takes 2 to 3 arguments",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES CAST(A.x AS VARCHAR(2, 3)) AS v PATTERN (A B)"),
        INVALID,
        "CAST to VARCHAR(2, 3)",
        None,
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS B.x > FINAL LAST(A.x)"),
        INVALID,
        "FINAL is not allowed in DEFINE",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS FIRST(PREV(B.x)) > 0"),
        INVALID,
        "cannot nest PREV inside FIRST",
        "DEFINE B",
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS PREV(NEXT(B.x)) > 0"),
        INVALID,
        "cannot nest NEXT inside PREV",
        None,
    ),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS PREV(B.x + LAST(B.y)) > 0"),
        INVALID,
        "the nested LAST must be the whole argument",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES PREV(count(A.x)) AS v PATTERN (A B)"),
        INVALID,
        "aggregates cannot appear inside PREV",
        None,
    ),
    (mr("ORDER BY ts PATTERN (A B) DEFINE B AS PREV(1) > 0"), INVALID, "navigates nothing", None),
    (
        mr("ORDER BY ts PATTERN (A B) DEFINE B AS PREV(A.x + B.x) > 0"),
        INVALID,
        "mix pattern variables A, B",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES sum(count(A.x)) AS v PATTERN (A B)"),
        INVALID,
        "aggregates cannot be nested",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES sum(PREV(A.x)) AS v PATTERN (A B)"),
        INVALID,
        "navigation cannot appear inside an",
        None,
    ),
    (
        mr("ORDER BY ts MEASURES max(A.x + B.x) AS v PATTERN (A B)"),
        INVALID,
        "mix pattern variables A, B",
        None,
    ),
]


@pytest.mark.parametrize(
    ("sql", "kind", "message", "clause"), CASES, ids=[c[2][:40] for c in CASES]
)
def test_error(sql: str, kind: type[QueryError], message: str, clause: str | None) -> None:
    with pytest.raises(kind, match=re.escape(message)) as info:
        parse(sql)
    if clause is not None:
        assert info.value.clause == clause
    assert info.value.exit_code == 2
    # errors survive pickling (they cross process borders from executors and storage nodes)
    clone = pickle.loads(pickle.dumps(info.value))
    assert str(clone) == str(info.value) and type(clone) is type(info.value)


def test_positions_point_at_the_problem() -> None:
    sql = "SELECT *\nFROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B #)\n)"
    with pytest.raises(QuerySyntaxError) as info:
        parse(sql)
    assert info.value.position == SourcePosition(4, 16)
    sql = "SELECT *\nFROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A)\n  FOO\n)"
    with pytest.raises(QuerySyntaxError) as info:
        parse(sql)
    assert info.value.position == SourcePosition(5, 3)
    assert "line 5, column 3" in str(info.value)


def test_messages_carry_a_hint() -> None:
    with pytest.raises(QueryValidationError) as info:
        parse(mr("ORDER BY ts PATTERN (A B) DEFINE C AS C.x > 0"))
    assert info.value.hint == "pattern variables: A, B"
    assert str(info.value).endswith("; pattern variables: A, B")
    assert info.value.code == "undefined-variable"


SCHEMA = pa.schema(
    [("ts", pa.timestamp("ms")), ("x", pa.int64()), ("price", pa.float64()), ("s", pa.string())]
)


@pytest.mark.parametrize(
    ("sql", "message", "clause"),
    [
        (
            mr("ORDER BY ts PATTERN (A) DEFINE A AS A.prise > 0"),
            "column prise does not exist",
            "DEFINE A",
        ),
        (
            mr("ORDER BY tss PATTERN (A) DEFINE A AS A.x > 0"),
            "column tss does not exist",
            "ORDER BY",
        ),
        (mr("PARTITION BY k ORDER BY ts PATTERN (A)"), "column k does not exist", "PARTITION BY"),
        (mr("ORDER BY ts MEASURES A.y AS v PATTERN (A)"), "column y does not exist", "MEASURES v"),
        (
            mr("ORDER BY s PATTERN (A) WITHIN '5' MINUTE"),
            "needs a temporal ORDER BY column, but s is string",
            "WITHIN",
        ),
        (mr("ORDER BY price PATTERN (A) WITHIN '5' MINUTE"), "but price is double", "WITHIN"),
        (
            mr("ORDER BY ts DESC PATTERN (A) WITHIN '5' MINUTE"),
            "WITHIN needs an ascending ORDER BY column",
            "WITHIN",
        ),
    ],
)
def test_schema_errors(sql: str, message: str, clause: str) -> None:
    with pytest.raises(QueryValidationError, match=re.escape(message)) as info:
        analyze(parse(sql), SCHEMA)
    assert info.value.clause == clause


def test_unknown_column_suggests_the_nearest() -> None:
    with pytest.raises(QueryValidationError, match="did you mean price"):
        analyze(parse(mr("ORDER BY ts PATTERN (A) DEFINE A AS A.prise > 0")), SCHEMA)
