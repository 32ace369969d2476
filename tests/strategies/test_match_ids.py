"""Stable match ids: ``__match_id`` depends only on the match (its rows' identities and labels),
never on which rows a strategy pulled, so every strategy, layout and engine gives the local
engine's ids, and a re-run of an unchanged result updates nothing."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.config import QueryConfig
from dfs_cer.events.identity import ID_COLUMNS
from dfs_cer.io.shard import shard
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.match.rowpattern.engine import run_row_pattern
from dfs_cer.query import analyze, parse
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

STRATEGIES = ("pull_all", "push_down", "push_pull", "naive_dfs", "dfs")


def log(n: int = 500, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": np.arange(n),
            "g": rng.choice(["x", "y"], n),
            "type": rng.choice(["A", "B", "C", "N", "N", "N"], n),
            "v": rng.integers(0, 9, n),
            "ts": np.cumsum(rng.integers(0, 3, n)).astype(np.int64),
        }
    )


def ids(table: pa.Table) -> list[tuple[int, int, int]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ID_COLUMNS), strict=True))


def local_ids(table: pa.Table, sql: str) -> list[tuple[int, int, int]]:
    analysis = analyze(parse(sql), table.schema, QueryConfig(event_key=("id",)))
    run = run_cer if analysis.query.recognize.all_matches else run_row_pattern
    return ids(run(table, analysis, match_ids=True).table)


@pytest.fixture(scope="module", params=["random", "type"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp(f"ids-{request.param}")
    pq.write_table(log(), root / "t.parquet")
    shard(
        str(root / "t.parquet"),
        3,
        str(root / "nodes"),
        partitioning=request.param,
        type_column="type",
        event_key=("id",),
        batch_rows=100,
    )
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as c:
        yield c


HEAD = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g "
    "ORDER BY ts MEASURES A.id AS a, {last}.id AS z "
)
QUERIES = [
    HEAD.format(last="C")
    + "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A {- N* -} B {- N* -} C) "
    "WITHIN 9 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v > 2, C AS C.type = 'C')",
    HEAD.format(last="B") + "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) "
    "WITHIN 6 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v > A.v)",
    HEAD.format(last="B")
    + "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A {- N* -} B) "
    "WITHIN 5 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v > PREV(B.v))",
    HEAD.format(last="B")
    + "ALL MATCHES PATTERN (A N* B) WITHIN 4 DEFINE A AS A.type = 'A', B AS B.type = 'B')",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_match_ids_are_the_same_for_every_strategy(cluster: LocalCluster, sql: str) -> None:
    want = local_ids(log(), sql)
    assert len(want) > 10
    for name in STRATEGIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pull(
                name,
                sql,
                cluster.endpoints,
                cluster.token,
                node_matching="off",
                cost_model="always_on",
            )
        assert ids(match_pulled(result, outer=False, match_ids=True)) == want, name


def test_a_skip_variable_leaves_the_id_alone() -> None:
    """Rows a skip variable absorbs between the variables do not change a match's id; the rows
    the variables label do."""
    sql = QUERIES[0]
    table = log()
    without_n = table.filter(pa.compute.not_equal(table.column("type"), "N"))
    assert local_ids(without_n, sql) == local_ids(table, sql)
    is_b = np.asarray(table.column("type").to_pylist()) == "B"
    renamed = table.set_column(
        0,
        "id",
        pa.array(
            np.where(is_b, table.column("id").to_numpy() + 10_000, table.column("id").to_numpy())
        ),
    )
    assert not {i for i, _, _ in local_ids(renamed, sql)} & {i for i, _, _ in local_ids(table, sql)}


def test_since_run_after_a_duplicate_delivery_updates_nothing(tmp_path: Path) -> None:
    """The whole log delivered a second time: the nodes serve both copies of every event and
    only one is a candidate (the candidates are now under half of the rows, so the re-run pulls
    them and their halo instead of every row, as the first run did), yet no match changes."""
    from dfs_cer.strategies.incremental import run_and_save

    rng = np.random.default_rng(5)
    n = 300
    table = pa.table(
        {
            "id": np.arange(n),
            "type": rng.choice(["A", "B", "N"], n, p=[0.3, 0.4, 0.3]),
            "v": rng.integers(0, 9, n),
            "ts": np.cumsum(rng.integers(0, 3, n)).astype(np.int64),
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b ONE ROW "
        "PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A {- N* -} B) WITHIN 6 DEFINE A "
        "AS A.type = 'A', B AS B.type = 'B' AND B.v > PREV(B.v) + 3)"
    )
    pq.write_table(table, tmp_path / "month.parquet")
    shard(str(tmp_path / "month.parquet"), 2, str(tmp_path / "nodes"), event_key=("id",), name="t")
    with (
        LocalCluster([str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]) as c,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        first = run_and_save(sql, c.endpoints, c.token, runs_dir=tmp_path / "runs")
        shard(
            str(tmp_path / "month.parquet"),
            2,
            str(tmp_path / "nodes"),
            event_key=("id",),
            append=True,
        )
        again = run_and_save(
            "", c.endpoints, c.token, runs_dir=tmp_path / "runs", since_run=first.record.run_id
        )
    assert first.pulled is not None and again.pulled is not None
    assert "pull_all" in (first.pulled.trace.fallback or "") and not again.pulled.trace.fallback
    assert first.matches.num_rows > 10
    assert again.changes is not None and again.changes.column("change").to_pylist() == []
    assert ids(again.matches) == ids(first.matches)


@pytest.mark.parametrize("unit", ["s", "ms"])
def test_match_ids_do_not_depend_on_the_time_unit(unit: str) -> None:
    """Parquet stores ``timestamp[s]`` as milliseconds: the rows a storage node serves differ in
    unit from those the local engine was given, never in value, and so do not their ids."""
    table = log()
    seconds = pa.array(table.column("ts").to_numpy() + 1_767_225_600, pa.timestamp("s"))
    given = table.set_column(4, "ts", seconds.cast(pa.timestamp(unit)))
    stored = table.set_column(4, "ts", seconds.cast(pa.timestamp("us")))
    for sql in (QUERIES[0], QUERIES[3]):
        sql = sql.replace("WITHIN 9", "WITHIN INTERVAL '9' SECOND").replace(
            "WITHIN 4", "WITHIN INTERVAL '4' SECOND"
        )
        assert [i for i, _, _ in local_ids(given, sql)] == [i for i, _, _ in local_ids(stored, sql)]
