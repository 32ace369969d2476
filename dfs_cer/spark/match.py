"""``dfs_cer.spark.match_recognize``: MATCH_RECOGNIZE on Spark, the driver as the compute node.

The driver plans and the executors do the rest: with ``data=`` the driver reads the parquet
footers and the executors read the row groups; with storage nodes the driver runs the filter
round trips and the executors take the final pull in time slices. Either way the rows go to
exact time chunks (or groups of partitions) that executors match
(:mod:`dfs_cer.spark.distributed`); small inputs are matched in the driver. The outer
SELECT/WHERE/ORDER BY runs in Spark SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.config import Config, MatcherConfig, QueryConfig, StorageConfig
from dfs_cer.errors import ConfigError
from dfs_cer.events.time import time_values
from dfs_cer.local import RELATION, outer_sql
from dfs_cer.query import Analysis, Query, analyze
from dfs_cer.query.sandbox import check_outer
from dfs_cer.spark.distributed import Split
from dfs_cer.strategies.base import Trace


def _config(time_unit: str, event_key: Sequence[str] = (), dedup: bool = True) -> QueryConfig:
    """The query settings an executor binds the query with (checked as settings are)."""
    return QueryConfig(integer_time_unit=time_unit, event_key=tuple(event_key), dedup=dedup)  # type: ignore[arg-type]


def _engine_output(
    events: pa.Table, analysis: Analysis, segments: np.ndarray | None, matcher: MatcherConfig
) -> pa.Table:
    from dfs_cer.spark.distributed import engine_output

    return engine_output(events, analysis, segments, matcher)


def _matcher(matcher: MatcherConfig | None) -> MatcherConfig:
    """The matcher settings given, else the driver's (executors never read their own)."""
    if matcher is not None:
        return matcher
    from dfs_cer.config import load_config

    return load_config().matcher


def _one_run(plan: Any, matcher: MatcherConfig) -> Any:
    """``plan``, or one chunk when the matcher keeps the first ``max_matches`` matches
    (``on_limit = truncate``): which matches are first is decided by one run over every row."""
    if matcher.on_limit != "truncate" or plan.mode == "single":
        return plan
    from dfs_cer.plan.chunks import ChunkPlan

    return ChunkPlan(
        "single",
        np.zeros(1, np.int64),
        reason=f"matcher.on_limit = truncate keeps the first {matcher.max_matches:,} matches of "
        "one run over every row",
    )


def _pushable(analysis: Analysis) -> bool:
    """May the scan keep only rows some variable's condition accepts? Not when PREV/NEXT read
    the rows next to them (the scan has no halo rows)."""
    return analysis.skippable and not (analysis.prev_reach or analysis.next_reach)


def _frame(spark: Any, relation: pa.Table) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    out = relation.cast(_sparkable(relation.schema))
    return spark.createDataFrame(out, schema=from_arrow_schema(out.schema))


def _sparkable(schema: pa.Schema) -> pa.Schema:
    """Arrow types Spark accepts back from Python: timestamps in microseconds."""
    fields = [
        pa.field(f.name, pa.timestamp("us", f.type.tz), f.nullable)
        if pa.types.is_timestamp(f.type)
        else f
        for f in schema
    ]
    return pa.schema(fields)


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """Types every path of Spark reads back the same way: large strings, string views and
    dictionaries of strings as strings (pandas 3 writes large strings), large binaries and
    binary views as binaries."""
    fields = []
    for f in schema:
        kind = f.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
            kind = pa.string()
        elif pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
            kind = pa.binary()
        fields.append(pa.field(f.name, kind, f.nullable, f.metadata))
    return pa.schema(fields, metadata=schema.metadata)


def plain_table(table: pa.Table) -> pa.Table:
    target = plain_schema(table.schema)
    return table if target.equals(table.schema) else table.cast(target)


def _chunks(spark: Any, tasks: int | None) -> int:
    """Time chunks per run: a few per core, so a chunk re-run or a dense hour does not leave
    cores idle."""
    return 3 * (tasks or max(2, spark.sparkContext.defaultParallelism))


