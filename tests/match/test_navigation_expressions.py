"""Navigation over expressions (``FIRST(A.v * 1000)``, ``FIRST(abs(A.v))``, ``PREV(A.price +
A.tax)``): the navigated row's value of the expression, as Trino evaluates it; expressions that
that are not NULL on a NULL input (COALESCE, CASE) are evaluated at the navigated row, so a
navigation that finds no row is NULL, not the COALESCE default."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dfs_cer import match_recognize, parse
from dfs_cer.errors import DfsCerError

T = pa.table({"v": [1, 2, 3, 1, 5], "tax": [1, 1, 1, 1, 1], "ts": [1, 2, 3, 4, 5]})
HEAD = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES "
TAIL = " ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.v > A.v)"  # matches: (ts 1, 2) and (ts 4, 5)


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("FIRST(A.v * 1000)", [1000, 1000]),
        ("FIRST(abs(A.v - 4))", [3, 3]),
        ("PREV(B.v + B.tax)", [2, 2]),
        ("NEXT(A.v * 10, 2)", [30, None]),  # past the partition's end: NULL
        ("LAST(B.v - A.v)", None),  # two variables in one navigation: refused by validation
    ],
)
def test_navigation_over_an_expression(measure: str, expected: list[object] | None) -> None:
    sql = f"{HEAD}{measure} AS m{TAIL}"
    if expected is None:
        with pytest.raises(DfsCerError, match="mix pattern variables"):
            match_recognize(T, sql)
        return
    assert match_recognize(T, sql).column("m").to_pylist() == expected
    query = parse(sql)
    assert parse(query.to_sql()) == query  # the canonical SQL parses back


def test_navigation_over_an_expression_in_define() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH "
        "PATTERN (A B) DEFINE B AS B.v > FIRST(A.v * 2))"
    )
    assert match_recognize(T, sql).column("a").to_pylist() == [4]


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("FIRST(coalesce(A.v, 0))", [1, 1]),
        ("PREV(coalesce(A.v, -1))", [None, 3]),  # no row before the first: NULL, not -1
        ("NEXT(CASE WHEN B.v > 2 THEN 'big' ELSE 'small' END, 1)", ["big", None]),
        ("PREV(coalesce(A.v, -1), 9)", [None, None]),
    ],
)
def test_navigation_over_null_hiding_expressions(measure: str, expected: list[object]) -> None:
    sql = f"{HEAD}{measure} AS m{TAIL}"
    assert match_recognize(T, sql).column("m").to_pylist() == expected
    query = parse(sql)
    assert parse(query.to_sql()) == query
