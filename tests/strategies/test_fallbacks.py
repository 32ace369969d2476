"""Queries the local engine answers that strategies used to refuse: PREV/NEXT beyond the halo
limit, FIRST/LAST with an offset and MATCH_NUMBER() in DEFINE under push-pull, and a storage node
restarted between the final pull and the halo round trip. Each strategy answers exactly, or falls
back exactly with the fallback named in the trace."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.config import StrategyConfig
from dfs_cer.errors import ConfigError
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from storage_node.launcher import LocalCluster
from tests.fixtures.faults import FAST, WARM, before_round

pytestmark = pytest.mark.flight

HALO_STRATEGIES = ["push_down", "push_pull", "dfs", "naive_dfs", "dfs_v2"]


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def events(n: int = 400, seed: int = 1) -> pa.Table:
    """Sparse A and B rows among many N rows: push-down and DFS pull few candidates."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "ts": np.cumsum(rng.integers(1, 4, n)),
            "type": rng.choice(list("ABN"), n, p=[0.06, 0.06, 0.88]),
            "y": rng.integers(0, 4, n),
        }
    )


TABLE = events()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("fallbacks")
    pq.write_table(TABLE, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)], env=WARM) as c:
        yield c


def run(
    cluster: LocalCluster, strategy: str, sql: str, config: StrategyConfig | None = None
) -> tuple[list[tuple[object, ...]], str | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pull(
            strategy, sql, cluster.endpoints, cluster.token, cost_model="always_on", config=config
        )
    return rows(match_pulled(result)), result.trace.fallback


def skip_query(condition: str) -> str:
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ONE "
        "ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN 20 DEFINE A "
        f"AS A.type = 'A', B AS B.type = 'B' AND {condition})"
    )


def contiguous_query(condition: str) -> str:
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ONE "
        "ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N* B) WITHIN 20 DEFINE A AS "
        f"A.type = 'A', N AS N.type = 'N', B AS B.type = 'B' AND {condition})"
    )


@pytest.mark.parametrize("strategy", HALO_STRATEGIES)
@pytest.mark.parametrize(
    "sql",
    [
        skip_query("PREV(B.y, 10001) IS NULL"),
        skip_query("NEXT(B.y, 10001) IS NULL"),
        contiguous_query("PREV(B.y, 10001) IS NULL"),
    ],
    ids=["skip-prev", "skip-next", "contiguous-prev"],
)
def test_navigation_beyond_the_protocol_halo_limit_pulls_every_row(
    cluster: LocalCluster, strategy: str, sql: str
) -> None:
    expected = rows(match_recognize(TABLE, sql))
    assert expected
    got, fallback = run(cluster, strategy, sql)
    assert got == expected
    assert (fallback or "").startswith("pull_all ("), fallback
    if "N*?" in sql or strategy not in (
        "push_down",
        "push_pull",
    ):  # not refused as contiguous first
        assert "beyond the halo limit of 10000 rows" in (fallback or ""), fallback


@pytest.mark.parametrize(
    ("strategy", "query"),
    [(s, skip_query) for s in HALO_STRATEGIES]
    + [(s, contiguous_query) for s in ("dfs", "naive_dfs", "dfs_v2")],
)
def test_a_lowered_halo_limit_decides_before_any_halo_request(
    cluster: LocalCluster, strategy: str, query: object
) -> None:
    assert callable(query)
    low = StrategyConfig(halo_limit=2)
    far, near = query("PREV(B.y, 3) = B.y"), query("PREV(B.y, 2) = B.y")
    for sql, beyond in ((far, True), (near, False)):
        expected = rows(match_recognize(TABLE, sql))
        assert expected
        got, fallback = run(cluster, strategy, sql, low)
        assert got == expected, (sql, fallback)
        assert ("beyond the halo limit of 2 rows" in (fallback or "")) == beyond, fallback


