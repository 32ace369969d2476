"""The SQL:2016 row-pattern engine: ``MATCH_RECOGNIZE`` over an Arrow table, without Spark.

1. sort by PARTITION BY and ORDER BY (stable: ties keep input order) and find partitions
   (:mod:`dfs_cer.events.order`);
2. compile the PATTERN to a program and the DEFINE conditions to masks and dependent programs;
3. run the VM (:mod:`dfs_cer.match.rowpattern.vm`) over all partitions;
4. evaluate MEASURES and assemble the relation in the standard's column order: partitioning
   columns, then (ALL ROWS PER MATCH) ordering columns, measures, then the other columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.errors import MatchBudgetError, MatchError, MatchLimitError, UnsupportedFeatureError
from dfs_cer.events.order import sort_partition_flags
from dfs_cer.events.time import time_values
from dfs_cer.match.columns import check_choice, column_of, split_halo
from dfs_cer.match.progress import reporting
from dfs_cer.match.rowpattern import vm
from dfs_cer.match.rowpattern.compiler import compile_pattern
from dfs_cer.match.rowpattern.conditions import compile_conditions
from dfs_cer.match.rowpattern.dominance import dominance
from dfs_cer.match.rowpattern.hoist import hoist, with_derived
from dfs_cer.match.rowpattern.measures import MatchRows, MeasureEvaluator
from dfs_cer.options import ON_LIMIT
from dfs_cer.pattern.ir import labels as pattern_labels
from dfs_cer.pattern.ir import to_text as to_sql_pattern
from dfs_cer.query.analyze import Analysis
from dfs_cer.query.expr import Column, walk
from dfs_cer.query.model import MatchRecognize, RowsPerMatch, SkipTo
from dfs_cer.work import Work, check, watch

MAX_MATCHES = 10_000_000
#: bytes of matches a bounded run (a storage node's) keeps without charging its work; doubled (and
#: charged) while they need more
VM_BYTES = 16 * 2**20


@dataclass(frozen=True)
class MatchOutput:
    """The MATCH_RECOGNIZE relation and how it was produced."""

    table: pa.Table
    matches: int
    truncated: bool
    #: the row-pattern matcher's peak working memory (thread lists, dedup tables, path arena):
    #: it grows with the longest partition (or final-interval segment) and the pattern, not
    #: with the number of partitions or rows overall; 0 for the CER engine
    work_bytes: int = 0
    #: with ``spans=True``: where each match lies in the engine's sorted rows (see
    #: :class:`MatchSpans`)
    spans: MatchSpans | None = None


@dataclass(frozen=True)
class MatchSpans:
    """Each match's place in the sorted rows (``order[i]`` is the input row at sorted position i):
    its first row, one past its last row (``end == start`` for an empty match), the position
    matching resumes at after it (AFTER MATCH SKIP), and its partition's index."""

    order: np.ndarray
    start: np.ndarray
    end: np.ndarray
    resume: np.ndarray
    part: np.ndarray


def next_rows(mask: np.ndarray) -> np.ndarray:
    """``out[i]``: the first row >= i that ``mask`` accepts (``n`` when none), for i in 0..n."""
    return vm.next_rows(np.ascontiguousarray(mask, np.bool_))


def match_starts(
    pattern: object,
    labels: tuple[str, ...],
    masks: np.ndarray,
    n: int,
    bounds: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
) -> np.ndarray:
    """For every row, the first row at or after it where a match can start: some label that can
    begin a match accepts it (every row when the pattern can match empty).

    With partition ``bounds``, rows after the last row of a partition that some *mandatory*
    label (one every match contains) accepts cannot start a match either: they skip to the
    partition's end. This keeps patterns such as ``(A | A A)* B`` from scanning the rest of the
    partition from every start when no row can be ``B``.

    ``allowed`` (one bool per row) restricts where matches may start at all: a time chunk of a
    split input owns the matches that start in it."""
    from dfs_cer.pattern.ir import RowPattern
    from dfs_cer.pattern.properties import first_labels, mandatory_labels, nullable

    assert isinstance(pattern, RowPattern)
    if nullable(pattern):
        can = np.ones(n, bool)
    else:
        can = np.zeros(n, bool)
        for name in first_labels(pattern):
            can |= masks[labels.index(name)]
    if allowed is not None:
        can &= allowed
    out = next_rows(can)
    required = [labels.index(name) for name in mandatory_labels(pattern) if name in labels]
    if bounds is None or not required or n == 0:
        return out
    vm.skip_unreachable_starts(
        out, np.ascontiguousarray(masks), np.asarray(required, np.int64), bounds.astype(np.int64)
    )
    return out


