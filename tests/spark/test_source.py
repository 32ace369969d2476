"""MATCH_RECOGNIZE from Spark SQL: the ``dfs_cer`` data source (``spark.read.format("dfs_cer")``,
``CREATE TEMPORARY VIEW ... USING dfs_cer``) returns the local engine's rows, from storage nodes
and from parquet, on local[2], a local-cluster and through Spark Connect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster

pytestmark = [pytest.mark.spark, pytest.mark.flight]

ROOT = Path(__file__).resolve().parents[2]
SQL = (
    "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a_ts, "
    "LAST(B.ts) AS b_ts, count(B.*) AS nb, A.name AS name ONE ROW PER MATCH PATTERN (A B+) "
    "WITHIN INTERVAL '30' SECOND DEFINE A AS A.v > 80, B AS B.v < PREV(B.v))"
)


def events(n: int = 4000) -> pa.Table:
    rng = np.random.default_rng(11)
    return pa.table(
        {
            "ts": pa.array(np.arange(n, dtype=np.int64) * 1000, pa.timestamp("ms")),
            "k": rng.integers(0, 4, n),
            "v": rng.integers(0, 100, n),
            "name": pa.array(rng.choice(["x", "y", "z"], n)).cast(pa.large_string()),
        }
    )


def rows(table: pa.Table) -> list[tuple[Any, ...]]:
    names = ["k", "a_ts", "b_ts", "nb", "name"]
    return sorted(tuple(r[c] for c in names) for r in table.select(names).to_pylist())


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from dfs_cer.spark import local_session

    yield local_session(2)  # registers the source (an editable install is not listed to Spark)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    root = tmp_path_factory.mktemp("source")
    table = events()
    # pandas 3 writes large strings; a dictionary column too
    pq.write_table(table, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"))
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        yield cluster, root


def test_the_source_reads_the_matches_from_nodes_and_from_parquet(
    spark: Any, nodes: tuple[LocalCluster, Path]
) -> None:
    cluster, root = nodes
    want = match_recognize(events(), SQL)
    assert want.num_rows > 20
    from_nodes = (
        spark.read.format("dfs_cer")
        .option("query", SQL)
        .option("endpoints", ",".join(cluster.endpoints))
        .option("token", cluster.token)
        .load()
    )
    assert rows(from_nodes.toArrow()) == rows(want)
    from_parquet = (
        spark.read.format("dfs_cer").option("query", SQL).load(str(root / "events.parquet"))
    )
    assert rows(from_parquet.toArrow()) == rows(want)
    # with filter_pushdown, a filter on a PARTITION BY column goes to the nodes (exact); others
    # stay with Spark
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    pushing = (
        spark.read.format("dfs_cer")
        .option("query", SQL)
        .option("endpoints", ",".join(cluster.endpoints))
        .option("token", cluster.token)
        .option("filter_pushdown", "true")
        .load()
    )
    picked = pushing.where("k = 2 AND nb >= 2").toArrow()
    assert rows(picked) == rows(want.filter(pa.compute.and_(
        pa.compute.equal(want["k"], 2), pa.compute.greater_equal(want["nb"], 2))))  # fmt: skip


#: matches that depend only on their own rows: read as time slices, one executor task each
SPLIT = (
    "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a_ts, "
    "B.ts AS b_ts, A.name AS name ALL MATCHES PATTERN (A B) WITHIN INTERVAL '30' SECOND "
    "DEFINE A AS A.v > 80, B AS B.v < 10 AND B.name = A.name)"
)


def test_a_query_of_independent_matches_is_read_in_time_slices_on_the_executors(
    spark: Any, nodes: tuple[LocalCluster, Path]
) -> None:
    cluster, root = nodes
    want = match_recognize(events(), SPLIT)
    names = ["k", "a_ts", "b_ts", "name"]

    def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
        return sorted(tuple(r[c] for c in names) for r in table.select(names).to_pylist())

    assert want.num_rows > 50
    from_nodes = (
        spark.read.format("dfs_cer")
        .option("query", SPLIT)
        .option("endpoints", ",".join(cluster.endpoints))
        .option("token", cluster.token)
        .option("partitions", "5")
        .load()
    )
    assert from_nodes.rdd.getNumPartitions() == 5
    assert rows_of(from_nodes.toArrow()) == rows_of(want)
    from_parquet = (
        spark.read.format("dfs_cer").option("query", SPLIT).load(str(root / "events.parquet"))
    )
    assert from_parquet.rdd.getNumPartitions() == 1  # auto: 4,000 rows are one slice's worth
    assert rows_of(from_parquet.toArrow()) == rows_of(want)
    sliced = (
        spark.read.format("dfs_cer")
        .option("query", SPLIT)
        .option("partitions", "3")
        .load(str(root / "events.parquet"))
    )
    assert sliced.rdd.getNumPartitions() == 3
    assert rows_of(sliced.toArrow()) == rows_of(want)
    # PREV reads rows before a slice: one task
    one = spark.read.format("dfs_cer").option("query", SQL).load(str(root / "events.parquet"))
    assert one.rdd.getNumPartitions() == 1


def test_a_spark_sql_view_of_the_matches_joins_a_table(
    spark: Any, nodes: tuple[LocalCluster, Path]
) -> None:
    cluster, _ = nodes
    names = pa.table({"k": [0, 1, 2, 3], "label": ["zero", "one", "two", "three"]})
    spark.createDataFrame(names.to_pandas()).createOrReplaceTempView("labels")
    quoted = SQL.replace("'", "\\'")
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW m USING dfs_cer OPTIONS (query '{quoted}', "
        f"endpoints '{','.join(cluster.endpoints)}', token '{cluster.token}')"
    )
    joined = spark.sql(
        "SELECT l.label, count(*) AS matches, max(m.nb) AS longest FROM m JOIN labels l "
        "ON m.k = l.k GROUP BY l.label ORDER BY l.label"
    ).toArrow()
    relation = match_recognize(events(), SQL)
    con = duckdb.connect()
    con.register("m", relation)
    con.register("labels", names)
    want = con.sql(
        "SELECT l.label, count(*) AS matches, max(m.nb) AS longest FROM m JOIN labels l "
        "ON m.k = l.k GROUP BY l.label ORDER BY l.label"
    ).to_arrow_table()
    assert joined.to_pylist() == want.to_pylist()


def test_a_wrong_option_is_one_clear_error(spark: Any) -> None:
    with pytest.raises(Exception, match="unknown dfs_cer option querry"):
        spark.read.format("dfs_cer").option("querry", SQL).load().collect()
    with pytest.raises(Exception, match="partitions is a positive integer or auto, got '0'"):
        spark.read.format("dfs_cer").option("query", SQL).option("data", "x.parquet").option(
            "partitions", "0"
        ).load().collect()


def test_a_table_that_is_not_the_nodes_log_is_refused_as_everywhere(
    spark: Any, nodes: tuple[LocalCluster, Path]
) -> None:
    """The data source and ``recognize`` refuse ``FROM hurricanes`` over the log ``events`` as
    the command line does, before any round."""
    from dfs_cer.errors import QueryValidationError
    from dfs_cer.spark import recognize

    cluster, _ = nodes
    wrong = SQL.replace("FROM events", "FROM hurricanes")
    said = "table hurricanes does not exist: the storage nodes serve the log events"
    with pytest.raises(Exception, match=said):
        spark.read.format("dfs_cer").option("query", wrong).option(
            "endpoints", ",".join(cluster.endpoints)
        ).option("token", cluster.token).load().collect()
    with pytest.raises(QueryValidationError, match="did you mean events"):
        recognize(spark, wrong, endpoints=cluster.endpoints, token=cluster.token)


SCRIPT = r"""
import json, sys
import pyarrow as pa
from pyspark.sql import SparkSession
from dfs_cer.spark.source import DfsCerSource
master, sql, endpoints, token = sys.argv[1:5]
if master.startswith("connect:"):
    spark = SparkSession.builder.remote(master.removeprefix("connect:")).getOrCreate()
