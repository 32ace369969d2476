"""Cases an adversarial review found against PREV/NEXT pruning: identical copies without dedup,
event-key copies that differ in other columns, a case-insensitive event key, groups of queries,
-0.0 as a partition value, NaN copies in a group's halo, and a bound on per-point reach pairs."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.fixture
def make_cluster() -> Iterator[Any]:
    started: list[LocalCluster] = []
    dirs: list[tempfile.TemporaryDirectory[str]] = []

    def make(table: pa.Table, how: str, nodes: int, type_column: str = "k") -> LocalCluster:
        d = tempfile.TemporaryDirectory(prefix="dfs-cer-navreg-")
        dirs.append(d)
        pq.write_table(table, f"{d.name}/t.parquet")
        shard(
            f"{d.name}/t.parquet",
            nodes,
            f"{d.name}/s",
            partitioning=how,
            type_column=type_column,
            batch_rows=500,
        )
        c = LocalCluster([f"{d.name}/s/node-{i:02d}" for i in range(nodes)]).start()
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()
        c.tmp.cleanup()
    for d in dirs:
        d.cleanup()


def check(
    table: pa.Table,
    sql: str,
    cluster: LocalCluster,
    strategies: tuple[str, ...] = ("dfs", "push_down", "naive_dfs", "push_pull"),
    local: dict[str, Any] | None = None,
    **options: Any,
) -> None:
    expected = rows(match_recognize(table, sql, **(local or {})))
    for name in strategies:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pull(
                name, sql, cluster.endpoints, cluster.token, node_matching="off", **options
            )
        assert rows(match_pulled(result)) == expected, (name, result.trace.to_dict())


def test_identical_copies_without_dedup(make_cluster: Any) -> None:
    t = pa.table(
        {
            "k": ["a"] * 6,
            "type": ["A", "N", "B", "B", "N", "N"],
            "x": [1.0, 5.0, 7.0, 7.0, 2.0, 3.0],
            "ts": pa.array([1, 2, 3, 3, 4, 5], pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, "
        "B.ts AS b, B.x AS bx ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A "
        "N*? B) WITHIN 30 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.x = PREV(B.x))"
    )
    assert match_recognize(t, sql, dedup=False).num_rows == 1
    for how, n in (("type", 2), ("random", 1), ("time", 2)):
        check(t, sql, make_cluster(t, how, n), local={"dedup": False}, dedup=False)


def test_event_key_copies_that_differ_in_other_columns(make_cluster: Any) -> None:
    t = pa.table(
        {
            "k": ["a"] * 6,
            "id": [1, 2, 2, 3, 4, 5],
            "type": ["N", "A", "A", "N", "B", "N"],
            "x": [0.0, 1.0, 9.0, 0.0, 0.0, 0.0],
            "ts": pa.array([1, 2, 2, 3, 4, 5], pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, "
        "A.x AS ax, B.ts AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A "
        "N*? B) WITHIN 600 DEFINE A AS A.x > 5, B AS B.type = 'B' AND PREV(B.x) = B.x)"
    )
    for how, n in (("type", 2), ("random", 2)):  # the matcher keeps the copy with x = 1: no match
        check(
            t,
            sql,
            make_cluster(t, how, n),
            strategies=("dfs", "push_down"),
            local={"event_key": ["id"]},
            event_key=["id"],
        )
    # the event key spelled in another case is the same column on the nodes as here
    check(
        t,
        sql,
        make_cluster(t, "type", 2),
        strategies=("dfs",),
        local={"event_key": ["id"]},
        event_key=["ID"],
    )
    # without navigation too: only the copy the matcher keeps may be a candidate
    plain = sql.replace(" AND PREV(B.x) = B.x", "")
    assert match_recognize(t, plain, event_key=["id"]).num_rows == 0
    for how, n in (("type", 2), ("time", 2)):
        check(t, plain, make_cluster(t, how, n), local={"event_key": ["id"]}, event_key=["id"])


def test_groups_of_queries_with_prev_only_conditions(make_cluster: Any) -> None:
    rng = np.random.default_rng(7)
    n = 1200
    t = pa.table(
        {
            "k": rng.choice(["a", "b", "c"], n),
            "type": rng.choice(["A", "B", "N"], n),
            "x": rng.integers(0, 12, n).astype(float),
            "ts": np.cumsum(rng.integers(0, 3, n)),
        }
    )
    rally = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS "
        "a, B.ts AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? "
        "B) WITHIN 600 DEFINE A AS A.x >= PREV(A.x) + 5, B AS B.x <= PREV(B.x, 2) - 5)"
    )
    other = rally.replace("A.x >= PREV(A.x) + 5", "A.type = 'A'").replace(
        "B.x <= PREV(B.x, 2) - 5", "B.type = 'B' AND B.x > PREV(B.x)"
    )
    t = t.set_column(
        2, "x", pa.array(np.where(rng.random(n) < 0.05, np.nan, t.column("x").to_numpy()))
    )
    for how, nodes in (("type", 2), ("time", 2), ("random", 2)):
        c = make_cluster(t, how, nodes)
        for name in ("dfs", "push_down", "naive_dfs"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                group = pull_many(name, [rally, other], c.endpoints, c.token, node_matching="off")
            for sql, result in zip([rally, other], group.results, strict=True):
                assert rows(match_pulled(result)) == rows(match_recognize(t, sql)), (how, name, sql)


def test_negative_zero_is_the_partition_of_zero(make_cluster: Any) -> None:
    t = pa.table(
        {
            "f": pa.array([0.0, -0.0, 0.0, -0.0, 1.0, 1.0]),
            "x": [1, 5, 2, 7, 1, 3],
            "ts": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY f ORDER BY ts MEASURES A.ts AS a, "
        "B.ts AS b ONE ROW PER MATCH PATTERN (A N*? B) WITHIN 10 DEFINE A AS A.x < 3, B AS "
        "B.x > PREV(B.x) + 2)"
    )
    check(t, sql, make_cluster(t, "type", 2, type_column="f"), strategies=("dfs", "push_down"))


def test_pull_halo_refuses_too_many_reach_pairs(make_cluster: Any) -> None:
    from dfs_cer.transport.client import NodeRefusedError, StorageClient
    from dfs_cer.transport.protocol import POINT_AFTER, POINT_BEFORE, POINT_TIME, Halo

    t = pa.table(
        {"k": ["a"] * 100, "x": np.arange(100.0), "ts": pa.array(np.arange(100), pa.int64())}
    )
    c = make_cluster(t, "random", 1)
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        "MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A N*? B) "
        "WITHIN 10 DEFINE A AS A.x > PREV(A.x), B AS B.x < 3)"
    )
    client = StorageClient(c.endpoints[0], c.token)
    client.action("open", {"query_id": "q-pairs", "sql": sql})
    try:
        points = pa.table(
            {
                "k": ["a"] * 100,
                POINT_TIME: np.arange(100),
                POINT_BEFORE: np.arange(100) % 10,
                POINT_AFTER: np.arange(100) // 10,
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, points.schema) as writer:
            writer.write_table(points)
        with pytest.raises(NodeRefusedError, match="distinct"):
            client.pull(
                Halo("q-pairs", "pull_halo", 10, 10, (), True).header(),
                [sink.getvalue().to_pybytes()],
            )
    finally:
        client.action("close", {"query_id": "q-pairs"})


def test_logical_offsets_over_all_rows_observe_the_skipped_rows(make_cluster: Any) -> None:
    """``LAST(x, 1)`` unqualified in a skip pattern reads the row before the current one in the
    match, which may be a skipped row: such a pattern is not skippable."""
    from dfs_cer import analyze, parse

    rng = np.random.default_rng(81)
    n = 900
    t = pa.table(
        {
            "k": rng.choice(["a", "b"], n),
            "type": rng.choice(["A", "B", "N"], n, p=[0.2, 0.2, 0.6]),
            "x": rng.integers(0, 8, n),
            "ts": np.cumsum(rng.integers(0, 3, n)),
        }
    )
    c = make_cluster(t, "random", 2)
    for cond in ("LAST(x, 1) > 3", "FIRST(x, 1) > 3"):
        sql = (
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS "
            "a, B.ts AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? "
            f"B) WITHIN 600 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND {cond})"
        )
        assert not analyze(parse(sql)).skippable
        check(t, sql, c, strategies=("dfs", "push_down"))


def test_order_by_other_than_the_shard_time_column(make_cluster: Any) -> None:
    """Intervals are built over the shards' time column: with WITHIN over another ORDER BY column
    they bound nothing, so the strategies say so and do not prune by them; PREV over a string or
    float ORDER BY column pulls every row (halo rows are found by integer or time order)."""
    rng = np.random.default_rng(12)
    n = 800
    ts = np.cumsum(rng.integers(0, 3, n))
    t = pa.table(
        {
            "k": rng.choice(["a", "b"], n),
            "type": rng.choice(["A", "B", "N"], n),
            "y": rng.integers(0, 5, n),
            "ts": ts,
            "t2": (ts * 7919) % 1000,
            "s": pa.array([f"{v:08d}" for v in ts]),
        }
    )
    c = make_cluster(t, "random", 2)
    within = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY t2 MEASURES A.ts AS a, B.ts AS b "
        "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN 60 "
        "DEFINE A AS A.type = 'A' AND A.y > 2, B AS B.type = 'B' AND B.y = 0)"
    )
    check(t, within, c, strategies=("dfs", "naive_dfs", "dfs_v2", "push_down"))
    prev = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY s MEASURES A.ts AS a, B.ts AS b "
        "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) "
        "DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.y > PREV(B.y))"
    )
    check(t, prev, c, strategies=("dfs", "push_down", "push_pull"))
