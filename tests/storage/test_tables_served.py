"""Storage nodes serving tables in place (an Iceberg table on a real pyiceberg SQL catalog, local
and in moto's S3; a Hive-style prefix): every strategy equals the local engine over the same
rows, a query pins one snapshot, appends as snapshots give the late-files path's changelogs,
and bad input is one clear error while the nodes keep serving."""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.types import LongType

from dfs_cer import match_recognize
from dfs_cer.config import StorageConfig, TablesConfig
from dfs_cer.errors import DfsCerError, StorageError
from dfs_cer.io.tables import load_catalog
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster
from tests.fixtures.limecep import ARRIVALS, late_batch, replay, sql, stream, summary_of
from tests.fixtures.tables import random_events, rows

pytestmark = pytest.mark.flight

QUERIES = [
    # contiguous, SKIP PAST LAST ROW, a join between variables
    "SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a_ts, LAST(B.ts) AS "
    "b_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) WITHIN INTERVAL '3' "
    "MINUTE DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v = A.v, C AS C.type = 'C')",
    # PREV/NEXT (halo rows) and PARTITION BY
    "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY v ORDER BY ts MEASURES FIRST(A.ts) AS "
    "a_ts, COUNT(*) AS n ALL ROWS PER MATCH PATTERN (A B) WITHIN INTERVAL '10' MINUTE "
    "DEFINE A AS A.type = 'A' AND PREV(A.w) < A.w, B AS B.type IN ('B', 'C'))",
    # ALL MATCHES with skipped events in between
    "SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a_ts, FIRST(D.ts) "
    "AS d_ts ALL MATCHES PATTERN (A D) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.type = 'A' "
    "AND A.w > 50, D AS D.type = 'D')",
]


def events_us() -> pa.Table:
    ev = random_events()
    return ev.cast(
        pa.schema([pa.field("ts", pa.timestamp("us")) if f.name == "ts" else f for f in ev.schema])
    )


def config(root: Path, warehouse: str | None = None) -> tuple[TablesConfig, dict[str, str]]:
    tables = TablesConfig(
        catalog_uri=f"sqlite:///{root}/catalog.db",
        warehouse=warehouse or str(root / "wh"),
        assignments_dir=str(root / "assignments"),
    )
    env = {
        "DFS_CER__TABLES__CATALOG_URI": tables.catalog_uri,
        "DFS_CER__TABLES__WAREHOUSE": tables.warehouse,
        "DFS_CER__TABLES__ASSIGNMENTS_DIR": tables.assignments_dir,
    }
    return tables, env


def new_table(
    tables: TablesConfig,
    schema: pa.Schema,
    name: str = "logs.events",
    storage: StorageConfig | None = None,
) -> object:
    catalog = load_catalog("local", tables, storage)
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    return catalog.create_table(name, schema=schema)


def refs(name: str, nodes: int, extra: str = "") -> list[str]:
    return [f"iceberg://local/{name}?node={i}/{nodes}{extra}" for i in range(nodes)]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[pa.Table, LocalCluster, object]]:
    root = tmp_path_factory.mktemp("iceberg")
    tables, env = config(root)
    ev = events_us()
    table = new_table(tables, ev.schema)
    for k in np.random.default_rng(5).permutation(5):  # appends (snapshots) out of time order
        table.append(ev.slice(int(k) * 500, 500))  # type: ignore[attr-defined]
    with LocalCluster(refs("logs.events", 3), env=env) as cluster:
        yield ev, cluster, table


@pytest.mark.parametrize("query", QUERIES)
def test_every_strategy_over_an_iceberg_table_equals_the_local_engine(
    served: tuple[pa.Table, LocalCluster, object], query: str
) -> None:
    ev, cluster, table = served
    expected = rows(match_recognize(ev, query))
    assert expected
    current = table.current_snapshot().snapshot_id  # type: ignore[attr-defined]
    for name in STRATEGIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pull(name, query, cluster.endpoints, cluster.token)
        assert rows(match_pulled(result)) == expected, (name, query)
        assert result.trace.snapshot == current


