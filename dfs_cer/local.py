"""``dfs_cer.match_recognize``: run a whole ``SELECT ... MATCH_RECOGNIZE`` query in process.

Each MATCH_RECOGNIZE clause runs on dfs-cer's engines; the statement around it (projection,
WHERE, GROUP BY, window functions, joins with registered tables, CTEs, subqueries, UNION, other
clauses' relations) runs on DuckDB, an embedded SQL engine, locked down to the registered
relations (:mod:`dfs_cer.query.sandbox`) and bounded by the query's deadline and
``query.outer_memory_limit`` (:mod:`dfs_cer.outer`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import sqlglot

from dfs_cer import interrupt
from dfs_cer.config import Config, load_config
from dfs_cer.errors import ConfigError, UnsupportedFeatureError
from dfs_cer.match.rowpattern.engine import run_row_pattern
from dfs_cer.options import SELECTIONS
from dfs_cer.outer import OuterEngine, deadline_of, sandboxed_duckdb
from dfs_cer.query import Analysis, Query, analyze, parse
from dfs_cer.query.input_columns import duplicate_in_names
from dfs_cer.query.parser import parse_statement
from dfs_cer.query.statement import OUTER_DIALECT, Statement, alias_list

ENGINES = ("auto", "sql", "cer")
RELATION = "__dfs_cer_matches"


def outer_sql(query: Query, dialect: str) -> str | None:
    """The outer query over the match relation, or None when it is a plain ``SELECT *``."""
    outer = query.outer
    if (
        outer.select == ("*",)
        and not outer.distinct
        and outer.where is None
        and not outer.order_by
        and outer.limit is None
        and not query.alias_columns
    ):
        return None

    alias = query.alias or RELATION
    sql = "SELECT " + ("DISTINCT " if outer.distinct else "") + ", ".join(outer.select)
    sql += f' FROM {RELATION} AS "{alias}"' + alias_list(query.alias_columns)
    if outer.where is not None:
        sql += " WHERE " + outer.where
    if outer.order_by:
        sql += " ORDER BY " + ", ".join(outer.order_by)
    if outer.limit is not None:
        sql += f" LIMIT {outer.limit}"
    return sqlglot.transpile(sql, read=OUTER_DIALECT, write=dialect)[0]


def run_outer(
    query: Query,
    relation: pa.Table,
    dialect: str = "duckdb",
    *,
    config: Config | None = None,
    deadline: float | None = None,
) -> pa.Table:
    """Evaluate the SELECT around MATCH_RECOGNIZE on the sandboxed embedded DuckDB, by
    ``deadline`` (``time.monotonic()``; default ``strategy.query_timeout_seconds`` from now)
    and within ``query.outer_memory_limit``."""
    sql = outer_sql(query, dialect)
    if sql is None:
        return relation
    import duckdb

    config = config or load_config()
    try:
        with OuterEngine(config, deadline, dialect) as engine:
            engine.register(RELATION, relation)
            return engine.table(sql, [RELATION])
    except duckdb.Error as exc:
        raise UnsupportedFeatureError(
            f"the outer query failed on the embedded engine: {exc}",
            clause="SELECT",
            code="outer-query",
        ) from exc


def as_arrow(name: str, data: object) -> pa.Table:
    """A registered table as Arrow: an Arrow table, or anything with ``to_arrow``/pandas."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    module = type(data).__module__
    if module.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "to_arrow"):
        out = data.to_arrow()
        if isinstance(out, pa.Table):
            return out
    raise ConfigError(
        f"table {name!r}: expected an Arrow table or a pandas DataFrame, got {type(data).__name__}"
    )


