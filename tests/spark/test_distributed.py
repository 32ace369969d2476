"""Executors read, split and match; the driver never holds the input.

Dense inputs without PARTITION BY (and a skewed partition) are cut into exact time chunks; every
SKIP mode and ALL ROWS variant equals the local engine, through data= on local files and moto's
S3 server, on local[2] and on a real local-cluster (separate executor JVMs and Python workers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize as local_match_recognize

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]
N = 24_000


def dense_events(n: int = N, seed: int = 7) -> pa.Table:
    """A dense log: one event per second or two (with ties), a skewed ``g`` (most rows in g=0)."""
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "v": pa.array(rng.integers(0, 10, n), pa.int64()),
            "g": pa.array(np.where(rng.random(n) < 0.8, 0, rng.integers(1, 4, n)), pa.int64()),
            "name": pa.array([f"e{i % 13}" for i in range(n)]),
        }
    )


def q(body: str, rows: str = "ONE ROW PER MATCH", skip: str = "", part: str = "") -> str:
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE ({part} ORDER BY ts MEASURES FIRST(ts) AS f, "
        "LAST(ts) AS l, "
        f"COUNT(*) AS n {', CLASSIFIER() AS c' if rows != 'ONE ROW PER MATCH' else ''} "
        f"{rows} {skip} {body})"
    )


CHAIN = "PATTERN (A+ B) WITHIN 40 SECONDS DEFINE A AS A.v < 8, B AS B.v >= 8"
QUERIES = {
    "past-last-chain": q(CHAIN),
    "next-row": q(CHAIN, skip="AFTER MATCH SKIP TO NEXT ROW"),
    "to-first": q(
        "PATTERN (A B+ C) WITHIN 20 SECONDS DEFINE A AS A.v < 3, B AS B.v > 2, C AS C.v = 9",
        skip="AFTER MATCH SKIP TO FIRST C",
    ),
    "to-last": q(
        "PATTERN (A B+ C) WITHIN 20 SECONDS DEFINE A AS A.v < 3, B AS B.v > 2, C AS C.v = 9",
        skip="AFTER MATCH SKIP TO LAST B",
    ),
    "all-rows": q(CHAIN, rows="ALL ROWS PER MATCH"),
    "with-unmatched": q(CHAIN, rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS"),
    "prev-next": q(
        "PATTERN (A B C) WITHIN 10 SECONDS DEFINE A AS A.v < PREV(A.v), B AS B.v > PREV(B.v, 2), "
        "C AS C.v < NEXT(C.v)"
    ),
    "partitioned-skewed": q(CHAIN, part="PARTITION BY g"),
    "all-matches": (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ALL MATCHES "
        "PATTERN (A B) WITHIN 6 SECONDS DEFINE A AS A.v = 1, B AS B.v = 2)"
    ),
}


def rows(table: pa.Table) -> list[str]:
    return sorted(map(str, table.to_pylist()))


@pytest.fixture(scope="module")
def spark() -> Any:
    from dfs_cer.spark import local_session

    return local_session(2)


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, Path]:
    events = dense_events()
    root = tmp_path_factory.mktemp("dense")
    shuffled = events.take(pa.array(np.random.default_rng(1).permutation(events.num_rows)))
    for i in range(
        4
    ):  # four files, rows out of time order (each row group spans all times): shuffled
        pq.write_table(
            shuffled.slice(i * N // 4, N // 4), root / f"part-{i}.parquet", row_group_size=2_000
        )
    return events, root


@pytest.mark.parametrize("name", list(QUERIES))
def test_executors_equal_the_local_engine(
    spark: Any, dense: tuple[pa.Table, Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dfs_cer.io import rowgroups
    from dfs_cer.spark import recognize

    events, root = dense
    sql = QUERIES[name]
    expected = local_match_recognize(events, sql)
    assert expected.num_rows > 20

    def no_reads_here(*_: Any, **__: Any) -> None:
        raise AssertionError("the driver read a row group")

    monkeypatch.setattr(rowgroups, "read_row_group", no_reads_here)  # executors are other processes
    run = recognize(spark, sql, data=str(root), driver_threshold=0, tasks=2)
    assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), name
    split = run.split
    assert split is not None
    assert split.mode == "time" and split.chunks >= 4, (split.mode, split.reason)
    assert split.driver_rows <= 4 * split.chunks  # reports only, never rows of the input
    if (
        name == "past-last-chain"
    ):  # contiguous: every row reaches some chunk (boundary rows reach two)
        assert split.events >= N
        assert split.reruns > 0, "back-to-back matches cross chunk ends: some chunk must be re-run"


def test_unsplittable_patterns_run_as_one_chunk_and_say_why(
    spark: Any, dense: tuple[pa.Table, Path]
) -> None:
    from dfs_cer.spark import recognize

    events, root = dense
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() * 2 AS m, "
        "COUNT(*) AS n PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v = 1, B AS B.v = 2)"
    )
    run = recognize(spark, sql, data=str(root), driver_threshold=0, tasks=2)
    assert rows(run.matches.toArrow().cast(local_match_recognize(events, sql).schema)) == rows(
        local_match_recognize(events, sql)
    )
    assert (
        run.split is not None
        and run.split.mode == "single"
        and "MATCH_NUMBER" in (run.split.reason or "")
    )
    part = q(
        "PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v < PREV(A.v), B AS B.v = 2",
        part="PARTITION BY g",
    )
    run = recognize(spark, part, data=str(root), driver_threshold=0, tasks=2)
    assert rows(run.matches.toArrow().cast(local_match_recognize(events, part).schema)) == rows(
        local_match_recognize(events, part)
    )
    assert (
        run.split is not None
        and run.split.mode == "partition"
        and "PREV" in (run.split.reason or "")
    )


def test_dense_data_in_s3(
    spark: Any, dense: tuple[pa.Table, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.fs as pafs

    from dfs_cer.spark import recognize
    from tests.fixtures.s3 import moto_s3

    events, root = dense
    with moto_s3(monkeypatch) as (host, port):
        fs = pafs.S3FileSystem(
            endpoint_override=f"{host}:{port}",
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        fs.create_dir("dense")
        for f in sorted(root.glob("*.parquet")):
            with fs.open_output_stream(f"dense/log/{f.name}") as out:
                out.write(f.read_bytes())
        for name in ("past-last-chain", "with-unmatched", "prev-next"):
            sql = QUERIES[name]
            expected = local_match_recognize(events, sql)
            run = recognize(spark, sql, data="s3://dense/log", driver_threshold=0, tasks=2)
            assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), name
            assert run.split is not None and run.split.mode == "time"


def test_dense_iceberg_and_hive_tables_read_in_place(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """data= names an Iceberg table (planned on the driver by pyiceberg, files read by the
    executors through pyarrow) whose column was renamed between appends, or a Hive prefix."""
    from dfs_cer.config import TablesConfig
    from dfs_cer.io.tables import load_catalog
    from dfs_cer.spark import recognize

    events = dense_events(12_000)
    tables = TablesConfig(
        catalog_uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=str(tmp_path / "wh")
    )
    for key, value in (("CATALOG_URI", tables.catalog_uri), ("WAREHOUSE", tables.warehouse)):
        monkeypatch.setenv(f"DFS_CER__TABLES__{key}", value)
    catalog = load_catalog("local", tables)
    catalog.create_namespace("logs")
    old = events.rename_columns(["ts", "value", "g", "name"])
    table = catalog.create_table("logs.dense", schema=old.schema)
    table.append(old.slice(6_000))  # later times first: files out of time order
    with table.update_schema() as update:
        update.rename_column("value", "v")
    table.append(events.slice(0, 6_000))
    for i in range(3):  # a Hive prefix of the same rows
        folder = tmp_path / "hive" / f"part={i}"
        folder.mkdir(parents=True)
        pq.write_table(
            events.slice(i * 4_000, 4_000)
            .drop_columns(["g"])
            .append_column("g", events.column("g").slice(i * 4_000, 4_000)),
            folder / "data.parquet",
            row_group_size=1_000,
        )
    for name in ("past-last-chain", "prev-next"):
        sql = QUERIES[name]
        expected = local_match_recognize(events, sql)
        for data in ("iceberg://local/logs.dense", f"hive:{tmp_path / 'hive'}"):
            run = recognize(spark, sql, data=data, driver_threshold=0, tasks=2)
            assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), (name, data)
            assert run.split is not None and run.split.mode == "time"


CLUSTER = r"""
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from dfs_cer import match_recognize as local
from dfs_cer.spark import local_session, recognize
from tests.spark.test_distributed import QUERIES, rows
root, endpoints, token = sys.argv[1], sys.argv[2].split(","), os.environ["DFS_CER_TEST_TOKEN"]
spark = local_session(master="local-cluster[2,1,1024]")
events = pq.read_table(root).sort_by("ts")
out = {}
for name in sys.argv[3:]:
    want = local(events, QUERIES[name])
    for source, kw in (("data", {"data": root}),
                       ("nodes", {"endpoints": endpoints, "token": token})):
        run = recognize(spark, QUERIES[name], driver_threshold=0, tasks=2, **kw)
        out[f"{name} {source}"] = {
            "equal": rows(run.matches.toArrow().cast(want.schema)) == rows(want),
            "mode": run.split.mode, "pulled": bool(run.split.transfers),
            "driver_rows": run.split.driver_rows, "chunks": run.split.chunks}
