"""Situation queries against storage nodes.

``dfs``: every node derives its time blocks' runs (shard sets partitioned by time) and ships
only those fragments; the compute node stitches them into situations, joins them by their
relations, and — when MEASURES need rows — pulls only the rows inside the matched situations
(their time interval set), re-deriving those situations there for the aggregates.
``pull_all``: every row comes to the compute node, which derives and matches. ``dfs`` falls
back to ``pull_all`` (named in the trace) when the nodes cannot derive whole blocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.config import Config, StrategyConfig
from dfs_cer.errors import ConfigError
from dfs_cer.plan.layout import conflict
from dfs_cer.query.bind import resolve_column
from dfs_cer.situations import parse_situations
from dfs_cer.situations.derive import Derived, aggregate, keyed
from dfs_cer.situations.fragments import stitch
from dfs_cer.situations.match import match
from dfs_cer.situations.model import SituationQuery
from dfs_cer.situations.run import (
    column_name,
    derive_all,
    duration_units,
    durations,
    relation,
    run_situations,
    time_type_of,
)
from dfs_cer.strategies.base import Session, Trace
from dfs_cer.transport.protocol import SEGMENT
from dfs_cer.transport.replies import SituationsReply

STRATEGIES = ("dfs", "pull_all")


@dataclass
class SituationResult:
    #: one row per match (before the SELECT around the clause: ``dfs_cer.situations.outer``)
    relation: pa.Table
    trace: Trace


def _table(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def pull_situations(
    sql: str | SituationQuery,
    endpoints: Sequence[str],
    token: str,
    *,
    strategy: str = "dfs",
    integer_time_unit: str | None = None,
    event_key: Sequence[str] | None = None,
    dedup: bool | None = None,
    timeout: float | None = None,
    config: Config | StrategyConfig | None = None,
) -> SituationResult:
    """The situation query's match relation over the storage nodes' data (see the module);
    ``config`` (the settings, as for :func:`dfs_cer.strategies.pull`: ``query.*`` and the
    strategy's limits; the keywords given win over it) and ``timeout`` bound the calls as for
    ``pull``. The nodes derive situations from rows without copies (their shard sets' event
    key): with ``dedup`` off, or another event key, every row is pulled (``pull_all``, named in
    the trace)."""
    from dfs_cer.strategies.request import settings_of

    if strategy not in STRATEGIES:
        raise ConfigError(
            f"strategy must be one of {', '.join(STRATEGIES)} for situation queries, got "
            f"{strategy!r}"
        )
    settings = settings_of(config)
    unit = settings.query.integer_time_unit if integer_time_unit is None else integer_time_unit
    key = tuple(settings.query.event_key if event_key is None else event_key)
    dedup = settings.query.dedup if dedup is None else dedup
    query = parse_situations(sql) if isinstance(sql, str) else sql
    text = sql if isinstance(sql, str) else ""
    session = Session.connect(
        endpoints, token, Trace(strategy), settings.strategy, timeout, key or None, dedup
    )

    def work() -> SituationResult:
        if strategy == "dfs" and (not dedup or key):
            session.trace.fallback = (
                "pull_all (the storage nodes derive situations from rows without copies of an "
                "event, by their shard sets' event key; "
                + ("query.dedup is off" if not dedup else f"the event key {list(key)} is asked")
                + ")"
            )
        elif strategy == "dfs":
            replies = session.action(
                SituationsReply,
                {"sql": text, "integer_time_unit": unit, "nodes": len(endpoints)},
            )
            reasons = [h.reason for h, _ in replies if not h.derived]
            layout = conflict(
                [h.layout for h, _ in replies], [f"storage node {e}" for e in endpoints]
            )
            if not reasons and layout is not None:  # time blocks may lie on several nodes
                reasons = [f"the nodes do not make one shard set: {layout}"]
            if not reasons:
                return SituationResult(
                    _from_fragments(session, query, replies, unit, key), session.trace
                )
            session.trace.fallback = f"pull_all ({reasons[0]})"
        rows = session.pull("pull_all", {"table": query.table})  # the nodes check the name
        return SituationResult(
            run_situations(rows, query, integer_time_unit=unit, event_key=key, dedup=dedup),
            session.trace,
        )

    return session.finish(work, lambda r: r.trace)


def _from_fragments(
    session: Session,
    query: SituationQuery,
    replies: list[tuple[SituationsReply, list[bytes]]],
    unit: str,
    event_key: Sequence[str],
) -> pa.Table:
    fragments = pa.concat_tables([_table(b[0]) for _, b in replies], promote_options="permissive")
    blocks = pa.concat_tables([_table(b[1]) for _, b in replies], promote_options="permissive")
    partition = [c for c in blocks.column_names if c not in ("__block", "__first_ts")]
    schema = pa.ipc.read_schema(pa.py_buffer(replies[0][1][2]))
    dtype = schema.field(resolve_column(query.order_by, schema, "ORDER BY")).type
    names = [s.name for s in query.situations]
    bounds = {n: durations(n, query, dtype, unit) for n in names}
    part_values, derived = stitch(fragments, blocks, partition, names, bounds)
    window = duration_units(query.window, dtype, unit, "WITHIN")
    found = match(derived, query.constraints, window)
    measures: dict[str, pa.Array] = {}
    if query.measures:
        measures = _measures(
            session, query, part_values, derived, found, partition, unit, event_key
        )
    return relation(query, part_values, derived, found, measures, time_type_of(dtype))


def _measures(
    session: Session,
    query: SituationQuery,
    part_values: pa.Table,
    derived: dict[str, Derived],
    found: dict[str, np.ndarray],
    partition: list[str],
    unit: str,
    event_key: Sequence[str],
) -> dict[str, pa.Array]:
    """Aggregates of the matched situations: pull the rows inside them (closing rows included)
    and derive those situations again over just these rows (they are whole: every row of the
    partition in each interval comes)."""
    symbols = sorted({m.symbol for m in query.measures})
    part = np.concatenate([derived[s].part[found[s]] for s in symbols])
    starts = np.concatenate([derived[s].ts[found[s]] for s in symbols])
    ends = np.concatenate([derived[s].te[found[s]] for s in symbols])
    if starts.size == 0:
        return {m.name: pa.nulls(0) for m in query.measures}
    # per partition, the union of the matched situations (closing rows included)
    part, lo, hi = _merge(part, starts, ends)
    iv = keyed(
        part_values, partition, part, __lo=lo, __hi=hi, __k=np.arange(lo.size, dtype=np.int64)
    )
    needed = _needed_columns(query, part_values.column_names, event_key)
    # rows of different intervals were not adjacent: the nodes tag each row with its interval
    # (SEGMENT), and the situations are derived within each interval only
    rows = session.pull("pull_times", {"columns": needed}, [_ipc(iv)])
    per_interval = dataclasses.replace(query, partition_by=(*query.partition_by, SEGMENT))
    sub_rows, _, sub = derive_all(rows, per_interval, integer_time_unit=unit, event_key=event_key)
    out: dict[str, pa.Array] = {}
    for m in query.measures:
        mine, theirs = derived[m.symbol], sub[m.symbol]
        col = (
            sub_rows.column(column_name(sub_rows, m.column)).combine_chunks()
            if m.column is not None
            else None
        )
        values = aggregate(m.function, col, theirs)
        # match the re-derived situations to the stitched ones by (partition key, start)
        index = _pair(
            keyed(part_values, partition, mine.part),
            mine.ts,
            keyed(sub_rows, [column_name(sub_rows, c) for c in partition], theirs.first),
            theirs.ts,
        )
        out[m.name] = pc.if_else(
            pa.array(index >= 0),
            values.take(pa.array(np.maximum(index, 0))),
            pa.scalar(None, values.type),
        )
    return out


def _pair(
    left_keys: pa.Table, left_ts: np.ndarray, right_keys: pa.Table, right_ts: np.ndarray
) -> np.ndarray:
    """For each left (key, start), the index of the right row with the same key and start, or -1."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register(
            "l",
            left_keys.append_column("__t", pa.array(left_ts)).append_column(
                "__i", pa.array(np.arange(left_ts.size, dtype=np.int64))
            ),
        )
        con.register(
            "r",
            right_keys.append_column("__t", pa.array(right_ts)).append_column(
                "__j", pa.array(np.arange(right_ts.size, dtype=np.int64))
            ),
        )
        on = " AND ".join(
            [f'l."{c}" IS NOT DISTINCT FROM r."{c}"' for c in left_keys.column_names]
            + ["l.__t = r.__t"]
        )
        got = con.sql(f"SELECT l.__i, r.__j FROM l JOIN r ON {on}").fetchnumpy()
    finally:
        con.close()
    out = np.full(left_ts.size, -1, np.int64)
    out[np.asarray(got["__i"], np.int64)] = np.asarray(got["__j"], np.int64)
    return out


