"""``MATCH_RECOGNIZE`` as a Spark data source (PySpark's Python data source API, Spark 4):

    spark.read.format("dfs_cer").option("query", sql).load()
    CREATE TEMPORARY VIEW m USING dfs_cer OPTIONS (query "SELECT * FROM t MATCH_RECOGNIZE (...)")

so plain Spark SQL (and Spark Connect clients) can read the matches and join them with other
tables. The rows come from storage nodes (``endpoints`` and ``token`` or ``token_file``; by
default the nodes ``dfs-cer storage-node up`` started, from ``nodes_dir``) through a pull
strategy (``strategy``, default ``strategy.default``), or from parquet Spark's executors can
read (``data``). Settings: the driver's (``DFS_CER_CONFIG``, ``DFS_CER__*``), a TOML file
(``config``) and single settings by their dotted names (``query.dedup``, ``matcher.kleene``, ...),
resolved once on the driver and pickled with the reader (executors never read their own).
The pull and the matching run on the executors; the driver only plans (the relation's schema,
from the input's schema, and the time slices). A query whose matches each depend only on their
own rows (ALL MATCHES, or SKIP TO NEXT ROW; a WITHIN window; no PREV/NEXT, MATCH_NUMBER() or
anchors; a plain ``SELECT *`` around the clause) is read as up to ``partitions`` time slices
(``auto``, the default: the driver's cores, at most one per 4M rows), one task each: a slice
pulls (or reads) only its own time range and a window on each side and keeps the matches
that start in it (:mod:`dfs_cer.plan.slices`), so the union is exact. Any other query is one
task. With ``filter_pushdown`` true (and Spark's
``spark.sql.python.filterPushdown.enabled``), filters on PARTITION BY columns go to the storage
nodes (an input filter: partitions are independent, so it is exact); other filters stay with
Spark.

The package ``pyspark_dfs_cer`` exposes this as ``DefaultSource``, so an installed dfs-cer is
found by name without registering it; ``spark.dataSource.register(DfsCerSource)`` does the same
by hand (an editable install's packages are not listed to Spark's lookup).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from dfs_cer.config import Config
from dfs_cer.errors import ConfigError
from dfs_cer.plan.slices import TimeSlice
from dfs_cer.spark.match import plain_schema, plain_table

#: the options the source reads (Spark lower-cases option names); besides these, any setting
#: of the sections in SETTINGS by its dotted name (``.option("query.dedup", "false")``)
OPTIONS = (
    "query",
    "endpoints",
    "token",
    "token_file",
    "nodes_dir",
    "strategy",
    "data",
    "filter_pushdown",
    "partitions",
    "config",
)
#: the settings sections an option may set, e.g. ``matcher.max_matches``
SETTINGS = ("query", "strategy", "matcher")


def source_settings(options: dict[str, str]) -> Config:
    """The settings a read runs with, resolved once on the driver (executors receive them with
    the reader, never read their own): the ``DFS_CER_CONFIG`` file, the TOML file of the
    ``config`` option and the ``DFS_CER__*`` variables over the defaults, then the options that
    name a setting (``query.dedup``, ``matcher.max_matches``, ...), checked as settings are."""
    from dfs_cer.config import load_config

    given: dict[str, dict[str, str]] = {}
    for name, value in options.items():
        section, dot, key = name.partition(".")
        if dot and section in SETTINGS:
            given.setdefault(section, {})[key] = value
    paths = (options["config"],) if options.get("config") else ()
    return load_config(paths).with_values(given, "the dfs_cer source's options")


#: rows per time slice when ``partitions`` is left to the source: below this a slice's fixed
#: cost (a task, a read or a pull of its own) outweighs what it saves (``bench/source.py``)
ROWS_PER_SLICE = 4_000_000


class Spec:
    """What to read: the query and where its rows come from (from the source's options)."""

    def __init__(
        self,
        options: dict[str, str],
        input_filter: str | None = None,
        settings: Config | None = None,
    ) -> None:
        unknown = sorted(
            set(options)
            - set(OPTIONS)
            - {"path"}
            - {o for o in options if o.partition(".")[0] in SETTINGS and "." in o}
        )
        if unknown:
            raise ConfigError(
                f"unknown dfs_cer option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                f"the options are {', '.join(OPTIONS)} and settings by their dotted names "
                "(e.g. query.dedup, matcher.max_matches)"
            )
        #: every setting of the read (resolved on the driver; see :func:`source_settings`)
        self.settings = settings if settings is not None else source_settings(options)
        self.sql = options.get("query")
        if not self.sql:
            raise ConfigError(
                'the dfs_cer source needs a query: .option("query", "SELECT * FROM t '
                'MATCH_RECOGNIZE (...)")'
            )
        count = options.get("partitions", "auto")
        if count != "auto" and (not count.isdigit() or int(count) < 1):
            raise ConfigError(
                f"the dfs_cer option partitions is a positive integer or auto, got {count!r}"
            )
        #: the time slices asked for (None: as many as the driver's cores, one per
        #: ROWS_PER_SLICE rows at most)
        self.partitions = None if count == "auto" else int(count)
        self.data = options.get("data") or options.get("path")
        self.strategy = options.get("strategy") or self.settings.strategy.default
        self.input_filter = input_filter
        self.endpoints: list[str] = []
        self.token = ""
        if self.data is None:
            self._nodes(options)

    def _nodes(self, options: dict[str, str]) -> None:
        endpoints = options.get("endpoints")
        token = options.get("token")
        token_file = options.get("token_file")
        if endpoints is None or (token is None and token_file is None):
            from dfs_cer.io.nodefile import DEFAULT_DIR, read_nodes

            nodes = read_nodes(options.get("nodes_dir", DEFAULT_DIR))
            if nodes is None:
                raise ConfigError(
                    "the dfs_cer source reads storage nodes (endpoints and token or token_file, "
                    "or the nodes dfs-cer storage-node up started: nodes_dir) or parquet (data)"
                )
            endpoints = endpoints or ",".join(nodes.endpoints)
            token_file = token_file or nodes.token_file
        self.endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
        self.token = token if token is not None else Path(str(token_file)).read_text().strip()

    def input_schema(self) -> pa.Schema:
        if self.data is not None:
            import pyarrow.dataset as ds

            return ds.dataset(self.data, format="parquet").schema
        from dfs_cer.strategies.statements import check_against_nodes

        return check_against_nodes(
            [str(self.sql)], self.endpoints, self.token, self.settings.query.integer_time_unit
        )

    def relation_schema(self) -> pa.Schema:
        """The query's output columns: the engine's over no rows of the input's schema."""
        from dfs_cer.spark.distributed import sparkable

        empty = plain_schema(self.input_schema()).empty_table()
        return sparkable(plain_schema(_run_local(empty, str(self.sql), self.settings).schema))

    def slices(self) -> tuple[list[TimeSlice], int | None]:
        """The time slices a read is cut into (on the driver; none when the query is read in
        one piece), and the table snapshot every slice reads (nodes serving a table in place)."""
        import os

        from dfs_cer.plan.slices import slice_reason, time_slices
        from dfs_cer.query.analyze import analyze
        from dfs_cer.query.parser import parse, parse_statement

        config = self.settings
        if self.partitions == 1 or config.matcher.on_limit == "truncate":  # a bound on the whole
            return [], None
        statement = parse_statement(str(self.sql))
        if not statement.simple:
            return [], None
        query = parse(str(self.sql))
        analysis = analyze(query, plain_schema(self.input_schema()), config.query)
        if slice_reason(query, analysis, statement.simple) is not None:
            return [], None
        span, rows, snapshot = self._span(query.recognize.order_by[0].column)
        if span is None or analysis.window_units is None:
            return [], None
        count = self.partitions or min(os.cpu_count() or 1, rows // ROWS_PER_SLICE)
        if count <= 1:
            return [], None
        return time_slices(span[0], span[1], analysis.window_units, count), snapshot

    def _span(self, column: str) -> tuple[tuple[int, int] | None, int, int | None]:
        """The input's first and last time (in the time column's integer units), its rows, and
        the table snapshot they are of (None: shard sets, or parquet)."""
        if self.data is not None:
            import pyarrow.dataset as ds

            from dfs_cer.events.time import time_values
            from dfs_cer.query.bind import resolve_column

            dataset = ds.dataset(self.data, format="parquet")
            rows = dataset.count_rows()
            if self.partitions is None and rows < 2 * ROWS_PER_SLICE:
                return None, rows, None  # too few rows to cut: no need to read the times
            name = resolve_column(column, dataset.schema, "ORDER BY")
            times = time_values(dataset.to_table(columns=[name]), name)
            return ((int(times.min()), int(times.max())) if times.size else None), rows, None
        from dfs_cer.strategies.incremental import shard_files

        files, snapshot = shard_files(self.endpoints, self.token)
        every = [f for node in files for f in node]
        rows = sum(int(f.get("rows") or 0) for f in every)
        bounds = [
            (int(f["min_ts"]), int(f["max_ts"]))
            for f in every
            if f.get("min_ts") is not None and f.get("max_ts") is not None
        ]
        if len(bounds) != len(every) or not bounds:
            return None, rows, snapshot  # a file without time statistics: read in one piece
        return (min(b[0] for b in bounds), max(b[1] for b in bounds)), rows, snapshot

    def _pull_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"config": self.settings}
        if self.input_filter:
            options["input_filter"] = self.input_filter
        return options

    def partition_columns(self) -> set[str]:
        from dfs_cer.query.parser import parse

        return {c.lower() for c in parse(str(self.sql)).recognize.partition_by}

    def slice_matches(self, piece: TimeSlice, snapshot: int | None = None) -> pa.Table:
        """The matches one time slice owns (in an executor task): its rows read or pulled (at
        the table ``snapshot`` the plan was made of), matched with match ids, kept by their
        start."""
        from dfs_cer.local import run_outer
        from dfs_cer.plan.slices import owned
        from dfs_cer.query.parser import parse

        query = parse(str(self.sql))
        deadline = None  # parquet: the outer query's own strategy.query_timeout_seconds
        if self.data is not None:
            relation = _slice_of_data(self, query, piece)  # owned rows already
        else:
            from dfs_cer.strategies import pull
            from dfs_cer.strategies.matching import match_pulled

            options = self._pull_options()
            options.update(time_ranges=[piece.read], node_matching="off", snapshot=snapshot)
            result = pull(self.strategy, str(self.sql), self.endpoints, self.token, **options)
            relation = owned(match_pulled(result, outer=False, match_ids=True), piece)
            deadline = result.deadline
        return run_outer(
            query,
            relation,
            self.settings.query.outer_dialect,
            config=self.settings,
            deadline=deadline,
        )

    def matches(self) -> pa.Table:
        """Read and match (in an executor task)."""
        if self.data is not None:
            import pyarrow.dataset as ds

            dataset = ds.dataset(self.data, format="parquet")
            table = plain_table(dataset.to_table())
            if self.input_filter:
                table = _filtered(table, self.input_filter)
            return _run_local(table, str(self.sql), self.settings)
        from dfs_cer.strategies import pull
        from dfs_cer.strategies.matching import match_pulled

        options = self._pull_options()
        result = pull(self.strategy, str(self.sql), self.endpoints, self.token, **options)
        return match_pulled(result)


def _slice_of_data(spec: Spec, query: Any, piece: TimeSlice) -> pa.Table:
    """A slice's owned relation rows from the parquet rows of its read range (row groups whose
    time statistics miss it are not read)."""
    import pyarrow.dataset as ds

    from dfs_cer.match.sliced import match_slice
    from dfs_cer.query.analyze import analyze
    from dfs_cer.query.bind import resolve_column

    dataset = ds.dataset(str(spec.data), format="parquet")
    name = resolve_column(query.recognize.order_by[0].column, dataset.schema, "ORDER BY")
    table = plain_table(dataset.to_table(filter=_time_range(dataset.schema.field(name), piece)))
    if spec.input_filter:
        table = _filtered(table, spec.input_filter)
    config = spec.settings
    return match_slice(table, analyze(query, table.schema, config.query), piece, config.matcher)


def _time_range(field: pa.Field, piece: TimeSlice) -> Any:
    """A dataset filter keeping the rows of the slice's read range (None: every row), so row
    groups whose time statistics miss it are not read."""
    import pyarrow.compute as pc

    kind = field.type
    if pa.types.is_date32(kind):
        storage, limit = pa.int32(), 2**31 - 1
    elif pa.types.is_timestamp(kind) or pa.types.is_integer(kind):
        storage, limit = pa.int64(), 2**63 - 1
    else:
        return None
    try:
        low = pa.scalar(max(-limit, piece.read[0]), storage).cast(kind)
        high = pa.scalar(min(limit, piece.read[1]), storage).cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    column = pc.field(field.name)
    return (column >= low) & (column <= high)


def _run_local(table: pa.Table, sql: str, settings: Config) -> pa.Table:
    from dfs_cer.local import match_recognize

    return match_recognize(table, sql, config=settings)


def _filtered(table: pa.Table, condition: str) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    try:
        con.register("input", table)
        kept = con.sql(f"SELECT * FROM input WHERE {condition}").to_arrow_table()
        return kept.cast(table.schema)  # DuckDB reads some types in its own units
    finally:
        con.close()


def _literal(value: object) -> str | None:
    """A filter's value as SQL, for the types whose text is exact (else None: not pushed)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return f"DATE '{value.isoformat()}'"
    return None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _condition(f: Filter, partition_columns: set[str]) -> str | None:
    """A Spark filter as SQL over the input, when it reads one PARTITION BY column (a match
    lies in one partition: dropping other partitions' rows first keeps every match of the
    partitions kept, and only those)."""
    column: tuple[str, ...] = getattr(f, "attribute", ())  # filters with a value name a column
    if len(column) != 1 or column[0].lower() not in partition_columns:
        return None
    name = _quoted(column[0])
    operators = {
        EqualTo: "=",
        GreaterThan: ">",
        GreaterThanOrEqual: ">=",
        LessThan: "<",
        LessThanOrEqual: "<=",
    }
    for kind, op in operators.items():
        if isinstance(f, kind):
            value = _literal(getattr(f, "value", None))
            return None if value is None else f"{name} {op} {value}"
    if isinstance(f, In):
        values = [_literal(v) for v in f.value]
        if not values or any(v is None for v in values):
            return None
        return f"{name} IN ({', '.join(str(v) for v in values)})"
    return None


class DfsCerReader(DataSourceReader):
    """Made on the driver with the read's settings; pickled to the executors with them."""

    def __init__(self, options: dict[str, str], settings: Config) -> None:
        self.options = options
        self.settings = settings
        self.pushed: list[str] = []

    def _spec(self) -> Spec:
        return Spec(self.options, " AND ".join(self.pushed) or None, self.settings)

    def partitions(self) -> Sequence[InputPartition]:
        pieces, snapshot = self._spec().slices()
        return [SliceTask(piece, snapshot) for piece in pieces] or [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        spec = self._spec()
        if isinstance(partition, SliceTask):
            relation = spec.slice_matches(partition.piece, partition.snapshot)
        else:
            relation = spec.matches()
        yield from relation.cast(returned_schema(relation.schema)).to_batches()


def returned_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow types a read returns: Spark's (:func:`~dfs_cer.spark.distributed.sparkable`),
    with zoned times in UTC, as the data source API checks each batch against its schema's Arrow
    form (a TimestampType is an instant, sent with time zone UTC). Arrow keeps a zoned time as
    its UTC instant whatever the zone, so the cast changes the label, never the instant."""
    from dfs_cer.spark.distributed import sparkable

    fields = [
        f.with_type(pa.timestamp(f.type.unit, "UTC"))
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in sparkable(plain_schema(schema))
    ]
    return pa.schema(fields)


class SliceTask(InputPartition):
    """One time slice of the read: an executor task."""

    def __init__(self, piece: TimeSlice, snapshot: int | None) -> None:
        super().__init__(piece)
        self.piece, self.snapshot = piece, snapshot


class PushingReader(DfsCerReader):
    """With ``filter_pushdown`` true (Spark refuses a reader that takes filters unless
    ``spark.sql.python.filterPushdown.enabled`` is true): filters on PARTITION BY columns go to
    the storage nodes."""

    def __init__(
        self, options: dict[str, str], settings: Config, partition_columns: set[str]
    ) -> None:
        super().__init__(options, settings)
        self.partition_columns = partition_columns

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            condition = _condition(f, self.partition_columns)
            if condition is None:
                yield f  # Spark applies it
            else:
                self.pushed.append(condition)


class DfsCerSource(DataSource):
    """``format("dfs_cer")``: the matches of ``option("query", sql)``."""

    @classmethod
    def name(cls) -> str:
        return "dfs_cer"

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(Spec(dict(self.options)).relation_schema())

    def reader(self, schema: Any) -> DataSourceReader:
        options = dict(self.options)
        spec = Spec(options)  # the settings resolved here, on the driver
        if options.get("filter_pushdown", "false").lower() == "true":
            return PushingReader(options, spec.settings, spec.partition_columns())
        return DfsCerReader(options, spec.settings)
