"""``dfs_cer.spark.match_recognize``: MATCH_RECOGNIZE on Spark, the driver as the compute node.

The driver pulls events with a pull strategy (or Spark reads the parquet itself with the
variables' conditions pushed into the scan), splits them into independent units
(:mod:`dfs_cer.plan.units`), groups the units into balanced tasks and matches each task on an
executor with ``mapInArrow``; small inputs are matched in the driver. The outer
SELECT/WHERE/ORDER BY runs in Spark SQL.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.config import QueryConfig, StorageConfig
from dfs_cer.errors import ConfigError
from dfs_cer.local import RELATION, outer_sql
from dfs_cer.match.columns import HALO
from dfs_cer.match.rowpattern import time_values
from dfs_cer.plan.units import balanced_tasks, unit_starts
from dfs_cer.query import Analysis, Query, analyze, parse
from dfs_cer.query.expr import MatchNumber, walk
from dfs_cer.query.sandbox import check_outer
from dfs_cer.query.validate import require_order_by
from dfs_cer.strategies.base import Trace

TASK = "__dfs_cer_task"
SEQ = "__dfs_cer_seq"  # the driver's row order: ties in time keep it on the executors


def _config(time_unit: str, event_key: Sequence[str] = (), dedup: bool = True) -> QueryConfig:
    if time_unit not in ("ns", "us", "ms", "s"):
        raise ConfigError(f"integer_time_unit must be ns, us, ms or s, got {time_unit!r}")
    return QueryConfig(integer_time_unit=time_unit, event_key=tuple(event_key), dedup=dedup)  # type: ignore[arg-type]


def _engine_output(events: pa.Table, analysis: Analysis, segments: np.ndarray | None) -> pa.Table:
    from dfs_cer.match.cer import run_cer
    from dfs_cer.match.rowpattern import run_row_pattern

    if analysis.query.recognize.all_matches:
        return run_cer(events, analysis).table
    return run_row_pattern(events, analysis, segments=segments).table


def _pushable(analysis: Analysis) -> bool:
    """May the scan keep only rows some variable's condition accepts? Not when PREV/NEXT read
    the rows next to them (the scan has no halo rows)."""
    return analysis.skippable and not (analysis.prev_reach or analysis.next_reach)


def _frame(spark: Any, relation: pa.Table) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    out = relation.cast(_sparkable(relation.schema))
    return spark.createDataFrame(out, schema=from_arrow_schema(out.schema))


def _uses_match_number(query: Query) -> bool:
    mr = query.recognize
    return any(isinstance(node, MatchNumber) for e in [*(m.expr for m in mr.measures),
                                                         *(d.condition for d in mr.definitions)] for node in walk(e))


def _sparkable(schema: pa.Schema) -> pa.Schema:
    """Arrow types Spark accepts back from Python: timestamps in microseconds."""
    fields = [pa.field(f.name, pa.timestamp("us", f.type.tz), f.nullable) if pa.types.is_timestamp(f.type) else f
              for f in schema]
    return pa.schema(fields)


class _Matcher:
    """The picklable per-task function: re-binds the query on the executor and matches its units."""

    def __init__(self, sql: str, schema: pa.Schema, time_unit: str, segments: np.ndarray | None,
                 out_schema: pa.Schema, event_key: tuple[str, ...] = (), dedup: bool = True) -> None:
        self.sql, self.schema, self.time_unit, self.segments = sql, schema, time_unit, segments
        self.out_schema = out_schema
        self.event_key, self.dedup = event_key, dedup

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        analysis = analyze(parse(self.sql), self.schema, _config(self.time_unit, self.event_key, self.dedup))
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        table = pa.Table.from_batches(parts).sort_by(SEQ)
        table = table.drop([TASK, SEQ]).cast(self.schema)
        yield from _engine_output(table, analysis, self.segments).cast(self.out_schema).to_batches()


def match_events(spark: Any, events: pa.Table, analysis: Analysis, *, segments: np.ndarray | None = None,
                 time_unit: str = "s", driver_threshold: int = 100_000, tasks: int | None = None) -> Any:
    """The MATCH_RECOGNIZE relation over ``events`` as a Spark DataFrame (before the outer query)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    query = analysis.query
    mr = query.recognize
    out_schema = _sparkable(_engine_output(events.slice(0, 0), analysis, segments).schema)
    global_numbers = _uses_match_number(query) and not mr.partition_by
    if events.num_rows < driver_threshold or global_numbers:
        # MATCH_NUMBER() without PARTITION BY numbers matches across units: one engine run
        out = _engine_output(events, analysis, segments)
        out = out.cast(_sparkable(out.schema))  # the executors' types: naive timestamps stay TIMESTAMP_NTZ
        return spark.createDataFrame(out, schema=from_arrow_schema(out.schema))
    tasks = tasks or max(2, spark.sparkContext.defaultParallelism)
    seq = pa.array(np.arange(events.num_rows, dtype=np.int64))
    if mr.partition_by:
        task = np.zeros(events.num_rows, np.int64)
        table = events.append_column(TASK, pa.array(task)).append_column(SEQ, seq)
    else:
        ts = time_values(events, mr.order_by[0].column)
        starts = unit_starts(np.sort(ts), analysis.window_units, segments)
        unit = np.searchsorted(starts, ts, side="right") - 1
        task = balanced_tasks(np.bincount(unit, minlength=starts.size), tasks)[unit]
        table = _with_task_halos(events, ts, task, analysis)
    df = spark.createDataFrame(table)
    df = df.repartition(tasks, *mr.partition_by) if mr.partition_by else df.repartitionByRange(tasks, TASK)
    matcher = _Matcher(query.to_sql(), table.drop([TASK, SEQ]).schema, time_unit, segments, out_schema,
                       analysis.event_key, analysis.dedup)
    return df.mapInArrow(matcher, from_arrow_schema(out_schema))


