"""Skip-till-next-match: per start event, each later variable takes the next qualifying event;
a Kleene variable collects every qualifying event before the next variable's (all mode: each
prefix of that run)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.events.saturate import plus
from dfs_cer.match.cer.conditions import Gathered, check_condition, variables_of
from dfs_cer.match.cer.context import Context
from dfs_cer.match.cer.kleene import KleeneSets
from dfs_cer.query.expr import Expr


class NextMatch:
    """Skip-till-next-match over the candidates of each variable."""

    def __init__(self, ctx: Context, sets: KleeneSets, kleene_mode: str) -> None:
        self.ctx = ctx
        self.sets = sets  # the element and set conditions of Kleene variables
        self.kleene_mode = kleene_mode

    def run(
        self, cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]]
    ) -> tuple[dict[str, np.ndarray], list[dict[str, list[int]]]]:
        """Skip-till-next-match: per start event, each later variable takes the first qualifying
        event after the previous one; a Kleene variable starts at its first qualifying event and
        collects every qualifying event before the next variable's (all mode: each prefix)."""
        first = self.ctx.items[0]
        if first.kleene:
            raise UnsupportedFeatureError(
                "skip_till_next_match with a Kleene first variable",
                clause="PATTERN",
                hint="use skip_till_any_match with kleene='maximal'",
                code="unsupported",
            )
        if not self.ctx.kleene and not self.ctx.negated:
            return self._singles(cands, dependent)
        singles_out: dict[str, list[int]] = {it.name: [] for it in self.ctx.items if not it.kleene}
        sets_out: list[dict[str, list[int]]] = []
        for start in cands[first.name].tolist():
            p = self.ctx.row_part[start]
            p0, p1 = self.ctx.bounds[p], self.ctx.bounds[p + 1]
            chosen: dict[str, int] = {first.name: start}
            runs: dict[str, int] = {}
            cur_t = self.ctx.ts[start]
            ok = True
            for it in self.ctx.items[1:]:
                c = cands[it.name]
                c = c[(c >= p0) & (c < p1)]
                c = c[self.ctx.ts[c] > cur_t]
                found = None
                for r in c.tolist():
                    if self.ctx.window is not None and self.ctx.ts[r] > plus(
                        self.ctx.ts[start], self.ctx.window
                    ):
                        break
                    if it.kleene:
                        if self.sets.element_filter(it.name, np.array([r]), chosen, dependent).size:
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
                cur_t = self.ctx.ts[found]
            if not ok:
                continue
            sets: dict[str, list[int]] = {}
            for it in self.ctx.items:
                if not it.kleene:
                    continue
                k1 = runs[it.name]
                pos = self.ctx.index[it.name]
                nxt = next(
                    (chosen[o.name] for o in self.ctx.items[pos + 1 :] if not o.kleene), None
                )
                c = cands[it.name]
                c = c[(c >= k1) & (c < (nxt if nxt is not None else p1))]
                if self.ctx.window is not None:
                    c = c[self.ctx.ts[c] <= plus(self.ctx.ts[start], self.ctx.window)]
                c = self.sets.element_filter(it.name, c, chosen, dependent)
                sets[it.name] = c.tolist()
            if sets and not self.sets.sets_hold(sets, chosen, self.sets.set_conditions(dependent)):
                continue
            prefixes = [sets]
            if sets and self.kleene_mode == "all":
                if len(sets) != 1:
                    raise UnsupportedFeatureError(
                        "skip_till_next_match with several Kleene variables in all mode",
                        code="unsupported",
                    )
                name, rows = next(iter(sets.items()))
                prefixes = [{name: rows[:k]} for k in range(1, len(rows) + 1)]
            for pre in prefixes:
                for k, v in chosen.items():
                    singles_out[k].append(v)
                sets_out.append(pre)
        return {k: np.array(v, np.int64) for k, v in singles_out.items()}, sets_out

    def _singles(
        self, cands: dict[str, np.ndarray], dependent: dict[str, list[Expr]]
    ) -> tuple[dict[str, np.ndarray], list[dict[str, list[int]]]]:
        """Skip-till-next-match without Kleene variables, for every start event at once: each
        variable takes, per partial match, the first candidate after the previous variable's
        time (same partition, inside the window) for which every condition whose variables are
        all bound holds. Candidates are tried in rounds, one per partial match per round, with
        the conditions evaluated over the whole batch of partial matches (Arrow kernels)."""
        first = self.ctx.items[0].name
        starts = cands[first]
        n, size = self.ctx.ts.size, starts.size
        # the first row after each row's run of equal (partition, time): a later time or partition
        change = np.ones(n, bool)
        if n > 1:
            change[1:] = (self.ctx.row_part[1:] != self.ctx.row_part[:-1]) | (
                self.ctx.ts[1:] != self.ctx.ts[:-1]
            )
        run_starts = np.flatnonzero(change)
        after = np.append(run_starts[1:], n)[np.cumsum(change) - 1]
        ends = self.ctx.bounds[self.ctx.row_part[starts] + 1] if size else np.zeros(0, np.int64)
        start_ts = self.ctx.ts[starts]
        bound = {first: starts.astype(np.int64)}
        last = bound[first].copy()
        alive = np.arange(size)
        conditions = [
            (owner, p, variables_of(p) | {owner})
            for owner, parts in dependent.items()
            if owner not in self.ctx.kleene
            for p in parts
        ]
        done = {first}
        columns: dict[str, pa.Array] = {}
        for step, it in enumerate(self.ctx.items[1:]):
            now = done | {it.name}
            checks = [
                (owner, p)
                for owner, p, refs in conditions
                if refs <= now and (not refs <= done or step == 0)
            ]
            c = cands[it.name]
            found = np.full(alive.size, -1, np.int64)
            pos = np.searchsorted(c, after[last[alive]]) if alive.size else np.zeros(0, np.int64)
            pending = np.arange(alive.size)
            while pending.size:
                self.ctx.check()
                j = pos[pending]
                ok = j < c.size
                r = (
                    c[np.minimum(j, max(c.size - 1, 0))]
                    if c.size
                    else np.zeros(pending.size, np.int64)
                )
                who = alive[pending]
                ok &= r < ends[who]
                if self.ctx.window is not None:
                    ok &= self.ctx.ts[r] <= plus(start_ts[who], self.ctx.window)
                pending, r, who = pending[ok], r[ok], who[ok]
                if not pending.size:
                    break
                hold = np.ones(pending.size, bool)
                if checks:
                    rows = {k: v[who] for k, v in bound.items()}
                    rows[it.name] = r
                    for owner, p in checks:
                        resolve = Gathered(
                            self.ctx.table, rows, owner, self.ctx.kleene, columns=columns
                        )
                        hold &= check_condition(p, resolve, pending.size)
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

    def _conditions_hold(
        self, bound: dict[str, np.ndarray], done: set[str], dependent: dict[str, list[Expr]]
    ) -> bool:
        for owner, parts in dependent.items():
            if owner in self.ctx.kleene:
                continue
            for p in parts:
                refs = variables_of(p) | {owner}
                if refs & self.ctx.kleene or not refs <= done:
                    continue
                if not check_condition(
                    p, Gathered(self.ctx.table, bound, owner, self.ctx.kleene), 1
                )[0]:
                    return False
        return True