def run_statement(
    statement: Statement,
    tables: Mapping[str, pa.Table],
    match: Callable[[Query, pa.Table], pa.Table],
    dialect: str = "duckdb",
    computed: Mapping[str, pa.Table] | None = None,
    *,
    config: Config | None = None,
    deadline: float | None = None,
) -> pa.Table:
    """Compute every MATCH_RECOGNIZE relation of ``statement`` with ``match`` (its input: a
    registered table, or a subquery / CTE the sandboxed engine computes first) unless
    ``computed`` holds it already (by relation name), then the statement over them and the
    registered ``tables`` on the sandboxed embedded DuckDB, by ``deadline``
    (``time.monotonic()``; default ``strategy.query_timeout_seconds`` from now) and within
    ``query.outer_memory_limit``."""
    import duckdb

    config = config or load_config()
    computed = computed or {}
    registered = {name.lower(): (name, table) for name, table in tables.items()}
    needed = list(statement.outer_tables)
    for part in statement.parts:
        if part.relation not in computed:
            needed += part.reads if part.input_sql is not None else [part.query.table]
    missing = list(dict.fromkeys(t for t in needed if t.lower() not in registered))
    if missing:
        raise ConfigError(
            f"the query reads table(s) {', '.join(repr(t) for t in missing)}, which are not "
            "registered; pass them (registered: "
            f"{', '.join(sorted(n for n, _ in registered.values())) or 'none'}; Python: "
            "tables={'name': table}, CLI: --table name=path)"
        )
    allowed = [*(n for n, _ in registered.values()), *(p.relation for p in statement.parts)]
    try:
        with OuterEngine(config, deadline, dialect) as engine:
            return _statement(statement, registered, match, dialect, computed, allowed, engine)
    except duckdb.Error as exc:
        raise UnsupportedFeatureError(
            f"the query around MATCH_RECOGNIZE failed on the embedded engine: {exc}",
            clause="SELECT",
            code="outer-query",
        ) from exc


def _statement(
    statement: Statement,
    registered: Mapping[str, tuple[str, pa.Table]],
    match: Callable[[Query, pa.Table], pa.Table],
    dialect: str,
    computed: Mapping[str, pa.Table],
    allowed: list[str],
    engine: OuterEngine,
) -> pa.Table:
    """The statement's clauses, in dependency order, then the statement, on ``engine``."""
    for name, table in registered.values():
        engine.register(name, table)
    done: set[str] = set()
    pending = list(statement.parts)
    while pending:
        ready = [p for p in pending if set(p.depends) <= done]
        if not ready:
            raise UnsupportedFeatureError(
                "MATCH_RECOGNIZE clauses read each other's relations in a cycle",
                code="unsupported",
            )
        for part in ready:
            if part.relation in computed:
                engine.register(part.relation, computed[part.relation])
                done.add(part.relation)
                pending.remove(part)
                continue
            if part.input_sql is None:
                data = registered[part.query.table.lower()][1]
            else:
                if part.columns_sql is not None:  # bound, not run: the input's own column names
                    sql = sqlglot.transpile(part.columns_sql, read=OUTER_DIALECT, write=dialect)[0]
                    if (twice := duplicate_in_names(engine.columns(sql, allowed))) is not None:
                        raise twice
                sql = sqlglot.transpile(part.input_sql, read=OUTER_DIALECT, write=dialect)[0]
                data = engine.table(sql, allowed)
            engine.register(part.relation, match(part.query, data))
            done.add(part.relation)
            pending.remove(part)
    sql = sqlglot.transpile(statement.sql, read=OUTER_DIALECT, write=dialect)[0]
    return engine.table(sql, allowed)