else:
    from dfs_cer.spark import local_session
    spark = local_session(master=master)
spark.dataSource.register(DfsCerSource)
frame = (spark.read.format("dfs_cer").option("query", sql).option("endpoints", endpoints)
         .option("token", token).load())
out = frame.toArrow()
print("RESULT " + json.dumps([[str(v) for v in r.values()] for r in out.to_pylist()]))
spark.stop()
"""


@pytest.mark.parametrize("master", ["local-cluster[2,1,1024]", "connect:local[2]"])
def test_a_cluster_and_a_spark_connect_client_read_the_same_rows(
    nodes: tuple[LocalCluster, Path], master: str
) -> None:
    cluster, _ = nodes
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, master, SQL, ",".join(cluster.endpoints), cluster.token],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))[7:])
    want = match_recognize(events(), SQL)
    assert sorted(got) == sorted([str(v) for v in r.values()] for r in want.to_pylist())


def test_executors_read_large_strings_and_dictionaries_as_strings(
    spark: Any, tmp_path: Path
) -> None:
    """pandas 3 writes large strings; dictionaries come from many writers: recognize(data=...)
    splits the input over executors and returns the local engine's rows, strings as strings."""
    from dfs_cer.spark import recognize

    n = 3000
    rng = np.random.default_rng(1)
    table = pa.table(
        {
            "ts": pa.array(np.arange(n) * 1000, pa.timestamp("ms")),
            "origin": pa.array(rng.choice(["JFK", "LGA", "EWR"], n)).cast(pa.large_string()),
            "carrier": pa.array(rng.choice(["AA", "UA"], n)).dictionary_encode(),
            "delay": rng.integers(0, 100, n),
        }
    )
    pq.write_table(table, tmp_path / "flights.parquet")
    sql = (
        "SELECT * FROM flights MATCH_RECOGNIZE (PARTITION BY origin ORDER BY ts MEASURES "
        "A.carrier AS c, count(B.*) AS n ONE ROW PER MATCH PATTERN (A B+) WITHIN INTERVAL '20' "
        "SECOND DEFINE A AS A.delay > 90, B AS B.delay < PREV(B.delay))"
    )
    run = recognize(spark, sql, data=str(tmp_path / "flights.parquet"), driver_threshold=0, tasks=2)
    assert run.split is not None and run.split.chunks >= 2  # the executors matched
    got = run.matches.toArrow()
    assert got.schema.field("origin").type == pa.string() == got.schema.field("c").type
    want = match_recognize(table, sql)
    assert sorted(map(str, got.to_pylist())) == sorted(map(str, want.to_pylist()))


