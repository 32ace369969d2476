"""Tables read in place: references, Iceberg planning (snapshots, metrics pruning, schema
evolution by field id), Hive-style prefixes (partition pruning by date), the file-to-node
assignment, and their errors. A real pyiceberg SQL catalog on sqlite."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.config import TablesConfig
from dfs_cer.io.tables import (
    TableError,
    TableInput,
    append_iceberg,
    load_catalog,
    node_share,
    parse_table,
    plan_table,
    read_data_file,
    read_table,
)
from dfs_cer.plan.assign import Assignment, FileStats, assign

DAY_US = 86_400 * 10**6
EPOCH = 1_767_225_600 * 10**6  # 2026-01-01 UTC, microseconds


def events(n: int, start: int = 0, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = EPOCH + (start + np.arange(n)) * 10**6
    return pa.table(
        {
            "ts": pa.array(ts.astype("datetime64[us]")),
            "type": pa.array(rng.choice(list("ABCN"), n)),
            "v": pa.array(rng.integers(0, 100, n)),
        }
    )


@pytest.fixture
def tables(tmp_path: Path) -> TablesConfig:
    return TablesConfig(
        catalog_uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=str(tmp_path / "warehouse"),
        assignments_dir=str(tmp_path / "assignments"),
    )


def iceberg(tables: TablesConfig, batches: list[pa.Table], name: str = "logs.events") -> object:
    catalog = load_catalog("local", tables)
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    table = catalog.create_table(name, schema=batches[0].schema)
    for b in batches:
        table.append(b)
    return table


def all_rows(plan: object) -> pa.Table:
    return pa.concat_tables(list(read_table(plan))).sort_by("ts")  # type: ignore[arg-type]


# ------------------------------------------------------------------ references


def test_references_parse_and_print_back() -> None:
    ref = parse_table("iceberg://prod/db.logs.events?snapshot=42&time=event_time&node=1/4&by=hash")
    assert (
        ref.catalog,
        ref.identifier,
        ref.snapshot,
        ref.time_column,
        ref.node,
        ref.nodes,
        ref.by,
    ) == ("prod", "db.logs.events", 42, "event_time", 1, 4, "hash")
    assert parse_table(ref.text()) == ref
    hive = parse_table("hive:s3://bucket/events?date=day")
    assert (hive.kind, hive.path, hive.date_key) == ("hive", "s3://bucket/events", "day")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("iceberg://local/events", "NAMESPACE.TABLE"),
        ("iceberg://local/db.events?snapshot=latest", "not an integer"),
        ("iceberg://local/db.events?node=3/3", "0 <= I < N"),
        ("iceberg://local/db.events?path=/etc", "unknown table option 'path'"),
        ("iceberg://local/db.events?by=random", "use one of time, hash"),
        ("hive:/data?snapshot=1", "applies to Iceberg tables"),
        ("hive:", "names no path"),
    ],
)
def test_bad_references_say_what_to_write(text: str, says: str) -> None:
    with pytest.raises(TableError, match=says):
        parse_table(text)


# ------------------------------------------------------------------ assignment


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 5000)), min_size=1, max_size=40),
    st.integers(1, 6),
    st.lists(st.integers(0, 2 * 10**6), max_size=10),
)
def test_time_assignment_is_contiguous_balanced_and_stable(
    spans: list[tuple[int, int]], nodes: int, later: list[int]
) -> None:
    files = [FileStats(f"f{i}", rows, lo, lo + 100) for i, (lo, rows) in enumerate(spans)]
    made = assign(files, nodes, "time")
    assert len(made.bounds) == nodes - 1 and made.bounds == sorted(made.bounds)
    # contiguous: a node's files come after every file of a lower node (by first time)
    order = sorted(files, key=lambda f: (f.min_ts, f.path))
    owners = [made.node_of(f) for f in order]
    assert owners == sorted(owners)
    # balanced: no node holds more than its share plus the largest file
    per = np.bincount(owners, weights=[f.rows for f in order], minlength=nodes)
    assert per.max() <= sum(f.rows for f in files) / nodes + max(f.rows for f in files) + 1
    # written once: the same answers after a round trip through JSON; a new file follows the bounds
    again = Assignment.from_dict(json.loads(json.dumps(made.to_dict())))
    assert [again.node_of(f) for f in files] == [made.node_of(f) for f in files]
    for t in later:
        k = again.node_of(FileStats(f"new-{t}", 10, t, t + 5))
        assert (
            0 <= k < nodes
            and (k == 0 or again.bounds[k - 1] <= t)
            and (k == nodes - 1 or t < again.bounds[k])
        )


def test_hash_assignment_and_files_without_statistics() -> None:
    files = [
        FileStats(f"s3://b/f{i}", 10, None if i % 2 else i, None if i % 2 else i) for i in range(20)
    ]
    for mode in ("time", "hash"):
        made = assign(files, 3, mode)
        assert {made.node_of(f) for f in files} <= {0, 1, 2}
        assert made.node_of(FileStats("s3://b/x", 1, None, None)) == assign([], 3, "hash").node_of(
            FileStats("s3://b/x", 1, None, None)
        )


# ------------------------------------------------------------------ Iceberg


def test_iceberg_snapshots_metrics_pruning_and_node_shares(tables: TablesConfig) -> None:
    batches = [events(500, start=k * 500, seed=k) for k in range(4)]
    table = iceberg(
        tables, [batches[2], batches[0], batches[3], batches[1]]
    )  # files out of time order
    snaps = [s.snapshot_id for s in table.snapshots()]  # type: ignore[attr-defined]
    plan = plan_table("iceberg://local/logs.events", tables=tables)
    assert plan.snapshot == snaps[-1] and len(plan.files) == 4 and plan.rows == 2000
    assert [f.min_ts for f in plan.files] == [
        EPOCH + k * 500 * 10**6 for k in range(4)
    ]  # from column metrics
    assert all_rows(plan).equals(pa.concat_tables(batches).cast(plan.schema))
    # an older snapshot: only the first append
    first = plan_table("iceberg://local/logs.events", tables=tables, snapshot=snaps[0])
    assert first.rows == 500 and all_rows(first).equals(batches[2].cast(first.schema))
    # pruning by the query's time range: one file's events, the others skipped by their metrics
    lo = EPOCH + 600 * 10**6
    pruned = plan_table(
        "iceberg://local/logs.events", tables=tables, time_ranges=[(lo, lo + 10 * 10**6)]
    )
    assert len(pruned.files) == 1 and pruned.pruned_files == 3 and pruned.pruned_bytes > 0
    # three nodes: each file on exactly one node, contiguous time ranges, the same split every time
    shares = [
        node_share(plan_table(f"iceberg://local/logs.events?node={k}/3", tables=tables), tables)
        for k in range(3)
    ]
    paths = [f.path for s in shares for f in s.files]
    assert sorted(paths) == sorted(f.path for f in plan.files)
    assert [
        max(f.max_ts for f in s.files) < min(f.min_ts for f in t.files)  # type: ignore[type-var, operator]
        for s, t in itertools.pairwise(shares)
        if s.files and t.files
    ] == [True] * 2
    again = node_share(plan_table("iceberg://local/logs.events?node=0/3", tables=tables), tables)
    assert [f.path for f in again.files] == [f.path for f in shares[0].files]
    assert len(list(Path(tables.assignments_dir).glob("*.json"))) == 1  # written once


def test_schema_evolution_is_resolved_by_field_ids(tables: TablesConfig) -> None:
    from pyiceberg.types import StringType

    old = events(300)
    table = iceberg(tables, [old])
    with table.update_schema() as update:  # type: ignore[attr-defined]
        update.rename_column("v", "value")
        update.add_column("site", StringType())
    new = pa.table(
        {
            "ts": pa.array((EPOCH + (300 + np.arange(5)) * 10**6).astype("datetime64[us]")),
            "type": ["A"] * 5,
            "value": pa.array(range(5), pa.int64()),
            "site": ["x"] * 5,
        }
    )
    table.append(new)  # type: ignore[attr-defined]
    plan = plan_table("iceberg://local/logs.events", tables=tables)
    assert plan.schema.names == ["ts", "type", "value", "site"]
    rows = all_rows(plan)
    assert rows.column("value").to_pylist() == [
        *old.column("v").to_pylist(),
        *range(5),
    ]  # renamed: data kept
    assert rows.column("site").to_pylist() == [None] * 300 + ["x"] * 5  # added: NULL in older files
    only = read_data_file(plan, plan.files[0], ["value"])
    assert only.schema.names == ["value"] and only.num_rows == 300


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        (
            "iceberg://local/logs.nope",
            "no Iceberg table logs.nope in catalog 'local'; tables in logs: logs.events",
        ),
        ("iceberg://local/logs.events?snapshot=12345", "has no snapshot 12345; recent snapshots"),
        ("iceberg://elsewhere/logs.events", "no Iceberg catalog named 'elsewhere' is configured"),
        (
            "iceberg://local/logs.events?time=when",
            "has no time column 'when'; its columns: ts, type, v",
        ),
    ],
)
def test_iceberg_errors_name_the_table_and_the_fix(
    tables: TablesConfig, ref: str, says: str
) -> None:
    iceberg(tables, [events(10)])
    with pytest.raises(TableError, match=says):
        plan_table(ref, tables=tables)


def test_an_unreachable_catalog_is_one_clear_error(tmp_path: Path) -> None:
    broken = TablesConfig(
        catalog_uri=f"sqlite:///{tmp_path}/no/such/dir/catalog.db", warehouse=str(tmp_path)
    )
    with pytest.raises(TableError, match="cannot reach Iceberg catalog 'local'"):
        plan_table("iceberg://local/logs.events", tables=broken)


def test_a_file_gone_since_planning_names_the_file_and_the_snapshot(tables: TablesConfig) -> None:
    iceberg(tables, [events(10)])
    plan = plan_table("iceberg://local/logs.events", tables=tables)
    Path(plan.files[0].path).unlink()
    with pytest.raises(
        TableError,
        match=f"data file .* of table iceberg://local/logs.events at snapshot "
        f"{plan.snapshot} is gone",
    ):
        read_data_file(plan, plan.files[0])


def test_shard_input_can_be_a_table(tables: TablesConfig, tmp_path: Path) -> None:
    from dfs_cer.io.shard import shard

    batches = [events(400, start=k * 400, seed=k) for k in range(3)]
    iceberg(tables, batches)
    manifests = shard(
        "iceberg://local/logs.events", 2, str(tmp_path / "shards"), tables=tables, batch_rows=150
    )
    assert sum(m.rows for m in manifests) == 1200
    written = pa.concat_tables(
        [pq.read_table(f) for f in sorted((tmp_path / "shards").rglob("*.parquet"))]
    )
    assert sorted(written.column("v").to_pylist()) == sorted(
        pa.concat_tables(batches).column("v").to_pylist()
    )
    assert TableInput(plan_table("iceberg://local/logs.events", tables=tables)).count_rows() == 1200
    from dfs_cer.io.shard import ShardError

    load_catalog("local", tables).load_table("logs.events").append(
        pa.table(
            {
                "ts": pa.array([None], pa.timestamp("us")),
                "type": ["A"],
                "v": pa.array([1], pa.int64()),
            }
        )
    )
    with pytest.raises(ShardError, match="1 row of the input has no ts"):
        shard("iceberg://local/logs.events", 2, str(tmp_path / "again"), tables=tables)


# ------------------------------------------------------------------ Hive-style prefixes


def write_hive(root: Path, days: int = 4, per_day: int = 200) -> pa.Table:
    parts = []
    for d in range(days):
        day = dt.date(2026, 11, 1) + dt.timedelta(days=d)
        nov1 = int(dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp()) - EPOCH // 10**6
        t = events(per_day, start=nov1 + d * 86_400, seed=d)  # one event a second from midnight UTC
        folder = root / f"date={day.isoformat()}" / "region=eu"
        folder.mkdir(parents=True)
        # unsorted within a file, two files per day
        perm = np.random.default_rng(d).permutation(per_day)
        shuffled = t.take(pa.array(perm))
        pq.write_table(shuffled.slice(0, per_day // 2), folder / "part-0.parquet")
        pq.write_table(shuffled.slice(per_day // 2), folder / "part-1.parquet")
        parts.append(
            t.append_column("date", pa.array([day.isoformat()] * per_day)).append_column(
                "region", pa.array(["eu"] * per_day)
            )
        )
    return pa.concat_tables(parts)


def test_hive_prefix_partitions_are_columns_and_dates_prune(tmp_path: Path) -> None:
    expected = write_hive(tmp_path / "events")
    plan = plan_table(f"hive:{tmp_path / 'events'}?date=date")
    assert plan.schema.names == ["ts", "type", "v", "date", "region"] and len(plan.files) == 8
    assert all_rows(plan).equals(expected.sort_by("ts"))
    # a time range inside 2026-11-02 (UTC): the other days' partitions are skipped unread
    nov2 = int(dt.datetime(2026, 11, 2, tzinfo=dt.UTC).timestamp()) * 10**6
    one_day = plan_table(
        f"hive:{tmp_path / 'events'}?date=date", time_ranges=[(nov2, nov2 + 3_600 * 10**6)]
    )
    assert {dict(f.partition)["date"] for f in one_day.files} == {"2026-11-02"}
    assert one_day.pruned_files == 6
    # without date=, the footers' statistics prune the same files (after reading their footers)
    by_stats = plan_table(f"hive:{tmp_path / 'events'}", time_ranges=[(nov2, nov2 + 3_600 * 10**6)])
    assert sorted(f.path for f in by_stats.files) == sorted(f.path for f in one_day.files)


def test_hive_errors(tmp_path: Path) -> None:
    with pytest.raises(TableError, match="no parquet files under"):
        plan_table(f"hive:{tmp_path}")
    write_hive(tmp_path / "events", days=1)
    with pytest.raises(
        TableError, match=r"date=day names no partition key .* its keys: date, region"
    ):
        plan_table(f"hive:{tmp_path / 'events'}?date=day")


def test_row_level_delete_files_are_refused_naming_the_table_and_snapshot(
    tables: TablesConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyiceberg writes copy-on-write deletes only (no delete files), so the scan's tasks are
    given one of the table's own files as a positional delete file, as a merge-on-read writer
    (Spark, Trino) leaves them."""
    from pyiceberg.table import DataScan, FileScanTask

    iceberg(tables, [events(10), events(10, start=10)])
    real = DataScan.plan_files

    def with_deletes(self: DataScan) -> list[FileScanTask]:
        tasks = list(real(self))
        return [FileScanTask(t.file, delete_files={tasks[0].file}) for t in tasks]

    monkeypatch.setattr(DataScan, "plan_files", with_deletes)
    with pytest.raises(
        TableError,
        match=r"iceberg://local/logs.events at snapshot \d+ has row-level delete files on "
        r"2 data files .* compact the table",
    ):
        plan_table("iceberg://local/logs.events", tables=tables)


