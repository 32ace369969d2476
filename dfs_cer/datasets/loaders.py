"""Loaders for the real public files behind the paper's data sets, cleaned as the reference
scripts do (reference notes §8) and streamed to one parquet file in the generators' schemas.

- Chicago crimes (``Crimes_-_2001_to_Present.csv`` from data.cityofchicago.org),
- Citi Bike trip files (``2023*-citibike-tripdata.csv``),
- Google cluster trace 2011 ``task_events/part-*.csv(.gz)`` (no header).

Rows with nulls in the used columns are dropped (as the reference does); every loader returns
the rows written and dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dfs_cer.errors import DfsCerError


class LoadError(DfsCerError):
    """A source file is missing a column or holds values the loader cannot convert."""

    exit_code = 2


@dataclass(frozen=True)
class LoadResult:
    rows: int
    dropped: int


def _read(
    path: str,
    *,
    types: dict[str, pa.DataType],
    header: list[str] | None = None,
    block: int = 16 << 20,
) -> Iterator[pa.RecordBatch]:
    """Only the columns ``types`` names, each of its type: nothing is inferred from a first
    block; an empty field is NULL; a value that does not fit is an error naming its row,
    column and value."""
    from dfs_cer.io.csvfiles import as_text
    from dfs_cer.io.csvtypes import CsvError, convert

    read = pacsv.ReadOptions(block_size=block, column_names=header)
    schema = pa.schema(types)
    try:
        names = pacsv.open_csv(
            path, read_options=pacsv.ReadOptions(block_size=1 << 20, column_names=header)
        ).schema.names
        _need(names, path, types)
        offset = 0
        for batch in pacsv.open_csv(path, read_options=read, convert_options=as_text(list(types))):
            yield pa.record_batch(
                [
                    convert(
                        batch.column(f.name),
                        f.type,
                        f.name,
                        path,
                        offset,
                        "as the loader reads it",
                        "fix the value or drop the row",
                    )
                    for f in schema
                ],
                schema=schema,
            )
            offset += batch.num_rows
    except CsvError as exc:
        raise LoadError(str(exc)) from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise LoadError(f"cannot read {path}: {exc}") from exc


def _need(names: list[str], path: str, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in names]
    if missing:
        raise LoadError(
            f"{path} has no column(s) {', '.join(missing)}; columns: {', '.join(names)}"
        )


def _write(
    paths: list[str],
    out: str,
    schema: pa.Schema,
    convert: Callable[[pa.RecordBatch, str], pa.Table],
    progress: Callable[[int], None] | None,
    **read: object,
) -> LoadResult:
    rows = dropped = 0
    with pq.ParquetWriter(out, schema) as writer:
        for path in paths:
            for batch in _read(path, **read):  # type: ignore[arg-type]
                table = convert(batch, path)
                clean = table.drop_null()
                dropped += table.num_rows - clean.num_rows
                rows += clean.num_rows
                writer.write_table(clean.cast(schema))
                if progress:
                    progress(rows)
    return LoadResult(rows, dropped)


def load_chicago_crimes(
    paths: list[str], out: str, progress: Callable[[int], None] | None = None
) -> LoadResult:
    """Chicago's crime CSV → the CRIMES schema (``date`` parsed from ``MM/DD/YYYY hh:mm:ss AM``)."""
    from dfs_cer.datasets.crimes import SCHEMA

    types = {
        "ID": pa.int64(),
        "Case Number": pa.string(),
        "Date": pa.string(),
        "Primary Type": pa.string(),
        "IUCR": pa.string(),
        "Beat": pa.int32(),
        "District": pa.int32(),
        "FBI Code": pa.string(),
        "Latitude": pa.float64(),
        "Longitude": pa.float64(),
    }

    def convert(batch: pa.RecordBatch, path: str) -> pa.Table:
        try:
            date = pc.strptime(batch.column("Date"), format="%m/%d/%Y %I:%M:%S %p", unit="s")
        except pa.ArrowInvalid as exc:
            raise LoadError(f"{path}: Date values are not MM/DD/YYYY hh:mm:ss AM ({exc})") from exc
        return pa.table(
            [
                batch.column("ID"),
                batch.column("Case Number"),
                date,
                batch.column("Primary Type"),
                batch.column("IUCR"),
                batch.column("Beat"),
                batch.column("District"),
                batch.column("FBI Code"),
                batch.column("Latitude"),
                batch.column("Longitude"),
            ],
            names=SCHEMA.names,
        )

    return _write(paths, out, SCHEMA, convert, progress, types=types)


