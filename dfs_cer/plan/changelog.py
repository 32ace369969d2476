"""Incremental re-runs after late files (pure logic): which time ranges a new file can affect,
and the changelog between two runs' matches.

A new event at time t can only take part in (or change) matches that start in [t - W, t] and
end by t + W, W the query's window, when each match depends only on the rows from its start
to its end: ALL MATCHES and the CER selections (each start's matches are its own), and SQL
semantics with AFTER MATCH SKIP TO NEXT ROW and no PREV/NEXT. A new file with events in
[lo, hi] therefore affects the matches starting in [lo - W, hi], computable from the rows in
[lo - W, hi + W]. Other queries (SKIP PAST LAST ROW chains matches: one new event can move
every later match) are recomputed over all rows; the changelog is exact either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.events.identity import ID_COLUMNS
from dfs_cer.pattern.ir import Anchor
from dfs_cer.pattern.ir import walk as walk_pattern
from dfs_cer.query import Analysis
from dfs_cer.query.expr import MatchNumber, walk
from dfs_cer.query.model import RowsPerMatch, SkipTo

ID, START, END = ID_COLUMNS
KIND = "change"
PREVIOUS = "previous_match_id"


def incremental_reason(
    analysis: Analysis, window_units: int | None, cer_selection: bool
) -> str | None:
    """None when late files can be handled by recomputing the ranges they affect; else why the
    whole time range must be recomputed."""
    mr = analysis.query.recognize
    if window_units is None:
        return "the query has no WITHIN window, so a new event can affect matches at any distance"
    if any(
        isinstance(n, MatchNumber)
        for e in [*(m.expr for m in mr.measures), *(d.condition for d in mr.definitions)]
        for n in walk(e)
    ):
        return "MATCH_NUMBER() numbers every match of a partition"
    if any(isinstance(n, Anchor) for n in walk_pattern(mr.pattern)):
        return (
            "^ or $ anchor the pattern to the partition's first or last row, which a time range "
            "cuts"
        )
    if mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED:
        return "WITH UNMATCHED ROWS outputs every row, matched or not"
    if mr.all_matches or cer_selection:
        return None
    if analysis.prev_reach or analysis.next_reach:
        return "PREV/NEXT read rows outside a match"
    if mr.after_match_skip.to is not SkipTo.NEXT_ROW:
        return (
            f"AFTER MATCH SKIP {mr.after_match_skip.to.value} chains matches (a new event can move "
            "every later match); SKIP TO NEXT ROW makes each start's match independent"
        )
    return None


_LEAST, _MOST = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def merge_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of inclusive integer ranges, sorted and merged (touching ranges join)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def affected(
    files: Sequence[dict[str, object]], window: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(rows to read, match starts to recompute) for new files with ``min_ts``/``max_ts``.

    An event at time t is a row of matches starting in ``[t - W, t]``, and decides matches
    starting in ``(t, t + W]`` too: a leading negation (``~B A C``) or a maximal Kleene set looks
    back up to a window from a match's last row. Those starts are recomputed, from the rows a
    window around them."""
    spans = [(int(f["min_ts"]), int(f["max_ts"])) for f in files]  # type: ignore[call-overload]

    def around(reach: int) -> list[tuple[int, int]]:  # in int64: no time lies past its ends
        return merge_ranges([(max(_LEAST, lo - reach), min(_MOST, hi + reach)) for lo, hi in spans])

    return around(2 * window), around(window)


