"""The outer query's sandbox itself (dfs_cer.query.sandbox), on both dialects: an allow-list of
node kinds and functions, so Spark's script transforms, JVM calls, commands and session values
are refused at the check, not only by the statement parser in front of it."""

from __future__ import annotations

import pytest
import sqlglot
from hypothesis import example, given
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.dialects.spark import Spark

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.allowlist import ALLOWED_FUNCTIONS, ALLOWED_NODES
from dfs_cer.query.sandbox import check_outer, check_tree, function_name

DIALECTS = ("duckdb", "spark")

#: Spark-only forms (Hive script transforms, JVM calls, commands, paths, variables), every spelling
SPARK_FORMS = [
    "SELECT TRANSFORM(a) USING 'touch /tmp/x; cat' AS (x) FROM m",
    "SELECT TRANSFORM(a, b) USING 'cat' FROM m",
    "select transform(a) using 'cat' as (x string) from m",
    "SELECT * FROM (SELECT TRANSFORM(a) USING 'cat' AS (x) FROM m) AS s",
    "SELECT x FROM m WHERE a IN (SELECT TRANSFORM(a) USING 'cat' AS (x) FROM m)",
    "MAP a USING 'cat' AS (x) FROM m",
    "FROM m MAP a USING 'cat' AS x",
    "FROM m SELECT TRANSFORM(a) USING 'cat' AS x",
    "REDUCE a USING 'cat' AS (x) FROM m",
    "FROM m REDUCE a USING 'cat' AS x",
    "SELECT * FROM m LATERAL VIEW explode(array(1, 2)) t AS c",
    "SELECT * FROM m LATERAL VIEW OUTER explode(array(1)) t AS c",
    "select * from m lateral view posexplode(array(1)) t as p, c",
    "SELECT reflect('java.lang.Runtime', 'getRuntime') FROM m",
    "SELECT REFLECT('java.lang.System', 'exit', 1) FROM m",
    "SELECT `reflect`('java.lang.System', 'exit', 1) FROM m",
    "SELECT \"reflect\"('java.lang.System', 'exit', 1) FROM m",
    "SELECT reflect ('java.lang.System', 'exit', 1) FROM m",
    "SELECT m.reflect('java.lang.System', 'exit', 1) FROM m",
    "SELECT `java_method`('java.lang.System', 'exit', 1) FROM m",
    "SELECT TRY_REFLECT('java.lang.System', 'exit', 1) FROM m",
    "SELECT default.reflect('java.lang.System', 'exit', 1) FROM m",
    "SELECT `default`.`reflect`('java.lang.System', 'exit', 1) FROM m",
    "SELECT spark_catalog.default.reflect('a', 'b') FROM m",
    "SELECT system.builtin.reflect('a', 'b') FROM m",
    "SELECT java_method('java.lang.System', 'exit', 1) FROM m",
    "SELECT Java_Method('java.lang.System', 'exit', 1) FROM m",
    "SELECT try_reflect('java.lang.System', 'exit', 1) FROM m",
    "SELECT a FROM m WHERE reflect('java.lang.System', 'exit', 1) = 1",
    "SELECT a FROM m ORDER BY java_method('java.lang.Math', 'random')",
    "SET spark.sql.variable.substitute=true",
    "SET a = b",
    "set -v",
    "RESET",
    "ADD JAR /tmp/evil.jar",
    "ADD FILE /tmp/evil.sh",
    "add jars /tmp/a.jar",
    "CREATE FUNCTION f AS 'evil.Udf'",
    "CREATE TEMPORARY FUNCTION f AS 'evil.Udf' USING JAR '/tmp/evil.jar'",
    "CREATE OR REPLACE TEMPORARY FUNCTION f AS 'evil.Udf'",
    "SELECT * FROM parquet.`/etc/passwd`",
    "SELECT * FROM PARQUET.`/etc/passwd`",
    "SELECT * FROM `parquet`.`/etc/passwd`",
    "SELECT * FROM csv.`/etc/passwd`",
    "SELECT * FROM json.`/etc/passwd`",
    "SELECT * FROM text.`file:///etc/passwd`",
    "SELECT * FROM orc.`s3://bucket/x`",
    "SELECT * FROM 'file.parquet'",
    "SELECT * FROM m JOIN 'file.parquet' ON true",
    "SELECT * FROM `file.parquet`",
    "SELECT '${env:HOME}' FROM m",
    "SELECT ${hiveconf:x} FROM m",
    "SELECT a FROM m WHERE b = '${system:user.name}'",
    "SELECT a FROM m -- ${x}",
    "SELECT IDENTIFIER('reflect')('a', 'b') FROM m",
    "SELECT * FROM IDENTIFIER('default.t')",
    "SELECT a FROM m CLUSTER BY a",
    "SELECT a FROM m TABLESAMPLE (50 PERCENT)",
    "EXECUTE IMMEDIATE 'SELECT reflect(1)'",
    "DECLARE VARIABLE v INT",
]

