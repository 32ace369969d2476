"""Whole statements through storage nodes: each MATCH_RECOGNIZE over the nodes' table is pulled
with a strategy, the SQL around runs on the compute node, and the result equals the in-process
run over the whole log with the same registered tables."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies.statements import merged_trace, pull_statement
from storage_node.launcher import LocalCluster
from tests.fixtures.statements import NAMES, STATEMENTS, events

pytestmark = pytest.mark.flight


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("statements")
    pq.write_table(events(), root / "t.parquet")
    shard(str(root / "t.parquet"), 2, str(root / "nodes"), batch_rows=400)
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as c:
        yield c


@pytest.mark.parametrize("sql", STATEMENTS)
@pytest.mark.parametrize("strategy", ["dfs", "push_down"])
def test_statements_through_storage_nodes_equal_the_local_run(
    cluster: LocalCluster, sql: str, strategy: str
) -> None:
    expected = match_recognize(events(), sql, tables={"names": NAMES})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(
            strategy,
            parse_statement(sql),
            cluster.endpoints,
            cluster.token,
            tables={"names": NAMES},
        )
    assert got.table.to_pylist() == expected.to_pylist(), sql
    trace = merged_trace(got.traces, strategy)
    assert trace.bytes_to_cn > 0
    if "FROM (SELECT" in sql:  # a row-local subquery: its condition runs on the nodes
        assert trace.input_filter == "x > 0" and "outside a MATCH_RECOGNIZE" not in (
            trace.fallback or ""
        )
    else:  # every clause pulls fewer rows than the log holds, or says why not
        assert all(t.events_received < events().num_rows or t.fallback for t in got.traces), (
            trace.to_dict()
        )


def test_cli_registers_tables_and_runs_a_grouped_join(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    names = tmp_path / "names.parquet"
    pq.write_table(NAMES, names)
    token = tmp_path / "token"
    token.write_text(cluster.token)
    exe = str(Path(sys.executable).parent / "dfs-cer")
    sql = STATEMENTS[1]
    out = subprocess.run(
        [
            exe,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(token),
            "--table",
            f"names={names}",
            "--format",
            "json",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["matches"] == match_recognize(events(), sql, tables={"names": NAMES}).to_pylist()
    missing = subprocess.run(
        [exe, "query", "--endpoints", ",".join(cluster.endpoints), "--token-file", str(token), sql],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "'names', which are not registered" in missing.stderr, (
        missing.stderr
    )
    bad = subprocess.run(
        [
            exe,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(token),
            "--table",
            "x y=1",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "NAME=PATH" in bad.stderr, bad.stderr
    odd = (
        tmp_path / "odd.csv"
    )  # a CSV table's column types come from every value, as shard reads it
    odd.write_text("k,n\n" + "".join(f"{i},{'abc' if i == 5 else i}\n" for i in range(9)))
    bad = subprocess.run(
        [
            exe,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(token),
            "--table",
            f"names={odd}",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and f"{odd}, row 6, column n: 'abc' is not int64" in bad.stderr, (
        bad.stderr
    )


def test_a_clause_without_order_by_asks_for_the_time_column(cluster: LocalCluster) -> None:
    from dfs_cer.errors import QueryValidationError

    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k MEASURES A.ts AS a PATTERN (A) "
        "DEFINE A AS A.x = 9)"
    )
    with pytest.raises(QueryValidationError, match="add ORDER BY <time column>"):
        pull_statement("dfs", parse_statement(sql), cluster.endpoints, cluster.token)


def test_the_sql_around_pulled_clauses_runs_bounded(cluster: LocalCluster) -> None:
    """Over the nodes too the SQL around the clauses runs on the bounded engine (a huge string
    fails before it is built; one clause or a statement), and a pull hands its deadline on to
    it."""
    import time

    from dfs_cer.errors import OuterQueryLimitError
    from dfs_cer.strategies import pull
    from dfs_cer.strategies.matching import match_pulled

    clause = (
        "FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.x AS ax ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS A.x = 9)"
    )
    result = pull("dfs", f"SELECT lpad('', 2000000000, 'x') AS s {clause}", *cluster_args(cluster))
    assert time.monotonic() < (result.deadline or 0) <= time.monotonic() + 300
    with pytest.raises(OuterQueryLimitError, match=r"lpad\(\) would build"):
        match_pulled(result)
    statement = parse_statement(
        f"WITH m AS (SELECT * {clause}) SELECT repeat('x', ax * 1000000) FROM m"
    )
    with pytest.raises(OuterQueryLimitError, match=r"repeat\(\) would build"):
        pull_statement("dfs", statement, *cluster_args(cluster), timeout=60)


def cluster_args(cluster: LocalCluster) -> tuple[list[str], str]:
    return list(cluster.endpoints), cluster.token


EXPRESSIONS = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES MATCH_NUMBER() AS "
    "n, array_agg(CLASSIFIER()) AS labels, sum(B.x * 2 + 1) AS w, count(*) FILTER (WHERE "
    "type = 'N') AS ns, count(DISTINCT x) AS d, min_by(ts, x) AS low, PREV(coalesce(B.x, "
    "0)) AS pb ONE ROW PER MATCH PATTERN (A B+) WITHIN 6 DEFINE A AS A.type = 'A' AND A.x > "
    "6, B AS coalesce(B.x, 0) < FIRST(A.x) AND count_if(B.type = 'N') <= 2 AND "
    "length(B.type) = length(A.type))"
)


@pytest.mark.parametrize("strategy", ["dfs", "push_pull", "push_down"])
def test_expression_features_through_storage_nodes(cluster: LocalCluster, strategy: str) -> None:
    expected = match_recognize(events(), EXPRESSIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(
            strategy, parse_statement(EXPRESSIONS), cluster.endpoints, cluster.token
        )
    assert expected.num_rows > 0
    assert got.table.to_pylist() == expected.to_pylist()


FILTERED = [
    # PREV over the filtered rows: the rows the condition drops do not exist for navigation
    "SELECT * FROM (SELECT * FROM t WHERE x > 2 AND type <> 'N') MATCH_RECOGNIZE (PARTITION "
    "BY k ORDER BY ts MEASURES A.ts AS a_ts, B.x AS bx ONE ROW PER MATCH PATTERN (A B) "
    "DEFINE A AS A.type = 'A', B AS B.x > PREV(B.x))",
    # a contiguous pattern over a CTE; the table's alias qualifies columns; IN, LIKE, BETWEEN
    "WITH f AS (SELECT * FROM t AS e WHERE e.k IN ('a', 'b') AND type LIKE 'A%' OR x "
    "BETWEEN 3 AND 5) SELECT k, count(*) AS n, min(a_ts) AS first FROM f MATCH_RECOGNIZE "
    "(PARTITION BY k ORDER BY ts MEASURES A.ts AS a_ts ONE ROW PER MATCH PATTERN (A B C) "
    "DEFINE A AS A.x > 5, B AS B.x < A.x, C AS C.type = 'B') GROUP BY k ORDER BY k",
    # ALL ROWS PER MATCH, NEXT and NOT / IS NULL
    "SELECT * FROM (SELECT * FROM t WHERE NOT (x = 0 OR x IS NULL) AND ts >= 50) "
    "MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES CLASSIFIER() AS c ALL ROWS PER "
    "MATCH PATTERN (A B+) WITHIN 10 DEFINE A AS A.type = 'A' AND A.x >= 7 AND NEXT(A.x) > "
    "A.x, B AS B.x >= PREV(B.x))",
]


@pytest.fixture(scope="module")
def whole_bytes(cluster: LocalCluster) -> int:
    """Bytes a pull of every row of the nodes' table moves (what a subquery computed on the
    compute node costs)."""
    from dfs_cer.strategies import pull

    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES A.ts AS a PATTERN (A) DEFINE A AS A.x = 9)"
    )
    return pull("pull_all", sql, cluster.endpoints, cluster.token).trace.bytes_to_cn


@pytest.mark.parametrize("sql", FILTERED, ids=["prev", "cte-contiguous", "all-rows-next"])
@pytest.mark.parametrize("strategy", ["dfs", "push_pull", "push_down", "pull_all"])
def test_row_local_input_filters_run_on_the_storage_nodes(
    cluster: LocalCluster, whole_bytes: int, sql: str, strategy: str
) -> None:
    """``FROM (SELECT * FROM t WHERE <row-local>)``: the nodes drop the rows first, the answer is
    the embedded engine's over the subquery, and far fewer bytes move than the whole table."""
    statement = parse_statement(sql)
    assert statement.parts[0].pushed is not None
    expected = match_recognize(events(), sql)
    assert expected.num_rows > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(strategy, statement, cluster.endpoints, cluster.token)
    assert got.table.to_pylist() == expected.to_pylist()
    trace = merged_trace(got.traces, strategy)
    assert trace.input_filter == statement.parts[0].pushed[1]
    assert "outside a MATCH_RECOGNIZE" not in (trace.fallback or "")
    assert len(got.traces) == 1
    assert trace.bytes_to_cn < whole_bytes  # rows failing the condition never leave the nodes
    if strategy == "dfs" and "ALL ROWS" not in sql:  # selective patterns: a fraction of the rows
        assert trace.events_received < events().num_rows / 2, trace.to_dict()


