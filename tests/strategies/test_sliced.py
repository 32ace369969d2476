"""DFS's per-node rounds on real storage nodes: exact on 1 to 12 nodes and random or time
layouts, each node asked only about its own rows (nodes without candidates or survivors are
not called), and push-down instead where a round could not pay."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.datasets import synthetic_events, synthetic_queries
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.base import PullResult
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

QUERIES = synthetic_queries(3, seed=5)
#: nodes load their handlers at start: a loaded machine would spend a call's deadline on it
WARM = {"DFS_CER__STORAGE__WARM_UP": "true"}


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def run(cluster: LocalCluster, strategy: str, sql: str, **kw: object) -> PullResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pull(strategy, sql, cluster.endpoints, cluster.token, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=[(1, "random"), (5, "time"), (12, "random")])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    nodes, layout = request.param
    root = tmp_path_factory.mktemp(f"sliced-{nodes}-{layout}")
    pq.write_table(synthetic_events(60_000, seed=3), root / "events.parquet")
    shard(
        str(root / "events.parquet"),
        nodes,
        str(root / "nodes"),
        partitioning=layout,
        name="synthetic",
    )
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(nodes)], env=WARM) as c:
        yield c


@pytest.mark.parametrize("model", ["adaptive", "always_on", "always_off"])
def test_dfs_is_exact_and_asks_each_node_about_its_own_rows(
    cluster: LocalCluster, model: str
) -> None:
    for sql in QUERIES:
        expected = rows(match_pulled(run(cluster, "pull_all", sql)))
        result = run(cluster, "dfs", sql, cost_model=model)
        assert rows(match_pulled(result)) == expected, (sql, model)
        names = [r.action for r in result.trace.rounds]
        if result.trace.fallback is None:
            assert "collect" in names and "verify" not in names and "wjf" not in names
            assert names.count("collect") <= 2


def test_the_adaptive_model_weighs_a_second_round_in_time(cluster: LocalCluster) -> None:
    """The second collect saves bytes; the adaptive model runs it only when those bytes, at the
    rate the first collect crossed the wire, take longer than the round would (its nodes' work,
    scaled from the first round's, and a round trip): its decision says both, and skipped or
    run the result is exact."""
    seen = 0
    for sql in QUERIES:
        result = run(cluster, "dfs", sql)
        rounds = [r for r in result.trace.rounds if r.decision and "round_seconds" in r.decision]
        for r in rounds:
            d = r.decision
            assert d is not None and d["round_seconds"] > 0 and d["rate_bytes_per_s"] > 0
            assert d["run"] == (d["saved_seconds"] > d["round_seconds"])
            assert (r.action == "collect") == d["run"]
            seen += 1
        assert rows(match_pulled(result)) == rows(match_pulled(run(cluster, "pull_all", sql)))
    if cluster.endpoints and len(cluster.endpoints) > 1:
        assert seen  # a second round was weighed


def test_the_final_pull_skips_nodes_without_survivors(tmp_path: Path) -> None:
    """Time layout, a query whose candidates lie in the first hours only: nodes holding none of
    the survivors get no final pull."""
    events = synthetic_events(40_000, seed=8)
    ts = events.column("ts").cast(pa.int64())
    early = pa.compute.less(ts, pa.compute.add(pa.compute.min(ts), 3_600_000 * 3))
    events = events.set_column(
        events.schema.get_field_index("type"),
        "type",
        pa.compute.if_else(early, events.column("type"), pa.scalar("T_00")),
    )
    pq.write_table(events, tmp_path / "events.parquet")
    shard(
        str(tmp_path / "events.parquet"),
        4,
        str(tmp_path / "nodes"),
        partitioning="time",
        name="synthetic",
    )
    sql = synthetic_queries(1, seed=2)[0].replace("T_00", "T_99")
    nodes = [str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(4)]
    with LocalCluster(nodes, env=WARM) as cluster:
        expected = rows(match_pulled(run(cluster, "pull_all", sql)))
        result = run(cluster, "dfs", sql, cost_model="always_on")
    assert rows(match_pulled(result)) == expected
    pulls = [r for r in result.trace.rounds if r.action == "pull"]
    collects = [r for r in result.trace.rounds if r.action == "collect"]
    assert collects and len(pulls) == 1, result.trace.rounds
    assert "with none not called" in (pulls[0].note or ""), result.trace.rounds


def test_push_down_instead_when_a_round_cannot_pay(tmp_path: Path) -> None:
    """Eight nodes holding a handful of candidates each: the first round's framing alone costs
    more than pulling them, so DFS pulls them (exactly) and the trace says why."""
    pq.write_table(synthetic_events(400, seed=4), tmp_path / "events.parquet")
    shard(str(tmp_path / "events.parquet"), 8, str(tmp_path / "nodes"), name="synthetic")
    sql = QUERIES[0]  # 2, 2, 17 and 2 candidates of its four variables
    nodes = [str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(8)]
    with LocalCluster(nodes, env=WARM) as cluster:
        expected = rows(match_pulled(run(cluster, "pull_all", sql)))
        result = run(cluster, "dfs", sql)
        down = run(cluster, "push_down", sql)
    assert rows(match_pulled(result)) == expected
    assert (result.trace.fallback or "").startswith("push_down (pulling the"), result.trace
    assert "collect" not in [r.action for r in result.trace.rounds]
    assert result.trace.events_received == down.trace.events_received


def keyed(table: pa.Table) -> list[tuple[object, ...]]:
    """Rows sorted, a NULL partition key as -1."""
    return sorted((-1 if r["k"] is None else r["k"], r["a"], r["b"]) for r in table.to_pylist())


def test_partition_columns_prune_across_partitions_and_null_is_a_partition(
    tmp_path: Path,
) -> None:
    """Two candidates of one match share their PARTITION BY values: DFS hashes them into the
    points, so an A and a B close in time but in different partitions prune each other, while
    the rows whose partition is NULL (a partition of its own) still match."""
    n = 6_000
    ts = np.arange(n, dtype=np.int64) * 1_000
    k = (np.arange(n) * 7919) % 97  # neighbours in time lie in different partitions
    v = np.arange(n) % 5
    # rows 1 and 3 of every 50 have no partition (an A, then a B two seconds later)
    keys = pa.array([None if i % 50 in (1, 3) else int(x) for i, x in enumerate(k)], pa.int64())
    events = pa.table({"k": keys, "ts": pa.array(ts, pa.timestamp("ms")), "v": v})
    pq.write_table(events, tmp_path / "events.parquet")
    shard(str(tmp_path / "events.parquet"), 2, str(tmp_path / "nodes"), name="synthetic")
    sql = (
        "SELECT * FROM synthetic MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        "MEASURES A.ts AS a, B.ts AS b ONE ROW PER MATCH PATTERN (A X*? B) "
        "WITHIN INTERVAL '300' SECOND DEFINE A AS A.v = 1, "
        "B AS B.v = 3 AND (B.k < 10 OR B.k IS NULL))"
    )
    nodes = [str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]
    with LocalCluster(nodes, env=WARM) as cluster:
        expected = keyed(match_pulled(run(cluster, "pull_all", sql)))
        result = run(cluster, "dfs", sql, cost_model="always_on")
        down = run(cluster, "push_down", sql)
    got = keyed(match_pulled(result))
    assert got == expected and expected  # exact, NULL's partition included
    assert any(r[0] == -1 for r in got)  # matches in the partition of NULL
    # (the final pull brings whole slices, 1/16 of a window: their other candidates come too)
    assert result.trace.events_received < 0.75 * down.trace.events_received, result.trace.rounds


def test_a_pattern_of_consecutive_rows_covering_every_slice_pulls_every_row_at_once(
    cluster: LocalCluster,
) -> None:
    """A contiguous pattern whose rarest variable has candidates all over the nodes' time: its
    interval set would hold every row, so DFS pulls them at once and says why."""
    sql = (
        "SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a "
        "ONE ROW PER MATCH PATTERN (A B) WITHIN INTERVAL '1' HOUR "
        "DEFINE A AS A.a1 >= 0, B AS B.a1 > A.a1 + 990)"
    )
    result = run(cluster, "dfs", sql, node_matching="off")
    assert (result.trace.fallback or "").startswith("pull_all (the interval set would cover")
    assert [r.action for r in result.trace.rounds if r.action == "collect"] == []
    assert rows(match_pulled(result)) == rows(match_pulled(run(cluster, "pull_all", sql)))
