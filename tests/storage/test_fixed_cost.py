"""The fixed protocol cost of a query on real storage nodes: admission inside ``open`` (one round
trip, no ``reserve``), ``open``'s reply without fields at their defaults, and the all-or-none
admission it keeps (a node without room refuses inside open; the query waits, then runs, and
nothing stays held)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.config import StrategyConfig
from dfs_cer.datasets import synthetic_events
from dfs_cer.io.shard import shard
from dfs_cer.strategies import PullRequest, Trace, pull
from dfs_cer.strategies.admission import open_everywhere
from dfs_cer.strategies.base import Session
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.steps import open_query
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.messages import encode
from dfs_cer.transport.replies import OpenReply, ReleaseReply, StatsReply
from dfs_cer.transport.timing import NODE_US
from storage_node.launcher import LocalCluster

SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN INTERVAL "
    "'20' SECOND DEFINE A AS A.type = 'T_03', B AS B.type = 'T_07' AND B.a1 > A.a1)"
)
#: the most bytes (both ways) of open and close per node per query, beside the query's text and
#: the schema blob node 0 sends (before admission moved into open: reserve ~140 B, open's other
#: fields ~800 B, close ~110 B)
FIXED_BOUND = 600


def rows(table: Any) -> list[str]:
    return sorted(map(str, table.to_pylist()))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("fixed-cost")
    events = synthetic_events(20_000, seed=5)
    pq.write_table(events, root / "e.parquet")
    shard(str(root / "e.parquet"), 3, str(root / "nodes"), name="t")
    return root, events


def dirs(root: Path) -> list[str]:
    return [str(root / "nodes" / f"node-{i:02d}") for i in range(3)]


@pytest.fixture(scope="module")
def cluster(data: tuple[Path, Any]) -> Iterator[LocalCluster]:
    with LocalCluster(dirs(data[0])) as c:
        yield c


def test_open_and_close_cost_a_few_hundred_bytes_per_node(cluster: LocalCluster) -> None:
    trace = Trace("push_down")
    session = Session.connect(cluster.endpoints, cluster.token, trace)
    request = PullRequest.of("push_down", SQL, cluster.endpoints, cluster.token)
    try:
        _, headers, schema = open_query(session, request)
        assert all(not h.refused and h.rows > 0 for h in headers)
        assert session.close() == []
        # one round trip admits and opens the query on every node
        assert [r.action for r in trace.rounds] == ["open"]
        sql = len(encode({"sql": request.query.to_sql()})) - len(encode({}))
        blob = len(encode({}, [schema.serialize().to_pybytes()])) - len(encode({}))
        for i, c in enumerate(session.clients):
            names = [t.action for t in c.transfers]
            assert names == ["open", "close"], names
            spent = sum(t.bytes_to_sn + t.bytes_to_cn for t in c.transfers) - sql
            spent -= blob if i == 0 else 0
            assert 0 < spent < FIXED_BOUND, (i, spent, c.transfers)
    finally:
        session.close_connections()


def without_time(header: dict[str, Any]) -> dict[str, Any]:
    """A reply header without the node's time on the call (every reply says it)."""
    assert isinstance(header.get(NODE_US), int)
    return {k: v for k, v in header.items() if k != NODE_US}


def test_open_replies_leave_out_defaults_and_parse_back(cluster: LocalCluster) -> None:
    client = StorageClient(cluster.endpoints[1], cluster.token)
    try:
        qid = f"lean{int(time.time() * 1000)}"
        header, blobs = client.action(
            "open", {"query_id": qid, "sql": SQL, "schema": False, "arrival": time.time()}
        )
        assert blobs == []  # no schema blob when the compute node has it
        # fields at their defaults travel as nothing: no per-variable bounds unless asked, no
        # matching calibration where the nodes may not match, no halo limit at the protocol's
        assert not {"refused", "event_key", "beta", "match_cpu_budget", "halo_limit"} & set(header)
        assert all(set(v) == {"count"} for v in header["variables"].values())
        reply = OpenReply.parse(header)
        assert reply.beta == {} and reply.halo_limit is None and not reply.local_partitions
        assert OpenReply.parse(OpenReply.lean(reply.to_wire())) == reply
        assert without_time(client.action("close", {"query_id": qid})[0]) == {"closed": True}
        bounded, _ = client.action(
            "open", {"query_id": f"{qid}b", "sql": SQL, "schema": False, "variable_bounds": True}
        )
        assert all(v["min_ts"] <= v["max_ts"] for v in bounded["variables"].values() if v["count"])
        client.action("close", {"query_id": f"{qid}b"})
    finally:
        client.close()


