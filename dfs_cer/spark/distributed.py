"""Matching on the executors, the input never in the driver.

The input arrives on the executors in units (parquet row groups they read themselves, or slices
of a table the caller already holds); each unit's rows go, as Arrow IPC payloads, to the chunks
whose read range holds them (:mod:`dfs_cer.plan.chunks`: time chunks overlapping by the window,
groups of whole partitions, or one chunk); ``groupBy(chunk).applyInArrow`` matches each chunk.
The driver receives only the chunks' reports (a few rows per chunk boundary a match crosses),
re-runs the chunks the single run would have matched from another position, and returns the
union of the final chunks' matches as a DataFrame.
"""

from __future__ import annotations

import itertools
import pickle
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.config import MatcherConfig
from dfs_cer.plan.chunks import ChunkPlan, Part, Report, State, assign, pick_reports, settle
from dfs_cer.query import Analysis, analyze, parse

TASK = "__dfs_cer_task"
# the Spark partition a chunk goes to: one chunk per partition, no hash collisions
SLOT = "__dfs_cer_slot"
PAYLOAD = "__dfs_cer_payload"
CHUNK = "__dfs_cer_chunk"
REPORT = "__dfs_cer_report"
MAX_ROUNDS = 32
PAYLOAD_ROWS = 65_536  # rows per shuffled payload (each is one Spark value)
STATS = -1  # the task id of loaders' transfer statistics (not a chunk)


@dataclass
class Split:
    """How a distributed run went: the plan, the chunks re-run, and what the driver received."""

    mode: str
    chunks: int
    reason: str | None
    reruns: int = 0
    rounds: int = 1
    widened: bool = False
    #: rows the driver collected (chunk reports): never the input
    driver_rows: int = 0
    events: int = 0
    notes: list[str] = field(default_factory=list)
    #: executors' pulls from storage nodes: bytes to the nodes, bytes back, rows, seconds, calls
    transfers: list[float] = field(default_factory=list)
    #: seconds of each round of chunk runs (read or pull, shuffle, match), the first and the re-runs
    round_seconds: list[float] = field(default_factory=list)
    #: each task read (or pulled) its own chunk's rows: no shuffle
    direct: bool = False
    #: seconds each chunk's matching took on its executor, per run (a skewed chunk stands out)
    chunk_seconds: dict[int, list[float]] = field(default_factory=dict)


def payloads(table: pa.Table, task: np.ndarray) -> Iterator[tuple[int, bytes]]:
    """``table``'s rows grouped by ``task`` as (task, Arrow IPC stream) pairs."""
    if table.num_rows == 0:
        return
    order = np.argsort(task, kind="stable")
    task_sorted = task[order]
    cuts = np.flatnonzero(np.diff(task_sorted)) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, task_sorted.size], strict=True):
        for a in range(int(lo), int(hi), PAYLOAD_ROWS):
            rows = order[a : min(int(hi), a + PAYLOAD_ROWS)]
            sink = pa.BufferOutputStream()
            part = table.take(pa.array(rows))
            with pa.ipc.new_stream(sink, part.schema) as writer:
                writer.write_table(part)
            yield int(task_sorted[lo]), sink.getvalue().to_pybytes()


def unpack(blobs: Sequence[bytes], schema: pa.Schema) -> pa.Table:
    tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs]
    return pa.concat_tables(tables) if tables else schema.empty_table()


