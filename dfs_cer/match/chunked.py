"""Match one time chunk of a split input exactly (see :mod:`dfs_cer.plan.chunks`).

The chunk's rows are sorted in the engine's canonical order first, so every row gets the same
(partition, time, rank) name in each chunk that holds it; matches may start only at owned rows
past the entering state's cursor; the chunk reports, per partition, where matching resumes after
its last match and its last matched row when those lie past its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.config import MatcherConfig
from dfs_cer.events.identity import ID_COLUMNS
from dfs_cer.events.order import sort_partition_flags
from dfs_cer.events.time import moment, time_values
from dfs_cer.match.columns import HALO, split_halo
from dfs_cer.match.numbering import EMPTY, hashable, renumber, stands_in, with_stand_ins
from dfs_cer.match.rowpattern.engine import run_row_pattern
from dfs_cer.plan.chunks import (
    NEG,
    POS,
    ChunkPlan,
    Key,
    Part,
    Report,
    State,
    owns,
    pick_reports,
)
from dfs_cer.query import Analysis
from dfs_cer.query.model import RowsPerMatch

#: the matcher settings of a run given none (the defaults)
_MATCHER = MatcherConfig()

ROW = "__dfs_cer_row"  # a row's place in the chunk's sorted rows (ALL ROWS ... WITH UNMATCHED ROWS)


@dataclass
class ChunkResult:
    relation: pa.Table
    reports: list[Report]
    #: why PREV/NEXT may have lacked rows (the chunk must be re-run reading further), or None
    short: str | None = None
    #: a re-run that met the fresh run: its rows stand before this time, the fresh run's from it
    since: int | None = None
    #: the start time of the last match (one partition; None: none or several partitions)
    last_start: int | None = None
    #: a re-run that read only a prefix of the chunk (the plan's limit) and did not meet the fresh
    #: run in it: it must run again reading the whole chunk
    unmet: bool = False


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


START = (
    "__dfs_cer_start"  # the time a relation row's match starts at (an unmatched row: its own time)
)
START_RANK = (
    "__dfs_cer_start_rank"  # its first row's rank among the rows of that time (NULL: unmatched)
)


@dataclass
class _Sorted:
    """A chunk's rows in the engine's canonical order, with each row's (partition, time, rank)."""

    table: pa.Table
    ts: np.ndarray
    rank: np.ndarray
    part_of_row: np.ndarray
    bounds: np.ndarray
    parts: list[Part]

    def rows_of(self, part: Part) -> slice | None:
        try:
            i = self.parts.index(part)
        except ValueError:
            return None
        return slice(int(self.bounds[i]), int(self.bounds[i + 1]))


def _sorted(table: pa.Table, analysis: Analysis) -> _Sorted:
    mr = analysis.query.recognize
    order_by = [(s.column, s.descending, bool(s.nulls_first)) for s in mr.order_by]
    partition_by = tuple(mr.partition_by)
    table, halo = split_halo(table)
    table, bounds, _, halo_sorted = sort_partition_flags(
        table, partition_by, order_by, None, analysis.event_key, analysis.dedup, halo
    )
    if halo is not None:
        table = table.append_column(HALO, pa.array(halo_sorted))
    n = table.num_rows
    ts = time_values(table, order_by[0][0]) if n else np.zeros(0, np.int64)
    part_of_row = (
        np.repeat(np.arange(bounds.size - 1), np.diff(bounds)) if n else np.zeros(0, np.int64)
    )
    parts: list[Part] = [()] * (bounds.size - 1)
    if partition_by and n:
        heads = table.select(list(partition_by)).take(pa.array(bounds[:-1])).to_pylist()
        parts = [tuple(hashable(h[c]) for c in partition_by) for h in heads]
    return _Sorted(table, ts, _ranks(ts, part_of_row), part_of_row, bounds, parts)


