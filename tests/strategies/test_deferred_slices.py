"""Executors take a deferred final pull in time slices: each call carries only the part of the
interval set inside its slice, and each node looks only at the rows of the slice's time range
(real storage nodes on loopback, the executors' slice loader called as Spark calls it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.filters import IntervalSet
from dfs_cer.filters.points import SliceRuns
from dfs_cer.io.shard import shard
from dfs_cer.spark.distributed import SlicePuller
from dfs_cer.strategies.pull import pull
from dfs_cer.strategies.slices import slice_request
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.messages import encode
from storage_node.launcher import LocalCluster

N = 40_000
SLICES = 16
#: a request's bytes besides its interval set (header, framing, compression)
OVERHEAD = 400


def events(n: int = N, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    return pa.table({"ts": ts, "v": rng.integers(0, 100, n)})


def q(body: str, rows: str = "ONE ROW PER MATCH") -> str:
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS f {rows} "
        f"PATTERN (A B) WITHIN 6 SECONDS DEFINE {body})"
    )


PAIR = "A AS A.v < 3, B AS B.v < 3"  # about a thousand intervals
CASES = [  # (strategy, query, the deferred pull's kind)
    ("dfs", q(PAIR), "pull_range"),
    ("dfs", q(PAIR, "ALL MATCHES"), "pull"),
    ("naive_dfs", q(PAIR, "ALL MATCHES"), "pull"),
    ("push_down", q(PAIR, "ALL MATCHES"), "pull_pushdown"),
    ("pull_all", q(PAIR), "pull_all"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, pa.Table]]:
    root: Path = tmp_path_factory.mktemp("slices")
    table = events()
    pq.write_table(table, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as nodes:
        yield nodes, table


def slice_rows(nodes: LocalCluster) -> int:
    total = 0
    for endpoint in nodes.endpoints:
        client = StorageClient(endpoint, nodes.token, timeout=10.0)
        try:
            total += int(client.action("stats")[0]["slice_rows"])
        finally:
            client.close()
    return total


def undivided(deferred: Any, header: dict[str, Any], blobs: list[bytes]) -> tuple[pa.Table, int]:
    """The deferred pull taken whole from every node with ``header`` and ``blobs``, and the
    fewest bytes one of its requests sent."""
    tables, sent = [], []
    for endpoint in deferred.endpoints:
        client = StorageClient(endpoint, deferred.token.reveal(), timeout=10.0)
        try:
            body = {"query_id": deferred.query_id, "kind": deferred.kind, **header}
            tables.append(client.pull(body, blobs))
            sent.append(sum(t.bytes_to_sn for t in client.transfers))
        finally:
            client.close()
    return pa.concat_tables(tables), min(sent)


def rows(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("ts", "v")), strict=True))


@pytest.mark.parametrize(("strategy", "sql", "kind"), CASES, ids=[f"{s}-{k}" for s, _, k in CASES])
def test_each_executor_call_sends_and_reads_only_its_slice(
    cluster: tuple[LocalCluster, pa.Table], strategy: str, sql: str, kind: str
) -> None:
    nodes, table = cluster
    result = pull(strategy, sql, nodes.endpoints, nodes.token, defer=True)
    deferred = result.deferred
    assert deferred is not None and deferred.kind == kind
    try:
        # the interval set is known as exact intervals, to cut per slice
        assert (deferred.cover is not None) == (kind in ("pull", "pull_range"))
        if deferred.cover is not None:
            assert len(deferred.cover) > 2 * SLICES
        assert deferred.span is not None
        lo, hi = deferred.span
        edges = np.linspace(lo, hi + 1, SLICES + 1).astype(np.int64)
        slices = [(int(a), int(b) - 1) for a, b in itertools.pairwise(edges)]
        load = SlicePuller(deferred, slices, table.schema)
        ts = table.column("ts").to_numpy()
        parts, most = [], 0.0
        for i, (a, b) in enumerate(slices):
            before = slice_rows(nodes)
            parts.append(load(i))
            to_sn, _, _, _, calls = load.drain()
            inside = deferred.cover.clip(a, b) if deferred.cover is not None else None
            blob = 16 * len(inside) if inside is not None else 0
            if inside is not None and inside.is_empty:
                assert calls == 0  # nothing of the slice is inside the intervals: no call
                continue
            sent = slice_request(kind, deferred.header, deferred.blobs, deferred.cover, a, b)
            assert sent is not None  # here: the slice's part, smaller than the whole set
            if inside is None:
                assert sent[1] == []
            else:  # the slice's exact intervals, or DFS's slice runs cut to it when smaller
                assert len(encode({}, sent[1])) <= len(encode({}, [inside.to_bytes()]))
            assert calls == len(nodes.endpoints)
            # the request carries the intervals inside its slice, never the whole set
            assert to_sn <= calls * (OVERHEAD + blob), (i, to_sn, blob)
            most = max(most, to_sn / calls)
            # each node looked at (at most) the rows of the slice's time range
            in_range = int(np.count_nonzero((ts >= a) & (ts <= b)))
            assert 0 < slice_rows(nodes) - before <= in_range, (i, in_range)
        # what each slice's request sent before: the undivided pull's interval set
        _, undivided_request = undivided(deferred, deferred.header, deferred.blobs)
        if deferred.cover is not None:  # one slice's request: a fraction of that
            assert 3 * most < undivided_request, (most, undivided_request)
        exact = {**deferred.header, "tis": "intervals"}
        cover = [deferred.cover.to_bytes()] if deferred.cover is not None else []
        whole, _ = undivided(deferred, exact if cover else deferred.header, cover)
        # the slices together are the undivided pull, row for row
        got = pa.concat_tables([p for p in parts if p.num_rows] or [table.schema.empty_table()])
        assert rows(got) == rows(whole) and got.num_rows > 0
    finally:
        deferred.close()


def test_a_slice_request_carries_the_smaller_of_its_part_and_the_whole_set() -> None:
    cover = IntervalSet([0, 100, 200, 300], [10, 110, 210, 310])
    whole = cover.to_bytes()
    header = {"tis": "swf"}
    assert slice_request("pull_all", {}, [b"x"], None, 0, 9) == ({}, [])
    assert slice_request("pull_pushdown", {}, [], None, 0, 9) == ({}, [])
    assert slice_request("pull", header, [b"swf"], None, 0, 9) == (header, [b"swf"])  # no cover
    assert slice_request("pull", header, [whole], cover, 20, 90) is None  # nothing inside
    swf = np.random.default_rng(1).bytes(400)  # a larger set that does not compress
    part = slice_request("pull_range", header, [swf], cover, 105, 205)
    assert part == ({"tis": "intervals"}, [IntervalSet([105, 200], [110, 205]).to_bytes()])
    small = b"\x00" * 20  # a whole set that encodes smaller than the part: sent as it is
    assert slice_request("pull", header, [small], cover, 0, 400) == (header, [small])


def test_dfs_slice_runs_are_cut_to_the_slice() -> None:
    base, q = 1_000, 10
    starts = np.cumsum(np.random.default_rng(4).integers(4, 40, 5_000))
    runs = SliceRuns(base, q, IntervalSet(starts, starts + 2))
    header, blob = {"tis": "slices"}, [runs.to_bytes()]
    lo, hi = base + 700 * q, base + 1_400 * q - 1
    got = slice_request("pull", header, blob, runs.to_time(), lo, hi)
    assert got is not None
    sent_header, sent = got
    assert len(encode({}, sent)) < len(encode({}, blob)) / 20  # as they travel
    inside = runs.to_time().clip(lo, hi)
    decoded = (
        SliceRuns.from_bytes(sent[0]).to_time()
        if sent_header["tis"] == "slices"
        else IntervalSet.from_bytes(sent[0])
    )
    ts = np.arange(lo, hi + 1)
    assert (decoded.contains(ts) == inside.contains(ts)).all()


def test_a_small_final_pull_is_not_left_to_executors(
    cluster: tuple[LocalCluster, pa.Table],
) -> None:
    """DFS knows, before its final pull, about how many rows it brings (the share of the nodes'
    time its interval set covers): fewer than ``defer_min_rows`` are pulled here (executors'
    tasks would cost seconds), and the rows are those of a pull made here."""
    nodes, table = cluster
    sql = q(PAIR)
    here = pull("dfs", sql, nodes.endpoints, nodes.token)
    small = pull(
        "dfs", sql, nodes.endpoints, nodes.token, defer=True, defer_min_rows=table.num_rows
    )
    assert small.deferred is None and rows(small.events) == rows(here.events)
    assert small.events.num_rows < table.num_rows
    assert any("pulled and matched here, not by executors" in n for n in small.trace.notes)
    # the same pull expected larger than the bound is left to them
    big = pull("dfs", sql, nodes.endpoints, nodes.token, defer=True, defer_min_rows=1)
    try:
        assert big.deferred is not None
    finally:
        if big.deferred is not None:
            big.deferred.close()
