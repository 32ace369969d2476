"""Attacks on the outer query, the storage nodes' protocol and saved runs: each one refused with a
clear error, nothing read, nothing allocated, the node still serving."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.errors import DfsCerError
from dfs_cer.io.shard import shard
from dfs_cer.local import sandboxed_duckdb
from dfs_cer.query import Query, parse
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.messages import MAGIC
from dfs_cer.transport.protocol import VERSION
from storage_node.launcher import LocalCluster

SECRET = "dfs-cer-secret-4d1c"

CLAUSE = """MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS t ONE ROW PER MATCH
                         AFTER MATCH SKIP PAST LAST ROW PATTERN (A) DEFINE A AS A.v > 0)"""


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("secret") / "secret.txt"
    path.write_text(SECRET)
    return str(path)


def events() -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(range(1, 9), pa.int64()),
            "v": pa.array([1, 0, 2, 3, 0, 1, 1, 2], pa.int64()),
        }
    )


def attacks(path: str) -> list[str]:
    return [
        f"SELECT ARRAY(SELECT content FROM read_text('{path}')) AS x FROM events {CLAUSE}",
        f"SELECT t FROM events {CLAUSE} WHERE EXISTS (SELECT 1 FROM read_text('{path}') "
        "WHERE content LIKE 'd%')",
        f"SELECT t, (SELECT count(*) FROM read_csv('{path}')) AS n FROM events {CLAUSE}",
        f"SELECT t FROM events {CLAUSE} WHERE t IN (SELECT 1 FROM '{path}')",
        f"SELECT t, (SELECT count(*) FROM glob('{path}')) AS n FROM events {CLAUSE}",
        f"SELECT t, getenv('HOME') AS h FROM events {CLAUSE}",
        f"SELECT t, current_setting('enable_external_access') AS s FROM events {CLAUSE}",
        f"SELECT t, (SELECT count(*) FROM duckdb_settings()) AS s FROM events {CLAUSE}",
        f"SELECT t FROM events {CLAUSE} WHERE t IN (SELECT 1 FROM information_schema.tables)",
    ]


@pytest.mark.parametrize("case", range(9))
def test_the_outer_query_cannot_read_files_or_settings(secret_file: str, case: int) -> None:
    sql = attacks(secret_file)[case]
    try:
        out = match_recognize(events(), sql)
    except DfsCerError as exc:
        assert SECRET not in str(exc)
    else:  # pragma: no cover - an attack that runs is a failure
        pytest.fail(f"ran: {out.to_pylist()}")


def test_the_embedded_engine_itself_is_locked(secret_file: str) -> None:
    """Defence in depth: even SQL that got past the checks runs without file or settings access."""
    import duckdb

    con = sandboxed_duckdb()
    for sql in (
        f"SELECT * FROM read_text('{secret_file}')",
        f"SELECT * FROM '{secret_file}'",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        f"ATTACH '{secret_file}.db' AS x",
    ):
        with pytest.raises(duckdb.Error):
            con.sql(sql).fetchall()
    con.close()


def test_cli_refuses_the_attack_in_one_line(secret_file: str, tmp_path: Path) -> None:
    pq.write_table(events(), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), time_column="ts")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")]) as cluster:
        sql = attacks(secret_file)[0].replace("FROM events", "FROM e")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "dfs_cer.cli.main",
                "query",
                sql,
                "--endpoints",
                cluster.endpoints[0],
                "--token-file",
                str(cluster.token_file),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode != 0 and SECRET not in proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1, (
        proc.stderr
    )


# ------------------------------------------------------------------ storage nodes


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("attacks")
    pq.write_table(events(), root / "e.parquet")
    shard(str(root / "e.parquet"), 1, str(root / "nodes"), time_column="ts")
    with LocalCluster([str(root / "nodes" / "node-00")], memory_budget="64MiB") as cluster:
        yield cluster


def raw(cluster: LocalCluster) -> tuple[flight.FlightClient, flight.FlightCallOptions]:
    options = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {cluster.token}".encode())], timeout=30
    )
    return flight.FlightClient(cluster.endpoints[0]), options


def frame(header: dict[str, object], body: bytes = b"") -> bytes:
    text = json.dumps({"v": VERSION, **header}).encode()
    return MAGIC + len(text).to_bytes(4, "little") + text + body


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_decompression_bomb_is_refused_before_inflating(node: LocalCluster) -> None:
    """16 KB declaring 512 MiB once inflated: refused from the header, peak memory unchanged."""
    client, options = raw(node)
    bomb = zlib.compress(b"\0" * (1 << 20))[:16_000]  # any bytes: never inflated
    before = peak_rss_kb(node.procs[0].pid)
    for header in (
        {"query_id": "never-opened", "z": {"0": 512 << 20}},  # unknown query: refused first
        {"z": {"0": 512 << 20}},
    ):  # no query at all: the declared size is over the limit
        with pytest.raises(flight.FlightError, match=r"unknown query|more than the limit"):
            list(
                client.do_action(
                    flight.Action("verify", frame({**header, "blobs": [len(bomb)]}, bomb)), options
                )
            )
    assert peak_rss_kb(node.procs[0].pid) - before < 64 * 1024  # no 512 MiB allocation
    with pytest.raises(flight.FlightError, match="more than the limit"):
        list(
            client.do_action(
                flight.Action("open", frame({"blobs": [len(bomb)], "z": {"0": 1 << 30}}, bomb)),
                options,
            )
        )
    assert StorageClient(node.endpoints[0], node.token).action("health")[0]["status"] == "ok"
    client.close()


def test_query_json_is_validated_on_the_node(node: LocalCluster) -> None:
    client, options = raw(node)
    good = parse(f"SELECT * FROM e {CLAUSE}").to_json()
    # an unknown function in DEFINE: refused (never dropped from the filter,
    # which scanned everything)
    bad = json.loads(good)
    bad["recognize"]["definitions"][0]["condition"] = {
        "type": "function",
        "name": "read_text",
        "args": [{"type": "literal", "value": "/etc/passwd"}],
    }
    deep_query = json.loads(good)
    deep_query["recognize"]["definitions"][0]["condition"] = "PLACEHOLDER"
    deep_text = json.dumps(deep_query).replace(
        '"PLACEHOLDER"',
        '{"type": "unary", "op": "NOT", "operand": ' * 100_000
        + '{"type": "literal", "value": 1}'
        + "}" * 100_000,
    )
    for query, message in ((json.dumps(bad), "read_text"), (deep_text, "nest|deep")):
        with pytest.raises(flight.FlightError, match=message):
            list(
                client.do_action(
                    flight.Action("open", frame({"query_id": "q-json", "query": query})), options
                )
            )
    # the node keeps serving: a valid query opens and closes
    list(
        client.do_action(
            flight.Action("open", frame({"query_id": "q-good", "query": good})), options
        )
    )
    list(client.do_action(flight.Action("close", frame({"query_id": "q-good"})), options))
    client.close()


def test_unknown_functions_are_refused_in_the_query_model() -> None:
    doc = json.loads(parse(f"SELECT * FROM e {CLAUSE}").to_json())
    doc["recognize"]["definitions"][0]["condition"] = {
        "type": "function",
        "name": "read_text",
        "args": [],
    }
    with pytest.raises(DfsCerError):
        Query.from_json(json.dumps(doc))


def test_raw_pull_all_passes_admission(node: LocalCluster) -> None:
    """A pull_all without open reserves like an open:
    with the budget held it waits, then is refused."""
    client = StorageClient(node.endpoints[0], node.token, timeout=60)
    assert client.pull({"query_id": "raw-1", "kind": "pull_all"}).num_rows == 8
    stats = client.action("stats")[0]
    assert stats["held_bytes"] == 0 and stats["queries"] == 0
    client.close()


def test_reservations_are_bounded_and_cannot_release_others(node: LocalCluster) -> None:
    client = StorageClient(node.endpoints[0], node.token)
    for arrival in (float("nan"), -1, "soon", True):
        with pytest.raises(DfsCerError, match="arrival"):
            client.action("reserve", {"query_id": "r-bad", "arrival": arrival})
    assert client.action("reserve", {"query_id": "r-1", "arrival": 1.0})[0]["granted"]
    client.action("release", {"query_id": "r-2"})  # another id: r-1 keeps its reservation
    assert client.action("stats")[0]["reservations"] == 1
    client.action("close", {"query_id": "r-1"})
    stats = client.action("stats")[0]
    assert stats["reservations"] == 0 and stats["held_bytes"] == 0
    # a closed query cannot come back (a call of it that arrives late keeps nothing)
    with pytest.raises(DfsCerError, match="was closed"):
        client.action("reserve", {"query_id": "r-1", "arrival": 2.0})
    client.close()


def test_messages_of_another_version_are_refused(node: LocalCluster) -> None:
    client, options = raw(node)
    text = json.dumps({"v": VERSION - 1, "blobs": []}).encode()
    with pytest.raises(flight.FlightError, match=f"protocol version {VERSION - 1}"):
        list(
            client.do_action(
                flight.Action("close", MAGIC + len(text).to_bytes(4, "little") + text), options
            )
        )
    client.close()


def test_concurrent_attack_calls_leave_the_node_serving(node: LocalCluster) -> None:
    errors: list[str] = []

    def hammer() -> None:
        c = StorageClient(node.endpoints[0], node.token)
        for i in range(20):
            try:
                c.action("intervals", {"query_id": f"nope-{i}", "variable": "A"})
            except DfsCerError as exc:
                errors.append(str(exc))
        c.close()

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 80 and all("unknown query" in e for e in errors)
    assert StorageClient(node.endpoints[0], node.token).action("health")[0]["status"] == "ok"


# ------------------------------------------------------------------ saved runs


@pytest.mark.parametrize(
    "run_id", ["../../etc", "..", "/etc/passwd", "a/../../b", "x" * 300, "run id"]
)
def test_since_run_stays_inside_the_runs_directory(tmp_path: Path, run_id: str) -> None:
    from dfs_cer.io.runs import load_run

    (tmp_path / "runs").mkdir()
    with pytest.raises(DfsCerError):
        load_run(tmp_path / "runs", run_id)


def test_nested_ctes_cannot_make_catalog_views_readable(secret_file: str) -> None:
    sql = (
        f"SELECT t, EXISTS(WITH pg_settings AS (SELECT 1) SELECT 1) AS a, "
        f"ARRAY(SELECT name || '=' || setting FROM pg_settings) AS s FROM events {CLAUSE}"
    )
    with pytest.raises(DfsCerError, match="WITH clause inside"):
        match_recognize(events(), sql)


def test_variables_are_never_substituted() -> None:
    with pytest.raises(DfsCerError, match=r"\$\{"):
        match_recognize(events(), f"SELECT t, '${{env:HOME}}' AS h FROM events {CLAUSE}")


def test_a_long_numeric_in_list_is_pushed_down_without_crashing(tmp_path: Path) -> None:
    """Thousands of IN items: the pushed filter stays shallow
    (a chain crashed Arrow's evaluator)."""
    import pyarrow.dataset as ds

    from dfs_cer.query.arrow_filter import to_arrow_filter

    items = ", ".join(str(i) for i in range(20_000))
    query = parse(f"SELECT * FROM e {CLAUSE.replace('A.v > 0', f'A.v IN ({items})')}")
    table = events()
    expr = to_arrow_filter(query.recognize.definitions[0].condition, table.schema)
    assert ds.dataset(table).to_table(filter=expr).num_rows == 8


def test_top_level_ctes_work_and_cannot_reach_the_catalog() -> None:
    from dfs_cer.query.sandbox import check_outer

    check_outer(
        "WITH a AS (SELECT * FROM m), b AS (SELECT * FROM a) SELECT * FROM b", ["m"], "duckdb"
    )
    for sql, message in (
        (
            "WITH pg_settings AS (SELECT name FROM pg_settings) SELECT * FROM pg_settings",
            "inside the common table expression",
        ),
        (
            "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM m) SELECT * FROM a",
            "inside the common table expression",
        ),
        (
            "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
            "inside the common table expression",
        ),
    ):
        with pytest.raises(DfsCerError, match=message):
            check_outer(sql, ["m"], "duckdb")


def test_cheap_requests_cannot_allocate_much(node: LocalCluster) -> None:
    """Join filter builds are bounded in number and bits before anything is allocated; pull_times
    needs disjoint intervals (its output is at most every row once)."""
    client = StorageClient(node.endpoints[0], node.token)
    client.action("open", {"query_id": "q-alloc", "sql": f"SELECT * FROM e {CLAUSE}"})
    builds = [
        {"variable": "A", "column": "v", "window": 10, "kind": 1, "bits": 2**31, "hashes": 3}
    ] * 4
    with pytest.raises(DfsCerError, match="exceed the limit"):
        client.action("wjf", {"query_id": "q-alloc", "builds": builds})
    intervals = pa.table({"__lo": [0] * 100, "__hi": [100] * 100, "__k": list(range(100))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, intervals.schema) as w:
        w.write_table(intervals)
    with pytest.raises(DfsCerError, match="intervals overlap"):
        client.pull({"kind": "pull_times"}, [sink.getvalue().to_pybytes()])
    client.action("close", {"query_id": "q-alloc"})
    stats = client.action("stats")[0]
    assert stats["held_bytes"] == 0 and "per_query" not in stats  # no query ids listed
    client.close()


def test_situations_pass_admission(tmp_path: Path) -> None:
    from dfs_cer.datasets import synthetic_events

    pq.write_table(synthetic_events(3_000, seed=1), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), partitioning="time", name="t")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], memory_budget="1KiB") as cluster:
        client = StorageClient(cluster.endpoints[0], cluster.token)
        sql = (
            "SELECT * FROM t SITUATIONS (ORDER BY ts DEFINE A AS type = 'T_01', B AS a1 < 5 "
            "PATTERN A before B)"
        )
        with pytest.raises(DfsCerError, match="memory budget"):
            client.action("situations", {"sql": sql})
        client.close()