class Bound:
    """A query re-bound on an executor (the analysis is not pickled, only its SQL and config),
    with the driver's matcher settings for each engine run (``matcher.*``: executors do not
    read the driver's configuration)."""

    def __init__(
        self, sql: str, schema: pa.Schema, config: Any, matcher: MatcherConfig | None = None
    ) -> None:
        self.sql, self.schema, self.config = sql, schema, config
        self.matcher = matcher if matcher is not None else MatcherConfig()
        self._analysis: Analysis | None = None

    @property
    def max_steps(self) -> int:
        return self.matcher.max_steps

    def __getstate__(self) -> dict[str, Any]:
        return {
            "sql": self.sql,
            "schema": self.schema,
            "config": self.config,
            "matcher": self.matcher,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._analysis = None

    @property
    def analysis(self) -> Analysis:
        if self._analysis is None:
            self._analysis = analyze(parse(self.sql), self.schema, self.config)
        return self._analysis


class Emit:
    """``mapInArrow`` over unit ids: load each unit, route its rows to chunks as payloads."""

    def __init__(
        self,
        load: Callable[[int], pa.Table],
        bound: Bound,
        plan: ChunkPlan,
        only: Sequence[int] | None,
    ) -> None:
        self.load, self.bound, self.plan, self.only = load, bound, plan, only

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dfs_cer.events.time import time_values

        analysis = self.bound.analysis
        for batch in batches:
            for unit in batch.column(0).to_pylist():
                table = self.load(int(unit))
                if table.num_rows == 0:
                    continue
                if self.plan.mode == "time":
                    ts = time_values(table, analysis.query.recognize.order_by[0].column)
                    rows, task = assign(ts, self.plan, self.only)
                    table = table.take(pa.array(rows))
                elif self.plan.mode == "partition":
                    from dfs_cer.events.identity import row_hashes

                    h = row_hashes(table, list(analysis.query.recognize.partition_by))
                    task = (h % np.uint64(self.plan.groups)).astype(np.int64)
                else:
                    task = np.zeros(table.num_rows, np.int64)
                out = list(payloads(table, task))
                if out:
                    yield pa.RecordBatch.from_pydict(
                        {TASK: [t for t, _ in out], PAYLOAD: [p for _, p in out]},
                        schema=EMIT_SCHEMA,
                    )
            drain = getattr(self.load, "drain", None)
            if drain is not None:  # the loader's transfers, to the driver's trace
                yield pa.RecordBatch.from_pydict(
                    {TASK: [STATS], PAYLOAD: [pickle.dumps(drain())]}, schema=EMIT_SCHEMA
                )


EMIT_SCHEMA = pa.schema([(TASK, pa.int64()), (PAYLOAD, pa.binary())])


class Match:
    """``applyInArrow`` per chunk: unpack its rows, match, return the relation plus one report
    row."""

    def __init__(
        self,
        bound: Bound,
        plan: ChunkPlan,
        states: Mapping[int, Mapping[Part, State]],
        out_schema: pa.Schema,
        segments: np.ndarray | None,
        fresh: Sequence[int] = (),
    ) -> None:
        self.bound, self.plan, self.states = bound, plan, states
        self.out_schema, self.segments = out_schema, segments
        self.fresh = set(fresh)  # chunks to run from scratch (else: re-run from their state)

    def __call__(self, group: pa.Table) -> pa.Table:
        k = int(group.column(TASK)[0].as_py())
        if k == STATS:
            totals = np.sum([pickle.loads(b) for b in group.column(PAYLOAD).to_pylist()], axis=0)
            return self.stats(totals)
        return self.rows(k, unpack(group.column(PAYLOAD).to_pylist(), self.bound.schema))

    def stats(self, totals: Any) -> pa.Table:
        return self._report(
            STATS, pickle.dumps(("stats", [float(x) for x in np.atleast_1d(totals)]))
        )

    def rows(self, k: int, table: pa.Table) -> pa.Table:
        """Chunk ``k``'s relation rows and its report row, from its rows."""
        from dfs_cer.match.chunked import START, START_RANK, rerun_chunk, run_chunk
        from dfs_cer.match.numbering import EMPTY

        began = time.perf_counter()
        analysis = self.bound.analysis
        reports: list[Report] = []
        short = since = last = None
        unmet = False
        if self.plan.mode == "time":
            state = self.states.get(k, {})
            run = run_chunk if k in self.fresh or not state else rerun_chunk
            result = run(table, analysis, self.plan, k, state, self.segments, self.bound.matcher)
            relation, reports, short = result.relation, result.reports, result.short
            since, last, unmet = result.since, result.last_start, result.unmet
        else:
            relation = engine_output(table, analysis, self.segments, self.bound.matcher)
            relation = relation.append_column(
                START, pa.nulls(relation.num_rows, pa.int64())
            ).append_column(START_RANK, pa.nulls(relation.num_rows, pa.int64()))
            relation = relation.append_column(EMPTY, pa.array(np.zeros(relation.num_rows, bool)))
        body = _fit(relation, self.out_schema)
        n = body.num_rows
        body = body.append_column(CHUNK, pa.array(np.full(n, k, np.int64))).append_column(
            REPORT, pa.nulls(n, pa.binary())
        )
        if unmet:
            return self._report(
                k,
                pickle.dumps(
                    ([], None, table.num_rows, None, None, True, time.perf_counter() - began)
                ),
            )
        report = self._report(
            k,
            pickle.dumps(
                (reports, short, table.num_rows, since, last, False, time.perf_counter() - began)
            ),
        )
        return pa.concat_tables([body.select(self.out_schema.names).cast(self.out_schema), report])

    def _report(self, k: int, note: bytes) -> pa.Table:
        report = pa.table({f.name: pa.nulls(1, f.type) for f in self.out_schema})
        report = report.set_column(
            report.column_names.index(CHUNK), CHUNK, pa.array([k], pa.int64())
        )
        return report.set_column(
            report.column_names.index(REPORT), REPORT, pa.array([note], pa.binary())
        )


def _fit(relation: pa.Table, out_schema: pa.Schema) -> pa.Table:
    """The relation in the output schema's types (timestamps in microseconds for Spark)."""
    fields = [out_schema.field(name) for name in relation.column_names]
    return relation.cast(pa.schema(fields))


def engine_output(
    events: pa.Table,
    analysis: Analysis,
    segments: np.ndarray | None,
    matcher: MatcherConfig | None = None,
) -> pa.Table:
    """The engine's relation over ``events``, run with the ``matcher`` settings (Kleene+ output,
    the match limit and what happens at it, the step and time budgets; the defaults when None)."""
    from dfs_cer.match.cer.engine import run_cer
    from dfs_cer.match.rowpattern.engine import run_row_pattern

    matcher = matcher if matcher is not None else MatcherConfig()
    bounds: dict[str, Any] = {
        "max_matches": matcher.max_matches,
        "on_limit": matcher.on_limit,
        "max_steps": matcher.max_steps,
    }
    if analysis.query.recognize.all_matches:
        return run_cer(events, analysis, kleene=matcher.kleene, **bounds).table
    return run_row_pattern(
        events, analysis, segments=segments, max_seconds=matcher.max_seconds, **bounds
    ).table


def sparkable(schema: pa.Schema) -> pa.Schema:
    """Arrow types Spark accepts back from Python: timestamps in microseconds."""
    fields = [
        pa.field(f.name, pa.timestamp("us", f.type.tz), True)
        if pa.types.is_timestamp(f.type)
        else f.with_nullable(True)
        for f in schema
    ]
    return pa.schema(fields)


def emit_units(
    units: Any,
    load: Callable[[int], pa.Table],
    bound: Bound,
    narrow: Callable[[ChunkPlan, Sequence[int]], Any] | None = None,
) -> Callable[..., Any]:
    """The payload source of :func:`run_chunks` for units read on the executors: ``units`` is a
    DataFrame of unit ids (one int column), ``load`` returns a unit's rows on an executor and
    ``narrow(plan, chunks)`` the unit ids a re-run of ``chunks`` must read."""
    spark_emit = None

    def emit(plan: ChunkPlan, only: Sequence[int] | None) -> Any:
        nonlocal spark_emit
        from pyspark.sql.pandas.types import from_arrow_schema

        spark_emit = spark_emit or from_arrow_schema(EMIT_SCHEMA)
        source = units if only is None or narrow is None else narrow(plan, only)
        return source.mapInArrow(Emit(load, bound, plan, only), spark_emit)

    return emit


def emit_table(spark: Any, table: pa.Table, bound: Bound) -> Callable[..., Any]:
    """The payload source for a table the driver already holds (rows pulled by a strategy)."""

    def emit(plan: ChunkPlan, only: Sequence[int] | None) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        rows = pa.table({"u": pa.array([0], pa.int64())})
        out = pa.concat_tables(
            [
                pa.Table.from_batches(
                    list(Emit(lambda _: table, bound, plan, only)(rows.to_batches())),
                    schema=EMIT_SCHEMA,
                )
            ]
        )
        return spark.createDataFrame(out, schema=from_arrow_schema(EMIT_SCHEMA))

    return emit


class DirectMatch:
    """``mapInArrow`` over chunk indexes: each task loads its chunk's rows itself (row groups or
    a pull of its time range) and matches them; no shuffle."""

    def __init__(self, load: Any, plan: ChunkPlan, chunks: Sequence[int], match: Match) -> None:
        self.load, self.plan, self.chunks, self.match = load, plan, list(chunks), match

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                k = self.chunks[int(i)]
                yield from self.match.rows(k, self.load.chunk(self.plan, k)).to_batches()
        drain = getattr(self.load, "drain", None)
        if drain is not None:
            yield from self.match.stats(np.asarray(drain())).to_batches()


def _spread(spark: Any, emitted: Any, width: int, chunks: Sequence[int], total: int) -> Any:
    """``emitted`` hash-partitioned so that the i-th of ``chunks`` lands in partition ``i % width``
    (a plain ``repartition(width, chunk)`` lets two chunks collide in one task while another
    idles)."""
    from pyspark.sql import functions as F

    found = (
        spark.range(0, 64 * width)
        .select("id", F.pmod(F.hash("id"), F.lit(width)).alias("p"))
        .groupBy("p")
        .agg(F.min("id").alias("v"))
        .collect()
    )
    key = {int(r["p"]): int(r["v"]) for r in found}
    if len(key) < width:  # (never seen) fall back to hashing the chunk id
        return emitted.withColumn(SLOT, F.col(TASK)).repartition(width, SLOT)
    place = {c: i for i, c in enumerate(chunks)}
    slots = F.array(*[F.lit(key[place.get(c, 0) % width]) for c in range(max(1, total))])
    slot = F.when(F.col(TASK) < 0, F.lit(key[0])).otherwise(
        F.element_at(slots, (F.col(TASK) + 1).cast("int"))
    )
    return emitted.withColumn(SLOT, slot).repartition(width, SLOT)


#: an exception's line, ``module.Name: message`` (Python's or Java's)
_CAUSE = re.compile(r"^([\w.]*?)([A-Z]\w*): (.+)$")


def failure_cause(text: str) -> str | None:
    """The real cause of a failed Spark job, from its text (Spark wraps an executor's Python
    traceback in Java stack traces): the last Python ``SomeError: message`` line, else the
    first exception line; None when there is none."""
    python, java = [], []
    for line in text.splitlines():
        match = _CAUSE.match(line.strip())
        if match is None:
            continue
        module, name, message = match.groups()
        if module.startswith(("org.", "java.", "scala.", "py4j.")) or name == "PythonException":
            java.append(f"{name}: {message}")
        else:
            python.append(f"{name}: {message}")
    if python:
        return python[-1]
    return java[0] if java else None


def _collect(frame: Any) -> list[Any]:
    """``frame.collect()``; an executor's failure becomes one clear error (its own message), not
    a JVM stack trace. After Ctrl-C no job starts, and a job it cancelled raises
    ``KeyboardInterrupt`` (:func:`dfs_cer.spark.session.cancelling`)."""
    interrupt.check()
    try:
        return list(frame.collect())
    except Exception as exc:
        interrupt.check()
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        from dfs_cer.errors import MatchBudgetError, MatchError, StorageError

        text = str(exc)
        lines = [x.strip() for x in text.splitlines() if "Error:" in x and "dfs_cer.errors." in x]
        why = (
            lines[-1].split("Error:", 1)[1].strip()
            if lines
            else (failure_cause(text) or text.splitlines()[0])[:500]
        )
        if "storage node" in why or "StorageError" in text:
            raise StorageError(f"an executor failed: {why}") from exc
        if lines and "MatchBudgetError" in lines[-1]:  # the step budget: its own code and fix
            raise MatchBudgetError(f"an executor failed: {why}") from exc
        raise MatchError(f"an executor failed: {why}") from exc


def _applied(matcher: Match) -> Callable[[pa.Table], pa.Table]:
    """A one-argument function (applyInArrow reads its type hints; two arguments mean key,
    table)."""

    def match(group: pa.Table) -> pa.Table:
        return matcher(group)

    return match


def run_chunks(
    spark: Any,
    emit: Callable[[ChunkPlan, Sequence[int] | None], Any],
    bound: Bound,
    plan: ChunkPlan,
    segments: np.ndarray | None = None,
    partitions: int | None = None,
    direct: Any = None,
) -> tuple[Any, Split]:
    """The MATCH_RECOGNIZE relation (a DataFrame) over the rows ``emit(plan, chunks)`` routes to
    the chunks (a DataFrame of task ids and payloads), matched on the executors. With ``direct``
    (an object whose ``chunk(plan, k)`` returns chunk ``k``'s rows on an executor) and time
    chunks, each task loads its own chunk instead: no shuffle."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.storagelevel import StorageLevel

    from dfs_cer.match.chunked import START, START_RANK
    from dfs_cer.match.numbering import EMPTY, stands_in

    analysis = bound.analysis
    relation_schema = sparkable(
        engine_output(bound.schema.empty_table(), analysis, segments).schema
    )
    out_schema = pa.schema(
        [
            *relation_schema,
            pa.field(START, pa.int64()),
            pa.field(START_RANK, pa.int64()),
            pa.field(EMPTY, pa.bool_()),
            pa.field(CHUNK, pa.int64()),
            pa.field(REPORT, pa.binary()),
        ]
    )
    spark_out = from_arrow_schema(out_schema)
    parts = partitions or max(2, spark.sparkContext.defaultParallelism * 2)
    split = Split(plan.mode, plan.chunks, plan.reason)
    computed: list[dict[Part, State]] = [{} for _ in range(plan.chunks)]
    fresh: dict[
        int, tuple[Any, list[Report], int | None]
    ] = {}  # chunk -> (frame, reports, last start)
    latest: dict[int, tuple[Any, list[Report], int | None]] = {}  # chunk -> (frame, reports, since)
    todo: list[int] | None = None
    again: set[int] = set()  # chunks to run from scratch (a wider read)
    whole: set[int] = (
        set()
    )  # chunks whose re-run must read the whole chunk (a prefix was not enough)
    from dfs_cer.match.chunked import prefix_limit

    for round_no in range(MAX_ROUNDS):
        chunks = list(range(plan.chunks)) if todo is None else list(todo)
        firsts = [k for k in chunks if k not in fresh or k in again]
        limits = {
            k: prefix_limit(plan, k, analysis) for k in chunks if k not in firsts and k not in whole
        }
        run_plan = plan.limited({k: v for k, v in limits.items() if v is not None})
        states = {k: computed[k] for k in chunks}
        matcher = Match(bound, run_plan, states, out_schema, segments, fresh=firsts)
        if direct is not None and plan.mode == "time":
            split.direct = True
            ids = spark.range(0, len(chunks), 1, numPartitions=len(chunks))
            matched = ids.mapInArrow(DirectMatch(direct, run_plan, chunks, matcher), spark_out)
        else:
            width = plan.chunks if todo is None else max(1, min(parts, len(chunks)))
            matched = (
                _spread(spark, emit(run_plan, todo), width, chunks, plan.chunks)
                .groupBy(SLOT, TASK)
                .applyInArrow(_applied(matcher), spark_out)
            )
        matched = matched.persist(StorageLevel.MEMORY_AND_DISK)
        began = time.perf_counter()
        notes = _collect(matched.where(F.col(REPORT).isNotNull()).select(CHUNK, REPORT))
        split.round_seconds.append(time.perf_counter() - began)
        split.driver_rows += len(notes)
        for row in [r for r in notes if int(r[CHUNK]) == STATS]:
            _, totals = pickle.loads(row[REPORT])
            split.transfers = [
                a + b for a, b in zip(split.transfers or [0.0] * len(totals), totals, strict=True)
            ]
        said = {int(r[CHUNK]): pickle.loads(r[REPORT]) for r in notes if int(r[CHUNK]) != STATS}
        short = []
        unmet = []
        for k in chunks:
            chunk_reports, why, events, since, last, partial, seconds = said.get(
                k, ([], None, 0, None, None, False, 0.0)
            )
            split.chunk_seconds.setdefault(k, []).append(round(float(seconds), 3))
            if round_no == 0:
                split.events += int(events)
            if partial:
                unmet.append(k)
                whole.add(k)
            elif why:
                short.append(k)
                split.notes.append(f"chunk {k}: {why}")
            elif k not in fresh or k in again:
                fresh[k] = (matched, chunk_reports, last)
                if computed[
                    k
                ]:  # a wider read of a chunk with a state: the fresh run is all it needs
                    latest[k] = (matched, chunk_reports, None)
                again.discard(k)
            else:
                latest[k] = (matched, chunk_reports, since)
        if short or unmet:
            if short:
                plan = plan.wider(
                    any("PREV" in n for n in split.notes), any("NEXT" in n for n in split.notes)
                )
                split.widened = True
            todo = sorted({*short, *unmet})
            again |= set(short)
            split.reruns += len(todo)
            split.rounds += 1
            continue
        todo = settle(plan, computed, {k: _reports_of(fresh[k], latest.get(k)) for k in fresh})
        if not todo:
            break
        split.reruns += len(todo)
        split.rounds += 1
    else:
        from dfs_cer.errors import MatchError

        raise MatchError(f"the time chunks did not settle in {MAX_ROUNDS} rounds of re-runs")
    final = _final(fresh, latest, plan.chunks)
    if plan.mode == "time":
        final = renumber_frame(final, analysis)
        if stands_in(analysis):  # stand-in rows of empty matches count in the numbers, then go
            final = final.where(~F.col(EMPTY))
    return final.drop(CHUNK, REPORT, START, START_RANK, EMPTY), split


def renumber_frame(frame: Any, analysis: Analysis) -> Any:
    """MATCH_NUMBER() measures numbered over the whole partition (each chunk numbered its own
    matches from 1): a dense rank of the matches' first rows (stand-in rows of empty matches
    included, see :func:`dfs_cer.match.numbering.with_stand_ins`), as
    :func:`dfs_cer.match.numbering.renumber` does in one process. Only the matches move to compute
    it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from dfs_cer.match.chunked import START, START_RANK
    from dfs_cer.plan.chunks import renumbered

    names = renumbered(analysis)
    if not names:
        return frame
    matched = F.col(START_RANK).isNotNull()

    def col(name: str) -> Any:  # a column by its name, dots and all
        return F.col("`" + name.replace("`", "``") + "`")

    window = Window.partitionBy(
        *[col(c) for c in analysis.query.recognize.partition_by], matched
    ).orderBy(F.col(START), F.col(START_RANK))
    number = F.dense_rank().over(window)
    for name in names:
        kind = frame.schema[name].dataType
        frame = frame.withColumn(name, F.when(matched, number.cast(kind)).otherwise(col(name)))
    return frame