def match_events(
    spark: Any,
    events: pa.Table,
    analysis: Analysis,
    *,
    segments: np.ndarray | None = None,
    time_unit: str = "s",
    driver_threshold: int = 100_000,
    tasks: int | None = None,
    matcher: MatcherConfig | None = None,
) -> Any:
    """The MATCH_RECOGNIZE relation over ``events`` (a table the driver holds) as a Spark
    DataFrame (before the outer query): small inputs are matched in the driver, the rest in
    exact time chunks (or groups of partitions) on the executors, every engine run with the
    ``matcher`` settings (None: the driver's, :func:`~dfs_cer.config.load_config`)."""
    return match_events_split(
        spark,
        events,
        analysis,
        segments=segments,
        time_unit=time_unit,
        driver_threshold=driver_threshold,
        tasks=tasks,
        matcher=matcher,
    )[0]


def match_events_split(
    spark: Any,
    events: pa.Table,
    analysis: Analysis,
    *,
    segments: np.ndarray | None = None,
    time_unit: str = "s",
    driver_threshold: int = 100_000,
    tasks: int | None = None,
    matcher: MatcherConfig | None = None,
) -> tuple[Any, Split | None]:
    """:func:`match_events` and how the input was split (None: matched in the driver)."""
    from dfs_cer.plan.chunks import plan_chunks
    from dfs_cer.spark.distributed import Bound, emit_table, run_chunks

    matcher = _matcher(matcher)
    if events.num_rows < driver_threshold:
        return _frame(spark, _engine_output(events, analysis, segments, matcher)), None
    mins, maxs, rows = _blocks(events, analysis)
    plan = plan_chunks(
        analysis,
        mins=mins,
        maxs=maxs,
        rows=rows,
        chunks=_chunks(spark, tasks),
        nulls=events.column(analysis.query.recognize.order_by[0].column).null_count
        if analysis.query.recognize.order_by
        else 0,
    )
    plan = _one_run(plan, matcher)
    bound = Bound(
        analysis.query.to_sql(),
        events.schema,
        _config(time_unit, analysis.event_key, analysis.dedup),
        matcher,
    )
    return run_chunks(spark, emit_table(spark, events, bound), bound, plan, segments, tasks)


def _blocks(events: pa.Table, analysis: Analysis) -> tuple[list[int], list[int], list[int]]:
    """Per-block time ranges of a table the driver holds (the planner's statistics)."""
    mr = analysis.query.recognize
    if not mr.order_by or events.num_rows == 0:
        return [], [], []
    try:
        ts = np.sort(
            time_values(
                events.filter(pc.is_valid(events.column(mr.order_by[0].column))),
                mr.order_by[0].column,
            )
        )
    except (TypeError, ValueError, pa.ArrowException):
        return [], [], []
    if ts.size == 0:
        return [], [], []
    pieces = np.array_split(ts, min(256, ts.size))
    return [int(p[0]) for p in pieces], [int(p[-1]) for p in pieces], [int(p.size) for p in pieces]


def outer_query(
    spark: Any,
    query: Query,
    relation: Any,
    deadline: float | None = None,
    config: Config | None = None,
) -> Any:
    """The SELECT/WHERE/ORDER BY around MATCH_RECOGNIZE, in Spark SQL, computed by ``deadline``
    (``time.monotonic()``; None: ``strategy.query_timeout_seconds`` from now) with its strings
    bounded by ``config``'s ``query.outer_memory_limit`` (:mod:`dfs_cer.spark.outer`; default:
    the loaded settings)."""
    from dfs_cer.spark.outer import computed, deadline_of, guarded

    sql = outer_sql(query, "spark")
    if sql is None:
        return relation
    view = f"dfs_cer_{uuid.uuid4().hex}"
    sql = sql.replace(RELATION, view)
    check_outer(sql, [view], "spark")  # Spark SQL has no sandbox switch: the check is the sandbox
    relation.createOrReplaceTempView(view)
    frame = spark.sql(guarded(spark, sql, config))
    strategy = None if config is None else config.strategy
    return computed(spark, frame, deadline_of(None, strategy) if deadline is None else deadline)


@dataclass
class Recognition:
    """What :func:`recognize` returns: the matches and how the driver got the events.

    ``trace`` holds the pull's round trips (bytes each way, events, seconds) when the events came
    from storage nodes, and is ``None`` when the executors read the parquet themselves (``data=``).
    """

    matches: Any  # pyspark.sql.DataFrame
    trace: Trace | None
    events: int  # events the matchers received
    pull_seconds: (
        float  # driver time to get them (the pull; with data=, reading footers and matching)
    )
    #: how the executors split the input (chunks, re-runs, what the driver collected); None when
    #: the driver matched a small input itself or the storage nodes matched
    split: Split | None = None


