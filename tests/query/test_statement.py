"""Any SELECT around MATCH_RECOGNIZE: GROUP BY / HAVING, window functions, DISTINCT, CTEs,
subqueries, UNION, joins with registered tables, several clauses in one statement, and a clause
over a subquery or CTE; the SQL around the clauses stays sandboxed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dfs_cer import match_recognize
from dfs_cer.errors import ConfigError, DfsCerError, QueryValidationError
from dfs_cer.query.parser import parse_statement

T = pa.table(
    {"d": ["a", "a", "b", "b", "a", "b"], "x": [1, 5, 2, 6, 7, 1], "ts": [1, 2, 3, 4, 5, 6]}
)
NAMES = pa.table({"d": ["a", "b"], "label": ["Alpha", "Beta"]})
RISES = (
    "FROM t MATCH_RECOGNIZE (PARTITION BY d ORDER BY ts MEASURES A.ts AS a_ts, B.x AS bx "
    "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) DEFINE B AS B.x > A.x)"
)
# rises per d: a: (1 -> 5), (5 -> 7); b: (2 -> 6)


def test_group_by_and_having_over_matches() -> None:
    out = match_recognize(
        T,
        f"SELECT d, count(*) AS n, max(bx) AS top {RISES} GROUP BY d HAVING count(*) >= 1 "
        "ORDER BY d",
    )
    assert out.to_pylist() == [{"d": "a", "n": 2, "top": 7}, {"d": "b", "n": 1, "top": 6}]


def test_window_functions_and_distinct() -> None:
    out = match_recognize(
        T,
        f"SELECT d, a_ts, row_number() OVER (PARTITION BY d ORDER BY a_ts) AS k {RISES} "
        "ORDER BY d, a_ts",
    )
    assert [r["k"] for r in out.to_pylist()] == [1, 2, 1]
    assert match_recognize(T, f"SELECT DISTINCT d {RISES} ORDER BY d").column("d").to_pylist() == [
        "a",
        "b",
    ]


def test_cte_join_with_a_registered_table() -> None:
    out = match_recognize(
        T,
        f"WITH m AS (SELECT * {RISES}) SELECT label, count(*) AS n FROM m JOIN names USING (d) "
        "GROUP BY label ORDER BY label",
        tables={"names": NAMES},
    )
    assert out.to_pylist() == [{"label": "Alpha", "n": 2}, {"label": "Beta", "n": 1}]


def test_a_scalar_subquery_and_union_of_two_clauses() -> None:
    out = match_recognize(
        T, f"SELECT d FROM (SELECT * {RISES}) WHERE bx > (SELECT min(x) FROM t) ORDER BY d"
    )
    assert out.column("d").to_pylist() == ["a", "a", "b"]
    highs = (
        "FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS at ONE ROW PER MATCH PATTERN "
        "(A) DEFINE A AS A.x > 5)"
    )
    lows = (
        "FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS at ONE ROW PER MATCH PATTERN "
        "(A) DEFINE A AS A.x < 2)"
    )
    out = match_recognize(
        T,
        f"SELECT at, 'high' AS kind {highs} UNION ALL SELECT at, 'low' AS kind {lows} ORDER BY at",
    )
    assert out.to_pylist() == [
        {"at": 1, "kind": "low"},
        {"at": 4, "kind": "high"},
        {"at": 5, "kind": "high"},
        {"at": 6, "kind": "low"},
    ]


def test_two_clauses_joined() -> None:
    falls = (
        "FROM t MATCH_RECOGNIZE (PARTITION BY d ORDER BY ts MEASURES A.ts AS f_ts ONE ROW "
        "PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) DEFINE B AS B.x < A.x)"
    )
    out = match_recognize(
        T,
        f"SELECT r.d, r.a_ts, f.f_ts {RISES} AS r JOIN (SELECT * {falls}) AS f "
        "ON r.d = f.d AND f.f_ts > r.a_ts ORDER BY r.d, r.a_ts",
    )
    assert out.to_pylist() == [{"d": "b", "a_ts": 3, "f_ts": 4}]


def test_a_clause_over_a_subquery_or_a_cte() -> None:
    body = (
        "MATCH_RECOGNIZE (PARTITION BY d ORDER BY ts MEASURES A.ts AS a_ts ONE ROW PER "
        "MATCH PATTERN (A B) DEFINE B AS B.x > A.x)"
    )
    # without the row x = 1 the a-partition reads 5, 7 and b reads 2, 6
    sub = match_recognize(T, f"SELECT * FROM (SELECT * FROM t WHERE x > 1) {body} ORDER BY d")
    cte = match_recognize(
        T, f"WITH f AS (SELECT * FROM t WHERE x > 1) SELECT * FROM f {body} ORDER BY d"
    )
    assert sub.to_pylist() == cte.to_pylist() == [{"d": "a", "a_ts": 2}, {"d": "b", "a_ts": 3}]


def test_tables_may_be_pandas_and_the_events_may_come_by_name() -> None:
    pd = pytest.importorskip("pandas")
    out = match_recognize(None, f"SELECT count(*) AS n {RISES}", tables={"t": T.to_pandas()})
    assert out.to_pylist() == [{"n": 3}]
    assert pd is not None


def test_the_statement_around_stays_sandboxed() -> None:
    for bad in (
        f"SELECT * {RISES} AS m JOIN read_csv('/etc/passwd') ON true",
        f"SELECT * {RISES} AS m, (SELECT current_setting('threads')) AS q",
        f"WITH m AS (SELECT * {RISES}) SELECT * FROM m JOIN duckdb_settings() ON true",
    ):
        with pytest.raises(QueryValidationError, match="may not use"):
            match_recognize(T, bad)
    with pytest.raises(ConfigError, match="'names', which are not registered"):
        match_recognize(T, f"WITH m AS (SELECT * {RISES}) SELECT * FROM m JOIN names USING (d)")
    with pytest.raises(DfsCerError):
        match_recognize(T, f"SELECT * {RISES}; SELECT 1")


def test_parse_statement_names_parts_tables_and_simple_queries() -> None:
    s = parse_statement(f"SELECT * {RISES} AS m WHERE bx > 1")
    assert s.simple and s.tables == ("t",) and len(s.parts) == 1
    s = parse_statement(f"WITH m AS (SELECT * {RISES}) SELECT * FROM m JOIN names USING (d)")
    assert not s.simple and set(s.tables) == {"t", "names"} and s.parts[0].input_sql is None
    s = parse_statement(
        "SELECT * FROM (SELECT * FROM t WHERE x > 1) MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.x > 1)"
    )
    assert s.parts[0].input_sql is not None and "x > 1" in s.parts[0].input_sql


def test_null_ordering_follows_trino() -> None:
    """Trino sorts NULLs last unless told otherwise, ascending or descending; DuckDB and Spark
    defaults differ (Spark puts them first ascending), so the outer SQL says it explicitly."""
    from dfs_cer import parse
    from dfs_cer.local import outer_sql

    t = pa.table({"x": [3, None, 1, None, 2], "ts": [1, 2, 3, 4, 5]})
    q = (
        "SELECT v FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS v ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS true) ORDER BY v"
    )
    assert match_recognize(t, q).column("v").to_pylist() == [1, 2, 3, None, None]
    assert match_recognize(t, q + " DESC").column("v").to_pylist() == [3, 2, 1, None, None]
    assert match_recognize(t, q + " NULLS FIRST").column("v").to_pylist() == [None, None, 1, 2, 3]
    grouped = q.replace("SELECT v", "SELECT v, count(*) AS n").replace(
        "ORDER BY v", "GROUP BY v ORDER BY v"
    )
    assert match_recognize(t, grouped).column("v").to_pylist() == [1, 2, 3, None]
    assert (outer_sql(parse(q), "spark") or "").endswith("ORDER BY v NULLS LAST")
    assert (outer_sql(parse(q + " DESC"), "spark") or "").endswith(
        "ORDER BY v DESC"
    )  # Spark: DESC puts NULLs last


def test_order_by_nulls_first_inside_the_clause_is_honoured() -> None:
    """Inside MATCH_RECOGNIZE, ORDER BY x [ASC|DESC] sorts NULLs last unless NULLS FIRST says
    otherwise (Trino); the match's first and last rows show where they went."""
    t = pa.table({"p": [1, None, 2, None, 3], "ts": [1, 2, 3, 4, 5]})
    got = {}
    for order in ("p", "p NULLS FIRST", "p DESC", "p DESC NULLS FIRST", "p NULLS LAST"):
        q = (
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY {order} MEASURES A.p AS first_p, "
            "LAST(B.p) AS last_p ONE ROW PER MATCH PATTERN (A B*) DEFINE B AS true)"
        )
        got[order] = tuple(match_recognize(t, q).to_pylist()[0].values())
    assert got == {
        "p": (1, None),
        "p NULLS FIRST": (None, 3),
        "p DESC": (3, None),
        "p DESC NULLS FIRST": (None, 1),
        "p NULLS LAST": (1, None),
    }


