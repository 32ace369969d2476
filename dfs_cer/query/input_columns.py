"""Column names a clause's input yields twice.

A ``MATCH_RECOGNIZE`` reads its input's columns by name, so an input with two columns of one
name (``FROM (SELECT * FROM t a JOIN t b ON a.id = b.id) MATCH_RECOGNIZE``: every column of
``t`` twice) has no meaning; engines differ on it (DuckDB keeps both names at the top and renames
the second ``id_1`` under an alias; Spark refuses an ambiguous reference). It is one error,
naming the column and the fix (alias one of them):

- :func:`duplicate_in_sql` finds it in the SQL text, where the text shows it (a name selected
  twice; ``*`` or ``a.*, b.*`` over a table joined with itself), before any data is read;
- :func:`duplicate_in_names` checks the computed input's columns (any other case, such as two
  joined tables that share a column name).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dfs_cer.errors import QueryValidationError


def duplicate_error(column: str, why: str) -> QueryValidationError:
    return QueryValidationError(
        f"the input of MATCH_RECOGNIZE has two columns named {column} ({why})",
        clause="FROM",
        hint="select each column once, aliasing one of them, "
        f"e.g. SELECT a.*, b.{column} AS b_{column} ...",
        code="duplicate-column",
    )


def duplicate_in_names(names: Sequence[str]) -> QueryValidationError | None:
    """The error for the first name ``names`` holds twice (spelt alike: columns that differ in case
    are told apart by their exact spelling)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return duplicate_error(
                name, "the table, subquery or common table expression it reads has it twice"
            )
        seen.add(name)
    return None


def duplicate_in_sql(
    tree: exp.Expression, clause_columns: Sequence[str]
) -> QueryValidationError | None:
    """The error for a column the SELECT ``tree`` yields twice, when its text shows one.
    ``clause_columns``: columns the clause reads (they name a column of a self-joined table)."""
    if not isinstance(tree, exp.Select):
        return None
    from_ = tree.args.get("from_") or tree.args.get("from")
    joins = tree.args.get("joins") or []
    if from_ is None or any(j.args.get("method") or j.args.get("natural") for j in joins):
        return None  # NATURAL joins merge columns the text does not show
    items = [from_.this, *(j.this for j in joins)]
    table_of = {
        i.alias_or_name.lower(): i.name.lower()
        if isinstance(i, exp.Table)
        else f"({i.alias_or_name})"
        for i in items
    }
    using = {u.name.lower() for j in joins for u in (j.args.get("using") or [])}
    known: dict[str, list[str]] = {a: [] for a in table_of}  # columns the text reads of each source
    for column in tree.find_all(exp.Column):
        if isinstance(column.this, exp.Star) or column.find_ancestor(exp.Select) is not tree:
            continue  # a star, or a column of a nested query
        source = (
            column.table.lower()
            if column.table
            else next(iter(table_of))
            if len(table_of) == 1
            else ""
        )
        if source in known and column.name not in known[source]:
            known[source].append(column.name)
    starred: list[str] = []
    explicit: list[str] = []
    for projection in tree.expressions:
        if isinstance(projection, exp.Star):
            starred += list(table_of)
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            starred.append(projection.table.lower())
        elif projection.alias_or_name:
            explicit.append(projection.alias_or_name)
    seen: set[str] = set()
    for name in explicit:
        if name in seen:
            return duplicate_error(name, "the subquery selects it twice")
        seen.add(name)
    for alias in starred:
        for name in known.get(alias, []):
            if name in seen and name.lower() not in using:
                return duplicate_error(name, f"the subquery selects it and {alias}.*")
    tables = [table_of[a] for a in starred if a in table_of]
    for table in dict.fromkeys(tables):
        aliases = [a for a in starred if table_of.get(a) == table]
        if len(aliases) < 2:
            continue
        names = [n for a in aliases for n in known[a]]
        if set(table_of.values()) == {table}:  # every column of the input is one of this table's
            names += [c for c in clause_columns if c not in seen]  # not a name the SELECT computes
        twice = next((n for n in names if n.lower() not in using), None)
        if twice is not None:
            return duplicate_error(
                twice,
                f"SELECT * reads {table} twice, as {' and '.join(aliases)}: each of its "
                "columns comes twice",
            )
    return None