#: session and engine values, in every spelling: with and without parentheses, any case
SESSION_FORMS = [
    "SELECT version() FROM m",
    "SELECT VERSION() FROM m",
    "SELECT a, version() AS v FROM m",
    "SELECT current_catalog() FROM m",
    "SELECT CURRENT_CATALOG FROM m",
    "SELECT current_catalog FROM m",
    "SELECT current_query() FROM m",
    "SELECT current_schemas(true) FROM m",
    "SELECT current_database() FROM m",
    "SELECT current_database FROM m",
    "SELECT current_schema() FROM m",
    "SELECT current_schema FROM m",
    "SELECT current_user FROM m",
    "SELECT current_user() FROM m",
    "SELECT CURRENT_USER FROM m",
    "SELECT user FROM m",
    "SELECT session_user FROM m",
    "SELECT session_user() FROM m",
    "SELECT current_role FROM m",
    "SELECT a FROM m WHERE current_user = 'root'",
    "SELECT getenv('HOME') FROM m",
    "SELECT current_setting('threads') FROM m",
    "SELECT input_file_name() FROM m",
    "SELECT uuid() FROM m",
    "SELECT pg_backend_pid() FROM m",
    "SELECT spark_partition_id() FROM m",
    "SELECT monotonically_increasing_id() FROM m",
    "SELECT getvariable('x') FROM m",
    "SELECT typeof(a) FROM m",
]

#: what analysts write around matches: must keep passing on both dialects
HARMLESS = [
    "SELECT * FROM m",
    # pure functions analysts reach for (each engine runs the ones it has)
    "SELECT now(), dayname(t), monthname(t), isodow(t), isnan(b), isinf(b), translate(s, "
    "'ab', 'xy'), time_bucket(INTERVAL '1' HOUR, t), epoch_us(t) FROM m",
    "SELECT DISTINCT a, b FROM m WHERE a IS NOT NULL AND b BETWEEN 1 AND 9 OR a IN (1, 2) "
    "ORDER BY a DESC LIMIT 5",
    "SELECT a, count(*) AS n, sum(b), avg(b), min(b), max(b), count(DISTINCT b) FROM m GROUP BY a "
    "HAVING count(*) > 1 ORDER BY n DESC NULLS LAST",
    "SELECT a, b + 1, b - 1, b * 2, b / 2, b % 2, -b, abs(b), round(b / 3.0, 2), floor(b), "
    "ceil(b), sqrt(abs(b)), power(b, 2), ln(abs(b) + 1), greatest(a, b), least(a, b) FROM m",
    "SELECT CASE WHEN b > 1 THEN 'hi' WHEN b < 0 THEN 'neg' ELSE 'lo' END AS c, coalesce(a, "
    "0), nullif(a, b), CAST(b AS DOUBLE), CAST(b AS VARCHAR), try_cast(a AS INT) FROM m",
    "SELECT upper(s), lower(s), length(s), substring(s, 1, 2), trim(s), concat(s, 'x'), s || 'y', "
    "replace(s, 'a', 'b'), s LIKE 'a%', regexp_replace(s, 'a+', 'b'), split_part(s, '-', 1) FROM m",
    "SELECT date_trunc('hour', t), t + INTERVAL '1' HOUR, extract(YEAR FROM t), year(t), month(t), "
    "current_date, current_timestamp FROM m",
    "SELECT a, row_number() OVER (PARTITION BY a ORDER BY b) AS r, rank() OVER w, lag(b, 1) "
    "OVER (ORDER BY t), lead(b) OVER (ORDER BY t), sum(b) OVER (ORDER BY t ROWS BETWEEN 2 "
    "PRECEDING AND CURRENT ROW) FROM m WINDOW w AS (ORDER BY b)",
    "SELECT a, count(*) FILTER (WHERE b > 1) AS n, stddev(b), median(b) FROM m GROUP BY a",
    "SELECT m.a, n.label FROM m JOIN n ON m.a = n.a LEFT JOIN n AS k USING (a) WHERE EXISTS "
    "(SELECT 1 FROM n WHERE n.a = m.a) AND m.b > (SELECT avg(b) FROM m)",
    "WITH x AS (SELECT a, b FROM m), y AS (SELECT a FROM x WHERE b > 1) SELECT * FROM y UNION ALL "
    "SELECT a FROM n EXCEPT SELECT a FROM m INTERSECT SELECT a FROM n",
    "SELECT * FROM (SELECT a, b FROM m) AS s WHERE s.b = (SELECT max(b) FROM m) ORDER BY 1 "
    "LIMIT 3 OFFSET 1",
    "SELECT a, b FROM m QUALIFY row_number() OVER (PARTITION BY a ORDER BY b) = 1",
    "SELECT a, count(*) FROM m GROUP BY ROLLUP (a)",
    "SELECT m.current_catalog, m.user FROM m",
    "SELECT t AT TIME ZONE 'UTC', date_part('year', t), CAST(b AS DECIMAL(10, 2)), a IS "
    "DISTINCT FROM b, s SIMILAR TO 'z' FROM m ORDER BY 1 FETCH FIRST 5 ROWS ONLY",
    "SELECT mode(a), string_agg(s, ','), percentile_cont(0.5) "
    "WITHIN GROUP (ORDER BY b), md5(s) FROM m",
    "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(x, y) WHERE x NOT IN (SELECT a FROM n) "
    "AND x = ANY (SELECT a FROM m)",
]


