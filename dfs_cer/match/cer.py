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
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import MatchLimitError, UnsupportedFeatureError
from dfs_cer.match.arrow_eval import _broadcast, evaluate
from dfs_cer.match.cer_kernels import expand_pairs, expand_ranges
from dfs_cer.match.cer_pattern import Branch, Item, branches
from dfs_cer.match.columns import check_choice, column_of, split_halo
from dfs_cer.match.rowpattern import (
    MatchOutput,
    _referenced_columns,
    sort_and_partition,
    sort_partition_flags,
    time_values,
)
from dfs_cer.options import KLEENE, ON_LIMIT, SELECTIONS
from dfs_cer.query.analyze import Analysis
from dfs_cer.query.expr import (
    Aggregate,
    Classifier,
    Column,
    Expr,
    MatchNumber,
    Navigation,
    NavKind,
    conjuncts,
    to_sql,
    walk,
)
from dfs_cer.work import CHECK_EVERY, Work

#: pairs of partial matches and candidates joined at once when a node's work bounds the run
CHUNK_PAIRS = 1 << 20
#: what one match with Kleene sets holds (Python lists of rows), charged to a node's work
KLEENE_MATCH_BYTES = 256


def _vars(e: Expr) -> set[str]:
    return {n.variable for n in walk(e) if isinstance(n, Column) and n.variable is not None}


class Gathered:
    """Column values of bound variables for a batch of partial matches (the expression resolver)."""

    def __init__(self, table: pa.Table, rows: dict[str, np.ndarray], owner: str, kleene: set[str],
                 kleene_rows: dict[str, dict[tuple[NavKind, int], np.ndarray]] | None = None,
                 columns: dict[str, pa.Array] | None = None) -> None:
        self.table = table
        self.rows = rows
        self.owner = owner
        self.kleene = kleene
        self.kleene_rows = kleene_rows or {}
        #: the table's columns as single arrays (shareable across batches of the same table)
        self._columns: dict[str, pa.Array] = {} if columns is None else columns

    def column(self, name: str) -> pa.Array:
        if name not in self._columns:
            self._columns[name] = self.table.column(column_of(self.table, name)).combine_chunks()
        return self._columns[name]

    def __call__(self, x: Expr) -> pa.Array:
        if isinstance(x, Column):
            var = x.variable or self.owner
            return self.column(x.name).take(pa.array(self.rows[var]))
        if isinstance(x, Navigation) and isinstance(x.operand, Column):
            var = x.operand.variable or self.owner
            key = (x.kind, x.offset)
            if key in ((NavKind.FIRST, 0), (NavKind.LAST, 0), (NavKind.NEXT, 1), (NavKind.PREV, 1)) \
                    and var in self.kleene_rows:
                # per-element views prepared by the Kleene enumeration
                return self.column(x.operand.name).take(pa.array(self.kleene_rows[var][key]))
            if x.kind in (NavKind.FIRST, NavKind.LAST) and x.offset == 0 and var not in self.kleene:
                return self.column(x.operand.name).take(pa.array(self.rows[var]))
        raise UnsupportedFeatureError(f"{to_sql(x)} in a CER condition", clause="DEFINE",
                                      hint="CER conditions use columns, FIRST/LAST, and NEXT/PREV of a Kleene "
                                           "variable inside its own condition", code="unsupported")


def _check(e: Expr, resolve: Gathered, n: int) -> np.ndarray:
    out = _broadcast(evaluate(e, resolve, n), n)
    return np.asarray(pc.fill_null(out, False).to_numpy(zero_copy_only=False), bool)