def test_a_query_pins_one_snapshot_and_older_ones_stay_readable(tmp_path: Path) -> None:
    tables, env = config(tmp_path)
    ev = events_us()
    table = new_table(tables, ev.schema)
    table.append(ev.slice(0, 1500))  # type: ignore[attr-defined]
    first = table.current_snapshot().snapshot_id  # type: ignore[attr-defined]
    query = QUERIES[0]
    with LocalCluster(refs("logs.events", 2), env=env) as cluster:
        before = pull("dfs", query, cluster.endpoints, cluster.token)
        assert rows(match_pulled(before)) == rows(match_recognize(ev.slice(0, 1500), query))
        table.append(ev.slice(1500))  # type: ignore[attr-defined]  # late data: a new snapshot
        after = pull("dfs", query, cluster.endpoints, cluster.token)
        assert after.trace.snapshot != first
        assert rows(match_pulled(after)) == rows(match_recognize(ev, query))
        travel = pull("dfs", query, cluster.endpoints, cluster.token, snapshot=first)  # time travel
        assert travel.trace.snapshot == first and rows(match_pulled(travel)) == rows(
            match_pulled(before)
        )
        from dfs_cer.strategies.multi import pull_many

        group = pull_many(
            "dfs", [query, QUERIES[2]], cluster.endpoints, cluster.token, snapshot=first
        )
        assert [rows(match_pulled(r)) for r in group.results] == [
            rows(match_recognize(ev.slice(0, 1500), q)) for q in (query, QUERIES[2])
        ]
        with pytest.raises(DfsCerError, match="has no snapshot 77"):
            pull("dfs", query, cluster.endpoints, cluster.token, snapshot=77)
        assert rows(
            match_pulled(pull("pull_all", query, cluster.endpoints, cluster.token))
        ) == rows(match_recognize(ev, query))  # the nodes kept serving


def test_snapshots_as_late_data_give_the_late_files_changelogs(tmp_path: Path) -> None:
    """LimeCEP's L2 replay with each late batch appended to an Iceberg table as a snapshot: the
    same changelogs as appending shard files (tests/strategies/test_hygiene.py)."""
    from dfs_cer.strategies.incremental import run_and_save

    tables, env = config(tmp_path)
    query = sql("A B+ C").replace("FROM t ", "FROM events ")  # the table's name
    opts = {"selection": "skip_till_next_match", "kleene": "maximal", "cost_model": "always_on"}
    runs = tmp_path / "runs"
    table = new_table(tables, late_batch(ARRIVALS[0]).schema)
    table.append(late_batch(ARRIVALS[0]))  # type: ignore[attr-defined]
    with LocalCluster(refs("logs.events", 2), env=env) as cluster:
        run = run_and_save(
            query, cluster.endpoints, cluster.token, strategy="dfs", runs_dir=runs, **opts
        )
        assert run.matches.num_rows == 0 and run.record.snapshot is not None
        run, changes = replay(cluster, runs, run, lambda _, batch: table.append(batch))  # type: ignore[attr-defined]
        assert changes == [{"new": 5}, {"new": 2}, {"invalidated": 2, "new": 3}, {"updated": 1}]
        final = match_recognize(stream(), query, selection="skip_till_next_match", kleene="maximal")
        assert summary_of(run.matches) == summary_of(final) and run.matches.num_rows == 8
        again = run_and_save(
            "", cluster.endpoints, cluster.token, runs_dir=runs, since_run=run.record.run_id
        )
        assert again.changes is not None and again.changes.num_rows == 0
        # a snapshot that removes events (copy-on-write delete: files removed and rewritten)
        from pyiceberg.expressions import EqualTo

        # pydantic's synthesized __init__ hides EqualTo's (term, literal) one from mypy
        table.delete(EqualTo("id", "b12"))  # type: ignore[attr-defined, call-arg, arg-type]
        gone = run_and_save(
            "", cluster.endpoints, cluster.token, runs_dir=runs, since_run=again.record.run_id
        )
        assert gone.record.mode == "incremental" and gone.changes is not None
        without = match_recognize(
            stream().filter(pa.compute.not_equal(stream().column("id"), "b12")),
            query,
            selection="skip_till_next_match",
            kleene="maximal",
        )
        assert summary_of(gone.matches) == summary_of(without)
        assert "updated" in gone.changes.column("change").to_pylist()  # a9's match loses b12


