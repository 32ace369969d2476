"""MATCH_RECOGNIZE on local Spark: the driver pulls, executors match,
Spark SQL runs the outer query."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize as local_match_recognize
from dfs_cer.config import StorageConfig
from dfs_cer.datasets.synthetic import synthetic_events
from dfs_cer.errors import ConfigError
from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.spark

CER = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts, C.a1 "
    "AS c_a1 ALL MATCHES PATTERN (A B C) WITHIN INTERVAL '2' MINUTE DEFINE A AS A.type = "
    "'T_02', B AS B.type = 'T_15' AND B.a2 = A.a2, C AS C.type = 'T_09' AND C.a1 < 500)"
)
ROWS = (
    "SELECT m.a_ts, m.n FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, "
    "COUNT(N.*) AS n ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) "
    "WITHIN INTERVAL '1' MINUTE DEFINE A AS A.type = 'T_02', B AS B.type = 'T_03' AND B.a1 "
    "> A.a1) AS m WHERE m.n < 40 ORDER BY m.a_ts"
)
PARTITIONED = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY type ORDER BY ts MEASURES MATCH_NUMBER() AS mn, "
    "FIRST(X.ts) AS first_ts, LAST(X.ts) AS last_ts ONE ROW PER MATCH PATTERN (X{3}) "
    "WITHIN INTERVAL '5' MINUTE DEFINE X AS X.a1 < 300) ORDER BY type, mn"
)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from dfs_cer.spark import local_session

    session = local_session(2)
    yield session  # one session per run: getOrCreate hands the same one to every module


@pytest.fixture(scope="module")
def events() -> pa.Table:
    """Synthetic events with distinct timestamps (ORDER BY ts leaves ties in any
    order, in SQL too)."""
    t = synthetic_events(60_000).sort_by("ts")
    ts = t.column("ts").cast(pa.int64()).to_numpy()
    step = np.arange(ts.size)
    distinct = np.maximum.accumulate(ts - step) + step
    return t.set_column(
        t.schema.get_field_index("ts"), "ts", pa.array(distinct).cast(pa.timestamp("ms"))
    )


@pytest.fixture(scope="module")
def data(
    events: pa.Table, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, LocalCluster]]:
    root = tmp_path_factory.mktemp("spark")
    pq.write_table(events, root / "events.parquet")
    shard(str(root / "events.parquet"), 3, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as cluster:
        yield root / "events.parquet", cluster


def rows(table: pa.Table) -> list[str]:
    return sorted(map(str, table.to_pylist()))


@pytest.mark.parametrize(
    "sql", [CER, ROWS, PARTITIONED], ids=["cer", "rowpattern-outer", "partitioned"]
)
def test_spark_equals_the_local_engine(
    spark: Any, events: pa.Table, data: tuple[Path, LocalCluster], sql: str
) -> None:
    from dfs_cer.spark import match_recognize

    path, cluster = data
    expected = local_match_recognize(events, sql)
    assert expected.num_rows > 0
    for strategy in ("dfs", "push_down"):
        df = match_recognize(
            spark,
            sql,
            endpoints=cluster.endpoints,
            token=cluster.token,
            strategy=strategy,
            driver_threshold=0,
            tasks=3,
        )
        got = df.toArrow()
        assert rows(got.cast(expected.schema)) == rows(expected), strategy
        if "ORDER BY m.a_ts" in sql:  # Spark SQL ran the outer ORDER BY
            assert got.column("a_ts").to_pylist() == sorted(got.column("a_ts").to_pylist())
    got = match_recognize(spark, sql, data=str(path), driver_threshold=0, tasks=3).toArrow()
    assert rows(got.cast(expected.schema)) == rows(expected)


def test_several_queries_together(
    spark: Any, events: pa.Table, data: tuple[Path, LocalCluster]
) -> None:
    """recognize_many: one scan and one shared final pull for the three queries; each result
    equals the local engine's."""
    from dfs_cer.spark import recognize_many

    _, cluster = data
    runs = recognize_many(
        spark,
        [CER, ROWS, PARTITIONED],
        endpoints=cluster.endpoints,
        token=cluster.token,
        driver_threshold=0,
        tasks=3,
    )
    for sql, run in zip([CER, ROWS, PARTITIONED], runs, strict=True):
        expected = local_match_recognize(events, sql)
        assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected)
        assert run.trace is not None and any(
            r.action.endswith("(shared)") for r in run.trace.rounds
        )


