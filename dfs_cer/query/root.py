"""The root of the query model, :class:`Query`: a parsed statement with its canonical SQL and
its JSON form (above :mod:`dfs_cer.query.format` and :mod:`dfs_cer.query.validate`, which
read the model's nodes)."""

from __future__ import annotations

from dataclasses import dataclass

from dfs_cer.query.format import format_query
from dfs_cer.query.model import MatchRecognize, OuterQuery
from dfs_cer.query.validate import validate
from dfs_cer.serde import SerdeError, from_json, node, to_json


@node("query")
@dataclass(frozen=True, slots=True)
class Query:
    """A parsed ``SELECT ... FROM table MATCH_RECOGNIZE (...) [AS alias] ...`` query."""

    table: str
    recognize: MatchRecognize
    alias: str | None = None
    outer: OuterQuery = OuterQuery()  # noqa: RUF009  (a frozen dataclass)
    #: ``) AS m(a, b)``: the relation's columns renamed, in output order
    alias_columns: tuple[str, ...] = ()

    @property
    def order_column(self) -> str:
        """The first ORDER BY column ("" without ORDER BY: rows are matched in input order)."""
        return self.recognize.order_by[0].column if self.recognize.order_by else ""

    def to_sql(self) -> str:
        return format_query(self)

    def to_json(self, indent: int | None = None) -> str:
        return to_json(self, indent=indent)

    @staticmethod
    def from_json(text: str | bytes) -> Query:
        value = from_json(text)
        if not isinstance(value, Query):
            raise SerdeError(f"JSON does not describe a query but a {type(value).__name__}")
        validate(value)  # the same rules as parsed SQL (functions, depth, variables, ...)
        return value