def test_a_hive_prefix_is_served_in_place(tmp_path: Path) -> None:
    ev = random_events()
    day = (ev.column("ts").cast(pa.int64()).to_numpy() // (6 * 3_600_000)).astype(
        int
    )  # 6-hour "days"
    for d in np.unique(day):
        folder = tmp_path / "events" / f"bucket={d}"
        folder.mkdir(parents=True)
        part = ev.filter(pa.array(day == d))
        perm = np.random.default_rng(int(d)).permutation(part.num_rows)
        pq.write_table(
            part.take(pa.array(perm)), folder / "part-0.parquet"
        )  # unsorted: sorted on load
    query = QUERIES[0]
    expected = rows(match_recognize(ev, query))
    with LocalCluster(
        [f"hive:{tmp_path / 'events'}?node={i}/2" for i in range(2)],
        env={"DFS_CER__TABLES__ASSIGNMENTS_DIR": str(tmp_path / "assign")},
    ) as cluster:
        for name in ("pull_all", "push_down", "dfs"):
            result = pull(name, query, cluster.endpoints, cluster.token)
            assert rows(match_pulled(result)) == expected, name
            assert result.trace.snapshot is None


def test_files_read_per_query_skip_what_the_time_ranges_exclude(tmp_path: Path) -> None:
    """With the share too big for the cache, each query reads files from storage: a query
    limited to time ranges reads only the files whose column metrics meet them."""
    from dfs_cer.transport.client import StorageClient

    tables, env = config(tmp_path)
    ev = events_us()
    table = new_table(tables, ev.schema)
    for k in range(5):
        table.append(ev.slice(k * 500, 500))  # type: ignore[attr-defined]
    lo = int(ev.column("ts").cast(pa.int64())[600].as_py())
    query = QUERIES[2]

    def read(cluster: LocalCluster) -> int:
        c = StorageClient(cluster.endpoints[0], cluster.token)
        try:
            return int(c.action("stats", {})[0]["files_read"])
        finally:
            c.close()

    with LocalCluster(
        refs("logs.events", 1), env={**env, "DFS_CER__STORAGE__CACHE_BYTES": "0"}
    ) as cluster:
        start = read(cluster)
        full = pull("dfs", query, cluster.endpoints, cluster.token)
        after_full = read(cluster)
        ranged = pull(
            "dfs", query, cluster.endpoints, cluster.token, time_ranges=[(lo, lo + 120 * 10**6)]
        )
        assert after_full - start >= 5 and read(cluster) - after_full < after_full - start
        assert rows(match_pulled(full)) == rows(match_recognize(ev, query))
        inside = ev.filter(
            pa.compute.and_(
                pa.compute.greater_equal(ev.column("ts").cast(pa.int64()), lo),
                pa.compute.less_equal(ev.column("ts").cast(pa.int64()), lo + 120 * 10**6),
            )
        )
        assert rows(match_pulled(ranged)) == rows(match_recognize(inside, query))
        # an input filter bounding the time (FROM (SELECT * FROM t WHERE ts >= ...)) prunes too
        cut = ev.column("ts")[2100].as_py()
        before = read(cluster)
        filtered = pull(
            "dfs",
            query,
            cluster.endpoints,
            cluster.token,
            input_filter=f"ts >= TIMESTAMP '{cut.isoformat(sep=' ')}' AND w > 5",
        )
        assert read(cluster) - before == 1  # the last of five files (rows 2000-2499)
        late = ev.filter(
            pa.compute.and_(
                pa.compute.greater_equal(ev.column("ts"), pa.scalar(cut, ev.column("ts").type)),
                pa.compute.greater(ev.column("w"), 5),
            )
        )
        assert rows(match_pulled(filtered)) == rows(match_recognize(late, query))


