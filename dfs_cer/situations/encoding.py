"""The same situation query in plain SQL:2016 (TPStream's straw man 1): every situation as the
maximal ``X+`` runs of a MATCH_RECOGNIZE (its end: the time of the row after the run), then
the relations and the window as a join on DuckDB. A correctness oracle and the baseline of
``bench/situations.py``; it returns the partition, then every situation's start and end."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

from dfs_cer.query.expr import to_sql
from dfs_cer.query.model import Window
from dfs_cer.situations.model import SituationQuery
from dfs_cer.situations.run import UNITS_PER_SECOND, column_name, duration_units

SQL_RELATIONS = {
    "before": "{a}.te < {b}.ts",
    "after": "{b}.te < {a}.ts",
    "meets": "{a}.te = {b}.ts",
    "met_by": "{b}.te = {a}.ts",
    "overlaps": "{a}.ts < {b}.ts AND {b}.ts < {a}.te AND {a}.te < {b}.te",
    "overlapped_by": "{b}.ts < {a}.ts AND {a}.ts < {b}.te AND {b}.te < {a}.te",
    "starts": "{a}.ts = {b}.ts AND {a}.te < {b}.te",
    "started_by": "{a}.ts = {b}.ts AND {b}.te < {a}.te",
    "during": "{b}.ts < {a}.ts AND {a}.te < {b}.te",
    "contains": "{a}.ts < {b}.ts AND {b}.te < {a}.te",
    "finishes": "{b}.ts < {a}.ts AND {a}.te = {b}.te",
    "finished_by": "{a}.ts < {b}.ts AND {a}.te = {b}.te",
    "equals": "{a}.ts = {b}.ts AND {a}.te = {b}.te",
}


def encoded_matches(
    table: pa.Table, query: SituationQuery, integer_time_unit: str = "s"
) -> pa.Table:
    import duckdb

    from dfs_cer import match_recognize

    order = column_name(table, query.order_by)
    dtype = table.schema.field(order).type
    part = [column_name(table, c) for c in query.partition_by]
    by = f"PARTITION BY {', '.join(part)} " if part else ""
    con = duckdb.connect()
    try:
        for s in query.situations:
            define = f"DEFINE X AS {to_sql(s.condition)}"
            runs = match_recognize(
                table,
                f"""SELECT * FROM t MATCH_RECOGNIZE ({by}ORDER BY {order}
                MEASURES FIRST(X.{order}) AS ts, NEXT(LAST(X.{order}), 1) AS te
                ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (X+) {define})""",
            )
            runs = runs.set_column(
                runs.column_names.index("ts"), "ts", runs.column("ts").cast(pa.int64())
            )
            runs = runs.set_column(
                runs.column_names.index("te"), "te", runs.column("te").cast(pa.int64())
            )
            con.register(f"raw_{s.name}", runs)
            lo, hi = (
                _exact(s.min_duration, dtype, integer_time_unit),
                _exact(s.max_duration, dtype, integer_time_unit),
            )
            bounds = (f" AND te - ts >= {lo}" if lo is not None else "") + (
                f" AND te - ts <= {hi}" if hi is not None else ""
            )
            con.sql(
                f"CREATE TABLE {s.name} AS SELECT * FROM raw_{s.name} WHERE te IS NOT NULL "
                f"AND te > ts{bounds}"
            )
        names = [s.name for s in query.situations]
        where = [
            f'{names[0]}."{c}" IS NOT DISTINCT FROM {n}."{c}"' for n in names[1:] for c in part
        ]
        for c in query.constraints:
            where.append(
                "("
                + (
                    " OR ".join(
                        "(" + SQL_RELATIONS[r].format(a=c.left, b=c.right) + ")"
                        for r in c.relations
                    )
                    or "FALSE"
                )
                + ")"
            )
        window = duration_units(query.window, dtype, integer_time_unit, "WITHIN")
        if window is not None and len(names) > 1:
            ends, starts = ", ".join(f"{n}.te" for n in names), ", ".join(f"{n}.ts" for n in names)
            where.append(f"greatest({ends}) - least({starts}) <= {window}")
        elif window is not None:
            where.append(f"{names[0]}.te - {names[0]}.ts <= {window}")
        cols = ", ".join(
            [f'{names[0]}."{c}"' for c in part]
            + [f"{n}.ts AS {n}_start, {n}.te AS {n}_end" for n in names]
        )
        out = con.sql(
            f"SELECT {cols} FROM {', '.join(names)}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
        ).to_arrow_table()
    finally:
        con.close()
    time_type = dtype if pa.types.is_timestamp(dtype) or pa.types.is_integer(dtype) else pa.int64()
    for name in [f"{n}_{e}" for n in names for e in ("start", "end")]:
        out = out.set_column(out.column_names.index(name), name, out.column(name).cast(time_type))
    return out


def _exact(d: Window | None, dtype: pa.DataType, integer_time_unit: str) -> Decimal | None:
    """A duration in the time column's units, unrounded (the SQL compares exactly)."""
    if d is None:
        return None
    if d.unit is None:
        return d.amount
    unit = dtype.unit if pa.types.is_timestamp(dtype) else integer_time_unit
    seconds = d.seconds()
    assert seconds is not None
    return seconds * UNITS_PER_SECOND[unit]
