"""Tables served in place: Apache Iceberg tables (through pyiceberg) and Hive-style partitioned
parquet prefixes (``.../date=2026-11-01/part-0.parquet``), local or in S3.

A table is named by a reference, accepted wherever a path is:

- ``iceberg://CATALOG/NAMESPACE.TABLE``: ``local`` is the embedded SQL catalog on sqlite
  (``[tables]`` in the config); other names come from pyiceberg's configuration (REST, Glue,
  ...: ``~/.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__NAME__URI``).
- ``hive:PATH``: every parquet file under ``PATH`` (a directory or ``s3://bucket/prefix``), with
  the ``key=value`` directories as columns.

Options follow ``?`` like a URL's query: ``snapshot=ID`` (Iceberg), ``time=COLUMN`` (the event
time, default ``ts``), ``date=KEY`` (Hive: the partition key holding each event's UTC date,
which lets a time range skip whole partitions before any footer is read), and for storage
nodes ``node=I/N``, ``by=time|hash`` and ``assignment=FILE``.

:func:`plan_table` lists the data files of one snapshot with their rows, bytes and time bounds
(Iceberg column metrics, or parquet footers), pruned by time ranges (Iceberg partition and
metrics pruning; Hive partition values and footers). :func:`read_data_file` reads one planned
file as the table's current schema: Iceberg columns are matched by field id, so a renamed column
keeps its data and an added one reads as NULL in older files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dfs_cer.config import StorageConfig, TablesConfig
from dfs_cer.errors import DfsCerError, StorageError
from dfs_cer.io.files import FileLocation, filesystem_for, list_files
from dfs_cer.io.rowgroups import RowGroup, group_bounds, time_bounds
from dfs_cer.plan.assign import MODES, Assignment, FileStats, assign

ICEBERG = "iceberg://"
HIVE = "hive:"
FIELD_ID = b"PARQUET:field_id"
OPTIONS = ("snapshot", "time", "date", "node", "by", "assignment")


class TableError(DfsCerError):
    """A table reference that cannot be served: missing table or snapshot, unreachable
    catalog, unsupported content, a data file gone since planning."""

    code = "table"

    exit_code = 2


def is_table(text: str) -> bool:
    """Does ``text`` name a table (rather than a shard set, a file or a directory)?"""
    return isinstance(text, str) and text.startswith((ICEBERG, HIVE))


@dataclass(frozen=True)
class TableRef:
    kind: str  # "iceberg" or "hive"
    #: the reference without options (``iceberg://local/db.events``, ``hive:s3://b/events``)
    name: str
    catalog: str = ""
    identifier: str = ""
    path: str = ""
    snapshot: int | None = None
    time_column: str = "ts"
    date_key: str | None = None
    node: int = 0
    nodes: int = 1
    by: str = "time"
    assignment: str | None = None

    def __str__(self) -> str:
        return self.name

    def options(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.snapshot is not None:
            out["snapshot"] = str(self.snapshot)
        if self.time_column != "ts":
            out["time"] = self.time_column
        if self.date_key:
            out["date"] = self.date_key
        if self.nodes != 1:
            out["node"] = f"{self.node}/{self.nodes}"
        if self.by != "time":
            out["by"] = self.by
        if self.assignment:
            out["assignment"] = self.assignment
        return out

    def text(self) -> str:
        """The reference with its options (parses back to an equal reference)."""
        opts = self.options()
        return self.name + ("?" + urllib.parse.urlencode(opts, safe="/:") if opts else "")

    def for_node(self, node: int, nodes: int) -> TableRef:
        return replace(self, node=node, nodes=nodes)

    @property
    def log_name(self) -> str:
        """The name queries read the table by: an Iceberg table's own (``events`` of
        ``logs.events``), a Hive prefix's last directory (``events`` of ``s3://b/events``)."""
        if self.kind == "iceberg":
            return self.identifier.rsplit(".", 1)[-1]
        return log_name(self.path)


def log_name(path: str) -> str:
    """The log a file or directory holds, by its name up to the first dot (``ticks.parquet``
    and ``ticks.2024.csv`` hold ``ticks``; ``s3://bucket/trips/`` holds ``trips``)."""
    last = path.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    parts = [p for p in last.split(".") if p]
    return parts[0] if parts else last