MR = "MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a PATTERN (A) DEFINE A AS A.x > 1)"


@pytest.mark.parametrize(
    ("sql", "pushed"),
    [
        (f"SELECT * FROM (SELECT * FROM t WHERE x > 2) {MR}", ("t", "x > 2")),
        (
            f"SELECT * FROM (SELECT * FROM t AS e WHERE e.x > 2 AND s LIKE 'a%') {MR}",
            ("t", "x > 2 AND s LIKE 'a%'"),
        ),
        (f"SELECT * FROM (SELECT * FROM t WHERE t.x > 2) {MR}", ("t", "x > 2")),
        (
            "WITH f AS (SELECT * FROM t WHERE ts >= TIMESTAMP '2024-01-01 00:00:00') "
            f"SELECT * FROM f {MR}",
            ("t", "ts >= CAST('2024-01-01 00:00:00' AS TIMESTAMP)"),
        ),
        (f"SELECT * FROM (SELECT * FROM t WHERE x / 2 > 1) {MR}", None),  # integer division differs
        (f"SELECT * FROM (SELECT x, ts FROM t WHERE x > 2) {MR}", None),  # a projection
        (f"SELECT * FROM (SELECT * FROM t WHERE x > 2 LIMIT 5) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t WHERE x > 2 ORDER BY ts) {MR}", None),
        (f"SELECT * FROM (SELECT DISTINCT * FROM t WHERE x > 2) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t JOIN u USING (x) WHERE x > 2) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t WHERE x > (SELECT max(x) FROM t)) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t WHERE x IN (SELECT x FROM u)) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t WHERE u.x > 2) {MR}", None),  # another table's column
        (f"SELECT * FROM (SELECT * FROM t) {MR}", None),  # nothing to push: the table itself
        (f"SELECT * FROM (SELECT * FROM t WHERE CAST(x AS VARCHAR) = '2') {MR}", None),
        (
            "WITH f AS (SELECT * FROM t WHERE x > 2), g AS (SELECT * FROM f WHERE x < 9) "
            f"SELECT * FROM g {MR}",
            None,
        ),
        # not SELECT * FROM t: columns replaced, dropped or renamed, a sample
        (f"SELECT * FROM (SELECT * REPLACE (x * 0 + 1 AS x) FROM t WHERE x > 2) {MR}", None),
        (f"SELECT * FROM (SELECT * EXCLUDE (y) FROM t WHERE x > 2) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t AS a(ts, x) WHERE x > 2) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t TABLESAMPLE 3 ROWS WHERE x > 2) {MR}", None),
        (
            f"SELECT * FROM (SELECT * FROM t AS a WHERE t.x > 2) {MR}",
            None,
        ),  # the alias hides the name
        # forms whose value differs between engines for some rows
        (f"SELECT * FROM (SELECT * FROM t WHERE f * 0 > 5) {MR}", None),  # inf * 0 is NaN
        (f"SELECT * FROM (SELECT * FROM t WHERE x * 3 > 0) {MR}", None),  # overflow
        (f"SELECT * FROM (SELECT * FROM t WHERE trim(s) = 'p') {MR}", None),  # white space
        (f"SELECT * FROM (SELECT * FROM t WHERE upper(s) = 'P') {MR}", None),  # Unicode tables
        (
            "SELECT * FROM (SELECT * FROM t WHERE x = "
            f"1.0000000000000000000000000000000000000001) {MR}",
            None,
        ),
        (f"SELECT * FROM (SELECT * FROM t WHERE f > 1e0) {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t WHERE d = DATE '20240101') {MR}", None),
        (f"SELECT * FROM (SELECT * FROM t WHERE s LIKE '{'%a' * 200}') {MR}", None),
        (
            f"SELECT * FROM (SELECT * FROM t WHERE x > -3 AND s LIKE 'a%' AND length(s) = 2) {MR}",
            ("t", "x > -3 AND s LIKE 'a%' AND LENGTH(s) = 2"),
        ),
    ],
)
def test_row_local_subqueries_are_recognised(sql: str, pushed: tuple[str, str] | None) -> None:
    assert parse_statement(sql).parts[0].pushed == pushed