def test_the_source_finds_the_nodes_storage_node_up_started(
    spark: Any, nodes: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    """No endpoints and no token: the nodes file (``nodes_dir``), as ``dfs-cer storage-node up``
    writes it, names both."""
    from dfs_cer.io.nodefile import Nodes

    cluster, _ = nodes
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "token").write_text(cluster.token)
    record = Nodes(list(cluster.endpoints), str(tmp_path / "nodes" / "token"), [], [], [])
    (tmp_path / "nodes" / "nodes.json").write_text(record.to_json())
    frame = (
        spark.read.format("dfs_cer")
        .option("query", SQL)
        .option("nodes_dir", str(tmp_path / "nodes"))
        .load()
    )
    assert rows(frame.toArrow()) == rows(match_recognize(events(), SQL))


def _union(spec: Any) -> tuple[list[Any], pa.Table]:
    pieces, snapshot = spec.slices()
    got = pa.concat_tables([spec.slice_matches(p, snapshot) for p in pieces])
    return pieces, got


def test_slices_follow_the_integer_time_unit_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Integer epoch milliseconds with query.integer_time_unit = ms: the slices' window is in
    ms, as the matching's."""
    from dfs_cer.spark.source import Spec

    monkeypatch.setenv("DFS_CER__QUERY__INTEGER_TIME_UNIT", "ms")
    n = 40
    table = pa.table(
        {"id": np.arange(n), "ts": np.arange(n, dtype=np.int64) * 1000,
         "type": ["A" if i % 2 == 0 else "B" for i in range(n)]}
    )  # fmt: skip
    pq.write_table(table, tmp_path / "ms.parquet")
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b ALL MATCHES "
        "PATTERN (A B) WITHIN INTERVAL '5' SECOND DEFINE A AS A.type = 'A', B AS B.type = 'B')"
    )
    spec = Spec({"query": sql, "data": str(tmp_path / "ms.parquet"), "partitions": "4"})
    pieces, got = _union(spec)
    assert len(pieces) == 4
    assert sorted(got.to_pylist(), key=repr) == sorted(spec.matches().to_pylist(), key=repr)