def run_cer(table: pa.Table, analysis: Analysis, *, selection: str = "skip_till_any_match", kleene: str = "all",
            max_matches: int = 10_000_000, on_limit: str = "error", count_only: bool = False,
            join_order: tuple[str, ...] | None = None, time_order: str = "strict",
            match_ids: bool = False, work: Work | None = None) -> MatchOutput:
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
    """
    if time_order not in ("strict", "relaxed"):
        raise UnsupportedFeatureError(f"time_order {time_order!r}", code="unsupported")
    if selection not in SELECTIONS:
        raise UnsupportedFeatureError(f"selection {selection!r}", code="unsupported")
    check_choice(kleene, KLEENE, "kleene")
    check_choice(on_limit, ON_LIMIT, "on_limit")
    table, halo = split_halo(table)
    query = analysis.query
    mr = query.recognize
    if halo is not None and halo.any():  # CER's NEXT/PREV read selected events: halo rows are not events
        table = _events_of(table, halo, analysis)
    any_row = {v.name for v in analysis.variables if v.any_row}
    expanded, unordered = branches(mr, any_row)
    for d in mr.definitions:
        for node in walk(d.condition):
            if isinstance(node, Aggregate | Classifier | MatchNumber):
                raise UnsupportedFeatureError(f"{to_sql(node)} in a CER condition", clause=f"DEFINE {d.variable}",
                                              code="unsupported")
    partition_by = tuple(column_of(table, c) for c in mr.partition_by)
    order_col = column_of(table, mr.order_by[0].column)
    original = table
    table, bounds, order = sort_and_partition(table, partition_by, [(order_col, False)],
                                              _referenced_columns(mr, table), analysis.event_key, analysis.dedup)
    n = len(table)
    ts = time_values(table, order_col)
    window = analysis.window_units if mr.window is not None else None
    if mr.window is not None and window is None:
        raise ValueError("the analysis is not bound to the table's schema")
    row_part = np.repeat(np.arange(bounds.size - 1), np.diff(bounds)) if n else np.zeros(0, np.int64)
    row_hash = None
    if match_ids:
        from dfs_cer.match import identity

        cols = identity.identity_columns(original.schema, partition_by, [order_col], analysis.event_key)
        row_hash = identity.event_hashes(original.take(pa.array(order)), cols)
    engines = []
    for branch in expanded:
        engine = _Engine(table, ts, bounds, row_part, list(branch.items), branch.recognize, window, selection,
                         kleene, max_matches, on_limit, count_only, unordered)
        engine.join_order = join_order
        engine.tie = 1 if time_order == "strict" else 0
        engine.row_hash = row_hash
        engine.work = work
        engines.append((engine, _for_branch(analysis, branch)))
    if len(engines) == 1:
        engine, branch_analysis = engines[0]
        return engine.run(branch_analysis)
    return _run_branches(engines, count_only, max_matches, on_limit, bool(mr.partition_by), row_part)


def _events_of(table: pa.Table, halo: np.ndarray, analysis: Analysis) -> pa.Table:
    """The rows that are events: not halo rows, except the copy of an event the matcher keeps
    (a halo row, fetched from another node) when some copy of it was pulled as an event."""
    if not analysis.dedup:
        return table.filter(pa.array(~halo))
    mr = analysis.query.recognize
    partition_by = tuple(column_of(table, c) for c in mr.partition_by)
    order = [(column_of(table, mr.order_by[0].column), False)]
    _, _, kept, flags = sort_partition_flags(table, partition_by, order, set(), analysis.event_key, True, halo)
    return table.take(pa.array(np.sort(kept[~flags])))


def _for_branch(analysis: Analysis, branch: Branch) -> Analysis:
    import dataclasses

    if branch.recognize == analysis.query.recognize:
        return analysis
    return dataclasses.replace(analysis, query=dataclasses.replace(analysis.query, recognize=branch.recognize))


def _run_branches(engines: list[tuple[_Engine, Analysis]], count_only: bool, max_matches: int, on_limit: str,
                  partitioned: bool, row_part: np.ndarray) -> MatchOutput:
    """Matches of every branch of an expanded pattern, numbered in one canonical order (by each
    position's first event, then branch)."""
    collected = [engine.collect(analysis) for engine, analysis in engines]
    total = sum(c.total for c in collected)
    if count_only and all(c.counted for c in collected):
        return MatchOutput(pa.table({}), total, False)
    if total > max_matches and on_limit != "truncate":
        raise MatchLimitError(f"the query produced {total} matches, more than max_matches={max_matches}")
    keys, branch_ids, sorted_parts = [], [], []
    for b, ((engine, _), c) in enumerate(zip(engines, collected, strict=True)):
        bound, kleene = engine.sorted(c.bound, c.kleene)
        sorted_parts.append((bound, kleene))
        keys.append(engine.keys(bound, kleene))
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
        mine = position[offset:offset + k.shape[1]]
        offset += k.shape[1]
        relations.append(engine.relation(bound, kleene, numbers[mine]))
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
    def __init__(self, table: pa.Table, ts: np.ndarray, bounds: np.ndarray, row_part: np.ndarray, items: list[Item],
                 mr: object, window: int | None, selection: str, kleene: str, max_matches: int, on_limit: str,
                 count_only: bool, unordered: bool = False) -> None:
        self.table, self.ts, self.bounds, self.row_part = table, ts, bounds, row_part
        self.unordered = unordered
        self.negated = {it.name for it in items if it.negated}
        self.join_order: tuple[str, ...] | None = None
        self.tie = 1  # 1: equal times never chain across variables; 0: they may (relaxed)
        self.items = items
        self.mr = mr
        self.window = window
        self.selection = selection
        self.kleene_mode = kleene
        self.max_matches = max_matches
        self.on_limit = on_limit
        self.count_only = count_only
        self.index = {it.name: i for i, it in enumerate(items)}
        self.kleene = {it.name for it in items if it.kleene}
        self.row_hash: np.ndarray | None = None  # set when the relation carries match ids
        self.work: Work | None = None  # a storage node's bounds on the run (None: unbounded)
        self._held = 0  # bytes of partial matches charged to ``work``

    def _check(self, step: int = 0) -> None:
        if self.work is not None and step % CHECK_EVERY == 0:
            self.work.check()

    def _hold(self, nbytes: int) -> None:
        """Charge the partial matches about to be made (``nbytes``) in place of those held."""
        if self.work is None:
            return
        if nbytes > self._held:
            self.work.charge(nbytes - self._held)
        else:
            self.work.uncharge(self._held - nbytes)
        self._held = nbytes

    def _expand(self, lo_row: np.ndarray, hi_row: np.ndarray, t_lo: np.ndarray, t_hi: np.ndarray,
                cand: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The band join of partial matches (``width`` bound variables) with ``cand``, its pairs
        counted and charged before they are made."""
        first, last = expand_ranges(lo_row, hi_row, t_lo, t_hi, cand, self.ts[cand])
        if self.work is not None:
            pairs = int((last - first).sum())
            # the pairs, the partial matches gathered through them, and a condition's masks
            self._hold(pairs * 8 * (2 * width + 4))
        return expand_pairs(first, last, cand)

    # ------------------------------------------------------------------ candidates and conditions

    def _candidates(self, analysis: Analysis) -> tuple[dict[str, np.ndarray], dict[str, list[Expr]]]:
        from dfs_cer.match.conditions import ConditionCompiler

        mr = analysis.query.recognize
        part_start = self.bounds[self.row_part] if len(self.table) else np.zeros(0, np.int64)
        part_end = self.bounds[self.row_part + 1] if len(self.table) else np.zeros(0, np.int64)
        compiler = ConditionCompiler(mr, tuple(i.name for i in self.items), self.table, part_start, part_end, None)
        cands: dict[str, np.ndarray] = {}
        dependent: dict[str, list[Expr]] = {}
        for it in self.items:
            d = mr.definition(it.name)
            parts = [] if d is None else conjuncts(d.condition)
            local = [p for p in parts if not any(isinstance(x, Navigation) for x in walk(p))
                     and _vars(p) <= {it.name}]
            dependent[it.name] = [p for p in parts if p not in local]
            cands[it.name] = np.nonzero(compiler.mask(it.name, local))[0].astype(np.int64)
        return cands, dependent

    # ------------------------------------------------------------------ single variables: band joins

    def _bounds_for(self, v: str, bound: dict[str, np.ndarray], count: int) -> tuple[np.ndarray, ...]:
        pos = self.index[v]
        t_lo = np.full(count, np.iinfo(np.int64).min // 4, np.int64)
        t_hi = np.full(count, np.iinfo(np.int64).max // 4, np.int64)
        any_row = next(iter(bound.values()))
        for other, rows in bound.items():
            t = self.ts[rows]
            before = self.index[other] < pos
            if not self.unordered:  # equal times never chain across variables
                t_lo = np.maximum(t_lo, t + self.tie) if before else t_lo
                t_hi = np.minimum(t_hi, t - self.tie) if not before else t_hi
            if self.window is not None:
                t_lo = np.maximum(t_lo, t - self.window)
                t_hi = np.minimum(t_hi, t + self.window)
        part = self.row_part[any_row]
        return self.bounds[part], self.bounds[part + 1], t_lo, t_hi

    # ------------------------------------------------------------------ Kleene sets

    def _kleene_sets(self, bound: dict[str, np.ndarray], cands: dict[str, np.ndarray],
                     dependent: dict[str, list[Expr]], i: int) -> Iterator[dict[str, list[int]]]:
        """Every choice of Kleene sets for partial match ``i`` (lazily)."""
        set_conds = self._set_conditions(dependent)
        if set_conds:
            dag = self._dag(bound, cands, dependent, i, set_conds)
            if dag is not None:
                return dag.paths()
        singles, eligible, p0, p1 = self._eligible(bound, cands, dependent, i)
        return self._combine(eligible, singles, dependent, p0, p1)

    def _count_sets(self, bound: dict[str, np.ndarray], cands: dict[str, np.ndarray],
                    dependent: dict[str, list[Expr]], i: int) -> int | None:
        """Exact number of Kleene choices for partial match ``i`` without enumerating, or None
        when the shape needs enumeration (conditions over the set, Kleene variables at both ends)."""
        set_conds = self._set_conditions(dependent)
        if set_conds:
            dag = self._dag(bound, cands, dependent, i, set_conds)
            return None if dag is None else dag.count()
        _, eligible, _, _ = self._eligible(bound, cands, dependent, i)
        kleene_items = [it for it in self.items if it.kleene]
        if any(not eligible[it.name] for it in kleene_items):
            return 0
        ends = [self.items[0].kleene, self.items[-1].kleene]
        if all(ends) and len(kleene_items) > 1:
            return None
        if self.kleene_mode == "maximal":
            return None
        total = 1
        idx = 0
        while idx < len(self.items):
            it = self.items[idx]
            if not it.kleene:
                idx += 1
                continue
            run = [it.name]
            while idx + len(run) < len(self.items) and self.items[idx + len(run)].kleene:
                run.append(self.items[idx + len(run)].name)
            if len(run) == 1:
                total *= 2 ** len(eligible[run[0]]) - 1
            elif len(run) == 2:
                a_t = np.array([self.ts[r] for r in eligible[run[0]]])
                b_t = np.array([self.ts[r] for r in eligible[run[1]]])
                count = 0
                for j, tb in enumerate(b_t):
                    before = int(np.sum(a_t <= tb - self.tie))
                    after = len(b_t) - j - 1
                    count += (2**before - 1) * 2**after
                total *= count
            else:
                return None
            idx += len(run)
        return total

    def _eligible(self, bound: dict[str, np.ndarray], cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]],
                  i: int) -> tuple[dict[str, int], dict[str, list[int]], int, int]:
        singles = {k: int(r[i]) for k, r in bound.items()}
        any_row = next(iter(singles.values()))
        p = self.row_part[any_row]
        p0, p1 = self.bounds[p], self.bounds[p + 1]
        times = [self.ts[r] for r in singles.values()]
        t_min, t_max = min(times), max(times)
        # eligible events per Kleene variable: between its single neighbours, within the window
        eligible: dict[str, list[int]] = {}
        for it in self.items:
            if not it.kleene:
                continue
            pos = self.index[it.name]
            lo = max([self.ts[singles[o.name]] for o in self.items[:pos] if o.name in singles], default=None)
            hi = min([self.ts[singles[o.name]] for o in self.items[pos + 1:] if o.name in singles], default=None)
            c = cands[it.name]
            c = c[(c >= p0) & (c < p1)]
            t = self.ts[c]
            ok = np.ones(c.size, bool)
            if lo is not None:
                ok &= t >= lo + self.tie
            if hi is not None:
                ok &= t <= hi - self.tie
            if self.window is not None:
                ok &= (t >= t_max - self.window) & (t <= t_min + self.window)
            rows = c[ok]
            # conditions on single elements (bare references, no NEXT/PREV/FIRST/LAST of the set)
            if rows.size:
                rows = self._element_filter(it.name, rows, singles, dependent)
            eligible[it.name] = rows.tolist()
        return singles, eligible, int(p0), int(p1)

    def _element_filter(self, name: str, rows: np.ndarray, singles: dict[str, int],
                        dependent: dict[str, list[Expr]]) -> np.ndarray:
        keep = np.ones(rows.size, bool)
        for owner, parts in dependent.items():
            for p in parts:
                refs = _vars(p) | {owner}
                navs = [x for x in walk(p) if isinstance(x, Navigation)]
                if name not in refs or refs & self.kleene != {name} or navs:
                    continue
                if not refs - {name} <= set(singles):
                    continue
                view = {k: np.full(rows.size, v) for k, v in singles.items()}
                view[name] = rows
                keep &= _check(p, Gathered(self.table, view, owner, set()), rows.size)
        return rows[keep]

    def _set_conditions(self, dependent: dict[str, list[Expr]]) -> list[tuple[str, Expr]]:
        out = []
        for owner, parts in dependent.items():
            for p in parts:
                refs = _vars(p) | {owner}
                navs = [x for x in walk(p) if isinstance(x, Navigation)]
                if refs & self.kleene and (navs or len(refs & self.kleene) > 1):
                    out.append((owner, p))
        return out

    def _dag(self, bound: dict[str, np.ndarray], cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]],
             i: int, set_conds: list[tuple[str, Expr]]) -> KleeneDag | None:
        """The "next" DAG of the only Kleene variable, when every condition over its set is a
        consecutive-pair (NEXT/PREV), first-element (FIRST) or last-element (LAST) condition."""
        kleene_items = [it.name for it in self.items if it.kleene]
        if len(kleene_items) != 1 or self.kleene_mode == "maximal":
            return None
        name = kleene_items[0]
        kinds = []
        for owner, p in set_conds:
            navs = [x for x in walk(p) if isinstance(x, Navigation)]
            targets = {(x.operand.variable or owner) if isinstance(x.operand, Column) else None for x in navs}
            bare = [x for x in walk(p) if isinstance(x, Column) and (x.variable or owner) == name
                    and not any(x is nv.operand for nv in navs)]
            if targets != {name} or not navs:
                return None
            nav_kinds = {(x.kind, x.offset) for x in navs}
            if nav_kinds <= {(NavKind.NEXT, 1)} and owner == name:
                kinds.append(("next", owner, p))
            elif nav_kinds <= {(NavKind.PREV, 1)} and owner == name:
                kinds.append(("prev", owner, p))
            elif nav_kinds == {(NavKind.FIRST, 0)} and not bare:
                kinds.append(("first", owner, p))
            elif nav_kinds == {(NavKind.LAST, 0)} and not bare:
                kinds.append(("last", owner, p))
            else:
                return None
        singles, eligible, _, _ = self._eligible(bound, cands, dependent, i)
        rows = np.array(eligible[name], np.int64)
        m = rows.size
        first_ok = np.ones(m, bool)
        last_ok = np.ones(m, bool)
        pair_i, pair_j = np.triu_indices(m, 1)
        pair_ok = np.ones(pair_i.size, bool)
        for kind, owner, p in kinds:
            if kind in ("first", "last"):
                views = {k: np.full(m, v) for k, v in singles.items()}
                views[name] = rows
                key = (NavKind.FIRST, 0) if kind == "first" else (NavKind.LAST, 0)
                ok = _check(p, Gathered(self.table, views, owner, self.kleene, {name: {key: rows}}), m)
                if kind == "first":
                    first_ok &= ok
                else:
                    last_ok &= ok
            elif pair_i.size:
                cur, other = (rows[pair_i], rows[pair_j]) if kind == "next" else (rows[pair_j], rows[pair_i])
                views = {k: np.full(pair_i.size, v) for k, v in singles.items()}
                views[name] = cur
                nav = {(NavKind.NEXT, 1) if kind == "next" else (NavKind.PREV, 1): other}
                pair_ok &= _check(p, Gathered(self.table, views, owner, self.kleene, {name: nav}), pair_i.size)
        # strictly increasing time between consecutive selected events
        if pair_i.size:
            pair_ok &= self.ts[rows[pair_j]] >= self.ts[rows[pair_i]] + self.tie
        return KleeneDag(name, rows, first_ok, last_ok, pair_i[pair_ok], pair_j[pair_ok])

    def _combine(self, eligible: dict[str, list[int]], singles: dict[str, int], dependent: dict[str, list[Expr]],
                 p0: int, p1: int) -> Iterator[dict[str, list[int]]]:
        kleene_items = [it.name for it in self.items if it.kleene]
        set_conds = self._set_conditions(dependent)

        def subsets(rows: list[int]) -> Iterable[list[int]]:
            return (list(c) for size in range(1, len(rows) + 1) for c in itertools.combinations(rows, size))

        adjacent = any(a.kleene and b.kleene for a, b in itertools.pairwise(self.items))
        per_var: list[Iterable[list[int]]] = []
        for name in kleene_items:
            rows = eligible[name]
            if not rows:
                return
            if self.selection == "skip_till_next_match":
                per_var.append([rows[:k] for k in range(1, len(rows) + 1)] if self.kleene_mode == "all" else [rows])
            elif self.kleene_mode == "maximal" and not set_conds and not adjacent:
                per_var.append([rows])  # independent elements: the maximal set is all of them
            else:
                per_var.append(subsets(rows))
        maximal = self.kleene_mode == "maximal" and self.selection != "skip_till_next_match"
        if len(per_var) == 1 and not maximal:  # itertools.product would materialise every subset
            combos: Iterable[tuple[list[int], ...]] = ((x,) for x in per_var[0])
        else:
            combos = itertools.product(*[list(v) for v in per_var])
        valid = (dict(zip(kleene_items, combo, strict=True)) for combo in combos)
        valid = (s for s in valid if self._ordered(s, singles) and self._within(s, singles)
                 and (not set_conds or self._sets_hold(s, singles, set_conds)))
        if maximal:
            yield from _maximal(list(valid))
        else:
            yield from valid

    def _within(self, sets: dict[str, list[int]], singles: dict[str, int]) -> bool:
        if self.window is None:
            return True
        everything = list(singles.values()) + [r for s in sets.values() for r in s]
        return bool(self.ts[max(everything)] - self.ts[min(everything)] <= self.window)

    def _ordered(self, sets: dict[str, list[int]], singles: dict[str, int]) -> bool:
        last_t = None
        for it in self.items:
            rows = sets[it.name] if it.kleene else [singles[it.name]]
            t0, t1 = self.ts[rows[0]], self.ts[rows[-1]]
            if last_t is not None and t0 < last_t + self.tie:
                return False
            last_t = t1
        return True

    def _sets_hold(self, sets: dict[str, list[int]], singles: dict[str, int],
                   conds: list[tuple[str, Expr]]) -> bool:
        for owner, p in conds:
            kleene_refs = (_vars(p) | {owner}) & self.kleene
            # element-wise over the owner's set (or the referenced set) with NEXT/PREV neighbours
            name = owner if owner in self.kleene else next(iter(kleene_refs))
            rows = np.array(sets[name])
            m = rows.size
            views = {k: np.full(m, v) for k, v in singles.items()}
            for k in kleene_refs:
                views[k] = np.array(sets[k]) if k == name else np.full(m, sets[k][-1])
            nexts = np.append(rows[1:], -1)
            prevs = np.insert(rows[:-1], 0, -1)
            nav_rows = {}
            for k in kleene_refs:
                s = np.array(sets[k])
                nav_rows[k] = {(NavKind.FIRST, 0): np.full(m, s[0]), (NavKind.LAST, 0): np.full(m, s[-1]),
                               (NavKind.NEXT, 1): nexts if k == name else np.full(m, -1),
                               (NavKind.PREV, 1): prevs if k == name else np.full(m, -1)}
            has_next = any(isinstance(x, Navigation) and x.kind == NavKind.NEXT for x in walk(p))
            has_prev = any(isinstance(x, Navigation) and x.kind == NavKind.PREV for x in walk(p))
            check_rows = np.ones(m, bool)
            if has_next:
                check_rows &= nexts >= 0
            if has_prev:
                check_rows &= prevs >= 0
            if not check_rows.any():
                continue
            safe = {k: {kk: np.where(vv >= 0, vv, 0) for kk, vv in d.items()} for k, d in nav_rows.items()}
            ok = _check(p, Gathered(self.table, views, owner, self.kleene, safe), m)
            if not ok[check_rows].all():
                return False
        return True

    # ------------------------------------------------------------------ selection strategies

    def _next_match(self, cands: dict[str, np.ndarray],
                    dependent: dict[str, list[Expr]]) -> tuple[dict[str, np.ndarray], list[dict[str, list[int]]]]:
        """Skip-till-next-match: per start event, each later variable takes the first qualifying
        event after the previous one; a Kleene variable starts at its first qualifying event and
        collects every qualifying event before the next variable's (all mode: each prefix)."""
        first = self.items[0]
        if first.kleene:
            raise UnsupportedFeatureError("skip_till_next_match with a Kleene first variable", clause="PATTERN",
                                          hint="use skip_till_any_match with kleene='maximal'", code="unsupported")
        if not self.kleene and not self.negated:
            return self._next_match_singles(cands, dependent)
        singles_out: dict[str, list[int]] = {it.name: [] for it in self.items if not it.kleene}
        sets_out: list[dict[str, list[int]]] = []
        for start in cands[first.name].tolist():
            p = self.row_part[start]
            p0, p1 = self.bounds[p], self.bounds[p + 1]
            chosen: dict[str, int] = {first.name: start}
            runs: dict[str, int] = {}
            cur_t = self.ts[start]
            ok = True
            for it in self.items[1:]:
                c = cands[it.name]
                c = c[(c >= p0) & (c < p1)]
                c = c[self.ts[c] > cur_t]
                found = None
                for r in c.tolist():
                    if self.window is not None and self.ts[r] - self.ts[start] > self.window:
                        break
                    if it.kleene:
                        if self._element_filter(it.name, np.array([r]), chosen, dependent).size:
                            found = r
                            break
                        continue
                    trial = {k: np.array([v]) for k, v in chosen.items()}
                    trial[it.name] = np.array([r])
                    if self._conditions_hold(trial, set(trial), dependent):
                        found = r
                        break
                if found is None:
                    ok = False
                    break
                if it.kleene:
                    runs[it.name] = found
                else:
                    chosen[it.name] = found
                cur_t = self.ts[found]
            if not ok:
                continue
            sets: dict[str, list[int]] = {}
            for it in self.items:
                if not it.kleene:
                    continue
                k1 = runs[it.name]
                pos = self.index[it.name]
                nxt = next((chosen[o.name] for o in self.items[pos + 1:] if not o.kleene), None)
                c = cands[it.name]
                c = c[(c >= k1) & (c < (nxt if nxt is not None else p1))]
                if self.window is not None:
                    c = c[self.ts[c] - self.ts[start] <= self.window]
                c = self._element_filter(it.name, c, chosen, dependent)
                sets[it.name] = c.tolist()
            if sets and not self._sets_hold(sets, chosen, self._set_conditions(dependent)):
                continue
            prefixes = [sets]
            if sets and self.kleene_mode == "all":
                if len(sets) != 1:
                    raise UnsupportedFeatureError("skip_till_next_match with several Kleene variables in all mode",
                                                  code="unsupported")
                name, rows = next(iter(sets.items()))
                prefixes = [{name: rows[:k]} for k in range(1, len(rows) + 1)]
            for pre in prefixes:
                for k, v in chosen.items():
                    singles_out[k].append(v)
                sets_out.append(pre)
        return {k: np.array(v, np.int64) for k, v in singles_out.items()}, sets_out

    def _next_match_singles(self, cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]]
                            ) -> tuple[dict[str, np.ndarray], list[dict[str, list[int]]]]:
        """Skip-till-next-match without Kleene variables, for every start event at once: each
        variable takes, per partial match, the first candidate after the previous variable's
        time (same partition, inside the window) for which every condition whose variables are
        all bound holds. Candidates are tried in rounds, one per partial match per round, with
        the conditions evaluated over the whole batch of partial matches (Arrow kernels)."""
        first = self.items[0].name
        starts = cands[first]
        n, size = self.ts.size, starts.size
        # the first row after each row's run of equal (partition, time): a later time or partition
        change = np.ones(n, bool)
        if n > 1:
            change[1:] = (self.row_part[1:] != self.row_part[:-1]) | (self.ts[1:] != self.ts[:-1])
        run_starts = np.flatnonzero(change)
        after = np.append(run_starts[1:], n)[np.cumsum(change) - 1]
        ends = self.bounds[self.row_part[starts] + 1] if size else np.zeros(0, np.int64)
        start_ts = self.ts[starts]
        bound = {first: starts.astype(np.int64)}
        last = bound[first].copy()
        alive = np.arange(size)
        conditions = [(owner, p, _vars(p) | {owner}) for owner, parts in dependent.items()
                      if owner not in self.kleene for p in parts]
        done = {first}
        columns: dict[str, pa.Array] = {}
        for step, it in enumerate(self.items[1:]):
            now = done | {it.name}
            checks = [(owner, p) for owner, p, refs in conditions
                      if refs <= now and (not refs <= done or step == 0)]
            c = cands[it.name]
            found = np.full(alive.size, -1, np.int64)
            pos = np.searchsorted(c, after[last[alive]]) if alive.size else np.zeros(0, np.int64)
            pending = np.arange(alive.size)
            while pending.size:
                self._check()
                j = pos[pending]
                ok = j < c.size
                r = c[np.minimum(j, max(c.size - 1, 0))] if c.size else np.zeros(pending.size, np.int64)
                who = alive[pending]
                ok &= r < ends[who]
                if self.window is not None:
                    ok &= self.ts[r] - start_ts[who] <= self.window
                pending, r, who = pending[ok], r[ok], who[ok]
                if not pending.size:
                    break
                hold = np.ones(pending.size, bool)
                if checks:
                    rows = {k: v[who] for k, v in bound.items()}
                    rows[it.name] = r
                    for owner, p in checks:
                        hold &= _check(p, Gathered(self.table, rows, owner, self.kleene, columns=columns),
                                       pending.size)
                found[pending[hold]] = r[hold]
                pending = pending[~hold]
                pos[pending] += 1
            keep = found >= 0
            alive = alive[keep]
            bound[it.name] = np.full(size, -1, np.int64)
            bound[it.name][alive] = found[keep]
            last[alive] = found[keep]
            done = now
        return {k: v[alive] for k, v in bound.items()}, [{} for _ in range(alive.size)]

    def _conditions_hold(self, bound: dict[str, np.ndarray], done: set[str], dependent: dict[str, list[Expr]]) -> bool:
        for owner, parts in dependent.items():
            if owner in self.kleene:
                continue
            for p in parts:
                refs = _vars(p) | {owner}
                if refs & self.kleene or not refs <= done:
                    continue
                if not _check(p, Gathered(self.table, bound, owner, self.kleene), 1)[0]:
                    return False
        return True

    # ------------------------------------------------------------------ driver

    def run(self, analysis: Analysis) -> MatchOutput:
        c = self.collect(analysis)
        if c.counted:
            return MatchOutput(pa.table({}), c.total, False)
        bound, kleene = self.sorted(c.bound, c.kleene)
        return MatchOutput(self.relation(bound, kleene), c.total, c.truncated)

    def collect(self, analysis: Analysis) -> Collected:
        """Every match's bound rows (and Kleene sets), bounded by ``max_matches``."""
        cands, dependent = self._candidates(analysis)
        if self.selection == "strict_contiguity":
            raise UnsupportedFeatureError("strict_contiguity is evaluated by the row-pattern engine",
                                          hint="omit selection= and ALL MATCHES: SQL PATTERN (A B C) is strictly "
                                               "contiguous", code="unsupported")
        stnm_sets: list[dict[str, list[int]]] | None = None
        if self.selection == "skip_till_next_match":
            bound, stnm_sets = self._next_match(cands, dependent)
        else:
            bound = self._join_all(cands, dependent)
        count = next(iter(bound.values())).size if bound else 0
        total = 0
        truncated = False
        if not self.kleene:
            total = count
            if total > self.max_matches:
                if self.on_limit != "truncate":
                    raise MatchLimitError(f"the query produced {total} matches, more than "
                                          f"max_matches={self.max_matches}")
                truncated = True
                bound = {k: r[: self.max_matches] for k, r in bound.items()}
                total = self.max_matches
            return Collected(bound, {}, total, truncated)
        kleene_out: dict[str, list[list[int]]] = {k: [] for k in self.kleene}
        keep_idx: list[int] = []
        if stnm_sets is None:
            counted = []
            for i in range(count):
                self._check(i)
                counted.append(self._count_sets(bound, cands, dependent, i))
            if all(c is not None for c in counted):
                exact = sum(c for c in counted if c is not None)
                if self.count_only:
                    return Collected({}, {}, exact, False, counted=True)
                if exact > self.max_matches and self.on_limit != "truncate":
                    raise MatchLimitError(f"the query produced {exact} matches, more than "
                                          f"max_matches={self.max_matches}")
        for i in range(count):
            self._check(i)
            sets: Iterable[dict[str, list[int]]] = [stnm_sets[i]] if stnm_sets is not None else \
                self._kleene_sets(bound, cands, dependent, i)
            for one in sets:
                total += 1
                if self.work is not None and total % CHECK_EVERY == 0:  # the Kleene sets kept so far
                    self.work.charge(CHECK_EVERY * KLEENE_MATCH_BYTES)
                if total > self.max_matches:
                    if self.on_limit != "truncate":
                        raise MatchLimitError(f"the query produced more than max_matches={self.max_matches} matches"
                                              " (count_only=True counts them exactly)")
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

    def keys(self, bound: dict[str, np.ndarray], kleene: dict[str, list[list[int]]]) -> np.ndarray:
        """(positions, matches): each positive item's row (a Kleene set's first), in pattern order."""
        count = next(iter(bound.values())).size if bound else len(next(iter(kleene.values()), []))
        rows = [bound[i.name] if i.name in bound else np.array([s[0] for s in kleene[i.name]], np.int64)
                for i in self.items if i.name in bound or i.name in kleene]
        return np.stack(rows) if rows else np.zeros((0, count), np.int64)

    def sorted(self, bound: dict[str, np.ndarray],
               kleene: dict[str, list[list[int]]]) -> tuple[dict[str, np.ndarray], dict[str, list[list[int]]]]:
        """Matches in canonical order (by each variable's first event in pattern order), the
        order MATCH_NUMBER() counts in."""
        keys = self.keys(bound, kleene)
        if keys.shape[1] < 2:
            return bound, kleene
        order = np.lexsort(tuple(reversed(list(keys))))
        return {k: v[order] for k, v in bound.items()}, {k: [v[i] for i in order] for k, v in kleene.items()}

    def _join_all(self, cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]]) -> dict[str, np.ndarray]:
        singles = [it.name for it in self.items if not it.kleene and not it.negated]
        order = sorted(singles, key=lambda v: (cands[v].size, self.index[v]))
        if self.join_order is not None:
            order = [v for v in self.join_order if v in singles]
        bound: dict[str, np.ndarray] = {order[0]: cands[order[0]]}
        done = {order[0]}
        bound = self._apply(bound, done, order[0], dependent)
        for v in order[1:]:
            count = next(iter(bound.values())).size
            if count == 0:
                bound[v] = np.zeros(0, np.int64)
                done.add(v)
                continue
            cand = cands[v]
            done.add(v)
            width = (len(bound) + 1) * 8  # bytes per partial match
            pieces: list[dict[str, np.ndarray]] = []
            kept = 0
            # blocks of partial matches and bounded chunks of their pairs when a node's work
            # bounds the run: checked between, and charged for what is kept plus the chunk
            # being joined (conditions drop most pairs)
            block = count if self.work is None else CHUNK_PAIRS
            for start in range(0, count, block):
                self._check()
                some = {k: r[start:start + block] for k, r in bound.items()}
                lo_row, hi_row, t_lo, t_hi = self._bounds_for(v, some, next(iter(some.values())).size)
                first, last = expand_ranges(lo_row, hi_row, t_lo, t_hi, cand, self.ts[cand])
                for a, b in self._chunks(last - first):
                    idx, rows = expand_pairs(first[a:b], last[a:b], cand)
                    if self.work is not None:
                        self._hold(kept + rows.size * (2 * width + 32))
                    part = {k: r[a:b][idx] for k, r in some.items()}
                    if self.unordered:  # a conjunction binds distinct events
                        distinct = np.ones(rows.size, bool)
                        for r in part.values():
                            distinct &= r != rows
                        part = {k: r[distinct] for k, r in part.items()}
                        rows = rows[distinct]
                    part[v] = rows
                    pieces.append(self._apply(part, done, v, dependent))
                    kept += pieces[-1][v].size * width
            bound = pieces[0] if len(pieces) == 1 else {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
            self._hold(kept)
        return self._negations(bound, cands, dependent)

    def _chunks(self, counts: np.ndarray) -> Iterator[tuple[int, int]]:
        """Slices of the partial matches whose pairs (``counts`` each) make bounded chunks (one
        slice when no work bounds the run), the work checked before each."""
        if self.work is None or counts.size == 0:
            yield 0, counts.size
            return
        ends = np.cumsum(counts)
        a = 0
        while a < counts.size:
            self.work.check()
            b = int(np.searchsorted(ends, (ends[a - 1] if a else 0) + CHUNK_PAIRS, side="right"))
            b = max(b, a + 1)
            yield a, b
            a = b

    def _negations(self, bound: dict[str, np.ndarray], cands: dict[str, np.ndarray],
                   dependent: dict[str, list[Expr]]) -> dict[str, np.ndarray]:
        """Drop partial matches with a qualifying negated event between their neighbours."""
        for it in self.items:
            count = next(iter(bound.values())).size
            if not it.negated or count == 0:
                continue
            pos = self.index[it.name]
            prev = next((o.name for o in reversed(self.items[:pos]) if not o.negated), None)
            nxt = next((o.name for o in self.items[pos + 1:] if not o.negated), None)
            times = np.stack([self.ts[r] for r in bound.values()])
            t_lo = self.ts[bound[prev]] + self.tie if prev else times.max(axis=0) - (self.window or 0)
            t_hi = self.ts[bound[nxt]] - self.tie if nxt else times.min(axis=0) + (self.window or 0)
            if self.window is None and (prev is None or nxt is None):
                raise UnsupportedFeatureError("a leading or trailing negation needs a WITHIN window",
                                              clause="PATTERN", code="unsupported")
            anchor = next(iter(bound.values()))
            part = self.row_part[anchor]
            cand = cands[it.name]
            idx, rows = self._expand(self.bounds[part], self.bounds[part + 1], t_lo, t_hi, cand, len(bound))
            if rows.size == 0:
                continue
            view = {k: r[idx] for k, r in bound.items()}
            view[it.name] = rows
            hit = np.ones(rows.size, bool)
            for p in dependent[it.name]:
                hit &= _check(p, Gathered(self.table, view, it.name, self.kleene), rows.size)
            killed = np.zeros(count, bool)
            killed[idx[hit]] = True
            bound = {k: r[~killed] for k, r in bound.items()}
        return bound

    def _apply(self, bound: dict[str, np.ndarray], done: set[str], newest: str,
               dependent: dict[str, list[Expr]]) -> dict[str, np.ndarray]:
        count = next(iter(bound.values())).size
        if count == 0:
            return bound
        keep = np.ones(count, bool)
        for owner, parts in dependent.items():
            if owner in self.kleene or owner in self.negated:
                continue
            for p in parts:
                refs = _vars(p) | {owner}
                if refs & self.negated:
                    raise UnsupportedFeatureError(f"{to_sql(p)} refers to a negated variable", clause=f"DEFINE {owner}",
                                                  hint="put conditions on the negated variable in its own DEFINE",
                                                  code="unsupported")
                if refs & self.kleene or not refs <= done or newest not in refs:
                    continue
                if any(isinstance(x, Navigation) and x.kind.physical for x in walk(p)):
                    raise UnsupportedFeatureError(f"{to_sql(p)}: PREV/NEXT of a single-event variable in a CER "
                                                  "condition", clause=f"DEFINE {owner}", code="unsupported")
                keep &= _check(p, Gathered(self.table, bound, owner, self.kleene), count)
        if not keep.all():
            bound = {k: r[keep] for k, r in bound.items()}
        return bound

    def relation(self, bound: dict[str, np.ndarray], kleene: dict[str, list[list[int]]],
                 numbers: np.ndarray | None = None) -> pa.Table:
        """ONE ROW PER MATCH (matches already in canonical order): partitioning columns, then the
        measures (FIRST/LAST of variables, CLASSIFIER() of the last event, MATCH_NUMBER()),
        evaluated per match. ``numbers``: MATCH_NUMBER() of each match when several branches
        share one numbering (default: counted here, per partition)."""
        from dfs_cer.query.model import MatchRecognize

        mr = self.mr
        assert isinstance(mr, MatchRecognize)
        names = [it.name for it in self.items]
        positive = [it.name for it in self.items if not it.negated]  # negated items label no row
        count = next(iter(bound.values())).size if bound else len(next(iter(kleene.values()), []))
        first_rows = {k: np.array([s[0] for s in v], np.int64) for k, v in kleene.items()}
        last_rows = {k: np.array([s[-1] for s in v], np.int64) for k, v in kleene.items()}
        for k, rows in bound.items():
            first_rows.setdefault(k, rows)
            last_rows.setdefault(k, rows)
        sizes = {k: np.array([len(s) for s in v], np.int64) for k, v in kleene.items()}
        for sub in mr.subsets:  # SUBSET U = (A, B): its first and last rows among the members present
            members = [m for m in sub.variables if m in first_rows]
            if members:
                first_rows[sub.name] = np.min(np.stack([first_rows[m] for m in members]), axis=0)
                last_rows[sub.name] = np.max(np.stack([last_rows[m] for m in members]), axis=0)
                sizes[sub.name] = np.sum(np.stack([sizes.get(m, np.ones(count, np.int64)) for m in members]), axis=0)
        columns: dict[str, pa.Array] = {}
        anchor = first_rows.get(positive[0]) if positive else None
        for c in mr.partition_by:
            col = self.table.column(column_of(self.table, c)).combine_chunks()
            columns[c] = col.take(pa.array(anchor if anchor is not None else np.zeros(0, np.int64)))
        view = dict(bound)
        view.update({k: v for k, v in last_rows.items() if k not in bound})
        nav = {k: {(NavKind.FIRST, 0): first_rows[k], (NavKind.LAST, 0): last_rows[k]}
               for k in first_rows if k in kleene or k not in bound}
        resolver = Gathered(self.table, view, positive[-1], set(), nav)
        # CLASSIFIER(): the label of the match's last row (by time: a conjunction's items may come
        # in any order)
        ends = np.stack([last_rows[k] for k in positive]) if positive and count else np.zeros((1, 0), np.int64)
        last_label = np.array(positive, dtype=object)[np.argmax(ends, axis=0)] if count else np.array([], object)
        given = numbers
        numbers = np.arange(1, count + 1) if given is None else given
        if given is None and mr.partition_by and count:
            part = self.row_part[anchor]
            new = np.ones(count, bool)
            new[1:] = part[1:] != part[:-1]
            base = np.maximum.accumulate(np.where(new, np.arange(count), 0))
            numbers = np.arange(count) - base + 1

        def leaf(x: Expr) -> pa.Array:
            if isinstance(x, MatchNumber):
                return pa.array(numbers, pa.int64())
            if isinstance(x, Classifier):
                return pa.array(last_label.tolist(), pa.string())
            if isinstance(x, Aggregate) and (x.name != "count" or len(x.args) != 1):
                raise UnsupportedFeatureError(f"{to_sql(x)} in MEASURES under ALL MATCHES", clause="MEASURES",
                                              hint="the CER engine's measures take count(X.*), FIRST/LAST of "
                                                   "variables, CLASSIFIER() and MATCH_NUMBER()", code="unsupported")
            if isinstance(x, Aggregate):
                var = getattr(x.args[0], "variable", None)
                if var in sizes:
                    return pa.array(sizes[var], pa.int64())
                if var is None:
                    return pa.array(sum((sizes.get(k, np.ones(count, np.int64)) for k in positive),
                                        np.zeros(count, np.int64)), pa.int64())
                return pa.array(np.ones(count, np.int64))
            return resolver(x)

        for m in mr.measures:
            columns[m.name] = _broadcast(evaluate(m.expr, leaf, count), count)
        if not mr.measures:
            # no measures: one column per variable with the matched row positions (sorted order)
            for name in positive:
                if name in kleene:
                    columns[name] = pa.array(kleene[name], pa.list_(pa.int64()))
                else:
                    columns[name] = pa.array(bound[name], pa.int64())
        relation = pa.table(columns) if columns else pa.table({"_": pa.array(np.zeros(count))}).drop(["_"])
        return self._with_ids(relation, bound, kleene, names, count)

    def _with_ids(self, relation: pa.Table, bound: dict[str, np.ndarray], kleene: dict[str, list[list[int]]],
                  names: list[str], count: int) -> pa.Table:
        if self.row_hash is None:
            return relation
        from dfs_cer.match import identity

        present = [n for n in names if n in bound or n in kleene]
        if kleene:  # variable-length matches: flatten per match, variables in pattern order
            per_match = [[(r, v) for v, n in enumerate(present)
                          for r in (kleene[n][i] if n in kleene else [int(bound[n][i])])] for i in range(count)]
            rows = np.array([r for m in per_match for r, _ in m], np.int64)
            labels = np.array([v for m in per_match for _, v in m], np.int64)
            sizes = np.array([len(m) for m in per_match], np.int64)
        else:
            stacked = np.stack([bound[n] for n in present], axis=1) if present else np.zeros((count, 0), np.int64)
            rows = stacked.reshape(-1)
            labels = np.tile(np.arange(len(present)), count)
            sizes = np.full(count, len(present), np.int64)
        label_hash = identity.label_hashes(present)
        ids = identity.match_ids(self.row_hash[rows], label_hash[labels], sizes, np.zeros(count, np.uint64))
        times = self.ts[rows]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        first = np.minimum.reduceat(times, starts) if count else np.zeros(0, np.int64)
        last = np.maximum.reduceat(times, starts) if count else np.zeros(0, np.int64)
        for name, values in zip(identity.ID_COLUMNS, (ids, first, last), strict=True):
            relation = relation.append_column(name, pa.array(values))
        return relation


@dataclass
class KleeneDag:
    """Selected sets of one Kleene variable as paths of a DAG: an edge i -> j when j may follow i
    (later in time, NEXT/PREV conditions hold); a path starts where the FIRST conditions hold and
    may end wherever the LAST conditions hold. Counted by dynamic programming, enumerated by DFS,
    so the cost follows the output, not the 2^m subsets."""

    name: str
    rows: np.ndarray
    first_ok: np.ndarray
    last_ok: np.ndarray
    edge_from: np.ndarray
    edge_to: np.ndarray

    def _successors(self) -> list[list[int]]:
        succ: list[list[int]] = [[] for _ in range(self.rows.size)]
        for a, b in zip(self.edge_from.tolist(), self.edge_to.tolist(), strict=True):
            succ[a].append(b)
        return succ

    def count(self) -> int:
        succ = self._successors()
        paths = [0] * self.rows.size
        for f in range(self.rows.size - 1, -1, -1):
            paths[f] = int(self.last_ok[f]) + sum(paths[g] for g in succ[f])
        return sum(paths[f] for f in range(self.rows.size) if self.first_ok[f])

    def paths(self) -> Iterator[dict[str, list[int]]]:
        succ = self._successors()
        rows = self.rows.tolist()

        def walk_from(path: list[int]) -> Iterator[list[int]]:
            last = path[-1]
            if self.last_ok[last]:
                yield [rows[k] for k in path]
            for g in succ[last]:
                yield from walk_from([*path, g])

        for f in range(self.rows.size):
            if self.first_ok[f]:
                for p in walk_from([f]):
                    yield {self.name: p}


def _maximal(choices: list[dict[str, list[int]]]) -> list[dict[str, list[int]]]:
    sets = [{k: set(v) for k, v in c.items()} for c in choices]
    out = []
    for i, c in enumerate(sets):
        contained = any(j != i and all(c[k] <= d[k] for k in c) and any(c[k] < d[k] for k in c)
                        for j, d in enumerate(sets))
        if not contained:
            out.append(choices[i])
    return out