def _with_task_halos(events: pa.Table, ts: np.ndarray, task: np.ndarray, analysis: Analysis) -> pa.Table:
    """The events with their task ids; when the query navigates physically, each task also gets
    the rows PREV/NEXT can read across its time edges (whole tie groups, marked as halo rows:
    read, never matched)."""
    seq = np.arange(events.num_rows, dtype=np.int64)
    plain = events.append_column(TASK, pa.array(task)).append_column(SEQ, pa.array(seq))
    before, after = analysis.prev_reach, analysis.next_reach
    if not (before or after) or events.num_rows == 0 or task.max() == 0:
        return plain
    if HALO not in events.column_names:
        events = events.append_column(HALO, pa.array(np.zeros(events.num_rows, bool)))
        plain = events.append_column(TASK, pa.array(task)).append_column(SEQ, pa.array(seq))
    order = np.argsort(ts, kind="stable")
    sorted_ts, sorted_task = ts[order], task[order]
    pieces = [plain]
    for t in np.unique(sorted_task):
        where = np.nonzero(sorted_task == t)[0]
        lo, hi = int(where[0]), int(where[-1])
        first = int(np.searchsorted(sorted_ts, sorted_ts[max(lo - before, 0)], side="left")) if before else lo
        last = int(np.searchsorted(sorted_ts, sorted_ts[min(hi + after, ts.size - 1)], side="right")) if after \
            else hi + 1
        extra = np.concatenate([np.arange(first, lo), np.arange(hi + 1, last)]).astype(np.int64)
        extra = extra[sorted_task[extra] != t]
        if extra.size == 0:
            continue
        rows = order[extra]
        copy = events.take(pa.array(rows))
        copy = copy.set_column(copy.column_names.index(HALO), HALO, pa.array(np.ones(rows.size, bool)))
        pieces.append(copy.append_column(TASK, pa.array(np.full(rows.size, t, np.int64)))
                      .append_column(SEQ, pa.array(rows)))
    return pa.concat_tables(pieces)