def _reports_of(
    fresh: tuple[Any, list[Report], int | None], rerun: tuple[Any, list[Report], int | None] | None
) -> list[Report]:
    """A chunk's reports (see :func:`dfs_cer.plan.chunks.pick_reports`)."""
    return pick_reports(
        fresh[1], fresh[2], None if rerun is None else rerun[1], None if rerun is None else rerun[2]
    )


def _final(
    fresh: Mapping[int, tuple[Any, list[Report], int | None]],
    latest: Mapping[int, tuple[Any, list[Report], int | None]],
    chunks: int,
) -> Any:
    """The union of every chunk's final rows across the rounds' frames."""
    from pyspark.sql import functions as F

    from dfs_cer.match.chunked import START

    wanted: dict[int, tuple[Any, list[Any]]] = {}  # id(frame) -> (frame, conditions)

    def take(frame: Any, condition: Any) -> None:
        wanted.setdefault(id(frame), (frame, []))[1].append(condition)

    for k in range(chunks):
        base = fresh[k][0]
        rerun = latest.get(k)
        if rerun is None:
            take(base, F.col(CHUNK) == k)
        elif rerun[2] is None:
            take(rerun[0], F.col(CHUNK) == k)
        else:
            take(rerun[0], F.col(CHUNK) == k)
            take(base, (F.col(CHUNK) == k) & (F.col(START) >= rerun[2]))
    final = None
    for frame, conditions in wanted.values():
        condition = conditions[0]
        for c in conditions[1:]:
            condition = condition | c
        part = frame.where(F.col(REPORT).isNull() & condition)
        final = part if final is None else final.unionByName(part)
    assert final is not None
    return final


