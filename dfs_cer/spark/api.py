"""Spark entry points: a query's text to a DataFrame, through storage nodes or a parquet path;
statements with more than one plain clause go to :mod:`dfs_cer.spark.statements`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from dfs_cer.config import Config, StrategyConfig
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
    strategy: str | None = None,
    config: Config | StrategyConfig | None = None,
    integer_time_unit: str | None = None,
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
    settings, strategy, options = resolve_settings(config, strategy, integer_time_unit, options)
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
            settings=settings,
            driver_threshold=driver_threshold,
            tasks=tasks,
            tables=tables,
            options=options,
        )
    unit = settings.query.integer_time_unit
    query = parse(sql)
    require_order_by(query, "Spark DataFrames")
    deadline = deadline_of(options.get("timeout"), settings.strategy)
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
            config=settings,
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
                outer_query(spark, query, _frame(spark, result.relation), deadline, settings),
                trace,
                result.relation.num_rows,
                time.perf_counter() - started,
            )
        if result.deferred is not None:  # executors take the final pull
            relation, taken = match_deferred(spark, result, unit, tasks)
            return Recognition(
                outer_query(spark, query, relation, deadline, settings),
                trace,
                taken.events,
                time.perf_counter() - started,
                taken,
            )
    else:
        data_only(options)
        relation, analysis, read, rows = match_data(
            spark,
            query,
            str(data),
            settings,
            driver_threshold=driver_threshold,
            tasks=tasks,
        )
        return Recognition(
            outer_query(spark, query, relation, deadline, settings),
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
        time_unit=unit,
        driver_threshold=driver_threshold,
        tasks=tasks,
        matcher=settings.matcher,
    )
    return Recognition(
        outer_query(spark, query, relation, deadline, settings),
        trace,
        events.num_rows,
        pulled,
        split,
    )


def resolve_settings(
    config: Config | StrategyConfig | None,
    strategy: str | None,
    integer_time_unit: str | None,
    options: Mapping[str, Any],
) -> tuple[Config, str, dict[str, Any]]:
    """The settings a Spark query runs with (on the driver: executors get them with the query,
    never read their own): ``config`` (None: :func:`~dfs_cer.config.load_config`) with the
    arguments given winning over it (``integer_time_unit``, and ``event_key`` / ``dedup`` among
    the ``options``); the strategy (``strategy.default`` when None); the other options."""
    from dfs_cer.strategies.request import settings_of

    rest = dict(options)
    event_key = rest.pop("event_key", None)
    if isinstance(event_key, str):  # one column named as a string
        event_key = (event_key,)
    dedup = rest.pop("dedup", None)
    if dedup is not None and not isinstance(dedup, bool):
        raise ConfigError(f"dedup must be True or False, got {dedup!r}")
    settings = settings_of(config).with_values(
        {
            "query": {
                "integer_time_unit": integer_time_unit,
                "event_key": event_key,
                "dedup": dedup,
            }
        }
    )
    return settings, strategy or settings.strategy.default, rest


def data_only(options: Mapping[str, Any]) -> None:
    """With ``data=`` no option is left to a pull strategy (``timeout`` bounds the SQL around
    the clause)."""
    unknown = sorted(set(options) - {"timeout"})
    if unknown:
        raise ConfigError(
            f"option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"appl{'y' if len(unknown) > 1 else 'ies'} to storage nodes (endpoints=...); with "
            "data= the options are event_key, dedup and timeout (the SQL around the clause), and "
            "config="
        )


@cancels_jobs
def recognize_many(
    spark: Any,
    sqls: Sequence[str],
    *,
    endpoints: Sequence[str] | str,
    token: str,
    strategy: str | None = None,
    config: Config | StrategyConfig | None = None,
    integer_time_unit: str | None = None,
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
    settings, strategy, options = resolve_settings(config, strategy, integer_time_unit, options)
    group = pull_many(strategy, list(sqls), list(endpoints), token, config=settings, **options)
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
                        settings,
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
            time_unit=settings.query.integer_time_unit,
            driver_threshold=driver_threshold,
            tasks=tasks,
            matcher=settings.matcher,
        )
        out.append(
            Recognition(
                outer_query(spark, result.analysis.query, relation, result.deadline, settings),
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
    strategy: str | None = None,
    config: Config | StrategyConfig | None = None,
    integer_time_unit: str | None = None,
    driver_threshold: int = 100_000,
    tasks: int | None = None,
    tables: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """Evaluate ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` on Spark and return a DataFrame.

    Args:
        endpoints, token: storage nodes to pull from with ``strategy`` (the driver is the
            compute node; ``options`` go to the strategy, e.g. ``cost_model``; default
            strategy: ``strategy.default``).
        config: the settings (a :class:`~dfs_cer.config.Config`; default
            :func:`~dfs_cer.config.load_config` on the driver: the ``DFS_CER_CONFIG`` file and
            ``DFS_CER__*`` variables over the defaults). ``query.*``, ``strategy.*`` and
            ``matcher.*`` apply as in :func:`dfs_cer.match_recognize` and ``dfs-cer query``;
            executors receive them with the query. ``integer_time_unit``, ``event_key`` and
            ``dedup`` (and the strategy's options) given here win over it.
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
        config=config,
        integer_time_unit=integer_time_unit,
        driver_threshold=driver_threshold,
        tasks=tasks,
        tables=tables,
        **options,
    ).matches