def test_a_refused_input_filter_falls_back_and_says_why(cluster: LocalCluster) -> None:
    """A node that cannot evaluate the condition exactly (here: a number compared with text)
    refuses it; the clause's input is then computed from every row, named in the trace."""
    import dataclasses

    sql = FILTERED[0]
    statement = parse_statement(sql)
    part = dataclasses.replace(statement.parts[0], pushed=("t", "x = 'a'"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(
            "dfs", dataclasses.replace(statement, parts=(part,)), cluster.endpoints, cluster.token
        )
    assert got.table.to_pylist() == match_recognize(events(), sql).to_pylist()
    trace = merged_trace(got.traces, "dfs")
    assert "did not take the input filter \"x = 'a'\"" in (trace.fallback or ""), trace.fallback
    assert "cannot be evaluated on these columns" in (trace.fallback or "")


@pytest.mark.parametrize(
    "condition",
    [
        "nope > 1",
        "x / 2 > 1",
        "x > 0; SELECT 1",
        "read_csv('/etc/passwd') IS NOT NULL",
        "x > (SELECT 1)",
        "count(*) > 1",
        "A.x > 1",
        "",
        "x > " + "1 + " * 20_000 + "1",
        "x = 'a'",
        "CAST(x AS VARCHAR) = '1'",
    ],
)
def test_storage_nodes_refuse_input_filters_outside_the_subset(
    cluster: LocalCluster, condition: str
) -> None:
    from dfs_cer.strategies import pull
    from dfs_cer.transport.client import NodeRefusedError

    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES A.ts AS a PATTERN (A) DEFINE A AS A.x = 9)"
    )
    with pytest.raises(NodeRefusedError) as info:
        pull("dfs", sql, cluster.endpoints, cluster.token, input_filter=condition)
    assert info.value.code == "input-filter", info.value
    # the node is still serving, and holds nothing of the refused query
    assert pull(
        "pull_all", sql, cluster.endpoints, cluster.token, input_filter="x = 9"
    ).events.num_rows == int(np.sum(events().column("x").to_numpy() == 9))


