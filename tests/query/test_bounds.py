"""The bound on the strings the outer query builds: calls whose length argument could pass the
limit get a guard that fails before they build anything; calls within it are left as written; a
guarded query answers as the original wherever the guard does not fire."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.bounds import MAX_NESTED, bound_strings, limit_message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT lpad(CAST(a AS VARCHAR), 8, '0'), rpad(s, 100, ' ') FROM m",
        "SELECT repeat('ab', 500), replace(s, 'ab', 'c'), replace(s, 'x', '') FROM m",
        "SELECT regexp_replace(replace(replace(s, 'a', 'b'), 'cd', 'e'), '[0-9]+', '') FROM m",
        "SELECT 'a' || 'b', concat('x', 1, 'y') FROM m",
    ],
)
@pytest.mark.parametrize("dialect", ["duckdb", "spark"])
def test_calls_within_the_limit_are_left_as_written(sql: str, dialect: str) -> None:
    assert bound_strings(sql, dialect, 1000) == sql


GUARDED = [
    "SELECT lpad(s, n, '*') AS x FROM m",
    "SELECT rpad(s, n * 2, '-') AS x FROM m",
    "SELECT repeat(s, n) AS x FROM m",
    "SELECT replace(s, 'a', repeat('b', n)) AS x FROM m",
    "SELECT regexp_replace(s, 'a', s, 'g') AS x FROM m",
    "SELECT replace(s, 'a', 'bb') AS x, count(*) AS c FROM m GROUP BY replace(s, 'a', 'bb')",
    "SELECT s || s || s || s AS x FROM m",
    "SELECT concat(s, NULL, s, s) AS x, concat_ws(s, s, s, s) AS y FROM m",
]


def _run(sql: str, table: pa.Table) -> list[object]:
    con = duckdb.connect()
    try:
        con.register("m", table)
        return sorted(con.sql(sql).fetchall(), key=repr)
    finally:
        con.close()


@pytest.mark.parametrize("sql", GUARDED)
def test_a_guard_answers_as_the_call_within_the_limit_and_fails_past_it(sql: str) -> None:
    guarded = bound_strings(sql, "duckdb", 1000)
    assert guarded != sql and "ERROR(" in guarded
    short = pa.table({"s": ["ab", "xa", None, "aaa"], "n": pa.array([3, 5, 7, None], pa.int32())})
    assert _run(guarded, short) == _run(sql, short)
    long = pa.table({"s": ["a" * 400], "n": pa.array([2000], pa.int32())})  # 4 x 400 > 1000
    with pytest.raises(duckdb.Error) as raised:
        _run(guarded, long)
    message = limit_message(str(raised.value))
    assert message is not None and "longer than 1,000 characters" in message
    assert message.endswith("or raise query.outer_memory_limit")


def test_a_constant_call_past_the_limit_fails_before_it_is_folded() -> None:
    """``lpad('', 2000000000, 'x')`` as written takes DuckDB 2 GB and over a minute while it
    plans the query; the guard stops it at once."""
    guarded = bound_strings("SELECT lpad('', 2000000000, 'x') AS x FROM m", "duckdb", 1000)
    with pytest.raises(duckdb.Error, match="lpad\\(\\) would build a string longer than 1,000"):
        _run(guarded, pa.table({"s": ["a"], "n": [1]}))


def test_spark_gets_raise_error() -> None:
    assert "RAISE_ERROR('dfs-cer outer limit: repeat()" in bound_strings(
        "SELECT repeat(s, n) FROM m", "spark", 1000
    )


def test_guards_nest_a_few_deep() -> None:
    sql = "s"
    for _ in range(MAX_NESTED):
        sql = f"repeat({sql}, 2)"
    bound_strings(f"SELECT {sql} FROM m", "duckdb", 10)
    with pytest.raises(QueryValidationError, match="compute the inner value in a CTE"):
        bound_strings(f"SELECT repeat({sql}, 2) FROM m", "duckdb", 10)


def test_the_columns_a_guard_rewrote_keep_their_names() -> None:
    """DuckDB names an unaliased column by its expression: each rewritten one gets its old name,
    in the statement, a CTE and a derived table read with ``*``."""
    table = pa.table({"s": ["ab", None], "n": pa.array([3, 4], pa.int32())})
    con = duckdb.connect()
    con.register("m", table)
    try:
        for sql in [
            "SELECT lpad(s, n, '*'), s || s || s, concat(s, 'x') AS c, upper(s || 'q') FROM m",
            "WITH x AS (SELECT repeat(s, n), s FROM m) SELECT * FROM x",
            "SELECT * FROM (SELECT *, s || 'z' FROM m) UNION ALL SELECT *, 'a' FROM m",
        ]:
            guarded = bound_strings(sql, "duckdb", 1000, lambda q: con.sql(q).columns)
            assert "ERROR(" in guarded
            want, got = con.sql(sql).to_arrow_table(), con.sql(guarded).to_arrow_table()
            assert got.column_names == want.column_names and got.equals(want), sql
    finally:
        con.close()
