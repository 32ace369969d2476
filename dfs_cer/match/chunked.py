"""Match one time chunk of a split input exactly (see :mod:`dfs_cer.plan.chunks`).

The chunk's rows are sorted in the engine's canonical order first, so every row gets the same
(partition, time, rank) name in each chunk that holds it; matches may start only at owned rows
past the entering state's cursor; the chunk reports, per partition, where matching resumes after
its last match and its last matched row when those lie past its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dfs_cer.match.columns import HALO, split_halo
from dfs_cer.match.identity import ID_COLUMNS
from dfs_cer.match.rowpattern import run_row_pattern, sort_partition_flags, time_values
from dfs_cer.plan.chunks import POS, ChunkPlan, Key, Part, Report, State
from dfs_cer.query import Analysis
from dfs_cer.query.model import RowsPerMatch

ROW = "__dfs_cer_row"  # a row's place in the chunk's sorted rows (ALL ROWS ... WITH UNMATCHED ROWS)


@dataclass
class ChunkResult:
    relation: pa.Table
    reports: list[Report]
    #: why PREV/NEXT may have lacked rows (the chunk must be re-run reading further), or None
    short: str | None = None


def _ranks(ts: np.ndarray, part_of_row: np.ndarray) -> np.ndarray:
    """Each row's rank among the rows of its partition with its time (sorted rows)."""
    n = ts.size
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = (ts[1:] != ts[:-1]) | (part_of_row[1:] != part_of_row[:-1])
    first = np.maximum.accumulate(np.where(new, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    return (np.arange(n) - first).astype(np.int64)


def _before(ts: np.ndarray, rank: np.ndarray, key: Key) -> np.ndarray:
    return (ts < key[0]) | ((ts == key[0]) & (rank < key[1]))


def _at_most(ts: np.ndarray, rank: np.ndarray, key: Key) -> np.ndarray:
    return (ts < key[0]) | ((ts == key[0]) & (rank <= key[1]))


def run_chunk(table: pa.Table, analysis: Analysis, plan: ChunkPlan, k: int,
              entering: Mapping[Part, State] | None = None, segments: np.ndarray | None = None) -> ChunkResult:
    """The matches chunk ``k`` owns, from the rows it reads (any order). ``segments`` and halo
    rows (:data:`HALO`) mean what they mean to :func:`run_row_pattern`."""
    mr = analysis.query.recognize
    lo, hi = plan.owned(k)
    if mr.all_matches:  # ALL MATCHES: every start is independent; a match belongs where it starts
        from dfs_cer.match.cer import run_cer

        out = run_cer(table, analysis, match_ids=True).table
        start = np.asarray(out.column(ID_COLUMNS[1]).to_numpy(zero_copy_only=False), np.int64)
        out = out.filter(pa.array((start >= lo) & (start < hi)))
        return ChunkResult(out.drop(list(ID_COLUMNS)), [])
    entering = entering or {}
    order_by = [(s.column, s.descending, bool(s.nulls_first)) for s in mr.order_by]
    partition_by = tuple(mr.partition_by)
    table, halo = split_halo(table)
    table, bounds, _, halo_sorted = sort_partition_flags(table, partition_by, order_by, None, analysis.event_key,
                                                         analysis.dedup, halo)
    if halo is not None:
        table = table.append_column(HALO, pa.array(halo_sorted))
    n = table.num_rows
    ts = time_values(table, order_by[0][0]) if n else np.zeros(0, np.int64)
    part_of_row = np.repeat(np.arange(bounds.size - 1), np.diff(bounds)) if n else np.zeros(0, np.int64)
    rank = _ranks(ts, part_of_row)
    parts: list[Part] = [()] * (bounds.size - 1)
    if partition_by and n:
        heads = table.select(list(partition_by)).take(pa.array(bounds[:-1])).to_pylist()
        parts = [tuple(h[c] for c in partition_by) for h in heads]
    index = {p: i for i, p in enumerate(parts)}
    may_start = (ts >= lo) & (ts < hi)
    cover = np.full(n, False)
    for part, state in entering.items():
        i = index.get(part)
        if i is None:
            continue
        rows = slice(int(bounds[i]), int(bounds[i + 1]))
        if state.cursor is not None:
            may_start[rows] &= ~_before(ts[rows], rank[rows], state.cursor)
        if state.cover is not None:
            cover[rows] = _at_most(ts[rows], rank[rows], state.cover)
    short = _short(ts, plan, analysis, lo, hi) if not partition_by else None
    unmatched = mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED
    if unmatched:
        table = table.append_column(ROW, pa.array(np.arange(n, dtype=np.int64)))
    out = run_row_pattern(table, analysis, may_start=may_start, spans=True, match_ids=unmatched, segments=segments)
    relation = out.table
    if unmatched:
        row = np.asarray(relation.column(ROW).to_numpy(zero_copy_only=False), np.int64)
        matched = np.asarray(relation.column(ID_COLUMNS[0]).is_valid().to_numpy(zero_copy_only=False), bool)
        owned = (ts[row] >= lo) & (ts[row] < hi) & ~cover[row]
        relation = relation.filter(pa.array(matched | owned)).drop([ROW, *ID_COLUMNS])
    spans = out.spans
    assert spans is not None
    reports: list[Report] = []
    if hi < POS and spans.start.size:
        reports = _reports(spans, ts, rank, part_of_row, parts, plan.reads(k)[1], hi, unmatched)
    return ChunkResult(relation, reports, short)


def _short(ts: np.ndarray, plan: ChunkPlan, analysis: Analysis, lo: int, hi: int) -> str | None:
    """Did the chunk read too few rows for PREV/NEXT (time chunks of one partition)? It read
    enough when the input has no rows beyond what it read, or PREV/NEXT's reach fits in it."""
    if analysis.prev_reach and lo - plan.lead > plan.first and int(np.count_nonzero(ts < lo)) < analysis.prev_reach:
        return f"fewer than {analysis.prev_reach} rows before time {lo} for PREV"
    if analysis.next_reach and hi + plan.tail < plan.last:
        window_end = hi + int(analysis.window_units or 0)
        if int(np.count_nonzero(ts > window_end)) < analysis.next_reach:
            return f"fewer than {analysis.next_reach} rows after time {window_end} for NEXT"
    return None


def _reports(spans: object, ts: np.ndarray, rank: np.ndarray, part_of_row: np.ndarray, parts: list[Part],
             read_end: int, hi: int, unmatched: bool) -> list[Report]:
    from dfs_cer.match.rowpattern import MatchSpans

    assert isinstance(spans, MatchSpans)
    n = ts.size
    order = spans.order
    start_part = part_of_row[np.minimum(spans.start, max(n - 1, 0))]
    boundary: Key = (hi, 0)
    out = []
    for p in np.unique(start_part):
        mine = np.nonzero(start_part == p)[0]
        last = mine[np.argmax(spans.start[mine])]
        resume_pos = int(spans.resume[last])
        past: Key = (read_end + 1, 0)  # after every row of the partition this chunk read
        if resume_pos < n and part_of_row[order[resume_pos]] == p:
            row = int(order[resume_pos])
            resume: Key | None = (int(ts[row]), int(rank[row]))
        else:
            resume = past
        if resume is not None and resume <= boundary:
            resume = None
        cover: Key | None = None
        if unmatched:
            ends = spans.end[mine]
            full = ends > spans.start[mine]
            if full.any():
                row = int(order[int(ends[full].max()) - 1])
                cover = (int(ts[row]), int(rank[row]))
                if cover < boundary:
                    cover = None
        if resume is not None or cover is not None:
            out.append(Report(parts[int(p)], resume, cover))
    return out


def run_split(table: pa.Table, analysis: Analysis, plan: ChunkPlan, max_rounds: int = 64) -> tuple[pa.Table, int]:
    """Every chunk of ``plan`` over ``table``, re-run until consistent, in one process: the
    reference for the distributed run (same chunks, same reports, same fix-up). Returns the
    relation and the number of chunk re-runs."""
    from dfs_cer.plan.chunks import assign, required_states, stale_chunks

    mr = analysis.query.recognize
    ts = time_values(table, mr.order_by[0].column)
    results: dict[int, ChunkResult] = {}
    computed: list[dict[Part, State]] = [{} for _ in range(plan.chunks)]
    todo = list(range(plan.chunks))
    reruns = 0
    for _ in range(max_rounds):
        rows, chunk = assign(ts, plan, todo)
        for k in todo:
            part = table.take(pa.array(rows[chunk == k]))
            results[k] = run_chunk(part, analysis, plan, k, computed[k])
        short = [k for k in todo if results[k].short]
        if short:
            plan = plan.wider()
            todo = short
            reruns += len(short)
            continue
        required = required_states(plan, {k: r.reports for k, r in results.items()})
        todo = stale_chunks(required, computed)
        if not todo:
            break
        for k in todo:
            computed[k] = required[k]
        reruns += len(todo)
    else:
        raise RuntimeError(f"chunks did not settle in {max_rounds} rounds")
    return pa.concat_tables([results[k].relation for k in range(plan.chunks)]), reruns