def test_bad_tables_fail_clearly_and_nodes_keep_serving(tmp_path: Path) -> None:
    tables, env = config(tmp_path)
    ev = events_us()
    table = new_table(tables, ev.schema)
    table.append(ev)  # type: ignore[attr-defined]
    # a missing table: the node does not start, and says why
    with pytest.raises(StorageError, match=r"no Iceberg table logs.missing in catalog 'local'"):
        LocalCluster(refs("logs.missing", 1), env=env).start()
    # a query over columns the table lacks; a data file removed while the node serves (no cache)
    with LocalCluster(
        refs("logs.events", 1), env={**env, "DFS_CER__STORAGE__CACHE_BYTES": "0"}
    ) as cluster:
        with pytest.raises(DfsCerError, match="speed"):
            pull(
                "dfs",
                QUERIES[0].replace("B.v = A.v", "B.speed > 3"),
                cluster.endpoints,
                cluster.token,
            )
        data = next(Path(tmp_path / "wh").rglob("*.parquet"))
        moved = data.with_suffix(".moved")
        data.rename(moved)
        with pytest.raises(
            DfsCerError,
            match=f"data file {data} of table iceberg://local/logs.events at snapshot .* is gone",
        ):
            pull("dfs", QUERIES[0], cluster.endpoints, cluster.token)
        moved.rename(data)
        assert rows(
            match_pulled(pull("dfs", QUERIES[0], cluster.endpoints, cluster.token))
        ) == rows(match_recognize(ev, QUERIES[0]))


@pytest.mark.s3
def test_an_iceberg_table_in_s3_is_served_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from tests.fixtures.s3 import moto_s3

    with moto_s3(monkeypatch) as (host, port):
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="lake")
        tables, env = config(tmp_path, warehouse="s3://lake/warehouse")
        storage = StorageConfig(s3_endpoint=endpoint)
        ev = events_us()
        table = new_table(tables, ev.schema, storage=storage)
        for k in (1, 0, 2):
            table.append(ev.slice(k * 1000, 1000))  # type: ignore[attr-defined]
        assert table.location().startswith("s3://lake/warehouse")  # type: ignore[attr-defined]
        env = {
            **env,
            **{k: os.environ[k] for k in os.environ if k.startswith(("AWS_", "DFS_CER__STORAGE"))},
        }
        with LocalCluster(refs("logs.events", 2), env=env) as cluster:
            for name in ("push_down", "dfs"):
                result = pull(name, QUERIES[0], cluster.endpoints, cluster.token)
                assert rows(match_pulled(result)) == rows(match_recognize(ev, QUERIES[0])), name


def test_a_snapshot_header_is_validated_and_never_reaches_a_path(tmp_path: Path) -> None:
    from dfs_cer.io.shard import shard
    from dfs_cer.transport.client import StorageClient

    tables, env = config(tmp_path)
    ev = events_us()
    new_table(tables, ev.schema).append(ev)  # type: ignore[attr-defined]
    pq.write_table(ev, tmp_path / "ev.parquet")
    shard(str(tmp_path / "ev.parquet"), 1, str(tmp_path / "shards"), name="events")
    with LocalCluster(
        [*refs("logs.events", 1), str(tmp_path / "shards" / "node-00")], env=env
    ) as cluster:
        for endpoint, bad, says in [
            (cluster.endpoints[0], "../etc", "snapshot must be an Iceberg snapshot id"),
            (cluster.endpoints[0], True, "snapshot must be an Iceberg snapshot id"),
            (cluster.endpoints[0], 2**70, "snapshot must be an Iceberg snapshot id"),
            (cluster.endpoints[1], 1, "serves the shard set .* which has no snapshots"),
        ]:
            c = StorageClient(endpoint, cluster.token)
            try:
                with pytest.raises(DfsCerError, match=says):
                    c.action("open", {"query_id": "q" * 32, "sql": QUERIES[0], "snapshot": bad})
                with pytest.raises(DfsCerError, match=says):
                    c.action("files", {"snapshot": bad})
            finally:
                c.close()
        for endpoint in cluster.endpoints:  # both kept serving
            assert rows(match_pulled(pull("dfs", QUERIES[0], [endpoint], cluster.token))) == rows(
                match_recognize(ev, QUERIES[0])
            )