@pytest.mark.parametrize("sql", SPARK_FORMS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_spark_only_forms_are_refused_at_the_sandbox(sql: str, dialect: str) -> None:
    with pytest.raises(QueryValidationError, match="outer query"):
        check_outer(sql, ["m"], dialect)


def test_spark_hints_are_refused_on_spark() -> None:
    """A hint is a comment to DuckDB, an instruction to Spark (its repartition counts)."""
    for sql in ("SELECT /*+ REPARTITION(100000) */ a FROM m", "SELECT /*+ COALESCE(1) */ a FROM m"):
        with pytest.raises(QueryValidationError, match="Hint"):
            check_outer(sql, ["m"], "spark")


def test_refusals_name_the_node_kind_or_function() -> None:
    for sql, message in (
        ("SELECT TRANSFORM(a) USING 'cat' AS (x) FROM m", "QueryTransform"),
        ("SELECT * FROM m LATERAL VIEW explode(array(1)) t AS c", "Lateral"),
        ("SELECT `reflect`('a', 'b') FROM m", r"function reflect\(\)"),
        ("SELECT default.reflect('a', 'b') FROM m", "qualified name"),
        ("SELECT version() FROM m", r"function version\(\)"),
        ("SELECT CURRENT_CATALOG FROM m", "CURRENT_CATALOG .*qualify it"),
        ("ADD JAR /tmp/evil.jar", "Command statement"),
        ("SET a = b", "Set statement"),
        ("CREATE TEMPORARY FUNCTION f AS 'x'", "Create statement"),
        ("SELECT * FROM parquet.`/etc/passwd`", "qualified table"),
        ("SELECT /*+ REPARTITION(100000) */ a FROM m", "Hint"),
    ):
        with pytest.raises(QueryValidationError, match=message):
            check_outer(sql, ["m"], "spark")


@pytest.mark.parametrize("sql", SESSION_FORMS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_session_values_and_engine_functions_are_refused(sql: str, dialect: str) -> None:
    with pytest.raises(QueryValidationError, match="outer query"):
        check_outer(sql, ["m"], dialect)


@pytest.mark.parametrize("sql", HARMLESS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_what_analysts_write_still_passes(sql: str, dialect: str) -> None:
    check_outer(sql, ["m", "n"], dialect)


def _known_spellings() -> list[tuple[str, str]]:
    return [
        (d, name)
        for d, parser in (("duckdb", DuckDB.Parser), ("spark", Spark.Parser))
        for name in sorted(parser.FUNCTIONS)
    ]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_spelling_that_passes_is_listed(dialect: str) -> None:
    """sqlglot names a function it knows by its own name; every spelling it maps onto an allowed
    name is itself in the list, so the list reads as what may run."""
    passed = []
    for d, name in _known_spellings():
        if d != dialect:
            continue
        for args in ("x, y", "x"):
            try:
                check_outer(f"SELECT {name}({args}) FROM m", ["m"], dialect)
            except QueryValidationError:
                continue
            passed.append(name.lower())
            break
    assert passed and set(passed) <= ALLOWED_FUNCTIONS, sorted(set(passed) - ALLOWED_FUNCTIONS)


def _expression_kinds() -> list[type[exp.Expr]]:
    seen: set[type[exp.Expr]] = set()
    todo: list[type[exp.Expr]] = [exp.Expr]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return sorted((c for c in seen if _instantiable(c)), key=lambda c: (c.__module__, c.__name__))


def _instantiable(kind: type[exp.Expr]) -> bool:
    try:
        kind()
    except TypeError:  # sqlglot's traits (Func, Binary, ...): no node is of them alone
        return False
    return True


KINDS = _expression_kinds()


def _allowed(node: exp.Expr) -> bool:
    if isinstance(node, exp.Func):
        return function_name(node) in ALLOWED_FUNCTIONS
    return type(node) in ALLOWED_NODES


@given(kind=st.sampled_from(KINDS), dialect=st.sampled_from(DIALECTS))
def test_only_listed_node_kinds_pass(kind: type[exp.Expr], dialect: str) -> None:
    """Any sqlglot node kind, placed in a select list: refused, by name, unless listed (a kind a
    new sqlglot release adds is refused by default)."""
    node = kind()
    tree = exp.select(node).from_("m")
    name = function_name(node) if isinstance(node, exp.Func) else kind.__name__
    if _allowed(node):
        try:
            check_tree(tree, ["m"], dialect)
        except QueryValidationError as exc:  # an empty node may fail another rule, never its kind's
            assert f"use a {kind.__name__} " not in str(exc) and f"function {name}()" not in str(
                exc
            )
    else:
        with pytest.raises(QueryValidationError, match=f"(a|function) {name or kind.__name__}"):
            check_tree(tree, ["m"], dialect)


@given(
    name=st.one_of(
        st.sampled_from([n for _, n in _known_spellings()]),
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True),
        st.sampled_from(sorted(ALLOWED_FUNCTIONS)),
    ),
    quote=st.booleans(),
    dialect=st.sampled_from(DIALECTS),
)
@example(name="MAP", quote=False, dialect="spark")  # sqlglot: IndexError, not ParseError
def test_a_function_passes_only_if_its_spelling_is_listed(
    name: str, quote: bool, dialect: str
) -> None:
    called = f"`{name}`" if quote and dialect == "spark" else f'"{name}"' if quote else name
    sql = f"SELECT {called}(a) FROM m"
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except Exception:  # sqlglot also fails with IndexError (spark's MAP(a)): refused, as it does
        with pytest.raises(QueryValidationError, match="does not parse"):
            check_outer(sql, ["m"], dialect)
        return
    funcs = list(tree.find_all(exp.Func))
    try:
        check_outer(sql, ["m"], dialect)
    except QueryValidationError:
        return  # refusing is always safe
    # it passed: every call in it is listed, under sqlglot's name and as written
    assert all(function_name(f) in ALLOWED_FUNCTIONS for f in funcs)
    assert not funcs or name.lower() in ALLOWED_FUNCTIONS, name


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_unlisted_node_kind_is_refused(dialect: str) -> None:
    """The hypothesis check above, over every kind sqlglot has today."""
    refused = 0
    for kind in KINDS:
        node = kind()
        if not _allowed(node):
            with pytest.raises(QueryValidationError):
                check_tree(exp.select(node).from_("m"), ["m"], dialect)
            refused += 1
    assert refused > len(KINDS) * 3 // 4


@pytest.mark.parametrize(
    "select",
    [
        "version() AS v",
        "current_catalog AS c",
        "CURRENT_CATALOG() AS c",
        "current_database() AS d",
        "current_user AS u",
        "current_schemas(true) AS s",
        "current_query() AS q",
    ],
)
def test_engine_values_never_run_on_the_embedded_engine(select: str) -> None:
    """Through match_recognize: DuckDB answered version() (sqlglot names it current_version,
    which a deny-list of spellings missed)."""
    import pyarrow as pa

    from dfs_cer import match_recognize

    events = pa.table({"ts": [1, 2, 3], "v": [1, 0, 2]})
    sql = (
        f"SELECT t, {select} FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS t "
        "ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.v > 0)"
    )
    with pytest.raises(QueryValidationError, match="may not use"):
        match_recognize(events, sql)