def match_deferred(spark: Any, result: Any, time_unit: str, tasks: int | None) -> tuple[Any, Split]:
    """Executors take a deferred final pull in time slices and match the chunks; the query is
    closed on every node when the matches are in (or anything failed), and the trace gets the
    executors' transfers. The relation is computed (cached) before this returns."""
    from dfs_cer.plan.chunks import plan_chunks
    from dfs_cer.spark.distributed import Bound, SlicePuller, emit_units, pull_slices, run_chunks

    deferred, analysis = result.deferred, result.analysis
    try:
        span = deferred.span or (0, 0)
        # the nodes report bounds of their shards, not of the rows the pull will bring
        plan = plan_chunks(
            analysis,
            mins=[span[0]],
            maxs=[span[1]],
            rows=[max(1, deferred.session.rows_total)],
            chunks=_chunks(spark, tasks),
            exact=False,
        )
        matcher = _matcher(result.config.matcher if result.config is not None else None)
        plan = _one_run(plan, matcher)
        slices = pull_slices(plan, span, _chunks(spark, tasks))
        bound = Bound(
            analysis.query.to_sql(),
            result.events.schema,
            _config(time_unit, analysis.event_key, analysis.dedup),
            matcher,
        )
        load = SlicePuller(deferred, slices, bound.schema)
        units = spark.range(0, len(slices), 1, numPartitions=max(1, len(slices)))

        def narrow(p: Any, chunks: Sequence[int]) -> Any:
            ranges = [p.reads(k) for k in chunks]
            ids = [
                i
                for i, (lo, hi) in enumerate(slices)
                if any(hi >= a and lo <= b for a, b in ranges)
            ]
            return spark.createDataFrame([(i,) for i in ids], "id long").repartition(
                max(1, len(ids))
            )

        relation, split = run_chunks(
            spark,
            emit_units(units, load, bound, narrow),
            bound,
            plan,
            result.segments,
            tasks,
            direct=load,
        )
        if split.transfers:
            to_sn, to_cn, rows, seconds, calls = split.transfers
            deferred.account(int(to_sn), int(to_cn), int(rows), seconds, int(calls))
        return relation, split
    finally:
        deferred.close()


class RowGroupLoader:
    """Reads one parquet row group on an executor (local path or ``s3://`` through pyarrow),
    keeping the rows some variable may label when the pattern allows."""

    def __init__(
        self,
        uri: str,
        config: StorageConfig,
        groups: Sequence[Any],
        bound: Any,
        push: bool,
        table: Any = None,
    ) -> None:
        self.uri, self.config, self.groups, self.bound, self.push = (
            uri,
            config,
            list(groups),
            bound,
            push,
        )
        #: a table served in place (its TablePlan): files read through pyarrow, matched by field id
        self.table = table
        self._where: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_where"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._where = None

    def __call__(self, unit: int) -> pa.Table:
        from dfs_cer.io.files import filesystem_for
        from dfs_cer.io.rowgroups import read_row_group
        from dfs_cer.query.arrow_filter import union_filter

        analysis = self.bound.analysis
        condition = (
            union_filter(
                [v.independent for v in analysis.variables if not v.any_row], self.bound.schema
            )
            if self.push
            else None
        )
        if self.table is not None:
            from dfs_cer.io.tables import read_data_file

            group = self.groups[unit]
            f = next(f for f in self.table.files if f.path == group.file)
            rows = plain_table(read_data_file(self.table, f, row_group=group.index))
            return rows.filter(condition) if condition is not None else rows
        if self._where is None:
            self._where = filesystem_for(self.uri, self.config)
        return read_row_group(self._where, self.groups[unit], self.bound.schema, condition)

    def chunk(self, plan: Any, k: int) -> pa.Table:
        """Chunk ``k``'s rows: the row groups whose time range meets its read range, cut to it."""
        lo, hi = plan.reads(k)
        ids = overlapping(self.groups, [(lo, hi)])
        tables = [t for t in (self(i) for i in ids) if t.num_rows]
        if not tables:
            return self.bound.schema.empty_table()
        table = pa.concat_tables(tables)
        ts = time_values(table, self.bound.analysis.query.recognize.order_by[0].column)
        return table.filter(pa.array((ts >= lo) & (ts <= hi)))


def overlapping(groups: Sequence[Any], ranges: Sequence[tuple[int, int]]) -> list[int]:
    """Indexes of the row groups whose time range meets one of ``ranges`` (or that have no
    statistics)."""
    return [
        i
        for i, g in enumerate(groups)
        if g.first is None
        or g.last is None
        or any(g.last >= lo and g.first <= hi for lo, hi in ranges)
    ]


