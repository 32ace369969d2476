"""Situation queries on Spark: the driver pulls from storage nodes (``dfs`` fragments or
``pull_all``), or executors read parquet and derive and match each PARTITION BY group
(``groupBy(...).applyInArrow``: situations of different keys are independent)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from dfs_cer.config import Config, QueryConfig
from dfs_cer.errors import ConfigError
from dfs_cer.situations import parse_situations, run_situations
from dfs_cer.situations.model import SituationQuery
from dfs_cer.situations.parser import RELATION
from dfs_cer.spark.session import cancels_jobs


def _sparkable(table: pa.Table) -> pa.Table:
    fields = [
        pa.field(f.name, pa.timestamp("us", f.type.tz), f.nullable)
        if pa.types.is_timestamp(f.type)
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


class _Group:
    """Per PARTITION BY group on an executor: derive and match (picklable), with the driver's
    query settings."""

    def __init__(
        self, sql: str, schema: pa.Schema, out_schema: pa.Schema, settings: QueryConfig
    ) -> None:
        self.sql, self.schema, self.out_schema, self.settings = sql, schema, out_schema, settings

    def __call__(self, table: pa.Table) -> pa.Table:
        rel = run_situations(
            table.cast(self.schema),
            self.sql,
            integer_time_unit=self.settings.integer_time_unit,
            event_key=self.settings.event_key,
            dedup=self.settings.dedup,
        )
        return _sparkable(rel).cast(self.out_schema)


class _Batches(_Group):
    def batches(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        if parts:
            yield from self(pa.Table.from_batches(parts)).to_batches()


@cancels_jobs
def situations(
    spark: Any,
    sql: str,
    *,
    endpoints: Sequence[str] | str | None = None,
    token: str | None = None,
    data: str | None = None,
    strategy: str = "dfs",
    config: Config | None = None,
    integer_time_unit: str | None = None,
) -> Any:
    """The query's result as a Spark DataFrame (the SELECT around the clause in Spark SQL).
    ``config``: the settings (default :func:`~dfs_cer.config.load_config` on the driver;
    ``query.*`` and the strategy's limits apply; executors get them with the query);
    ``integer_time_unit`` given wins over it."""
    import sqlglot
    from pyspark.sql.pandas.types import from_arrow_schema

    from dfs_cer.config import load_config

    if (endpoints is None) == (data is None):
        raise ConfigError(
            "give either endpoints=[...] (storage nodes) or data='path' (parquet Spark reads)"
        )
    settings = (config or load_config()).with_values(
        {"query": {"integer_time_unit": integer_time_unit}}
    )
    integer_time_unit = settings.query.integer_time_unit
    query = parse_situations(sql)
    if endpoints is not None:
        from dfs_cer.strategies.situations import pull_situations

        if token is None:
            raise ConfigError("endpoints need the storage nodes' token: pass token='...'")
        nodes = (
            [e.strip() for e in endpoints.split(",")]
            if isinstance(endpoints, str)
            else list(endpoints)
        )
        relation = _sparkable(
            pull_situations(sql, nodes, token, strategy=strategy, config=settings).relation
        )
        df = spark.createDataFrame(relation, schema=from_arrow_schema(relation.schema))
    else:
        if str(data).startswith(
            "s3://"
        ):  # pyarrow's S3 filesystem (Spark's s3a needs hadoop-aws jars)
            import pyarrow.dataset as ds

            from dfs_cer.io.files import filesystem_for, list_files

            where = filesystem_for(str(data), settings.storage)
            files = [where.path] if str(data).endswith(".parquet") else list_files(where)
            table = _sparkable(ds.dataset(files, filesystem=where.fs, format="parquet").to_table())
            source = spark.createDataFrame(table, schema=from_arrow_schema(table.schema))
        else:
            source = spark.read.parquet(str(data))
        schema = source.limit(0).toArrow().schema
        out_schema = _sparkable(
            run_situations(
                schema.empty_table(),
                query,
                integer_time_unit=integer_time_unit,
                event_key=settings.query.event_key,
                dedup=settings.query.dedup,
            )
        ).schema
        keys = _keys(query, schema)
        if keys:
            group = _Group(sql, schema, out_schema, settings.query)

            def per_group(table: pa.Table) -> pa.Table:  # Spark inspects a function's signature
                return group(table)

            df = source.groupBy(*keys).applyInArrow(per_group, from_arrow_schema(out_schema))
        else:  # one partition: one task
            df = source.repartition(1).mapInArrow(
                _Batches(sql, schema, out_schema, settings.query).batches,
                from_arrow_schema(out_schema),
            )
    view = f"dfs_cer_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    outer = sqlglot.transpile(
        query.outer_sql.replace(RELATION, view), read="duckdb", write="spark"
    )[0]
    from dfs_cer.spark.session import sandboxed_sql

    return sandboxed_sql(spark, outer, [view], settings)


def _keys(query: SituationQuery, schema: pa.Schema) -> list[str]:
    from dfs_cer.query.bind import resolve_column

    return [resolve_column(c, schema, "PARTITION BY") for c in query.partition_by]
