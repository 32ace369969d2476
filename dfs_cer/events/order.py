"""The canonical order of events: sort by PARTITION BY and ORDER BY, ties broken by the event key
and the other columns, partitions found, duplicate events dropped; identical rows and runs.

Every engine, the planner and the storage nodes order rows this one way, so the order is the
same whatever order the rows arrived in, which storage node held them and which strategy
pulled them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _sortable(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_temporal(t)
        or pa.types.is_decimal(t)
    )


def _sort_keys(table: pa.Table, columns: list[str]) -> pa.Table:
    """``columns`` of ``table`` in a form pyarrow can sort and compare: dictionary columns by
    their values, other types (lists, structs, maps) by a 64-bit hash of their content (the
    same in every process), so ties order and duplicates compare by every column's value."""
    out = table.select(columns)
    for i, field in enumerate(out.schema):
        if _sortable(field.type):
            continue  # as it is: no copy
        if pa.types.is_dictionary(field.type) and _sortable(field.type.value_type):
            col: pa.Array = out.column(i).combine_chunks().dictionary_decode()
        else:
            from dfs_cer.events.identity import row_hashes

            col = pa.array(row_hashes(out.select([i]), [field.name]), pa.uint64())
        out = out.set_column(i, field.name, col)
    return out


def identical_runs(table: pa.Table) -> np.ndarray:
    """``out[i]``: row i equals row i - 1 in every column (NULL equals NULL); ``out[0]`` False."""
    n = table.num_rows
    same = np.zeros(n, bool)
    if n > 1:
        same[1:] = True
        keys = _sort_keys(table, table.column_names)
        for i in range(keys.num_columns):
            same &= same_as_previous(keys.column(i))
    return same