def _masks(
    rows: _Sorted, lo: int, hi: int, entering: Mapping[Part, State]
) -> tuple[np.ndarray, np.ndarray]:
    """Where matches may start (owned rows past the cursor) and which rows are covered already."""
    ts, rank = rows.ts, rows.rank
    may_start = owns(ts, lo, hi)
    cover = np.zeros(ts.size, bool)
    for part, state in entering.items():
        where = rows.rows_of(part)
        if where is None:
            continue
        if state.cursor is not None:
            may_start[where] &= ~_before(ts[where], rank[where], state.cursor)
        if state.cover is not None:
            cover[where] = _at_most(ts[where], rank[where], state.cover)
    return may_start, cover


def _match(
    rows: _Sorted,
    analysis: Analysis,
    may_start: np.ndarray,
    cover: np.ndarray,
    lo: int,
    hi: int,
    segments: np.ndarray | None,
    cut: tuple[bool, bool],
    upto: int | None = None,
    matcher: MatcherConfig = _MATCHER,
) -> tuple[pa.Table, Any]:
    """The engine over the sorted rows (the first ``upto`` only): the relation with :data:`START`,
    :data:`START_RANK` and :data:`EMPTY` (unmatched rows only where owned and not covered;
    stand-in rows for empty matches it shows no row of) and the spans. ``cut``: the chunk leaves
    out rows before / after the ones it read (:meth:`ChunkPlan.cut`); a prefix leaves out more."""
    mr = analysis.query.recognize
    n = rows.ts.size if upto is None else upto
    cut = (cut[0], cut[1] or n < rows.ts.size)
    table = rows.table if upto is None else rows.table.slice(0, upto)
    ts = rows.ts[:n]
    unmatched = mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED
    if unmatched:
        table = table.append_column(ROW, pa.array(np.arange(n, dtype=np.int64)))
    out = run_row_pattern(
        table,
        analysis,
        may_start=may_start[:n],
        spans=True,
        match_ids="times",
        segments=segments,
        cut_off=cut,
        max_matches=matcher.max_matches,
        max_steps=matcher.max_steps,
        max_seconds=matcher.max_seconds,
    )
    relation = out.table
    start = relation.column(ID_COLUMNS[1])
    # the rank of each match's first row among its partition's rows of that time ("times" ids
    # hold its place in the sorted rows): with the time, a name every chunk gives the match alike
    matched = np.asarray(
        relation.column(ID_COLUMNS[0]).is_valid().to_numpy(zero_copy_only=False), bool
    )
    place = np.asarray(
        relation.column(ID_COLUMNS[0]).fill_null(0).to_numpy(zero_copy_only=False), np.int64
    )
    assert out.spans is not None
    order = out.spans.order
    first_rank = rows.rank[order[np.minimum(place, order.size - 1)]] if order.size else place
    start_rank = pa.array(first_rank, pa.int64(), mask=~matched)
    if unmatched:
        row = np.asarray(relation.column(ROW).to_numpy(zero_copy_only=False), np.int64)
        owned = owns(ts[row], lo, hi) & ~cover[:n][row]
        start = pa.array(
            np.where(
                matched, np.asarray(start.fill_null(0).to_numpy(zero_copy_only=False)), ts[row]
            ),
            pa.int64(),
        )
        keep = pa.array(matched | owned)
        relation, start, start_rank = (
            relation.drop([ROW]).filter(keep),
            start.filter(keep),
            start_rank.filter(keep),
        )
    relation = relation.drop(list(ID_COLUMNS)).append_column(
        START,
        pa.array(start, pa.int64())
        if not isinstance(start, pa.ChunkedArray)
        else start.cast(pa.int64()),
    )
    # an empty match the relation shows no row of still has a MATCH_NUMBER(): a stand-in row
    empty = order[out.spans.start[out.spans.end == out.spans.start]] if stands_in(analysis) else []
    heads = np.asarray(empty, np.int64)
    relation = with_stand_ins(
        relation.append_column(START_RANK, start_rank),
        analysis,
        table.take(pa.array(heads)),
        ts[heads],
        rows.rank[heads],
        (START, START_RANK),
    )
    return relation, out.spans


