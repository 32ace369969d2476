"""Query model -> canonical SQL text (``parse(format_query(q)) == q``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfs_cer.pattern.ir import format_label, to_text
from dfs_cer.query.expr import format_column_name, to_sql
from dfs_cer.query.model import RowsPerMatch, SortItem

if TYPE_CHECKING:
    from dfs_cer.query.root import Query


def _sort_item(item: SortItem) -> str:
    text = format_column_name(item.column)
    if item.descending:
        text += " DESC"
    if item.nulls_first is not None:
        text += " NULLS FIRST" if item.nulls_first else " NULLS LAST"
    return text


def format_match_recognize(query: Query, indent: str = "  ") -> str:
    """The ``MATCH_RECOGNIZE ( ... )`` clause, one sub-clause per line."""
    mr = query.recognize
    lines: list[str] = []
    if mr.partition_by:
        lines.append("PARTITION BY " + ", ".join(format_column_name(c) for c in mr.partition_by))
    if mr.order_by:
        lines.append("ORDER BY " + ", ".join(_sort_item(i) for i in mr.order_by))
    if mr.measures:
        lines.append(
            "MEASURES "
            + ", ".join(f"{to_sql(m.expr)} AS {format_column_name(m.name)}" for m in mr.measures)
        )
    lines.append(
        mr.rows_per_match.value
        if mr.rows_per_match is not RowsPerMatch.ALL_ROWS_SHOW_EMPTY
        else "ALL ROWS PER MATCH"
    )
    if mr.all_matches:
        lines.append("ALL MATCHES")
    lines.append(mr.after_match_skip.sql())
    pattern = f"PATTERN ({to_text(mr.pattern)})"
    if mr.window is not None:
        pattern += " " + mr.window.sql()
    lines.append(pattern)
    if mr.subsets:
        lines.append(
            "SUBSET "
            + ", ".join(
                f"{format_label(s.name)} = ({', '.join(format_label(v) for v in s.variables)})"
                for s in mr.subsets
            )
        )
    if mr.definitions:
        lines.append(
            "DEFINE "
            + f",\n{indent}{indent}".join(
                f"{format_label(d.variable)} AS {to_sql(d.condition)}" for d in mr.definitions
            )
        )
    body = "\n".join(indent + line for line in lines)
    return f"MATCH_RECOGNIZE (\n{body}\n)"


def format_query(query: Query) -> str:
    """Canonical SQL text of a whole query."""
    outer = query.outer
    parts = ["SELECT " + ("DISTINCT " if outer.distinct else "") + ", ".join(outer.select)]
    table = ".".join(format_column_name(part) for part in query.table.split("."))
    parts.append(f"FROM {table} {format_match_recognize(query)}")
    if query.alias is not None:
        parts[-1] += f" AS {format_column_name(query.alias)}"
        if query.alias_columns:
            parts[-1] += f"({', '.join(format_column_name(c) for c in query.alias_columns)})"
    if outer.where is not None:
        parts.append(f"WHERE {outer.where}")
    if outer.order_by:
        parts.append("ORDER BY " + ", ".join(outer.order_by))
    if outer.limit is not None:
        parts.append(f"LIMIT {outer.limit}")
    return "\n".join(parts)
