"""Stable identities of events and matches (for changelogs and idempotent re-runs).

An event is identified by its partition, its time and its event key (every comparable column
when the key is empty); a match by its events in order and the variable each is labelled with,
leaving out the rows a skip variable absorbs between the variables (``{- N* -}``, ``N*?`` where
the query lets strategies leave them unpulled): the other rows determine them, and an id must
not depend on which rows a strategy pulled.
Hashes are 64-bit: DuckDB's ``hash()`` over the identity columns (vectorised, the same value
for the same content in every process), mixed with splitmix64.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

#: columns ``match_ids=True`` adds to a MATCH_RECOGNIZE relation: the match's id and the ORDER
#: BY time of its first and last row
ID_COLUMNS = ("__match_id", "__match_start", "__match_end")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = np.uint64(0xD6E8FEB86659FD93)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (uint64 arrays; wraps around)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def identity_columns(
    schema: pa.Schema,
    partition_by: Sequence[str],
    order_by: Sequence[str],
    event_key: Sequence[str],
) -> list[str]:
    head = [*partition_by, *[c for c in order_by if c not in partition_by]]
    # every column (DuckDB hashes any type, dictionaries and lists by their values)
    rest = list(event_key) if event_key else [f.name for f in schema]
    return head + [c for c in rest if c not in head]


def row_hashes(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One uint64 per row of ``table`` over ``columns`` (NULLs hash too)."""
    if table.num_rows == 0:
        return np.zeros(0, np.uint64)
    import duckdb

    con = duckdb.connect()
    try:
        selected = table.select(list(columns))
        # dictionaries by their values: the same content hashes alike whatever its encoding
        selected = pa.table(
            {
                name: col.dictionary_decode() if pa.types.is_dictionary(col.type) else col
                for name, col in zip(
                    selected.column_names,
                    (c.combine_chunks() for c in selected.columns),
                    strict=True,
                )
            }
        )
        con.register("rows_", selected)
        args = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        out = con.sql(f"SELECT hash({args}) AS h FROM rows_").fetchnumpy()["h"]
    finally:
        con.close()
    return _mix(np.asarray(out, np.uint64))


def event_hashes(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """:func:`row_hashes` of events for match ids: times in seconds or milliseconds hash as
    microseconds (a parquet file stores ``timestamp[s]`` as milliseconds, so the rows a storage
    node serves and the rows given to the local engine differ in unit, not in value)."""
    out = table.select(list(columns))
    for i, field in enumerate(out.schema):
        if pa.types.is_timestamp(field.type) and field.type.unit in ("s", "ms"):
            target: pa.DataType = pa.timestamp("us", field.type.tz)
        elif pa.types.is_time32(field.type):
            target = pa.time64("us")
        else:
            continue
        try:
            out = out.set_column(i, field.name, out.column(i).cast(target))
        except pa.ArrowInvalid:  # beyond microseconds' range: hashed as stored
            continue
    return row_hashes(out, columns)


def label_hashes(labels: Sequence[str]) -> np.ndarray:
    """A uint64 per variable name (stable: from the name's bytes)."""
    import zlib

    return _mix(np.array([zlib.crc32(n.encode()) for n in labels], np.uint64))


def match_ids(
    row_hash: np.ndarray, label_hash: np.ndarray, m_count: np.ndarray, empty_row: np.ndarray
) -> np.ndarray:
    """Ids of matches whose rows are given flattened in match order.

    ``row_hash``/``label_hash``: per flattened row; ``m_count``: rows per match (0 for an empty
    match, identified by ``empty_row``'s hash, the row it stands at)."""
    m = m_count.size
    out = np.zeros(m, np.uint64)
    if m == 0:
        return out
    starts = np.concatenate([[0], np.cumsum(m_count)[:-1]]).astype(np.int64)
    pos = np.arange(row_hash.size, dtype=np.int64) - np.repeat(starts, m_count)
    with np.errstate(over="ignore"):
        terms = _mix(row_hash ^ (label_hash * np.uint64(31)) ^ _mix(pos.astype(np.uint64)))
        nonempty = m_count > 0
        if terms.size:
            sums = (
                np.add.reduceat(terms, starts[nonempty])
                if nonempty.any()
                else np.zeros(0, np.uint64)
            )
            out[nonempty] = _mix(sums.astype(np.uint64) + m_count[nonempty].astype(np.uint64))
        out[~nonempty] = _mix(empty_row[~nonempty] ^ _EMPTY)
    return out
