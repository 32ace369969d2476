"""Typed replies: every reply type parses what a real storage node sends, and a reply missing a
field or carrying one of the wrong type is a ProtocolError naming the action and the field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq
import pytest

from dfs_cer.datasets import synthetic_events
from dfs_cer.errors import ProtocolError
from dfs_cer.filters import IntervalSet, KeyKind, ShrinkingWindowFilter
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.protocol import Build, Intervals, Verify, Wjf
from dfs_cer.transport.replies import (
    REPLIES,
    CloseReply,
    CollectReply,
    FilesReply,
    GroupOpenReply,
    HealthReply,
    IntervalsReply,
    OpenReply,
    PushPullReply,
    ReleaseReply,
    Reply,
    ReserveReply,
    SchemaReply,
    SituationsReply,
    StatsReply,
    SummariesReply,
    VerifyReply,
    WjfReply,
    parse_reply,
)
from storage_node.launcher import LocalCluster

QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN (A B) WITHIN INTERVAL '3' "
    "MINUTE DEFINE A AS A.type = 'T_01', B AS B.type = 'T_02' AND B.a2 = A.a2)"
)
WINDOW = 180_000


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageClient]:
    root = tmp_path_factory.mktemp("shards")
    pq.write_table(synthetic_events(5_000, seed=3), root / "events.parquet")
    shard(str(root / "events.parquet"), 1, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / "node-00")]) as cluster:
        c = StorageClient(cluster.endpoints[0], cluster.token)
        yield c
        c.close()


def test_every_action_has_a_reply_type() -> None:
    from storage_node.server import ACTIONS

    assert set(REPLIES) == set(ACTIONS)
    for name, kind in REPLIES.items():
        assert name == kind.ACTION and issubclass(kind, Reply)


def test_replies_parse_what_a_live_node_sends(client: StorageClient) -> None:
    health, _ = client.call(HealthReply)
    assert health.status == "ok" and health.rows == 5_000
    files, _ = client.call(FilesReply, {})
    assert files.files and files.time_column == "ts"
    digest, blobs = client.call(SchemaReply, {})
    assert digest.digest and blobs
    qid = f"r{int(time.time() * 1000)}"
    reserved, _ = client.call(ReserveReply, {"query_id": qid, "arrival": time.time()})
    assert reserved.granted
    assert client.call(ReleaseReply, {"query_id": qid})[0].released
    opened, blobs = client.call(
        OpenReply, {"query_id": qid, "sql": QUERY, "integer_time_unit": "ms"}
    )
    assert opened.rows > 0 and set(opened.variables) == {"A", "B"} and blobs
    assert opened.variables["A"].count > 0 and opened.time_column == "ts"
    intervals, blobs = client.call(IntervalsReply, Intervals(qid, "A", "head", WINDOW).header())
    assert intervals.intervals == len(blobs) == 1
    tis = IntervalSet.from_bytes(blobs[0])
    swf = ShrinkingWindowFilter.from_intervals(tis.starts, tis.ends, WINDOW).to_bytes()
    build = Build("A", "a2", WINDOW, int(KeyKind.STRING), "keyset")
    wjf, blobs = client.call(WjfReply, Wjf(qid, (build,)).header(), [swf])
    assert wjf.filters == len(blobs) == 1
    verified, _ = client.call(VerifyReply, Verify(qid, "B", "tail", WINDOW).header(), [swf])
    assert 0 <= verified.survivors <= verified.before
    summaries, blobs = client.call(
        SummariesReply,
        {
            "query_id": qid,
            "window": WINDOW,
            "variables": [{"variable": "A", "role": "head"}],
            "pairs": [{"variable": "A", "column": "a2"}],
        },
    )
    assert summaries == SummariesReply() and len(blobs) == 2
    stats, _ = client.call(StatsReply)
    assert stats.queries >= 1 and stats.calls > 0
    assert client.call(CloseReply, {"query_id": qid})[0].closed
    group, _ = client.call(
        GroupOpenReply,
        {
            "query_id": f"{qid}g",
            "group": [{"query_id": f"{qid}g0", "sql": QUERY, "integer_time_unit": "ms"}],
        },
    )
    assert len(group.group) == 1 and group.group[0].variables["B"].count >= 0
    client.call(CloseReply, {"query_id": f"{qid}g0"})
    situated, _ = client.call(
        SituationsReply,
        {
            "query_id": f"{qid}s",
            "integer_time_unit": "ms",
            "sql": (
                "SELECT * FROM t SITUATIONS (ORDER BY ts DEFINE A AS a1 > 100, B AS a1 < 50 "
                "PATTERN A before B)"
            ),
        },
    )
    assert situated.derived or situated.reason


def test_push_pull_reply_keeps_its_optional_field() -> None:
    assert PushPullReply.parse({"before": 3, "survivors": 1}).unfiltered is None
    assert (
        PushPullReply.parse({"before": 3, "survivors": 3, "unfiltered": "no memory"}).unfiltered
        == "no memory"
    )


SAMPLES: dict[type[Reply], dict[str, Any]] = {
    ReserveReply: {"granted": True},
    ReleaseReply: {"released": True},
    CloseReply: {"closed": False},
    # every field optional: a node leaves out those at their defaults, and a refused open (no
    # room now) sends only ``refused`` (see test_fixed_cost.py); a variable's count is required
    OpenReply: {},
    IntervalsReply: {"intervals": 1},
    SummariesReply: {},
    WjfReply: {"filters": 1},
    VerifyReply: {"before": 2, "survivors": 1},
    CollectReply: {},
    PushPullReply: {"before": 2, "survivors": 1},
    SituationsReply: {"derived": False},
    HealthReply: {"status": "ok"},
    FilesReply: {"files": []},
    SchemaReply: {"digest": "x"},
    StatsReply: {
        k: 0
        for k in (
            "queries",
            "held_bytes",
            "budget_bytes",
            "reservations",
            "waiting",
            "evicted",
            "refused",
            "work_bytes",
            "work_peak_bytes",
            "stopped",
            "calls",
            "bytes_in",
            "bytes_out",
        )
    }
    | {"per_query_bytes": []},
}


@pytest.mark.parametrize("kind", list(REPLIES.values()), ids=list(REPLIES))
def test_a_missing_or_ill_typed_field_is_a_protocol_error(kind: type[Reply]) -> None:
    sample = SAMPLES[kind]
    assert kind.parse(sample) == parse_reply(kind.ACTION, sample)
    assert kind.parse(kind.parse(sample).to_wire()) == kind.parse(sample)
    for name in sample:
        with pytest.raises(
            ProtocolError, match=f"reply to {kind.ACTION}: field '{name}' is missing"
        ):
            kind.parse({k: v for k, v in sample.items() if k != name})
        with pytest.raises(ProtocolError, match=f"reply to {kind.ACTION}: field '{name}"):
            kind.parse({**sample, name: object()})


def test_nested_fields_and_optional_types_are_checked() -> None:
    with pytest.raises(ProtocolError, match="reply to open: field 'count' is missing"):
        OpenReply.parse({"rows": 1, "variables": {"A": {}}})
    with pytest.raises(ProtocolError, match="field 'min_ts' is of the wrong type"):
        OpenReply.parse({"rows": 1, "variables": {}, "min_ts": "soon"})
    with pytest.raises(ProtocolError, match="field 'granted' is of the wrong type"):
        ReserveReply.parse({"granted": 1})  # not a bool
    with pytest.raises(ProtocolError, match="expected an object"):
        HealthReply.parse([])  # type: ignore[arg-type]
    assert isinstance(
        parse_reply("open", {"group": [{"rows": 0, "variables": {}}]}), GroupOpenReply
    )
    reply = OpenReply.parse(
        {"rows": 1, "variables": {}, "event_key": None, "navigation_on_node": None}
    )
    assert reply.event_key == () and reply.navigation_on_node is None and reply.beta == {}


def test_replies_are_frozen() -> None:
    reply = VerifyReply.parse({"before": 2, "survivors": 1})
    with pytest.raises(AttributeError):
        reply.before = 3  # type: ignore[misc]