def _idle_skipping(
    masks: np.ndarray, dependent: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """``free``: variables that accept every row unconditionally; ``next_true[v, i]``: the first
    row >= i variable v's mask accepts (n when none)."""
    free = masks.all(axis=1) & ~dependent if n else ~dependent
    next_true = np.empty((masks.shape[0], n + 1), np.int64)
    for v in range(masks.shape[0]):
        next_true[v] = n if free[v] else next_rows(masks[v])
    return free, next_true


#: thread steps one run may take unless told (``matcher.max_steps``)
MAX_STEPS = 1_000_000_000
#: seconds the row-pattern engine may spend in one partition unless told, and as many again per
#: million rows of it (``matcher.max_seconds``)
MAX_SECONDS = 10.0
#: the most bytes the matcher's thread lists (and equivalence table) may take at one row: a
#: pattern whose live threads multiply with every row (every history distinct) ends there with
#: the budget's error instead of taking the machine's memory
MAX_LIST_BYTES = 1 << 29


def _where(table: pa.Table, bounds: np.ndarray, partition_by: tuple[str, ...], p: int) -> str:
    """The partition ``p`` of a run, and its rows (``partition k = 3 (2,000 rows)``)."""
    lo, hi = int(bounds[p]), int(bounds[p + 1])
    where = (
        "partition " + ", ".join(f"{c} = {table.column(c)[lo].as_py()!r}" for c in partition_by)
        if partition_by
        else "the single partition"
    )
    return f"{where} ({hi - lo:,} rows)"


def _advice(mr: MatchRecognize, setting: str) -> str:
    return (
        f"of PATTERN ({to_sql_pattern(mr.pattern)}): its work grows faster than its rows there. "
        "Bound the match with WITHIN or a finer PARTITION BY, or raise the budget "
        f"(DFS_CER__MATCHER__{setting.upper()}, or {setting} under [matcher] in the config file)"
    )


def over_budget(
    table: pa.Table,
    bounds: np.ndarray,
    partition_by: tuple[str, ...],
    mr: MatchRecognize,
    p: int,
    steps: int,
    max_steps: int,
) -> MatchBudgetError:
    """A run past its step budget (either engine): the partition, its rows, the pattern and the
    setting."""
    return MatchBudgetError(
        f"matching stopped after {steps:,} thread steps (matcher.max_steps = "
        f"{max_steps:,}) in {_where(table, bounds, partition_by, p)} " + _advice(mr, "max_steps")
    )


def over_time(
    table: pa.Table,
    bounds: np.ndarray,
    partition_by: tuple[str, ...],
    mr: MatchRecognize,
    p: int,
    max_seconds: float,
) -> MatchBudgetError:
    """A run past its time budget in one partition: the partition, its rows, the pattern and
    the setting (the budget grows with the partition's rows, see :func:`vm.time_limit_ns`)."""
    rows = int(bounds[p + 1] - bounds[p])
    limit = max_seconds * (1 + rows / 1e6)
    return MatchBudgetError(
        f"matching spent more than {limit:.3g} seconds (matcher.max_seconds = {max_seconds:g}, "
        f"and as much again per million rows) in {_where(table, bounds, partition_by, p)} "
        + _advice(mr, "max_seconds")
    )


def over_threads(
    table: pa.Table, bounds: np.ndarray, partition_by: tuple[str, ...], mr: MatchRecognize, p: int
) -> MatchBudgetError:
    """A run whose live threads at one row would take more memory than the matcher allows."""
    return MatchBudgetError(
        f"matching stopped: its live threads at one row would take more than "
        f"{MAX_LIST_BYTES // 2**20:,} MiB in {_where(table, bounds, partition_by, p)} "
        f"of PATTERN ({to_sql_pattern(mr.pattern)}): they multiply with every row there (each "
        "history is distinct: the conditions read CLASSIFIER() or FIRST/LAST with an offset). "
        "Bound the match with WITHIN or a finer PARTITION BY"
    )


def window_ends(ts: np.ndarray, window: int, analysis: Analysis) -> np.ndarray:
    """The last time a match starting at each row may reach: its time plus the window (plus
    its calendar months for ``WITHIN INTERVAL 'n' MONTH | YEAR``); unused without a window."""
    if window < 0:
        return ts
    if analysis.calendar_months is not None:
        from dfs_cer.events.calendar import add_months

        assert analysis.window_unit is not None
        return add_months(ts, analysis.window_unit, analysis.calendar_months)
    limit = np.iinfo(np.int64).max
    return np.where(ts <= limit - window, ts + window, limit)


def run_row_pattern(
    table: pa.Table,
    analysis: Analysis,
    *,
    max_matches: int = MAX_MATCHES,
    on_limit: str = "error",
    segments: np.ndarray | None = None,
    match_ids: bool | str = False,
    may_start: np.ndarray | None = None,
    spans: bool = False,
    cut_off: tuple[bool, bool] = (False, False),
    work: Work | None = None,
    max_steps: int = MAX_STEPS,
    max_seconds: float = MAX_SECONDS,
) -> MatchOutput:
    """Evaluate the MATCH_RECOGNIZE clause of a bound analysis over ``table``.

    ``match_ids`` adds ``__match_id`` (stable: from the match's events and labels),
    ``__match_start`` and ``__match_end`` (time of its first and last row) to every output row
    of a match (NULL on unmatched rows); ``match_ids="times"`` puts the place of the match's first
    row in the sorted rows in ``__match_id`` (no hashing: only where matches lie is wanted).

    ``segments`` (sorted start times) splits the rows into independent units that no match may
    cross — the final intervals of a pull strategy, whose gaps held rows that were not pulled —
    without restarting MATCH_NUMBER() within a partition.

    ``may_start`` (one bool per input row) lets matches start only at the rows it marks; the
    other rows are still read and matched into (a time chunk of a split input, see
    :mod:`dfs_cer.plan.chunks`). ``spans`` returns where the matches lie (:class:`MatchSpans`).

    ``cut_off`` = (before, after): the rows are a time slice of longer partitions, with rows before
    the first (``before``) or after the last (``after``) left out, so ``^`` (``$``) never holds
    at the slice's edge.

    ``work`` (a storage node's query work, :mod:`dfs_cer.work`) stops the compiled VM (which runs
    with the GIL released) within a few thousand steps once the query is closed or past its
    deadline (:func:`dfs_cer.work.watch`), and is charged for the matched rows before the
    relation is built. Ctrl-C stops it the same way (:mod:`dfs_cer.interrupt`) and raises
    ``KeyboardInterrupt``.

    ``max_steps`` bounds the thread steps of the run, ``max_seconds`` the time the compiled
    matcher spends in any one partition (and as much again per million rows of it; its clock is
    read every few thousand steps); past either the run ends with
    :class:`~dfs_cer.errors.MatchBudgetError` naming the partition, its rows, the pattern and the
    setting.
    """
    check_choice(on_limit, ON_LIMIT, "on_limit")
    query = analysis.query
    mr = query.recognize
    partition_by = tuple(column_of(table, c) for c in mr.partition_by)
    order_by = [
        (column_of(table, s.column), s.descending, bool(s.nulls_first)) for s in mr.order_by
    ]
    table, halo_in = split_halo(table)
    original = table
    table, bounds, order, halo = sort_partition_flags(
        table,
        partition_by,
        order_by,
        _referenced_columns(mr, table),
        analysis.event_key,
        analysis.dedup,
        halo_in,
    )
    n = len(table)
    # navigation reads the whole PARTITION BY group (halo rows included); matches stay inside
    # final-interval segments
    real_bounds = bounds
    if (segments is not None or match_ids) and not order_by:
        raise UnsupportedFeatureError(
            "this run needs ORDER BY <time column> (final intervals or match ids are "
            "placed in time)",
            clause="MATCH_RECOGNIZE",
            code="no-order-by",
            hint="add ORDER BY ts",
        )
    if segments is not None and n:
        seg = np.searchsorted(
            np.asarray(segments, np.int64), time_values(table, order_by[0][0]), side="right"
        )
        cut = np.zeros(n, bool)
        cut[1:] = seg[1:] != seg[:-1]
        bounds = np.unique(np.concatenate([bounds, np.nonzero(cut)[0]])).astype(np.int64)
    row_part = (
        np.repeat(np.arange(real_bounds.size - 1), np.diff(real_bounds))
        if n
        else np.zeros(0, np.int64)
    )
    part_start = real_bounds[row_part] if n else np.zeros(0, np.int64)
    part_end = real_bounds[row_part + 1] if n else np.zeros(0, np.int64)
    unit_real = np.searchsorted(real_bounds, bounds[:-1], side="right") - 1
    nav_parts = (
        np.stack(
            [real_bounds[unit_real], real_bounds[np.minimum(unit_real + 1, real_bounds.size - 1)]],
            axis=1,
        ).astype(np.int64)
        if bounds.size > 1
        else np.zeros((0, 2), np.int64)
    )

    labels = pattern_labels(mr.pattern)
    program = compile_pattern(mr.pattern, labels)
    time_unit = None
    order_type = table.schema.field(order_by[0][0]).type if order_by else pa.null()
    if pa.types.is_timestamp(order_type):
        time_unit = order_type.unit
    mr, derived = hoist(mr)  # row expressions become derived columns of the sorted table
    if derived:
        table = with_derived(table, derived)
    conditions = compile_conditions(mr, labels, table, part_start, part_end, time_unit)
    if halo.any():  # halo rows: only a skip variable may absorb them; nothing else labels them
        skippers = _skip_variables(analysis) if analysis.skippable else set()
        for v, name in enumerate(labels):
            if name not in skippers:
                conditions.masks[v, halo] = False
    window = -1
    ts = np.zeros(n, np.int64)
    if mr.window is not None:
        if analysis.window_units is None:
            raise ValueError(
                "the analysis is not bound to the table's schema (call analyze(query, "
                "table.schema))"
            )
        window = analysis.window_units
        ts = time_values(table, order_by[0][0])
    win_end = window_ends(ts, window, analysis)

    skip = mr.after_match_skip
    skip_mode = {
        SkipTo.PAST_LAST_ROW: vm.SKIP_PAST_LAST,
        SkipTo.NEXT_ROW: vm.SKIP_NEXT_ROW,
        SkipTo.FIRST: vm.SKIP_TO_FIRST,
        SkipTo.LAST: vm.SKIP_TO_LAST,
    }[skip.to]
    names = {name: i for i, name in enumerate(labels)}
    for i, s in enumerate(mr.subsets):
        names[s.name] = len(labels) + i
    skip_target = names[skip.variable] if skip.variable is not None else -1
    c = conditions
    allowed = None
    if may_start is not None:
        allowed = np.asarray(may_start, bool)[order] if n else np.zeros(0, bool)
    starts = match_starts(mr.pattern, labels, c.masks, n, bounds, allowed)
    check(work)
    # stop[0]: set by the watch when the query is closed or past its deadline; stop[1]: the bytes
    # the matches kept may take: VM_BYTES, doubled (charged to the work first) and the run made
    # again while they need more: at most about twice the work, never memory that was not granted
    stop = np.zeros(vm.STOP_SIZE, np.int64)
    stop[vm.STOP_BYTES] = VM_BYTES if work is not None else 0
    stop[vm.STOP_MAX_STEPS] = max_steps
    stop[vm.STOP_MAX_NS] = int(max_seconds * 1e9) if 0 < max_seconds < 2**63 / 1e9 else 0
    stop[vm.STOP_MAX_LIST] = MAX_LIST_BYTES
    charged = 0
    idle = _idle_skipping(c.masks, c.dependent, n)
    dom = dominance(c)  # the running statistic threads are ordered by, if any
    while True:
        with (
            interrupt.interruptible(),
            watch(work, stop),
            interrupt.stopping(stop),
            reporting(
                stop,
                bounds,
                vm.STOP_AT,
                vm.STOP_FOUND,
                vm.STOP_STEPS,
                lambda: bool(vm.run.signatures),
            ),
        ):
            status, m_start, m_end, m_part, r_match, r_row, r_label, r_excl, work_bytes = vm.run(
                program.op.astype(np.int64),
                program.a.astype(np.int64),
                program.b.astype(np.int64),
                c.masks,
                c.dependent,
                c.code,
                c.code_start,
                c.const_i,
                c.const_f,
                c.const_kind,
                c.icols,
                c.inull,
                c.fcols,
                c.fnull,
                c.members,
                c.relevant,
                c.deep_navigation,
                c.accumulators,
                dom,
                ts,
                win_end,
                window,
                bounds,
                nav_parts,
                skip_mode,
                skip_target,
                max_matches,
                starts,
                *idle,
                stop,
                bool(cut_off[0]),
                bool(cut_off[1]),
            )
        if status == vm.STOPPED:
            check(work)  # raises: the watch stopped the run
            interrupt.check()  # raises: Ctrl-C stopped it
        if status == vm.OVER_STEPS:
            raise over_budget(
                table,
                bounds,
                partition_by,
                mr,
                int(stop[vm.STOP_PARTITION]),
                int(stop[vm.STOP_STEPS]),
                int(stop[vm.STOP_MAX_STEPS]),
            )
        if status == vm.OVER_TIME:
            raise over_time(
                table, bounds, partition_by, mr, int(stop[vm.STOP_PARTITION]), max_seconds
            )
        if status == vm.OVER_THREADS:
            raise over_threads(table, bounds, partition_by, mr, int(stop[vm.STOP_PARTITION]))
        if status != vm.OVER_BYTES or work is None:
            break
        work.charge(int(stop[1]))  # raises past the query's share or the node's budget
        charged += int(stop[1])
        stop[1] *= 2
    if work is not None:
        work.uncharge(charged)  # (charged again below for what the matches hold)
    if work is not None:  # the matched rows, and the relation's columns built from them
        work.charge(4 * (m_start.nbytes + r_match.nbytes + r_row.nbytes + r_label.nbytes))
    truncated = False
    if status == vm.LIMIT_REACHED:
        if on_limit != "truncate":
            raise MatchLimitError(
                f"the query produced more than max_matches={max_matches} matches",
            )
        truncated = True
    elif status in (vm.SKIP_TO_FIRST_ROW, vm.SKIP_NO_ROW):
        row = int(m_start[-1])
        what = (
            "would skip to the first row of the match, so matching would not move forward"
            if status == vm.SKIP_TO_FIRST_ROW
            else f"found no row labelled {skip.variable} in the match"
        )
        raise MatchError(
            f"AFTER MATCH SKIP {skip.to.value} {skip.variable} failed at the match starting at "
            f"sorted row {row}: it {what}",
        )
    if real_bounds is not bounds and m_part.size:  # number matches within the real partitions
        m_part = np.searchsorted(real_bounds, bounds[m_part], side="right") - 1
    rows = MatchRows(
        table,
        labels,
        c.members,
        names,
        real_bounds,
        row_part,
        m_start,
        m_end,
        m_part,
        r_match,
        r_row,
        r_label,
        r_excl,
    )
    ids = None
    if match_ids:
        from dfs_cer.events import identity

        counts = (m_end - m_start).astype(np.int64)
        if (
            match_ids == "times"
        ):  # where matches start (their first row's sorted place) and end: no hashing
            mid = m_start.astype(np.uint64)
        else:
            cols = identity.identity_columns(
                original.schema, partition_by, [o[0] for o in order_by], analysis.event_key
            )
            row_hash = identity.event_hashes(
                original.take(pa.array(order)) if n else original.slice(0, 0), cols
            )
            empty_at = (
                row_hash[np.minimum(m_start, max(n - 1, 0))]
                if n
                else np.zeros(m_start.size, np.uint64)
            )
            # rows a skip variable absorbs ({- N* -}, N*? between variables) are not part of the
            # id: a strategy may leave them unpulled, and the other rows determine them
            skippers = _skip_variables(analysis) if analysis.skippable else set()
            real = ~np.isin(r_label, [labels.index(v) for v in skippers if v in labels])
            mid = identity.match_ids(
                row_hash[r_row[real]],
                identity.label_hashes(labels)[r_label[real]],
                np.bincount(r_match[real], minlength=m_start.size).astype(np.int64),
                empty_at,
            )
        tv = time_values(table, order_by[0][0]) if n else np.zeros(0, np.int64)
        last = np.where(counts > 0, m_end - 1, m_start)
        ids = (
            mid,
            tv[np.minimum(m_start, max(n - 1, 0))] if n else mid.astype(np.int64),
            tv[np.minimum(last, max(n - 1, 0))] if n else mid.astype(np.int64),
        )
    relation = _assemble(rows, mr, partition_by, [o[0] for o in order_by], original, order, ids)
    where = None
    if spans:
        where = MatchSpans(
            order,
            m_start,
            m_end,
            _resume(skip_mode, skip_target, c.members, m_start, m_end, r_match, r_row, r_label),
            m_part,
        )
    return MatchOutput(relation, int(m_start.size), truncated, int(work_bytes), where)


def _resume(
    skip_mode: int,
    target: int,
    members: np.ndarray,
    m_start: np.ndarray,
    m_end: np.ndarray,
    r_match: np.ndarray,
    r_row: np.ndarray,
    r_label: np.ndarray,
) -> np.ndarray:
    """Where matching resumes after each match (the VM's AFTER MATCH SKIP, in sorted rows)."""
    resume = m_start + 1 if skip_mode == vm.SKIP_NEXT_ROW else m_end.copy()
    if skip_mode in (vm.SKIP_TO_FIRST, vm.SKIP_TO_LAST) and m_start.size:
        hit = members[target, r_label] if r_label.size else np.zeros(0, bool)
        rows, match = r_row[hit], r_match[hit]
        if skip_mode == vm.SKIP_TO_FIRST:
            pick = np.full(m_start.size, np.iinfo(np.int64).max)
            np.minimum.at(pick, match, rows)
        else:
            pick = np.full(m_start.size, -1, np.int64)
            np.maximum.at(pick, match, rows)
        found = (pick >= 0) & (pick < np.iinfo(np.int64).max)
        resume = np.where(found, pick, resume)
    empty = m_end == m_start
    resume[empty] = m_start[empty] + 1
    return resume.astype(np.int64)


def _skip_variables(analysis: Analysis) -> set[str]:
    """Variables that only absorb rows between pattern variables (``{- N* -}``, ``N*?``)."""
    return {v.name for v in analysis.variables if v.any_row}


def _referenced_columns(mr: MatchRecognize, table: pa.Table) -> set[str]:
    """Columns DEFINE and MEASURES read (the matcher sorts only those)."""
    names: set[str] = set()
    for e in [d.condition for d in mr.definitions] + [m.expr for m in mr.measures]:
        for node in walk(e):
            if isinstance(node, Column) and node.name in table.column_names:
                names.add(node.name)
    return names


def _with_ids(
    table: pa.Table,
    ids: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    out_match: np.ndarray,
    unmatched: int = 0,
) -> pa.Table:
    if ids is None:
        return table
    from dfs_cer.events.identity import ID_COLUMNS

    for name, values in zip(ID_COLUMNS, ids, strict=True):
        taken = values[out_match] if out_match.size else values[:0]
        arr = pa.array(
            np.concatenate([taken, np.zeros(unmatched, taken.dtype)]),
            mask=np.concatenate([np.zeros(taken.size, bool), np.ones(unmatched, bool)]),
        )
        table = table.append_column(name, arr)
    return table


def _assemble(
    rows: MatchRows,
    mr: MatchRecognize,
    partition_by: tuple[str, ...],
    order_cols: list[str],
    original: pa.Table,
    order: np.ndarray,
    ids: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> pa.Table:
    table = rows.table
    mode = mr.rows_per_match
    nonempty = rows.m_end > rows.m_start
    if mode is RowsPerMatch.ONE_ROW:
        keep = np.arange(rows.m_start.size)
        out_match = keep
        out_flat = np.where(nonempty, np.cumsum(rows.m_end - rows.m_start) - 1, -1)
        anchor_row = rows.m_start
        evaluator = MeasureEvaluator(rows, out_match, out_flat)
        one: dict[str, pa.Array] = {
            c: table.column(c).combine_chunks().take(pa.array(anchor_row)) for c in partition_by
        }
        for m in mr.measures:
            one[m.name] = evaluator.evaluate(m.expr)
        result = (
            pa.table(one)
            if one
            else pa.table({"match": pa.array(np.ones(len(keep), np.int8))}).select([])
        )
        return _with_ids(result, ids, out_match)
    # ALL ROWS PER MATCH: one output row per matched row that is not excluded
    flat = np.arange(rows.r_row.size)
    keep_flat = ~rows.r_excl
    out_match = rows.r_match[keep_flat]
    out_flat = flat[keep_flat]
    out_rows = rows.r_row[keep_flat]
    if mode is RowsPerMatch.ALL_ROWS_SHOW_EMPTY and (~nonempty).any():
        empty = np.nonzero(~nonempty)[0]
        out_match = np.concatenate([out_match, empty])
        out_flat = np.concatenate([out_flat, np.full(empty.size, -1)])
        out_rows = np.concatenate([out_rows, rows.m_start[empty]])
    unmatched = np.zeros(0, np.int64)
    if mode is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED:
        covered = np.zeros(len(table), bool)
        covered[rows.r_row] = True
        unmatched = np.nonzero(~covered)[0]
    by_match = np.lexsort((out_flat, out_match)) if out_match.size else np.zeros(0, np.int64)
    out_match, out_flat, out_rows = out_match[by_match], out_flat[by_match], out_rows[by_match]
    evaluator = MeasureEvaluator(rows, out_match, out_flat)
    measures = {m.name: evaluator.evaluate(m.expr) for m in mr.measures}
    all_rows = np.concatenate([out_rows, unmatched])
    # matches in order; an unmatched row goes where it stands in the sorted table
    key_row = np.concatenate(
        [rows.m_start[out_match] if out_match.size else np.zeros(0, np.int64), unmatched]
    )
    key_seq = np.concatenate([np.arange(out_rows.size), np.zeros(unmatched.size, np.int64)])
    seq = np.lexsort((key_seq, key_row)) if all_rows.size else np.zeros(0, np.int64)
    source = order[all_rows[seq]] if all_rows.size else np.zeros(0, np.int64)
    taken = original.take(pa.array(source)) if all_rows.size else original.slice(0, 0)
    columns: dict[str, pa.Array] = {}
    for c in partition_by:
        columns[c] = taken.column(c)
    for c in order_cols:
        if c not in columns:
            columns[c] = taken.column(c)
    for name, values in measures.items():
        padded = (
            pa.concat_arrays([values, pa.nulls(unmatched.size, values.type)])
            if unmatched.size
            else values
        )
        columns[name] = padded.take(pa.array(seq)) if seq.size else padded
    for c in original.column_names:
        if c not in columns:
            columns[c] = taken.column(c)
    relation = pa.table(columns)
    if ids is None:
        return relation
    # ids follow the output order: matched rows (by match) and unmatched rows interleaved by seq
    with_ids = _with_ids(
        pa.table({"_": pa.array(np.zeros(all_rows.size, np.int8))}), ids, out_match, unmatched.size
    ).drop(["_"])
    for name in with_ids.column_names:
        relation = relation.append_column(
            name, with_ids.column(name).take(pa.array(seq)) if seq.size else with_ids.column(name)
        )
    return relation
