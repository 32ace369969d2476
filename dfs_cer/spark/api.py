"""Spark entry points: a query's text to a DataFrame, through storage nodes or a parquet path;
statements with more than one plain clause go to :mod:`dfs_cer.spark.statements`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from dfs_cer.errors import ConfigError
from dfs_cer.query import parse
from dfs_cer.query.validate import require_order_by
from dfs_cer.spark.match import (
    Recognition,
    _frame,
    match_data,
    match_deferred,
    match_events,
    match_events_split,
    outer_query,
)
from dfs_cer.spark.outer import deadline_of
from dfs_cer.spark.session import cancels_jobs
from dfs_cer.spark.statements import recognize_statement


@cancels_jobs
def recognize(
    spark: Any,
    sql: str,
    *,
    endpoints: Sequence[str] | None = None,
    token: str | None = None,
    data: str | None = None,
    strategy: str = "dfs",
    integer_time_unit: str = "s",
    driver_threshold: int = 100_000,
    tasks: int | None = None,
    tables: Mapping[str, Any] | None = None,
    **options: Any,
) -> Recognition:
    """:func:`match_recognize` with the pull's trace (see :class:`Recognition`)."""
    if (endpoints is None) == (data is None):
        raise ConfigError(
            "give either endpoints=[...] (storage nodes) or data='path' (parquet Spark reads), "
            "not both or neither"
        )
    if endpoints is not None and token is None:
        raise ConfigError("endpoints need the storage nodes' token: pass token='...'")
    if isinstance(endpoints, str):
        endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
    from dfs_cer.query.parser import parse_statement

    statement = parse_statement(sql)
    if (
        tables or not statement.simple
    ):  # joins, groups, CTEs, several clauses: Spark SQL around them
        return recognize_statement(
            spark,
            statement,
            endpoints=endpoints,
            token=token,
            data=data,
            strategy=strategy,
            integer_time_unit=integer_time_unit,
            driver_threshold=driver_threshold,
            tasks=tasks,
            tables=tables,
            options=options,
        )
    query = parse(sql)
    require_order_by(query, "Spark DataFrames")
    deadline = deadline_of(options.get("timeout"), options.get("config"))
    segments = None
    trace = None
    started = time.perf_counter()
    if endpoints is not None:
        from dfs_cer.strategies import pull

        assert token is not None
        result = pull(
            strategy,
            query,
            list(endpoints),
            token,
            integer_time_unit=integer_time_unit,
            defer=True,
            defer_min_rows=driver_threshold,
            **options,
        )
        events, analysis, segments, trace = (
            result.events,
            result.analysis,
            result.segments,
            result.trace,
        )
        if (
            result.relation is not None
        ):  # matched on the storage nodes: only the outer query is left
            return Recognition(
                outer_query(spark, query, _frame(spark, result.relation), deadline),
                trace,
                result.relation.num_rows,
                time.perf_counter() - started,
            )
        if result.deferred is not None:  # executors take the final pull
            relation, taken = match_deferred(spark, result, integer_time_unit, tasks)
            return Recognition(
                outer_query(spark, query, relation, deadline),
                trace,
                taken.events,
                time.perf_counter() - started,
                taken,
            )
    else:
        unknown = sorted(set(options) - {"event_key", "dedup", "timeout"})
        if unknown:
            raise ConfigError(
                f"option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                f"appl{'y' if len(unknown) > 1 else 'ies'} to storage nodes (endpoints=...); with "
                "data= the options are event_key, dedup and timeout (the SQL around the clause)"
            )
        relation, analysis, read, rows = match_data(
            spark,
            query,
            str(data),
            integer_time_unit,
            event_key=options.get("event_key") or (),
            dedup=options.get("dedup", True),
            driver_threshold=driver_threshold,
            tasks=tasks,
        )
        return Recognition(
            outer_query(spark, query, relation, deadline),
            None,
            read.events if read else rows,
            time.perf_counter() - started,
            read,
        )
    pulled = time.perf_counter() - started
    relation, split = match_events_split(
        spark,
        events,
        analysis,
        segments=segments,
        time_unit=integer_time_unit,
        driver_threshold=driver_threshold,
        tasks=tasks,
    )
    return Recognition(
        outer_query(spark, query, relation, deadline), trace, events.num_rows, pulled, split
    )


@cancels_jobs
def recognize_many(
    spark: Any,
    sqls: Sequence[str],
    *,
    endpoints: Sequence[str] | str,
    token: str,
    strategy: str = "dfs",
    integer_time_unit: str = "s",
    driver_threshold: int = 100_000,
    tasks: int | None = None,
    **options: Any,
) -> list[Recognition]:
    """Several queries over the same storage nodes together (one scan per node, one shared final
    pull; see :mod:`dfs_cer.strategies.multi`): one :class:`Recognition` per query, in order.
    ``pull_seconds`` is the group's (the queries' pulls overlap)."""
    from dfs_cer.strategies.multi import pull_many

    if isinstance(endpoints, str):
        endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
    group = pull_many(
        strategy, list(sqls), list(endpoints), token, integer_time_unit=integer_time_unit, **options
    )
    out = []
    for result in group.results:
        if result.relation is not None:  # matched on the storage nodes
            out.append(
                Recognition(
                    outer_query(
                        spark,
                        result.analysis.query,
                        _frame(spark, result.relation),
                        result.deadline,
                    ),
                    result.trace,
                    result.relation.num_rows,
                    group.seconds,
                )
            )
            continue
        relation = match_events(
            spark,
            result.events,
            result.analysis,
            segments=result.segments,
            time_unit=integer_time_unit,
            driver_threshold=driver_threshold,
            tasks=tasks,
        )
        out.append(
            Recognition(
                outer_query(spark, result.analysis.query, relation, result.deadline),
                result.trace,
                result.events.num_rows,
                group.seconds,
            )
        )
    return out


def match_recognize(
    spark: Any,
    sql: str,
    *,
    endpoints: Sequence[str] | None = None,
    token: str | None = None,
    data: str | None = None,
    strategy: str = "dfs",
    integer_time_unit: str = "s",
    driver_threshold: int = 100_000,
    tasks: int | None = None,
    tables: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """Evaluate ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` on Spark and return a DataFrame.

    Args:
        endpoints, token: storage nodes to pull from with ``strategy`` (the driver is the
            compute node; ``options`` go to the strategy, e.g. ``cost_model``).
        data: instead of storage nodes, a parquet file or directory (local or ``s3://``) Spark
            reads itself, with the variables' conditions applied in the scan (push-down).
        driver_threshold: inputs with fewer events are matched in the driver.
        tasks: matching tasks (default: Spark's default parallelism, at least 2).
        tables: more tables the statement reads, by name (Spark DataFrames, Arrow tables or
            pandas DataFrames); the SQL around the MATCH_RECOGNIZE clauses (joins, GROUP BY,
            CTEs, several clauses) runs in Spark SQL over them.

    The result equals :func:`dfs_cer.match_recognize` on the same events. Use
    :func:`recognize` to also get the round trips.
    """
    return recognize(
        spark,
        sql,
        endpoints=endpoints,
        token=token,
        data=data,
        strategy=strategy,
        integer_time_unit=integer_time_unit,
        driver_threshold=driver_threshold,
        tasks=tasks,
        tables=tables,
        **options,
    ).matches
