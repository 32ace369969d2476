"""Halo rows: the rows PREV/NEXT can read around the rows a pull strategy keeps (pure logic).

A query whose DEFINE or MEASURES navigate physically (``PREV(x, k)``, ``NEXT(x, k)``, nested
forms) reads up to ``k`` rows before the first and after the last row of a match, in the row
pattern partition's order. A storage node holding some of the rows returns, for every final
interval (contiguous patterns: every partition's rows inside the interval set are pulled) or
every pulled candidate's (partition, time) point (skip patterns), its own ``k`` nearest rows
before and after in its canonical order. The union over the nodes holds every row's exact ``k``
global neighbours (``spec/navigation-notes.md``: a global j-th predecessor on node n has at most
j - 1 rows of n between it and the pulled run). Rows are compared in the matchers' canonical
order: PARTITION BY, ORDER BY, then the event key and the remaining columns, duplicates dropped
as the matcher drops them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.events.order import same_as_previous, sort_and_partition
from dfs_cer.events.time import time_values
from dfs_cer.query.analyze import Analysis


def canonical(
    table: pa.Table, analysis: Analysis, event_key: Sequence[str], dedup: bool
) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``table`` in the matcher's canonical order (duplicates dropped with ``dedup``), the
    partition id and time of every sorted row, the partition bounds and each sorted row's index
    in ``table``."""
    mr = analysis.query.recognize
    order_by = [(s.column, s.descending, bool(s.nulls_first)) for s in mr.order_by]
    ordered, bounds, order = sort_and_partition(
        table, tuple(mr.partition_by), order_by, None, tuple(event_key), dedup
    )
    pid = np.repeat(np.arange(bounds.size - 1, dtype=np.int64), np.diff(bounds))
    t = time_values(ordered, analysis.order_column) if ordered.num_rows else np.zeros(0, np.int64)
    return ordered, pid, t, bounds, order


def _keys(pid: np.ndarray, values: np.ndarray, universe: np.ndarray) -> np.ndarray:
    """(partition, time) pairs as one int64 that sorts like the pair (times ranked in
    ``universe``)."""
    return pid * np.int64(universe.size + 1) + np.searchsorted(universe, values).astype(np.int64)


def _near(
    pid: np.ndarray,
    t: np.ndarray,
    inside: np.ndarray,
    next_lo: np.ndarray,
    has_next: np.ndarray,
    prev_hi: np.ndarray,
    has_prev: np.ndarray,
    before: int,
    after: int,
) -> np.ndarray:
    """Rows outside that lie within ``before`` rows (of their partition, on this node) of the
    next interval's start, or within ``after`` rows of the previous interval's end."""
    n = t.size
    universe = np.unique(np.concatenate([t, next_lo[has_next], prev_hi[has_prev]]))
    row_keys = _keys(pid, t, universe)  # non-decreasing: rows sorted by partition, then time
    i = np.arange(n, dtype=np.int64)
    halo = np.zeros(n, bool)
    if before > 0 and has_next.any():
        first_at = np.searchsorted(
            row_keys, _keys(pid, np.where(has_next, next_lo, 0), universe), side="left"
        )
        halo |= has_next & (first_at - i <= before)
    if after > 0 and has_prev.any():
        last_at = (
            np.searchsorted(
                row_keys, _keys(pid, np.where(has_prev, prev_hi, 0), universe), side="right"
            )
            - 1
        )
        halo |= has_prev & (i - last_at <= after)
    return halo & ~inside


