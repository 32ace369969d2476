"""The SQL around MATCH_RECOGNIZE is bounded: it stops at the query's deadline and past
``query.outer_memory_limit`` (its operators and its result), and a string function asked for a
string past the limit on one string fails before it builds it; each is one clear
OuterQueryLimitError naming the bound and how to move it."""

from __future__ import annotations

import dataclasses
import time

import pyarrow as pa
import pytest

from dfs_cer import match_recognize
from dfs_cer.config import DEFAULT_CONFIG, Config
from dfs_cer.errors import OuterQueryLimitError
from dfs_cer.outer import OuterEngine

EVENTS = pa.table({"ts": list(range(100)), "v": [i % 7 for i in range(100)]})
CLAUSE = (
    "FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS av ALL ROWS PER MATCH PATTERN (A) "
    "DEFINE A AS A.v >= 0)"
)


def _config(timeout: float = 300.0, memory: int = 1024**3) -> Config:
    return dataclasses.replace(
        DEFAULT_CONFIG,
        query=dataclasses.replace(DEFAULT_CONFIG.query, outer_memory_limit=memory),
        strategy=dataclasses.replace(DEFAULT_CONFIG.strategy, query_timeout_seconds=timeout),
    )


@pytest.mark.timeout(60)
def test_a_cross_join_past_the_deadline_stops_with_a_clear_error() -> None:
    """A CTE over the matches cross-joined six times (10^12 rows to count) ran until killed."""
    sql = f"WITH m AS (SELECT * {CLAUSE}) SELECT count(*) AS n FROM m a, m b, m c, m d, m e, m f"
    with pytest.raises(OuterQueryLimitError, match="ran past the query's deadline") as raised:
        match_recognize(EVENTS, sql, config=_config(timeout=1.0))
    assert "give the query more time" in str(raised.value)


@pytest.mark.timeout(30)
def test_a_huge_padded_string_fails_before_it_is_built() -> None:
    """``lpad('', 2000000000, 'x')`` allocated 2 GB outside DuckDB's memory limit, over a minute."""
    sql = f"SELECT lpad('', 2000000000, 'x') AS s {CLAUSE}"
    with pytest.raises(OuterQueryLimitError, match=r"lpad\(\) would build a string longer than"):
        match_recognize(EVENTS, sql)
    with pytest.raises(OuterQueryLimitError, match=r"repeat\(\) would build"):  # column-valued
        match_recognize(EVENTS, f"SELECT repeat('x', av * 1000000) AS s {CLAUSE}")


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        (
            f"WITH m AS (SELECT * {CLAUSE}) SELECT a.av, b.ts FROM m a, m b, m c ORDER BY 2",
            "its joins, sorts",
        ),
        (f"WITH m AS (SELECT * {CLAUSE}) SELECT a.ts FROM m a, m b, m c, m d", "its result"),
    ],
)
def test_past_the_memory_limit_is_one_clear_error(sql: str, what: str) -> None:
    with pytest.raises(OuterQueryLimitError, match=f"query.outer_memory_limit .16 MiB. for {what}"):
        match_recognize(EVENTS, sql, config=_config(memory=16 * 1024**2))


def test_within_the_bounds_the_answer_is_the_same() -> None:
    sql = (
        f"SELECT lpad(CAST(av AS VARCHAR), 3, '0') AS p, replace(CAST(ts AS VARCHAR), '1', 'xx') "
        f"AS r, repeat('*', av) AS bar {CLAUSE} ORDER BY ts LIMIT 3"
    )
    assert match_recognize(EVENTS, sql).to_pylist() == [
        {"p": "000", "r": "0", "bar": ""},
        {"p": "001", "r": "xx", "bar": "*"},
        {"p": "002", "r": "2", "bar": "**"},
    ]


def test_a_deadline_already_past_runs_nothing() -> None:
    with OuterEngine(DEFAULT_CONFIG, time.monotonic() - 1) as engine:
        engine.register("m", EVENTS)
        with pytest.raises(OuterQueryLimitError, match=r"had 0\.0 s"):
            engine.table("SELECT * FROM m", ["m"])
