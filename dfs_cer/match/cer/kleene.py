"""Kleene sets: every choice of the sets of the Kleene variables for a partial match of the
single-event variables (skip-till-any-match), counted exactly where the shape allows, else
enumerated lazily; a single Kleene variable whose conditions relate consecutive, first or last
elements is enumerated as the paths of a DAG (:class:`KleeneDag`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from dfs_cer.events.saturate import after, minus, plus
from dfs_cer.events.saturate import before as earlier
from dfs_cer.match.cer.conditions import Gathered, check_condition, variables_of
from dfs_cer.match.cer.context import Context
from dfs_cer.query.expr import Column, Expr, Navigation, NavKind, walk


class KleeneSets:
    """The Kleene sets of partial matches under a selection strategy and Kleene mode (``"all"``
    subsets or only ``"maximal"`` ones)."""

    def __init__(self, ctx: Context, selection: str, kleene_mode: str) -> None:
        self.ctx = ctx
        self.selection = selection
        self.kleene_mode = kleene_mode

    def choices(
        self,
        bound: dict[str, np.ndarray],
        cands: dict[str, np.ndarray],
        dependent: dict[str, list[Expr]],
        i: int,
    ) -> Iterator[dict[str, list[int]]]:
        """Every choice of Kleene sets for partial match ``i`` (lazily)."""
        set_conds = self.set_conditions(dependent)
        if set_conds:
            dag = self._dag(bound, cands, dependent, i, set_conds)
            if dag is not None:
                return dag.paths()
        singles, eligible, p0, p1 = self._eligible(bound, cands, dependent, i)
        return self._combine(eligible, singles, dependent, p0, p1)

    def count(
        self,
        bound: dict[str, np.ndarray],
        cands: dict[str, np.ndarray],
        dependent: dict[str, list[Expr]],
        i: int,
    ) -> int | None:
        """Exact number of Kleene choices for partial match ``i`` without enumerating, or None
        when the shape needs enumeration (conditions over the set, Kleene variables at both
        ends)."""
        set_conds = self.set_conditions(dependent)
        if set_conds:
            dag = self._dag(bound, cands, dependent, i, set_conds)
            return None if dag is None else dag.count()
        _, eligible, _, _ = self._eligible(bound, cands, dependent, i)
        kleene_items = [it for it in self.ctx.items if it.kleene]
        if any(not eligible[it.name] for it in kleene_items):
            return 0
        ends = [self.ctx.items[0].kleene, self.ctx.items[-1].kleene]
        if all(ends) and len(kleene_items) > 1:
            return None
        if self.kleene_mode == "maximal":
            return None
        total = 1
        idx = 0
        while idx < len(self.ctx.items):
            it = self.ctx.items[idx]
            if not it.kleene:
                idx += 1
                continue
            run = [it.name]
            while idx + len(run) < len(self.ctx.items) and self.ctx.items[idx + len(run)].kleene:
                run.append(self.ctx.items[idx + len(run)].name)
            if len(run) == 1:
                total *= 2 ** len(eligible[run[0]]) - 1
            elif len(run) == 2:
                a_t = np.array([self.ctx.ts[r] for r in eligible[run[0]]])
                b_t = np.array([self.ctx.ts[r] for r in eligible[run[1]]])
                count = 0
                for j, tb in enumerate(b_t):
                    before = int(np.sum(earlier(a_t, tb, self.ctx.tie)))
                    after = len(b_t) - j - 1
                    count += (2**before - 1) * 2**after
                total *= count
            else:
                return None
            idx += len(run)
        return total

    def _eligible(
        self,
        bound: dict[str, np.ndarray],
        cands: dict[str, np.ndarray],
        dependent: dict[str, list[Expr]],
        i: int,
    ) -> tuple[dict[str, int], dict[str, list[int]], int, int]:
        singles = {k: int(r[i]) for k, r in bound.items()}
        any_row = next(iter(singles.values()))
        p = self.ctx.row_part[any_row]
        p0, p1 = self.ctx.bounds[p], self.ctx.bounds[p + 1]
        times = [self.ctx.ts[r] for r in singles.values()]
        t_min, t_max = min(times), max(times)
        # eligible events per Kleene variable: between its single neighbours, within the window
        eligible: dict[str, list[int]] = {}
        for it in self.ctx.items:
            if not it.kleene:
                continue
            pos = self.ctx.index[it.name]
            lo = max(
                [self.ctx.ts[singles[o.name]] for o in self.ctx.items[:pos] if o.name in singles],
                default=None,
            )
            hi = min(
                [
                    self.ctx.ts[singles[o.name]]
                    for o in self.ctx.items[pos + 1 :]
                    if o.name in singles
                ],
                default=None,
            )
            c = cands[it.name]
            c = c[(c >= p0) & (c < p1)]
            t = self.ctx.ts[c]
            ok = np.ones(c.size, bool)
            if lo is not None:
                ok &= after(t, lo, self.ctx.tie)
            if hi is not None:
                ok &= earlier(t, hi, self.ctx.tie)
            if self.ctx.window is not None:
                ok &= (t >= minus(t_max, self.ctx.window)) & (t <= plus(t_min, self.ctx.window))
            rows = c[ok]
            # conditions on single elements (bare references, no NEXT/PREV/FIRST/LAST of the set)
            if rows.size:
                rows = self.element_filter(it.name, rows, singles, dependent)
            eligible[it.name] = rows.tolist()
        return singles, eligible, int(p0), int(p1)

    def element_filter(
        self, name: str, rows: np.ndarray, singles: dict[str, int], dependent: dict[str, list[Expr]]
    ) -> np.ndarray:
        keep = np.ones(rows.size, bool)
        for owner, parts in dependent.items():
            for p in parts:
                refs = variables_of(p) | {owner}
                navs = self.set_navigations(p, owner)
                if name not in refs or refs & self.ctx.kleene != {name} or navs:
                    continue
                if not refs - {name} <= set(singles):
                    continue
                view = {k: np.full(rows.size, v) for k, v in singles.items()}
                view[name] = rows
                keep &= check_condition(p, Gathered(self.ctx.table, view, owner, set()), rows.size)
        return rows[keep]

    def set_navigations(self, p: Expr, owner: str) -> list[Navigation]:
        """The navigations in ``p`` (a condition of ``owner``) that read a Kleene set: all but
        FIRST/LAST of a single-event variable, which is that event's value (``B.v >
        FIRST(A.v)`` filters B's events one by one, like ``B.v > A.v``)."""
        return [
            x
            for x in walk(p)
            if isinstance(x, Navigation)
            and not (
                x.kind in (NavKind.FIRST, NavKind.LAST)
                and x.offset == 0
                and isinstance(x.operand, Column)
                and (x.operand.variable or owner) not in self.ctx.kleene
            )
        ]

    def set_conditions(self, dependent: dict[str, list[Expr]]) -> list[tuple[str, Expr]]:
        out = []
        for owner, parts in dependent.items():
            for p in parts:
                refs = variables_of(p) | {owner}
                navs = self.set_navigations(p, owner)
                if refs & self.ctx.kleene and (navs or len(refs & self.ctx.kleene) > 1):
                    out.append((owner, p))
        return out

    def _dag(
        self,
        bound: dict[str, np.ndarray],
        cands: dict[str, np.ndarray],
        dependent: dict[str, list[Expr]],
        i: int,
        set_conds: list[tuple[str, Expr]],
    ) -> KleeneDag | None:
        """The "next" DAG of the only Kleene variable, when every condition over its set is a
        consecutive-pair (NEXT/PREV), first-element (FIRST) or last-element (LAST) condition."""
        kleene_items = [it.name for it in self.ctx.items if it.kleene]
        if len(kleene_items) != 1 or self.kleene_mode == "maximal":
            return None
        name = kleene_items[0]
        kinds = []
        for owner, p in set_conds:
            navs = self.set_navigations(p, owner)
            targets = {
                (x.operand.variable or owner) if isinstance(x.operand, Column) else None
                for x in navs
            }
            bare = [
                x
                for x in walk(p)
                if isinstance(x, Column)
                and (x.variable or owner) == name
                and not any(x is nv.operand for nv in navs)
            ]
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
                ok = check_condition(
                    p,
                    Gathered(self.ctx.table, views, owner, self.ctx.kleene, {name: {key: rows}}),
                    m,
                )
                if kind == "first":
                    first_ok &= ok
                else:
                    last_ok &= ok
            elif pair_i.size:
                cur, other = (
                    (rows[pair_i], rows[pair_j]) if kind == "next" else (rows[pair_j], rows[pair_i])
                )
                views = {k: np.full(pair_i.size, v) for k, v in singles.items()}
                views[name] = cur
                nav = {(NavKind.NEXT, 1) if kind == "next" else (NavKind.PREV, 1): other}
                resolve = Gathered(self.ctx.table, views, owner, self.ctx.kleene, {name: nav})
                pair_ok &= check_condition(p, resolve, pair_i.size)
        # strictly increasing time between consecutive selected events
        if pair_i.size:
            pair_ok &= after(self.ctx.ts[rows[pair_j]], self.ctx.ts[rows[pair_i]], self.ctx.tie)
        return KleeneDag(name, rows, first_ok, last_ok, pair_i[pair_ok], pair_j[pair_ok])

    def _combine(
        self,
        eligible: dict[str, list[int]],
        singles: dict[str, int],
        dependent: dict[str, list[Expr]],
        p0: int,
        p1: int,
    ) -> Iterator[dict[str, list[int]]]:
        kleene_items = [it.name for it in self.ctx.items if it.kleene]
        set_conds = self.set_conditions(dependent)

        def subsets(rows: list[int]) -> Iterable[list[int]]:
            return (
                list(c)
                for size in range(1, len(rows) + 1)
                for c in itertools.combinations(rows, size)
            )

        adjacent = any(a.kleene and b.kleene for a, b in itertools.pairwise(self.ctx.items))
        per_var: list[Iterable[list[int]]] = []
        for name in kleene_items:
            rows = eligible[name]
            if not rows:
                return
            if self.selection == "skip_till_next_match":
                per_var.append(
                    [rows[:k] for k in range(1, len(rows) + 1)]
                    if self.kleene_mode == "all"
                    else [rows]
                )
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
        valid = (
            s
            for s in valid
            if self._ordered(s, singles)
            and self._within(s, singles)
            and (not set_conds or self.sets_hold(s, singles, set_conds))
        )
        if maximal:
            yield from _maximal(list(valid))
        else:
            yield from valid

    def _within(self, sets: dict[str, list[int]], singles: dict[str, int]) -> bool:
        if self.ctx.window is None:
            return True
        everything = list(singles.values()) + [r for s in sets.values() for r in s]
        return bool(
            self.ctx.ts[max(everything)] <= plus(self.ctx.ts[min(everything)], self.ctx.window)
        )

    def _ordered(self, sets: dict[str, list[int]], singles: dict[str, int]) -> bool:
        last_t = None
        for it in self.ctx.items:
            rows = sets[it.name] if it.kleene else [singles[it.name]]
            t0, t1 = self.ctx.ts[rows[0]], self.ctx.ts[rows[-1]]
            if last_t is not None and not after(t0, last_t, self.ctx.tie):
                return False
            last_t = t1
        return True

    def sets_hold(
        self, sets: dict[str, list[int]], singles: dict[str, int], conds: list[tuple[str, Expr]]
    ) -> bool:
        """Does every condition over Kleene sets hold? A bare reference to a Kleene variable holds
        for every selected event, so a condition reading several sets holds for every
        combination of their events; NEXT/PREV read the neighbouring selected events of one set
        (the owner's, or the one a single-event variable's condition reads: :mod:`.rules`)."""
        for owner, p in conds:
            kleene_refs = sorted((variables_of(p) | {owner}) & self.ctx.kleene)
            navigated = owner if owner in self.ctx.kleene else kleene_refs[0]
            picks = dict(
                zip(
                    kleene_refs,
                    (
                        g.ravel()
                        for g in np.meshgrid(
                            *[np.arange(len(sets[k])) for k in kleene_refs], indexing="ij"
                        )
                    ),
                    strict=True,
                )
            )  # every combination of the sets' events, by position in each set
            m = picks[kleene_refs[0]].size
            views = {k: np.full(m, v) for k, v in singles.items()}
            nav_rows = {}
            nexts = prevs = np.full(m, -1)
            for k in kleene_refs:
                s = np.array(sets[k])
                views[k] = s[picks[k]]
                if k == navigated:
                    nexts = np.append(s[1:], -1)[picks[k]]
                    prevs = np.insert(s[:-1], 0, -1)[picks[k]]
                nav_rows[k] = {
                    (NavKind.FIRST, 0): np.full(m, s[0]),
                    (NavKind.LAST, 0): np.full(m, s[-1]),
                    (NavKind.NEXT, 1): nexts if k == navigated else np.full(m, -1),
                    (NavKind.PREV, 1): prevs if k == navigated else np.full(m, -1),
                }
            has_next = any(isinstance(x, Navigation) and x.kind == NavKind.NEXT for x in walk(p))
            has_prev = any(isinstance(x, Navigation) and x.kind == NavKind.PREV for x in walk(p))
            check_rows = np.ones(m, bool)
            if has_next:
                check_rows &= nexts >= 0
            if has_prev:
                check_rows &= prevs >= 0
            if not check_rows.any():
                continue
            safe = {
                k: {kk: np.where(vv >= 0, vv, 0) for kk, vv in d.items()}
                for k, d in nav_rows.items()
            }
            ok = check_condition(
                p, Gathered(self.ctx.table, views, owner, self.ctx.kleene, safe), m
            )
            if not ok[check_rows].all():
                return False
        return True


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
        contained = any(
            j != i and all(c[k] <= d[k] for k in c) and any(c[k] < d[k] for k in c)
            for j, d in enumerate(sets)
        )
        if not contained:
            out.append(choices[i])
    return out