@interrupt.guarded
def match_recognize(
    table: pa.Table | None,
    sql: str,
    *,
    tables: Mapping[str, Any] | None = None,
    selection: str | None = None,
    kleene: str | None = None,
    max_matches: int | None = None,
    on_limit: str | None = None,
    count_only: bool = False,
    engine: str = "auto",
    event_key: Sequence[str] | None = None,
    dedup: bool | None = None,
    config: Config | None = None,
) -> pa.Table:
    """Evaluate ``SELECT ... FROM t MATCH_RECOGNIZE (...) ...`` over ``table`` (named by the FROM).

    The statement may be any SELECT around one or more MATCH_RECOGNIZE clauses: GROUP BY,
    window functions, DISTINCT, CTEs, subqueries, UNION, joins with the ``tables`` given, a
    clause over a subquery or CTE.

    Args:
        table: the events, registered under the name the first MATCH_RECOGNIZE's FROM gives
            (any name); None when ``tables`` holds every table the query reads.
        sql: the query.
        tables: more tables the query reads, by name (Arrow tables or pandas DataFrames).
        selection: CER selection strategy (``skip_till_any_match``, ``skip_till_next_match``,
            ``strict_contiguity``); default: the SQL standard's semantics, or
            skip-till-any-match when the query says ``ALL MATCHES``.
        kleene: ``all`` (every subset) or ``maximal`` for Kleene+ under CER selection.
        max_matches: bound on the number of matches (config ``matcher.max_matches``).
        on_limit: ``error`` (raise MatchLimitError) or ``truncate`` past ``max_matches``.
        count_only: return only the number of matches (exact, as a one-row table).
        engine: ``auto``, ``sql`` (row-pattern VM) or ``cer`` (recomputation engine).
        event_key: columns identifying an event together with its time (config
            ``query.event_key``; default: the whole row). Rows tied on time are matched in
            (event key, other columns) order.
        dedup: drop duplicate events before matching (config ``query.dedup``, default True).
        config: the settings (``query.*`` and ``matcher.*`` apply here); default
            :func:`~dfs_cer.config.load_config` (the ``DFS_CER_CONFIG`` file and ``DFS_CER__*``
            variables over the defaults). The other arguments, when given, win over it.

    The SQL around the clauses gets what is left of ``strategy.query_timeout_seconds`` (from the
    call) and ``query.outer_memory_limit``; past either it stops with an
    :class:`~dfs_cer.errors.OuterQueryLimitError`.
    """
    started = time.monotonic()
    if isinstance(event_key, str):  # one column named as a string
        event_key = (event_key,)
    if dedup is not None and not isinstance(dedup, bool):
        raise ConfigError(f"dedup must be True or False, got {dedup!r}")
    # the arguments given win over the settings (``config``, else the file and environment's),
    # checked as the settings are
    config = (config or load_config()).with_values(
        {
            "query": {"event_key": event_key, "dedup": dedup},
            "matcher": {"kleene": kleene, "max_matches": max_matches, "on_limit": on_limit},
        },
        "match_recognize's arguments",
    )
    if engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if selection is not None and selection not in SELECTIONS:
        raise ConfigError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    kleene, limit, on_limit = (
        config.matcher.kleene,
        config.matcher.max_matches,
        config.matcher.on_limit,
    )
    statement = parse_statement(sql)
    if not statement.simple or tables:
        if count_only:
            raise ConfigError(
                "count_only counts one MATCH_RECOGNIZE clause's matches; write count(*) in the "
                "query"
            )
        registry = {name: as_arrow(name, data) for name, data in (tables or {}).items()}
        if table is not None:
            name = _events_name(statement)
            if name is not None and name.lower() not in {n.lower() for n in registry}:
                registry[name] = as_arrow(name, table)

        def one(query: Query, data: pa.Table) -> pa.Table:
            return match_clause(
                query, data, config, selection, kleene, limit, on_limit, False, engine
            )

        return run_statement(
            statement,
            registry,
            one,
            config.query.outer_dialect,
            config=config,
            deadline=deadline_of(config, started),
        )
    if table is None:
        raise ConfigError(
            "pass the events: match_recognize(table, sql) (the query reads "
            f"{statement.tables[0]!r})"
        )
    query = parse(sql)
    table = as_arrow(query.table, table)
    result = match_clause(
        query, table, config, selection, kleene, limit, on_limit, count_only, engine
    )
    if count_only:
        return result
    return run_outer(
        query,
        result,
        config.query.outer_dialect,
        config=config,
        deadline=deadline_of(config, started),
    )


