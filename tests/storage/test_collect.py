"""The storage node's ``collect``: where a variable's candidates lie (slices and value hashes),
kept inside the slice runs it is sent, and every malformed request refused with a clear error
while the node keeps serving."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import parse
from dfs_cer.datasets import synthetic_events
from dfs_cer.errors import StorageError
from dfs_cer.filters import IntervalSet, KeyKind
from dfs_cer.filters.points import SliceRuns, unpack_points, value_hashes
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.protocol import Collect, Gather
from storage_node.launcher import LocalCluster
from tests.fixtures.round_trip import QUERY

Q = 11_250  # a sixteenth of the three-minute window, in ms


@pytest.fixture(scope="module")
def events() -> pa.Table:
    return synthetic_events(40_000, seed=9)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, events: pa.Table) -> Iterator[StorageClient]:
    root = tmp_path_factory.mktemp("collect")
    pq.write_table(events, root / "events.parquet")
    shard(str(root / "events.parquet"), 1, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / "node-00")]) as cluster:
        client = StorageClient(cluster.endpoints[0], cluster.token)
        client.action("open", {"query_id": "q1", "query": parse(QUERY).to_json()})
        yield client
        client.close()


def candidates(events: pa.Table, kind: str) -> pa.Table:
    keep = np.array(events.column("type").to_pylist()) == kind
    keep &= events.column("a1").to_numpy() <= 200
    return events.filter(pa.array(keep))


def test_points_are_the_candidates_slices_and_hashes(node: StorageClient, events: pa.Table) -> None:
    gather = (Gather("B"), Gather("C", (("a2", int(KeyKind.STRING)),)))
    _, blobs = node.action("collect", Collect("q1", 0, Q, gather, 9).header())
    b, c = unpack_points(blobs[0], [0, 1], 9)
    want_b = candidates(events, "T_02").column("ts").cast(pa.int64()).to_numpy() // Q
    assert b.slices.tolist() == sorted(set(want_b.tolist()))
    rows = candidates(events, "T_03")
    pairs = sorted(
        set(
            zip(
                (rows.column("ts").cast(pa.int64()).to_numpy() // Q).tolist(),
                value_hashes(rows.column("a2"), KeyKind.STRING, 9).tolist(),
                strict=True,
            )
        )
    )
    assert list(zip(c.slices.tolist(), c.hashes[0].tolist(), strict=True)) == pairs


def test_slice_runs_keep_only_the_candidates_inside_for_good(node: StorageClient) -> None:
    gather = (Gather("A"),)
    _, blobs = node.action("collect", Collect("q1", 5, Q, gather).header())
    (every,) = unpack_points(blobs[0], [0], 8)
    inside = every.slices[::3]
    runs = SliceRuns(5, Q, IntervalSet(inside, inside)).to_bytes()
    _, blobs = node.action("collect", Collect("q1", 5, Q, gather, 8, True).header(), [runs])
    (kept,) = unpack_points(blobs[0], [0], 8)
    assert kept.slices.tolist() == inside.tolist()
    _, blobs = node.action("collect", Collect("q1", 5, Q, gather).header())  # remembered
    assert unpack_points(blobs[0], [0], 8)[0].slices.tolist() == inside.tolist()


@pytest.mark.parametrize(
    ("header", "blobs", "message"),
    [
        ({"base": 0, "q": Q, "vars": [["A"]], "bits": 3}, [], "bits must be 4 to 16"),
        ({"base": 0, "q": 0, "vars": [["A"]]}, [], "out of range"),
        ({"base": 0, "q": Q, "vars": []}, [], "1 to 64 variables"),
        ({"base": 0, "q": Q, "vars": [["A"]] * 65}, [], "1 to 64 variables"),
        ({"base": 0, "q": Q, "vars": [[7]]}, [], "each variable must be"),
        ({"base": 0, "q": Q, "vars": [["A", [["a2"]]]]}, [], "a hashed column must be"),
        ({"base": 0, "q": Q, "vars": [["Z"]]}, [], "'Z' is not a variable"),
        ({"base": 0, "q": Q, "vars": [["C", [["nope", 3]]]]}, [], "unknown column 'nope'"),
        ({"base": 0, "q": Q, "vars": [["C", [["a2", 99]]]]}, [], "unknown key kind"),
        ({"base": 0, "q": Q, "vars": [["A"]], "runs": 1}, [], "slice runs blob is missing"),
        (
            {"base": 0, "q": Q, "vars": [["A"]], "runs": 1},
            [SliceRuns(1, Q, IntervalSet([0], [5])).to_bytes()],
            "on another grid",
        ),
        ({"base": 0, "q": Q, "vars": [["A"]], "runs": 1}, [b"garbage"], "slice runs"),
        ({"base": -(2**63), "q": 1, "vars": [["A"]]}, [], "slice ids beyond 2..62"),
        ({"base": 10**18, "q": Q, "vars": [["A"]]}, [], "base after the earliest"),
    ],
)
def test_bad_collects_are_refused_clearly(
    node: StorageClient, header: dict[str, object], blobs: list[bytes], message: str
) -> None:
    with pytest.raises(StorageError, match=message):
        node.action("collect", {"query_id": "q1", **header}, blobs)
    assert node.action("health")[0]["status"] == "ok"
