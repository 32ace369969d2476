"""Situations derived where the rows are, stitched where they meet.

A storage node whose shard set is partitioned by time holds every row of each time block it
owns (all partitions, equal timestamps included), so it can derive the runs inside a block
exactly; only runs that touch a block's first or last row may continue in a neighbouring block
(on any node). It ships, per symbol, every run as ``(partition, block, ts, te)`` — ``te`` NULL
when the run reaches the block's last row — with ``at_start`` when it starts at the block's
first row, and every block's first time. The compute node walks each partition's blocks in
order and joins the open ends: the result equals deriving over all rows at once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer.events.order import same_as_previous
from dfs_cer.situations.derive import Derived, keyed, runs

BLOCK, SYMBOL, TS, TE, AT_START, FIRST_TS = (
    "__block",
    "__symbol",
    "__ts",
    "__te",
    "__at_start",
    "__first_ts",
)


def block_fragments(
    rows: pa.Table,
    partition: list[str],
    ts: np.ndarray,
    block_units: int,
    masks: dict[str, np.ndarray],
) -> tuple[pa.Table, pa.Table]:
    """Runs and block starts over ``rows`` (sorted by partition, time, tie order)."""
    n = rows.num_rows
    block = np.floor_divide(ts, block_units) if n else np.zeros(0, np.int64)
    change = np.zeros(n, bool)
    if n:
        change[0] = True
        change[1:] |= block[1:] != block[:-1]
        for c in partition:
            change[1:] |= ~same_as_previous(rows.column(c))[1:]
    part = np.cumsum(change) - 1
    starts = np.flatnonzero(change)
    blocks = keyed(rows, partition, starts, **{BLOCK: block[starts], FIRST_TS: ts[starts]})
    pieces = []
    for name, mask in masks.items():
        first, last, closed, at_start = runs(mask, part)
        te = np.where(closed, ts[np.minimum(last + 1, max(n - 1, 0))] if n else last, 0)
        pieces.append(
            keyed(
                rows,
                partition,
                first,
                **{
                    BLOCK: block[first],
                    SYMBOL: pa.array([name] * first.size, pa.string()),
                    TS: ts[first],
                    TE: pa.array(te, mask=~closed),
                    AT_START: at_start,
                },
            )
        )
    fragments = pa.concat_tables(pieces) if pieces else pa.table({})
    return fragments, blocks


def stitch(
    fragments: pa.Table,
    blocks: pa.Table,
    partition: list[str],
    names: list[str],
    bounds: dict[str, tuple[int | None, int | None]],
) -> tuple[pa.Table, dict[str, Derived]]:
    """Every symbol's situations from all nodes' fragments and blocks: the partitions' key
    values (one row per partition id) and, per symbol, situations in (partition, ts) order
    (``first``/``last`` are -1: the rows are elsewhere). ``bounds``: duration limits."""
    keys = [(c, "ascending") for c in partition] + [(BLOCK, "ascending")]
    blocks = blocks.sort_by(keys)
    nb = blocks.num_rows
    new_part = np.ones(nb, bool)
    if nb:
        same = np.ones(nb, bool)
        same[0] = False
        for c in partition:
            same &= same_as_previous(blocks.column(c))
        new_part = ~same
    block_part = np.cumsum(new_part) - 1
    part_values = keyed(blocks, partition, np.flatnonzero(new_part))
    block_first = np.asarray(blocks.column(FIRST_TS).to_numpy(), np.int64)
    # each fragment's block position in the sorted block list (partition then block)
    out: dict[str, Derived] = {}
    for name in names:
        mine = (
            fragments.filter(pa.compute.equal(fragments.column(SYMBOL), name))
            if fragments.num_rows
            else fragments
        )
        pos = _block_positions(mine, blocks, partition) if mine.num_rows else np.zeros(0, np.int64)
        ts = (
            np.asarray(mine.column(TS).to_numpy(), np.int64)
            if mine.num_rows
            else np.zeros(0, np.int64)
        )
        te_col = mine.column(TE) if mine.num_rows else pa.array([], pa.int64())
        open_end = np.asarray(te_col.is_null().to_numpy(zero_copy_only=False), bool)
        te = np.asarray(te_col.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        at_start = (
            np.asarray(mine.column(AT_START).to_numpy(zero_copy_only=False), bool)
            if mine.num_rows
            else np.zeros(0, bool)
        )
        order = np.lexsort((ts, pos))
        pos, ts, te, open_end, at_start = (
            pos[order],
            ts[order],
            te[order],
            open_end[order],
            at_start[order],
        )
        # a run continues the previous fragment when it starts at its block's first row, the
        # previous fragment is open-ended, and its block is the partition's next block
        cont = np.zeros(ts.size, bool)
        if ts.size > 1:
            cont[1:] = (
                at_start[1:]
                & open_end[:-1]
                & (pos[1:] == pos[:-1] + 1)
                & (block_part[pos[1:]] == block_part[pos[:-1]])
            )
        # merge chains: a chain's start is its first fragment's ts, its end the last fragment's
        head = ~cont
        heads = np.flatnonzero(head)
        tails = np.append(heads[1:] - 1, ts.size - 1) if ts.size else heads
        c_ts, c_pos_last = ts[heads], pos[tails]
        c_open, c_te = open_end[tails], te[tails]
        # an open chain closes at the next block's first row (same partition), else stays open
        nxt = c_pos_last + 1
        has_next = (
            (nxt < nb) & (block_part[np.minimum(nxt, max(nb - 1, 0))] == block_part[c_pos_last])
            if nb
            else np.zeros(c_ts.size, bool)
        )
        c_te = np.where(
            c_open & has_next, block_first[np.minimum(nxt, max(nb - 1, 0))] if nb else 0, c_te
        )
        closed = ~c_open | has_next
        keep = closed & (c_ts < c_te)
        lo, hi = bounds.get(name, (None, None))
        if lo is not None:
            keep &= c_te - c_ts >= lo
        if hi is not None:
            keep &= c_te - c_ts <= hi
        part = block_part[pos[heads]] if heads.size else np.zeros(0, np.int64)
        none = np.full(int(keep.sum()), -1, np.int64)
        out[name] = Derived(part[keep].astype(np.int64), c_ts[keep], c_te[keep], none, none)
    return part_values, out


def _block_positions(fragments: pa.Table, blocks: pa.Table, partition: list[str]) -> np.ndarray:
    """Index of each fragment's (partition, block) in the sorted ``blocks``."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register(
            "f",
            fragments.select([*partition, BLOCK]).append_column(
                "__i", pa.array(np.arange(fragments.num_rows, dtype=np.int64))
            ),
        )
        con.register(
            "b",
            blocks.select([*partition, BLOCK]).append_column(
                "__j", pa.array(np.arange(blocks.num_rows, dtype=np.int64))
            ),
        )
        on = " AND ".join(f'f."{c}" IS NOT DISTINCT FROM b."{c}"' for c in [*partition, BLOCK])
        got = con.sql(f"SELECT f.__i, b.__j FROM f JOIN b ON {on}").fetchnumpy()
    finally:
        con.close()
    out = np.empty(fragments.num_rows, np.int64)
    out[np.asarray(got["__i"], np.int64)] = np.asarray(got["__j"], np.int64)
    return out