def test_executors_match_in_several_tasks(
    spark: Any, events: pa.Table, data: tuple[Path, LocalCluster]
) -> None:
    from dfs_cer.spark import match_recognize

    _, cluster = data
    # DFS leaves gaps longer than the window between final intervals: units for several tasks
    df = match_recognize(
        spark,
        CER,
        endpoints=cluster.endpoints,
        token=cluster.token,
        strategy="dfs",
        driver_threshold=0,
        tasks=4,
    )
    sizes = df.rdd.glom().map(len).collect()
    assert len(sizes) >= 3 and sum(1 for s in sizes if s) >= 2, sizes
    assert sum(sizes) == local_match_recognize(events, CER).num_rows
    # PARTITION BY groups are units of their own
    df = match_recognize(
        spark,
        PARTITIONED,
        endpoints=cluster.endpoints,
        token=cluster.token,
        driver_threshold=0,
        tasks=4,
    )
    assert (
        df.rdd.getNumPartitions() >= 1
        and df.count() == local_match_recognize(events, PARTITIONED).num_rows
    )


def test_driver_and_executors_give_the_same_relation(
    spark: Any, data: tuple[Path, LocalCluster]
) -> None:
    """Matching in the driver (small inputs) and on executors yields the same types and rows:
    naive timestamps stay naive (TIMESTAMP_NTZ) both ways."""
    from dfs_cer.spark import recognize

    _, cluster = data
    runs = [
        recognize(
            spark,
            CER,
            endpoints=cluster.endpoints,
            token=cluster.token,
            driver_threshold=threshold,
            tasks=3,
        ).matches.toArrow()
        for threshold in (0, 10**9)
    ]
    assert runs[0].schema == runs[1].schema and runs[0].schema.field("a_ts").type == pa.timestamp(
        "us"
    )
    assert rows(runs[0]) == rows(runs[1]) and runs[0].num_rows > 0


def test_bad_arguments(spark: Any, data: tuple[Path, LocalCluster]) -> None:
    from dfs_cer.spark import match_recognize

    path, cluster = data
    with pytest.raises(ConfigError, match="either endpoints"):
        match_recognize(spark, CER)
    with pytest.raises(ConfigError, match="either endpoints"):
        match_recognize(spark, CER, endpoints=cluster.endpoints, data=str(path))
    with pytest.raises(ConfigError, match="token"):
        match_recognize(spark, CER, endpoints=cluster.endpoints)


def _submit(
    *args: str, extra_env: dict[str, str] | None = None, master: str = "local[2]"
) -> subprocess.CompletedProcess[str]:
    import os

    import pyspark

    venv = Path(sys.executable).parent  # as a user with the venv activated
    env = {
        **os.environ,
        "PATH": f"{venv}:{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        **(extra_env or {}),
    }
    return subprocess.run(
        [str(venv / "spark-submit"), "--master", master, "spark_jobs/run_query.py", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).parents[2],
        env=env,
    )