def parse_table(text: str) -> TableRef:
    """The reference ``text`` names; a clear error for a malformed one."""
    if not is_table(text):
        raise TableError(
            f"{text!r} is not a table reference; use iceberg://CATALOG/NAMESPACE.TABLE or hive:PATH"
        )
    name, _, query = text.partition("?")
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise TableError(f"the options of {text!r} are not KEY=VALUE pairs joined by '&'") from None
    opts: dict[str, str] = {}
    for key, value in pairs:
        if key not in OPTIONS:
            raise TableError(
                f"unknown table option {key!r} in {text!r}; options: {', '.join(OPTIONS)}"
            )
        if key in opts:
            raise TableError(f"table option {key!r} is given twice in {text!r}")
        opts[key] = value
    fields: dict[str, Any] = {}
    if name.startswith(ICEBERG):
        catalog, _, identifier = name[len(ICEBERG) :].partition("/")
        if (
            not catalog
            or "." not in identifier
            or identifier.startswith(".")
            or identifier.endswith(".")
        ):
            raise TableError(
                f"{name!r} does not name an Iceberg table; use iceberg://CATALOG/NAMESPACE.TABLE, "
                "e.g. iceberg://local/logs.events"
            )
        fields.update(kind="iceberg", catalog=catalog, identifier=identifier)
    else:
        path = name[len(HIVE) :]
        if not path:
            raise TableError(
                f"{text!r} names no path; use hive:/data/events or hive:s3://bucket/events"
            )
        fields.update(kind="hive", path=path)
    if "snapshot" in opts:
        if fields["kind"] != "iceberg":
            raise TableError(f"snapshot= applies to Iceberg tables, not {name!r}")
        fields["snapshot"] = _integer(opts["snapshot"], "snapshot", text)
    if "time" in opts:
        if not opts["time"]:
            raise TableError(f"time= in {text!r} names no column")
        fields["time_column"] = opts["time"]
    if "date" in opts:
        if fields["kind"] != "hive" or not opts["date"]:
            raise TableError(
                f"date= names the Hive partition key of each event's date; not valid in {text!r}"
            )
        fields["date_key"] = opts["date"]
    if "node" in opts:
        node, _, nodes = opts["node"].partition("/")
        n, k = _integer(nodes, "node", text), _integer(node, "node", text)
        if not 0 <= k < n:
            raise TableError(
                f"node={opts['node']} in {text!r}: give I/N with 0 <= I < N, e.g. node=0/3"
            )
        fields.update(node=k, nodes=n)
    if "by" in opts:
        if opts["by"] not in MODES:
            raise TableError(f"by={opts['by']} in {text!r}: use one of {', '.join(MODES)}")
        fields["by"] = opts["by"]
    if "assignment" in opts:
        fields["assignment"] = opts["assignment"]
    return TableRef(name=name, **fields)