def _hex_to_int64(values: pa.Array) -> np.ndarray:
    """The reference's ride_id conversion: 16 hex digits as a signed 64-bit integer."""
    text = np.asarray(values.to_numpy(zero_copy_only=False), dtype="U16")
    raw = np.array([int(t, 16) if t else 0 for t in text], dtype=np.uint64)
    return raw.view(np.int64)


def load_citibike(
    paths: list[str], out: str, progress: Callable[[int], None] | None = None
) -> LoadResult:
    """Citi Bike trip CSVs → the CITIBIKE schema (type letter from duration and
    bike/member kind)."""
    from dfs_cer.datasets.citibike import SCHEMA, type_letter

    types = {
        "ride_id": pa.string(),
        "rideable_type": pa.string(),
        "started_at": pa.timestamp("ms"),
        "ended_at": pa.timestamp("ms"),
        "start_station_id": pa.string(),
        "end_station_id": pa.string(),
        "start_lat": pa.float64(),
        "start_lng": pa.float64(),
        "end_lat": pa.float64(),
        "end_lng": pa.float64(),
        "member_casual": pa.string(),
    }

    def station(col: pa.ChunkedArray | pa.Array) -> pa.Array:
        as_float = pc.cast(col, pa.float64(), safe=False)
        return pc.cast(pc.round(pc.multiply(as_float, 100.0)), pa.int32())

    def convert(batch: pa.RecordBatch, path: str) -> pa.Table:
        batch = (
            pa.Table.from_batches([batch]).drop_null().combine_chunks().to_batches()[0]
            if batch.num_rows
            else batch
        )
        if batch.num_rows == 0:
            return SCHEMA.empty_table()
        try:
            start_station, end_station = (
                station(batch.column("start_station_id")),
                station(batch.column("end_station_id")),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise LoadError(f"{path}: station ids must be numbers ({exc})") from exc
        started = batch.column("started_at").cast(pa.int64()).to_numpy()
        ended = batch.column("ended_at").cast(pa.int64()).to_numpy()
        electric = np.asarray(
            pc.equal(batch.column("rideable_type"), "electric_bike").to_numpy(zero_copy_only=False)
        )
        casual = np.asarray(
            pc.equal(batch.column("member_casual"), "casual").to_numpy(zero_copy_only=False)
        )
        kind = electric.astype(np.int64) * 2 + casual.astype(np.int64)
        letters = type_letter((ended - started) / 1000.0, kind)
        return pa.table(
            [
                pa.array(letters),
                pa.array(_hex_to_int64(batch.column("ride_id"))),
                start_station,
                end_station,
                batch.column("start_lat"),
                batch.column("start_lng"),
                batch.column("end_lat"),
                batch.column("end_lng"),
                batch.column("started_at"),
            ],
            names=SCHEMA.names,
        )

    return _write(paths, out, SCHEMA, convert, progress, types=types)


#: columns of the 2011 trace's task_events files (no header)
TASK_EVENTS = [
    "timestamp",
    "missing",
    "jobid",
    "index",
    "machine",
    "event_type",
    "user",
    "scheduling",
    "priority",
    "cpu",
    "ram",
    "disk",
    "different_machine",
]


def load_google_cluster(
    paths: list[str], out: str, progress: Callable[[int], None] | None = None
) -> LoadResult:
    """Google cluster ``task_events`` CSVs → the CLUSTER schema (type ``TP<event type>``, µs)."""
    from dfs_cer.datasets.cluster import SCHEMA

    types = {
        "timestamp": pa.int64(),
        "jobid": pa.int64(),
        "index": pa.int32(),
        "event_type": pa.int32(),
        "scheduling": pa.string(),
        "priority": pa.int32(),
        "cpu": pa.float32(),
        "ram": pa.float32(),
        "disk": pa.float32(),
        "missing": pa.string(),
        "machine": pa.string(),
        "user": pa.string(),
        "different_machine": pa.string(),
    }

    def convert(batch: pa.RecordBatch, path: str) -> pa.Table:
        kind = pc.binary_join_element_wise(
            "TP", pc.cast(batch.column("event_type"), pa.string()), ""
        )
        return pa.table(
            [
                kind,
                batch.column("jobid"),
                batch.column("index"),
                batch.column("scheduling"),
                batch.column("priority"),
                batch.column("cpu"),
                batch.column("ram"),
                batch.column("disk"),
                pc.cast(batch.column("timestamp"), pa.timestamp("us")),
            ],
            names=SCHEMA.names,
        )

    return _write(paths, out, SCHEMA, convert, progress, header=TASK_EVENTS, types=types)
