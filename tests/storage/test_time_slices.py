"""A node's rows of one time range (an executor's slice): a binary search of the rows it keeps in
memory, or a scan the time column's statistics prune when it keeps none; the same rows, in the
same order, as cutting every row by time, for integer and timestamp time columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.config import StorageConfig
from dfs_cer.events.time import time_ints
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import NodeRefusedError, StorageClient
from storage_node.server import StorageNode
from storage_node.store import ShardStore
from tests.fixtures.tokens import TOKEN


def shard_set(root: Path, timestamps: bool) -> str:
    rng = np.random.default_rng(5)
    n = 6_000
    ts = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    table = pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("ms")) if timestamps else pa.array(ts),
            "v": rng.integers(0, 10, n),
        }
    )
    order = rng.permutation(n)  # files out of time order: ties keep the files' order
    pq.write_table(table.take(pa.array(order)), root / "events.parquet", row_group_size=500)
    shard(str(root / "events.parquet"), 1, str(root / "nodes"), name="t")
    return str(root / "nodes" / "node-00")


@pytest.mark.parametrize("timestamps", [False, True], ids=["integers", "timestamps"])
@pytest.mark.parametrize("cache_bytes", [0, 1024**3], ids=["scanned", "in-memory"])
def test_rows_between_are_the_rows_of_the_range_by_time(
    tmp_path: Path, timestamps: bool, cache_bytes: int
) -> None:
    store = ShardStore(shard_set(tmp_path, timestamps), StorageConfig(cache_bytes=cache_bytes))
    every = store.sorted_rows()
    ts = np.asarray(time_ints(every.column("ts")), np.int64)
    for lo, hi in [(100, 900), (ts[0], ts[0]), (-(2**62), 5), (ts[-1] - 3, 2**62), (-9, -1)]:
        got = store.rows_between(int(lo), int(hi))
        assert got.equals(every.filter(pa.array((ts >= lo) & (ts <= hi)))), (lo, hi)
    assert (store.cached is not None) == (cache_bytes > 0)


def test_a_slice_pull_reads_only_its_range_on_a_node_that_keeps_no_rows(tmp_path: Path) -> None:
    node = StorageNode(
        "grpc+tcp://127.0.0.1:0",
        ShardStore(shard_set(tmp_path, True), StorageConfig(cache_bytes=0)),
        TOKEN,
        StorageConfig(cache_bytes=0),
    )
    client = StorageClient(f"127.0.0.1:{node.port}", TOKEN, timeout=10.0)
    try:
        everything = client.pull({"kind": "pull_all"})
        ts = np.asarray(time_ints(everything.column("ts")), np.int64)
        lo, hi = int(ts[1_000]), int(ts[1_400])
        part = client.pull({"kind": "pull_all", "slice": [lo, hi]})
        assert part.equals(everything.filter(pa.array((ts >= lo) & (ts <= hi))))
        assert client.action("stats")[0]["slice_rows"] == part.num_rows < ts.size // 10
        assert node.store.cached is None
        for bad in ([2**70, 2**71], [5, 1], [1.5, 2], [1]):
            with pytest.raises(NodeRefusedError, match=r"slice must be \[lo, hi\], two 64-bit"):
                client.pull({"kind": "pull_all", "slice": bad})
    finally:
        client.close()
        node.shutdown()
