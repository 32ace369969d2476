"""The CER engine: every combination of events (skip-till-any-match), skip-till-next-match and
strict contiguity over SEQ patterns with Kleene+, by recomputation.

Semantics (the papers' SASE semantics, ``../shared/spec/matching-semantics-notes.md``):

- the pattern is a sequence of variables ``X`` (one event) and ``X+`` (a non-empty, time-ordered
  set of events); any-row variables such as ``N*?`` between them are ignored (events may be
  skipped by definition);
- events of consecutive variables are strictly ordered in time (equal timestamps never chain);
  the span from the first to the last event is at most the window (inclusive);
- a condition's bare reference to a Kleene variable ``B.x`` holds for every selected B event;
  ``FIRST(B.x)`` / ``LAST(B.x)`` are the first / last selected; inside B's own condition
  ``NEXT(B.x)`` / ``PREV(B.x)`` are the next / previous *selected* event;
- ``kleene="all"`` returns every subset, ``"maximal"`` only matches no other match contains;
- ``skip_till_next_match``: each variable takes the next qualifying event (Kleene: every
  qualifying event up to the next variable's first; all mode: each prefix of that run);
  ``strict_contiguity``: the events of a match are consecutive rows of the partition.

Single-event variables are bound by band joins in ascending order of candidate count (the lazy
chain of Kolchinsky & Schuster): each step expands the partial matches with ``searchsorted``
time bounds and filters them with the conditions that just became evaluable, vectorised.
Kleene sets are enumerated per partial match by depth-first search over the "next" order,
after counting exactly. Each match is produced once.

Parts, one concern each, over one :class:`~dfs_cer.match.cer_context.Context` (the events and
the work bounding the run): band joins and negations (:mod:`dfs_cer.match.cer_join`), Kleene
sets (:mod:`dfs_cer.match.cer_kleene`), skip-till-next-match (:mod:`dfs_cer.match.cer_next`),
conditions over partial matches (:mod:`dfs_cer.match.cer_conditions`) and the relation
(:mod:`dfs_cer.match.cer_relation`); this module validates, sorts, and drives them per branch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.errors import MatchLimitError, UnsupportedFeatureError
from dfs_cer.events.order import sort_and_partition, sort_partition_flags
from dfs_cer.events.time import time_values
from dfs_cer.match.cer.conditions import variables_of
from dfs_cer.match.cer.context import Context
from dfs_cer.match.cer.join import BandJoin
from dfs_cer.match.cer.kleene import KleeneSets
from dfs_cer.match.cer.next_match import NextMatch
from dfs_cer.match.cer.pattern import Branch, Item, branches
from dfs_cer.match.cer.relation import Assembler
from dfs_cer.match.cer.rules import check_cer
from dfs_cer.match.columns import check_choice, column_of, split_halo
from dfs_cer.match.rowpattern.engine import MAX_STEPS, MatchOutput, _referenced_columns, over_budget
from dfs_cer.options import KLEENE, ON_LIMIT, SELECTIONS
from dfs_cer.query.analyze import Analysis
from dfs_cer.query.expr import (
    Expr,
    Navigation,
    conjuncts,
    walk,
)
from dfs_cer.query.model import MatchRecognize
from dfs_cer.work import CHECK_EVERY, Work

#: what one match with Kleene sets holds (Python lists of rows), charged to a node's work
KLEENE_MATCH_BYTES = 256
#: steps of the matcher's budget (``matcher.max_steps``) one partial match's Kleene sets count
#: for: their Python evaluation costs about what as many compiled thread steps do
KLEENE_STEPS = 10_000


@interrupt.guarded
def run_cer(
    table: pa.Table,
    analysis: Analysis,
    *,
    selection: str = "skip_till_any_match",
    kleene: str = "all",
    max_matches: int = 10_000_000,
    on_limit: str = "error",
    count_only: bool = False,
    join_order: tuple[str, ...] | None = None,
    time_order: str = "strict",
    match_ids: bool = False,
    work: Work | None = None,
    max_steps: int = MAX_STEPS,
) -> MatchOutput:
    """Evaluate a CER query (``ALL MATCHES`` or a selection strategy) over ``table``.

    ``match_ids`` adds ``__match_id``, ``__match_start`` and ``__match_end`` to the relation
    (see :mod:`dfs_cer.match.identity`).

    ``join_order`` overrides the lazy order (ascending candidate count) of the single-event
    variables; any order gives the same matches (tests prove it).

    ``time_order="relaxed"`` lets consecutive variables share a timestamp. It is not a matching
    semantics of its own: filters that must keep a superset of SQL semantics' matches (where
    tied rows are ordered by row, possibly across storage nodes) evaluate with it.

    ``work`` (a storage node's query work, :mod:`dfs_cer.work`) is checked between steps and
    charged for the partial matches before they are made: past its deadline, once cancelled or
    beyond the node's memory the run stops with a clear error instead of running on.

    ``max_steps`` bounds the work (``matcher.max_steps``; each partial match whose Kleene sets
    are evaluated counts :data:`KLEENE_STEPS`): past it the run ends with
    :class:`~dfs_cer.errors.MatchBudgetError` naming the partition, its rows and the pattern.
    """
    if time_order not in ("strict", "relaxed"):
        raise UnsupportedFeatureError(f"time_order {time_order!r}", code="unsupported")
    if selection not in SELECTIONS:
        raise UnsupportedFeatureError(f"selection {selection!r}", code="unsupported")
    check_choice(kleene, KLEENE, "kleene")
    check_choice(on_limit, ON_LIMIT, "on_limit")
    query = analysis.query
    mr = query.recognize
    # what the engine can evaluate follows from the query alone, whatever the rows
    check_cer(mr, {v.name for v in analysis.variables if v.any_row}, selection, kleene)
    table, halo = split_halo(table)
    if (
        halo is not None and halo.any()
    ):  # CER's NEXT/PREV read selected events: halo rows are not events
        table = _events_of(table, halo, analysis)
    if analysis.calendar_months is not None:
        raise UnsupportedFeatureError(
            f"a calendar window ({mr.window.sql() if mr.window else 'WITHIN'}) under a CER "
            "selection or ALL MATCHES",
            clause="WITHIN",
            hint="give the window in days (e.g. WITHIN INTERVAL '31' DAY), or match with the SQL "
            "semantics (ONE ROW PER MATCH or ALL ROWS PER MATCH, no selection)",
            code="unsupported",
        )
    any_row = {v.name for v in analysis.variables if v.any_row}
    expanded, unordered = branches(mr, any_row)
    partition_by = tuple(column_of(table, c) for c in mr.partition_by)
    order_col = column_of(table, mr.order_by[0].column)
    if selection != "strict_contiguity" and len(table):
        keep = _candidate_rows(table, list(expanded))
        if keep is not None and analysis.dedup and analysis.event_key:
            # copies of an event (same partition, time and key) may differ in other columns,
            # and dedup keeps the first in the canonical order, which may be one that no
            # condition accepts: keep every copy of an event any copy of which is a candidate
            # (hashes of the identity; a collision keeps more rows, never fewer)
            from dfs_cer.events import identity

            cols = identity.identity_columns(
                table.schema, partition_by, [order_col], analysis.event_key
            )
            hashes = identity.row_hashes(table, cols)
            keep = np.isin(hashes, hashes[keep])
        if keep is not None:
            table = table.filter(pa.array(keep))
    original = table
    table, bounds, order = sort_and_partition(
        table,
        partition_by,
        [(order_col, False)],
        _referenced_columns(mr, table),
        analysis.event_key,
        analysis.dedup,
    )
    n = len(table)
    ts = time_values(table, order_col)
    window = analysis.window_units if mr.window is not None else None
    if mr.window is not None and window is None:
        raise ValueError("the analysis is not bound to the table's schema")
    row_part = (
        np.repeat(np.arange(bounds.size - 1), np.diff(bounds)) if n else np.zeros(0, np.int64)
    )
    row_hash = None
    if match_ids:
        from dfs_cer.events import identity

        cols = identity.identity_columns(
            original.schema, partition_by, [order_col], analysis.event_key
        )
        row_hash = identity.event_hashes(original.take(pa.array(order)), cols)
    engines = []
    for branch in expanded:
        engine = _Engine(
            table,
            ts,
            bounds,
            row_part,
            list(branch.items),
            branch.recognize,
            window,
            selection,
            kleene,
            max_matches,
            on_limit,
            count_only,
            unordered,
            join_order=join_order,
            tie=1 if time_order == "strict" else 0,
            row_hash=row_hash,
            work=work,
            max_steps=max_steps,
            partition_by=partition_by,
        )
        engines.append((engine, _for_branch(analysis, branch)))
    if len(engines) == 1:
        engine, branch_analysis = engines[0]
        return engine.run(branch_analysis)
    return _run_branches(
        engines, count_only, max_matches, on_limit, bool(mr.partition_by), row_part
    )


def _events_of(table: pa.Table, halo: np.ndarray, analysis: Analysis) -> pa.Table:
    """The rows that are events: not halo rows, except the copy of an event the matcher keeps
    (a halo row, fetched from another node) when some copy of it was pulled as an event."""
    if not analysis.dedup:
        return table.filter(pa.array(~halo))
    mr = analysis.query.recognize
    partition_by = tuple(column_of(table, c) for c in mr.partition_by)
    order = [(column_of(table, mr.order_by[0].column), False)]
    _, _, kept, flags = sort_partition_flags(
        table, partition_by, order, set(), analysis.event_key, True, halo
    )
    return table.take(pa.array(np.sort(kept[~flags])))


def _split_conditions(mr: MatchRecognize, name: str) -> tuple[list[Expr], list[Expr]]:
    """Variable ``name``'s DEFINE conjuncts: those over its own row only, and the rest (they
    read other variables or navigate the selected events)."""
    d = mr.definition(name)
    parts = [] if d is None else conjuncts(d.condition)
    local = [
        p
        for p in parts
        if not any(isinstance(x, Navigation) for x in walk(p)) and variables_of(p) <= {name}
    ]
    return local, [p for p in parts if p not in local]


def _candidate_rows(table: pa.Table, expanded: list[Branch]) -> np.ndarray | None:
    """The rows some variable of some branch may bind by its own-row conditions (None: every
    row may). Under skip-till-any-match and skip-till-next-match no other row takes part in a
    match (events between are skipped, PREV/NEXT read selected events), so the engine sorts
    and joins only these: a few percent of a log for typical conditions."""
    from dfs_cer.match.rowpattern.conditions import ConditionCompiler

    n = len(table)
    keep = np.zeros(n, bool)
    nowhere = np.zeros(n, np.int64)  # own-row conditions navigate nowhere
    for branch in expanded:
        mr = branch.recognize
        names = tuple(i.name for i in branch.items)
        compiler = ConditionCompiler(mr, names, table, nowhere, nowhere, None)
        for it in branch.items:
            local = _split_conditions(mr, it.name)[0]
            if not local:
                return None
            keep |= compiler.mask(it.name, local)
    return None if keep.all() else keep


def _for_branch(analysis: Analysis, branch: Branch) -> Analysis:
    import dataclasses

    if branch.recognize == analysis.query.recognize:
        return analysis
    return dataclasses.replace(
        analysis, query=dataclasses.replace(analysis.query, recognize=branch.recognize)
    )


def _run_branches(
    engines: list[tuple[_Engine, Analysis]],
    count_only: bool,
    max_matches: int,
    on_limit: str,
    partitioned: bool,
    row_part: np.ndarray,
) -> MatchOutput:
    """Matches of every branch of an expanded pattern, numbered in one canonical order (by each
    position's first event, then branch)."""
    collected = [engine.collect(analysis) for engine, analysis in engines]
    total = sum(c.total for c in collected)
    if count_only and all(c.counted for c in collected):
        return MatchOutput(pa.table({}), total, False)
    if total > max_matches and on_limit != "truncate":
        raise MatchLimitError(
            f"the query produced {total} matches, more than max_matches={max_matches}"
        )
    keys, branch_ids, sorted_parts = [], [], []
    for b, ((engine, _), c) in enumerate(zip(engines, collected, strict=True)):
        bound, kleene = engine.assembler.sorted(c.bound, c.kleene)
        sorted_parts.append((bound, kleene))
        keys.append(engine.assembler.keys(bound, kleene))
        branch_ids.append(np.full(keys[-1].shape[1], b, np.int64))
    width = {k.shape[0] for k in keys}
    if len(width) != 1:
        raise AssertionError(f"branches of one pattern with different lengths: {sorted(width)}")
    stacked = np.concatenate(keys, axis=1)
    ids = np.concatenate(branch_ids)
    order = np.lexsort((ids, *reversed(list(stacked))))
    position = np.empty(order.size, np.int64)
    position[order] = np.arange(order.size)
    numbers = np.arange(1, order.size + 1)
    if partitioned and order.size:
        part = row_part[stacked[0][order]]
        new = np.ones(order.size, bool)
        new[1:] = part[1:] != part[:-1]
        base = np.maximum.accumulate(np.where(new, np.arange(order.size), 0))
        numbers = np.arange(order.size) - base + 1
    relations, offset = [], 0
    for (engine, _), (bound, kleene), k in zip(engines, sorted_parts, keys, strict=True):
        mine = position[offset : offset + k.shape[1]]
        offset += k.shape[1]
        relations.append(engine.assembler.relation(bound, kleene, numbers[mine]))
    combined = pa.concat_tables(relations, promote_options="permissive")
    combined = combined.take(pa.array(np.argsort(position, kind="stable")))
    truncated = any(c.truncated for c in collected)
    if total > max_matches:
        combined, total, truncated = combined.slice(0, max_matches), max_matches, True
    return MatchOutput(combined, total, truncated)


@dataclass
class Collected:
    """One branch's bindings before the relation is built."""

    bound: dict[str, np.ndarray]
    kleene: dict[str, list[list[int]]]
    total: int
    truncated: bool
    counted: bool = False  # count_only: only ``total`` is meaningful


class _Engine:
    """One branch of a pattern: candidates per variable, then the selection strategy's bindings
    (band joins and Kleene sets, or skip-till-next-match), then the relation."""

    def __init__(
        self,
        table: pa.Table,
        ts: np.ndarray,
        bounds: np.ndarray,
        row_part: np.ndarray,
        items: list[Item],
        mr: object,
        window: int | None,
        selection: str,
        kleene: str,
        max_matches: int,
        on_limit: str,
        count_only: bool,
        unordered: bool = False,
        *,
        join_order: tuple[str, ...] | None = None,
        tie: int = 1,
        row_hash: np.ndarray | None = None,
        work: Work | None = None,
        max_steps: int = MAX_STEPS,
        partition_by: tuple[str, ...] = (),
    ) -> None:
        self.ctx = Context(table, ts, bounds, row_part, items, window, tie, unordered, work)
        self.mr = mr
        self.partition_by = partition_by
        self.max_steps = max_steps
        self.steps = 0
        self.items = items
        self.selection = selection
        self.max_matches = max_matches
        self.on_limit = on_limit
        self.count_only = count_only
        self.kleene = self.ctx.kleene
        self.join = BandJoin(self.ctx, join_order)
        self.sets = KleeneSets(self.ctx, selection, kleene)
        self.next_match = NextMatch(self.ctx, self.sets, kleene)
        self.assembler = Assembler(self.ctx, mr, row_hash)

    def _spend(self, steps: int, bound: dict[str, np.ndarray], i: int) -> None:
        """Count ``steps`` of work for partial match ``i``; past ``max_steps`` the run ends with
        the budget's error naming that partial match's partition."""
        self.steps += steps
        if self.steps <= self.max_steps:
            return
        row = int(next(iter(bound.values()))[i]) if bound else 0
        assert isinstance(self.mr, MatchRecognize)
        raise over_budget(
            self.ctx.table,
            self.ctx.bounds,
            self.partition_by,
            self.mr,
            int(self.ctx.row_part[row]) if self.ctx.row_part.size else 0,
            self.steps,
            self.max_steps,
        )

    def _candidates(
        self, analysis: Analysis
    ) -> tuple[dict[str, np.ndarray], dict[str, list[Expr]]]:
        from dfs_cer.match.rowpattern.conditions import ConditionCompiler

        mr = analysis.query.recognize
        part_start = (
            self.ctx.bounds[self.ctx.row_part] if len(self.ctx.table) else np.zeros(0, np.int64)
        )
        part_end = (
            self.ctx.bounds[self.ctx.row_part + 1] if len(self.ctx.table) else np.zeros(0, np.int64)
        )
        compiler = ConditionCompiler(
            mr, tuple(i.name for i in self.items), self.ctx.table, part_start, part_end, None
        )
        cands: dict[str, np.ndarray] = {}
        dependent: dict[str, list[Expr]] = {}
        for it in self.items:
            local, dependent[it.name] = _split_conditions(mr, it.name)
            cands[it.name] = np.nonzero(compiler.mask(it.name, local))[0].astype(np.int64)
        return cands, dependent

    # ------------------------------------------------------------------ driver

    def run(self, analysis: Analysis) -> MatchOutput:
        c = self.collect(analysis)
        if c.counted:
            return MatchOutput(pa.table({}), c.total, False)
        bound, kleene = self.assembler.sorted(c.bound, c.kleene)
        return MatchOutput(self.assembler.relation(bound, kleene), c.total, c.truncated)

    def collect(self, analysis: Analysis) -> Collected:
        """Every match's bound rows (and Kleene sets), bounded by ``max_matches``."""
        cands, dependent = self._candidates(analysis)
        if self.selection == "strict_contiguity":
            raise UnsupportedFeatureError(
                "strict_contiguity is evaluated by the row-pattern engine",
                hint="omit selection= and ALL MATCHES: SQL PATTERN (A B C) is strictly contiguous",
                code="unsupported",
            )
        stnm_sets: list[dict[str, list[int]]] | None = None
        if self.selection == "skip_till_next_match":
            bound, stnm_sets = self.next_match.run(cands, dependent)
        else:
            bound = self.join.run(cands, dependent)
        count = next(iter(bound.values())).size if bound else 0
        total = 0
        truncated = False
        if not self.kleene:
            total = count
            if total > self.max_matches:
                if self.on_limit != "truncate":
                    raise MatchLimitError(
                        f"the query produced {total} matches, more than "
                        f"max_matches={self.max_matches}"
                    )
                truncated = True
                bound = {k: r[: self.max_matches] for k, r in bound.items()}
                total = self.max_matches
            return Collected(bound, {}, total, truncated)
        kleene_out: dict[str, list[list[int]]] = {k: [] for k in self.kleene}
        keep_idx: list[int] = []
        if stnm_sets is None:
            counted = []
            for i in range(count):
                self.ctx.check(i)
                self._spend(KLEENE_STEPS, bound, i)
                counted.append(self.sets.count(bound, cands, dependent, i))
            if all(c is not None for c in counted):
                exact = sum(c for c in counted if c is not None)
                if self.count_only:
                    return Collected({}, {}, exact, False, counted=True)
                if exact > self.max_matches and self.on_limit != "truncate":
                    raise MatchLimitError(
                        f"the query produced {exact} matches, more than "
                        f"max_matches={self.max_matches}"
                    )
        for i in range(count):
            self.ctx.check(i)
            self._spend(KLEENE_STEPS, bound, i)
            sets: Iterable[dict[str, list[int]]] = (
                [stnm_sets[i]]
                if stnm_sets is not None
                else self.sets.choices(bound, cands, dependent, i)
            )
            for one in sets:
                total += 1
                if (
                    self.ctx.work is not None and total % CHECK_EVERY == 0
                ):  # the Kleene sets kept so far
                    self.ctx.work.charge(CHECK_EVERY * KLEENE_MATCH_BYTES)
                if total > self.max_matches:
                    if self.on_limit != "truncate":
                        raise MatchLimitError(
                            f"the query produced more than max_matches={self.max_matches} matches"
                            " (count_only=True counts them exactly)"
                        )
                    truncated = True
                    break
                keep_idx.append(i)
                for k, rows in one.items():
                    kleene_out[k].append(rows)
            if truncated:
                total = self.max_matches
                break
        idx = np.array(keep_idx, np.int64)
        return Collected({k: r[idx] for k, r in bound.items()}, kleene_out, total, truncated)
