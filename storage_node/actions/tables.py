"""What the node serves, for the compute node to plan with: the shard set's (or table
snapshot's) ``files`` and its exact Arrow ``schema``."""

from __future__ import annotations

from typing import Any

from dfs_cer.io.shard import schema_digest
from storage_node.actions.base import Family, Reply, snapshot_of


class TableActions(Family):
    """``files`` and ``schema``."""

    def files(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """The shard set's files (with time bounds and --append batch tags), of the snapshot the
        request pins."""
        store = self.node.store
        with self.node.pinned(snapshot_of(header)):
            return {
                "files": store.manifest.get("files", []),
                "time_column": store.time_column,
                **store.served_snapshot(),
            }, []

    def schema(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """The shard set's exact Arrow schema (and its digest), and the log's name."""
        schema = self.node.store.schema
        name = self.node.store.name
        return {"digest": schema_digest(schema), **({"table": name} if name else {})}, [
            schema.serialize().to_pybytes()
        ]
