"""Forms the standard and Trino accept (or refuse), through real storage nodes: every strategy
returns exactly the local engine's rows for them (or refuses them the same way)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.errors import QueryValidationError
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.statements import merged_trace, pull_statement
from storage_node.launcher import LocalCluster
from tests.fixtures.tables import random_events, rows

pytestmark = pytest.mark.flight

EVENTS = random_events(seed=5, n=800)
HEAD = "SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts{} "
WINDOW = "WITHIN INTERVAL '5' MINUTE"

QUERIES = {
    "null condition": HEAD.format("") + f"PATTERN (A X? N*? B) {WINDOW} "
    "DEFINE A AS type = 'A', X AS NULL, B AS type = 'B' OR NULL)",
    "filter in measures": HEAD.format(
        ", count(*) FILTER (WHERE B.w > 50) AS nb, sum(w) FILTER (WHERE A.w > 10) "
        "AS sa, count(N.*) FILTER (WHERE w < 20) AS small_n"
    )
    + f"PATTERN (A N*? B) {WINDOW} DEFINE A AS type = 'A', B AS type = 'B')",
    "filter in define": HEAD.format("")
    + f"PATTERN (A N*? B) {WINDOW} DEFINE A AS type = 'A', B AS type = 'B' AND count(*) "
    "FILTER (WHERE N.w > 50) >= 1 AND sum(w) FILTER (WHERE A.w > 20) > 0)",
    "match number in a define aggregate": HEAD.format(", MATCH_NUMBER() AS m")
    + f"PATTERN (A N*? B) {WINDOW} DEFINE A AS type = 'A', B AS type = 'B' AND "
    "sum(MATCH_NUMBER()) FILTER (WHERE N.w > 90) IS NULL)",
    "alias list": HEAD.format(", MATCH_NUMBER() AS m") + f"PATTERN (A N*? B) {WINDOW} "
    "DEFINE A AS type = 'A', B AS type = 'B') AS mr(first_a, last_b, k)",
    "navigation of a subset's classifier": HEAD.format(", CLASSIFIER() AS c")
    + "ALL ROWS PER MATCH "
    f"PATTERN (A B+ C) {WINDOW} SUBSET U = (A, B) DEFINE A AS type = 'A', B AS B.v >= PREV(B.v), "
    "C AS NEXT(FIRST(CLASSIFIER(U)), 2) = 'C' OR PREV(LAST(CLASSIFIER(U), 1)) = 'A')",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("conformance")
    pq.write_table(EVENTS, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), batch_rows=200)
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as c:
        yield c


def _pulled(strategy: str, sql: str, cluster: LocalCluster) -> pa.Table:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return match_pulled(pull(strategy, sql, cluster.endpoints, cluster.token))


@pytest.mark.parametrize("name", list(QUERIES))
def test_accepted_forms_agree_with_the_local_engine(cluster: LocalCluster, name: str) -> None:
    sql = QUERIES[name]
    expected = match_recognize(EVENTS, sql)
    assert expected.num_rows > 0, name  # the data exercises the form
    for strategy in STRATEGIES:
        got = _pulled(strategy, sql, cluster)
        assert got.column_names == expected.column_names, (name, strategy)
        assert rows(got) == rows(expected), (name, strategy)


def test_exclusion_with_unmatched_rows_is_refused_by_every_strategy(cluster: LocalCluster) -> None:
    sql = (
        "SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS c ALL "
        f"ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A {{- N* -}} B) {WINDOW} DEFINE A AS "
        "type = 'A', B AS type = 'B')"
    )
    with pytest.raises(
        QueryValidationError, match="cannot be used with ALL ROWS PER MATCH WITH UNMATCHED ROWS"
    ):
        match_recognize(EVENTS, sql)
    for strategy in STRATEGIES:
        with pytest.raises(
            QueryValidationError, match="neither output as matched nor as unmatched rows"
        ):
            _pulled(strategy, sql, cluster)


@pytest.mark.parametrize("strategy", ["dfs", "push_down", "pull_all"])
def test_match_recognize_over_a_match_recognize(cluster: LocalCluster, strategy: str) -> None:
    # the inner clause is pulled with the strategy; the outer one reads its relation on the
    # compute node (it never touches the nodes' rows)
    inner = (
        "SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS m, "
        f"CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A {{- N* -}} B) {WINDOW} DEFINE A "
        "AS type = 'A', B AS type = 'B')"
    )
    sql = (
        f"SELECT * FROM ({inner}) AS inner_rows MATCH_RECOGNIZE (ORDER BY ts MEASURES "
        "count(*) AS n, sum(Y.w) AS s ONE ROW PER MATCH PATTERN (X Y) DEFINE X AS c = 'A', "
        "Y AS Y.m = X.m) AS mr(pairs, total)"
    )
    expected = match_recognize(EVENTS, sql)
    assert expected.num_rows > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(strategy, parse_statement(sql), cluster.endpoints, cluster.token)
    assert got.table.to_pylist() == expected.to_pylist()
    trace = merged_trace(got.traces, strategy)
    assert len(got.traces) == 1 and "outside a MATCH_RECOGNIZE" not in (trace.fallback or "")
