"""Run a situation query over an Arrow table (in process): sort, derive every symbol's
situations, join them by their relations, then the SELECT around it on DuckDB."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.config import Config
from dfs_cer.errors import QueryValidationError, UnsupportedFeatureError
from dfs_cer.events.order import sort_and_partition
from dfs_cer.events.time import time_values
from dfs_cer.match.arrow_eval import evaluate_mask
from dfs_cer.match.rowpattern.conditions import evaluate_any, shifted
from dfs_cer.query.expr import Column, Expr, Navigation, NavKind
from dfs_cer.query.model import Window
from dfs_cer.situations.derive import Derived, aggregate, derive, keyed
from dfs_cer.situations.match import match
from dfs_cer.situations.model import SituationQuery
from dfs_cer.situations.parser import RELATION, parse_situations

UNITS_PER_SECOND = {
    "s": Decimal(1),
    "ms": Decimal(1000),
    "us": Decimal(10**6),
    "ns": Decimal(10**9),
}


def duration_units(
    d: Window | None, dtype: pa.DataType, integer_time_unit: str, clause: str, lower: bool = False
) -> int | None:
    """A duration in the time column's units (a bare number is already in them). Times are
    integers: an upper bound rounds down and a ``lower`` bound up (``te - ts >= 2.5`` is
    ``>= 3``)."""
    if d is None:
        return None
    rounding = ROUND_CEILING if lower else ROUND_FLOOR
    if d.unit is None:
        return int(d.amount.to_integral_value(rounding))
    if pa.types.is_timestamp(dtype):
        unit = dtype.unit
    elif pa.types.is_integer(dtype):
        unit = integer_time_unit
    else:
        raise QueryValidationError(
            f"{d.value} {d.unit.value} needs a timestamp or integer time column, not {dtype}",
            clause=clause,
            hint="give the duration as a bare number",
            code="non-temporal-order",
        )
    seconds = d.seconds()
    assert seconds is not None
    return int((seconds * UNITS_PER_SECOND[unit]).to_integral_value(rounding))


def column_name(table: pa.Table, name: str) -> str:
    """The data's spelling of column ``name`` (the one resolver: dfs_cer.query.bind)."""
    from dfs_cer.query.bind import resolve_column

    return resolve_column(name, table.schema, "SITUATIONS")


def condition_masks(
    rows: pa.Table, query: SituationQuery, part_start: np.ndarray, part_end: np.ndarray
) -> dict[str, np.ndarray]:
    """Every symbol's condition over ``rows`` (sorted; PREV/NEXT stay inside a partition)."""
    n = rows.num_rows

    def resolve(x: Expr) -> pa.Array:
        if isinstance(x, Column):
            return rows.column(column_name(rows, x.name)).combine_chunks()
        if isinstance(x, Navigation) and x.kind.physical:
            step = -x.offset if x.kind == NavKind.PREV else x.offset
            return shifted(evaluate_any(x.operand, resolve, n), step, part_start, part_end)
        raise UnsupportedFeatureError(
            f"{x} in a situation's condition",
            clause="DEFINE",
            hint="conditions read the row's columns, or PREV/NEXT of them",
            code="unsupported",
        )

    return {
        s.name: np.asarray(
            evaluate_mask(s.condition, resolve, n).to_numpy(zero_copy_only=False), bool
        )
        for s in query.situations
    }


