"""The outer query's sandbox: the SQL around MATCH_RECOGNIZE may read the relations dfs-cer
registers and nothing else.

Two layers. The engines run locked down — the embedded DuckDB with external access, extension
loading and configuration changes disabled (:func:`dfs_cer.local.sandboxed_duckdb`) — and
every outer query is checked here first, for DuckDB and for Spark SQL alike (Spark has no
such switch):

- one SELECT statement (set operations and CTEs inside it), never SET / COPY / ATTACH /
  INSTALL / PRAGMA / CREATE / INSERT or any other command;
- every table it reads is a registered relation or a CTE it defines: no table functions
  (``read_text(...)``, ``read_files(...)``, ``duckdb_settings()``, ``range(...)``), no paths
  (``'x.parquet'``, Spark's ``parquet.`/path```), no qualified names;
- no function that reaches files, the network, the environment or the engine's settings
  (``reflect``, ``java_method``, ``getenv``, ``current_setting``, ``input_file_name``, ...).

Anything else is a :class:`QueryValidationError` naming the offending part.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp

from dfs_cer.errors import QueryValidationError

#: scalar functions that reach outside the registered relations (files, network, environment,
#: settings, JVM) on DuckDB or Spark; table functions are refused wholesale
DENIED_FUNCTIONS = frozenset({
    "reflect", "java_method", "try_reflect", "input_file_name", "input_file_block_start",
    "input_file_block_length", "getenv", "current_setting", "getvariable", "set_variable", "read_text",
    "read_blob", "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_parquet", "parquet_scan",
    "glob", "sniff_csv", "http_get", "http_post", "load_extension", "current_database", "current_schema",
    "current_catalog", "current_user", "session_user", "user", "version", "pg_backend_pid", "txid_current",
})
_STATEMENTS = (exp.Select, exp.Union, exp.Intersect, exp.Except)
_COMMANDS = (exp.Command, exp.Set, exp.Pragma, exp.Copy, exp.Create, exp.Insert, exp.Update, exp.Delete,
             exp.Drop, exp.Use, exp.Alter, exp.Merge, exp.Describe, exp.Transaction, exp.Commit, exp.Rollback)


def _refuse(what: str) -> QueryValidationError:
    return QueryValidationError(f"the outer query may not use {what}", clause="SELECT", code="sandbox",
                                hint="the SQL around MATCH_RECOGNIZE reads only the relations dfs-cer registers "
                                     "(the match relation and CTEs defined at the top of the query)")


def check_outer(sql: str, relations: Iterable[str], dialect: str) -> None:
    """Raise QueryValidationError unless ``sql`` is one SELECT reading only ``relations``."""
    allowed = {r.lower() for r in relations}
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except sqlglot.errors.ParseError as exc:
        raise QueryValidationError(f"the outer query does not parse: {exc}", clause="SELECT", code="syntax") from None
    if len(trees) != 1:
        raise _refuse(f"{len(trees)} statements")
    tree = trees[0]
    if not isinstance(tree, _STATEMENTS):
        raise _refuse(f"a {type(tree).__name__.upper()} statement")
    for node in tree.walk():
        if isinstance(node, _COMMANDS):
            raise _refuse(f"a {type(node).__name__.upper()} command")
    if "${" in sql:  # Spark substitutes ${env:...}, ${system:...} and its settings into SQL text
        raise _refuse("a ${...} variable")
    # CTEs only at the top: a name defined in a nested scope must not make the same name
    # readable elsewhere (a CTE named like a catalog view, e.g. pg_settings, read outside it)
    top = tree.args.get("with_") or tree.args.get("with")
    for with_ in tree.find_all(exp.With):
        if with_ is not top:
            raise _refuse("a WITH clause inside the query (define common table expressions at the top)")
    ctes = list(top.expressions) if top is not None else []
    names = [cte.alias_or_name.lower() for cte in ctes]
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise _refuse(f"the table function {table.this.sql(dialect=dialect)}")
        if table.args.get("db") is not None or table.args.get("catalog") is not None:
            raise _refuse(f"the qualified table {table.sql(dialect=dialect)}")
        # a CTE's body sees the relations and the CTEs before it: a name it reads before its
        # definition (itself, a later CTE) would be the engine's catalog, not a CTE
        inside = next((i for i, cte in enumerate(ctes) if table.find_ancestor(exp.CTE) is cte), None)
        visible = allowed | set(names if inside is None else names[:inside])
        name = table.name.lower()
        if name not in visible:
            if inside is not None and name in names:
                raise _refuse(f"the table {table.name!r} inside the common table expression {names[inside]!r} "
                              "(a CTE reads only the CTEs defined before it; recursive CTEs are not supported)")
            raise _refuse(f"the table {table.name!r} (readable: {', '.join(sorted(allowed)) or 'none'})")
    for func in tree.find_all(exp.Func):
        name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
        if name in DENIED_FUNCTIONS:
            raise _refuse(f"the function {name}()")
