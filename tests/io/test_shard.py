"""Shard sets keep one schema: the parquet storage schema, recorded exactly in every manifest."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dfs_cer.io.shard import decode_schema, shard, storage_schema
from storage_node.store import ShardStore


def test_every_node_and_file_agrees_on_the_storage_schema(tmp_path: Path) -> None:
    t = pa.table({"ts": pa.array([1, 2, 3], pa.timestamp("s")), "type": ["A", "B", "A"],
                  "z": pa.array([1, 2, 3], pa.timestamp("us", tz="Europe/Paris")),
                  "d": pa.array([Decimal(1), Decimal(2), Decimal(3)], pa.decimal128(30, 2)),
                  "l": pa.array([[1], [], None]), "s": pa.array(["x", "y", "x"]).dictionary_encode()})
    pq.write_table(t, tmp_path / "in.parquet")
    shard(str(tmp_path / "in.parquet"), 4, str(tmp_path / "out"))  # three rows, four nodes: one is empty
    expected = storage_schema(t.schema)
    assert expected.field("ts").type == pa.timestamp("ms")  # parquet has no second timestamps
    for k in range(4):
        node = tmp_path / "out" / f"node-{k:02d}"
        doc = json.loads((node / "manifest.json").read_text())
        assert decode_schema(doc["arrow_schema"]) == expected
        for f in doc["files"]:
            assert pq.read_schema(node / f["path"]).remove_metadata() == expected
        store = ShardStore(str(node))  # the start-up check passes, empty nodes included
        assert store.schema.remove_metadata() == expected
    assert sum(json.loads((tmp_path / "out" / f"node-{k:02d}" / "manifest.json").read_text())["rows"]
               for k in range(4)) == 3