def test_a_commit_does_not_fail_the_queries_running_on_the_snapshot_before_it(
    tmp_path: Path,
) -> None:
    """A query pinned to a new snapshot is told by a node that still serves queries on the old
    one to come back; the compute node tries again until they finish (they are not failed by
    the switch), then reads the new one."""
    import threading

    from dfs_cer.transport.client import StorageClient

    tables, env = config(tmp_path)
    ev = events_us()
    table = new_table(tables, ev.schema)
    table.append(ev.slice(0, 1500))  # type: ignore[attr-defined]
    query = QUERIES[0]
    with LocalCluster(refs("logs.events", 1), env=env) as cluster:
        old = StorageClient(cluster.endpoints[0], cluster.token)
        qid = "a" * 32
        old.action("open", {"query_id": qid, "sql": query})  # running on the first snapshot
        table.append(ev.slice(1500))  # type: ignore[attr-defined]
        done: list[object] = []
        late = threading.Thread(
            target=lambda: done.append(pull("dfs", query, cluster.endpoints, cluster.token))
        )
        late.start()
        late.join(0.5)
        assert not done  # waiting for the old query
        assert (
            old.pull({"query_id": qid, "kind": "pull_all"}).num_rows == 1500
        )  # not failed by the commit
        old.action("close", {"query_id": qid})
        old.close()
        late.join(30)
        result = done[0]
        assert rows(match_pulled(result)) == rows(match_recognize(ev, query))  # type: ignore[arg-type]


def test_time_travel_next_to_current_queries_is_exact(tmp_path: Path) -> None:
    """Queries on two snapshots at once on one node: each reads the snapshot it asked for (the
    node holds one at a time; the others come back when it is free)."""
    import threading

    tables, env = config(tmp_path)
    ev = events_us()
    table = new_table(tables, ev.schema)
    table.append(ev.slice(0, 1200))  # type: ignore[attr-defined]
    first = table.current_snapshot().snapshot_id  # type: ignore[attr-defined]
    table.append(ev.slice(1200))  # type: ignore[attr-defined]
    query = QUERIES[0]
    want = {
        first: rows(match_recognize(ev.slice(0, 1200), query)),
        None: rows(match_recognize(ev, query)),
    }
    got: list[bool] = []
    with LocalCluster(refs("logs.events", 2), env=env) as cluster:

        def run(snapshot: int | None) -> None:
            for _ in range(5):
                result = pull("dfs", query, cluster.endpoints, cluster.token, snapshot=snapshot)
                got.append(rows(match_pulled(result)) == want[snapshot])

        def run_many(snapshot: int | None) -> None:
            from dfs_cer.strategies.multi import pull_many

            for _ in range(5):
                group = pull_many(
                    "dfs", [query, query], cluster.endpoints, cluster.token, snapshot=snapshot
                )
                got.append(all(rows(match_pulled(r)) == want[snapshot] for r in group.results))

        threads = [
            threading.Thread(target=run, args=(first,)),
            threading.Thread(target=run, args=(None,)),
            threading.Thread(target=run_many, args=(first,)),
            threading.Thread(target=run_many, args=(None,)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert got == [True] * 20


def test_a_hive_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    ev = random_events()
    folder = tmp_path / "events" / "day=1"
    folder.mkdir(parents=True)
    pq.write_table(ev.slice(0, 1500), folder / "part-0.parquet")
    query = QUERIES[0]
    with LocalCluster(
        [f"hive:{tmp_path / 'events'}"],
        env={"DFS_CER__TABLES__ASSIGNMENTS_DIR": str(tmp_path / "a")},
    ) as cluster:
        assert rows(match_pulled(pull("dfs", query, cluster.endpoints, cluster.token))) == rows(
            match_recognize(ev.slice(0, 1500), query)
        )
        pq.write_table(ev, folder / "part-0.parquet")  # the same name, more rows
        os.utime(folder / "part-0.parquet", ns=(2 * 10**18, 2 * 10**18))
        assert rows(match_pulled(pull("dfs", query, cluster.endpoints, cluster.token))) == rows(
            match_recognize(ev, query)
        )


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 60),
    st.integers(0, 20),
    st.sampled_from(["<", "<=", ">", ">=", "between", "not between"]),
    st.integers(-5, 90),
    st.integers(0, 30),
    st.booleans(),
)
def test_input_filter_pruning_never_skips_a_file_with_a_passing_row(
    first: int, span: int, op: str, x: int, width: int, flipped: bool
) -> None:
    """A file of times [first, first + span] is skipped only when no time in it passes."""
    from dfs_cer.query.input_filter import parse_input_filter
    from storage_node.tables import may_hold, time_tests

    def lit(v: int) -> str:
        return (
            f"TIMESTAMP '{(dt.datetime(2026, 1, 1) + dt.timedelta(seconds=v)).isoformat(sep=' ')}'"
        )

    if op == "between":
        text = f"ts BETWEEN {lit(x)} AND {lit(x + width)}"
    elif op == "not between":
        text = f"ts NOT BETWEEN {lit(x)} AND {lit(x + width)}"
    else:
        text = (
            f"{lit(x)} {dict(zip('<>', '><', strict=True)).get(op[0], op[0])}{op[1:]} ts"
            if flipped
            else f"ts {op} {lit(x)}"
        )
    schema = pa.schema([pa.field("ts", pa.timestamp("us")), pa.field("w", pa.int64())])
    condition = parse_input_filter(f"{text} AND w > 0")
    base = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()) * 10**6
    times = pa.array([base + s * 10**6 for s in range(first, first + span + 1)], pa.int64()).cast(
        pa.timestamp("us")
    )
    from dfs_cer.query.input_filter import input_filter_expression

    exact = (
        pa.dataset.dataset(pa.table({"ts": times, "w": [1] * len(times)}))
        .to_table(filter=input_filter_expression(condition, schema))
        .num_rows
        > 0
    )
    kept = may_hold(
        time_tests(condition, schema, "ts"),
        base + first * 10**6,
        base + (first + span) * 10**6,
        "ts",
        pa.timestamp("us"),
    )
    assert kept or not exact, text