def _integer(value: str, key: str, text: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise TableError(f"{key}={value!r} in {text!r} is not an integer") from None


@dataclass(frozen=True)
class DataFile:
    #: where the file is: ``s3://bucket/key`` or a local absolute path
    path: str
    rows: int
    bytes: int
    min_ts: int | None
    max_ts: int | None
    #: Hive partition values by column (the ``key=value`` directories)
    partition: tuple[tuple[str, Any], ...] = ()
    #: Hive: the file's size and modification time (a file rewritten in place is another
    #: version); None for Iceberg, whose data files never change
    version: str | None = None

    @property
    def key(self) -> str:
        """What identifies this content of the file (its path, and version when it has one)."""
        return self.path if self.version is None else f"{self.path}#{self.version}"

    def stats(self) -> FileStats:
        return FileStats(self.path, self.rows, self.min_ts, self.max_ts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "rows": self.rows,
            "bytes": self.bytes,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            **({"version": self.version} if self.version is not None else {}),
        }


@dataclass
class TablePlan:
    ref: TableRef
    #: what identifies the table (an Iceberg table's uuid; a Hive prefix's location)
    identity: str
    #: the snapshot read (Iceberg; None for Hive prefixes and tables without any snapshot)
    snapshot: int | None
    #: the table's columns as served (current names, plain arrow types)
    schema: pa.Schema
    #: per column of ``schema``: its Iceberg field id (None: matched by name)
    field_ids: list[int | None]
    files: list[DataFile]
    #: Iceberg's name mapping (``schema.name-mapping.default``): the names a field id had in data
    #: files written without field ids (added with add_files, migrated from Hive)
    aliases: dict[int, tuple[str, ...]] = field(default_factory=dict)
    #: files (and their bytes) the time ranges pruned
    pruned_files: int = 0
    pruned_bytes: int = 0
    snapshot_ms: int | None = None
    config: StorageConfig = field(default_factory=StorageConfig)
    #: the Iceberg metadata file planned from: a schema change (rename, add column) commits a
    #: new one without a new snapshot
    metadata_location: str | None = None

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    def describe(self) -> str:
        return f"table {self.ref.name}" + (
            f" at snapshot {self.snapshot}" if self.snapshot is not None else ""
        )


# --- catalogs ----------------------------------------------------------------------------------


def catalog_properties(
    name: str, tables: TablesConfig | None = None, storage: StorageConfig | None = None
) -> dict[str, str]:
    """The properties ``load_catalog`` gets for catalog ``name``: pyiceberg's own configuration
    for it, else (for ``local``) the embedded SQL catalog on sqlite; the S3 endpoint of the
    storage config is passed on when the catalog's configuration names none."""
    from pyiceberg.utils.config import Config as IcebergConfig

    tables = tables or TablesConfig()
    storage = storage or StorageConfig()
    own = IcebergConfig().get_catalog_config(name)
    # passed explicitly: pyiceberg reads its environment once, at import
    props: dict[str, str] = {str(k): str(v) for k, v in (own or {}).items()}
    if own is None:
        if name != "local":
            raise TableError(
                f"no Iceberg catalog named {name!r} is configured; configure it for pyiceberg "
                f"(~/.pyiceberg.yaml, or PYICEBERG_CATALOG__{name.upper()}__URI=... and "
                f"PYICEBERG_CATALOG__{name.upper()}__TYPE=rest|glue|sql) or use iceberg://local/..."
            )
        uri = tables.catalog_uri
        if uri.startswith("sqlite:///") and not uri.startswith(
            "sqlite:////"
        ):  # relative: make the directory
            Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        if "://" not in tables.warehouse and any(c in tables.warehouse for c in "#?"):
            raise TableError(
                f"the warehouse directory {tables.warehouse!r} holds '#' or '?', which an Iceberg "
                "location cannot spell; set [tables] warehouse to another directory"
            )
        # not percent-encoded: pyiceberg writes to the location's path as spelled
        warehouse = (
            tables.warehouse
            if "://" in tables.warehouse
            else f"file://{Path(tables.warehouse).resolve()}"
        )
        props = {"type": "sql", "uri": uri, "warehouse": warehouse}
    endpoint = storage.s3_endpoint or os.environ.get("AWS_ENDPOINT_URL", "")
    if endpoint and not (own or {}).get("s3.endpoint"):
        props["s3.endpoint"] = endpoint
        props.setdefault("s3.region", storage.s3_region)
    return props


_CATALOGS: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


def load_catalog(
    name: str, tables: TablesConfig | None = None, storage: StorageConfig | None = None
) -> Any:
    """The pyiceberg catalog ``name`` (a clear error when it cannot be reached); one client per
    catalog and configuration in this process (a storage node asks it for every query)."""
    from pyiceberg.catalog import load_catalog as load

    props = catalog_properties(name, tables, storage)
    key = (name, tuple(sorted(props.items())))
    if key in _CATALOGS:
        return _CATALOGS[key]
    try:
        _CATALOGS[key] = load(name, **props)
        return _CATALOGS[key]
    except DfsCerError:
        raise
    except Exception as exc:
        raise TableError(
            f"cannot reach Iceberg catalog {name!r} ({type(exc).__name__}: {_first_line(exc)}); "
            "check its uri and credentials"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def load_iceberg(
    ref: TableRef, tables: TablesConfig | None = None, storage: StorageConfig | None = None
) -> Any:
    """The pyiceberg table ``ref`` names."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = load_catalog(ref.catalog, tables, storage)
    try:
        return catalog.load_table(ref.identifier)
    except (NoSuchTableError, NoSuchNamespaceError):
        namespace = ref.identifier.rsplit(".", 1)[0]
        try:
            known = [".".join(t) for t in catalog.list_tables(namespace)]
        except Exception:
            known = []
        raise TableError(
            f"no Iceberg table {ref.identifier} in catalog {ref.catalog!r}"
            + (
                f"; tables in {namespace}: {', '.join(known[:10])}"
                if known
                else f"; namespace {namespace} has no tables"
            )
            + ""
        ) from None
    except Exception as exc:
        raise TableError(
            f"cannot reach Iceberg catalog {ref.catalog!r} to load {ref.identifier} "
            f"({type(exc).__name__}: {_first_line(exc)}); check its uri and credentials"
        ) from None


# --- planning -----------------------------------------------------------------------------------


def plan_table(
    ref: TableRef | str,
    *,
    tables: TablesConfig | None = None,
    storage: StorageConfig | None = None,
    snapshot: int | None = None,
    time_ranges: Sequence[tuple[int, int]] | None = None,
    events: bool = True,
) -> TablePlan:
    """The data files of ``ref`` (at ``snapshot``, else the reference's, else the current one),
    keeping only files that may hold an event inside ``time_ranges`` (inclusive, in the time
    column's units) when given. ``events``: the table is an event log, so its time column must
    exist (False for other tables a query reads, which have no time bounds)."""
    if isinstance(ref, str):
        ref = parse_table(ref)
    storage = storage or StorageConfig()
    if ref.kind == "iceberg":
        plan = _plan_iceberg(
            ref, tables, storage, snapshot if snapshot is not None else ref.snapshot, time_ranges
        )
    else:
        plan = _plan_hive(ref, storage, time_ranges)
    if events and ref.time_column not in plan.schema.names:
        raise TableError(
            f"{plan.describe()} has no time column {ref.time_column!r}; its columns: "
            f"{', '.join(plan.schema.names)} (name the time column with ?time=COLUMN)"
        )
    return plan


def _plain(t: pa.DataType) -> pa.DataType:
    """Iceberg's arrow types as the rest of dfs-cer reads them (no 64-bit offsets)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t):
        return pa.list_(_plain(t.value_type))
    return t


def field_id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(FIELD_ID)
    return int(raw) if raw is not None else None


def _plan_iceberg(
    ref: TableRef,
    tables: TablesConfig | None,
    storage: StorageConfig,
    snapshot: int | None,
    time_ranges: Sequence[tuple[int, int]] | None,
) -> TablePlan:
    from pyiceberg.conversions import from_bytes
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, LessThanOrEqual, Or
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    table = load_iceberg(ref, tables, storage)
    if snapshot is not None:
        snap = table.snapshot_by_id(snapshot)
        if snap is None:
            known = [s.snapshot_id for s in table.snapshots()][-5:]
            raise TableError(
                f"Iceberg table {ref.name} has no snapshot {snapshot}; recent snapshots: "
                f"{', '.join(map(str, known)) or 'none'}"
            )
    else:
        snap = table.current_snapshot()
    # an older snapshot is read with the schema it was written with (as Spark, Trino and
    # pyiceberg do); the current one with the table's schema
    current = table.current_snapshot()
    schema_id = (
        None
        if snap is None or current is None or snap.snapshot_id == current.snapshot_id
        else snap.schema_id
    )
    iceberg_schema = (
        table.schemas().get(schema_id, table.schema()) if schema_id is not None else table.schema()
    )
    arrow = schema_to_pyarrow(iceberg_schema)
    schema = pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in arrow])
    ids = [field_id(f) for f in arrow]
    identity = str(table.metadata.table_uuid)
    mapping = table.name_mapping()
    aliases = {int(m.field_id): tuple(m.names) for m in (mapping or []) if m.field_id is not None}
    out = TablePlan(
        ref,
        identity,
        None if snap is None else snap.snapshot_id,
        schema,
        ids,
        [],
        aliases=aliases,
        snapshot_ms=None if snap is None else snap.timestamp_ms,
        config=storage,
        metadata_location=table.metadata_location,
    )
    if snap is None:
        return out  # a table never written to: no files
    try:
        time_field: Any = iceberg_schema.find_field(ref.time_column)
    except ValueError:
        time_field = None  # plan_table names the missing column when the table is an event log
    row_filter: Any = AlwaysTrue()
    if time_ranges is not None and time_field is not None:
        ge: Any = GreaterThanOrEqual  # (pyiceberg's typing hides the positional signature)
        le: Any = LessThanOrEqual
        pieces = [
            And(ge(ref.time_column, int(lo)), le(ref.time_column, int(hi)))
            for lo, hi in time_ranges
        ]
        row_filter = pieces[0] if len(pieces) == 1 else Or(*pieces) if pieces else None
    try:
        every = list(table.scan(snapshot_id=snap.snapshot_id).plan_files())
        tasks = (
            every
            if time_ranges is None or time_field is None
            else (
                []
                if row_filter is None
                else list(
                    table.scan(row_filter=row_filter, snapshot_id=snap.snapshot_id).plan_files()
                )
            )
        )
    except DfsCerError:
        raise
    except Exception as exc:
        raise TableError(
            f"cannot plan the files of Iceberg table {ref.name} at snapshot {snap.snapshot_id} "
            f"({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    deleting = [t for t in every if t.delete_files]
    if deleting:
        raise TableError(
            f"Iceberg table {ref.name} at snapshot {snap.snapshot_id} has row-level delete files "
            f"on {len(deleting)} data file{'s' if len(deleting) > 1 else ''} (e.g. "
            f"{deleting[0].file.file_path}); dfs-cer serves tables without deletes: compact the "
            "table (rewrite its data files) or query a snapshot from before the deletes with "
            "?snapshot=ID"
        )

    def bound(raw: dict[int, bytes] | None) -> int | None:
        value = None if time_field is None else (raw or {}).get(time_field.field_id)
        if value is None:
            return None
        decoded = from_bytes(time_field.field_type, value)
        return int(decoded) if isinstance(decoded, int) else None

    for t in tasks:
        f = t.file
        out.files.append(
            DataFile(
                _local(f.file_path),
                int(f.record_count),
                int(f.file_size_in_bytes),
                bound(f.lower_bounds),
                bound(f.upper_bounds),
            )
        )
    kept = {f.path for f in out.files}
    gone = [t.file for t in every if _local(t.file.file_path) not in kept]
    out.pruned_files, out.pruned_bytes = len(gone), sum(int(f.file_size_in_bytes) for f in gone)
    out.files.sort(key=lambda f: (f.min_ts if f.min_ts is not None else -(2**63), f.path))
    return out


def _local(uri: str) -> str:
    """An Iceberg file location as dfs-cer's readers take it, resolved exactly as pyiceberg's
    own file IO resolves it (``file:/p``, ``file:///p`` and plain paths are local paths, never
    percent-decoded; ``s3a://``/``s3n://`` are S3)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    scheme, _, path = PyArrowFileIO.parse_location(uri)
    if scheme == "file":
        return path
    if scheme in ("s3", "s3a", "s3n"):
        return "s3://" + path
    raise TableError(f"data file {uri} is in a {scheme}:// store; dfs-cer reads local files and S3")


def _partition_value(text: str) -> Any:
    text = urllib.parse.unquote(text)
    return None if text == "__HIVE_DEFAULT_PARTITION__" else text


def _day_range(value: Any, dtype: pa.DataType) -> tuple[int, int] | None:
    """The time range (in ``dtype``'s units) of the UTC day ``value`` names, or None."""
    try:
        day = dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        return None
    if pa.types.is_timestamp(dtype):
        per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[dtype.unit]
        start = (
            int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()) * per_second
        )
        return start, start + 86400 * per_second - 1
    if pa.types.is_date32(dtype):
        n = (day - dt.date(1970, 1, 1)).days
        return n, n
    return None


def _overlaps(lo: int | None, hi: int | None, ranges: Sequence[tuple[int, int]] | None) -> bool:
    if ranges is None or lo is None or hi is None:
        return True
    return any(lo <= b and a <= hi for a, b in ranges)


#: Hive footers already read: (location, path, size, mtime, time column) -> (schema, rows, first,
#: last)
_FOOTERS: dict[tuple[Any, ...], tuple[pa.Schema, int, int | None, int | None]] = {}


def _plan_hive(
    ref: TableRef, storage: StorageConfig, time_ranges: Sequence[tuple[int, int]] | None
) -> TablePlan:
    loc = filesystem_for(ref.path, storage)
    base = loc.path.rstrip("/") + "/"
    # as Hive and Spark read a prefix: no hidden files or directories (_temporary, _SUCCESS, .part)
    paths = [
        p
        for p in list_files(loc)
        if not any(seg.startswith(("_", ".")) for seg in p[len(base) :].split("/"))
    ]
    if not paths:
        raise TableError(f"no parquet files under {ref.path} (table {ref.name}); check the path")
    parts: dict[str, dict[str, Any]] = {}
    for p in paths:
        segments = p[len(base) :].split("/")[:-1] if p.startswith(base) else []
        parts[p] = {
            k: _partition_value(v) for k, _, v in (s.partition("=") for s in segments if "=" in s)
        }
    keys = list(dict.fromkeys(k for values in parts.values() for k in values))
    if ref.date_key is not None and ref.date_key not in keys:
        raise TableError(
            f"date={ref.date_key} names no partition key of {ref.name}; its keys: "
            f"{', '.join(keys) or 'none (no key=value directories)'}"
        )
    first = loc.retrying(
        f"{ref.path} ({paths[0]})", lambda: pq.read_schema(paths[0], filesystem=loc.fs)
    )
    time_type = first.field(ref.time_column).type if ref.time_column in first.names else pa.null()
    kept, pruned_files, pruned_bytes = [], 0, 0
    infos = {i.path: i for i in loc.retrying(ref.path, lambda: loc.fs.get_file_info(paths))}
    sizes = {p: i.size for p, i in infos.items()}
    for p in paths:
        day = _day_range(parts[p].get(ref.date_key), time_type) if ref.date_key else None
        if day is not None and not _overlaps(day[0], day[1], time_ranges):
            pruned_files, pruned_bytes = pruned_files + 1, pruned_bytes + int(sizes.get(p) or 0)
            continue  # the partition's day lies outside every range: not even the footer is read
        kept.append(p)
    files, schemas = [], [first]

    def footer(path: str) -> pq.FileMetaData:
        return loc.retrying(
            f"{ref.path} ({path})", lambda: pq.read_metadata(path, filesystem=loc.fs)
        )

    for p in kept:
        key = (loc.uri, p, infos[p].size, infos[p].mtime_ns, ref.time_column)
        if key not in _FOOTERS:  # a file is read for its footer once (a node re-plans every query)
            meta = footer(p)
            _FOOTERS[key] = (
                meta.schema.to_arrow_schema(),
                meta.num_rows,
                *time_bounds(meta, ref.time_column),
            )
            while len(_FOOTERS) > 100_000:
                _FOOTERS.pop(next(iter(_FOOTERS)))
        file_schema, num_rows, lo, hi = _FOOTERS[key]
        if (
            ref.time_column in file_schema.names
            and file_schema.field(ref.time_column).type != time_type
        ):
            raise TableError(
                f"the files of {ref.name} store {ref.time_column} as {time_type} ({paths[0]}) and "
                f"as {file_schema.field(ref.time_column).type} ({p}); rewrite them with one type "
                "(their time bounds and date partitions must share a unit)"
            )
        schemas.append(file_schema)
        size = int(sizes.get(p) or 0)
        if not _overlaps(lo, hi, time_ranges):
            pruned_files, pruned_bytes = pruned_files + 1, pruned_bytes + size
            continue
        where = f"s3://{p}" if ref.path.startswith("s3://") else p
        files.append(
            DataFile(
                where,
                num_rows,
                size,
                lo,
                hi,
                tuple(parts[p].items()),
                version=f"{size}-{infos[p].mtime_ns}",
            )
        )
    try:
        unified = pa.unify_schemas(
            [pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in s]) for s in schemas],
            promote_options="permissive",
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TableError(
            f"the files of {ref.name} have clashing column types ({exc}); rewrite them with one "
            "schema"
        ) from None
    extra = []
    for k in keys:
        if k in unified.names:
            continue
        values = [v for vals in parts.values() for v in [vals.get(k)] if v is not None]
        is_int = bool(values) and all(_is_int(v) for v in values)
        extra.append(pa.field(k, pa.int64() if is_int else pa.string()))
    schema = pa.schema([*unified, *extra])
    files.sort(key=lambda f: (f.min_ts if f.min_ts is not None else -(2**63), f.path))
    return TablePlan(
        ref,
        loc.uri,
        None,
        schema,
        [None] * len(schema),
        files,
        pruned_files=pruned_files,
        pruned_bytes=pruned_bytes,
        config=storage,
    )


_INTEGER = re.compile(r"^-?[0-9]{1,19}$")


def _is_int(value: Any) -> bool:
    """A partition value Arrow casts to int64 (digits only, in range)."""
    return isinstance(value, str) and bool(_INTEGER.match(value)) and -(2**63) <= int(value) < 2**63


# --- reading ------------------------------------------------------------------------------------


def _location(path: str, storage: StorageConfig) -> tuple[FileLocation, str]:
    """The filesystem of a planned file and the file's path inside it."""
    if path.startswith("s3://"):
        loc = _s3_root(storage)
        return loc, path[len("s3://") :]
    return filesystem_for(os.path.dirname(path) or ".", storage), path


_S3: dict[StorageConfig, FileLocation] = {}


def _s3_root(storage: StorageConfig) -> FileLocation:
    if storage not in _S3:
        _S3[storage] = filesystem_for("s3://", storage)
    return _S3[storage]


def read_data_file(
    plan: TablePlan, f: DataFile, columns: Sequence[str] | None = None, row_group: int | None = None
) -> pa.Table:
    """File ``f`` of ``plan`` (or its row group ``row_group``) as the table's schema (or its
    ``columns``): columns matched by Iceberg field id (else by name), missing ones NULL,
    partition values filled in. A file that vanished since planning is a TableError naming it
    and the snapshot."""
    loc, inside = _location(f.path, plan.config)
    wanted = [plan.schema.field(c) for c in columns] if columns is not None else list(plan.schema)

    def read() -> pa.Table:
        with loc.fs.open_input_file(inside) as fh:
            pf = pq.ParquetFile(fh)
            names = _sources(plan, pf.schema_arrow, [w.name for w in wanted])
            picked = [n for n in dict.fromkeys(names) if n is not None]
            table = (
                pf.read(columns=picked)
                if row_group is None
                else pf.read_row_group(row_group, columns=picked)
            )
            return _conform(table, wanted, names, dict(f.partition))

    return _reading(plan, f, loc, read)


T = TypeVar("T")


def _reading(plan: TablePlan, f: DataFile, loc: FileLocation, read: Callable[[], T]) -> T:
    """``read()`` of planned file ``f`` (transient errors retried); a file gone since planning is
    a TableError naming it and the snapshot."""
    try:
        return loc.retrying(f"{plan.describe()} ({f.path})", read)
    except StorageError as exc:
        if "not found" in str(exc):
            raise TableError(
                f"data file {f.path} of {plan.describe()} is gone (removed after the query was "
                "planned, e.g. by snapshot expiry or compaction); run the query again"
            ) from None
        raise


def _conform(
    table: pa.Table,
    wanted: Sequence[pa.Field],
    names: Sequence[str | None],
    partition: dict[str, Any],
) -> pa.Table:
    n = table.num_rows
    arrays = []
    for f, src in zip(wanted, names, strict=True):
        if src is not None:
            col = table.column(src)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        elif partition.get(f.name) is not None:
            arrays.append(
                pa.chunked_array(
                    [pc.fill_null(pa.nulls(n, f.type), pa.scalar(partition[f.name]).cast(f.type))]
                )
            )
        else:
            arrays.append(pa.chunked_array([pa.nulls(n, f.type)]))
    return pa.Table.from_arrays(arrays, schema=pa.schema(list(wanted)))


def file_footer(plan: TablePlan, f: DataFile) -> pq.FileMetaData:
    """The parquet footer of planned file ``f``."""
    loc, inside = _location(f.path, plan.config)

    def read() -> pq.FileMetaData:
        with loc.fs.open_input_file(inside) as fh:
            return pq.ParquetFile(fh).metadata

    return _reading(plan, f, loc, read)


def _sources(plan: TablePlan, file_schema: pa.Schema, columns: Sequence[str]) -> list[str | None]:
    """What a data file calls each of the table's ``columns`` (None: it lacks it). Files with
    Iceberg field ids are matched by id (a renamed column keeps its data); files without them
    by the table's name mapping, else by name, as Iceberg readers do."""
    ids = dict(zip(plan.schema.names, plan.field_ids, strict=True))
    by_id = {field_id(f): f.name for f in file_schema if field_id(f) is not None}
    out: list[str | None] = []
    for c in columns:
        fid = ids.get(c)
        if fid is not None and by_id:
            out.append(by_id.get(fid))
            continue
        names = plan.aliases.get(fid, (c,)) if fid is not None else (c,)
        out.append(next((n for n in names if n in file_schema.names), None))
    return out


def physical_name(plan: TablePlan, file_schema: pa.Schema, column: str) -> str | None:
    """What a file written under an older schema calls ``column``, or None."""
    return _sources(plan, file_schema, [column])[0]


def table_row_groups(plan: TablePlan, time_column: str | None = None) -> list[RowGroup]:
    """Every row group of a planned table's files (footers only; the time column found by
    field id in files written under an older schema)."""
    groups: list[RowGroup] = []
    for f in plan.files:
        meta = file_footer(plan, f)
        name = physical_name(
            plan, meta.schema.to_arrow_schema(), time_column or plan.ref.time_column
        )
        bounds = (
            group_bounds(meta, name)
            if name is not None
            else [(None, None, None)] * meta.num_row_groups
        )
        for g, (first, last, nulls) in enumerate(bounds):
            groups.append(RowGroup(f.path, g, meta.row_group(g).num_rows, first, last, nulls))
    return groups


def read_table(plan: TablePlan, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """Every planned file, one table each, in plan order."""
    for f in plan.files:
        yield read_data_file(plan, f, columns)


def append_iceberg(
    table: str | TableRef,
    input_path: str,
    *,
    create: bool = False,
    tables: TablesConfig | None = None,
    storage: StorageConfig | None = None,
) -> tuple[int, int]:
    """Append the event log at ``input_path`` (parquet or CSV, file or directory, local or
    ``s3://``) to an Iceberg table as one snapshot (``create``: make the table and namespace
    first when missing); returns (snapshot id, rows). Timestamps are stored in microseconds,
    Iceberg's unit (a nanosecond time that would lose digits is refused)."""
    import pyarrow.dataset as ds

    ref = parse_table(table) if isinstance(table, str) else table
    if ref.kind != "iceberg":
        raise TableError(
            f"{ref.name} is not an Iceberg table; append parquet files under a Hive prefix directly"
        )
    from dfs_cer.io.csvfiles import CsvInput

    loc = filesystem_for(input_path, storage)
    try:  # a CSV's column types from every value, as dfs-cer shard reads it
        data = (
            CsvInput(loc).to_table()
            if input_path.endswith(".csv")
            else ds.dataset(loc.path, filesystem=loc.fs, format="parquet").to_table()
        )
    except (FileNotFoundError, pa.ArrowInvalid, OSError) as exc:
        raise TableError(f"cannot read {input_path}: {exc}") from None
    fields = [
        pa.field(f.name, pa.timestamp("us", f.type.tz))
        if pa.types.is_timestamp(f.type)
        else pa.field(f.name, _plain(f.type))
        for f in data.schema
    ]
    try:
        data = data.cast(pa.schema(fields))
    except pa.ArrowInvalid as exc:
        raise TableError(
            f"{input_path} has times finer than microseconds, Iceberg's unit ({exc}); round them "
            "first"
        ) from None
    from pyiceberg.exceptions import NoSuchTableError

    catalog = load_catalog(ref.catalog, tables, storage)
    try:
        target = catalog.load_table(ref.identifier)
    except NoSuchTableError:
        if not create:
            raise TableError(
                f"no Iceberg table {ref.identifier} in catalog {ref.catalog!r}; add --create to "
                "make it"
            ) from None
        catalog.create_namespace_if_not_exists(ref.identifier.rsplit(".", 1)[0])
        target = catalog.create_table(ref.identifier, schema=data.schema)
    try:
        target.append(data)
    except (ValueError, TypeError) as exc:
        raise TableError(f"cannot append {input_path} to {ref.name}: {_first_line(exc)}") from None
    return int(target.current_snapshot().snapshot_id), data.num_rows


class TableInput:
    """A planned table as ``dfs-cer shard --input`` reads it: one stream of batches, file by
    file, never the whole table in memory."""

    def __init__(self, plan: TablePlan) -> None:
        self.plan = plan
        self.schema = plan.schema

    def count_rows(self) -> int:
        return self.plan.rows

    def null_count(self, column: str) -> int:
        """NULLs in ``column`` (only that column is read)."""
        return sum(
            read_data_file(self.plan, f, [column]).column(0).null_count for f in self.plan.files
        )

    def to_batches(self, batch_size: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        for f in self.plan.files:
            yield from read_data_file(self.plan, f).to_batches(batch_size)

    def reader(self, batch_size: int = 1_000_000) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches(batch_size))


# --- assignment ---------------------------------------------------------------------------------


def assignment_path(plan: TablePlan, tables: TablesConfig | None = None) -> Path:
    """Where the file-to-node assignment of ``plan``'s table for its node count lives."""
    ref = plan.ref
    if ref.assignment:
        return Path(ref.assignment)
    key = hashlib.sha256(f"{plan.identity}|{ref.name}|{ref.nodes}|{ref.by}".encode()).hexdigest()[
        :16
    ]
    safe = "".join(c if c.isalnum() else "-" for c in ref.name.split("/")[-1])[:40]
    return (
        Path((tables or TablesConfig()).assignments_dir)
        / f"{safe}-{ref.nodes}nodes-{ref.by}-{key}.json"
    )


def node_assignment(plan: TablePlan, tables: TablesConfig | None = None) -> Assignment:
    """The table's assignment for ``plan.ref.nodes`` nodes: read when one was written, else made
    from ``plan``'s files and written (atomically: when nodes start together, the first one's
    stands and the others read it)."""
    path = assignment_path(plan, tables)
    if not path.exists():
        made = assign([f.stats() for f in plan.files], plan.ref.nodes, plan.ref.by)
        doc = {
            "table": plan.ref.name,
            "identity": plan.identity,
            "snapshot": plan.snapshot,
            **made.to_dict(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc))
        try:
            os.link(tmp, path)  # fails when another node wrote it first: that one stands
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    try:
        doc = json.loads(path.read_text())
        got = Assignment.from_dict(doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TableError(
            f"the assignment file {path} of {plan.ref.name} is unreadable ({exc}); delete it to "
            "have "
            "it written again"
        ) from None
    if (
        got.nodes != plan.ref.nodes
        or got.mode != plan.ref.by
        or doc.get("identity") != plan.identity
    ):
        raise TableError(
            f"the assignment file {path} was written for {doc.get('table')} ({got.nodes} nodes, by "
            f"{got.mode}), not {plan.ref.name} ({plan.ref.nodes} nodes, by {plan.ref.by}); give "
            "each "
            "table and node count its own assignment= file"
        )
    return got


def node_share(plan: TablePlan, tables: TablesConfig | None = None) -> TablePlan:
    """``plan`` with only the files of node ``plan.ref.node`` (by the table's assignment)."""
    if plan.ref.nodes == 1:
        return plan
    assignment = node_assignment(plan, tables)
    mine = {f.path for f in assignment.share([f.stats() for f in plan.files], plan.ref.node)}
    return replace(plan, files=[f for f in plan.files if f.path in mine])
