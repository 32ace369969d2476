"""Copies of an event (same time and event key) through storage nodes: they are dropped per
PARTITION BY group, after the input filter, and only with dedup on, exactly as the local engine
drops them; and match ids depend only on the match, whichever strategy pulled its rows."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.statements import pull_statement
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

STRATEGIES = ("pull_all", "push_down", "push_pull", "naive_dfs", "dfs")


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    hidden = [c for c in table.column_names if c.startswith("__")]
    return sorted((tuple(r.values()) for r in table.drop(hidden).to_pylist()), key=repr)


@pytest.fixture
def cluster_of(tmp_path: Path) -> Iterator[Any]:
    started: list[LocalCluster] = []

    def make(table: pa.Table, nodes: int = 2, how: str = "random", name: str = "t") -> LocalCluster:
        pq.write_table(table, tmp_path / f"{name}.parquet")
        shard(
            str(tmp_path / f"{name}.parquet"),
            nodes,
            str(tmp_path / name),
            partitioning=how,
            type_column="g",
            event_key=("id",),
        )
        c = LocalCluster([str(tmp_path / name / f"node-{i:02d}") for i in range(nodes)]).start()
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()
        c.tmp.cleanup()


def _pulled(name: str, sql: str, cluster: LocalCluster, **options: Any) -> pa.Table:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return match_pulled(
            pull(
                name,
                sql,
                cluster.endpoints,
                cluster.token,
                node_matching="off",
                cost_model="always_on",
                **options,
            )
        )


SKIP = (
    "SELECT * FROM t MATCH_RECOGNIZE ({partition}ORDER BY ts MEASURES A.id AS a, B.id AS b, "
    "B.x AS bx ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN 10 "
    "DEFINE A AS A.type = 'A', B AS B.type = 'B'{extra})"
)


@pytest.mark.parametrize("how", ["random", "time", "type"])
def test_copies_in_two_partitions_are_two_events(cluster_of: Any, how: str) -> None:
    """Event id 2 at time 5 in partition x and in partition y: two events, one per group; a
    storage node must not drop one of them as a copy of the other."""
    t = pa.table(
        {
            "id": [1, 2, 3, 2, 4],
            "g": ["x", "x", "y", "y", "y"],
            "type": ["A", "B", "A", "B", "N"],
            "x": [0, 1, 0, 2, 0],
            "ts": pa.array([1, 5, 2, 5, 6], pa.int64()),
        }
    )
    sql = SKIP.format(partition="PARTITION BY g ", extra="")
    want = rows(match_recognize(t, sql, event_key=["id"]))
    assert len(want) == 2
    c = cluster_of(t, 2, how)
    for name in STRATEGIES:
        assert rows(_pulled(name, sql, c)) == want, (how, name)


def test_copies_are_kept_with_dedup_off(cluster_of: Any) -> None:
    """With dedup=False every copy is an event of its own, on the nodes as in the local engine."""
    t = pa.table(
        {
            "id": [1, 2, 2, 3],
            "g": ["x"] * 4,
            "type": ["A", "B", "B", "N"],
            "x": [0, 3, 7, 0],
            "ts": pa.array([1, 5, 5, 6], pa.int64()),
        }
    )
    sql = (
        SKIP.format(partition="", extra="")
        .replace("ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW", "ALL MATCHES")
        .replace("A N*? B", "A B")
    )
    want = rows(match_recognize(t, sql, event_key=["id"], dedup=False))
    assert [r[2] for r in want] == [3, 7]
    c = cluster_of(t)
    for name in STRATEGIES:
        assert rows(_pulled(name, sql, c, dedup=False)) == want, name
        assert len(rows(_pulled(name, sql, c))) == 1, name  # dedup on: the copy with x = 3 only


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_copies_are_dropped_after_the_input_filter(cluster_of: Any, strategy: str) -> None:
    """Two copies of event id 1, x = 3 and x = 7: under ``WHERE x > 5`` only the x = 7 copy is
    left, and it is the event (the local engine filters, then drops copies)."""
    t = pa.table(
        {
            "id": [0, 1, 1, 2],
            "g": ["x"] * 4,
            "type": ["A", "B", "B", "N"],
            "x": [9, 3, 7, 9],
            "ts": pa.array([1, 5, 5, 6], pa.int64()),
        }
    )
    clause = SKIP.format(partition="", extra="").split(" MATCH_RECOGNIZE ", 1)[1]
    sql = f"SELECT * FROM (SELECT * FROM t WHERE x > 5) MATCH_RECOGNIZE {clause}"
    want = rows(match_recognize(t, sql, event_key=["id"]))
    assert want == [(0, 1, 7)]
    c = cluster_of(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(
            strategy, parse_statement(sql), c.endpoints, c.token, node_matching="off"
        )
    assert rows(got.table) == want


@pytest.mark.parametrize("strategy", ["pull_all", "dfs"])
@pytest.mark.parametrize("keyed", [True, False])
def test_copies_are_dropped_after_an_input_filter_the_nodes_refuse(
    tmp_path: Path, strategy: str, keyed: bool
) -> None:
    """A NaN in the filtered column makes the nodes refuse ``WHERE x > 5`` (SQL orders NaN above
    every number, Arrow's kernels never match it): the compute node pulls every row, computes the
    input and matches it itself, dropping copies after the filter with the event key the query
    names or, without one, the shard sets' own (it dropped none: event 1 matched twice)."""
    t = pa.table(
        {
            "id": [0, 1, 1, 2, 3],
            "g": ["x"] * 5,
            "type": ["A", "B", "B", "N", "B"],
            "x": [9.0, 7.0, 8.0, 9.0, float("nan")],
            "ts": pa.array([1, 5, 5, 6, 7], pa.int64()),
        }
    )
    sql = (
        "SELECT * FROM (SELECT * FROM t WHERE x > 5) MATCH_RECOGNIZE (ORDER BY ts MEASURES "
        "B.id AS b ONE ROW PER MATCH PATTERN (B) WITHIN 10 DEFINE B AS B.type = 'B')"
    )
    want = rows(match_recognize(t, sql, event_key=["id"]))
    assert want == [(1,), (3,)]  # event 1 once (both copies pass), NaN > 5 in SQL
    pq.write_table(t, tmp_path / "t.parquet")
    shard(
        str(tmp_path / "t.parquet"),
        2,
        str(tmp_path / "s"),
        partitioning="random",
        type_column="g",
        event_key=("id",) if keyed else (),
    )
    options: dict[str, Any] = {} if keyed else {"event_key": ["id"]}
    c = LocalCluster([str(tmp_path / "s" / f"node-{i:02d}") for i in range(2)]).start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = pull_statement(strategy, parse_statement(sql), c.endpoints, c.token, **options)
    finally:
        c.stop()
        c.tmp.cleanup()
    assert "did not take the input filter" in (got.traces[-1].fallback or "")
    assert rows(got.table) == want


@pytest.mark.parametrize(
    ("how", "all_matches"), [("type", False), ("type", True), ("random", False)]
)
def test_copies_on_two_nodes(tmp_path: Path, how: str, all_matches: bool) -> None:
    """Copies of event 2 on two nodes: sharded by a column they differ in (``kind``), or round
    robin with the event key given to the query only. The matcher keeps the ``kind = 'a'`` copy
    (x = 1, no B); the other node's copy passes B's condition, so the compute node fetches each
    candidate's copies from every node and keeps the same one."""
    t = pa.table(
        {
            "id": [1, 2, 2],
            "kind": ["a", "a", "d"],
            "type": ["A", "B", "B"],
            "x": [0, 1, 9],
            "ts": pa.array([1, 5, 5], pa.int64()),
        }
    )
    head = "ALL MATCHES PATTERN (A N* B)" if all_matches else "ONE ROW PER MATCH PATTERN (A N*? B)"
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.x AS bx {head} "
        "WITHIN 10 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.x > 5)"
    )
    assert match_recognize(t, sql, event_key=["id"]).num_rows == 0
    pq.write_table(t, tmp_path / "t.parquet")
    # crc32 puts kind 'a' and kind 'd' on two nodes; round robin puts rows 1 and 2 on two nodes
    shard(
        str(tmp_path / "t.parquet"),
        2,
        str(tmp_path / "s"),
        partitioning=how,
        type_column="kind",
        batch_rows=10,
    )
    with LocalCluster([str(tmp_path / "s" / f"node-{i:02d}") for i in range(2)]) as c:
        for name in STRATEGIES:
            assert rows(_pulled(name, sql, c, event_key=["id"])) == [], (how, name)