def test_other_catalogs_come_from_pyicebergs_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog named in pyiceberg's configuration (here through its environment variables; a
    REST or Glue catalog is configured the same way) is reachable as iceberg://NAME/..."""
    for key, value in {
        "TYPE": "sql",
        "URI": f"sqlite:///{tmp_path}/lake.db",
        "WAREHOUSE": (tmp_path / "lake").as_uri(),
    }.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LAKE__{key}", value)
    from pyiceberg.catalog import load_catalog as pyiceberg_catalog

    catalog = pyiceberg_catalog(
        "lake",
        type="sql",
        uri=f"sqlite:///{tmp_path}/lake.db",
        warehouse=(tmp_path / "lake").as_uri(),
    )
    catalog.create_namespace("ops")
    catalog.create_table("ops.events", schema=events(5).schema).append(events(5))
    plan = plan_table(
        "iceberg://lake/ops.events", tables=TablesConfig(catalog_uri="sqlite:////nonexistent/x.db")
    )
    assert plan.rows == 5 and plan.files[0].path.startswith(str(tmp_path / "lake"))


# ------------------------------------------------------------------ review regressions


def test_files_without_field_ids_are_read_through_the_name_mapping(
    tables: TablesConfig, tmp_path: Path
) -> None:
    """Files added with add_files (or migrated from Hive), written without field ids and recorded
    as ``file:/path``: read by the table's name mapping, as Iceberg readers do."""
    table = iceberg(tables, [events(10)])
    outside = tmp_path / "ext" / "a.parquet"
    outside.parent.mkdir()
    pq.write_table(events(20, start=10), outside)  # a plain parquet file: no field ids
    table.add_files([f"file:{outside}"])  # type: ignore[attr-defined]
    rows = all_rows(plan_table("iceberg://local/logs.events", tables=tables))
    assert (
        rows.num_rows == 30
        and rows.column("ts").null_count == 0
        and rows.column("type").null_count == 0
    )
    assert rows.column("v").to_pylist()[10:] == events(20, start=10).column("v").to_pylist()


