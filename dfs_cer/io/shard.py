"""``dfs-cer shard``: split an event log into one shard set per storage node.

The input (parquet or CSV, a file or a directory) is streamed in batches of ``batch_rows`` rows (a
CSV's column types are decided from every value first); each batch is routed row by row to a node,
sorted by time and written as a parquet file of that node (row groups of 64k rows, so time
predicates prune). Each node gets ``manifest.json``: schema, files with row counts and time bounds,
per-type counts. Nothing holds the whole input in memory.

Partitionings (paper §VI-C2): ``random`` (round-robin, the default; by a hash of the time and
event key when one is given, so copies of an event share a node), ``time`` (30-minute windows to
pseudo-random nodes) and ``type`` (all events of one type on one node).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dfs_cer.config import StorageConfig, TablesConfig
from dfs_cer.errors import DfsCerError, StorageError
from dfs_cer.events.time import time_ints
from dfs_cer.io.files import FileLocation, filesystem_for

MANIFEST = "manifest.json"
ROW_GROUP = 65_536
PARTITIONINGS = ("random", "time", "type")
TIME_WINDOW_SECONDS = 1800


class ShardError(DfsCerError):
    """Bad sharding input or options."""

    exit_code = 2
    code = "shard"


@dataclass
class NodeManifest:
    node: int
    files: list[dict[str, object]]
    rows: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    type_counts: dict[str, int] | None = None
    #: duplicate events ``--dedup`` dropped from the whole input (the same on every node)
    duplicates_dropped: int = 0
    #: the time column's type (min_ts and max_ts are its stored integers)
    time_type: pa.DataType | None = None
    #: the log's name (what a query's FROM says); None: a shard set written before logs had one
    name: str | None = None
    #: the shard set's identity (random, written once): its nodes say the same
    shard_set: str | None = None


def _time_ints(col: pa.Array) -> np.ndarray:
    if not (pa.types.is_temporal(col.type) or pa.types.is_integer(col.type)):
        raise ShardError(f"time column has type {col.type}; use a timestamp or integer column")
    return np.asarray(time_ints(col), np.int64)


def window_units(dtype: pa.DataType) -> int:
    """The length of a time-partitioning window in the time column's units."""
    unit = dtype.unit if pa.types.is_timestamp(dtype) else "s"
    return TIME_WINDOW_SECONDS * {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit]


