"""Time values of events: a time column as int64 numbers in its own units."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import UnsupportedFeatureError


def time_ints(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A time column (timestamps of any unit and zone, dates, integers) as int64 numpy values
    in its own units (dates: days since the epoch)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_temporal(arr.type):
        arr = (
            arr.view(pa.int64())
            if arr.type.bit_width == 64
            else pc.cast(arr.view(pa.int32()), pa.int64())
        )
    return np.asarray(pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False), np.int64)


def time_values(table: pa.Table, column: str) -> np.ndarray:
    """The ORDER BY time column ``column`` of ``table`` as int64 values (see :func:`time_ints`);
    a column of another type, or with NULLs, cannot place rows in time (WITHIN)."""
    arr = table.column(column).combine_chunks()
    if not (pa.types.is_temporal(arr.type) or pa.types.is_integer(arr.type)):
        raise UnsupportedFeatureError(
            f"WITHIN over a {arr.type} ORDER BY column is not supported",
            clause="WITHIN",
            hint="order by a timestamp or integer column",
            code="unsupported",
        )
    if arr.null_count:
        raise UnsupportedFeatureError(
            f"the ORDER BY column {column} has NULLs, which WITHIN cannot place in time",
            clause="WITHIN",
            hint="filter them out first",
            code="null-time",
        )
    return np.asarray(time_ints(arr), np.int64)


def moment(value: int | None, dtype: pa.DataType | None) -> str | int | None:
    """A time column's integer (as stored: :func:`time_ints`) written in the column's own type:
    ``2013-01-01 05:15:00.000`` for a timestamp (UTC, ``Z``, for one with a time zone), a date
    for a date; an integer time column's value as it is."""
    if value is None or dtype is None:  # no type known: the integer as it is
        return value
    if pa.types.is_timestamp(dtype) or pa.types.is_date(dtype):
        storage = pa.int32() if pa.types.is_date32(dtype) else pa.int64()
        return str(pa.array([value], storage).cast(dtype).cast(pa.string())[0].as_py())
    return value