def run_chunk(
    table: pa.Table,
    analysis: Analysis,
    plan: ChunkPlan,
    k: int,
    entering: Mapping[Part, State] | None = None,
    segments: np.ndarray | None = None,
    matcher: MatcherConfig = _MATCHER,
) -> ChunkResult:
    """The matches chunk ``k`` owns, from the rows it reads (any order), with :data:`START`.
    ``segments`` and halo rows (:data:`HALO`) mean what they mean to :func:`run_row_pattern`."""
    mr = analysis.query.recognize
    lo, hi = plan.owned(k)
    if mr.all_matches:  # ALL MATCHES: every start is independent; a match belongs where it starts
        from dfs_cer.match.cer.engine import run_cer

        out = run_cer(
            table,
            analysis,
            match_ids=True,
            kleene=matcher.kleene,
            max_matches=matcher.max_matches,
            max_steps=matcher.max_steps,
        ).table
        start = np.asarray(out.column(ID_COLUMNS[1]).to_numpy(zero_copy_only=False), np.int64)
        owned = owns(start, lo, hi)
        out = out.filter(pa.array(owned)).drop(list(ID_COLUMNS))
        out = out.append_column(START, pa.array(start[owned]))
        out = out.append_column(START_RANK, pa.nulls(out.num_rows, pa.int64()))
        return ChunkResult(out.append_column(EMPTY, pa.array(np.zeros(out.num_rows, bool))), [])
    rows = _sorted(table, analysis)
    may_start, cover = _masks(rows, lo, hi, entering or {})
    order = mr.order_by[0].column
    dtype = table.schema.field(order).type if order in table.column_names else None
    short = _short(rows.ts, plan, analysis, lo, hi, dtype) if not mr.partition_by else None
    relation, spans = _match(
        rows, analysis, may_start, cover, lo, hi, segments, plan.cut(k), matcher=matcher
    )
    result = ChunkResult(relation, _chunk_reports(rows, spans, plan, k, mr), short)
    result.last_start = _last_start(rows, spans)
    return result


def _chunk_reports(rows: _Sorted, spans: Any, plan: ChunkPlan, k: int, mr: Any) -> list[Report]:
    hi = plan.owned(k)[1]
    if hi >= POS or not spans.start.size:
        return []
    unmatched = mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED
    return _reports(
        spans, rows.ts, rows.rank, rows.part_of_row, rows.parts, plan.reads(k)[1], hi, unmatched
    )


def _last_start(rows: _Sorted, spans: Any) -> int | None:
    """The start time of the chunk's last match (one partition), None without matches."""
    if not spans.start.size or rows.bounds.size != 2:
        return None
    return int(rows.ts[spans.order[int(spans.start.max())]])


def _attempted(spans: Any, n: int) -> np.ndarray:
    """Rows a run tried a match at (or skipped as unable to start one): every row but those
    strictly inside a match it skipped past (AFTER MATCH SKIP)."""
    delta = np.zeros(n + 2, np.int64)
    inner = spans.resume > spans.start + 1
    np.add.at(delta, spans.start[inner] + 1, 1)
    np.add.at(delta, np.minimum(spans.resume[inner], n + 1), -1)
    return np.cumsum(delta)[:n] == 0


def _meets(analysis: Analysis) -> bool:
    """May a re-run stop where it meets the fresh run? Not with PARTITION BY (a meeting row per
    partition), ALL MATCHES (never re-run) or WITH UNMATCHED ROWS (overlapping matches cover
    rows past the meeting row)."""
    mr = analysis.query.recognize
    return not (
        mr.partition_by
        or mr.all_matches
        or mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED
    )


