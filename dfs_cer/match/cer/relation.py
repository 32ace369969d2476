"""The CER engine's result: matches in canonical order (the order MATCH_NUMBER() counts in) and
the ONE ROW PER MATCH relation with its measures (and match ids, when asked for)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.match.arrow_eval import _broadcast, evaluate
from dfs_cer.match.cer.conditions import Gathered
from dfs_cer.match.cer.context import Context
from dfs_cer.match.columns import column_of
from dfs_cer.query.expr import Aggregate, Classifier, Expr, MatchNumber, NavKind, to_sql


class Assembler:
    """Orders one engine's matches and builds its relation; ``row_hash`` (the events' identity
    hashes) adds ``__match_id``, ``__match_start`` and ``__match_end``."""

    def __init__(self, ctx: Context, mr: object, row_hash: np.ndarray | None) -> None:
        self.ctx = ctx
        self.mr = mr
        self.row_hash = row_hash

    def keys(self, bound: dict[str, np.ndarray], kleene: dict[str, list[list[int]]]) -> np.ndarray:
        """(positions, matches): each positive item's row (a Kleene set's first), in pattern
        order."""
        count = next(iter(bound.values())).size if bound else len(next(iter(kleene.values()), []))
        rows = [
            bound[i.name] if i.name in bound else np.array([s[0] for s in kleene[i.name]], np.int64)
            for i in self.ctx.items
            if i.name in bound or i.name in kleene
        ]
        return np.stack(rows) if rows else np.zeros((0, count), np.int64)

    def sorted(
        self, bound: dict[str, np.ndarray], kleene: dict[str, list[list[int]]]
    ) -> tuple[dict[str, np.ndarray], dict[str, list[list[int]]]]:
        """Matches in canonical order (by each variable's first event in pattern order), the
        order MATCH_NUMBER() counts in."""
        keys = self.keys(bound, kleene)
        if keys.shape[1] < 2:
            return bound, kleene
        order = np.lexsort(tuple(reversed(list(keys))))
        return {k: v[order] for k, v in bound.items()}, {
            k: [v[i] for i in order] for k, v in kleene.items()
        }

    def relation(
        self,
        bound: dict[str, np.ndarray],
        kleene: dict[str, list[list[int]]],
        numbers: np.ndarray | None = None,
    ) -> pa.Table:
        """ONE ROW PER MATCH (matches already in canonical order): partitioning columns, then the
        measures (FIRST/LAST of variables, CLASSIFIER() of the last event, MATCH_NUMBER()),
        evaluated per match. ``numbers``: MATCH_NUMBER() of each match when several branches
        share one numbering (default: counted here, per partition)."""
        from dfs_cer.query.model import MatchRecognize

        mr = self.mr
        assert isinstance(mr, MatchRecognize)
        names = [it.name for it in self.ctx.items]
        positive = [
            it.name for it in self.ctx.items if not it.negated
        ]  # negated items label no row
        count = next(iter(bound.values())).size if bound else len(next(iter(kleene.values()), []))
        first_rows = {k: np.array([s[0] for s in v], np.int64) for k, v in kleene.items()}
        last_rows = {k: np.array([s[-1] for s in v], np.int64) for k, v in kleene.items()}
        for k, rows in bound.items():
            first_rows.setdefault(k, rows)
            last_rows.setdefault(k, rows)
        sizes = {k: np.array([len(s) for s in v], np.int64) for k, v in kleene.items()}
        for (
            sub
        ) in mr.subsets:  # SUBSET U = (A, B): its first and last rows among the members present
            members = [m for m in sub.variables if m in first_rows]
            if members:
                first_rows[sub.name] = np.min(np.stack([first_rows[m] for m in members]), axis=0)
                last_rows[sub.name] = np.max(np.stack([last_rows[m] for m in members]), axis=0)
                sizes[sub.name] = np.sum(
                    np.stack([sizes.get(m, np.ones(count, np.int64)) for m in members]), axis=0
                )
        columns: dict[str, pa.Array] = {}
        anchor = first_rows.get(positive[0]) if positive else None
        for c in mr.partition_by:
            col = self.ctx.table.column(column_of(self.ctx.table, c)).combine_chunks()
            columns[c] = col.take(pa.array(anchor if anchor is not None else np.zeros(0, np.int64)))
        view = dict(bound)
        view.update({k: v for k, v in last_rows.items() if k not in bound})
        nav = {
            k: {(NavKind.FIRST, 0): first_rows[k], (NavKind.LAST, 0): last_rows[k]}
            for k in first_rows
            if k in kleene or k not in bound
        }
        resolver = Gathered(self.ctx.table, view, positive[-1], set(), nav)
        # CLASSIFIER(): the label of the match's last row (by time: a conjunction's items may come
        # in any order)
        ends = (
            np.stack([last_rows[k] for k in positive])
            if positive and count
            else np.zeros((1, 0), np.int64)
        )
        last_label = (
            np.array(positive, dtype=object)[np.argmax(ends, axis=0)]
            if count
            else np.array([], object)
        )
        given = numbers
        numbers = np.arange(1, count + 1) if given is None else given
        if given is None and mr.partition_by and count:
            part = self.ctx.row_part[anchor]
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
                raise UnsupportedFeatureError(
                    f"{to_sql(x)} in MEASURES under ALL MATCHES",
                    clause="MEASURES",
                    hint="the CER engine's measures take count(X.*), FIRST/LAST of "
                    "variables, CLASSIFIER() and MATCH_NUMBER()",
                    code="unsupported",
                )
            if isinstance(x, Aggregate):
                var = getattr(x.args[0], "variable", None)
                if var in sizes:
                    return pa.array(sizes[var], pa.int64())
                if var is None:
                    return pa.array(
                        sum(
                            (sizes.get(k, np.ones(count, np.int64)) for k in positive),
                            np.zeros(count, np.int64),
                        ),
                        pa.int64(),
                    )
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
        relation = (
            pa.table(columns) if columns else pa.table({"_": pa.array(np.zeros(count))}).drop(["_"])
        )
        return self._with_ids(relation, bound, kleene, names, count)

    def _with_ids(
        self,
        relation: pa.Table,
        bound: dict[str, np.ndarray],
        kleene: dict[str, list[list[int]]],
        names: list[str],
        count: int,
    ) -> pa.Table:
        if self.row_hash is None:
            return relation
        from dfs_cer.events import identity

        present = [n for n in names if n in bound or n in kleene]
        if kleene:  # variable-length matches: flatten per match, variables in pattern order
            per_match = [
                [
                    (r, v)
                    for v, n in enumerate(present)
                    for r in (kleene[n][i] if n in kleene else [int(bound[n][i])])
                ]
                for i in range(count)
            ]
            rows = np.array([r for m in per_match for r, _ in m], np.int64)
            labels = np.array([v for m in per_match for _, v in m], np.int64)
            sizes = np.array([len(m) for m in per_match], np.int64)
        else:
            stacked = (
                np.stack([bound[n] for n in present], axis=1)
                if present
                else np.zeros((count, 0), np.int64)
            )
            rows = stacked.reshape(-1)
            labels = np.tile(np.arange(len(present)), count)
            sizes = np.full(count, len(present), np.int64)
        label_hash = identity.label_hashes(present)
        ids = identity.match_ids(
            self.row_hash[rows], label_hash[labels], sizes, np.zeros(count, np.uint64)
        )
        times = self.ctx.ts[rows]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        first = np.minimum.reduceat(times, starts) if count else np.zeros(0, np.int64)
        last = np.maximum.reduceat(times, starts) if count else np.zeros(0, np.int64)
        for name, values in zip(identity.ID_COLUMNS, (ids, first, last), strict=True):
            relation = relation.append_column(name, pa.array(values))
        return relation