def test_a_cte_only_a_clause_reads_is_dropped_from_the_statement() -> None:
    s = parse_statement(
        f"WITH f AS (SELECT * FROM t WHERE x > 2), n AS (SELECT 1 AS one) "
        f"SELECT * FROM f {MR} AS m, n"
    )
    assert "WITH n AS" in s.sql and "f AS" not in s.sql and s.outer_tables == ()
    kept = parse_statement(
        f"WITH f AS (SELECT * FROM t WHERE x > 2) SELECT a FROM f {MR} UNION ALL SELECT x FROM f"
    )
    assert "WITH f AS" in kept.sql and kept.outer_tables == ("t",)


def test_a_subquery_input_reads_the_statements_ctes() -> None:
    t = pa.table({"ts": [1, 2, 3, 4], "x": [1, 2, 3, 4]})
    clause = (
        "MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A) "
        "DEFINE A AS TRUE)"
    )
    sql = (
        "WITH f AS (SELECT * FROM t WHERE x > 2) SELECT * "
        f"FROM (SELECT * FROM f WHERE x < 4) {clause}"
    )
    assert match_recognize(t, sql).to_pylist() == [{"a": 3}]
    sql = (
        "WITH f AS (SELECT * FROM t WHERE x > 100) SELECT * "
        f"FROM (SELECT * FROM f WHERE x < 9) {clause}"
    )
    assert match_recognize(t, sql).num_rows == 0