def test_slices_of_a_zoned_time_column_under_a_pushed_filter(tmp_path: Path) -> None:
    """A pushed filter runs through DuckDB, which reads a zoned timestamp[ms] as microseconds:
    the rows are cast back, so the slices' bounds and the match starts agree."""
    from dfs_cer.spark.source import Spec

    n = 40
    table = pa.table(
        {"id": np.arange(n), "k": [i % 2 for i in range(n)],
         "ts": pa.array(np.arange(n, dtype=np.int64) * 1000).cast(pa.timestamp("ms", "UTC")),
         "type": ["A" if (i // 2) % 2 == 0 else "B" for i in range(n)]}
    )  # fmt: skip
    pq.write_table(table, tmp_path / "tz.parquet")
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.id AS a, "
        "B.id AS b ALL MATCHES PATTERN (A B) WITHIN INTERVAL '5' SECOND DEFINE A AS "
        "A.type = 'A', B AS B.type = 'B')"
    )
    spec = Spec({"query": sql, "data": str(tmp_path / "tz.parquet"), "partitions": "4"}, '"k" = 1')
    whole = spec.matches()
    pieces, got = _union(spec)
    assert len(pieces) == 4 and whole.num_rows == 10
    assert sorted(got.to_pylist(), key=repr) == sorted(whole.to_pylist(), key=repr)


def _instants(table: pa.Table) -> list[str]:
    """Rows with every zoned time as its UTC instant (Spark's TimestampType holds instants)."""
    utc = [
        f.with_type(pa.timestamp("us", "UTC")) if pa.types.is_timestamp(f.type) else f
        for f in table.schema
    ]
    return sorted(map(str, table.cast(pa.schema(utc)).to_pylist()))


@pytest.mark.parametrize(
    ("zone", "rows_per_match", "partitions"),
    [("America/New_York", "ALL ROWS PER MATCH", "1"), ("+05:30", "ALL MATCHES", "2")],
)
def test_a_time_column_zoned_other_than_utc_reads_the_local_engines_instants(
    spark: Any, tmp_path: Path, zone: str, rows_per_match: str, partitions: str
) -> None:
    """Times zoned other than UTC (a daylight saving change inside the data; a fixed offset),
    carried by the relation (ALL ROWS PER MATCH) or a measure, in one task and in time slices:
    the local engine's instants, not a schema mismatch."""
    n = 40  # 2024-03-10 07:00 UTC: New York moves its clocks an hour forward
    table = pa.table(
        {"id": np.arange(n), "k": [i % 2 for i in range(n)],
         "ts": pa.array(np.arange(n, dtype=np.int64) * 1000 + 1_710_053_980_000).cast(
             pa.timestamp("ms", zone)),
         "type": ["A" if (i // 2) % 2 == 0 else "B" for i in range(n)]}
    )  # fmt: skip
    pq.write_table(table, tmp_path / "zoned.parquet")
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a_ts, "
        f"B.id AS b {rows_per_match} PATTERN (A B) WITHIN INTERVAL '5' SECOND DEFINE A AS "
        "A.type = 'A', B AS B.type = 'B')"
    )
    want = match_recognize(table, sql)
    got = (
        spark.read.format("dfs_cer")
        .option("query", sql)
        .option("data", str(tmp_path / "zoned.parquet"))
        .option("partitions", partitions)
        .load()
        .toArrow()
    )
    assert want.num_rows >= 10 and pa.types.is_timestamp(got.schema.field("a_ts").type)
    assert _instants(got) == _instants(want)


def test_auto_partitions_cut_only_inputs_worth_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left to the source, a read is cut into the driver's cores, at most one slice per
    ROWS_PER_SLICE rows: a small input stays one task (a slice has a fixed cost)."""
    from dfs_cer.spark import source

    pq.write_table(events(), tmp_path / "events.parquet")
    spec = source.Spec({"query": SPLIT, "data": str(tmp_path / "events.parquet")})
    assert spec.partitions is None and spec.slices() == ([], None)
    monkeypatch.setattr(source, "ROWS_PER_SLICE", 1000)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    pieces, _ = spec.slices()
    assert len(pieces) == 4  # 4,000 rows: four slices of 1,000, under the 8 cores
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert len(spec.slices()[0]) == 2