def around_intervals(
    pid: np.ndarray, t: np.ndarray, starts: np.ndarray, ends: np.ndarray, before: int, after: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(inside, halo)`` masks of canonically sorted rows for closed, sorted, disjoint time
    intervals ``[starts[i], ends[i]]`` that apply to every partition."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    if starts.size == 0:
        empty = np.zeros(t.size, bool)
        return empty, empty.copy()
    at = np.searchsorted(starts, t, side="right") - 1
    inside = (at >= 0) & (t <= ends[np.maximum(at, 0)])
    nxt = at + 1
    has_next = nxt < starts.size
    next_lo = starts[np.minimum(nxt, starts.size - 1)]
    prv = np.searchsorted(ends, t, side="left") - 1
    has_prev = prv >= 0
    prev_hi = ends[np.maximum(prv, 0)]
    return inside, _near(pid, t, inside, next_lo, has_next, prev_hi, has_prev, before, after)


#: the most distinct per-point (before, after) pairs a request may carry (each costs a pass over
#: the node's rows; a query has one pair per combination of variables a row may be labelled with)
MAX_REACH_PAIRS = 64


def around_points(
    pid: np.ndarray,
    t: np.ndarray,
    point_pid: np.ndarray,
    point_t: np.ndarray,
    before: int | np.ndarray,
    after: int | np.ndarray,
) -> np.ndarray:
    """Rows sharing a point's (partition, time) (a tie group: any of them may be the point's
    neighbour), or within ``before``/``after`` rows of one, for per-partition time points.
    ``before``/``after`` are one count for every point or one per point (a point with neither
    still gets its tie group)."""
    if isinstance(before, np.ndarray) or isinstance(after, np.ndarray):
        b = np.broadcast_to(np.asarray(before, np.int64), point_t.shape)
        a = np.broadcast_to(np.asarray(after, np.int64), point_t.shape)
        out = np.zeros(t.size, bool)
        pairs = (
            np.unique(np.stack([b, a], axis=1), axis=0)
            if point_t.size
            else np.zeros((0, 2), np.int64)
        )
        if len(pairs) > MAX_REACH_PAIRS:
            raise ValueError(
                f"{len(pairs)} distinct (before, after) pairs; at most {MAX_REACH_PAIRS}"
            )
        for pb, pa_ in pairs:
            sel = (b == pb) & (a == pa_)
            out |= around_points(pid, t, point_pid[sel], point_t[sel], int(pb), int(pa_))
        return out
    keep = point_pid >= 0
    point_pid, point_t = np.asarray(point_pid[keep], np.int64), np.asarray(point_t[keep], np.int64)
    if point_t.size == 0 or t.size == 0:
        return np.zeros(t.size, bool)
    universe = np.unique(np.concatenate([t, point_t]))
    pkeys = np.unique(_keys(point_pid, point_t, universe))
    rkeys = _keys(pid, t, universe)
    span = np.int64(universe.size + 1)
    at = np.searchsorted(pkeys, rkeys, side="left")
    tied = (at < pkeys.size) & (pkeys[np.minimum(at, pkeys.size - 1)] == rkeys)
    nxt = np.searchsorted(pkeys, rkeys, side="right")
    has_next = (nxt < pkeys.size) & (pkeys[np.minimum(nxt, pkeys.size - 1)] // span == pid)
    next_lo = universe[np.minimum(pkeys[np.minimum(nxt, pkeys.size - 1)] % span, universe.size - 1)]
    prv = at - 1
    has_prev = (prv >= 0) & (pkeys[np.maximum(prv, 0)] // span == pid)
    prev_hi = universe[np.minimum(pkeys[np.maximum(prv, 0)] % span, universe.size - 1)]
    return tied | _near(pid, t, tied, next_lo, has_next, prev_hi, has_prev, before, after)


def point_partitions(
    ordered: pa.Table, bounds: np.ndarray, partition_by: Sequence[str], points: pa.Table
) -> np.ndarray:
    """The partition id (in ``ordered``'s bounds) of every point; -1 where this node holds no
    row of the point's partition. Partition values compare as the matcher compares them (NULL
    equals NULL)."""
    if not partition_by:
        return np.zeros(points.num_rows, np.int64)
    mine = ordered.select(list(partition_by)).take(pa.array(bounds[:-1]))
    # nullable: other nodes' columns may be where this node's are not (one log, two writers)
    mine = mine.cast(pa.schema([f.with_nullable(True) for f in mine.schema]))
    theirs = points.select(list(partition_by)).cast(mine.schema)
    both = pa.concat_tables([mine, theirs])
    _, groups, order = sort_and_partition(both, tuple(partition_by), [], None, (), False)
    gid = np.empty(both.num_rows, np.int64)
    gid[order] = np.repeat(np.arange(groups.size - 1, dtype=np.int64), np.diff(groups))
    lookup = np.full(groups.size, -1, np.int64)
    lookup[gid[: mine.num_rows]] = np.arange(mine.num_rows, dtype=np.int64)
    return lookup[gid[mine.num_rows :]]


def subtract_rows(rows: pa.Table, taken: pa.Table) -> np.ndarray:
    """Mask of ``rows`` left after removing one equal row per row of ``taken`` (a multiset
    difference on every column's value; ``taken`` must be a sub-multiset of ``rows``)."""
    if rows.num_rows == 0 or taken.num_rows == 0:
        return np.ones(rows.num_rows, bool)
    both = pa.concat_tables([taken.select(rows.column_names).cast(rows.schema), rows])
    marker = np.concatenate([np.zeros(taken.num_rows, np.int8), np.ones(rows.num_rows, np.int8)])
    ordered, _, order = sort_and_partition(
        both.append_column("__dfs_cer_side", pa.array(marker)),
        (),
        [(c, False) for c in rows.column_names] + [("__dfs_cer_side", False)],
    )
    run = np.ones(both.num_rows, bool)
    for name in rows.column_names:
        col = ordered.column(name)
        same = same_as_previous(col)
        if (
            pa.types.is_floating(col.type) and col.num_chunks and len(col) > 1
        ):  # a NaN copy is the same row
            nan = np.asarray(
                pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False), bool
            )
            same[1:] |= nan[1:] & nan[:-1]
        run &= same
    group = np.cumsum(~run) - 1  # equal rows form one group; taken copies sort first in it
    side = marker[order]
    taken_in_group = np.bincount(group, weights=(side == 0), minlength=group.max() + 1).astype(
        np.int64
    )
    first = np.searchsorted(group, group, side="left")
    rank = np.arange(both.num_rows) - first  # position inside the group: taken copies, then rows'
    keep_sorted = (side == 1) & (rank - taken_in_group[group] >= taken_in_group[group])
    keep = np.zeros(both.num_rows, bool)
    keep[order] = keep_sorted
    return keep[taken.num_rows :]


def no_halo(analysis: Analysis, schema: pa.Schema, limit: int) -> str | None:
    """Why halo rows cannot be found for this query, so every row must be pulled (the reason),
    or None: PREV/NEXT reaching more than ``limit`` rows (the halo limit), a descending first
    ORDER BY column, or one that is not an integer, date or timestamp column."""
    if not (analysis.prev_reach or analysis.next_reach):
        return None
    if max(analysis.prev_reach, analysis.next_reach) > limit:
        return (
            f"PREV/NEXT reach {analysis.prev_reach} row(s) before and {analysis.next_reach} after "
            f"a match, beyond the halo limit of {limit} rows: every row pulled"
        )
    if analysis.query.recognize.order_by[0].descending:
        return (
            "PREV/NEXT under a descending first ORDER BY column: halo rows are found in ascending "
            "time"
        )
    kind = (
        schema.field(analysis.order_column).type if analysis.order_column in schema.names else None
    )
    if kind is not None and not (
        pa.types.is_integer(kind) or pa.types.is_timestamp(kind) or pa.types.is_date(kind)
    ):
        return (
            f"PREV/NEXT with ORDER BY {analysis.order_column}, a {kind} column: halo rows are "
            "found by an integer, date or timestamp order"
        )
    return None
