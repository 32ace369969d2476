"""The outer query's sandbox: the SQL around MATCH_RECOGNIZE may read the relations dfs-cer
registers and nothing else.

Two layers. The engines run locked down — the embedded DuckDB with external access, extension
loading and configuration changes disabled (:func:`dfs_cer.local.sandboxed_duckdb`) — and
every outer query is checked here first, for DuckDB and for Spark SQL alike (Spark has no
such switch; it runs Hive script transforms and JVM methods as the driver's user):

- the text has no ``${...}`` (Spark substitutes variables, the environment and settings into it);
- it parses, in the engine's dialect, to one SELECT (set operations and CTEs inside it);
- every node of the tree is of a kind :data:`~dfs_cer.query.allowlist.ALLOWED_NODES` lists and
  every function it calls is in :data:`~dfs_cer.query.allowlist.ALLOWED_FUNCTIONS`: anything
  else (commands, ``SELECT TRANSFORM ... USING``, ``LATERAL VIEW``, ``reflect``, ``version()``,
  qualified functions, ...) is refused by default, a new sqlglot node kind included;
- every table it reads is a registered relation or a CTE defined at its top: no table functions
  (``read_text(...)``, ``range(...)``), no paths (``'x.parquet'``, Spark's ``parquet.`/path```),
  no qualified names; no column named like a session value Spark would read in its place
  (``current_catalog``) unless qualified with its relation.

Anything else is a :class:`QueryValidationError` naming the offending node kind or function.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.allowlist import ALLOWED_FUNCTIONS, ALLOWED_NODES, SESSION_NAMES

_STATEMENTS = (exp.Select, exp.Union, exp.Intersect, exp.Except)


def _refuse(what: str) -> QueryValidationError:
    return QueryValidationError(
        f"the outer query may not use {what}",
        clause="SELECT",
        code="sandbox",
        hint="the SQL around MATCH_RECOGNIZE reads only the relations dfs-cer registers "
        "(the match relation and CTEs defined at the top of the query), with the "
        "node kinds and functions dfs_cer.query.allowlist lists",
    )


def function_name(func: exp.Func) -> str:
    """The name the allow-list knows ``func`` by:
    sqlglot's for a function it knows, else as written."""
    if not isinstance(func, exp.Anonymous):
        return func.sql_name().lower()
    this = func.args.get("this")
    return (this.name if isinstance(this, exp.Expr) else str(this or "")).lower()


def _text(node: exp.Expr, dialect: str) -> str:
    try:
        text = node.sql(dialect=dialect, unsupported_level=ErrorLevel.IGNORE)
    except Exception:  # an odd node may not print; its kind names it
        return ""
    return f" ({text[:80]}{'...' if len(text) > 80 else ''})" if text else ""


def check_outer(sql: str, relations: Iterable[str], dialect: str) -> None:
    """Raise QueryValidationError unless ``sql`` is one SELECT reading only ``relations``."""
    if "${" in sql:  # Spark substitutes ${env:...}, ${system:...} and its settings into SQL text
        raise _refuse("a ${...} variable")
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except (
        Exception
    ) as exc:  # sqlglot also fails with IndexError etc.: what it cannot read is refused
        raise QueryValidationError(
            f"the outer query does not parse: {exc or type(exc).__name__}",
            clause="SELECT",
            code="syntax",
        ) from None
    if len(trees) != 1:
        raise _refuse(f"{len(trees)} statements")
    check_tree(trees[0], relations, dialect)


def check_tree(tree: exp.Expr, relations: Iterable[str], dialect: str) -> None:
    """:func:`check_outer` on a parsed statement."""
    if not isinstance(tree, _STATEMENTS):
        raise _refuse(f"a {type(tree).__name__} statement{_text(tree, dialect)}")
    allowed = {r.lower() for r in relations}
    # CTEs only at the top: a name defined in a nested scope must not make the same name
    # readable elsewhere (a CTE named like a catalog view, e.g. pg_settings, read outside it)
    top = tree.args.get("with_") or tree.args.get("with")
    ctes = list(top.expressions) if isinstance(top, exp.With) else []
    names = [cte.alias_or_name.lower() for cte in ctes]
    for node in tree.walk():
        if type(node) not in ALLOWED_NODES:  # AND, OR are functions to sqlglot: listed as operators
            if not isinstance(node, exp.Func):
                raise _refuse(f"a {type(node).__name__}{_text(node, dialect)}")
            name = function_name(node)
            if name not in ALLOWED_FUNCTIONS:
                raise _refuse(f"the function {name or type(node).__name__}(){_text(node, dialect)}")
            continue
        if isinstance(node, exp.With) and node is not top:
            raise _refuse(
                "a WITH clause inside the query (define common table expressions at the top)"
            )
        if isinstance(node, exp.Dot) and not isinstance(node.expression, exp.Identifier):
            raise _refuse(
                f"a qualified name{_text(node, dialect)} (call functions by their plain names)"
            )
        if (
            isinstance(node, exp.Column | exp.Var)
            and not node.args.get("table")
            and node.name.lower() in SESSION_NAMES
        ):
            raise _refuse(
                f"the name {node.name} (Spark reads it as a session value; a column of that name: "
                f"qualify it with its relation, e.g. m.{node.name})"
            )
        if isinstance(node, exp.Table):
            _check_table(node, allowed, ctes, names, dialect)


def _check_table(
    table: exp.Table, allowed: set[str], ctes: list[exp.Expression], names: list[str], dialect: str
) -> None:
    if not isinstance(table.this, exp.Identifier):
        raise _refuse(f"a table function{_text(table, dialect)}")
    if table.args.get("db") is not None or table.args.get("catalog") is not None:
        raise _refuse(f"the qualified table {table.sql(dialect=dialect)}")
    # a CTE's body sees the relations and the CTEs before it: a name it reads before its
    # definition (itself, a later CTE) would be the engine's catalog, not a CTE
    inside = next((i for i, cte in enumerate(ctes) if table.find_ancestor(exp.CTE) is cte), None)
    visible = allowed | set(names if inside is None else names[:inside])
    name = table.name.lower()
    if name not in visible:
        if inside is not None and name in names:
            raise _refuse(
                f"the table {table.name!r} inside the common table expression {names[inside]!r} "
                "(a CTE reads only the CTEs defined before it; recursive CTEs are not supported)"
            )
        raise _refuse(
            f"the table {table.name!r} (readable: {', '.join(sorted(allowed)) or 'none'})"
        )
