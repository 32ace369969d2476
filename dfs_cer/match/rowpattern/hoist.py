"""Row expressions hoisted into derived columns before matching.

An expression of one row's columns (``coalesce(A.v, 0)``, ``length(I.w)``, ``B.amt * 2 + B.i``)
has one value per row, whatever the match: it is evaluated once over the whole sorted table
(pyarrow, vectorised) into a derived column, and the query reads that column instead:

- navigation over an expression reads the expression at the navigated row:
  ``PREV(coalesce(A.v, 0))`` becomes ``PREV(A.e0)`` with ``e0 = coalesce(v, 0)`` (NULL where
  there is no such row, which distributing the navigation over COALESCE would get wrong);
- in DEFINE, functions, casts, CASE and LIKE over one variable's row become a column the
  row-pattern VM reads like any other (``length(I.w) > length(J.w)``);
- in DEFINE, an aggregate over an expression, with ``FILTER``, or one of ``count_if``,
  ``bool_and``, ``bool_or``, becomes ``count``/``sum``/``avg``/``min``/``max`` over a derived
  column (``count(*) FILTER (WHERE c)`` is ``count(CASE WHEN c THEN 1 END)``).

MEASURES aggregates evaluate their arguments over the matched rows themselves
(:mod:`dfs_cer.match.rowpattern.aggregates`); they need no derived column.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from dfs_cer.match.arrow_eval import _broadcast, evaluate
from dfs_cer.match.columns import column_of
from dfs_cer.query.expr import (
    Aggregate,
    BinaryOp,
    Case,
    Cast,
    Classifier,
    Column,
    Expr,
    Function,
    IsNull,
    Like,
    Literal,
    MatchNumber,
    Navigation,
    Star,
    UnaryOp,
    When,
    transform,
    walk,
)
from dfs_cer.query.model import Definition, MatchRecognize, Measure

DERIVED = "__dfs_cer_expr_{}"


class _Hoister:
    def __init__(self) -> None:
        self.derived: dict[Expr, str] = {}  # unqualified expression -> column name

    def column(self, e: Expr) -> Column | None:
        """A derived column standing for ``e`` (a row expression of at most one variable), or
        None."""
        if any(
            isinstance(n, Navigation | Aggregate | Classifier | MatchNumber | Star) for n in walk(e)
        ):
            return None
        variables = {n.variable for n in walk(e) if isinstance(n, Column)}
        if len(variables) > 1:
            return None
        unqualified = transform(e, lambda x: Column(x.name) if isinstance(x, Column) else None)
        name = self.derived.get(unqualified)
        if name is None:
            name = self.derived[unqualified] = DERIVED.format(len(self.derived))
        return Column(name, next(iter(variables)) if variables else None)

    def navigation(self, x: Expr) -> Expr | None:
        if isinstance(x, Navigation) and not isinstance(
            x.operand, Column | Classifier | Navigation
        ):
            derived = self.column(x.operand)
            if derived is not None:
                return dataclasses.replace(x, operand=derived)
        return None

    def condition(self, x: Expr) -> Expr | None:
        """DEFINE: navigation over expressions, scalar functions the VM cannot run, aggregates."""
        nav = self.navigation(x)
        if nav is not None:
            return nav
        if isinstance(x, Aggregate):
            return self.aggregate(x)
        if isinstance(x, Function | Cast | Case | Like) or (
            isinstance(x, BinaryOp) and x.op == "||"
        ):
            return self.column(
                x
            )  # None (left to the VM: COALESCE, CASE, abs, ...) when it navigates
        return None

    def aggregate(self, agg: Aggregate) -> Expr | None:
        if agg.args and not any(
            isinstance(n, Column | Star | Classifier) for a in agg.args for n in walk(a)
        ):
            return self.constant(agg)
        arg = agg.args[0] if agg.args else Star()
        star = isinstance(arg, Star)
        name = agg.name
        compare_to: int | None = None
        if name == "count_if":
            arg, name, star = Case((When(arg, Literal(1)),)), "count", False
        elif name in ("bool_and", "bool_or"):
            arg = Case((When(arg, Literal(1)), When(UnaryOp("NOT", arg), Literal(0))))
            name, compare_to = ("min" if name == "bool_and" else "max"), 1
        if agg.filter is not None:
            arg = Case((When(agg.filter, Literal(1) if star else arg),))
            star = False
        if star or isinstance(arg, Column):
            out: Expr = dataclasses.replace(agg, name=name, args=(arg,), filter=None)
        else:
            # inside an aggregate every column reads the aggregated row: the derived column is
            # the unqualified expression over the rows of the one variable arguments or FILTER
            # name (validated: unqualified arguments take the FILTER's variable)
            qualified = {
                n.variable
                for n in walk(arg)
                if isinstance(n, Column | Star) and n.variable is not None
            }
            first = agg.args[0] if agg.args else None
            if isinstance(first, Star) and first.variable is not None:
                qualified.add(first.variable)
            if len(qualified) > 1:
                return None
            derived = self.column(
                transform(arg, lambda x: Column(x.name) if isinstance(x, Column) else None)
            )
            if derived is None:
                return None
            derived = Column(derived.name, next(iter(qualified)) if qualified else None)
            out = dataclasses.replace(agg, name=name, args=(derived,), filter=None)
        if out == agg:
            return None
        return out if compare_to is None else BinaryOp("=", out, Literal(compare_to))

    def constant(self, agg: Aggregate) -> Expr | None:
        """An aggregate of a value the same on every row of the match (``sum(MATCH_NUMBER())``):
        the value and the number of rows it runs over (``MATCH_NUMBER() * count(*)``)."""
        if agg.distinct or agg.name not in ("count", "sum", "avg", "min", "max"):
            return None
        value = agg.args[0]
        counted: Expr = Aggregate("count", ())
        if agg.filter is not None:
            filtered = self.aggregate(Aggregate("count", (), filter=agg.filter))
            if filtered is None:
                return None
            counted = filtered
        none = BinaryOp("=", counted, Literal(0))
        if agg.name == "count":
            return Case((When(IsNull(value), Literal(0)),), counted)
        result = BinaryOp("*", value, counted) if agg.name == "sum" else value
        return Case((When(BinaryOp("OR", none, IsNull(value)), Literal(None)),), result)


def hoist(mr: MatchRecognize) -> tuple[MatchRecognize, dict[Expr, str]]:
    """``mr`` reading derived columns, and the row expressions to compute for them (in order)."""
    h = _Hoister()
    definitions = tuple(
        Definition(d.variable, transform(d.condition, h.condition)) for d in mr.definitions
    )
    measures = tuple(Measure(transform(m.expr, h.navigation), m.name) for m in mr.measures)
    if not h.derived and definitions == mr.definitions:
        return mr, {}
    return dataclasses.replace(mr, definitions=definitions, measures=measures), dict(h.derived)


def with_derived(table: pa.Table, derived: dict[Expr, str]) -> pa.Table:
    """``table`` plus one column per derived row expression (evaluated over every row)."""
    n = len(table)
    for expr, name in derived.items():
        current = table

        def leaf(x: Expr, t: pa.Table = current) -> pa.Array:
            if isinstance(x, Column):
                col = t.column(column_of(t, x.name))
                return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            raise AssertionError(f"{x} in a row expression")

        values = _broadcast(evaluate(expr, leaf, n), n)
        table = table.append_column(name, values)
    return table
