"""Whole statements on Spark: each MATCH_RECOGNIZE clause becomes a DataFrame (pulled from the
storage nodes, read from ``data=``, or matched over a registered table or a subquery's rows),
the statement around the clauses runs in Spark SQL over temporary views with fresh names (the
session's own views are untouched), after the same sandbox check as the embedded engine, and is
computed by the query's deadline (:mod:`dfs_cer.spark.outer`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from dfs_cer.config import Config
from dfs_cer.errors import ConfigError
from dfs_cer.query import analyze
from dfs_cer.query.statement import OUTER_DIALECT, Statement
from dfs_cer.query.validate import require_order_by
from dfs_cer.spark.match import Recognition, _frame, match_data, match_events
from dfs_cer.spark.outer import computed, deadline_of, within
from dfs_cer.spark.session import sandboxed_sql
from dfs_cer.strategies.base import Trace


def _arrow_of(spark_frame: Any) -> pa.Table:
    return (
        spark_frame.toArrow()
        if hasattr(spark_frame, "toArrow")
        else pa.Table.from_pandas(spark_frame.toPandas(), preserve_index=False)
    )


def _renamed(sql: str, names: Mapping[str, str]) -> str:
    """``sql`` (generic dialect) in Spark SQL with the tables in ``names`` read from their views."""
    tree = sqlglot.parse_one(sql, read=OUTER_DIALECT)

    def swap(node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Table)
            and isinstance(node.this, exp.Identifier)
            and node.name.lower() in names
        ):
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
            return exp.Table(this=exp.to_identifier(names[node.name.lower()]), alias=alias)
        return node

    return tree.transform(swap).sql(dialect="spark")


def recognize_statement(
    spark: Any,
    statement: Statement,
    *,
    endpoints: Sequence[str] | None,
    token: str | None,
    data: str | None,
    strategy: str,
    settings: Config,
    driver_threshold: int,
    tasks: int | None,
    tables: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> Any:
    """The statement's result as a DataFrame and the traces of its pulls (see
    :func:`dfs_cer.spark.api.recognize`)."""
    from dfs_cer.local import as_arrow

    started = time.perf_counter()
    deadline = deadline_of(options.get("timeout"), settings.strategy)
    tag = uuid.uuid4().hex[:12]
    views: dict[str, str] = {}  # lower-case name the statement reads -> temp view
    frames: dict[str, Any] = {}

    def register(name: str, frame: Any) -> None:
        view = f"dfs_cer_{tag}_{len(views)}"
        frame.createOrReplaceTempView(view)
        views[name.lower()] = view
        frames[name.lower()] = frame

    for p in statement.parts:
        require_order_by(p.query, "Spark DataFrames")
    for name, value in (tables or {}).items():
        register(
            name,
            value
            if hasattr(value, "createOrReplaceTempView")
            else _frame(spark, as_arrow(name, value)),
        )
    from dfs_cer.strategies.statements import (
        check_remote,
        plan_statement,
        pull_pushed,
        whole_table_query,
    )

    plan = plan_statement(statement, set(views))
    if endpoints is not None and token is not None:
        check_remote(plan, endpoints, token)
    if (
        endpoints is None
    ):  # data=: Spark reads the files and pushes the subquery's filters into its own scan
        plan.pushed = []
    remote = plan.remote
    traces: list[Trace] = []
    events_seen = 0
    integer_time_unit = settings.query.integer_time_unit
    matcher = settings.matcher

    def match_arrow(query: Any, events: pa.Table) -> Any:
        analysis = analyze(query, events.schema, settings.query)
        return match_events(
            spark,
            events,
            analysis,
            time_unit=integer_time_unit,
            driver_threshold=driver_threshold,
            tasks=tasks,
            matcher=matcher,
        )

    def pulled_relation(result: Any, part: Any) -> Any:
        nonlocal events_seen
        result.trace.source = f"clause {statement.parts.index(part) + 1}"
        traces.append(result.trace)
        if result.relation is not None:  # matched on the storage nodes
            events_seen += result.relation.num_rows
            return _frame(spark, result.relation)
        events_seen += result.events.num_rows
        return match_events(
            spark,
            result.events,
            result.analysis,
            segments=result.segments,
            time_unit=integer_time_unit,
            driver_threshold=driver_threshold,
            tasks=tasks,
            matcher=matcher,
        )

    def remote_relation(part: Any) -> Any:
        query = part.query
        nonlocal events_seen
        if endpoints is not None:
            from dfs_cer.strategies import pull

            assert token is not None
            return pulled_relation(
                pull(
                    strategy,
                    query,
                    list(endpoints),
                    token,
                    config=settings,
                    **options,
                ),
                part,
            )
        assert data is not None
        relation, _, split, rows = match_data(
            spark, query, data, settings, driver_threshold=driver_threshold, tasks=tasks
        )
        events_seen += split.events if split else rows
        return relation

    early: dict[
        str, Any
    ] = {}  # parts pulled with their input's filter applied on the storage nodes
    for part in plan.pushed:
        assert endpoints is not None and token is not None
        result = pull_pushed(
            plan,
            part,
            strategy,
            list(endpoints),
            token,
            config=settings,
            **options,
        )
        if result is not None:
            early[part.relation] = pulled_relation(result, part)
    for name in plan.whole(
        statement
    ):  # read outside a clause: every row of the nodes' table / data=
        if endpoints is not None:
            from dfs_cer.strategies import pull

            assert token is not None
            result = pull(
                "pull_all",
                whole_table_query(name, list(endpoints), token),
                list(endpoints),
                token,
                config=settings,
                **options,
            )
            result.trace.fallback = plan.fallback(name)
            result.trace.source = f"table {name!r}"
            traces.append(result.trace)
            register(name, _frame(spark, result.events))
        else:
            assert data is not None
            if data.startswith("s3://"):
                raise ConfigError(
                    f"the query reads {name!r} outside a MATCH_RECOGNIZE clause; with "
                    "data='s3://...' register it with tables={...} (e.g. a DataFrame you read)"
                )
            register(name, spark.read.parquet(data))
    pending = list(statement.parts)
    while pending:
        ready = [p for p in pending if all(d.lower() in views for d in p.depends)]
        if not ready:
            raise ConfigError("MATCH_RECOGNIZE clauses read each other's relations in a cycle")
        for part in ready:
            if part.relation in early:
                relation = early[part.relation]
            elif part.input_sql is not None:
                sql = _renamed(part.input_sql, views)
                with within(spark, deadline):
                    rows = _arrow_of(sandboxed_sql(spark, sql, views.values(), settings))
                relation = match_arrow(part.query, rows)
            elif part.query.table.lower() in remote:
                relation = remote_relation(part)
            else:
                relation = match_arrow(part.query, _arrow_of(frames[part.query.table.lower()]))
            register(part.relation, relation)
            pending.remove(part)
    missing = [t for t in statement.outer_tables if t.lower() not in views]
    if missing:
        raise ConfigError(
            f"the query reads table(s) {', '.join(repr(t) for t in missing)}, which are not "
            "registered; pass tables={'name': DataFrame}"
        )
    sql = _renamed(statement.sql, views)
    from dfs_cer.strategies.statements import merged_trace

    trace = merged_trace(traces, strategy) if traces else None
    result = computed(spark, sandboxed_sql(spark, sql, views.values(), settings), deadline)
    return Recognition(result, trace, events_seen, time.perf_counter() - started)