def test_whole_table_reads_and_filtered_inputs_mix_in_one_statement(cluster: LocalCluster) -> None:
    """A clause with PARTITION BY an expression over a filtered subquery (its input computed on
    the compute node from the whole table) beside a clause whose filter runs on the nodes, and a
    subquery reading the statement's CTE: every pull is named in the trace."""
    sql = (
        "WITH f AS (SELECT * FROM t WHERE x > 2) SELECT p.n, q.m FROM (SELECT count(*) AS n "
        "FROM (SELECT * FROM t WHERE x > 1) MATCH_RECOGNIZE (PARTITION BY x % 2 ORDER BY ts "
        "MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.type = 'A', B AS "
        "B.x > A.x)) AS p, (SELECT count(*) AS m FROM (SELECT * FROM f WHERE x < 9) "
        "MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A B) "
        "DEFINE A AS A.type = 'A', B AS B.x > A.x)) AS q"
    )
    expected = match_recognize(events(), sql)
    assert expected.to_pylist()[0]["n"] > 0 and expected.to_pylist()[0]["m"] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement("dfs", parse_statement(sql), cluster.endpoints, cluster.token)
    assert got.table.to_pylist() == expected.to_pylist()
    trace = merged_trace(got.traces, "dfs")
    assert [t.source for t in got.traces] == ["table 't'"], trace.to_dict()
    assert (trace.fallback or "").startswith("pull_all (the query reads 't'")


def test_an_input_with_a_column_twice_is_one_clear_error_on_every_path(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    from dfs_cer.errors import QueryValidationError

    body = (
        "MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts ONE ROW PER MATCH PATTERN (A) "
        "DEFINE A AS A.type = 'A')"
    )
    self_join = f"SELECT * FROM (SELECT * FROM t a JOIN t b ON a.ts = b.ts) {body}"
    token = tmp_path / "token"
    token.write_text("x")
    exe = str(Path(sys.executable).parent / "dfs-cer")
    for strategy in (
        "dfs",
        "pull_all",
    ):  # refused from the text: no node is contacted (none listens there)
        out = subprocess.run(
            [
                exe,
                "query",
                "--endpoints",
                "grpc://127.0.0.1:9",
                "--token-file",
                str(token),
                "--strategy",
                strategy,
                self_join,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith(
            "error: the input of MATCH_RECOGNIZE has two columns named ts"
        ), out.stderr
    shared = f"SELECT * FROM (SELECT * FROM t JOIN names ON t.k = names.k) {body}"  # both have k
    for strategy in ("dfs", "push_down"):
        with pytest.raises(QueryValidationError, match="two columns named k"):
            pull_statement(
                strategy,
                parse_statement(shared),
                cluster.endpoints,
                cluster.token,
                tables={"names": NAMES},
            )
