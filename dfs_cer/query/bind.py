"""Bind a query's column names to a schema once: every later stage (pushed-down filters, join
filters, both engines, storage nodes) sees the data's own spelling.

Column names match the data case-insensitively when there is no exact match (``A.TYPE`` binds
to a column ``type``); a name with no match, or several case-insensitive ones, is an error with
a suggestion. Variable names, measure names and the outer query are untouched.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import TYPE_CHECKING

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.expr import Column, Expr, transform, walk
from dfs_cer.query.root import Query
from dfs_cer.query.types import check_types

if TYPE_CHECKING:
    import pyarrow as pa


def resolve_column(name: str, schema: pa.Schema, clause: str, bare: bool = False) -> str:
    """The schema's spelling of column ``name`` (exact match first, then case-insensitive).
    ``bare``: the name stands alone in an expression, where a value someone forgot to quote
    reads as a column (``origin = JFK``): the error says how to quote it."""
    names = list(schema.names)
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    if len(folded) > 1:
        raise QueryValidationError(
            f"column {name} is ambiguous: the data has {', '.join(folded)}",
            clause=clause,
            hint="quote the name with the data's exact case",
            code="ambiguous-column",
        )
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"columns: {', '.join(names[:20])}"
    if bare:
        hint += " (a text value is quoted: '" + name.replace("'", "''") + "')"
    raise QueryValidationError(
        f"column {name} does not exist", clause=clause, hint=hint, code="unknown-column"
    )


def check_columns(query: Query, schema: pa.Schema) -> None:
    """Raise QueryValidationError for the first column the schema does not have."""
    mr = query.recognize
    for c in mr.partition_by:
        resolve_column(c, schema, "PARTITION BY")
    for s in mr.order_by:
        resolve_column(s.column, schema, "ORDER BY")
    for d in mr.definitions:
        for n in walk(d.condition):
            if isinstance(n, Column):
                resolve_column(n.name, schema, f"DEFINE {d.variable}", n.variable is None)
    for m in mr.measures:
        for n in walk(m.expr):
            if isinstance(n, Column):
                resolve_column(n.name, schema, f"MEASURES {m.name}", n.variable is None)


def bind_names(query: Query, schema: pa.Schema) -> Query:
    """``query`` with every column name spelled as in ``schema`` (checked first), and its
    comparisons checked for compatible types (dfs_cer.query.types)."""
    check_columns(query, schema)
    mr = query.recognize

    def bind(e: Expr, clause: str) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, Column):
                name = resolve_column(x.name, schema, clause)
                return None if name == x.name else Column(name, x.variable)
            return None

        return transform(e, fn)

    bound = dataclasses.replace(
        mr,
        partition_by=tuple(resolve_column(c, schema, "PARTITION BY") for c in mr.partition_by),
        order_by=tuple(
            dataclasses.replace(s, column=resolve_column(s.column, schema, "ORDER BY"))
            for s in mr.order_by
        ),
        definitions=tuple(
            dataclasses.replace(d, condition=bind(d.condition, f"DEFINE {d.variable}"))
            for d in mr.definitions
        ),
        measures=tuple(
            dataclasses.replace(m, expr=bind(m.expr, f"MEASURES {m.name}")) for m in mr.measures
        ),
    )
    out = query if bound == mr else dataclasses.replace(query, recognize=bound)
    check_types(out, schema)
    return out