@pytest.fixture(scope="module")
def low_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Storage nodes that serve halo requests of at most 2 rows (storage.halo_limit)."""
    root = tmp_path_factory.mktemp("low-halo")
    pq.write_table(TABLE, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), name="t")
    with LocalCluster(
        [str(root / "nodes" / f"node-{i:02d}") for i in range(2)],
        env={"DFS_CER__STORAGE__HALO_LIMIT": "2", **WARM},
    ) as c:
        yield c


@pytest.mark.parametrize(
    ("strategy", "query"),
    [(s, skip_query) for s in HALO_STRATEGIES]
    + [(s, contiguous_query) for s in ("dfs", "naive_dfs")],
)
def test_the_nodes_halo_limit_is_learnt_at_open(
    low_nodes: LocalCluster, strategy: str, query: object
) -> None:
    assert callable(query)
    for sql, beyond in ((query("NEXT(B.y, 3) = B.y"), True), (query("NEXT(B.y, 2) = B.y"), False)):
        expected = rows(match_recognize(TABLE, sql))
        assert expected
        got, fallback = run(low_nodes, strategy, sql)
        assert got == expected, (sql, fallback)
        assert ("beyond the halo limit of 2 rows" in (fallback or "")) == beyond, fallback


@pytest.mark.parametrize("strategy", ["push_down", "push_pull", "dfs", "naive_dfs"])
def test_a_group_with_a_query_past_the_halo_limit_scans_every_row(
    cluster: LocalCluster, low_nodes: LocalCluster, strategy: str
) -> None:
    """Queries run together share one scan: a query pulling every row needs the group opened
    over every row, whichever limit (the compute node's or the nodes') it passes."""
    sqls = [skip_query("NEXT(B.y, 3) = B.y"), skip_query("B.y > 0")]
    for nodes, config in ((low_nodes, None), (cluster, StrategyConfig(halo_limit=2))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            group = pull_many(
                strategy, sqls, nodes.endpoints, nodes.token, config=config, cost_model="always_on"
            )
        for sql, result in zip(sqls, group.results, strict=True):
            assert rows(match_pulled(result)) == rows(match_recognize(TABLE, sql)), sql
        assert "beyond the halo limit of 2 rows" in (group.results[0].trace.fallback or "")


def test_the_halo_limit_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"halo_limit must be in 0\.\.10000"):
        pull(
            "dfs",
            skip_query("PREV(B.y) = 1"),
            ["127.0.0.1:1"],
            "t",
            config=StrategyConfig(halo_limit=10_001),
        )


@pytest.mark.parametrize(
    "condition",
    [
        "LAST(B.y, 1) IS NULL",
        "FIRST(A.y, 1) IS NULL",
        "MATCH_NUMBER() < 3",
        "MATCH_NUMBER() = B.y AND LAST(A.y, 1) IS NULL",
    ],
)
def test_push_pull_projects_offsets_and_match_number_away(
    cluster: LocalCluster, condition: str
) -> None:
    sql = skip_query(condition)
    expected = rows(match_recognize(TABLE, sql))
    assert expected
    got, fallback = run(cluster, "push_pull", sql)
    assert fallback is None and got == expected


@pytest.mark.parametrize("strategy", ["push_pull", "push_down", "dfs"])
def test_a_node_restarted_before_any_round_keeps_the_halo_exact(
    cluster: LocalCluster, strategy: str
) -> None:
    """Restarted between the final pull and the halo round trip, the re-opened node has no record
    of the rows it shipped: every node sends the halo with them and the compute node subtracts."""
    sql = skip_query("PREV(B.y) = B.y")
    expected = rows(match_recognize(TABLE, sql))
    assert expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = pull(
            strategy, sql, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST
        )
    names = [r.action for r in plain.trace.rounds]
    assert "pull_halo" in names and plain.trace.fallback is None, (names, plain.trace.fallback)
    for k in (k for k, name in enumerate(names, 1) if name.startswith("pull")):
        with pytest.MonkeyPatch.context() as mp:
            before_round(mp, k, lambda: cluster.restart(1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = pull(
                    strategy,
                    sql,
                    cluster.endpoints,
                    cluster.token,
                    cost_model="always_on",
                    config=FAST,
                )
        assert rows(match_pulled(result)) == expected, (k, names[k - 1])
        if names[k - 1] == "pull_halo":  # the same halo rows, the shipped ones subtracted here
            assert result.trace.halo_rows == plain.trace.halo_rows, k
            assert any("shipped rows included" in (r.note or "") for r in result.trace.rounds), (
                result.trace.rounds
            )