def same_as_previous(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``out[i]``: row i equals row i - 1 in this column (NULL equals NULL); ``out[0]`` False."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(col)
    out = np.zeros(n, bool)
    if n > 1 and not col.null_count and pa.types.is_integer(col.type):
        values = col.to_numpy()
        out[1:] = values[1:] == values[:-1]
    elif n > 1:
        a, b = col.slice(1), col.slice(0, n - 1)
        same = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        out[1:] = np.asarray(pc.or_(same, both_null).to_numpy(zero_copy_only=False), bool)
    return out


#: an ORDER BY key: (column, descending) or (column, descending, nulls first); NULLs sort last by
#: default
OrderKey = tuple[str, bool] | tuple[str, bool, bool]


def _stable_argsort(values: np.ndarray) -> np.ndarray:
    """A stable argsort of integers: within 65,536 of each other by radix (linear time); else,
    when (value - min) * n + position fits 63 bits, by sorting those distinct composite keys
    (an unstable sort of distinct keys is stable, and numpy's is several times faster)."""
    n = values.size
    if not n:
        return np.zeros(0, np.int64)
    if bool((values[1:] >= values[:-1]).all()):  # already in order (a log in time order)
        return np.arange(n, dtype=np.int64)
    low, span = int(values.min()), int(values.max()) - int(values.min())
    if span < 1 << 16:
        return np.argsort((values - low).astype(np.uint16), kind="stable")
    if span < (1 << 62) // n:
        composite = (values - low) * n + np.arange(n, dtype=np.int64)
        composite.sort()
        return composite % n
    return np.argsort(values, kind="stable")


def _integer_order(
    sortable: pa.Table, keys: list[tuple[str, str, str]], named: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The order of a sort by every key of ``keys`` when its first ``named`` keys (partition and
    ORDER BY) are ascending integers or times without NULLs: stable argsorts from the last of
    them to the first (linear on rows already in time order), then the rows that tie on all of
    them (few, in an event log) sorted by the remaining keys, run by run. None when that does not
    hold or ties are many (the caller sorts by every key); else the order and ``tie``
    (``tie[i]``: sorted row i + 1 equals row i on those keys)."""
    cols = []
    for name, direction, _ in keys[:named]:
        col = sortable.column(name)
        kind = col.type
        if (
            direction != "ascending"
            or col.null_count
            or not (
                pa.types.is_integer(kind)
                or pa.types.is_timestamp(kind)
                or pa.types.is_date(kind)
                or pa.types.is_duration(kind)
            )
        ):
            return None
        if not pa.types.is_integer(kind):
            col = col.cast(pa.int64() if not pa.types.is_date32(kind) else pa.int32())
        cols.append(np.asarray(col.to_numpy(), np.int64))
    order: np.ndarray | None = None  # None: the input order
    for values in reversed(cols):
        moved = values if order is None else values[order]
        if bool((moved[1:] >= moved[:-1]).all()):  # already in order (a log in time order)
            continue
        by = _stable_argsort(moved)
        order = by if order is None else order[by]
    if order is None:
        order = np.arange(len(sortable), dtype=np.int64)
    tie = np.ones(order.size - 1, bool)
    for values in cols:
        ranked = values[order]
        tie &= ranked[1:] == ranked[:-1]
    if not tie.any():
        return order, tie
    in_run = np.zeros(order.size, bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    at = np.flatnonzero(in_run)
    if at.size > order.size // 4 or len(keys) == named:
        return None if len(keys) > named else (order, tie)
    run = np.cumsum(np.concatenate([[True], ~tie]))[at]  # which run of tied rows
    tied = sortable.select([k[0] for k in keys[named:]]).take(pa.array(order[at]))
    tied = tied.append_column("\x00run", pa.array(run))
    within = pc.sort_indices(tied, sort_keys=[("\x00run", "ascending"), *keys[named:]])
    order[at] = order[at][np.asarray(within.to_numpy(), np.int64)]
    return order, tie


def _tied_duplicates(
    sortable: pa.Table, order: np.ndarray, tie: np.ndarray, others: list[str]
) -> np.ndarray:
    """``out[i]``: sorted row i equals row i - 1 in every column of ``others``, given ``tie``
    (where it already equals it on the partition and time keys)."""
    out = np.zeros(order.size, bool)
    at = np.flatnonzero(tie) + 1
    if not at.size:
        return out
    same = np.ones(at.size, bool)
    if others:
        now = sortable.select(others).take(pa.array(order[at]))
        before = sortable.select(others).take(pa.array(order[at - 1]))
        for name in others:
            a, b = now.column(name), before.column(name)
            equal = pc.fill_null(pc.equal(a, b), False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            same &= np.asarray(pc.or_(equal, both_null).to_numpy(zero_copy_only=False), bool)
    out[at[same]] = True
    return out


def sort_and_partition(
    table: pa.Table,
    partition_by: tuple[str, ...],
    order_by: Sequence[OrderKey],
    columns: set[str] | None = None,
    event_key: tuple[str, ...] = (),
    dedup: bool = False,
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """See :func:`sort_partition_flags` (without flags)."""
    sorted_table, bounds, order, _ = sort_partition_flags(
        table, partition_by, order_by, columns, event_key, dedup
    )
    return sorted_table, bounds, order


def sort_partition_flags(
    table: pa.Table,
    partition_by: tuple[str, ...],
    order_by: Sequence[OrderKey],
    columns: set[str] | None = None,
    event_key: tuple[str, ...] = (),
    dedup: bool = False,
    flags: np.ndarray | None = None,
) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """Sort by partition and order keys, then by the event key, then by the row's other columns
    (only ``columns`` are carried along when given); with ``dedup``, drop duplicate events.

    Rows that tie on the ORDER BY keys (SQL leaves their order to the implementation) are
    ordered by their event key columns, then their remaining columns, ascending: the order is
    canonical, the same whatever order the rows arrived in, which storage node held them and
    which strategy pulled them. A duplicate is a row equal to the previous one in the partition
    and ORDER BY columns and in the event key (every comparable column when the key is empty);
    the first of a run of duplicates is kept.

    Returns the sorted table, partition boundaries ``[0, ..., n]``, the sort permutation
    (indices of the kept rows in the input) and ``flags`` (one bool per input row, e.g. halo
    rows) in sorted order; a kept duplicate is flagged only when every copy of it was.
    """
    if flags is None:
        flags = np.zeros(len(table), bool)
    keys: list[tuple[str, str, str]] = []
    for item in [(c, False) for c in partition_by] + list(order_by):
        c, descending = item[0], item[1]
        nulls_first = len(item) > 2 and bool(item[2])
        if c not in {k[0] for k in keys}:  # a column named twice sorts by its first place
            keys.append(
                (
                    c,
                    "descending" if descending else "ascending",
                    "at_start" if nulls_first else "at_end",
                )
            )
    named = {k[0] for k in keys}
    key_cols = [c for c in event_key if c not in named]
    rest = [f.name for f in table.schema if f.name not in named and f.name not in key_cols]
    if keys and order_by:  # without ORDER BY rows keep their input order within a partition
        keys += [(c, "ascending", "at_end") for c in key_cols + rest]
    order = np.arange(len(table), dtype=np.int64)
    sortable = _sort_keys(table, [k[0] for k in keys]) if keys and len(table) > 1 else None
    fast = None
    if sortable is not None:
        fast = _integer_order(sortable, keys, len(named)) if order_by else None
        order = (
            fast[0]
            if fast is not None
            else np.asarray(
                pc.sort_indices(sortable, sort_keys=keys).to_numpy(zero_copy_only=False), np.int64
            )
        )
    if dedup and sortable is not None and order_by:
        identity = [k[0] for k in keys[: len(named)]] + (key_cols if event_key else rest)
        if fast is not None:  # a duplicate ties on the partition and time keys: look only there
            duplicate = _tied_duplicates(sortable, order, fast[1], identity[len(named) :])
        else:
            ordered = sortable.select(identity).take(pa.array(order))
            duplicate = np.ones(len(table), bool)
            duplicate[0] = False
            for name in identity:
                duplicate &= same_as_previous(ordered.column(name))
        if duplicate.any():
            run_starts = np.nonzero(~duplicate)[0]
            kept = np.minimum.reduceat(flags[order].astype(np.int8), run_starts).astype(bool)
            order = order[~duplicate]
            flags = flags.copy()
            flags[order] = kept
    if columns is not None:
        keep = [
            c
            for c in table.column_names
            if c in columns or c in partition_by or c in {o[0] for o in order_by}
        ]
        table = table.select(keep)
    if not np.array_equal(order, np.arange(len(table))):
        table = table.take(pa.array(order))
    if any(c.num_chunks > 1 for c in table.columns):  # once here, not per column read
        table = table.combine_chunks()
    n = len(table)
    change = np.zeros(n, bool)
    if n:
        change[0] = True
    for c in partition_by:
        change[1:] |= ~same_as_previous(_sort_keys(table, [c]).column(0))[1:]
    bounds = np.append(np.nonzero(change)[0], n).astype(np.int64)
    return table, bounds, order, flags[order]