def rerun_chunk(
    table: pa.Table,
    analysis: Analysis,
    plan: ChunkPlan,
    k: int,
    entering: Mapping[Part, State],
    segments: np.ndarray | None = None,
    matcher: MatcherConfig = _MATCHER,
) -> ChunkResult:
    """Chunk ``k`` again from the state the chunks before it leave, only until its run coincides
    with the chunk's first (fresh) run: both runs try a match at the same row, so everything
    after it is equal. The result holds the matches before that row and ``since`` (its time):
    the fresh run's matches from ``since`` on stand. Without such a row (or with PARTITION BY)
    the whole chunk is re-run (``since`` None). The prefix read doubles until the runs meet."""
    mr = analysis.query.recognize
    lo, hi = plan.owned(k)
    if not _meets(analysis) or set(entering) - {()}:
        if plan.limit(k) is not None:
            return ChunkResult(pa.table({}), [], unmet=True)
        return run_chunk(table, analysis, plan, k, entering, segments, matcher)
    rows = _sorted(table, analysis)
    may_start, cover = _masks(rows, lo, hi, entering)
    state = entering.get((), State())
    fresh = owns(rows.ts, lo, hi)
    window = int(analysis.window_units or 0)
    span = max(window, 1)
    ts, rank = rows.ts, rows.rank
    past_cover = (
        ~_at_most(ts, rank, state.cover) if state.cover is not None else np.ones(ts.size, bool)
    )
    until = plan.limit(k)
    while lo > NEG and lo + span < hi and (until is None or lo + span + plan.tail <= until):
        stop = lo + span
        # the prefix holds every row a match starting before ``stop`` can reach, and the rows NEXT
        # reads past them (by position: ties are whole in the sorted rows)
        upto = int(np.searchsorted(ts, stop + window, side="right")) + int(analysis.next_reach)
        if upto > ts.size:
            if until is not None:  # this read stopped early: NEXT may lack rows
                return ChunkResult(pa.table({}), [], unmet=True)
            upto = ts.size
        f_start = fresh & (ts < stop)
        r_start = may_start & (ts < stop)
        cut = plan.cut(k)
        _, f_spans = _match(rows, analysis, f_start, cover, lo, hi, segments, cut, upto, matcher)
        _, r_spans = _match(rows, analysis, r_start, cover, lo, hi, segments, cut, upto, matcher)
        both = _attempted(f_spans, upto) & _attempted(r_spans, upto)
        after = (
            ~_before(ts[:upto], rank[:upto], state.cursor)
            if state.cursor is not None
            else np.ones(upto, bool)
        )
        meet = np.flatnonzero(
            both
            & after
            & (rank[:upto] == 0)
            & (ts[:upto] >= lo)
            & (ts[:upto] < stop)
            & past_cover[:upto]
        )
        if meet.size:
            since = int(ts[meet[0]])
            relation, spans = _match(
                rows,
                analysis,
                may_start & (ts < since),
                cover,
                lo,
                since,
                segments,
                plan.cut(k),
                upto,
                matcher,
            )
            result = ChunkResult(relation, _chunk_reports(rows, spans, plan, k, mr))
            result.since = since
            result.last_start = _last_start(rows, spans)
            return result
        span *= 2
    if until is not None and until < hi + plan.tail:
        return ChunkResult(pa.table({}), [], unmet=True)
    return run_chunk(table, analysis, plan, k, entering, segments, matcher)


#: a re-run reads this many windows past its chunk's start first (it usually meets the fresh run
#: within one or two)
PREFIX_WINDOWS = 8


def prefix_limit(plan: ChunkPlan, k: int, analysis: Analysis) -> int | None:
    """The time a first re-run of chunk ``k`` reads up to (None: the whole chunk, which is what
    a re-run of PARTITION BY or WITH UNMATCHED ROWS queries reads)."""
    lo, hi = plan.owned(k)
    window = analysis.window_units
    if window is None or lo <= NEG or not _meets(analysis):
        return None
    until = lo + PREFIX_WINDOWS * max(int(window), 1) + plan.tail
    return until if until < hi + plan.tail else None


def _short(
    ts: np.ndarray,
    plan: ChunkPlan,
    analysis: Analysis,
    lo: int,
    hi: int,
    dtype: pa.DataType | None = None,
) -> str | None:
    """Did the chunk read too few rows for PREV/NEXT (time chunks of one partition)? It read
    enough when the input has no rows beyond what it read, or PREV/NEXT's reach fits in it
    (times said in the time column's type ``dtype``)."""
    if (
        analysis.prev_reach
        and lo - plan.lead > plan.first
        and int(np.count_nonzero(ts < lo)) < analysis.prev_reach
    ):
        return f"fewer than {analysis.prev_reach} rows before time {moment(lo, dtype)} for PREV"
    if analysis.next_reach and hi + plan.tail < plan.last:
        window_end = hi + int(analysis.window_units or 0)
        if int(np.count_nonzero(ts > window_end)) < analysis.next_reach:
            return (
                f"fewer than {analysis.next_reach} rows after time {moment(window_end, dtype)} "
                "for NEXT"
            )
    return None


