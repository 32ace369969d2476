"""The CER engine's view of conditions: the variables a condition names, the column values of
bound variables for a batch of partial matches (:class:`Gathered`, the expression resolver), and
where a condition holds over such a batch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.match.arrow_eval import _broadcast, evaluate
from dfs_cer.match.columns import column_of
from dfs_cer.query.expr import Column, Expr, Navigation, NavKind, to_sql, walk


def variables_of(e: Expr) -> set[str]:
    """The pattern variables ``e`` names (``X.col`` references)."""
    return {n.variable for n in walk(e) if isinstance(n, Column) and n.variable is not None}


class Gathered:
    """Column values of bound variables for a batch of partial matches (the expression resolver)."""

    def __init__(
        self,
        table: pa.Table,
        rows: dict[str, np.ndarray],
        owner: str,
        kleene: set[str],
        kleene_rows: dict[str, dict[tuple[NavKind, int], np.ndarray]] | None = None,
        columns: dict[str, pa.Array] | None = None,
    ) -> None:
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
            if (
                key in ((NavKind.FIRST, 0), (NavKind.LAST, 0), (NavKind.NEXT, 1), (NavKind.PREV, 1))
                and var in self.kleene_rows
            ):
                # per-element views prepared by the Kleene enumeration
                return self.column(x.operand.name).take(pa.array(self.kleene_rows[var][key]))
            if x.kind in (NavKind.FIRST, NavKind.LAST) and x.offset == 0 and var not in self.kleene:
                return self.column(x.operand.name).take(pa.array(self.rows[var]))
        raise UnsupportedFeatureError(
            f"{to_sql(x)} in a CER condition",
            clause="DEFINE",
            hint="CER conditions use columns, FIRST/LAST, and NEXT/PREV of a Kleene "
            "variable inside its own condition",
            code="unsupported",
        )


def check_condition(e: Expr, resolve: Gathered, n: int) -> np.ndarray:
    """Where condition ``e`` holds (TRUE, not NULL) for ``n`` partial matches."""
    out = _broadcast(evaluate(e, resolve, n), n)
    return np.asarray(pc.fill_null(out, False).to_numpy(zero_copy_only=False), bool)