pids = spark.sparkContext.parallelize(range(8), 4).map(lambda _: os.getpid()).distinct().collect()
out["executor_pids"] = len(set(pids) - {os.getpid()})
print("RESULT " + json.dumps(out))
"""


def test_local_cluster_executors(dense: tuple[pa.Table, Path], nodes: Any) -> None:
    """A real cluster in one machine: a master, two workers, executor JVMs with their own Python;
    the executors read the parquet, and pull from the storage nodes themselves."""
    _, root = dense
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DFS_CER_TEST_TOKEN": nodes.token,
    }  # not on a command line
    names = ["past-last-chain", "with-unmatched", "partitioned-skewed"]
    run = subprocess.run(
        [sys.executable, "-c", CLUSTER, str(root), ",".join(nodes.endpoints), *names],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    assert run.returncode == 0 and line, (run.stdout + run.stderr)[-4000:]
    out = json.loads(line[0][len("RESULT ") :])
    assert out.pop("executor_pids") >= 2
    for name in names:
        for source in ("data", "nodes"):
            got = out[f"{name} {source}"]
            assert got["equal"] and got["mode"] == "time", (name, source, got)
            assert got["pulled"] == (source == "nodes")
            assert got["driver_rows"] <= 4 * got["chunks"] + 1  # report rows, never the input


@pytest.fixture(scope="module")
def nodes(dense: tuple[pa.Table, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    from dfs_cer.io.shard import shard
    from storage_node.launcher import LocalCluster

    events, _ = dense
    root = tmp_path_factory.mktemp("dense-nodes")
    pq.write_table(events, root / "events.parquet")
    shard(str(root / "events.parquet"), 3, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as cluster:
        yield cluster


@pytest.mark.parametrize(
    ("name", "strategy"),
    [
        ("past-last-chain", "dfs"),
        ("with-unmatched", "pull_all"),
        ("all-matches", "dfs"),
        ("all-matches", "push_down"),
        ("partitioned-skewed", "push_down"),
    ],
)
def test_executors_pull_from_storage_nodes(
    spark: Any, dense: tuple[pa.Table, Path], nodes: Any, name: str, strategy: str
) -> None:
    """The driver runs the filter rounds; executors pull their time slices of the final pull from
    every node, match, and the trace sums their transfers; the query is closed on every node."""
    from dfs_cer.spark import recognize
    from tests.fixtures.faults import NOTHING, held

    events, _ = dense
    sql = QUERIES[name]
    expected = local_match_recognize(events, sql)
    run = recognize(
        spark,
        sql,
        endpoints=nodes.endpoints,
        token=nodes.token,
        strategy=strategy,
        driver_threshold=0,
        tasks=2,
    )
    assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), (name, strategy)
    assert run.split is not None and run.split.transfers, "the executors took the final pull"
    assert run.trace is not None
    by_executors = [r for r in run.trace.rounds if r.note and "taken by executors" in r.note]
    assert len(by_executors) == 1 and by_executors[0].bytes_to_cn > 0 and by_executors[0].events > 0
    assert run.trace.bytes_to_cn >= by_executors[0].bytes_to_cn
    assert run.split.driver_rows <= 4 * run.split.chunks + 1
    assert held(nodes, range(3)) == [NOTHING] * 3


def test_an_executor_pull_failure_is_one_clear_error(spark: Any, nodes: Any) -> None:
    """A node that refuses the executors' pulls (here: a wrong token in the slice loader) ends the
    query with one error naming the node, and nothing stays held."""
    from dfs_cer.errors import StorageError
    from dfs_cer.spark import distributed, recognize
    from tests.fixtures.faults import NOTHING, held

    real = distributed.SlicePuller.__init__

    def wrong_token(self: Any, deferred: Any, slices: Any, schema: Any) -> None:
        real(self, deferred, slices, schema)
        self.token = type(deferred.token)("not-the-token")

    distributed.SlicePuller.__init__ = wrong_token  # type: ignore[method-assign]
    try:
        with pytest.raises(
            StorageError,
            # (the dense log's chain covers about every slice: DFS pulls every row at once)
            match=r"round \d+ \((pull_range|pull_all) taken by executors.*storage node "
            r"grpc\+tcp://127.0.0.1:\d+ refused",
        ):
            recognize(
                spark,
                QUERIES["past-last-chain"],
                endpoints=nodes.endpoints,
                token=nodes.token,
                strategy="dfs",
                driver_threshold=0,
                tasks=2,
            )
    finally:
        distributed.SlicePuller.__init__ = real  # type: ignore[method-assign]
    assert held(nodes, range(3)) == [NOTHING] * 3


def test_files_in_time_order_are_read_by_their_chunks(
    spark: Any, dense: tuple[pa.Table, Path], tmp_path: Path
) -> None:
    """A log written in time order: each task reads its own chunk's row groups (no shuffle); the
    fixture's log, whose row groups each span all times, is read once and shuffled."""
    from dfs_cer.spark import recognize

    events, shuffled = dense
    for i in range(4):
        pq.write_table(
            events.slice(i * N // 4, N // 4), tmp_path / f"part-{i}.parquet", row_group_size=1_500
        )
    for name in ("past-last-chain", "to-last", "prev-next"):
        expected = local_match_recognize(events, QUERIES[name])
        ordered = recognize(spark, QUERIES[name], data=str(tmp_path), driver_threshold=0, tasks=2)
        assert rows(ordered.matches.toArrow().cast(expected.schema)) == rows(expected), name
        assert ordered.split is not None and ordered.split.direct
    mixed = recognize(
        spark, QUERIES["past-last-chain"], data=str(shuffled), driver_threshold=0, tasks=2
    )
    assert mixed.split is not None and not mixed.split.direct


EMPTIES = "PATTERN (A* B?) WITHIN 5 SECONDS DEFINE A AS A.v < 5, B AS B.v > 7"
#: queries whose answer depends on where the partition starts or ends (the dense log has no
#: PARTITION BY: the partition is the whole log, cut into time chunks)
EDGES = {
    "start-anchor": q("PATTERN (^ A B*) WITHIN 40 SECONDS DEFINE A AS A.v < 10, B AS B.v < 8"),
    "end-anchor": q("PATTERN (A B* $) WITHIN 40 SECONDS DEFINE A AS A.v < 10, B AS B.v < 10"),
    "start-or-row": q("PATTERN (^ A | B) WITHIN 5 SECONDS DEFINE A AS A.v < 10, B AS B.v = 9"),
    "end-with-unmatched": q(
        "PATTERN (A B* $) WITHIN 40 SECONDS DEFINE A AS A.v = 1, B AS B.v < 10",
        rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS",
    ),
    "empty-matches": q(
        "PATTERN (A*) WITHIN 5 SECONDS DEFINE A AS A.v < 3",
        rows="ALL ROWS PER MATCH SHOW EMPTY MATCHES",
    ),
    # chunks number their own matches from 1; the merge renumbers them over the whole partition
    "match-number": q(CHAIN).replace("COUNT(*) AS n", "MATCH_NUMBER() AS m"),
    "match-number-partitioned-all-rows": q(
        CHAIN, rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS", part="PARTITION BY g"
    ).replace("COUNT(*) AS n", "MATCH_NUMBER() AS m"),
    # an empty match has a number even where it has no row (rows with 5 <= v <= 7 start one)
    "match-number-empty-unmatched": q(
        EMPTIES, rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS"
    ).replace("COUNT(*) AS n", "MATCH_NUMBER() AS m"),
    "match-number-empty-omitted-partitioned": q(
        EMPTIES, rows="ALL ROWS PER MATCH OMIT EMPTY MATCHES", part="PARTITION BY g"
    ).replace("COUNT(*) AS n", "MATCH_NUMBER() AS m"),
}


@pytest.mark.parametrize("name", list(EDGES))
def test_partition_edges_over_time_chunks(
    spark: Any, dense: tuple[pa.Table, Path], name: str
) -> None:
    """``^`` holds at the log's first row only (not at every chunk's), ``$`` at its last row,
    empty matches and unmatched rows come once each, MATCH_NUMBER() counts the whole
    partition's matches."""
    from dfs_cer.spark import recognize

    events, root = dense
    sql = EDGES[name]
    expected = local_match_recognize(events, sql)
    run = recognize(spark, sql, data=str(root), driver_threshold=0, tasks=2)
    assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), name
    assert run.split is not None and run.split.mode == "time" and run.split.chunks >= 4, name
    if name in ("start-anchor", "end-anchor"):
        assert expected.num_rows == 1, name


