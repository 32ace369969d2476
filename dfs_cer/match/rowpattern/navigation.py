"""Row conditions a storage node checks over its own rows (pure logic): PREV/NEXT conjuncts
(:func:`navigation_masks`) and the halo reach of pulled candidates under their variables'
independent conditions (:func:`candidate_reach`).

A conjunct such as ``B.price < PREV(B.price)`` reads only the row being labelled and its
neighbours in the row pattern partition's canonical order. A node that holds those neighbours
checks it like the engines do and keeps only the rows that pass as the variable's candidates:

- ``partitions``: the node holds every row of each PARTITION BY group it holds (shards
  type-partitioned by a PARTITION BY column, or a single node): every row is decided exactly;
- ``time``: the node holds whole time windows (time partitioning: every row of a window, of
  every partition, on one node). Inside a run of rows from consecutive windows the neighbours
  are exact; a row within the navigation's reach of a run's edge may have neighbours on another
  node, so it stays a candidate (a superset: the compute node's engine decides it).

A row dropped here fails the conjunct in pull_all's matching too, so candidates keep every match.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from dfs_cer.events.order import identical_runs, sort_and_partition
from dfs_cer.events.time import time_values
from dfs_cer.match.rowpattern.conditions import row_masks
from dfs_cer.query.analyze import Analysis
from dfs_cer.query.expr import conjuncts

MODES = ("partitions", "time")


def navigation_masks(
    table: pa.Table,
    analysis: Analysis,
    event_key: Sequence[str],
    dedup: bool,
    mode: str,
    window_units: int = 0,
) -> dict[str, np.ndarray]:
    """For every variable with ``navigating`` conjuncts, a mask over ``table``'s rows (input
    order): False where the conjuncts are false (or the row is a duplicate the matcher drops).
    ``mode`` is ``partitions`` or ``time`` (windows of ``window_units`` in the ORDER BY column)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    parts = {v.name: v.navigating for v in analysis.variables if v.navigating}
    if not parts or table.num_rows == 0:
        return {name: np.ones(table.num_rows, bool) for name in parts}
    mr = analysis.query.recognize
    order_by = [(s.column, s.descending, bool(s.nulls_first)) for s in mr.order_by]
    ordered, bounds, order = sort_and_partition(
        table, tuple(mr.partition_by), order_by, None, tuple(event_key), dedup
    )
    n = ordered.num_rows
    starts = np.zeros(n, bool)
    starts[bounds[:-1][bounds[:-1] < n]] = True
    if mode == "time":
        if window_units <= 0:
            raise ValueError("time mode needs the shard set's window length")
        w = np.floor_divide(time_values(ordered, analysis.order_column), window_units)
        starts[1:] |= (w[1:] - w[:-1]) >= 2  # a window of another node may lie between
    block = np.cumsum(starts) - 1
    block_bounds = np.append(np.flatnonzero(starts), n)
    part_start, part_end = block_bounds[block], block_bounds[block + 1]
    order_type = ordered.schema.field(order_by[0][0]).type
    time_unit = order_type.unit if pa.types.is_timestamp(order_type) else None
    masks = row_masks(mr, parts, ordered, part_start, part_end, time_unit)
    if mode == "time":  # neighbours possibly on another node: undecided, so kept
        i = np.arange(n)
        edge = (i - part_start < analysis.prev_reach) | (part_end - 1 - i < analysis.next_reach)
        masks = {name: m | edge for name, m in masks.items()}
    if not dedup and n > 1:
        # identical copies of a row cannot be told apart on the compute node (a halo copy and a
        # candidate copy tie in its sort): a copy is a candidate when any copy of it passes
        same = identical_runs(ordered)
        if same.any():
            starts_at = np.flatnonzero(~same)
            run = np.cumsum(~same) - 1
            masks = {name: np.maximum.reduceat(m, starts_at)[run] for name, m in masks.items()}
    out = {}
    for name, m in masks.items():
        full = np.zeros(table.num_rows, bool)
        full[order] = m
        out[name] = full
    return out


def candidate_reach(events: pa.Table, analysis: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """Rows PREV/NEXT may read before / after each pulled candidate: the most any variable whose
    independent condition the row passes reads around its rows (a row failing a variable's
    independent condition is never labelled by it, whatever its neighbours hold)."""
    n = events.num_rows
    before, after = np.zeros(n, np.int64), np.zeros(n, np.int64)
    reaching = [v for v in analysis.variables if not v.any_row and any(analysis.reach_of(v.name))]
    parts = {v.name: tuple(conjuncts(v.independent)) for v in reaching if v.independent is not None}
    bound = np.zeros(n, np.int64)  # the conditions are row-local: no navigation bounds needed
    order_type = (
        events.schema.field(analysis.order_column).type
        if analysis.order_column in events.column_names
        else None
    )
    unit = order_type.unit if order_type is not None and pa.types.is_timestamp(order_type) else None
    masks = (
        row_masks(analysis.query.recognize, parts, events, bound, bound + n, unit) if parts else {}
    )
    for v in reaching:
        b, a = analysis.reach_of(v.name)
        mask = masks.get(v.name, np.ones(n, bool))
        before = np.maximum(before, np.where(mask, b, 0))
        after = np.maximum(after, np.where(mask, a, 0))
    return before, after
