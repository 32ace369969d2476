"""A storage node serving its share of a table in place (an Iceberg table or a Hive-style
parquet prefix; see :mod:`dfs_cer.io.tables`): no copy, no manifest of its own.

The node plans the table's files (one snapshot), keeps the files the table's assignment gives
it, and serves them like a shard set: rows decoded and sorted by time on load when they fit the
cache (files need not be sorted), else read per query, skipping files outside the query's time
ranges. A query pins one snapshot on every node (``open`` names it); a node asked for another
snapshot than the one it holds loads that one, and queries opened on the old one fail cleanly
("run the query again") rather than mix snapshots. A schema change commits new table metadata
without a snapshot: the node plans again when the metadata moved, so it serves the current
schema (renamed and added columns) as pyiceberg, Spark and Trino read it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from dfs_cer.config import StorageConfig, TablesConfig
from dfs_cer.errors import ProtocolError
from dfs_cer.io.files import FileLocation
from dfs_cer.io.shard import schema_fields
from dfs_cer.io.tables import DataFile, TablePlan, TableRef, node_share, plan_table, read_data_file
from dfs_cer.work import ROWS, Work
from storage_node.index import SortedProjection, ValueIndex
from storage_node.store import ShardStore, charged_scan


class TableStore(ShardStore):
    """One node's share of a table served in place."""

    def __init__(
        self, ref: TableRef, config: StorageConfig | None = None, tables: TablesConfig | None = None
    ) -> None:
        self.config = config or StorageConfig()
        self.tables = tables or TablesConfig()
        self.ref = ref
        self.location = FileLocation(pa.fs.LocalFileSystem(), ref.name, ref.text(), 0.0)
        self.cache_hits = 0
        self._cache_lock = threading.Lock()
        self.generation = 0
        #: data files and their (compressed) bytes read from storage since the node started
        self.files_read = 0
        self.bytes_read = 0
        self.plan: TablePlan | None = None
        self._install(self._plan(ref.snapshot))

    # --- planning ---------------------------------------------------------------------------

    def _plan(self, snapshot: int | None) -> TablePlan:
        return node_share(
            plan_table(self.ref, tables=self.tables, storage=self.config, snapshot=snapshot),
            self.tables,
        )

    def _install(self, plan: TablePlan) -> None:
        files = [f.to_dict() for f in plan.files]
        times = [f for f in plan.files if f.min_ts is not None and f.max_ts is not None]
        self.manifest: dict[str, Any] = {
            "table": plan.ref.name,
            "snapshot": plan.snapshot,
            "snapshot_ms": plan.snapshot_ms,
            "files": files,
            "rows": plan.rows,
            "time_column": plan.ref.time_column,
            "min_ts": min((f.min_ts for f in times), default=None),  # type: ignore[type-var]
            "max_ts": max((f.max_ts for f in times), default=None),  # type: ignore[type-var]
            "name": plan.ref.log_name,
            # the nodes of one table share its identity (their shares make the whole table)
            "shard_set": hashlib.sha256(
                f"{plan.identity}|{plan.ref.nodes}|{plan.ref.by}".encode()
            ).hexdigest()[:8],
            "node": plan.ref.node,
            "nodes": plan.ref.nodes,
            "partitioning": f"table-{plan.ref.by}",
            "event_key": [],
            "schema": schema_fields(plan.schema),
        }
        self.plan = plan
        self.files = [f.path for f in plan.files]
        self.data_digest = hashlib.sha256(
            json.dumps([plan.identity, plan.snapshot, files], sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        self.dataset = None
        self.time_column = plan.ref.time_column
        self.cached: pa.Table | None = None
        self._sorted: pa.Table | None = None
        self._indexes: dict[str, ValueIndex | None] = {}
        self._projections: dict[tuple[str, str], SortedProjection] = {}
        self._size: int | None = None
        self._uncached = 0

    @property
    def snapshot(self) -> int | None:
        assert self.plan is not None
        return self.plan.snapshot

    def current_snapshot(self) -> dict[str, Any]:
        """The snapshot a query starting now should pin: the table's current one (Iceberg; the
        reference's when it names one), with its commit time."""
        if self.ref.kind != "iceberg":
            return {}
        if self.ref.snapshot is not None:
            return {"snapshot": self.ref.snapshot, "snapshot_ms": self.manifest.get("snapshot_ms")}
        from dfs_cer.io.tables import load_iceberg

        snap = load_iceberg(
            self.ref, self.tables, self.config
        ).current_snapshot()  # the table's metadata only
        return (
            {} if snap is None else {"snapshot": snap.snapshot_id, "snapshot_ms": snap.timestamp_ms}
        )

    def snapshot_id(self) -> int | None:
        return self.snapshot

    def older(self, snapshot: int | None) -> bool:
        if snapshot is None or self.snapshot is None or self.ref.kind != "iceberg":
            return False
        from dfs_cer.io.tables import load_iceberg

        table = load_iceberg(self.ref, self.tables, self.config)
        asked, served = table.snapshot_by_id(snapshot), table.snapshot_by_id(self.snapshot)
        if asked is None or served is None:
            return False  # an unknown snapshot: planning it names the error
        return (asked.sequence_number or 0, asked.timestamp_ms) < (
            served.sequence_number or 0,
            served.timestamp_ms,
        )

    def switches(self, snapshot: int | None) -> bool:
        return snapshot is not None and self.ref.kind == "iceberg" and snapshot != self.snapshot

    def refresh(self, snapshot: int | None = None) -> bool:
        """Serve ``snapshot`` (Iceberg), else the table as it is now: a new snapshot, or files
        added under a Hive prefix, are loaded (late data); the cached rows are dropped. A table
        that cannot be planned raises and leaves the current state in place."""
        if snapshot is not None and self.ref.kind != "iceberg":
            raise ProtocolError(f"this storage node serves {self.ref.name}, which has no snapshots")
        if snapshot is not None and snapshot == self.snapshot and not self._metadata_moved():
            return False
        if snapshot is None and self.ref.snapshot is not None:
            return False  # the node serves the snapshot its reference names
        plan = self._plan(snapshot)
        assert self.plan is not None
        if (
            plan.snapshot == self.plan.snapshot
            and [f.to_dict() for f in plan.files] == self.manifest["files"]
            and plan.schema.equals(self.plan.schema)
            and plan.field_ids == self.plan.field_ids
            and plan.aliases == self.plan.aliases
        ):
            self.plan.metadata_location = (
                plan.metadata_location
            )  # (e.g. a property set: nothing to reload)
            return False  # (a Hive file rewritten in place is another version: reloaded)
        with self._cache_lock:
            self._install(plan)
            self.generation += 1
        return True

    def _metadata_moved(self) -> bool:
        """Has the Iceberg table committed new metadata since the node planned it? A schema
        change (rename, add column) commits no snapshot, and readers use the new schema."""
        if self.ref.kind != "iceberg":
            return False
        from dfs_cer.io.tables import load_iceberg

        assert self.plan is not None
        return (
            str(load_iceberg(self.ref, self.tables, self.config).metadata_location)
            != self.plan.metadata_location
        )

    # --- reading ----------------------------------------------------------------------------

    @property
    def schema(self) -> pa.Schema:
        assert self.plan is not None
        return self.plan.schema

    def _file_bytes(self) -> int:
        """Uncompressed size of the node's files (from their footers, read once per snapshot)."""
        if self._size is not None:
            return self._size
        assert self.plan is not None
        from dfs_cer.io.tables import file_footer

        self._size = sum(
            int(sum(m.row_group(i).total_byte_size for i in range(m.num_row_groups)))
            for m in (file_footer(self.plan, f) for f in self.plan.files)
        )
        return self._size

    def _parts(self, files: Sequence[DataFile]) -> Iterator[pa.Table]:
        assert self.plan is not None
        plan = self.plan
        for f in files:
            part = read_data_file(plan, f)
            self.files_read += 1
            self.bytes_read += f.bytes
            yield part

    def _read(self, files: Sequence[DataFile], work: Work | None) -> pa.Table:
        """The rows of ``files``, each file's charged to ``work`` as it is decoded."""
        assert self.plan is not None
        parts = []
        for part in self._parts(files):
            if work is not None:
                work.charge(part.nbytes, ROWS)
            parts.append(part)
        return pa.concat_tables(parts) if parts else self.plan.schema.empty_table()

    def scan(
        self,
        filter_: object = None,
        columns: list[str] | None = None,
        ranges: Any = None,
        condition: Any = None,
        work: Work | None = None,
    ) -> pa.Table:
        """Rows passing ``filter_``: from the cached rows when the share fits the cache, else read
        from the files that may hold a time inside ``ranges`` (all files when None) and one
        passing the input filter ``condition``'s bounds on the time column."""
        assert self.plan is not None
        if not self.plan.files:
            return (
                self.schema.empty_table()
                if columns is None
                else self.schema.empty_table().select(columns)
            )
        if self.cached is None and self._caches():
            with self._cache_lock:
                if self.cached is None and not self._uncached:
                    self._load_cache(self._parts(self.plan.files))
        elif self.cached is not None:
            self.cache_hits += 1
        if self.cached is not None:
            source = self.cached
        else:
            tests = time_tests(condition, self.schema, self.time_column)
            dtype = self.schema.field(self.time_column).type
            keep = [
                f
                for f in self.plan.files
                if f.min_ts is None
                or f.max_ts is None
                or (
                    (
                        ranges is None
                        or bool(np.any((ranges[:, 0] <= f.max_ts) & (f.min_ts <= ranges[:, 1])))
                    )
                    and may_hold(tests, f.min_ts, f.max_ts, self.time_column, dtype)
                )
            ]
            read = self._read(keep, work)
            try:
                return charged_scan(ds.dataset(read), filter_, columns, work)
            finally:  # the files' rows are dropped once filtered
                if work is not None:
                    work.uncharge(read.nbytes, ROWS)
        return charged_scan(ds.dataset(source), filter_, columns, work)

    def _name_bad_file(self, exc: Exception) -> None:
        return None  # read_data_file names the file and the snapshot itself

    def cache_stats(self) -> dict[str, int]:
        return {
            **super().cache_stats(),
            "files_read": self.files_read,
            "bytes_read": self.bytes_read,
        }


#: a comparison of the time column with a constant holds on an upward (``>``, ``>=``) or a
#: downward (``<``, ``<=``) closed set of times
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def time_tests(condition: Any, schema: pa.Schema, time_column: str) -> list[tuple[bool, Any]]:
    """The conjuncts of an input filter that compare the time column with a constant, as
    (upward closed?, the exact Arrow filter of the conjunct). A file whose last time fails an
    upward closed one, or whose first time fails a downward closed one, holds no passing row."""
    if condition is None:
        return []
    from dfs_cer.errors import DfsCerError
    from dfs_cer.query.expr import Between, BinaryOp, Column, conjuncts, walk
    from dfs_cer.query.input_filter import input_filter_expression

    out: list[tuple[bool, Any]] = []
    for c in conjuncts(condition):
        pieces = (
            [
                BinaryOp(op=">=", left=c.operand, right=c.low),
                BinaryOp(op="<=", left=c.operand, right=c.high),
            ]
            if isinstance(c, Between) and not c.negated
            else [c]
        )
        for p in pieces:
            if not isinstance(p, BinaryOp) or p.op not in _FLIP:
                continue
            column, other, op = p.left, p.right, p.op
            if isinstance(other, Column):
                column, other, op = other, column, _FLIP[op]
            if (
                not isinstance(column, Column)
                or column.name != time_column
                or any(isinstance(n, Column) for n in walk(other))
            ):
                continue
            try:
                out.append(
                    (
                        op in (">", ">="),
                        input_filter_expression(BinaryOp(op=op, left=column, right=other), schema),
                    )
                )
            except DfsCerError:
                continue  # not convertible exactly: no pruning by it
    return out


def may_hold(
    tests: list[tuple[bool, Any]], first: int, last: int, time_column: str, dtype: pa.DataType
) -> bool:
    """Can a file of times in [first, last] hold a row passing every test of ``time_tests``?"""
    for upward, expr in tests:
        value = last if upward else first
        raw = pa.array([value], pa.int32() if pa.types.is_date32(dtype) else pa.int64())
        probe = pa.table({time_column: raw.cast(dtype) if raw.type != dtype else raw})
        if ds.dataset(probe).to_table(filter=expr).num_rows == 0:
            return False
    return True
