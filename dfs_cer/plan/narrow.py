"""The compute node's side of per-node dual filtering: what it knows of each node's candidates
(their slices and value hashes, :class:`~dfs_cer.filters.points.Points`) and the exact steps
it takes on them without another round trip.

A candidate of a variable ``v`` (one every match holds) can be in a match only if, for every
other such variable ``u``, some candidate of ``u`` lies within the window of it, on the side
the pattern puts ``u`` (before, after, or either), with the same value in every equality
between them that ``v``'s rows must satisfy. :meth:`Narrow.prune` applies these pairwise
checks until nothing changes (each pass can only remove candidates, so it ends); a slice
grid coarser than time and hash collisions only keep candidates, never drop one, so no match
is lost. What survives gives the interval set (:meth:`Narrow.runs`) and each node's own
slices (:meth:`Narrow.node_runs`), the only time a final pull needs to ask that node for.

Pure numpy: no I/O.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from dfs_cer.filters import IntervalSet, join_kind
from dfs_cer.filters.points import SLICES_PER_WINDOW, Points, SliceRuns, slice_ids
from dfs_cer.query import Analysis, Role
from dfs_cer.query.analyze import Equality

#: slice ids stay below this (their sums and differences stay inside int64)
MAX_SLICE = 1 << 61
#: the most passes of pairwise checks (each removes candidates; real queries settle in 2-3)
MAX_PASSES = 8


@dataclass(frozen=True, slots=True)
class Grid:
    """Slices of ``quantum`` time units from ``base``; two times at most a window apart lie at
    most ``reach`` slices apart."""

    base: int
    quantum: int
    reach: int

    @classmethod
    def of(cls, base: int, window: int, top: int | None = None) -> Grid:
        """The grid from ``base`` (the earliest time) for ``window``; with ``top`` (the latest
        time) slices are coarsened where the span would give slice ids beyond :data:`MAX_SLICE`
        (times across most of int64's range: a coarser grid only keeps more)."""
        quantum = max(1, -(-int(window) // SLICES_PER_WINDOW))
        if top is not None:
            quantum = max(quantum, -(-(int(top) - int(base) + 1) // MAX_SLICE))
        return cls(int(base), quantum, int(window) // quantum + 1)

    def slices(self, ts: np.ndarray) -> np.ndarray:
        return slice_ids(ts, self.base, self.quantum)

    def wire(self, runs: IntervalSet) -> SliceRuns:
        return SliceRuns(self.base, self.quantum, runs)

    def role_offsets(self, role: Role) -> tuple[int, int]:
        """Eq. 1 in slices: the slices a match may cover around a candidate of this role."""
        r = self.reach
        return {Role.HEAD: (0, r), Role.TAIL: (-r, 0)}.get(role, (-r, r))


@dataclass
class Variable:
    """One variable's collected points, per node, and which of them are still alive."""

    name: str
    columns: tuple[tuple[str, int], ...]
    points: dict[int, Points] = field(default_factory=dict)
    alive: dict[int, np.ndarray] = field(default_factory=dict)

    def add(self, node: int, points: Points) -> None:
        self.points[node] = points
        self.alive[node] = np.ones(len(points), bool)

    def count(self) -> int:
        return int(sum(int(a.sum()) for a in self.alive.values()))

    def slices(self) -> np.ndarray:
        parts = [p.slices[self.alive[i]] for i, p in self.points.items()]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def column(self, hashed: tuple[str, int]) -> np.ndarray:
        """Alive points' hashes of a (column, kind), in the order of :meth:`slices`."""
        k = self.columns.index(hashed)
        parts = [p.hashes[k][self.alive[i]] for i, p in self.points.items()]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)


class Narrow:
    """What the compute node has collected of a query's candidates (see the module docstring)."""

    def __init__(self, analysis: Analysis, grid: Grid, schema: pa.Schema) -> None:
        self.analysis, self.grid, self.schema = analysis, grid, schema
        self.variables: dict[str, Variable] = {}
        #: width of the value hashes the nodes send (bits)
        self.bits = 8
        descending = analysis.query.recognize.order_by[0].descending
        self._ordered = not descending

    def _hash_of(self, e: Equality, name: str) -> tuple[str, int]:
        """The column of ``name`` in ``e`` and the key kind both sides are hashed as."""
        mine, theirs = e.column_of(name), e.column_of(e.other(name))
        return mine, int(join_kind(self.schema.field(mine).type, self.schema.field(theirs).type))

    @functools.cached_property
    def partition_columns(self) -> tuple[tuple[str, int], ...]:
        """(column, key kind) of each PARTITION BY column a key can be hashed of: every row of a
        match holds the same values there, so two variables' candidates of one match have equal
        hashes (NULL, hashed 0, with NULL: PARTITION BY groups them)."""
        out: list[tuple[str, int]] = []
        names = {n.lower(): n for n in self.schema.names}
        for c in self.analysis.query.recognize.partition_by:
            column = names.get(c.lower())
            if column is None:
                continue
            kind = self.schema.field(column).type
            if pa.types.is_dictionary(kind) and not (
                pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
            ):
                continue
            try:
                pair = (column, int(join_kind(kind, kind)))
            except TypeError:  # a type no key hashes: the partition is not checked
                continue
            if pair not in out:
                out.append(pair)
        return tuple(out)

    def hashed_columns(self, name: str) -> tuple[tuple[str, int], ...]:
        """(column, key kind) of ``name`` in each equality with another variable, then of each
        PARTITION BY column: what its points carry hashes of."""
        cols: list[tuple[str, int]] = []
        for e in self.analysis.equalities:
            if name in (e.left_variable, e.right_variable) and e.other(name) != name:
                c = self._hash_of(e, name)
                if c not in cols:
                    cols.append(c)
        for c in self.partition_columns:
            if c not in cols:
                cols.append(c)
        return tuple(cols)

    def add(self, name: str, node: int, points: Points) -> None:
        v = self.variables.setdefault(name, Variable(name, self.hashed_columns(name)))
        v.add(node, points)

    @property
    def required(self) -> list[str]:
        """Collected variables every match holds (their candidates shrink the interval set)."""
        return [n for n in self.variables if self.analysis.variable(n).role in _FILTERING]

    def _reach(self, u: str, v: str) -> tuple[int, int]:
        """Slices of a ``u`` row relative to a ``v`` row of one match."""
        r = self.grid.reach
        before = self.analysis.precedes(u, v) if self._ordered else None
        return (-r, 0) if before else ((0, r) if before is False else (-r, r))

    def _equal_columns(self, u: str, v: str) -> list[tuple[tuple[str, int], tuple[str, int], bool]]:
        """The hashed columns (of u, of v) of the equalities every ``v`` row must satisfy with
        its ``u`` partner, each with whether NULL equals NULL there (a PARTITION BY column)."""
        out: list[tuple[tuple[str, int], tuple[str, int], bool]] = []
        for e in self.analysis.equalities:
            if {e.left_variable, e.right_variable} == {u, v} and self.analysis.constrains(e, v):
                pair = (self._hash_of(e, u), self._hash_of(e, v), False)
                if pair[:2] not in [p[:2] for p in out]:
                    out.append(pair)
        for c in self.partition_columns:
            if (c, c) not in [p[:2] for p in out]:
                out.append((c, c, True))
        return out

    def _check(self, u: str, v: str) -> np.ndarray:
        """Alive ``v`` points (in :meth:`Variable.slices` order) with a ``u`` partner."""
        U, V = self.variables[u], self.variables[v]
        su, sv = U.slices(), V.slices()
        lo, hi = self._reach(u, v)
        pairs = self._equal_columns(u, v)
        if not pairs:
            return _partnered(np.sort(su, kind="stable"), sv, lo, hi)
        hu = np.vstack([U.column(cu) for cu, _, _ in pairs])
        hv = np.vstack([V.column(cv) for _, cv, _ in pairs])
        strict = np.array([not nulls for _, _, nulls in pairs], bool)
        ok_v = np.all(hv[strict] != 0, axis=0)  # NULL equals nothing (but in PARTITION BY)
        ok_u = np.all(hu[strict] != 0, axis=0)
        hu, su = hu[:, ok_u], su[ok_u]
        # one key per combination of hashes (each under 2**16)
        both = np.hstack([hu, hv]).astype(np.int64)
        combined = both[0].copy()
        for row in both[1:]:
            combined = combined * 65_536 + row if len(pairs) <= 3 else combined * 31 + row
        smin = int(min(su.min(initial=0), sv.min(initial=0)))
        smax = int(max(su.max(initial=0), sv.max(initial=0)))
        stride = smax - smin + 2 * self.grid.reach + 1
        if len(pairs) <= 3 and 65_536 ** len(pairs) * stride < 2**62:
            ru, rv = combined[: su.size], combined[su.size :]  # the keys as they are
        else:  # ranked, so the keys stay small
            keys, inverse = np.unique(combined, return_inverse=True)
            if keys.size * stride >= 2**62:  # cannot key them: keep every point (exact)
                return np.ones(sv.size, bool)
            inverse = inverse.ravel()
            ru, rv = inverse[: su.size], inverse[su.size :]
        off = self.grid.reach - smin
        ku = np.sort(ru.astype(np.int64) * stride + su + off, kind="stable")
        kv = rv.astype(np.int64) * stride + sv + off
        return _partnered(ku, kv, lo, hi) & ok_v

    def _drop(self, name: str, keep: np.ndarray) -> int:
        """Apply a mask over the alive points of ``name``; the points dropped."""
        v, dropped, at = self.variables[name], 0, 0
        for i in v.points:
            alive = v.alive[i]
            idx = np.flatnonzero(alive)
            mine = keep[at : at + idx.size]
            at += idx.size
            alive[idx[~mine]] = False
            dropped += int((~mine).sum())
        return dropped

    def prune(self) -> int:
        """Pairwise checks until nothing changes (or :data:`MAX_PASSES`); the points dropped."""
        names, total = self.required, 0
        for _ in range(MAX_PASSES):
            dropped = 0
            for v in names:
                for u in names:
                    if u != v and self.variables[v].count():
                        dropped += self._drop(v, self._check(u, v))
            total += dropped
            if not dropped:
                break
        return total

    def runs(self) -> IntervalSet:
        """The interval set in slices: around every alive candidate of each required variable
        (Eq. 1 by its role), intersected over them."""
        out: IntervalSet | None = None
        for n in self.required:
            lo, hi = self.grid.role_offsets(self.analysis.variable(n).role)
            s = self.variables[n].slices()
            part = IntervalSet(s + lo, s + hi)
            out = part if out is None else out.intersection(part)
        return IntervalSet() if out is None else out

    def node_runs(self, node: int, within: IntervalSet) -> IntervalSet:
        """The slices of ``node``'s alive points of every collected variable inside ``within``
        (what that node's final pull needs, when every variable with candidates was collected)."""
        parts = [
            v.points[node].slices[v.alive[node]]
            for v in self.variables.values()
            if node in v.points
        ]
        s = np.sort(np.concatenate(parts), kind="stable") if parts else np.empty(0, np.int64)
        if s.size:  # each variable's slices came sorted: a stable (radix) sort merges them
            s = s[np.concatenate([[True], s[1:] != s[:-1]])]
            s = s[within.contains(s)]
        return IntervalSet(s, s)

    def keep_inside(self, within: IntervalSet) -> None:
        """Drop the points of every collected variable outside ``within`` (the optional ones have
        no pairwise check: their rows lie inside the interval set of a match)."""
        for v in self.variables.values():
            for i, p in v.points.items():
                v.alive[i] &= within.contains(p.slices)


_FILTERING = (Role.HEAD, Role.TAIL, Role.MIDDLE)


def _partnered(keys: np.ndarray, probes: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Whether each of ``probes`` has a key of (sorted) ``keys`` in [probe + lo, probe + hi].
    The probes are searched in sorted order (each search starts where the last ended: four
    times faster than in their own order, on a million points) and the answers put back."""
    order = np.argsort(probes, kind="stable")
    ordered = probes[order]
    found = np.searchsorted(keys, ordered + lo, "left") < np.searchsorted(
        keys, ordered + hi, "right"
    )
    out = np.empty(probes.size, bool)
    out[order] = found
    return out
