"""Copies of a query's rows on a storage node: charged before they are made, in bounded chunks.

Every copy a query makes on a node (the rows a scan keeps, a sort, the rows a pull takes, a
reply compressed for the wire) is charged to the query's work first (:meth:`Work.charge` with
:data:`~dfs_cer.work.ROWS`): a copy that would pass the node's memory budget is refused, naming
the budget and the way out, before a byte of it is allocated. Its bytes are counted from the
columns' buffers: a fixed width per row for fixed-width columns, each row's own bytes for
string and binary columns (from their offsets: a long value counts whole), the average width
for other types.

A copy is also cut into chunks of at most :data:`CHUNK_BYTES` (one row may pass it alone): a
string column's 32-bit offsets reach 2 GiB, and one take of more characters than that fails
("overflowed binary array capacity"). A source column in several chunks is taken chunk by chunk,
since Arrow's take concatenates a chunked column first (a one-row take from a 3 GiB column
overflows, and copies the column).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.work import ROWS, Work

#: the most bytes of one chunk of a copy (of every column together), far below Arrow's 2 GiB
#: of a string array; also the most bytes of one record batch a reply streams
CHUNK_BYTES = 64 * 1024**2
#: the most bytes of string or binary data one array holds (32-bit offsets)
ARRAY_BYTES = 2**31 - 1


def fits_one_array(column: pa.ChunkedArray) -> bool:
    """Whether ``column``'s chunks can be concatenated into one array (its values fit 32-bit
    offsets; every fixed-width column can)."""
    try:
        column.type.bit_width  # noqa: B018 - raises for types with offsets
    except ValueError:
        return column.nbytes < ARRAY_BYTES
    return True


def _offsets(array: pa.Array) -> np.ndarray:
    """The ``len(array) + 1`` offsets of a (large) string or binary array (of its slice)."""
    if len(array) == 0:
        return np.zeros(1, np.int64)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    dtype = np.int64 if large else np.int32
    buffer = array.buffers()[1]
    values = np.frombuffer(buffer, dtype=dtype, count=buffer.size // np.dtype(dtype).itemsize)
    return values[array.offset : array.offset + len(array) + 1]


def _is_binary(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_large_binary(kind)
    )


def _starts(column: pa.ChunkedArray) -> np.ndarray:
    return np.cumsum([0, *(len(c) for c in column.chunks)], dtype=np.int64)


def _by_chunk(column: pa.ChunkedArray, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``rows`` (indices into the whole column) grouped by chunk: (chunk, positions in
    ``rows``), chunks ascending, positions in their order within ``rows``."""
    starts = _starts(column)
    which = np.searchsorted(starts, rows, side="right") - 1
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(column.num_chunks + 1), side="left")
    return [
        (k, order[bounds[k] : bounds[k + 1]])
        for k in range(column.num_chunks)
        if bounds[k + 1] > bounds[k]
    ]


def _lengths(column: pa.ChunkedArray, rows: np.ndarray) -> np.ndarray:
    """Bytes of each row's value of a string or binary column (``rows``: indices)."""
    if column.num_chunks == 1:
        return _spans(_offsets(column.chunk(0)), rows)
    out = np.zeros(rows.size, np.int64)
    starts = _starts(column)
    for k, at in _by_chunk(column, rows):
        out[at] = _spans(_offsets(column.chunk(k)), rows[at] - starts[k])
    return out