def match_data(
    spark: Any,
    query: Query,
    path: str,
    settings: Config,
    *,
    driver_threshold: int = 100_000,
    tasks: int | None = None,
) -> tuple[Any, Analysis, Split | None, int]:
    """The MATCH_RECOGNIZE relation over the parquet at ``path`` (a file or a directory, local or
    ``s3://``, or a table: ``iceberg://...``, ``hive:...``), read by the executors row group by
    row group: the driver reads the footers (and a table's metadata) only. ``settings``: the
    query's (``query.*``), the matcher's, and where files are (``storage``, ``tables``).
    Returns the relation, the analysis, how the input was split (None: a small input matched in
    the driver) and the rows in the files."""
    import os
    from dataclasses import replace

    from dfs_cer.io.rowgroups import list_row_groups, location_files
    from dfs_cer.io.tables import is_table
    from dfs_cer.plan.chunks import plan_chunks
    from dfs_cer.spark.distributed import Bound, emit_units, run_chunks

    if path.startswith("s3a://"):
        raise ConfigError(f"data={path!r}: use s3://bucket/prefix (read through pyarrow, not s3a)")
    storage, matcher = settings.storage, settings.matcher
    if path.startswith("s3://") and not storage.s3_endpoint and os.environ.get("AWS_ENDPOINT_URL"):
        storage = replace(
            storage, s3_endpoint=os.environ["AWS_ENDPOINT_URL"]
        )  # executors see the driver's endpoint
    time_column = query.recognize.order_by[0].column
    table = None
    if is_table(path):  # planned here (pyiceberg on the driver only); executors read the files
        from dfs_cer.io.tables import plan_table, table_row_groups

        table = plan_table(path, tables=settings.tables, storage=storage)
        schema, groups = plain_schema(table.schema), table_row_groups(table, time_column)
    else:
        if not path.startswith("s3://"):
            path = os.path.abspath(path)
        where, files = location_files(path, storage)
        schema, groups = list_row_groups(where, files, time_column)
        schema = plain_schema(schema)  # read_row_group casts each row group to it
    qconfig = settings.query
    analysis = analyze(query, schema, qconfig)
    total = sum(g.rows for g in groups)
    bound = Bound(query.to_sql(), schema, qconfig, matcher)
    load = RowGroupLoader(path, storage, groups, bound, _pushable(analysis), table)
    if total < driver_threshold:  # small: read and match in the driver
        events = (
            pa.concat_tables([load(i) for i in range(len(groups))])
            if groups
            else schema.empty_table()
        )
        return (
            _frame(spark, _engine_output(events, analysis, None, matcher)),
            analysis,
            None,
            total,
        )
    known = [g for g in groups if g.first is not None and g.last is not None]
    plan = plan_chunks(
        analysis,
        mins=[int(g.first or 0) for g in known],
        maxs=[int(g.last or 0) for g in known],
        rows=[g.rows for g in known],
        chunks=_chunks(spark, tasks),
        nulls=sum(g.nulls or 0 for g in groups),
    )
    plan = _one_run(plan, matcher)
    if len(known) < len(groups) and plan.mode == "time":
        from dfs_cer.plan.chunks import ChunkPlan

        plan = ChunkPlan(
            "single",
            np.zeros(1, np.int64),
            reason="the parquet footers lack the time column's "
            "statistics (write them, e.g. pyarrow's default, to split the input)",
        )
    units = spark.range(0, len(groups), 1, numPartitions=max(1, len(groups)))

    def narrow(p: Any, chunks: Sequence[int]) -> Any:
        ids = overlapping(groups, [p.reads(k) for k in chunks])
        return (
            spark.range(0, 0, 1, 1)
            if not ids
            else spark.createDataFrame([(i,) for i in ids], "id long").repartition(max(1, len(ids)))
        )

    # each task reads its own chunk's row groups when the files are about in time order (a row
    # group is read by a few chunks at most: decoding is cheap next to a shuffle); else the row
    # groups are read once and shuffled to the chunks
    direct = None
    if plan.mode == "time":
        read = sum(
            groups[i].rows for k in range(plan.chunks) for i in overlapping(groups, [plan.reads(k)])
        )
        direct = load if read <= 3.0 * max(total, 1) else None
    relation, split = run_chunks(
        spark, emit_units(units, load, bound, narrow), bound, plan, None, tasks, direct=direct
    )
    return relation, analysis, split, total