def test_a_cte_input_partitioned_by_an_expression_runs() -> None:
    t = pa.table({"ts": [1, 2, 3, 4], "x": [1, 2, 3, 4]})
    clause = (
        "MATCH_RECOGNIZE (PARTITION BY x % 2 ORDER BY ts MEASURES A.ts AS a ONE ROW PER "
        "MATCH PATTERN (A) DEFINE A AS A.x > 1)"
    )
    expected = match_recognize(t, f"SELECT * FROM t {clause}").to_pylist()
    assert len(expected) == 3
    for sql in (
        f"WITH f AS (SELECT * FROM t) SELECT * FROM f {clause}",
        f"WITH f AS (SELECT * FROM t) SELECT * FROM (SELECT * FROM f) {clause}",
    ):
        assert sorted(map(str, match_recognize(t, sql).to_pylist())) == sorted(
            map(str, expected)
        )  # was refused


SELF_JOIN = (
    "SELECT * FROM ({input}) MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS ax ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS A.x > 5)"
)
TWICE = pa.table({"id": [1, 2, 3], "ts": [1, 2, 3], "x": [5, 6, 7]})


@pytest.mark.parametrize(
    ("input_sql", "column"),
    [
        ("SELECT * FROM t a JOIN t b ON a.id = b.id", "id"),
        ("SELECT * FROM t a JOIN t b USING (id)", "ts"),  # USING merges id: ts and x come twice
        ("SELECT a.*, b.* FROM t a, t b WHERE a.id = b.id + 1", "id"),
        ("SELECT a.*, b.x FROM t a JOIN t b ON a.x = b.x", "x"),
        ("SELECT ts, x, id AS x FROM t", "x"),
    ],
)
def test_an_input_with_a_column_twice_is_refused_before_any_data(
    input_sql: str, column: str
) -> None:
    sql = SELF_JOIN.format(input=input_sql)
    with pytest.raises(
        QueryValidationError,
        match=rf"the input of MATCH_RECOGNIZE has two columns named {column} "
        rf".*e\.g\. SELECT a\.\*, b\.{column} AS b_{column}",
    ):
        parse_statement(sql)  # from the text alone: before any table is read or node contacted
    with pytest.raises(QueryValidationError, match=f"two columns named {column}"):
        match_recognize(None, sql, tables={"t": TWICE})
    cte = f"WITH j AS ({input_sql}) " + SELF_JOIN.format(input="SELECT * FROM j").replace(
        "FROM (SELECT * FROM j)", "FROM j"
    )
    with pytest.raises(QueryValidationError, match=f"two columns named {column}"):
        parse_statement(cte)


