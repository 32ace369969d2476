"""Matching situations by Allen relations: a multi-way interval join.

Symbols are joined one at a time, starting from the one with the fewest situations and always
moving to a symbol related to one already bound (no cross products unless the pattern is
disconnected), fewest situations first (exact counts, as offline data allows). Candidates for
the next symbol come from binary searches (each relation of the driving constraint is a range
of the other symbol's starts and ends; the relations of one pair are disjoint, so the ranges
never overlap); every other constraint to bound symbols and the window then filter them,
vectorised over all partial matches of all partitions at once.
"""

from __future__ import annotations

import numpy as np

from dfs_cer.situations.allen import INVERSE, SELECTIVITY, holds, search_range
from dfs_cer.situations.derive import Derived
from dfs_cer.situations.model import Constraint


def join_order(counts: dict[str, int], constraints: tuple[Constraint, ...]) -> list[str]:
    """Fewest situations first, then always a symbol related to a bound one (fewest first)."""
    order: list[str] = []
    left = set(counts)
    while left:
        related = {
            n for c in constraints for a, n in ((c.left, c.right), (c.right, c.left)) if a in order
        } & left
        pool = related or left
        nxt = min(pool, key=lambda n: (counts[n], n))
        order.append(nxt)
        left.remove(nxt)
    return order


def _oriented(c: Constraint, bound: str) -> tuple[str, ...]:
    """The constraint's relations read from ``bound``'s side (``bound r other``)."""
    return c.relations if c.left == bound else tuple(INVERSE[r] for r in c.relations)


def match(
    situations: dict[str, Derived],
    constraints: tuple[Constraint, ...],
    window: int | None,
    order: list[str] | None = None,
) -> dict[str, np.ndarray]:
    """Every assignment of one situation per symbol (same partition) meeting all constraints,
    with max(te) - min(ts) <= window; returns, per symbol, indices into its situations."""
    names = list(situations)
    order = order or join_order({n: len(s) for n, s in situations.items()}, constraints)
    ends = (
        np.concatenate([np.concatenate([s.ts, s.te]) for s in situations.values()])
        if names
        else np.zeros(0)
    )
    values = np.unique(ends)
    stride = values.size + 2

    def rank(x: np.ndarray) -> np.ndarray:
        return np.searchsorted(values, x).astype(np.int64) + 1

    keys = {
        n: (
            s.part.astype(np.int64) * stride + rank(s.ts),
            s.part.astype(np.int64) * stride + rank(s.te),
        )
        for n, s in situations.items()
    }
    first = order[0]
    bound: dict[str, np.ndarray] = {first: np.arange(len(situations[first]), dtype=np.int64)}
    lo = situations[first].ts.copy()
    hi = situations[first].te.copy()
    if window is not None:
        ok = hi - lo <= window
        bound = {k: v[ok] for k, v in bound.items()}
        lo, hi = lo[ok], hi[ok]
    for y in order[1:]:
        sy = situations[y]
        related = [
            c
            for c in constraints
            if y in (c.left, c.right) and ({c.left, c.right} - {y}) <= set(bound)
        ]
        rows = len(next(iter(bound.values())))
        if related:
            drive = min(related, key=lambda c: sum(SELECTIVITY[r] for r in c.relations))
            x = drive.left if drive.right == y else drive.right
            sx = situations[x].take(bound[x])
            a_part = sx.part.astype(np.int64)
            parts_r, parts_c = [], []
            for rel in _oriented(drive, x):
                f, last = search_range(
                    rel, a_part, rank(sx.ts), rank(sx.te), keys[y][0], keys[y][1], stride
                )
                r, c = _expand(f, last)
                parts_r.append(r)
                parts_c.append(c)
            row = np.concatenate(parts_r) if parts_r else np.zeros(0, np.int64)
            cand = np.concatenate(parts_c) if parts_c else np.zeros(0, np.int64)
        else:  # no relation to the bound symbols: every situation of y in the same partition
            p = situations[first].part[bound[first]].astype(np.int64)
            starts = np.searchsorted(sy.part, p, side="left")
            stops = np.searchsorted(sy.part, p, side="right")
            row, cand = _expand(starts, stops)
        keep = np.ones(row.size, bool)
        for con in related:
            other = con.left if con.right == y else con.right
            so = situations[other]
            oi = bound[other][row]
            hit = np.zeros(row.size, bool)
            for rel in _oriented(con, other):
                hit |= holds(rel, so.ts[oi], so.te[oi], sy.ts[cand], sy.te[cand])
            keep &= hit
        new_lo = np.minimum(lo[row], sy.ts[cand])
        new_hi = np.maximum(hi[row], sy.te[cand])
        if window is not None:
            keep &= new_hi - new_lo <= window
        row, cand = row[keep], cand[keep]
        bound = {k: v[row] for k, v in bound.items()}
        bound[y] = cand
        lo, hi = new_lo[keep], new_hi[keep]
        if rows and not row.size:
            break
    if len(bound) < len(names):
        return {n: np.zeros(0, np.int64) for n in names}
    return {n: bound[n] for n in names}


def _expand(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i, j) for j in [first[i], last[i])."""
    counts = np.maximum(last - first, 0)
    total = int(counts.sum())
    row = np.repeat(np.arange(first.size, dtype=np.int64), counts)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    return row, first[row] + (np.arange(total, dtype=np.int64) - offsets)
