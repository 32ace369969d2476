"""Single-event variables bound by band joins (the lazy chain of Kolchinsky & Schuster): in
ascending order of candidate count, each step expands the partial matches with ``searchsorted``
time bounds and filters them with the conditions that just became evaluable, vectorised; then
partial matches with a qualifying negated event between their neighbours are dropped."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.events.saturate import MAX, MIN, minus, plus
from dfs_cer.match.cer.conditions import Gathered, check_condition, variables_of
from dfs_cer.match.cer.context import Context
from dfs_cer.match.cer.kernels import expand_pairs, expand_ranges
from dfs_cer.query.expr import Expr, Navigation, to_sql, walk

#: pairs of partial matches and candidates joined at once when a node's work bounds the run
CHUNK_PAIRS = 1 << 20


class BandJoin:
    """Every combination of the single-event variables' candidates (skip-till-any-match)."""

    def __init__(self, ctx: Context, join_order: tuple[str, ...] | None = None) -> None:
        self.ctx = ctx
        #: overrides the lazy order (any order gives the same matches)
        self.join_order = join_order

    def run(
        self, cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]]
    ) -> dict[str, np.ndarray]:
        singles = [it.name for it in self.ctx.items if not it.kleene and not it.negated]
        order = sorted(singles, key=lambda v: (cands[v].size, self.ctx.index[v]))
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
            block = count if self.ctx.work is None else CHUNK_PAIRS
            for start in range(0, count, block):
                self.ctx.check()
                some = {k: r[start : start + block] for k, r in bound.items()}
                lo_row, hi_row, t_lo, t_hi = self._bounds_for(
                    v, some, next(iter(some.values())).size
                )
                first, last = expand_ranges(lo_row, hi_row, t_lo, t_hi, cand, self.ctx.ts[cand])
                for a, b in self._chunks(last - first):
                    idx, rows = expand_pairs(first[a:b], last[a:b], cand)
                    if self.ctx.work is not None:
                        self.ctx.hold(kept + rows.size * (2 * width + 32))
                    part = {k: r[a:b][idx] for k, r in some.items()}
                    if self.ctx.unordered:  # a conjunction binds distinct events
                        distinct = np.ones(rows.size, bool)
                        for r in part.values():
                            distinct &= r != rows
                        part = {k: r[distinct] for k, r in part.items()}
                        rows = rows[distinct]
                    part[v] = rows
                    pieces.append(self._apply(part, done, v, dependent))
                    kept += pieces[-1][v].size * width
            bound = (
                pieces[0]
                if len(pieces) == 1
                else {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
            )
            self.ctx.hold(kept)
        return self._negations(bound, cands, dependent)

    def _bounds_for(
        self, v: str, bound: dict[str, np.ndarray], count: int
    ) -> tuple[np.ndarray, ...]:
        pos = self.ctx.index[v]
        t_lo = np.full(count, MIN, np.int64)
        t_hi = np.full(count, MAX, np.int64)
        any_row = next(iter(bound.values()))
        # the window's bounds saturate (times may sit anywhere in int64: past its end every time
        # on that side qualifies); "at least tie after t" past the end qualifies none
        none = np.zeros(count, bool)
        for other, rows in bound.items():
            t = self.ctx.ts[rows]
            before = self.ctx.index[other] < pos
            if not self.ctx.unordered:  # equal times never chain across variables
                if before:
                    t_lo = np.maximum(t_lo, plus(t, self.ctx.tie))
                    none |= t > MAX - self.ctx.tie
                else:
                    t_hi = np.minimum(t_hi, minus(t, self.ctx.tie))
                    none |= t < MIN + self.ctx.tie
            if self.ctx.window is not None:
                t_lo = np.maximum(t_lo, minus(t, self.ctx.window))
                t_hi = np.minimum(t_hi, plus(t, self.ctx.window))
        t_lo[none], t_hi[none] = MAX, MIN
        part = self.ctx.row_part[any_row]
        return self.ctx.bounds[part], self.ctx.bounds[part + 1], t_lo, t_hi

    def _chunks(self, counts: np.ndarray) -> Iterator[tuple[int, int]]:
        """Slices of the partial matches whose pairs (``counts`` each) make bounded chunks (one
        slice when no work bounds the run), the work checked before each."""
        if self.ctx.work is None or counts.size == 0:
            yield 0, counts.size
            return
        ends = np.cumsum(counts)
        a = 0
        while a < counts.size:
            self.ctx.work.check()
            b = int(np.searchsorted(ends, (ends[a - 1] if a else 0) + CHUNK_PAIRS, side="right"))
            b = max(b, a + 1)
            yield a, b
            a = b

    def _negations(
        self,
        bound: dict[str, np.ndarray],
        cands: dict[str, np.ndarray],
        dependent: dict[str, list[Expr]],
    ) -> dict[str, np.ndarray]:
        """Drop partial matches with a qualifying negated event between their neighbours."""
        for it in self.ctx.items:
            count = next(iter(bound.values())).size
            if not it.negated or count == 0:
                continue
            pos = self.ctx.index[it.name]
            prev = next((o.name for o in reversed(self.ctx.items[:pos]) if not o.negated), None)
            nxt = next((o.name for o in self.ctx.items[pos + 1 :] if not o.negated), None)
            times = np.stack([self.ctx.ts[r] for r in bound.values()])
            t_lo = (
                plus(self.ctx.ts[bound[prev]], self.ctx.tie)
                if prev
                else minus(times.max(axis=0), self.ctx.window or 0)
            )
            t_hi = (
                minus(self.ctx.ts[bound[nxt]], self.ctx.tie)
                if nxt
                else plus(times.min(axis=0), self.ctx.window or 0)
            )
            # no time lies strictly after int64's end (or before its start): nothing between
            none = np.zeros(count, bool)
            if prev:
                none |= self.ctx.ts[bound[prev]] > MAX - self.ctx.tie
            if nxt:
                none |= self.ctx.ts[bound[nxt]] < MIN + self.ctx.tie
            t_lo, t_hi = np.where(none, MAX, t_lo), np.where(none, MIN, t_hi)
            if self.ctx.window is None and (prev is None or nxt is None):
                raise UnsupportedFeatureError(
                    "a leading or trailing negation needs a WITHIN window",
                    clause="PATTERN",
                    code="unsupported",
                )
            anchor = next(iter(bound.values()))
            part = self.ctx.row_part[anchor]
            cand = cands[it.name]
            idx, rows = self.ctx.expand(
                self.ctx.bounds[part], self.ctx.bounds[part + 1], t_lo, t_hi, cand, len(bound)
            )
            if rows.size == 0:
                continue
            view = {k: r[idx] for k, r in bound.items()}
            view[it.name] = rows
            hit = np.ones(rows.size, bool)
            for p in dependent[it.name]:
                hit &= check_condition(
                    p, Gathered(self.ctx.table, view, it.name, self.ctx.kleene), rows.size
                )
            killed = np.zeros(count, bool)
            killed[idx[hit]] = True
            bound = {k: r[~killed] for k, r in bound.items()}
        return bound

    def _apply(
        self,
        bound: dict[str, np.ndarray],
        done: set[str],
        newest: str,
        dependent: dict[str, list[Expr]],
    ) -> dict[str, np.ndarray]:
        count = next(iter(bound.values())).size
        if count == 0:
            return bound
        keep = np.ones(count, bool)
        for owner, parts in dependent.items():
            if owner in self.ctx.kleene or owner in self.ctx.negated:
                continue
            for p in parts:
                refs = variables_of(p) | {owner}
                if refs & self.ctx.negated:
                    raise UnsupportedFeatureError(
                        f"{to_sql(p)} refers to a negated variable",
                        clause=f"DEFINE {owner}",
                        hint="put conditions on the negated variable in its own DEFINE",
                        code="unsupported",
                    )
                if refs & self.ctx.kleene or not refs <= done or newest not in refs:
                    continue
                if any(isinstance(x, Navigation) and x.kind.physical for x in walk(p)):
                    raise UnsupportedFeatureError(
                        f"{to_sql(p)}: PREV/NEXT of a single-event variable in a CER condition",
                        clause=f"DEFINE {owner}",
                        code="unsupported",
                    )
                keep &= check_condition(
                    p, Gathered(self.ctx.table, bound, owner, self.ctx.kleene), count
                )
        if not keep.all():
            bound = {k: r[keep] for k, r in bound.items()}
        return bound