def sorted_rows(
    table: pa.Table, query: SituationQuery, event_key: Sequence[str] = (), dedup: bool = True
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Rows in (partition, time, event key, other columns) order, duplicates dropped; each
    row's partition id, and the partition boundaries."""
    partition = tuple(column_name(table, c) for c in query.partition_by)
    order = column_name(table, query.order_by)
    rows, bounds, _ = sort_and_partition(
        table,
        partition,
        [(order, False)],
        None,
        tuple(column_name(table, k) for k in event_key),
        dedup,
    )
    n = rows.num_rows
    part = (
        np.repeat(np.arange(bounds.size - 1, dtype=np.int64), np.diff(bounds))
        if n
        else np.zeros(0, np.int64)
    )
    return rows, part, bounds


def derive_all(
    table: pa.Table,
    query: SituationQuery,
    *,
    integer_time_unit: str = "s",
    event_key: Sequence[str] = (),
    dedup: bool = True,
) -> tuple[pa.Table, np.ndarray, dict[str, Derived]]:
    """The sorted rows, each row's partition id, and every symbol's situations."""
    rows, part, bounds = sorted_rows(table, query, event_key, dedup)
    n = rows.num_rows
    order = column_name(rows, query.order_by)
    ts = time_values(rows, order) if n else np.zeros(0, np.int64)
    masks = condition_masks(
        rows, query, bounds[part] if n else part, bounds[part + 1] if n else part
    )
    dtype = rows.schema.field(order).type
    out = {}
    for s in query.situations:
        lo, hi = durations(s.name, query, dtype, integer_time_unit)
        out[s.name] = derive(masks[s.name], part, ts, lo, hi)
    return rows, part, out


def durations(
    name: str, query: SituationQuery, dtype: pa.DataType, integer_time_unit: str
) -> tuple[int | None, int | None]:
    s = query.situation(name)
    return (
        duration_units(s.min_duration, dtype, integer_time_unit, "DEFINE", lower=True),
        duration_units(s.max_duration, dtype, integer_time_unit, "DEFINE"),
    )


def relation(
    query: SituationQuery,
    part_values: pa.Table,
    derived: dict[str, Derived],
    found: dict[str, np.ndarray],
    measures: dict[str, pa.Array],
    time_type: pa.DataType,
) -> pa.Table:
    """One row per match: the partition columns, ``<X>_start`` and ``<X>_end`` of every
    situation, then the measures (``measures[m]``: one value per situation of its symbol); in
    (partition, situation starts) order. ``part_values``: the partition key of each id."""
    names = [s.name for s in query.situations]
    count = found[names[0]].size
    sort_keys = [derived[n].ts[found[n]] for n in reversed(names)] + [
        derived[names[0]].part[found[names[0]]]
    ]
    perm = np.lexsort(sort_keys) if count else np.zeros(0, np.int64)
    found = {n: v[perm] for n, v in found.items()}
    columns: dict[str, pa.Array] = {}
    part_ids = derived[names[0]].part[found[names[0]]]
    for c in query.partition_by:
        columns[c] = (
            part_values.column(column_name(part_values, c))
            .combine_chunks()
            .take(pa.array(part_ids))
        )
    for n in names:
        s = derived[n]
        for suffix, values in (("start", s.ts), ("end", s.te)):
            columns[f"{n}_{suffix}"] = pc.cast(pa.array(values[found[n]], pa.int64()), time_type)
    for m in query.measures:
        columns[m.name] = measures[m.name].take(pa.array(found[m.symbol]))
    return (
        pa.table(columns)
        if columns
        else pa.table({"matches": pa.array(np.zeros(count, np.int8))}).select([])
    )


def time_type_of(dtype: pa.DataType) -> pa.DataType:
    return dtype if pa.types.is_timestamp(dtype) or pa.types.is_integer(dtype) else pa.int64()


def run_situations(
    table: pa.Table,
    query: SituationQuery | str,
    *,
    integer_time_unit: str = "s",
    event_key: Sequence[str] = (),
    dedup: bool = True,
) -> pa.Table:
    """One row per match (see :func:`relation`), over the rows of ``table``."""
    if isinstance(query, str):
        query = parse_situations(query)
    rows, part, derived = derive_all(
        table, query, integer_time_unit=integer_time_unit, event_key=event_key, dedup=dedup
    )
    dtype = rows.schema.field(column_name(rows, query.order_by)).type
    window = duration_units(query.window, dtype, integer_time_unit, "WITHIN")
    found = match(derived, query.constraints, window)
    partition = [column_name(rows, c) for c in query.partition_by]
    starts = (
        np.flatnonzero(np.diff(np.concatenate([[-1], part])) != 0)
        if part.size
        else np.zeros(0, np.int64)
    )
    part_values = keyed(rows, partition, starts)
    measures = {}
    for m in query.measures:
        col = (
            rows.column(column_name(rows, m.column)).combine_chunks()
            if m.column is not None
            else None
        )
        measures[m.name] = aggregate(m.function, col, derived[m.symbol])
    return relation(query, part_values, derived, found, measures, time_type_of(dtype))


def match_situations(
    table: pa.Table,
    sql: str,
    *,
    integer_time_unit: str = "s",
    event_key: Sequence[str] = (),
    dedup: bool = True,
    config: Config | None = None,
) -> pa.Table:
    """Evaluate ``SELECT ... FROM t SITUATIONS (...) [AS m] ...`` over ``table`` (the SELECT
    around the clause runs on DuckDB over the match relation, within ``config``'s limits)."""
    query = parse_situations(sql)
    return outer(
        query,
        run_situations(
            table, query, integer_time_unit=integer_time_unit, event_key=event_key, dedup=dedup
        ),
        config=config,
    )


def outer(
    query: SituationQuery,
    relation: pa.Table,
    deadline: float | None = None,
    config: Config | None = None,
) -> pa.Table:
    """The SELECT around the SITUATIONS clause, on the sandboxed DuckDB, over the match relation,
    by ``deadline`` (``time.monotonic()``; default ``strategy.query_timeout_seconds`` from now)
    and within ``query.outer_memory_limit`` (:mod:`dfs_cer.outer`) of ``config`` (default: the
    loaded settings)."""
    from dfs_cer.config import load_config
    from dfs_cer.outer import OuterEngine

    sql = query.outer_sql.replace(RELATION, "__dfs_cer_situations")
    with OuterEngine(config or load_config(), deadline) as engine:
        engine.register("__dfs_cer_situations", relation)
        return engine.table(sql, ["__dfs_cer_situations"])