class SlicePuller:
    """Takes a deferred final pull's time slice from every storage node, on an executor.

    The token travels inside this object (pickled into Spark's task closure, never in Spark's
    configuration, logs or plan strings); on a real cluster turn on ``spark.authenticate`` and
    ``spark.network.crypto.enabled`` so that closures cross the network encrypted."""

    def __init__(self, deferred: Any, slices: Sequence[tuple[int, int]], schema: pa.Schema) -> None:
        self.endpoints, self.token, self.query_id = (
            list(deferred.endpoints),
            deferred.token,
            deferred.query_id,
        )
        self.kind, self.header, self.blobs = (
            deferred.kind,
            dict(deferred.header),
            list(deferred.blobs),
        )
        #: the pull's interval set (exact closed intervals): each call sends its slice's part
        self.cover = deferred.cover
        self.call_timeout, self.compression = deferred.call_timeout, deferred.compression
        self.slices, self.schema = list(slices), schema
        self.span = deferred.span or (0, -1)
        self.round_no = len(deferred.session.trace.rounds) + 1
        analysis = deferred.session.analysis
        order = None if analysis is None else analysis.query.recognize.order_by[0].column
        #: the time column's type, to say a slice's times in it
        self.time_type = schema.field(order).type if order in schema.names else None
        self._stats = np.zeros(5)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_stats"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stats = np.zeros(5)

    def __call__(self, unit: int) -> pa.Table:
        from dfs_cer.errors import DfsCerError, StorageError
        from dfs_cer.events.time import moment
        from dfs_cer.strategies.slices import slice_request
        from dfs_cer.transport.client import StorageClient

        lo, hi = self.slices[unit]
        request = slice_request(self.kind, self.header, self.blobs, self.cover, int(lo), int(hi))
        if request is None:  # no time of the slice is inside the intervals: no row to pull
            return self.schema.empty_table()
        header, blobs = request
        tables = []
        for endpoint in self.endpoints:
            client = StorageClient(
                endpoint,
                self.token.reveal(),
                timeout=self.call_timeout,
                compression=self.compression,
            )
            try:
                body = {
                    "query_id": self.query_id,
                    "kind": self.kind,
                    **header,
                    "slice": [int(lo), int(hi)],
                }
                tables.append(client.pull(body, blobs))
                for t in client.transfers:
                    self._stats += [t.bytes_to_sn, t.bytes_to_cn, 0, t.seconds, 1]
                self._stats[2] += tables[-1].num_rows
            except DfsCerError as exc:
                raise StorageError(
                    f"round {self.round_no} ({self.kind} taken by executors, times "
                    f"[{moment(int(lo), self.time_type)}, {moment(int(hi), self.time_type)}]): "
                    f"{exc}"
                ) from exc
            finally:
                client.close()
        tables = [t.select(self.schema.names).cast(self.schema) for t in tables if t.num_rows]
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def drain(self) -> list[float]:
        out, self._stats = [float(x) for x in self._stats], np.zeros(5)
        return out

    def chunk(self, plan: ChunkPlan, k: int) -> pa.Table:
        """Chunk ``k``'s rows: a pull of its read range (boundary rows cross twice, once per
        side)."""
        lo, hi = plan.reads(k)
        first, last = self.span
        lo, hi = max(lo, first), min(hi, last)
        if lo > hi:
            return self.schema.empty_table()
        self.slices.append((lo, hi))
        return self(len(self.slices) - 1)


def pull_slices(plan: ChunkPlan, span: tuple[int, int], count: int) -> list[tuple[int, int]]:
    """Inclusive time slices covering ``span`` that executors pull: the time chunks' owned
    ranges, or ``count`` even slices when the plan is not in time."""
    lo, hi = span
    if plan.mode == "time":
        cuts = [max(lo, min(hi + 1, int(c))) for c in plan.starts[1:]]
    else:
        cuts = [lo + (hi - lo + 1) * i // max(1, count) for i in range(1, max(1, count))]
    edges = [lo, *cuts, hi + 1]
    return [(a, b - 1) for a, b in itertools.pairwise(edges) if b > a]
