"""The situation query model: situations derived per partition, Allen-relation constraints
between them, a window and per-situation aggregates."""

from __future__ import annotations

from dataclasses import dataclass

from dfs_cer.query.expr import Expr
from dfs_cer.query.model import Window

AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")


@dataclass(frozen=True)
class Situation:
    """``A AS <condition> [AT LEAST d | AT MOST d | BETWEEN d1 AND d2]``: maximal runs of
    consecutive rows (of a partition, in time order) where the condition holds, as half-open
    intervals ``[first row's time, the next row's time)``, kept when ``te - ts`` is within the
    bounds (inclusive)."""

    name: str
    condition: Expr
    min_duration: Window | None = None
    max_duration: Window | None = None


@dataclass(frozen=True)
class Constraint:
    """``left r right`` for one of ``relations`` (OR)."""

    left: str
    right: str
    relations: tuple[str, ...]


@dataclass(frozen=True)
class Measure:
    """``agg(X.column) AS name`` over the rows of situation X (``count(X.*)``: its rows)."""

    name: str
    function: str
    symbol: str
    column: str | None


@dataclass(frozen=True)
class SituationQuery:
    table: str
    alias: str | None
    partition_by: tuple[str, ...]
    order_by: str
    situations: tuple[Situation, ...]
    constraints: tuple[Constraint, ...]
    window: Window | None
    measures: tuple[Measure, ...]
    #: the statement with the SITUATIONS clause replaced by ``{relation}`` (the outer query)
    outer_sql: str

    def situation(self, name: str) -> Situation:
        return next(s for s in self.situations if s.name == name)