def in_ranges(values: np.ndarray, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Mask: ``values[i]`` lies in some inclusive range (``ranges`` sorted and disjoint)."""
    if not ranges:
        return np.zeros(values.size, bool)
    arr = np.array(ranges, np.int64)
    k = np.searchsorted(arr[:, 0], values, side="right") - 1
    ok = k >= 0
    return ok & (values <= arr[np.maximum(k, 0), 1])


def _starts(table: pa.Table) -> np.ndarray:
    return np.asarray(
        table.column(START).fill_null(np.iinfo(np.int64).min).to_numpy(zero_copy_only=False),
        np.int64,
    )


def combine(
    old: pa.Table, new: pa.Table, starts: Sequence[tuple[int, int]] | None, order: Sequence[str]
) -> pa.Table:
    """The re-run's matches: ``old`` outside the recomputed start ranges and ``new`` inside them
    (every match of ``new`` when ``starts`` is None: a full recomputation), in canonical order."""
    if starts is None:
        merged = new
    else:
        keep_old = old.filter(pa.array(~in_ranges(_starts(old), starts)))
        keep_new = new.filter(pa.array(in_ranges(_starts(new), starts)))
        merged = (
            pa.concat_tables(
                [keep_old, keep_new.cast(old.schema) if old.num_rows else keep_new],
                promote_options="permissive",
            )
            if old.num_columns
            else keep_new
        )
    keys = [(c, "ascending") for c in [*order, START, END, ID] if c in merged.column_names]
    return merged.sort_by(keys) if merged.num_rows else merged


def changelog(old: pa.Table, new: pa.Table, partition_by: Sequence[str]) -> pa.Table:
    """Changes from ``old`` to ``new`` matches (whole relations of two runs, with id columns):
    ``new`` (an id only ``new`` has), ``invalidated`` (only ``old``), ``updated`` (a new match
    with the same partition, first and last time as a vanished one: extended or corrected in
    between; ``previous_match_id`` names the old one). Rows of ``new`` (``old`` for invalidated
    matches) with a ``change`` column first."""
    old_ids = set(old.column(ID).drop_null().to_pylist()) if old.num_rows else set()
    new_ids = set(new.column(ID).drop_null().to_pylist()) if new.num_rows else set()
    added, removed = new_ids - old_ids, old_ids - new_ids

    def spans(table: pa.Table, ids: set[int]) -> dict[tuple[object, ...], list[int]]:
        out: dict[tuple[object, ...], list[int]] = {}
        seen: set[int] = set()
        cols = [table.column(c).to_pylist() for c in (*partition_by, START, END, ID)]
        for row in zip(*cols, strict=True):
            mid = row[-1]
            if mid in ids and mid not in seen:
                seen.add(mid)
                out.setdefault(tuple(row[:-1]), []).append(mid)
        return out

    gone, came = spans(old, removed), spans(new, added)
    previous: dict[int, int] = {}
    for key, fresh in came.items():
        for a, r in zip(sorted(fresh), sorted(gone.get(key, [])), strict=False):
            previous[a] = r
    updated_old = set(previous.values())

    def rows(table: pa.Table, ids: set[int], kind: str | None) -> pa.Table:
        if not ids or not table.num_rows:
            return table.slice(0, 0)
        mask = pc.is_in(table.column(ID), value_set=pa.array(sorted(ids), pa.uint64()))
        picked = table.filter(pc.fill_null(mask, False))
        mids = picked.column(ID).to_pylist()
        kinds = [kind or ("updated" if m in previous else "new") for m in mids]
        prev = [previous.get(m) for m in mids] if kind is None else [None] * len(mids)
        return picked.add_column(0, KIND, pa.array(kinds, pa.string())).append_column(
            PREVIOUS, pa.array(prev, pa.uint64())
        )

    parts = [rows(new, added, None), rows(old, removed - updated_old, "invalidated")]
    parts = [p for p in parts if p.num_columns]
    if not parts or all(p.num_rows == 0 for p in parts):
        base = new if new.num_columns else old
        return (
            base.slice(0, 0)
            .add_column(0, KIND, pa.array([], pa.string()))
            .append_column(PREVIOUS, pa.array([], pa.uint64()))
        )
    out = pa.concat_tables([p for p in parts if p.num_rows], promote_options="permissive")
    return out.sort_by(
        [(START, "ascending"), (END, "ascending"), (KIND, "ascending"), (ID, "ascending")]
    )