def test_a_column_a_nested_query_reads_is_not_the_subquerys() -> None:
    parse_statement(SELF_JOIN.format(input="SELECT *, 1 AS k FROM t WHERE x IN (SELECT k FROM u)"))
    sql = SELF_JOIN.format(input="SELECT *, 1 AS k FROM t WHERE x IN (SELECT k FROM u)")
    assert (
        match_recognize(None, sql, tables={"t": TWICE, "u": pa.table({"k": [6, 7]})}).num_rows == 2
    )


def test_an_input_joining_tables_that_share_a_column_is_refused_once_computed() -> None:
    other = pa.table({"id": [1, 2], "x": [9, 9]})
    sql = SELF_JOIN.format(input="SELECT * FROM t JOIN u ON t.id = u.id")
    parse_statement(sql)  # the text does not say which columns u has
    with pytest.raises(QueryValidationError, match=r"two columns named id .*reads has it twice"):
        match_recognize(None, sql, tables={"t": TWICE, "u": other})
    renamed = SELF_JOIN.format(input="SELECT t.*, u.x AS ux FROM t JOIN u ON t.id = u.id")
    assert match_recognize(None, renamed, tables={"t": TWICE, "u": other}).to_pylist() == [
        {"ax": 6}
    ]
    # the same input as a CTE, or as a subquery reading one: the engine computes it as the query
    # itself, not as a relation it reads (DuckDB renames a relation's second id to id_1)
    cte = "WITH j AS (SELECT * FROM t JOIN u ON t.id = u.id) " + SELF_JOIN.format(
        input="SELECT 1"
    ).replace("(SELECT 1)", "j")
    via = "WITH v AS (SELECT * FROM u) " + SELF_JOIN.format(
        input="SELECT * FROM t JOIN v ON t.id = v.id"
    )
    keyed = sql.replace(
        "MATCH_RECOGNIZE (ORDER BY ts", "MATCH_RECOGNIZE (PARTITION BY ts % 2 ORDER BY ts"
    )
    for sql in (cte, via, keyed, cte.replace("(ORDER BY ts", "(PARTITION BY ts % 2 ORDER BY ts")):
        with pytest.raises(
            QueryValidationError, match=r"two columns named id .*reads has it twice"
        ):
            match_recognize(None, sql, tables={"t": TWICE, "u": other})
    plain = pa.Table.from_arrays(
        [TWICE.column(0), TWICE.column(1), TWICE.column(2)], names=["id", "ts", "id"]
    )
    with pytest.raises(QueryValidationError, match="two columns named id"):  # a table as it is, too
        match_recognize(
            plain,
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a PATTERN (A) "
            "DEFINE A AS A.ts > 1)",
        )