def _spans(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``offsets[rows + 1] - offsets[rows]`` in int64, gathering before widening (widening a
    column's int32 offsets first copied all of them for every take)."""
    return offsets[rows + 1].astype(np.int64) - offsets[rows]


def _row_bytes(table: pa.Table, rows: np.ndarray) -> tuple[float, np.ndarray | None]:
    """The bytes a copy of ``rows`` takes: the same for every row (validity bits, fixed-width
    values, offsets, the average of other types), and each row's own string and binary bytes
    (None when no column has any)."""
    fixed = 0.0
    variable: np.ndarray | None = None
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        fixed += 1 / 8  # validity
        if _is_binary(kind):
            large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
            fixed += 8 if large else 4
            lengths = _lengths(column, rows)
            variable = lengths if variable is None else variable + lengths
        elif pa.types.is_dictionary(kind):  # a take keeps the dictionary: the indices are copied
            fixed += kind.index_type.bit_width / 8
        elif pa.types.is_null(kind):
            continue
        else:
            try:
                fixed += kind.bit_width / 8
            except ValueError:  # nested or view types: their average width
                fixed += column.nbytes / max(1, len(column))
    return fixed, variable


def copy_bytes(table: pa.Table, rows: np.ndarray | None = None) -> int:
    """The bytes a copy of ``rows`` of ``table`` takes (every row when None)."""
    picked = np.arange(table.num_rows, dtype=np.int64) if rows is None else rows
    fixed, variable = _row_bytes(table, np.asarray(picked, np.int64))
    return _total(fixed, variable, picked.size)


def _total(fixed: float, variable: np.ndarray | None, n: int) -> int:
    return math.ceil(fixed * n) + (0 if variable is None else int(variable.sum()))


def _groups(fixed: float, variable: np.ndarray | None, n: int, limit: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` ranges of ``n`` rows, each of at most ``limit`` bytes (or a
    single row)."""
    if n == 0:
        return [(0, 0)]
    if variable is None:
        per = max(1, int(limit // max(fixed, 1.0)))
        return [(a, min(n, a + per)) for a in range(0, n, per)]
    total = np.cumsum(variable + fixed)
    out = []
    start, base = 0, 0.0
    while start < n:
        end = max(start + 1, int(np.searchsorted(total, base + limit, side="right")))
        out.append((start, end))
        base, start = float(total[end - 1]), end
    return out


def _take_column(column: pa.ChunkedArray, rows: np.ndarray) -> list[pa.Array]:
    """``rows`` of a column as arrays of its type, taken from each chunk on its own."""
    if column.num_chunks == 1:
        return [column.chunk(0).take(pa.array(rows))]
    if rows.size == 0:
        return [pa.array([], type=column.type)]
    starts = _starts(column)
    groups = _by_chunk(column, rows)
    pieces = [column.chunk(k).take(pa.array(rows[at] - starts[k])) for k, at in groups]
    which = np.searchsorted(starts, rows, side="right")
    if bool(np.all(which[1:] >= which[:-1])):  # the pieces in chunk order are the rows in order
        # one array per group: a reply streams one record batch per group, as from one chunk
        return [pa.concat_arrays(pieces)] if len(pieces) > 1 else pieces
    order = np.concatenate([at for _, at in groups])
    back = np.empty_like(order)
    back[order] = np.arange(order.size)
    return [pa.concat_arrays(pieces).take(pa.array(back))]


def take(
    table: pa.Table, rows: np.ndarray, work: Work | None = None, limit: int | None = None
) -> pa.Table:
    """The ``rows`` of ``table`` (indices, in their order), charged to ``work`` before the copy
    is made, in chunks of at most ``limit`` bytes (:data:`CHUNK_BYTES`)."""
    rows = np.asarray(rows, np.int64)
    limit = CHUNK_BYTES if limit is None else limit
    fixed, variable = _row_bytes(table, rows)
    total = math.ceil(float(fixed * rows.size + (0 if variable is None else int(variable.sum()))))
    chunked = any(c.num_chunks > 1 for c in table.columns)
    # the pieces of a group taken from several chunks are put together (and back in order when
    # the rows are not ascending): a group's bytes held once (twice) more meanwhile
    ascending = rows.size < 2 or bool(np.all(rows[1:] >= rows[:-1]))
    extra = (1 if ascending else 2) * min(total, limit) if chunked else 0
    if work is not None:
        work.charge(total + extra, ROWS)
    groups = _groups(fixed, variable, rows.size, limit)
    try:
        if len(groups) == 1 and not chunked:
            return table.take(pa.array(rows))
        columns = []
        for column in table.columns:
            parts = [p for a, b in groups for p in _take_column(column, rows[a:b])]
            columns.append(pa.chunked_array(parts, type=column.type))
            if work is not None:
                work.check()
        return pa.Table.from_arrays(columns, schema=table.schema)
    finally:
        if work is not None and extra:
            work.uncharge(extra, ROWS)


def keep(table: pa.Table, mask: np.ndarray, work: Work | None = None) -> pa.Table:
    """The rows of ``table`` where ``mask`` is true, as :func:`take` copies them."""
    return take(table, np.flatnonzero(np.asarray(mask, bool)), work)


def sort(table: pa.Table, column: str, work: Work | None = None) -> pa.Table:
    """``table`` sorted by ``column`` (stable, NULL last: as ``Table.sort_by``), as :func:`take`
    copies it; ``table`` itself when it is in order already (a scan of rows kept by time)."""
    if table.num_rows < 2 or in_time_order(table.column(column)):
        return table
    if work is not None:
        work.charge(8 * table.num_rows, ROWS)  # the order
    order = np.asarray(pc.sort_indices(table, [(column, "ascending")]), np.int64)
    return take(table, order, work)


def bounded(table: pa.Table, limit: int | None = None) -> pa.Table:
    """``table`` (no copy) in record batches of at most ``limit`` bytes (:data:`CHUNK_BYTES`;
    one row may pass it alone): what a reply streams, one bounded batch at a time."""
    limit = CHUNK_BYTES if limit is None else limit
    if table.nbytes <= limit:
        return table
    rows = np.arange(table.num_rows, dtype=np.int64)
    fixed, variable = _row_bytes(table, rows)
    batches = [
        batch
        for a, b in _groups(fixed, variable, table.num_rows, limit)
        for batch in table.slice(a, b - a).to_batches()
    ]
    return pa.Table.from_batches(batches, schema=table.schema)


def in_time_order(column: pa.ChunkedArray) -> bool:
    """Whether ``column`` (a time column) has no NULL and never decreases (checked a chunk at a
    time: 8 bytes per row of the largest chunk at most, for timestamp columns none)."""
    if column.null_count or not (
        pa.types.is_timestamp(column.type)
        or pa.types.is_integer(column.type)
        or pa.types.is_date(column.type)
    ):
        return False
    last = None
    for chunk in column.chunks:
        if len(chunk) == 0:
            continue
        values = np.asarray(chunk.view(pa.int64()) if chunk.type.bit_width == 64 else chunk)
        if (last is not None and values[0] < last) or bool(np.any(values[1:] < values[:-1])):
            return False
        last = values[-1]
    return True