def test_a_snapshot_is_read_with_its_own_schema(tables: TablesConfig) -> None:
    table = iceberg(tables, [events(10)])
    first = table.current_snapshot().snapshot_id  # type: ignore[attr-defined]
    with table.update_schema() as update:  # type: ignore[attr-defined]
        update.delete_column("v")
    table.append(events(5, start=10).drop_columns(["v"]))  # type: ignore[attr-defined]
    assert plan_table("iceberg://local/logs.events", tables=tables).schema.names == ["ts", "type"]
    old = plan_table("iceberg://local/logs.events", tables=tables, snapshot=first)
    assert old.schema.names == ["ts", "type", "v"] and all_rows(old).column("v").null_count == 0


def test_a_warehouse_path_with_a_space_is_written_and_read_where_it_says(tmp_path: Path) -> None:
    spaced = TablesConfig(
        catalog_uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=str(tmp_path / "my wh"),
        assignments_dir=str(tmp_path / "a"),
    )
    iceberg(spaced, [events(10)])
    plan = plan_table("iceberg://local/logs.events", tables=spaced)
    assert plan.files[0].path.startswith(str(tmp_path / "my wh")) and all_rows(plan).num_rows == 10
    with pytest.raises(TableError, match=r"holds '#' or '\?'"):
        load_catalog(
            "local",
            TablesConfig(
                catalog_uri=f"sqlite:///{tmp_path}/c2.db", warehouse=str(tmp_path / "a#b")
            ),
        )