def outer_query(spark: Any, query: Query, relation: Any) -> Any:
    """The SELECT/WHERE/ORDER BY around MATCH_RECOGNIZE, in Spark SQL."""
    sql = outer_sql(query, "spark")
    if sql is None:
        return relation
    view = f"dfs_cer_{uuid.uuid4().hex}"
    sql = sql.replace(RELATION, view)
    check_outer(sql, [view], "spark")  # Spark SQL has no sandbox switch: the check is the sandbox
    relation.createOrReplaceTempView(view)
    return spark.sql(sql)


@dataclass
class Recognition:
    """What :func:`recognize` returns: the matches and how the driver got the events.

    ``trace`` holds the pull's round trips (bytes each way, events, seconds) when the events came
    from storage nodes, and is ``None`` when Spark read the parquet itself (``data=``).
    """

    matches: Any  # pyspark.sql.DataFrame
    trace: Trace | None
    events: int  # events the matchers received
    pull_seconds: float  # driver time to get them (pull or Spark read)


def recognize(spark: Any, sql: str, *, endpoints: Sequence[str] | None = None, token: str | None = None,
              data: str | None = None, strategy: str = "dfs", integer_time_unit: str = "s",
              driver_threshold: int = 100_000, tasks: int | None = None, tables: Mapping[str, Any] | None = None,
              **options: Any) -> Recognition:
    """:func:`match_recognize` with the pull's trace (see :class:`Recognition`)."""
    if (endpoints is None) == (data is None):
        raise ConfigError("give either endpoints=[...] (storage nodes) or data='path' (parquet Spark reads), "
                          "not both or neither")
    if endpoints is not None and token is None:
        raise ConfigError("endpoints need the storage nodes' token: pass token='...'")
    if isinstance(endpoints, str):
        endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
    from dfs_cer.query.parser import parse_statement

    statement = parse_statement(sql)
    if tables or not statement.simple:  # joins, groups, CTEs, several clauses: Spark SQL around them
        from dfs_cer.spark.statements import recognize_statement

        return recognize_statement(spark, statement, endpoints=endpoints, token=token, data=data, strategy=strategy,
                                   integer_time_unit=integer_time_unit, driver_threshold=driver_threshold,
                                   tasks=tasks, tables=tables, options=options)
    query = parse(sql)
    require_order_by(query, "Spark DataFrames")
    segments = None
    trace = None
    started = time.perf_counter()
    if endpoints is not None:
        from dfs_cer.strategies import pull

        assert token is not None
        result = pull(strategy, query, list(endpoints), token, integer_time_unit=integer_time_unit, **options)
        events, analysis, segments, trace = result.events, result.analysis, result.segments, result.trace
        if result.relation is not None:  # matched on the storage nodes: only the outer query is left
            return Recognition(outer_query(spark, query, _frame(spark, result.relation)), trace,
                               result.relation.num_rows, time.perf_counter() - started)
    else:
        unknown = sorted(set(options) - {"event_key", "dedup"})
        if unknown:
            raise ConfigError(f"option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} appl"
                              f"{'y' if len(unknown) > 1 else 'ies'} to storage nodes (endpoints=...); with data= "
                              "the options are event_key and dedup")
        events, analysis = read_with_spark(spark, query, str(data), integer_time_unit,
                                           event_key=options.get("event_key") or (), dedup=options.get("dedup", True))
    pulled = time.perf_counter() - started
    relation = match_events(spark, events, analysis, segments=segments, time_unit=integer_time_unit,
                            driver_threshold=driver_threshold, tasks=tasks)
    return Recognition(outer_query(spark, query, relation), trace, events.num_rows, pulled)