def _merge(
    part: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge overlapping intervals within each partition (sorted by partition, then start)."""
    order = np.lexsort((lo, part))
    part, lo, hi = part[order], lo[order], hi[order]
    new = np.ones(part.size, bool)
    if part.size > 1:
        # running max of the ends within each partition: ranks offset by partition keep the
        # partitions apart in one accumulate
        values = np.unique(hi)
        stride = values.size + 1
        reach = values[
            np.maximum.accumulate(part * stride + np.searchsorted(values, hi)) - part * stride
        ]
        new[1:] = (part[1:] != part[:-1]) | (lo[1:] > reach[:-1])
    heads = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    ends = np.full(heads.size, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(ends, group, hi)
    return part[heads], lo[heads], ends


def _needed_columns(
    query: SituationQuery, partition: list[str], event_key: Sequence[str]
) -> list[str] | None:
    """Columns the re-derivation needs, or None (all) when the tie order needs every column."""
    from dfs_cer.query.expr import Column, walk

    if not event_key:
        return None  # ties are ordered by every column: the rows must come whole
    cols = {*partition, query.order_by, *event_key}
    for s in query.situations:
        cols |= {n.name for n in walk(s.condition) if isinstance(n, Column)}
    cols |= {m.column for m in query.measures if m.column is not None}
    return sorted(cols)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
