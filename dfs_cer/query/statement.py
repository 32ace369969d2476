"""A whole SQL statement around one or more ``MATCH_RECOGNIZE`` clauses.

Analysts aggregate, join and nest matches (``SELECT district, count(*) FROM crimes
MATCH_RECOGNIZE (...) GROUP BY district``, ``WITH m AS (SELECT ... MATCH_RECOGNIZE ...) SELECT
...``, two patterns joined on a key). dfs-cer computes each ``MATCH_RECOGNIZE`` relation itself
(in process, through the storage nodes or on Spark) and hands the rest of the statement, with
each clause replaced by a registered relation, to an SQL engine (the sandboxed embedded DuckDB,
or Spark SQL): nothing of the outer SQL is interpreted here.

Each clause's input is a table the caller registers, a common table expression of the
statement, or a subquery (``FROM (SELECT ... WHERE ...) MATCH_RECOGNIZE``); the SQL engine
computes the latter two first, from the registered tables and the relations of clauses they
contain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from dfs_cer.query.root import Query

#: the relation the statement reads in place of the i-th MATCH_RECOGNIZE clause
RELATION = "__dfs_cer_mr_{}"
#: the name a clause's input has when it is a subquery or a common table expression
INPUT = "__dfs_cer_input_{}"
#: the dialect the SQL around the clauses is read and kept in: DuckDB's, whose NULL ordering is
#: Trino's (NULLS LAST unless the query says otherwise, ascending or descending)
OUTER_DIALECT = "duckdb"


def alias_list(columns: Sequence[str]) -> str:
    """``("a", "b")``: the column list of a relation alias (empty for none)."""
    return (
        "(" + ", ".join(exp.to_identifier(c, quoted=True).sql() for c in columns) + ")"
        if columns
        else ""
    )


@dataclass(frozen=True, slots=True)
class Part:
    """One ``MATCH_RECOGNIZE`` clause of a statement."""

    #: the name the statement (and later parts' inputs) read its relation by
    relation: str
    #: the clause over its input, with a plain ``SELECT *`` around it; ``query.table`` is the
    #: registered table it reads, or :data:`INPUT` when ``input_sql`` computes the input
    query: Query
    #: SQL computing the input (a subquery, or a CTE of the statement); None: a registered table
    input_sql: str | None = None
    #: relations of other parts ``input_sql`` reads (they are computed first)
    depends: tuple[str, ...] = ()
    #: registered tables ``input_sql`` reads
    reads: tuple[str, ...] = ()
    #: ``(table, condition)`` when ``input_sql`` is ``SELECT * FROM table WHERE condition`` with a
    #: row-local condition (:mod:`dfs_cer.query.input_filter`): storage nodes holding ``table``
    #: drop the rows failing it themselves
    pushed: tuple[str, str] | None = None
    #: when ``input_sql`` adds computed PARTITION BY / ORDER BY keys around the input: the input
    #: itself, whose columns are checked as they are (an engine renames a relation's second
    #: column of one name, ``id_1``, where the keys read it)
    columns_sql: str | None = None


@dataclass(frozen=True, slots=True)
class Statement:
    """The statement with every clause replaced by its part's relation."""

    sql: str
    parts: tuple[Part, ...]
    #: tables the statement reads that are neither parts nor its CTEs: the caller registers them
    tables: tuple[str, ...]
    #: the tables among them the SQL around the clauses reads itself (CTE bodies included)
    outer_tables: tuple[str, ...] = ()
    #: the whole statement is ``SELECT ... FROM table MATCH_RECOGNIZE (...) [WHERE/ORDER BY/LIMIT]``
    simple: bool = False