@pytest.mark.parametrize(
    ("sql", "mode", "why"),
    [
        (
            q(
                "PATTERN (^ A B*) WITHIN 40 SECONDS DEFINE A AS A.v < 10, B AS B.v < 8",
                part="PARTITION BY g",
            ),
            "partition",
            "^ or $ under PARTITION BY",
        ),
        (
            q(
                "PATTERN (A B) WITHIN 5 SECONDS DEFINE A AS A.v = 1, B AS B.v = 2 AND "
                "MATCH_NUMBER() > 3"
            ),
            "single",
            "MATCH_NUMBER",
        ),
    ],
)
def test_partition_edges_keep_partitions_whole(
    spark: Any, dense: tuple[pa.Table, Path], sql: str, mode: str, why: str
) -> None:
    """Anchors under PARTITION BY, and MATCH_NUMBER() in DEFINE,
    keep partitions whole and say why."""
    from dfs_cer.spark import recognize

    events, root = dense
    expected = local_match_recognize(events, sql)
    run = recognize(spark, sql, data=str(root), driver_threshold=0, tasks=2)
    assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), sql
    assert run.split is not None and run.split.mode == mode and why in (run.split.reason or ""), (
        run.split
    )


def test_anchors_on_executor_pulls_match_in_one_chunk(
    spark: Any, dense: tuple[pa.Table, Path], nodes: Any
) -> None:
    """Executors pulling from storage nodes know only the nodes' time bounds, not the first and
    last row they will pull: an anchored pattern is matched as one chunk (and says why)."""
    from dfs_cer.spark import recognize

    events, _ = dense
    sql = EDGES["start-anchor"]
    expected = local_match_recognize(events, sql)
    run = recognize(
        spark,
        sql,
        endpoints=nodes.endpoints,
        token=nodes.token,
        strategy="pull_all",
        driver_threshold=0,
        tasks=2,
    )
    assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected)
    assert (
        run.split is not None
        and run.split.mode == "single"
        and "exact first and last" in (run.split.reason or "")
    )


def test_a_pathological_query_ends_at_the_driver_s_step_budget_on_the_executors(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executors do not read the driver's configuration: ``matcher.max_steps`` travels with the
    query, and an executor past it ends the query with the budget's error (partition, rows,
    pattern, setting), not a JVM trace or a task that runs for hours."""
    from dfs_cer.errors import MatchBudgetError
    from dfs_cer.spark import recognize

    n = 2_000
    i = np.arange(n, dtype=np.int64)
    pq.write_table(pa.table({"k": i % 2, "ts": i, "v": i % 7}), tmp_path / "t.parquet")
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > LAST(B.v, 1) + 100)"
    )
    monkeypatch.setenv("DFS_CER__MATCHER__MAX_STEPS", "300000")
    with pytest.raises(MatchBudgetError) as info:
        recognize(spark, sql, data=str(tmp_path), driver_threshold=0, tasks=2)
    text = str(info.value)
    for part in ("an executor failed", "matcher.max_steps = 300,000", "(1,000 rows)", "MAX_STEPS"):
        assert part in text, text