def test_hive_hidden_files_mixed_units_and_odd_integers(tmp_path: Path) -> None:
    root = tmp_path / "events"
    (root / "date=x").mkdir(parents=True)
    pq.write_table(events(10), root / "date=x" / "part-0.parquet")
    for hidden in (
        "_temporary/0/date=x/part-0.parquet",
        "date=x/.part-1.parquet",
        "_SUCCESS.parquet",
    ):
        (root / hidden).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(events(10), root / hidden)
    assert [f.rows for f in plan_table(f"hive:{root}").files] == [10]  # as Hive and Spark read it
    (root / "date=y").mkdir()
    pq.write_table(
        events(5).cast(
            pa.schema(
                [
                    pa.field("ts", pa.timestamp("ms")),
                    pa.field("type", pa.string()),
                    pa.field("v", pa.int64()),
                ]
            )
        ),
        root / "date=y" / "part-0.parquet",
    )
    with pytest.raises(TableError, match=r"store ts as timestamp\[us\] .* and as timestamp\[ms\]"):
        plan_table(f"hive:{root}")
    odd = tmp_path / "odd"
    for value in ("1_000", "12345678901234567890", "7"):
        (odd / f"n={value}").mkdir(parents=True)
        pq.write_table(events(3), odd / f"n={value}" / "p.parquet")
    plan = plan_table(f"hive:{odd}")
    assert plan.schema.field("n").type == pa.string()
    assert sorted(set(all_rows(plan).column("n").to_pylist())) == [
        "12345678901234567890",
        "1_000",
        "7",
    ]


def test_a_csv_appended_to_iceberg_takes_types_from_every_value(
    tables: TablesConfig, tmp_path: Path
) -> None:
    from dfs_cer.io.csvtypes import CsvError

    csv = tmp_path / "log.csv"
    csv.write_text(
        "ts,v\n"
        + "".join(
            f"2026-01-01 00:00:{i:02d},{'2.5' if i == 40 else '' if i == 3 else i}\n"
            for i in range(50)
        )
    )
    append_iceberg("iceberg://local/logs.csv", str(csv), create=True, tables=tables)
    data = load_catalog("local", tables).load_table("logs.csv").scan().to_arrow()
    assert data.schema.field("v").type == pa.float64() and data.column("v").null_count == 1
    csv.write_text(csv.read_text().replace(",2.5\n", ",abc\n"))
    with pytest.raises(CsvError, match=r"row 41, column v: 'abc' is not int64"):
        append_iceberg("iceberg://local/logs.csv", str(csv), tables=tables)