def test_spark_submit_end_to_end(
    events: pa.Table, data: tuple[Path, LocalCluster], tmp_path: Path
) -> None:
    path, cluster = data
    token = tmp_path / "token"
    token.write_text(cluster.token)
    sql = tmp_path / "q.sql"
    sql.write_text(CER)
    expected = local_match_recognize(events, CER)
    run = _submit(
        "--sql",
        str(sql),
        "--endpoints",
        ",".join(cluster.endpoints),
        "--token-file",
        str(token),
        "--output",
        str(tmp_path / "out"),
        "--driver-threshold",
        "0",
        "--explain-analyze",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{expected.num_rows} matches written" in run.stdout
    got = pq.read_table(tmp_path / "out" / "matches.parquet")
    assert rows(got.cast(expected.schema)) == rows(expected)
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["strategy"] == "dfs" and trace["events_received"] > 0
    assert (
        trace["split"]["chunks"] >= 1 and "executors: " in run.stdout + run.stderr
    )  # who pulled and matched
    # query text on one line, longer than a file name may be: text, not a file name
    run = _submit(
        "--sql",
        " ".join(CER.split()) + " " * 300,
        "--data",
        str(path),
        "--output",
        str(tmp_path / "out2"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    # quiet by default: no line of Spark's INFO/WARN log, from the first one on
    chatter = [
        x
        for x in (run.stdout + run.stderr).splitlines()
        if " INFO " in x or " WARN " in x or "log4j" in x or "Setting default log level" in x
    ]
    assert not chatter, chatter[:5]
    verbose = _submit(
        "--sql", CER, "--data", str(path), "--output", str(tmp_path / "out4"), "--verbose"
    )
    assert verbose.returncode == 0 and " INFO " in verbose.stdout + verbose.stderr
    assert rows(pq.read_table(tmp_path / "out2" / "matches.parquet").cast(expected.schema)) == rows(
        expected
    )
    bad = _submit(
        "--sql", "SELECT nonsense", "--data", str(path), "--output", str(tmp_path / "out3")
    )
    out = bad.stdout + bad.stderr  # spark-submit passes the script's stderr on as stdout
    assert (
        bad.returncode == 2
        and "error: the query has no MATCH_RECOGNIZE clause" in out
        and "Traceback" not in out
    )


#: the one line a successful job may print besides its result: the JVM's own notice of the
#: incubator module Spark 4 asks for (printed before any Spark code runs; no JVM flag hides it)
JVM_NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector"


def test_a_successful_job_on_a_local_cluster_prints_no_error_or_warning(
    events: pa.Table, data: tuple[Path, LocalCluster], tmp_path: Path
) -> None:
    """Executors in their own JVMs end with the job (the session is stopped), not at the JVM's
    shutdown (which printed "Failed to launch executor" traces), and Spark's banner is off."""
    path, _ = data
    run = _submit(
        "--sql", CER, "--data", str(path), "--output", str(tmp_path / "out"),
        "--driver-threshold", "0", master="local-cluster[2,1,1024]",
        extra_env={"PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [x for x in (run.stdout + run.stderr).splitlines() if x.strip() and x != JVM_NOTICE]
    assert lines == [f"{local_match_recognize(events, CER).num_rows} matches written to "
                     f"{tmp_path / 'out'}/matches.parquet"], lines[:10]  # fmt: skip


def test_the_demo_prints_no_spark_banner(tmp_path: Path) -> None:
    """A fresh process (Spark starts in it): the demo's steps and tables, nothing of Spark's."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dfs-cer"), "demo", "--events", "2000", "--data-dir",
         str(tmp_path / "d"), "--strategies", "push_down,dfs"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "Setting default log level" not in out and "setLogLevel" not in out
    noisy = [x for x in out.splitlines() if (" WARN " in x or "ERROR" in x) and x != JVM_NOTICE]
    assert not noisy, noisy[:5]
    assert "DFS moves" in done.stdout


def test_cli_query_through_spark(
    events: pa.Table, data: tuple[Path, LocalCluster], tmp_path: Path
) -> None:
    _, cluster = data
    token = tmp_path / "token"
    token.write_text(cluster.token)
    exe = str(Path(sys.executable).parent / "dfs-cer")
    out = subprocess.run(
        [
            exe,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(token),
            "--engine",
            "spark",
            "--format",
            "json",
            ROWS,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])["matches"]
    expected = local_match_recognize(events, ROWS)
    assert len(got) == expected.num_rows
    assert [m["n"] for m in got] == expected.column("n").to_pylist()  # Spark SQL's ORDER BY a_ts


@pytest.mark.s3
def test_data_in_s3(
    spark: Any, events: pa.Table, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """data=s3://... is read through pyarrow's S3 filesystem (moto's server: a real HTTP endpoint);
    spark-submit reads S3 directly and through storage nodes over S3 shards, and writes to S3."""
    import boto3
    import pyarrow.fs as pafs

    from dfs_cer.errors import StorageError
    from dfs_cer.spark import match_recognize
    from tests.fixtures.s3 import CREDENTIALS, moto_s3

    with moto_s3(monkeypatch) as (host, port):
        boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket="events")
        fs = pafs.S3FileSystem(
            endpoint_override=f"{host}:{port}", scheme="http", region="us-east-1"
        )
        for part, table in enumerate([events.slice(0, 30_000), events.slice(30_000)]):
            with fs.open_output_stream(f"events/spark/part-{part}.parquet") as f:
                pq.write_table(table, f)
        expected = local_match_recognize(events, CER)
        got = match_recognize(
            spark, CER, data="s3://events/spark", driver_threshold=0, tasks=3
        ).toArrow()
        assert rows(got.cast(expected.schema)) == rows(expected)
        # SITUATIONS over the same S3 data (read through pyarrow as well)
        from dfs_cer.situations import match_situations
        from dfs_cer.spark import situations

        sit = (
            "SELECT * FROM t SITUATIONS (PARTITION BY type ORDER BY ts DEFINE A AS a1 > "
            "500, B AS a1 > 300 PATTERN A during B; A starts B WITHIN INTERVAL '1' HOUR "
            "MEASURES count(B.*) AS n)"
        )
        want = match_situations(events, sit)
        assert want.num_rows > 1000
        got_sit = situations(spark, sit, data="s3://events/spark").toArrow()
        assert sorted(got_sit.column("n").to_pylist()) == sorted(want.column("n").to_pylist())
        with pytest.raises(StorageError, match="no parquet files"):
            match_recognize(spark, CER, data="s3://events/nothing-here")
        # spark-submit reads from S3 and writes the matches and the trace back to S3
        env = {**CREDENTIALS, "DFS_CER__STORAGE__S3_ENDPOINT": f"http://{host}:{port}"}
        run = _submit(
            "--sql",
            CER,
            "--data",
            "s3://events/spark",
            "--output",
            "s3://events/results",
            extra_env=env,
        )
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        with fs.open_input_file("events/results/matches.parquet") as f:
            assert rows(pq.read_table(f).cast(expected.schema)) == rows(expected)
        # ... and through three storage nodes serving shards that live in S3
        local = tmp_path / "events.parquet"
        pq.write_table(events, local)
        shard(
            str(local),
            3,
            "s3://events/shards",
            config=StorageConfig(s3_endpoint=f"http://{host}:{port}"),
            name="t",
        )
        token = tmp_path / "token"
        with LocalCluster(
            [f"s3://events/shards/node-{i:02d}" for i in range(3)], env=env
        ) as cluster:
            token.write_text(cluster.token)
            run = _submit(
                "--sql",
                CER,
                "--endpoints",
                ",".join(cluster.endpoints),
                "--token-file",
                str(token),
                "--output",
                "s3://events/results-sn",
                "--driver-threshold",
                "0",
                extra_env=env,
            )
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        with fs.open_input_file("events/results-sn/matches.parquet") as f:
            assert rows(pq.read_table(f).cast(expected.schema)) == rows(expected)
        with fs.open_input_file("events/results-sn/trace.json") as f:
            trace = json.loads(f.read())
        assert trace["strategy"] == "dfs" and 0 < trace["events_received"] < events.num_rows


def test_demo_runs_q1_and_variants_with_every_strategy(spark: Any, tmp_path: Path) -> None:
    """`dfs-cer demo` end to end (in this process, so it shares the test run's SparkSession):
    a CRIMES-shaped sample sharded over three storage nodes, every strategy agreeing."""
    from click.testing import CliRunner

    from dfs_cer.cli.main import cli

    data_dir = str(tmp_path / "demo")
    args = ["--output", "json", "demo", "--events", "40000", "--data-dir", data_dir]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    docs = [json.loads(d) for d in _json_documents(result.stdout)]
    summary = next(
        d for d in docs if d.get("title", "").strip().startswith("bytes, events and seconds")
    )
    runs = summary["rows"]
    # "dfs (fallback)": on 40,000 events DFS may pull the candidates as push-down does (the
    # adaptive model finds a round costs more than they do), and the table says so
    name = {r["strategy"]: r["strategy"].split(" ")[0] for r in runs}
    assert set(name.values()) == {"push_down", "push_pull", "dfs"}
    assert len({r["query"] for r in runs}) == 4
    for query in {r["query"] for r in runs}:
        by = {name[r["strategy"]]: r for r in runs if r["query"] == query}
        assert len({r["matches"] for r in by.values()}) == 1  # the demo itself compares the rows
        assert by["dfs"]["events"] <= by["push_down"]["events"]
        for r in by.values():  # the phases split the seconds
            assert r["rounds"] + r["pull"] + r["matching"] == pytest.approx(r["seconds"], abs=0.03)
    assert sum(r["matches"] for r in runs) > 0
    assert "generated 40,000 CRIMES-shaped events" in result.stderr
    assert "DFS moves" in docs[-1]["message"]
    again = CliRunner().invoke(
        cli, [*args[:2], "demo", "--events", "40000", "--data-dir", data_dir, "--strategies", "dfs"]
    )
    assert again.exit_code == 0 and "reusing 40,000 CRIMES-shaped events" in again.stderr


def _json_documents(text: str) -> list[str]:
    """Split concatenated pretty-printed JSON documents (one per line starting with '{')."""
    docs: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line == "{" and current:
            docs.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        docs.append("\n".join(current))
    return docs


def test_situations_on_spark(spark: Any, tmp_path: Path) -> None:
    """SITUATIONS on Spark: executors derive and match each PARTITION BY group from parquet, or
    the driver gets them from storage nodes (time-partitioned: fragments); both equal the local
    run, with the outer SELECT in Spark SQL."""
    from dfs_cer.datasets.situational import situation_events
    from dfs_cer.situations import match_situations
    from dfs_cer.spark import situations

    events = situation_events(40_000, 4)
    pq.write_table(events, tmp_path / "s.parquet")
    shard(str(tmp_path / "s.parquet"), 2, str(tmp_path / "nodes"), partitioning="time")
    sql = (
        "SELECT m.key, m.A_start, m.avg_v FROM s SITUATIONS (PARTITION BY key ORDER BY ts "
        "DEFINE A AS a, B AS b PATTERN A during B; A overlaps B WITHIN INTERVAL '10' MINUTE "
        "MEASURES avg(A.v) AS avg_v) AS m WHERE m.avg_v > 49 ORDER BY m.key, m.A_start"
    )
    want = match_situations(events, sql)
    assert want.num_rows > 10
    got = situations(spark, sql, data=str(tmp_path / "s.parquet")).toArrow()
    assert got.column("avg_v").to_pylist() == want.column("avg_v").to_pylist()
    with LocalCluster([str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        remote = situations(spark, sql, endpoints=cluster.endpoints, token=cluster.token).toArrow()
    assert remote.column("avg_v").to_pylist() == want.column("avg_v").to_pylist()
    assert remote.column("key").to_pylist() == want.column("key").to_pylist()


@pytest.mark.parametrize(
    "where",
    [
        "EXISTS (SELECT 1 FROM parquet.`{path}`)",
        "m.n IN (SELECT 1 FROM csv.`{path}`)",
        "EXISTS (SELECT 1 FROM default.t)",
        "reflect('java.lang.System', 'exit', 1) = 1",
        "'${{env:HOME}}' = '/root'",
    ],
)
def test_the_outer_query_on_spark_reads_only_the_matches(
    spark: Any, data: tuple[Path, LocalCluster], where: str
) -> None:
    """No SQL on files (parquet.`/path`), other tables or JVM reflection around MATCH_RECOGNIZE."""
    from dfs_cer.errors import DfsCerError
    from dfs_cer.spark import match_recognize

    path, _ = data
    sql = ROWS.replace("WHERE m.n < 40", "WHERE " + where.format(path=path))
    with pytest.raises(DfsCerError, match=r"outer query|cannot parse"):
        match_recognize(spark, sql, data=str(path))


def test_options_that_do_not_apply_to_data_are_refused(
    spark: Any, data: tuple[Path, LocalCluster]
) -> None:
    from dfs_cer.errors import ConfigError
    from dfs_cer.spark import match_recognize

    path, _ = data
    with pytest.raises(ConfigError, match="cost_model applies to storage nodes"):
        match_recognize(spark, CER, data=str(path), cost_model="naive")


NAVIGATING = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, LAST(C.ts) AS "
    "c_ts, PREV(A.a1, 2) AS before_a ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A B+ C) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.type = 'T_04' AND A.a1 <= "
    "300, B AS B.a1 < PREV(B.a1), C AS C.a1 > PREV(C.a1, 2))"
)
NAVIGATING_SKIP = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts ONE ROW PER "
    "MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN INTERVAL '2' MINUTE DEFINE "
    "A AS A.type = 'T_02' AND A.a1 > NEXT(A.a1), B AS B.type = 'T_05' AND B.a1 < PREV(B.a1, 3))"
)


@pytest.mark.parametrize("sql", [NAVIGATING, NAVIGATING_SKIP], ids=["contiguous", "skip"])
def test_prev_next_with_halo_rows_on_executors(
    spark: Any, events: pa.Table, data: tuple[Path, LocalCluster], sql: str
) -> None:
    """PREV/NEXT queries pull halo rows; executors split the pulled rows into time-range tasks and
    each task gets the rows navigation reads across its edges: results equal the local engine."""
    from dfs_cer.spark import recognize

    path, cluster = data
    expected = local_match_recognize(events, sql)
    assert expected.num_rows > 0
    for strategy in ("dfs", "naive_dfs", "push_down"):
        run = recognize(
            spark,
            sql,
            endpoints=cluster.endpoints,
            token=cluster.token,
            strategy=strategy,
            driver_threshold=0,
            tasks=4,
        )
        assert rows(run.matches.toArrow().cast(expected.schema)) == rows(expected), strategy
        assert run.trace is not None and (run.trace.halo_rows > 0 or run.trace.fallback), (
            run.trace and run.trace.to_dict()
        )
        assert "PREV/NEXT" not in (run.trace.fallback or "")
    got = recognize(spark, sql, data=str(path), driver_threshold=0, tasks=4).matches.toArrow()
    assert rows(got.cast(expected.schema)) == rows(expected)


STATEMENTS = [
    "SELECT type, count(*) AS n, max(b_ts) AS last_b FROM t MATCH_RECOGNIZE (PARTITION BY "
    "type ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts ONE ROW PER MATCH AFTER MATCH "
    "SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.a1 < 20, "
    "B AS B.a1 > 980) GROUP BY type ORDER BY type",
    "WITH m AS (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, A.type "
    "AS type ONE ROW PER MATCH PATTERN (A N*? B) WITHIN INTERVAL '1' MINUTE DEFINE A AS "
    "A.type = 'T_02', B AS B.type = 'T_03' AND B.a1 > A.a1)) SELECT label, count(*) AS n "
    "FROM m JOIN labels USING (type) GROUP BY label",
    "SELECT x.a_ts, y.b_ts FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts ONE "
    "ROW PER MATCH PATTERN (A) DEFINE A AS A.a1 < 3) AS x JOIN t MATCH_RECOGNIZE (ORDER BY "
    "ts MEASURES B.ts AS b_ts ONE ROW PER MATCH PATTERN (B) DEFINE B AS B.a1 > 997) AS y ON "
    "y.b_ts > x.a_ts AND y.b_ts < x.a_ts + INTERVAL '30' SECOND",
    # expressions inside the clause: aggregates over expressions, FILTER, DISTINCT, array_agg of
    # CLASSIFIER(), MATCH_NUMBER() in DEFINE, navigation over coalesce/abs
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS n, "
    "array_agg(CLASSIFIER()) AS labels, sum(B.a1 * 2 + 1) AS w, "
    "count(*) FILTER (WHERE a1 > 500) AS big, count(DISTINCT a2) AS d, min_by(ts, "
    "a1) AS low ONE ROW PER MATCH PATTERN (A B+) WITHIN INTERVAL '3' SECOND "
    "DEFINE A AS A.type = 'T_02' AND A.a1 < 100 AND MATCH_NUMBER() < 500, "
    "B AS coalesce(B.a1, 0) > FIRST(A.a1) AND PREV(abs(B.a1 - 500)) < 450)",
    # a row-local subquery: through the storage nodes its condition runs on the nodes
    "SELECT count(*) AS n, min(a_ts) AS first FROM (SELECT * FROM t WHERE a1 < 600 AND ts "
    ">= TIMESTAMP '2034-09-15 14:00:00') MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts "
    "ONE ROW PER MATCH PATTERN (A B) WITHIN INTERVAL '5' SECOND DEFINE A AS A.type = "
    "'T_02', B AS B.type = 'T_03' AND B.a1 > PREV(B.a1))",
    # a CTE input partitioned by an expression: the CTEs stay in front of the computed key
    "WITH f AS (SELECT * FROM t WHERE a1 <= 700) SELECT count(*) AS n, min(a_ts) AS first "
    "FROM f MATCH_RECOGNIZE (PARTITION BY a1 % 2 ORDER BY ts MEASURES A.ts AS a_ts ONE ROW "
    "PER MATCH PATTERN (A B) WITHIN INTERVAL '5' SECOND DEFINE A AS A.type = 'T_02', B AS "
    "B.type = 'T_03')",
]


@pytest.mark.parametrize(
    "sql",
    STATEMENTS,
    ids=["group-by", "cte-join", "two-clauses", "expressions", "input-filter", "cte-keys"],
)
def test_statements_on_spark_equal_the_local_engine(
    spark: Any, events: pa.Table, data: tuple[Path, LocalCluster], sql: str
) -> None:
    """Joins, groups, CTEs and two clauses: each clause from the storage nodes (or data=), the
    statement around them in Spark SQL over fresh temp views, as the embedded engine gives."""
    from dfs_cer.spark import match_recognize, recognize

    path, cluster = data
    labels = pa.table({"type": ["T_02", "T_03"], "label": ["two", "three"]})
    expected = local_match_recognize(events, sql, tables={"labels": labels})
    assert expected.num_rows > 0
    run = recognize(
        spark, sql, endpoints=cluster.endpoints, token=cluster.token, tables={"labels": labels}
    )
    assert rows(run.matches.toArrow()) == rows(expected)
    assert run.trace is not None and run.trace.bytes_to_cn > 0
    if "WHERE a1 < 600" in sql:
        assert run.trace.input_filter is not None and "a1 < 600" in run.trace.input_filter
        assert "outside a MATCH_RECOGNIZE" not in (run.trace.fallback or ""), run.trace.fallback
    via_data = match_recognize(
        spark, sql, data=str(path), tables={"labels": spark.createDataFrame(labels)}
    )
    assert rows(via_data.toArrow()) == rows(expected)
    assert not [
        v
        for v in spark.catalog.listTables()
        if v.name.startswith("dfs_cer_") and v.isTemporary and v.name in ("labels", "t")
    ]


def test_null_ordering_on_spark_follows_trino(spark: Any) -> None:
    """Spark sorts NULLs first ascending by default; the outer ORDER BY follows Trino there too."""
    from dfs_cer.spark import match_recognize

    t = pa.table({"x": [3, None, 1, None, 2], "ts": [1, 2, 3, 4, 5]})
    path = Path(spark.conf.get("spark.local.dir", "/tmp")) / f"nulls-{id(t)}.parquet"
    pq.write_table(t, path)
    q = (
        "SELECT v FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS v ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS true) ORDER BY v"
    )
    for suffix in ("", " DESC", " NULLS FIRST"):
        expected = local_match_recognize(t, q + suffix).column("v").to_pylist()
        got = match_recognize(spark, q + suffix, data=str(path)).toArrow().column("v").to_pylist()
        assert got == expected, suffix
    assert local_match_recognize(t, q).column("v").to_pylist() == [1, 2, 3, None, None]


SCRIPTS = [
    "SELECT TRANSFORM(a) USING 'touch {marker}; cat' AS (x) FROM {view}",
    "select transform(a) using 'touch {marker}; cat' as (x string) from {view}",
    "MAP a USING 'touch {marker}; cat' AS (x) FROM {view}",
    "FROM {view} REDUCE a USING 'touch {marker}; cat' AS (x)",
    "SELECT * FROM {view} LATERAL VIEW explode(array(1)) t AS c",
    "SELECT java_method('java.lang.System', 'getProperty', 'user.name') FROM {view}",
    "SELECT `reflect`('java.lang.System', 'getProperty', 'user.home') FROM {view}",
    "SELECT version(), CURRENT_CATALOG, current_query() FROM {view}",
    "SELECT '${{env:HOME}}' FROM {view}",
]


@pytest.mark.parametrize("sql", SCRIPTS)
def test_spark_sql_runs_only_what_the_sandbox_lists(spark: Any, tmp_path: Path, sql: str) -> None:
    """The statements dfs-cer hands Spark SQL pass the sandbox first: a Hive script transform,
    which this Spark runs without Hive support (the control below), never starts."""
    from dfs_cer.errors import QueryValidationError
    from dfs_cer.spark.session import sandboxed_sql

    view = f"dfs_cer_sandbox_{abs(hash(sql))}"
    spark.createDataFrame([(1,)], "a int").createOrReplaceTempView(view)
    marker = tmp_path / "ran"
    with pytest.raises(QueryValidationError, match="outer query"):
        sandboxed_sql(spark, sql.format(marker=marker, view=view), [view]).collect()
    assert not marker.exists()
    if sql == SCRIPTS[0]:  # the threat is real: unchecked, Spark runs the shell command
        spark.sql(sql.format(marker=marker, view=view)).collect()
        assert marker.exists()
    spark.catalog.dropTempView(view)


def test_spark_session_variables_are_not_readable_around_match_recognize(spark: Any) -> None:
    """Spark resolves a name no column has to a session variable the application declared
    (``secret``, ``session.secret``): the outer query runs in a session of its own, which holds
    only its relations and the caller's settings (no variables of the caller)."""
    from dfs_cer.errors import QueryValidationError
    from dfs_cer.spark.session import sandboxed_sql

    view = "dfs_cer_sandbox_variables"
    spark.createDataFrame([(1,)], "a int").createOrReplaceTempView(view)
    spark.sql("DECLARE OR REPLACE VARIABLE dfs_cer_secret STRING DEFAULT 's3cr3t'")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kathmandu")
    try:
        for sql in (
            f"SELECT dfs_cer_secret FROM {view}",
            f"SELECT session.dfs_cer_secret AS s FROM {view}",
            f"SELECT a FROM {view} WHERE system.session.dfs_cer_secret LIKE 's%'",
        ):
            with pytest.raises(QueryValidationError, match="dfs_cer_secret") as caught:
                sandboxed_sql(spark, sql, [view]).collect()
            assert "s3cr3t" not in str(caught.value)
        # the relations and the caller's settings are
        sql = (
            "SELECT a + 1 AS b, minute(CAST('2020-01-01 00:00:00+00:00' "
            f"AS TIMESTAMP)) AS m FROM {view}"
        )
        got = sandboxed_sql(spark, sql, [view]).collect()
        assert [tuple(r) for r in got] == [(2, 45)]
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        spark.sql("DROP TEMPORARY VARIABLE IF EXISTS dfs_cer_secret")
        spark.catalog.dropTempView(view)


OUTER_CLAUSE = (
    "FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS av ALL ROWS PER MATCH PATTERN (A) "
    "DEFINE A AS A.v >= 0)"
)


def _small(tmp_path: Path) -> str:
    pq.write_table(
        pa.table({"ts": np.arange(100), "v": np.arange(100) % 7}), tmp_path / "t.parquet"
    )
    return str(tmp_path / "t.parquet")


@pytest.mark.timeout(200)
def test_the_sql_around_the_clause_stops_at_the_deadline_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    """A CTE over the matches cross-joined six times (10^12 rows to count) ran until killed: its
    Spark jobs are cancelled at the query's deadline (the timeout option), one clear error."""
    from dfs_cer.errors import OuterQueryLimitError
    from dfs_cer.spark import recognize

    sql = (
        f"WITH m AS (SELECT * {OUTER_CLAUSE}) SELECT count(*) AS n FROM m a, m b, m c, m d, m e, "
        "m f"
    )
    with pytest.raises(OuterQueryLimitError, match="ran past the query's deadline on Spark"):
        recognize(spark, sql, data=_small(tmp_path), timeout=3)


def test_a_huge_string_around_the_clause_fails_before_spark_builds_it(
    spark: Any, tmp_path: Path
) -> None:
    """``lpad('', 2000000000, 'x')``: Spark folds it on the driver, 2 GB in a 2 GB heap, outside
    any job a deadline could cancel; the guard stops it at once."""
    from dfs_cer.errors import OuterQueryLimitError
    from dfs_cer.spark import recognize

    sql = f"SELECT lpad('', 2000000000, 'x') AS s {OUTER_CLAUSE}"
    with pytest.raises(OuterQueryLimitError, match=r"lpad\(\) would build a string longer than"):
        recognize(spark, sql, data=_small(tmp_path))