def _node_of(
    partitioning: str,
    nodes: int,
    offset: int,
    batch: pa.RecordBatch,
    time_column: str,
    type_column: str,
    event_key: tuple[str, ...] = (),
) -> np.ndarray:
    n = batch.num_rows
    if partitioning == "random" and event_key:
        # by a hash of (time, event key): every copy of an event, late ones included, on one node
        from dfs_cer.events.identity import row_hashes

        hashes = row_hashes(pa.Table.from_batches([batch]), [time_column, *event_key])
        return (hashes % np.uint64(nodes)).astype(np.int64)
    if partitioning == "random":
        return (np.arange(offset, offset + n) % nodes).astype(np.int64)
    if partitioning == "time":
        col = batch.column(time_column)
        windows = np.floor_divide(_time_ints(col), window_units(col.type))
        mixed = (windows.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
        return (mixed % np.uint64(nodes)).astype(np.int64)
    column = batch.column(type_column)
    if pa.types.is_floating(column.type):  # -0.0 and 0.0 are one PARTITION BY value: one node
        column = pc.add(column, pa.scalar(0.0, column.type))
    values = column.cast(pa.string()).to_pylist()
    lookup = {v: zlib.crc32(str(v).encode()) % nodes for v in set(values)}
    return np.array([lookup[v] for v in values], np.int64)


def _input_dataset(
    path: str,
    config: StorageConfig,
    tables: TablesConfig | None = None,
    column_types: Mapping[str, pa.DataType] | None = None,
    null_values: Sequence[str] = (),
) -> Any:
    from dfs_cer.io.csvfiles import CsvInput
    from dfs_cer.io.tables import TableInput, is_table, plan_table

    csv = path.endswith(".csv")
    if (column_types or null_values) and not csv:
        option = "--schema" if column_types else "--null-values"
        raise ShardError(
            f"{option} applies to CSV input (a path ending in .csv), not {path}; parquet and "
            "tables carry their types and NULLs"
        )
    if is_table(path):  # an Iceberg table or a Hive-style prefix, read in place
        return TableInput(plan_table(path, tables=tables, storage=config))
    loc = filesystem_for(path, config)
    if csv:  # column types decided from every value, not pyarrow's first block
        return CsvInput(loc, column_types, null_values)
    try:
        return ds.dataset(loc.path, filesystem=loc.fs, format="parquet")
    except FileNotFoundError:
        raise ShardError(
            f"cannot read input {path}: no such file or directory; check --input"
        ) from None
    except pa.ArrowInvalid as exc:
        raise ShardError(f"cannot read input {path}: {exc}") from exc


def _deduplicated(
    dataset: Any, time_column: str, event_key: tuple[str, ...], batch_rows: int
) -> tuple[Iterator[pa.RecordBatch], Callable[[], None]]:
    """The dataset without duplicate events, streamed from DuckDB (which spills to disk when the
    distinct set does not fit in memory): rows equal in every column, or, with an event key, in
    the time and key columns (the first in the order of the other columns is kept)."""
    import duckdb

    con = duckdb.connect()
    con.register("events", dataset.reader(batch_rows) if hasattr(dataset, "reader") else dataset)

    def quoted(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    if event_key:
        identity = ", ".join(quoted(c) for c in (time_column, *event_key))
        rest = ", ".join(quoted(n) for n in dataset.schema.names)
        sql = (
            f"SELECT * FROM events QUALIFY row_number() OVER (PARTITION BY {identity} ORDER BY "
            f"{rest}) = 1"
        )
    else:
        sql = "SELECT DISTINCT * FROM events"
    reader = con.sql(sql).to_arrow_reader(batch_rows)
    assert reader is not None

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield batch.cast(dataset.schema) if batch.schema != dataset.schema else batch

    return batches(), con.close


def shard(
    input_path: str,
    nodes: int,
    to: str,
    *,
    partitioning: str = "random",
    time_column: str = "ts",
    type_column: str = "type",
    event_key: tuple[str, ...] = (),
    batch_rows: int = 1_000_000,
    dedup: bool = False,
    append: bool = False,
    config: StorageConfig | None = None,
    progress: Callable[[int], None] | None = None,
    tables: TablesConfig | None = None,
    column_types: Mapping[str, pa.DataType] | None = None,
    null_values: Sequence[str] = (),
    name: str | None = None,
) -> list[NodeManifest]:
    """Write ``nodes`` shard sets under ``to`` (``to/node-00``, ``to/node-01``, ...).

    ``name`` is the log's name, which queries read it by (``FROM name``); default: the input's
    (``ticks.parquet`` and ``ticks.csv`` hold ``ticks``; a table, its own name). Every manifest
    records it, with an identity of the shard set the nodes report (so a compute node can tell
    shard sets written separately apart).

    ``dedup`` drops duplicate events of the input first: rows equal in every column, or equal
    in the time column and ``event_key`` when one is given (never the time alone).
    ``append`` adds the input to existing shard sets as new files (late data): the manifests
    keep their files and list the new ones with a ``batch`` tag; schema, partitioning, time
    column and event key must be those of the existing sets, and the log keeps its name
    (``name``, when given, must be it; it names a shard set written before logs had names).
    Duplicates of events already stored are dropped by the compute node when it matches.
    ``column_types`` (CSV input only) declares some columns' types; the others are decided from
    every value (:mod:`dfs_cer.io.csvtypes`). ``null_values`` (CSV input only) are the field
    values read as NULL besides the empty field (R writes ``NA``)."""
    config = config or StorageConfig()
    if nodes < 1:
        raise ShardError(f"--nodes must be at least 1, got {nodes}")
    if partitioning not in PARTITIONINGS:
        raise ShardError(
            f"--partitioning must be one of {', '.join(PARTITIONINGS)}, got {partitioning!r}"
        )
    from dfs_cer.query.names import name_problem

    if name is not None:
        problem = name_problem(name)
        if problem is not None:
            raise ShardError(f"--name {name!r} cannot name a log: {problem}")
    dataset = _input_dataset(input_path, config, tables, column_types, null_values)
    schema = storage_schema(dataset.schema)
    for column, option in ((time_column, "--time-column"),):
        if column not in schema.names:
            raise ShardError(
                f"{option} {column} is not a column of the input; columns: "
                f"{', '.join(schema.names)}"
            )
    nulls = (
        dataset.null_count(time_column)
        if hasattr(dataset, "null_count")
        else dataset.count_rows(filter=pc.field(time_column).is_null())
    )
    if nulls:
        raise ShardError(
            f"{nulls} row{'s' if nulls > 1 else ''} of the input ha{'ve' if nulls > 1 else 's'} no "
            f"{time_column} (NULL); every event needs a time: drop or fill them first (e.g. "
            f"SELECT * FROM input WHERE {time_column} IS NOT NULL)"
        )
    if partitioning == "type" and type_column not in schema.names:
        raise ShardError(f"--type-column {type_column} is not a column of the input")
    for key in event_key:
        if key not in schema.names:
            raise ShardError(f"--event-key column {key} is not a column of the input")
    out = filesystem_for(to, config)
    import uuid

    identity = uuid.uuid4().hex[:8]  # tells a handful of shard sets apart; 4 bytes at open
    # appended rows join the log they are added to: its name, not the new input's
    log = name if name is not None or append else _input_name(input_path)
    manifests = [
        NodeManifest(
            k,
            [],
            type_counts={} if type_column in schema.names else None,
            name=log,
            shard_set=identity,
        )
        for k in range(nodes)
    ]
    batch_tag = ""
    if append:
        manifests = [
            _existing(out, k, nodes, schema, partitioning, time_column, event_key, type_column)
            for k in range(nodes)
        ]
        _keep_name(manifests, name, to)
        for m in manifests:  # one identity for the set (a set written before had none)
            m.shard_set = manifests[0].shard_set or identity
        import time

        batch_tag = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    for k in range(nodes):
        out.make_dirs(out.join(f"node-{k:02d}"))
    offset = 0
    part = 0
    # CSV readers yield one batch per read block (a few thousand rows): gathered into batches of
    # batch_rows, each node's file of a batch holds row groups of ROW_GROUP rows whatever the input
    source: Iterable[pa.RecordBatch] = rebatched(
        dataset.to_batches(batch_size=batch_rows), batch_rows
    )
    done: Callable[[], None] = lambda: None  # noqa: E731
    dropped = 0
    if dedup:
        dropped = dataset.count_rows()
        source, done = _deduplicated(dataset, time_column, event_key, batch_rows)
    for batch in source:
        if batch.num_rows == 0:
            continue
        owner = _node_of(partitioning, nodes, offset, batch, time_column, type_column, event_key)
        table = pa.Table.from_batches([batch])
        if table.schema != schema:
            table = table.cast(schema)
        for k in range(nodes):
            rows = np.nonzero(owner == k)[0]
            if rows.size == 0:
                continue
            piece = table.take(pa.array(rows)).sort_by(time_column)
            _write_piece(out, manifests[k], piece, part, time_column, type_column, batch_tag)
        offset += batch.num_rows
        part += 1
        if progress is not None:
            progress(offset)
    done()
    if dedup:
        dropped -= offset
    for m in manifests:
        m.duplicates_dropped += dropped
        m.time_type = schema.field(time_column).type
        _write_manifest(
            out,
            m,
            schema,
            time_column,
            event_key,
            nodes,
            partitioning,
            type_column if partitioning == "type" else None,
        )
    return manifests


def rebatched(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """``batches`` gathered into batches of at least ``rows`` rows (the last may hold fewer)."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        held.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield _one_batch(held)
            held, count = [], 0
    if held:
        yield _one_batch(held)


def _one_batch(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _existing(
    out: FileLocation,
    node: int,
    nodes: int,
    schema: pa.Schema,
    partitioning: str,
    time_column: str,
    event_key: tuple[str, ...],
    type_column: str = "",
) -> NodeManifest:
    """The manifest of an existing shard set that ``--append`` adds to, checked against the
    input."""
    location = FileLocation(out.fs, out.join(f"node-{node:02d}"), f"{out.uri}/node-{node:02d}")
    try:
        doc = read_manifest(location)
    except DfsCerError as exc:
        raise ShardError(
            f"--append: no shard set to add to at {location.uri} ({exc}); shard without --append "
            "first"
        ) from None
    expected = {
        "nodes": nodes,
        "partitioning": partitioning,
        "time_column": time_column,
        "event_key": list(event_key),
        "schema": schema_fields(schema),
    }
    if partitioning == "type" and doc.get("type_column") not in (None, type_column):
        raise ShardError(
            f"--append: the shard set at {location.uri} is partitioned by "
            f"{doc.get('type_column')!r}, not {type_column!r}; append with --type-column "
            f"{doc.get('type_column')}"
        )
    for key, value in expected.items():
        if doc.get(key) != value:
            raise ShardError(
                f"--append: the shard set at {location.uri} has {key} {doc.get(key)!r}, the new "
                f"input {value!r}; append with the same options and schema"
            )
    return NodeManifest(
        node,
        list(doc.get("files", [])),
        int(doc.get("rows", 0)),
        doc.get("min_ts"),
        doc.get("max_ts"),
        doc.get("type_counts"),
        int(doc.get("duplicates_dropped", 0)),
        name=doc.get("name") if isinstance(doc.get("name"), str) else None,
        shard_set=doc.get("shard_set") if isinstance(doc.get("shard_set"), str) else None,
    )


def _input_name(path: str) -> str:
    """The name of the log at ``path`` (see :func:`dfs_cer.io.tables.log_name`); an input whose
    name cannot name a log asks for ``--name``."""
    from dfs_cer.io.tables import is_table, log_name, parse_table
    from dfs_cer.query.names import name_problem

    name = parse_table(path).log_name if is_table(path) else log_name(path)
    problem = name_problem(name)
    if problem is not None:
        raise ShardError(
            f"the input's name {name!r} cannot name the log ({problem}); give one with --name"
        )
    return name


def _keep_name(manifests: list[NodeManifest], name: str | None, to: str) -> None:
    """``--append`` keeps the log's name: ``name``, when given, must be it (or names a shard set
    written before logs had names)."""
    from dfs_cer.query.names import same_name

    names = {m.name for m in manifests}
    if len(names) > 1:
        raise ShardError(
            f"--append: the shard sets under {to} name different logs "
            f"({', '.join(sorted(map(str, names)))}); re-shard them as one"
        )
    held = names.pop() if names else None
    if name is None:
        return
    if held is not None and not same_name(name, held):
        raise ShardError(
            f"--append: the shard sets under {to} hold the log {held!r}, not {name!r}; leave "
            "out --name (appended rows join the log they are added to)"
        )
    for m in manifests:
        m.name = name


def _write_piece(
    out: FileLocation,
    manifest: NodeManifest,
    piece: pa.Table,
    part: int,
    time_column: str,
    type_column: str,
    batch_tag: str = "",
) -> None:
    name = f"part-{batch_tag}-{part:05d}.parquet" if batch_tag else f"part-{part:05d}.parquet"
    path = out.join(f"node-{manifest.node:02d}", name)
    try:
        with out.fs.open_output_stream(path) as fh:
            pq.write_table(piece, fh, row_group_size=ROW_GROUP)
    except OSError as exc:
        raise StorageError(f"cannot write shard {path}: {exc}") from exc
    ts = _time_ints(piece.column(time_column).combine_chunks())
    entry: dict[str, object] = {
        "path": name,
        "rows": piece.num_rows,
        "min_ts": int(ts[0]),
        "max_ts": int(ts[-1]),
    }
    if batch_tag:
        entry["batch"] = batch_tag
    manifest.files.append(entry)
    manifest.rows += piece.num_rows
    manifest.min_ts = int(ts[0]) if manifest.min_ts is None else min(manifest.min_ts, int(ts[0]))
    manifest.max_ts = int(ts[-1]) if manifest.max_ts is None else max(manifest.max_ts, int(ts[-1]))
    if manifest.type_counts is not None:
        for entry in pc.value_counts(piece.column(type_column).combine_chunks()).to_pylist():
            key = str(entry["values"])
            manifest.type_counts[key] = manifest.type_counts.get(key, 0) + int(entry["counts"])  # type: ignore[call-overload]


def schema_fields(schema: pa.Schema) -> list[dict[str, str]]:
    return [{"name": f.name, "type": str(f.type)} for f in schema]


def schema_digest(schema: pa.Schema) -> str:
    """A short fingerprint of the column names, types and nullability (storage nodes serving one
    table agree on it; where they do not, the compute node compares their schemas)."""
    import hashlib

    fields = [
        {**f, "nullable": n.nullable} for f, n in zip(schema_fields(schema), schema, strict=True)
    ]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:16]


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """The schema ``schema`` has once written to parquet and read back: parquet has no second
    timestamps (``timestamp[s]`` comes back as ``timestamp[ms]``), and metadata is dropped.
    Shards are cast to it before writing, so the manifest, every shard and every storage node
    agree on one schema."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.remove_metadata().empty_table(), sink)
    return pq.read_schema(pa.BufferReader(sink.getvalue())).remove_metadata()


def encode_schema(schema: pa.Schema) -> str:
    """The exact Arrow schema as base64 IPC (type names such as ``timestamp[ms, tz=UTC]`` or
    ``decimal128(10, 2)`` do not parse back)."""
    import base64

    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    import base64
    import binascii

    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
    except (binascii.Error, pa.ArrowInvalid, OSError) as exc:
        raise StorageError(
            f"the manifest's arrow_schema is not a base64 Arrow schema ({exc}); re-shard the data"
        ) from None


def _write_manifest(
    out: FileLocation,
    m: NodeManifest,
    schema: pa.Schema,
    time_column: str,
    event_key: tuple[str, ...],
    nodes: int,
    partitioning: str,
    type_column: str | None = None,
) -> None:
    # type_column: every row with one value of it lies on one node (PARTITION BY it is local)
    doc = {
        "version": 1,
        **({"name": m.name} if m.name is not None else {}),
        **({"shard_set": m.shard_set} if m.shard_set is not None else {}),
        "node": m.node,
        "nodes": nodes,
        "partitioning": partitioning,
        "time_column": time_column,
        **({"type_column": type_column} if type_column else {}),
        "event_key": list(event_key),
        "schema": schema_fields(schema),
        "arrow_schema": encode_schema(schema),
        "rows": m.rows,
        "min_ts": m.min_ts,
        "max_ts": m.max_ts,
        "type_counts": m.type_counts,
        "files": m.files,
        "duplicates_dropped": m.duplicates_dropped,
    }
    with out.fs.open_output_stream(out.join(f"node-{m.node:02d}", MANIFEST)) as fh:
        fh.write(json.dumps(doc, indent=1).encode())


def read_manifest(location: FileLocation) -> dict[str, Any]:
    """Load ``manifest.json`` of one node's shard set."""
    path = location.join(MANIFEST)

    def load() -> dict[str, Any]:
        with location.fs.open_input_stream(path) as fh:
            doc = json.loads(fh.read())
        if not isinstance(doc, dict):
            raise json.JSONDecodeError("not an object", "", 0)
        return doc

    try:
        return location.retrying(f"{location.uri}/{MANIFEST}", load)
    except json.JSONDecodeError as exc:
        raise StorageError(f"manifest {location.uri}/{MANIFEST} is not valid JSON: {exc}") from exc
