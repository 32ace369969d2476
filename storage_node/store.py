"""A storage node's shard set: manifest, parquet files, schema check at start-up, scans."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dfs_cer.config import StorageConfig
from dfs_cer.errors import StorageError
from dfs_cer.events.time import time_ints
from dfs_cer.io.files import FileLocation, filesystem_for, list_files
from dfs_cer.io.shard import decode_schema, read_manifest, schema_fields
from dfs_cer.work import ROWS, Work
from storage_node.index import SortedProjection, ValueIndex, build, indexable, project
from storage_node.rows import fits_one_array, in_time_order, sort, take


def footer_digest(meta: pq.FileMetaData) -> str:
    """What identifies a parquet file: its sizes and every column chunk's statistics, taken as
    stored (``FileMetaData.to_dict`` turns a nanosecond timestamp statistic into a Python
    datetime, which fails without pandas on a time below the microsecond)."""
    groups = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        chunks = []
        for j in range(group.num_columns):
            c = group.column(j)
            s = c.statistics
            stats = (
                None
                if s is None
                else [
                    s.has_min_max and s.min_raw,
                    s.has_min_max and s.max_raw,
                    s.has_null_count and s.null_count,
                    s.has_distinct_count and s.distinct_count,
                ]
            )
            chunks.append(
                [
                    c.path_in_schema,
                    c.file_offset,
                    c.num_values,
                    c.total_compressed_size,
                    c.total_uncompressed_size,
                    c.compression,
                    stats,
                ]
            )
        groups.append([group.num_rows, group.total_byte_size, chunks])
    # the schema's columns as text (str() of the schema itself starts with its memory address,
    # which differs between processes: a restarted node would seem to serve other data)
    schema = [str(meta.schema.column(i)) for i in range(len(meta.schema))]
    doc = [meta.created_by, meta.num_rows, meta.serialized_size, schema, groups]
    return hashlib.sha256(json.dumps(doc, default=repr).encode()).hexdigest()


class ShardStore:
    """The parquet shards under one location (a ``node-XX`` directory, local or S3)."""

    def __init__(self, data: str, config: StorageConfig | None = None) -> None:
        self.config = config or StorageConfig()
        self.location: FileLocation = filesystem_for(data, self.config)
        self.cache_hits = 0
        self._cache_lock = threading.Lock()
        #: bumped whenever appended files are picked up: queries opened before see other data
        self.generation = 0
        self._load(read_manifest(self.location))

    def _load(self, manifest: dict[str, Any]) -> None:
        files = [self.location.join(str(f["path"])) for f in manifest.get("files", [])]
        present = set(list_files(self.location))
        missing = [f for f in files if f not in present]
        if missing:
            raise StorageError(
                f"shard files listed in {self.location.uri}/manifest.json are missing: "
                f"{missing[:3]}"
            )
        rows = {
            self.location.join(str(f["path"])): f.get("rows") for f in manifest.get("files", [])
        }
        known = set(getattr(self, "files", []))
        digests = dict(getattr(self, "_digests", {}))
        for f in files:  # every new file: a readable parquet footer, the manifest's schema and rows
            if f not in known:
                digests[f] = self._check_file(
                    f, manifest.get("schema"), rows.get(f), str(manifest.get("time_column", "ts"))
                )
        try:
            dataset = (
                ds.dataset(files, filesystem=self.location.fs, format="parquet") if files else None
            )
        except (OSError, pa.ArrowInvalid) as exc:
            raise StorageError(f"cannot open shards under {self.location.uri}: {exc}") from exc
        self.manifest = manifest
        self.files = files
        self._digests = digests
        #: what identifies the data served: the manifest and every file's footer (sizes and
        #: column statistics); a restarted node that serves other data differs here
        self.data_digest = hashlib.sha256(
            json.dumps(
                [manifest, [digests[f] for f in files]], sort_keys=True, default=str
            ).encode()
        ).hexdigest()[:16]
        self.dataset = dataset
        self.time_column = str(manifest.get("time_column", "ts"))
        self.cached: pa.Table | None = None  # the whole shard set, decoded, once a scan loaded it
        self._sorted: pa.Table | None = None  # the same, sorted by time
        #: value indexes over ``_sorted`` by column (storage_node.index; None: not worth one)
        self._indexes: dict[str, ValueIndex | None] = {}
        #: per (indexed column, integer column): the index's rows ordered by that column
        self._projections: dict[tuple[str, str], SortedProjection] = {}
        self._size: int | None = None
        #: decoded bytes seen when loading the cache was given up (more than storage.cache_bytes)
        self._uncached = 0
        #: ``_sorted`` and its times as integers (binary searches of time slices)
        self._sorted_times: tuple[pa.Table, np.ndarray] | None = None

    def _check_file(self, path: str, schema: object, rows: object, time_column: str) -> str:
        def footer() -> pq.FileMetaData:
            with self.location.fs.open_input_file(path) as fh:
                return pq.ParquetFile(fh).metadata

        try:
            meta = self.location.retrying(path, footer)
        except pa.ArrowInvalid as exc:  # truncated or not parquet: the footer cannot be read
            raise StorageError(
                f"shard file {path} is not a readable parquet file ({exc}); re-shard the data or "
                "restore the file"
            ) from None
        got = schema_fields(meta.schema.to_arrow_schema())
        if got != schema:
            diff = [(a, b) for a, b in zip(got, schema or [], strict=False) if a != b]  # type: ignore[call-overload]
            raise StorageError(
                f"shard {path} does not match the manifest schema: {diff[:3] or 'column count'}; "
                "re-shard the data or fix the manifest"
            )
        nulls = self._null_times(path, meta, time_column)
        if nulls:
            raise StorageError(
                f"shard file {path} has {nulls} row{'s' if nulls > 1 else ''} without a "
                f"{time_column} (NULL): every event needs a time; re-shard the data (dfs-cer shard "
                "refuses such rows)"
            )
        if isinstance(rows, int) and meta.num_rows != rows:
            raise StorageError(
                f"shard file {path} holds {meta.num_rows} rows, its manifest says {rows}; "
                "re-shard the data or restore the file"
            )
        return footer_digest(meta)

    def _null_times(self, path: str, meta: pq.FileMetaData, time_column: str) -> int:
        """Rows of the file whose time is NULL: from the footer's statistics, else read."""
        total = 0
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            column = next(
                (
                    group.column(j)
                    for j in range(group.num_columns)
                    if group.column(j).path_in_schema == time_column
                ),
                None,
            )
            if column is None:
                return 0  # no such column: the schema check names it
            stats = column.statistics
            if stats is None or not stats.has_null_count:
                with self.location.fs.open_input_file(path) as fh:
                    return int(pq.read_table(fh, columns=[time_column]).column(0).null_count)
            total += int(stats.null_count)
        return total

    def refresh(self, snapshot: int | None = None) -> bool:
        """Pick up files added to the shard set since it was loaded (``dfs-cer shard --append``):
        re-read the manifest and, when it changed, the dataset (the cache is dropped). A manifest
        that cannot be read or names missing files raises StorageError and leaves the current
        state in place (the query that asked fails with the reason; the node keeps serving)."""
        if snapshot is not None:
            from dfs_cer.errors import ProtocolError

            raise ProtocolError(
                f"this storage node serves the shard set {self.location.uri}, which has no "
                "snapshots"
            )
        manifest = read_manifest(self.location)
        if manifest == self.manifest:
            return False
        with self._cache_lock:
            self._load(manifest)
            self.generation += 1
        return True

    def switches(self, snapshot: int | None) -> bool:
        """Would serving ``snapshot`` replace the data queries now open read? (Never for a shard
        set: appended files are picked up as they come.)"""
        return False

    def older(self, snapshot: int | None) -> bool:
        """Was table snapshot ``snapshot`` committed before the one served? (No for shard sets.)"""
        return False

    def snapshot_id(self) -> int | None:
        return None

    def served_snapshot(self) -> dict[str, int]:
        """``{"snapshot": id}`` of the table snapshot served, for replies (``{}``: none)."""
        sid = self.snapshot_id()
        return {} if sid is None else {"snapshot": sid}

    def current_snapshot(self) -> dict[str, Any]:
        """A table's snapshot for a query starting now (``{}``: a shard set has none)."""
        return {}

    @property
    def name(self) -> str | None:
        """The log's name (what a query's FROM must say); None: a shard set written before logs
        had names (not checked)."""
        name = self.manifest.get("name")
        return name if isinstance(name, str) else None

    @property
    def schema(self) -> pa.Schema:
        if self.dataset is None:  # no shard file (an empty node): the manifest's exact schema
            if "arrow_schema" in self.manifest:
                return decode_schema(str(self.manifest["arrow_schema"]))
            try:  # manifests written before arrow_schema: type names (simple types only)
                return pa.schema(
                    [(f["name"], pa.type_for_alias(f["type"])) for f in self.manifest["schema"]]
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise StorageError(
                    f"the manifest under {self.location.uri} has no arrow_schema and its schema "
                    f"cannot be read from type names ({exc}); re-shard the data"
                ) from None
        return self.dataset.schema

    def estimate_bytes(self) -> int:
        """What one scan of the shard set holds: the decoded rows' size once they are cached,
        else the files' uncompressed size (which counts dictionary-encoded strings encoded: a
        scan charges what it decodes as it decodes it)."""
        if self.cached is not None:
            return int(self.cached.nbytes)
        return max(self._file_bytes(), self._uncached)

    def _file_bytes(self) -> int:
        if self._size is not None:
            return self._size
        total = 0
        if self.dataset is None:
            return 0
        for fragment in self.dataset.get_fragments():
            meta = fragment.metadata
            total += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        self._size = total
        return total

    def _caches(self) -> bool:
        """Whether the rows are (or may be) kept in memory: their size fits storage.cache_bytes."""
        return self.cached is not None or (
            not self._uncached and 0 < self.estimate_bytes() <= self.config.cache_bytes
        )

    def _load_cache(self, parts: Iterable[pa.Table | pa.RecordBatch]) -> None:
        """Keep the rows ``parts`` decodes sorted by time, unless they pass storage.cache_bytes
        (then they are read from the files by every scan)."""
        loaded = by_time(parts, self.time_column, self.config.cache_bytes)
        if isinstance(loaded, int):
            self._uncached = loaded
        else:
            self.cached = self._sorted = loaded

    def scan(
        self,
        filter_: object = None,
        columns: list[str] | None = None,
        ranges: Any = None,
        condition: Any = None,
        work: Work | None = None,
    ) -> pa.Table:
        """Rows passing ``filter_``. Shard sets whose decoded size fits ``storage.cache_bytes``
        are read once and filtered in memory afterwards (shards are immutable while served).
        ``ranges``, ``condition``: the time ranges and input filter the caller keeps (hints for
        skipping files; unused here, where the filter's row-group statistics prune). With a
        query's ``work``, the rows kept are charged to it batch by batch as they are decoded."""
        if self.dataset is None:
            return self.schema.empty_table()
        # transient read errors (S3) are retried within storage.s3_retry_seconds
        try:
            return self.location.retrying(
                f"shards under {self.location.uri}", lambda: self._scan(filter_, columns, work)
            )
        except (StorageError, pa.ArrowInvalid) as exc:
            self._name_bad_file(exc)
            raise

    def _name_bad_file(self, exc: Exception) -> None:
        """A scan failed: when one shard file cannot be decoded (a corrupt page), say which."""
        for f in self.files:
            try:
                with self.location.fs.open_input_file(f) as fh:
                    pq.read_table(fh)
            except (OSError, pa.ArrowInvalid) as bad:
                raise StorageError(
                    f"shard file {f} cannot be read ({bad}); restore it or re-shard the data"
                ) from exc

    def _scan(self, filter_: object, columns: list[str] | None, work: Work | None) -> pa.Table:
        assert self.dataset is not None
        if self.cached is None and self._caches():
            with self._cache_lock:
                if self.cached is None and not self._uncached:  # concurrent first scans load once
                    # kept sorted by time: the rows by time are the cache itself (one copy)
                    self._load_cache(self.dataset.to_batches())
        elif self.cached is not None:
            self.cache_hits += 1
        # every row, copies of an event included: which copy stands for an event depends on the
        # query (its PARTITION BY, input filter and dedup), so each query resolves them itself
        source = ds.dataset(self.cached) if self.cached is not None else self.dataset
        return charged_scan(source, filter_, columns, work)

    def sorted_rows(self, work: Work | None = None) -> pa.Table:
        """Every row sorted by time (ties in file order); the cache itself when the shard set
        fits it (group opens, whole-range pulls and indexes then skip the sort); else read and
        sorted, charged to ``work``."""
        if self._sorted is not None:
            self.cache_hits += 1
            return self._sorted
        if self.cached is None and self._caches():
            self.scan(columns=[])  # loads the cache, which is the rows by time: no second copy
            if self._sorted is not None:
                return self._sorted
        table = sort(self.scan(work=work), self.time_column, work)
        if self.cached is not None:
            with self._cache_lock:
                self._sorted = table
        return table

    def rows_between(self, lo: int, hi: int, work: Work | None = None) -> pa.Table:
        """The rows with a time in ``[lo, hi]`` (integers in the time column's units, see
        :func:`dfs_cer.events.time.time_ints`), ordered as :meth:`sorted_rows` orders them: a
        binary search of the rows kept in memory, else a scan pruned by the row groups' time
        statistics and sorted; never the whole shard set read and sorted."""
        rows = self._sorted
        column = self.time_column
        if rows is None and self._caches():
            rows = self.sorted_rows(work)  # loads the cache: kept sorted by time
        if rows is None:  # not kept in memory
            kind = self.schema.field(column).type
            if pa.types.is_integer(kind) or pa.types.is_temporal(kind):
                bounds = time_bounds(kind, lo, hi)
                if bounds is None:
                    return self.schema.empty_table()
                where = (ds.field(column) >= bounds[0]) & (ds.field(column) <= bounds[1])
                return sort(self.scan(where, work=work), column, work)
        table: pa.Table = self.sorted_rows(work) if rows is None else rows
        known = self._sorted_times
        if known is None or known[0] is not table:
            known = (table, time_ints(table.column(column)))
            if table is self._sorted:
                self._sorted_times = known
        ts = known[1]
        first = int(np.searchsorted(ts, lo, side="left"))
        return table.slice(first, max(0, int(np.searchsorted(ts, hi, side="right")) - first))

    def preload(self) -> list[str]:
        """Load the cached rows (when the shard set fits the cache) and build the value index of
        every string column with few values (a sample decides); the columns indexed."""
        if not self.files or not self._caches():
            return []
        rows = self.sorted_rows()
        indexed = []
        for field in rows.schema:
            if field.name == self.time_column or not indexable(field.type, rows.column(field.name)):
                continue
            if self.value_index(field.name) is not None:
                indexed.append(field.name)
        return indexed

    def value_index(self, column: str) -> tuple[pa.Table, ValueIndex] | None:
        """The rows by time and the value index of ``column`` over them (built on first use,
        both from one snapshot: files appended meanwhile cannot mix them), or None when the
        shard set is not kept in memory or the column has too many values."""
        if self._sorted is None and self.cached is not None:
            self.sorted_rows()  # kept with the cache: sorted once for every later query
        elif self._sorted is not None:
            self.cache_hits += 1  # a read served from memory, as a cached scan is
        with self._cache_lock:
            rows = self._sorted
            if rows is None:
                return None
            if column not in self._indexes:
                self._indexes[column] = build(rows.column(column))
            index = self._indexes[column]
        return None if index is None else (rows, index)

    def projection(
        self, column: str, key: str
    ) -> tuple[pa.Table, ValueIndex, SortedProjection] | None:
        """The rows by time, the value index of ``column`` and its rows ordered by the integer
        column ``key`` per value (built on first use, from the same snapshot), or None."""
        indexed = self.value_index(column)
        if indexed is None:
            return None
        rows, index = indexed
        with self._cache_lock:
            current = self._sorted
            if current is None or current is not rows:  # files appended meanwhile: the caller scans
                return None
            if (column, key) not in self._projections:
                self._projections[(column, key)] = project(index, current.column(key))
            return rows, index, self._projections[(column, key)]

    def index_bytes(self) -> int:
        """Bytes the value indexes and their sorted projections hold."""
        return sum(i.nbytes for i in self._indexes.values() if i is not None) + sum(
            p.nbytes for p in self._projections.values()
        )

    def cache_stats(self) -> dict[str, int]:
        return {
            "cached_bytes": self.cached.nbytes if self.cached is not None else 0,
            "cache_hits": self.cache_hits,
            "index_bytes": self.index_bytes(),
        }


#: rows per batch of a charged scan: a batch is charged once decoded, so the node passes the
#: budget by one batch at most (16,384 rows of 2 kB strings: 32 MB)
SCAN_ROWS = 16_384
#: a charged scan's batches are gathered into chunks of this size (copied together while the
#: batches are still held: the most a scan holds twice)
GATHER_BYTES = 8 * 1024**2


def charged_scan(
    source: ds.Dataset, filter_: object, columns: list[str] | None, work: Work | None
) -> pa.Table:
    """The rows of ``source`` passing ``filter_``; with a query's ``work``, charged to it batch
    by batch as the scan decodes them (what it took is given back when the scan fails), and
    gathered into chunks of :data:`GATHER_BYTES` (a table of few chunks: later takes copy few
    chunks together)."""
    if work is None:
        return source.to_table(filter=filter_, columns=columns)
    scanner = source.scanner(filter=filter_, columns=columns, batch_size=SCAN_ROWS)
    parts: list[pa.Table] = []
    pending: list[pa.RecordBatch] = []
    held = waiting = 0

    def gather() -> None:
        nonlocal waiting
        part = pa.Table.from_batches(pending, schema=scanner.projected_schema)
        if len(pending) > 1:
            work.charge(waiting, ROWS)  # the chunk, while its batches are still held
            try:
                part = part.combine_chunks()
            finally:
                work.uncharge(waiting, ROWS)
        parts.append(part)
        pending.clear()
        waiting = 0

    try:
        for batch in scanner.to_batches():
            work.charge(batch.nbytes, ROWS)
            held += batch.nbytes
            pending.append(batch)
            waiting += batch.nbytes
            if waiting >= GATHER_BYTES:
                gather()
        if pending or not parts:
            gather()
    except BaseException:
        work.uncharge(held, ROWS)
        raise
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def by_time(
    parts: Iterable[pa.Table | pa.RecordBatch], time_column: str, cap: int | None = None
) -> pa.Table | int:
    """The rows of ``parts`` sorted by ``time_column`` (stable: ties keep their order), one chunk
    per column (a take from a chunked column concatenates it first: every later take of a query
    would copy the whole column; a column too large for one array stays in chunks). Built a
    column at a time, each input column released once concatenated, so that no more than one
    column is held twice; rows already in time order (shard files are written sorted) are only
    concatenated. With a ``cap``, reading stops once the decoded parts pass it: the bytes read
    then (an int) instead of a table."""
    loaded = []
    size = 0
    for part in parts:
        size += part.nbytes
        if cap is not None and size > cap:
            return size
        loaded.append(part if isinstance(part, pa.Table) else pa.Table.from_batches([part]))
    if not loaded:
        return size
    table = pa.concat_tables(loaded)
    del loaded
    order = None
    if not in_time_order(table.column(time_column)):
        order = pc.sort_indices(table, [(time_column, "ascending")])
        if len(order) < 2**31:
            order = order.cast(pa.int32())  # 4 bytes per row instead of 8
    schema = table.schema
    columns: list[pa.ChunkedArray | None] = list(table.columns)
    del table
    out = []
    for i in range(len(columns)):  # not enumerate: its cached tuple would keep the input alive
        column = columns[i]
        assert column is not None
        columns[i] = None
        if not fits_one_array(column):  # taken chunk by chunk, into bounded chunks
            rows = np.arange(len(column)) if order is None else np.asarray(order, np.int64)
            out.append(take(pa.table({"c": column}), rows).column(0))
            del column
            continue
        whole = column.combine_chunks()
        del column
        out.append(whole if order is None else whole.take(order))
        del whole
    return pa.Table.from_arrays(out, schema=schema)


def time_bounds(kind: pa.DataType, lo: int, hi: int) -> tuple[pa.Scalar, pa.Scalar] | None:
    """``[lo, hi]`` (integer times) as scalars of an integer or temporal time column's type
    ``kind`` for a scan filter, clamped to what the type holds; None when no value of the type
    lies inside."""
    storage = (
        kind if pa.types.is_integer(kind) else pa.int64() if kind.bit_width == 64 else pa.int32()
    )
    info = np.iinfo(storage.to_pandas_dtype())
    lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
    if lo > hi:
        return None
    return pa.scalar(lo, storage).cast(kind), pa.scalar(hi, storage).cast(kind)