def _events_name(statement: Statement) -> str | None:
    """The table the first MATCH_RECOGNIZE reads (directly, or first in its subquery / CTE)."""
    first = statement.parts[0]
    if first.input_sql is None:
        return first.query.table
    from sqlglot import exp

    inner = {p.relation.lower() for p in statement.parts}
    tree = sqlglot.parse_one(first.input_sql, read=OUTER_DIALECT)
    ctes = {c.alias_or_name.lower() for w in tree.find_all(exp.With) for c in w.expressions}
    return next(
        (t.name for t in tree.find_all(exp.Table) if t.name.lower() not in inner | ctes), None
    )


def match_clause(
    query: Query,
    table: pa.Table,
    config: Config,
    selection: str | None,
    kleene: str,
    limit: int,
    on_limit: str,
    count_only: bool,
    engine: str,
) -> pa.Table:
    """One MATCH_RECOGNIZE clause over ``table``: its relation (or the match count)."""
    if (twice := duplicate_in_names(table.column_names)) is not None:  # names would be ambiguous
        raise twice
    analysis = analyze(query, table.schema, config.query)
    strict = selection == "strict_contiguity"  # the row-pattern engine over a rewritten query
    if strict:
        analysis = _strict_contiguity(query, table, config)
    use_cer = not strict and (
        engine == "cer"
        or (engine == "auto" and (selection is not None or query.recognize.all_matches))
    )
    if use_cer:
        from dfs_cer.match.cer.engine import run_cer

        result = run_cer(
            table,
            analysis,
            selection=selection or "skip_till_any_match",
            kleene=kleene,
            max_matches=limit,
            on_limit=on_limit,
            count_only=count_only,
            max_steps=config.matcher.max_steps,
        )
    else:
        result = run_row_pattern(
            table,
            analysis,
            max_matches=limit,
            on_limit=on_limit,
            max_steps=config.matcher.max_steps,
            max_seconds=config.matcher.max_seconds,
        )
    return _count_table(result.matches) if count_only else result.table


def _count_table(count: int) -> pa.Table:
    """One row with the exact number of matches (a 38-digit decimal past int64)."""
    if count < 2**63:
        return pa.table({"matches": pa.array([count], pa.int64())})
    from decimal import Decimal

    return pa.table({"matches": pa.array([Decimal(count)], pa.decimal128(38, 0))})


def _strict_contiguity(query: Query, table: pa.Table, config: Config) -> Analysis:
    """Strict contiguity over a sequence of single-event variables: every run of consecutive
    rows labelled in order, i.e. the SQL pattern without skip variables, restarted at every row."""
    from dfs_cer.match.cer.pattern import pattern_items
    from dfs_cer.pattern.ir import Concatenation, Label
    from dfs_cer.query.model import AfterMatchSkip, SkipTo

    first = analyze(query, table.schema, config.query)
    items, unordered = pattern_items(
        query.recognize.pattern, {v.name for v in first.variables if v.any_row}
    )
    if unordered or any(i.kleene or i.negated for i in items):
        raise UnsupportedFeatureError(
            "strict_contiguity is supported for sequences of single-event variables",
            clause="PATTERN",
            code="unsupported",
        )
    pattern = (
        Concatenation(tuple(Label(i.name) for i in items))
        if len(items) > 1
        else Label(items[0].name)
    )
    recognize = dataclasses.replace(
        query.recognize,
        pattern=pattern,
        all_matches=False,
        after_match_skip=AfterMatchSkip(SkipTo.NEXT_ROW),
    )
    return analyze(dataclasses.replace(query, recognize=recognize), table.schema, config.query)


__all__ = ["match_clause", "match_recognize", "run_outer", "run_statement", "sandboxed_duckdb"]