def test_a_node_without_room_refuses_inside_open_and_keeps_the_line(
    data: tuple[Path, Any],
) -> None:
    """Budget for one query per node: while another query holds node 2, an open with an arrival
    is refused there (holding nothing, keeping its place in line); a strategy's query waits,
    releasing what the other nodes opened, then runs once the room is free, and nothing stays
    held anywhere."""
    root, events = data
    with LocalCluster(dirs(root)) as probe:  # a reservation (a whole scan) and an opened query
        c = StorageClient(probe.endpoints[2], probe.token)
        c.action("reserve", {"query_id": "probe", "arrival": time.time()})
        one = c.action("stats")[0]["held_bytes"]
        c.action("close", {"query_id": "probe"})
        c.action("open", {"query_id": "hog", "sql": SQL})
        opened = c.action("stats")[0]["held_bytes"]
        c.close()
    expected = rows(match_recognize(events, SQL))
    config = StrategyConfig(admission_wait_seconds=60, query_timeout_seconds=120)
    # room for one query's reservation, not beside an opened one
    with LocalCluster(dirs(root), memory_budget=str(one + opened // 2)) as cluster:
        clients = [StorageClient(e, cluster.token) for e in cluster.endpoints]
        try:
            assert not OpenReply.parse(
                clients[2].action("open", {"query_id": "hog", "sql": SQL})[0]
            ).refused
            late = {"query_id": "late", "sql": SQL, "schema": False, "arrival": time.time()}
            assert without_time(clients[2].action("open", late)[0]) == {"refused": True}
            stats = StatsReply.parse(clients[2].action("stats")[0])
            assert (stats.queries, stats.waiting) == (1, 1)  # the hog; late waits in line
            # admitted on node 0, then released there: its state dropped, its place kept
            assert not OpenReply.parse(clients[0].action("open", late)[0]).refused
            assert clients[0].call(ReleaseReply, {"query_id": "late", "arrival": 1.0})[0].released
            stats = StatsReply.parse(clients[0].action("stats")[0])
            assert (stats.queries, stats.held_bytes, stats.waiting) == (0, 0, 1)
            clients[2].action("close", {"query_id": "late"})
            clients[0].action("close", {"query_id": "late"})

            out: list[Any] = []
            runner = threading.Thread(
                target=lambda: out.append(
                    pull("dfs", SQL, cluster.endpoints, cluster.token, config=config)
                )
            )
            runner.start()
            for _ in range(3000):  # the strategy's open is refused on node 2: it waits in line
                if StatsReply.parse(clients[2].action("stats")[0]).waiting:
                    break
                time.sleep(0.02)
            assert runner.is_alive()
            clients[2].action("close", {"query_id": "hog"})
            runner.join(60)
            assert not runner.is_alive() and len(out) == 1
            assert rows(match_pulled(out[0])) == expected
            assert [r.action for r in out[0].trace.rounds][:1] == ["open"]
            assert not {"reserve", "release"} & {r.action for r in out[0].trace.rounds}
            for c in clients:
                stats = StatsReply.parse(c.action("stats")[0])
                assert (stats.queries, stats.reservations, stats.held_bytes) == (0, 0, 0)
        finally:
            for c in clients:
                c.close()


def test_a_commit_racing_the_opens_opens_every_node_on_the_latest(tmp_path: Path) -> None:
    """Nodes serving an Iceberg table open their current snapshot when none is pinned: a commit
    landing between two nodes' opens is seen as different snapshots, and the query is released
    and opened again on the latest commit on every node."""
    from tests.storage.test_tables_served import QUERIES, config, events_us, new_table, refs

    tables, env = config(tmp_path)
    ev = events_us()
    table: Any = new_table(tables, ev.schema)
    table.append(ev.slice(0, 1500))
    first = table.current_snapshot().snapshot_id
    with LocalCluster(refs("logs.events", 2), env=env) as cluster:
        session = Session.connect(cluster.endpoints, cluster.token, Trace("dfs"))
        watch = StorageClient(cluster.endpoints[0], cluster.token)
        sql = PullRequest.of("dfs", QUERIES[0], cluster.endpoints, cluster.token).query.to_sql()
        committed: list[int] = []

        def per_node(i: int) -> tuple[dict[str, Any], list[bytes]]:
            if i == 1 and not committed:  # once node 0 holds the query: a commit
                for _ in range(3000):
                    if StatsReply.parse(watch.action("stats")[0]).queries:
                        break
                    time.sleep(0.01)
                table.append(ev.slice(1500))
                committed.append(table.current_snapshot().snapshot_id)
            return {"sql": sql, **({"schema": False} if i else {})}, []

        try:
            replies = open_everywhere(session, per_node)
            assert committed and committed[0] != first
            assert [h.snapshot for h, _ in replies] == [committed[0]] * 2
            assert session.snapshot == committed[0]
            assert [r.action for r in session.trace.rounds] == ["open"]
            for c in session.clients:  # opened on both snapshots, released, opened on the latest
                assert [t.action for t in c.transfers] == ["open", "release", "open"]
            assert session.close() == []
        finally:
            session.close_connections()
            watch.close()