def test_a_schema_change_without_a_snapshot_is_served_at_once(tmp_path: Path) -> None:
    """pyiceberg's update_schema (rename, add column) commits new metadata, no snapshot: the
    nodes serve the current schema at the next query, as pyiceberg, Spark and Trino read it."""
    tables, env = config(tmp_path)
    ev = events_us()
    table = new_table(tables, ev.schema)
    table.append(ev)  # type: ignore[attr-defined]
    snapshot = table.current_snapshot().snapshot_id  # type: ignore[attr-defined]
    query = QUERIES[0]
    with LocalCluster(refs("logs.events", 2), env=env) as cluster:
        assert rows(match_pulled(pull("dfs", query, cluster.endpoints, cluster.token))) == rows(
            match_recognize(ev, query)
        )
        with table.update_schema() as update:  # type: ignore[attr-defined]
            update.rename_column("v", "k")
            update.add_column("extra", LongType())
        assert table.current_snapshot().snapshot_id == snapshot  # type: ignore[attr-defined]
        now = ev.rename_columns(["k" if c == "v" else c for c in ev.column_names]).append_column(
            "extra", pa.array([None] * ev.num_rows, pa.int64())
        )
        renamed = query.replace("B.v = A.v", "B.k = A.k AND B.extra IS NULL")
        expected = rows(match_recognize(now, renamed))
        assert expected
        for name in STRATEGIES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = pull(name, renamed, cluster.endpoints, cluster.token)
            assert rows(match_pulled(result)) == expected, name
            assert result.trace.snapshot == snapshot
        with pytest.raises(DfsCerError, match="v"):  # the old name is gone, as in pyiceberg
            pull("dfs", query, cluster.endpoints, cluster.token)