def _reports(
    spans: object,
    ts: np.ndarray,
    rank: np.ndarray,
    part_of_row: np.ndarray,
    parts: list[Part],
    read_end: int,
    hi: int,
    unmatched: bool,
) -> list[Report]:
    from dfs_cer.match.rowpattern.engine import MatchSpans

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


def run_split(
    table: pa.Table, analysis: Analysis, plan: ChunkPlan, max_rounds: int = 64
) -> tuple[pa.Table, int]:
    """Every chunk of ``plan`` over ``table``, re-run until consistent, in one process: the
    reference for the distributed run (same chunks, same reports, same fix-up). Returns the
    relation (without :data:`START`, :data:`START_RANK` and stand-in rows) and the number of chunk
    re-runs."""
    from dfs_cer.plan.chunks import assign, settle

    mr = analysis.query.recognize
    ts = time_values(table, mr.order_by[0].column)
    fresh: dict[int, ChunkResult] = {}
    latest: dict[int, ChunkResult] = {}
    computed: list[dict[Part, State]] = [{} for _ in range(plan.chunks)]
    todo = list(range(plan.chunks))
    whole: set[int] = set()
    reruns = 0
    for _ in range(max_rounds):
        limits = {
            k: prefix_limit(plan, k, analysis)
            for k in todo
            if k in fresh and not fresh[k].short and k not in whole
        }
        run_plan = plan.limited({k: v for k, v in limits.items() if v is not None})
        rows, chunk = assign(ts, run_plan, todo)
        for k in todo:
            part = table.take(pa.array(rows[chunk == k]))
            if k not in fresh or fresh[k].short:
                fresh[k] = run_chunk(part, analysis, run_plan, k, {})
                if computed[k]:  # a widened re-run of a chunk with a state
                    latest[k] = run_chunk(part, analysis, run_plan, k, computed[k])
            else:
                latest[k] = rerun_chunk(part, analysis, run_plan, k, computed[k])
        unmet = [k for k in todo if k in latest and latest[k].unmet]
        whole |= set(unmet)
        short = [k for k in todo if fresh[k].short or (k in latest and latest[k].short)]
        if short or unmet:
            if short:
                why = " ".join(str(fresh[k].short or latest[k].short) for k in short)
                plan = plan.wider("PREV" in why, "NEXT" in why)
            todo = sorted({*short, *unmet})
            reruns += len(todo)
            continue
        todo = settle(
            plan, computed, {k: effective_reports(fresh[k], latest.get(k)) for k in fresh}
        )
        if not todo:
            break
        reruns += len(todo)
    else:
        raise RuntimeError(f"chunks did not settle in {max_rounds} rounds")
    parts = []
    for k in range(plan.chunks):
        for piece in final_pieces(fresh[k], latest.get(k)):
            parts.append(piece)
    relation = renumber(pa.concat_tables(parts), analysis, START, START_RANK)
    if stands_in(analysis):  # stand-in rows of empty matches count in the numbers, then go
        relation = relation.filter(pc.invert(relation.column(EMPTY)))
    return relation.drop([START, START_RANK, EMPTY]), reruns


def effective_reports(fresh: ChunkResult, rerun: ChunkResult | None) -> list[Report]:
    """A chunk's reports: its re-run's, or the fresh run's where the re-run met it before the
    fresh run's last match (from there on the two are one run)."""
    return pick_reports(
        fresh.reports,
        fresh.last_start,
        None if rerun is None else rerun.reports,
        None if rerun is None else rerun.since,
    )


def final_pieces(fresh: ChunkResult, rerun: ChunkResult | None) -> list[pa.Table]:
    """A chunk's final rows: the fresh run's, or the re-run's (with the fresh run's from the
    re-run's ``since`` on)."""
    if rerun is None:
        return [fresh.relation]
    if rerun.since is None:
        return [rerun.relation]
    start = np.asarray(fresh.relation.column(START).to_numpy(zero_copy_only=False), np.int64)
    return [rerun.relation, fresh.relation.filter(pa.array(start >= rerun.since))]
