"""DoGet tickets route by ``kind`` through the protocol table: a final pull's time slice, the
kinds that need no opened query, and the refusals, as before."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dfs_cer.events.time import time_ints
from dfs_cer.transport.client import NodeRefusedError, StorageClient
from storage_node.server import StorageNode
from tests.fixtures.tokens import TOKEN


def test_an_executor_takes_a_time_slice_of_a_final_pull(node: StorageNode) -> None:
    client = StorageClient(f"127.0.0.1:{node.port}", TOKEN, timeout=10.0)
    try:
        everything = client.pull({"kind": "pull_all"})  # needs no opened query
        ts = np.asarray(time_ints(everything.column(node.store.time_column)), np.int64)
        lo, hi = int(ts[len(ts) // 4]), int(ts[len(ts) // 2])
        part = client.pull({"kind": "pull_all", "slice": [lo, hi]})
        assert part.equals(everything.filter(pa.array((ts >= lo) & (ts <= hi))))
        with pytest.raises(
            NodeRefusedError,
            match="pull_times: slice applies to pull, pull_range, pull_all, pull_pushdown only",
        ):
            client.pull({"kind": "pull_times", "slice": [lo, hi]})
        with pytest.raises(
            NodeRefusedError, match="unknown query id 'q1'"
        ):  # the query first, then the kind
            client.pull({"kind": "nope", "query_id": "q1"})
    finally:
        client.close()