def recognize_many(spark: Any, sqls: Sequence[str], *, endpoints: Sequence[str] | str, token: str,
                   strategy: str = "dfs", integer_time_unit: str = "s", driver_threshold: int = 100_000,
                   tasks: int | None = None, **options: Any) -> list[Recognition]:
    """Several queries over the same storage nodes together (one scan per node, one shared final
    pull; see :mod:`dfs_cer.strategies.multi`): one :class:`Recognition` per query, in order.
    ``pull_seconds`` is the group's (the queries' pulls overlap)."""
    from dfs_cer.strategies.multi import pull_many

    if isinstance(endpoints, str):
        endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
    group = pull_many(strategy, list(sqls), list(endpoints), token, integer_time_unit=integer_time_unit, **options)
    out = []
    for result in group.results:
        if result.relation is not None:  # matched on the storage nodes
            out.append(Recognition(outer_query(spark, result.analysis.query, _frame(spark, result.relation)),
                                   result.trace, result.relation.num_rows, group.seconds))
            continue
        relation = match_events(spark, result.events, result.analysis, segments=result.segments,
                                time_unit=integer_time_unit, driver_threshold=driver_threshold, tasks=tasks)
        out.append(Recognition(outer_query(spark, result.analysis.query, relation), result.trace,
                               result.events.num_rows, group.seconds))
    return out


def match_recognize(spark: Any, sql: str, *, endpoints: Sequence[str] | None = None, token: str | None = None,
                    data: str | None = None, strategy: str = "dfs", integer_time_unit: str = "s",
                    driver_threshold: int = 100_000, tasks: int | None = None,
                    tables: Mapping[str, Any] | None = None, **options: Any) -> Any:
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
    return recognize(spark, sql, endpoints=endpoints, token=token, data=data, strategy=strategy,
                     integer_time_unit=integer_time_unit, driver_threshold=driver_threshold, tasks=tasks,
                     tables=tables, **options).matches


class _PushDown:
    def __init__(self, sql: str, schema: pa.Schema, time_unit: str) -> None:
        self.sql, self.schema, self.time_unit = sql, schema, time_unit

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dfs_cer.query.arrow_filter import union_filter

        analysis = analyze(parse(self.sql), self.schema, _config(self.time_unit))
        filt = union_filter([v.independent for v in analysis.variables if not v.any_row], self.schema)
        for batch in batches:
            if filt is None or batch.num_rows == 0:
                yield batch
            else:
                yield from pa.Table.from_batches([batch]).filter(filt).to_batches()


def read_with_spark(spark: Any, query: Query, path: str, time_unit: str, config: StorageConfig | None = None,
                    event_key: Sequence[str] = (), dedup: bool = True) -> tuple[pa.Table, Analysis]:
    """Read the parquet at ``path`` keeping the rows some variable may label (exact only for
    patterns that may skip rows; contiguous patterns read everything).

    Local paths: Spark scans them and executors apply the conditions. ``s3://``: pyarrow's S3
    filesystem scans them with the conditions as a dataset filter (Spark's s3a needs hadoop-aws
    jars no package registry here provides) and the Arrow batches go to Spark as they are.
    """
    if path.startswith("s3a://"):
        raise ConfigError(f"data={path!r}: use s3://bucket/prefix (read through pyarrow, not s3a)")
    time_column = query.recognize.order_by[0].column
    if path.startswith("s3://"):
        import pyarrow.dataset as ds

        from dfs_cer.config import load_config
        from dfs_cer.errors import StorageError
        from dfs_cer.io.files import filesystem_for, list_files
        from dfs_cer.query.arrow_filter import union_filter

        where = filesystem_for(path, config or load_config().storage)
        files = [where.path] if path.endswith(".parquet") else list_files(where)
        if not files:
            raise StorageError(f"no parquet files under {path}; check the bucket and prefix")
        dataset = ds.dataset(files, filesystem=where.fs, format="parquet")
        analysis = analyze(query, dataset.schema, _config(time_unit, event_key, dedup))
        filt = union_filter([v.independent for v in analysis.variables if not v.any_row], dataset.schema) \
            if _pushable(analysis) else None
        return dataset.to_table(filter=filt).sort_by(time_column), analysis
    df = spark.read.parquet(path)
    schema = df.limit(0).toArrow().schema
    analysis = analyze(query, schema, _config(time_unit, event_key, dedup))
    if _pushable(analysis):
        df = df.mapInArrow(_PushDown(query.to_sql(), schema, time_unit), df.schema)
    table = df.toArrow()
    return table.cast(schema).sort_by(time_column), analysis
