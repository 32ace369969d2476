"""One storage node in this process, over a small shard set, for the transport tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dfs_cer.config import StorageConfig
from dfs_cer.datasets import synthetic_events
from dfs_cer.io.shard import shard
from storage_node.server import StorageNode
from storage_node.store import ShardStore
from tests.fixtures.tokens import TOKEN


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageNode]:
    root: Path = tmp_path_factory.mktemp("codes")
    pq.write_table(synthetic_events(500, seed=1), root / "events.parquet")
    shard(str(root / "events.parquet"), 1, str(root / "nodes"), name="t")
    server = StorageNode(
        "grpc+tcp://127.0.0.1:0",
        ShardStore(str(root / "nodes" / "node-00")),
        TOKEN,
        StorageConfig(),
    )
    yield server
    server.shutdown()
