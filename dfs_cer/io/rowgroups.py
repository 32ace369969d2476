"""Parquet row groups as units of distributed reading: listed (with the time column's statistics)
on the driver from the files' footers, read one by one on the executors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dfs_cer.config import StorageConfig
from dfs_cer.errors import ConfigError, StorageError
from dfs_cer.io.files import FileLocation, filesystem_for, list_files


@dataclass(frozen=True)
class RowGroup:
    """One row group: its file (a path inside the filesystem), index, rows, and the time column's
    range and NULL count from the footer (None where the file has no statistics)."""

    file: str
    index: int
    rows: int
    first: int | None
    last: int | None
    nulls: int | None


def _as_int(value: object, arrow_type: pa.DataType) -> int | None:
    if value is None:
        return None
    try:
        scalar = pa.scalar(value, type=arrow_type)
        if (
            pa.types.is_timestamp(arrow_type)
            or pa.types.is_date(arrow_type)
            or pa.types.is_duration(arrow_type)
        ):
            scalar = scalar.cast(pa.int64() if not pa.types.is_date32(arrow_type) else pa.int32())
        return int(scalar.as_py())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None


def _stat_bounds(stats: pq.Statistics, arrow_type: pa.DataType) -> tuple[int | None, int | None]:
    """A column chunk's first and last value as integers. A time is taken as stored (an integer in
    the unit of the footer's own schema): ``stats.min`` converts it to a Python datetime, which
    fails without pandas on a time below the microsecond."""
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date32(arrow_type):
        if stats.physical_type not in ("INT32", "INT64"):  # INT96: no exact integer here
            return None, None
        return int(stats.min_raw), int(stats.max_raw)
    return _as_int(stats.min, arrow_type), _as_int(stats.max, arrow_type)


def group_bounds(
    meta: pq.FileMetaData, time_column: str
) -> list[tuple[int | None, int | None, int | None]]:
    """Per row group of a file: the time column's first and last value and NULL count from the
    footer's statistics (None where missing)."""
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    col = names.index(time_column) if time_column in names else -1
    file_schema = meta.schema.to_arrow_schema()
    arrow_type = (
        file_schema.field(time_column).type if time_column in file_schema.names else pa.null()
    )
    out: list[tuple[int | None, int | None, int | None]] = []
    for g in range(meta.num_row_groups):
        first = last = nulls = None
        if col >= 0:
            stats = meta.row_group(g).column(col).statistics
            if stats is not None and stats.has_min_max:
                first, last = _stat_bounds(stats, arrow_type)
            if stats is not None and stats.has_null_count:
                nulls = int(stats.null_count)
        out.append((first, last, nulls))
    return out


def time_bounds(meta: pq.FileMetaData, time_column: str) -> tuple[int | None, int | None]:
    """A file's first and last time from its footer, or (None, None) when some row group has
    no statistics (the file then matches every time range)."""
    bounds = [(a, b) for a, b, _ in group_bounds(meta, time_column) if meta.num_rows]
    firsts = [a for a, _ in bounds]
    lasts = [b for _, b in bounds]
    if not bounds or any(v is None for v in firsts + lasts):
        return None, None
    return min(firsts), max(lasts)  # type: ignore[type-var]


def location_files(uri: str, config: StorageConfig | None = None) -> tuple[FileLocation, list[str]]:
    if uri.lower().endswith((".csv", ".csv.gz", ".tsv", ".json", ".jsonl")):
        name = uri.rstrip("/").rsplit("/", 1)[-1]
        raise ConfigError(
            f"{uri} is not parquet: data= (--data) reads parquet files or tables. Shard {name} "
            f"for storage nodes (dfs-cer shard --input {uri} --nodes N --to shards) and query "
            "them, or write it as parquet first"
        )
    where = filesystem_for(uri, config)
    files = [where.path] if uri.endswith(".parquet") else list_files(where)
    if not files:
        raise StorageError(f"no parquet files under {uri}; check the path (or bucket and prefix)")
    return where, files


def list_row_groups(
    where: FileLocation, files: Sequence[str], time_column: str
) -> tuple[pa.Schema, list[RowGroup]]:
    """The first file's schema and every file's row groups (footers only)."""
    schema: pa.Schema | None = None
    groups: list[RowGroup] = []
    for path in files:

        def footer(p: str = path) -> pq.FileMetaData:
            return pq.read_metadata(p, filesystem=where.fs)

        meta = where.retrying(f"{where.uri} ({path})", footer)
        if schema is None:
            schema = meta.schema.to_arrow_schema()
        for g, (first, last, nulls) in enumerate(group_bounds(meta, time_column)):
            groups.append(RowGroup(path, g, meta.row_group(g).num_rows, first, last, nulls))
    assert schema is not None
    return schema, groups


def read_row_group(
    where: FileLocation, group: RowGroup, schema: pa.Schema, condition: pc.Expression | None = None
) -> pa.Table:
    """One row group as ``schema`` (the first file's: later files' columns are cast to it), with
    ``condition`` applied."""

    def read() -> pa.Table:
        with where.fs.open_input_file(group.file) as f:
            return pq.ParquetFile(f).read_row_group(group.index)

    table = where.retrying(f"{where.uri} ({group.file}, row group {group.index})", read)
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise StorageError(
            f"{group.file} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            "that the first file has: the files under one path must share a schema"
        )
    table = table.select(schema.names).cast(schema)
    return table.filter(condition) if condition is not None else table
