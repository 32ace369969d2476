"""The compute node's pull strategies (paper §III–IV and its baselines).

- ``pull_all``: every event.
- ``push_down``: every event that passes some variable's independent condition (exact only
  when rows between variables may be skipped; otherwise it falls back to pull_all).
- ``push_pull``: variables one by one; each node keeps the next variable's events that complete
  a match of the pattern projected on the variables pulled so far (uploaded to it).
- ``dfs``: dual filtering — Eq. 1 intervals of the first variable in a shrinking window filter,
  shrunk by each later variable's verification (SWF, then window-wise join filters for
  equalities) when the cost model says the round trip pays; one final pull of the rows inside
  the final interval set.

Every strategy returns events whose matches equal pull_all's; one that cannot be exact for a
query runs the nearest exact one and says so in the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.config import QueryConfig
from dfs_cer.filters import (
    IntervalSet,
    RefreshTags,
    ShrinkingWindowFilter,
    WindowJoinFilter,
    join_kind,
)
from dfs_cer.plan.cost import CostInputs, CostModel
from dfs_cer.plan.order import variable_order
from dfs_cer.query import Analysis, Query, Role, analyze
from dfs_cer.query.expr import Column, walk
from dfs_cer.strategies.base import PullResult, Session, Trace, sort_events
from dfs_cer.transport.client import StorageClient

ROLE_NAMES = {Role.HEAD: "head", Role.TAIL: "tail", Role.MIDDLE: "middle"}


def _open(session: Session, query: Query, unit: str) -> tuple[Analysis, list[dict[str, Any]], pa.Schema]:
    sql = query.to_sql()
    replies = session.action("open", {}, per_node=lambda i: (
        {"sql": sql, "integer_time_unit": unit, "schema": i == 0}, []))
    schema = pa.ipc.read_schema(pa.py_buffer(replies[0][1][0]))
    analysis = analyze(query, schema, QueryConfig(integer_time_unit=unit))  # type: ignore[arg-type]
    return analysis, [h for h, _ in replies], schema


def _time_column(schema: pa.Schema, analysis: Analysis) -> str:
    name = analysis.order_column
    if name in schema.names:
        return name
    return next(n for n in schema.names if n.lower() == name.lower())


def _counts(headers: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in headers:
        for v, info in h["variables"].items():
            out[v] = out.get(v, 0) + int(info["count"])
    return out


def _finish(session: Session, events: pa.Table, analysis: Analysis, schema: pa.Schema,
            segments: np.ndarray | None = None) -> PullResult:
    if events.num_columns == 0:
        events = schema.empty_table()
    return PullResult(sort_events(events, _time_column(schema, analysis)), session.trace, analysis, segments)


def pull_all(session: Session, query: Query, unit: str, **unused: Any) -> PullResult:
    analysis, _, schema = _open(session, query, unit)
    return _finish(session, session.pull("pull_all"), analysis, schema)


def push_down(session: Session, query: Query, unit: str, **unused: Any) -> PullResult:
    analysis, _, schema = _open(session, query, unit)
    if not analysis.skippable:
        session.trace.fallback = f"pull_all ({analysis.skip_reason})"
        return _finish(session, session.pull("pull_all"), analysis, schema)
    return _finish(session, session.pull("pull_pushdown"), analysis, schema)


def push_pull(session: Session, query: Query, unit: str, **unused: Any) -> PullResult:
    analysis, headers, schema = _open(session, query, unit)
    if not analysis.skippable:
        session.trace.fallback = f"pull_all ({analysis.skip_reason})"
        return _finish(session, session.pull("pull_all"), analysis, schema)
    counts = _counts(headers)
    names = [v.name for v in analysis.variables if not v.any_row]
    order = [min(names, key=lambda n: (counts.get(n, 0), names.index(n)))]
    while len(order) < len(names):
        visited = set(order)

        def score(n: str, visited: set[str] = visited) -> float:
            eq = sum(1 for e in analysis.equalities if n in (e.left_variable, e.right_variable)
                     and e.other(n) in visited)
            other = sum(1 for r in analysis.variable(n).residuals
                        if {c.variable for c in walk(r) if isinstance(c, Column)} & visited)
            return (1 + 10 * eq + 2.4 * other) / max(1, counts.get(n, 0))

        order.append(max((n for n in names if n not in visited), key=lambda n: (score(n), -names.index(n))))
    pulled = {order[0]: _pull_variable(session, order[0])}
    for i, name in enumerate(order[1:], start=1):
        previous = order[i - 1]
        table = pulled[previous].drop([NODE, ROW_ID])
        def send(c: StorageClient, t: pa.Table = table, p: str = previous) -> None:
            c.upload({"query_id": session.query_id, "variable": p}, t)

        session.all("upload", send)
        session.action("push_pull", {"variable": name, "processed": order[:i]})
        pulled[name] = _pull_variable(session, name)
    events = pa.concat_tables(list(pulled.values()))
    # an event may have been pulled for several variables: keep one copy per (node, row)
    keys = np.asarray(events.column(NODE).to_numpy(), np.int64) * (1 << 40) + \
        np.asarray(events.column(ROW_ID).to_numpy(), np.int64)
    first = np.unique(keys, return_index=True)[1]
    events = events.take(pa.array(np.sort(first))).drop([NODE, ROW_ID])
    return _finish(session, events, analysis, schema)


NODE = "__dfs_cer_node"
ROW_ID = "__dfs_cer_row_id"


def _pull_variable(session: Session, name: str) -> pa.Table:
    body = {"query_id": session.query_id, "kind": "pull_variable", "variable": name}
    index = {id(c): i for i, c in enumerate(session.clients)}

    def one(c: StorageClient) -> pa.Table:
        t = c.pull(body)
        return t.append_column(NODE, pa.array(np.full(t.num_rows, index[id(c)], np.int64)))

    tables = session.all("pull_variable", one, events=lambda ts: sum(t.num_rows for t in ts),
                         note=f"events of {name}")
    return pa.concat_tables(tables)


def dfs(session: Session, query: Query, unit: str, cost_model: str = "adaptive",
        calibration_file: str | None = None, target_fpr: float = 0.02, **unused: Any) -> PullResult:
    analysis, headers, schema = _open(session, query, unit)
    trace = session.trace
    if not analysis.interval_pruning:
        if analysis.skippable:
            trace.fallback = f"push_down ({analysis.pruning_reason})"
            return _finish(session, session.pull("pull_pushdown"), analysis, schema)
        trace.fallback = f"pull_all ({analysis.pruning_reason})"
        return _finish(session, session.pull("pull_all"), analysis, schema)
    if not analysis.skippable and (analysis.prev_reach or analysis.next_reach):
        trace.fallback = "pull_all (PREV/NEXT can reach rows outside the intervals of a contiguous pattern)"
        return _finish(session, session.pull("pull_all"), analysis, schema)
    window = analysis.window_units
    assert window is not None
    counts = _counts(headers)
    mins = [h["min_ts"] for h in headers if h.get("min_ts") is not None]
    maxs = [h["max_ts"] for h in headers if h.get("max_ts") is not None]
    span = float(max(maxs) - min(mins)) if mins else 1.0
    candidates = sum(int(h["rows"]) for h in headers)
    row_bytes = float(np.mean([h.get("row_bytes", 0.0) for h in headers])) or 64.0
    model = CostModel.load(cost_model, calibration_file)
    order = variable_order(analysis, counts)
    first = order[0]
    replies = session.action("intervals", {"variable": first, "role": ROLE_NAMES[analysis.variable(first).role],
                                           "window": window})
    parts = [IntervalSet.from_bytes(b[0]) for _, b in replies]
    tis = parts[0].union(*parts[1:]) if parts else IntervalSet()
    if tis.is_empty:
        trace.fallback = f"no match possible: {first} has no candidate event"
        return _finish(session, pa.table({}), analysis, schema)
    swf = ShrinkingWindowFilter.from_intervals(tis.starts, tis.ends, window)
    processed = [first]
    for v in order[1:]:
        info = analysis.variable(v)
        partners: dict[str, tuple[str, str]] = {}
        for e in analysis.equalities:
            if v in (e.left_variable, e.right_variable) and e.other(v) in processed and e.other(v) not in partners:
                partners[e.other(v)] = (e.column_of(e.other(v)), e.column_of(v))
        swf_bytes = swf.to_bytes()
        wjf_bytes = sum(WindowJoinFilter.with_estimates(max(1, counts.get(p, 0)), window, join_kind(
            schema.field(c_p).type, schema.field(c_v).type), target_fpr=target_fpr).bits // 8
            for p, (c_p, c_v) in partners.items())
        decision = model.decide(CostInputs(
            variable=v, middle=info.role is Role.MIDDLE, count=counts.get(v, 0), span=span, window=window,
            covered=swf.covered_length, event_rate=candidates / max(span, 1.0), equalities=len(partners),
            join_keys=sum(counts.get(p, 0) for p in partners), swf_bytes=len(swf_bytes), wjf_bytes=wjf_bytes,
            nodes=len(session.clients), event_bytes=row_bytes))
        if not decision.run:
            trace.rounds.append(_skip(v, decision.to_dict()))
            processed.append(v)  # a skipped variable still provides join filters later
            continue
        blobs = [swf_bytes]
        probes = []
        # the join filter holds only the partner's events inside the interval set: size it for them
        inside = min(1.0, 1.5 * swf.covered_length / max(span, 1.0))
        for p, (c_p, c_v) in partners.items():
            kind = join_kind(schema.field(c_p).type, schema.field(c_v).type)
            f0 = WindowJoinFilter.with_estimates(max(1, int(counts.get(p, 0) * inside)), window, kind,
                                                 target_fpr=target_fpr)
            build = {"variable": p, "column": c_p, "bits": f0.bits, "hashes": f0.hashes, "window": window,
                     "kind": int(kind), "seed": 0}
            built = session.action("wjf", {"builds": [build]}, [swf_bytes], decision=decision.to_dict(),
                                   note=f"join filter of {p}.{c_p} for {v}.{c_v}")
            union = WindowJoinFilter.union([WindowJoinFilter.from_bytes(b[0]) for _, b in built])
            order_pv = analysis.precedes(p, v)
            probes.append({"column": c_v, "direction": -1 if order_pv else (1 if order_pv is False else 0),
                           "blob": len(blobs)})
            blobs.append(union.to_bytes())
        header: dict[str, Any] = {"variable": v, "role": ROLE_NAMES[info.role], "probes": probes}
        if partners:  # the nodes kept the SWF sent with the wjf action
            header["cached_swf"] = True
            # probe blob indexes stay valid: the cached SWF becomes blob 0 again on the node
            verified = session.action("verify", header, blobs[1:])
        else:
            verified = session.action("verify", header, blobs, decision=decision.to_dict())
        swf.apply_refresh([RefreshTags.from_bytes(b[0]) for _, b in verified])
        model.observe_transfer(sum(len(blob) for blob in blobs) * len(session.clients),
                               trace.rounds[-1].seconds)
        processed.append(v)
        if swf.is_empty:
            trace.fallback = f"no match possible: the interval set is empty after {v}"
            return _finish(session, pa.table({}), analysis, schema)
    pull_kind = "pull" if analysis.skippable else "pull_range"
    events = session.pull(pull_kind, {}, [swf.to_bytes()])
    segments = None if analysis.skippable else swf.covered_intervals()[0]
    return _finish(session, events, analysis, schema, segments)


def _skip(variable: str, decision: dict[str, Any]) -> Any:
    from dfs_cer.strategies.base import Round

    return Round("skip", 0, 0, 0, 0.0, decision, f"cost model skipped {variable}")


STRATEGIES = {"pull_all": pull_all, "push_down": push_down, "push_pull": push_pull, "dfs": dfs}


def pull(name: str, query: Query | str, endpoints: Sequence[str], token: str, *, integer_time_unit: str = "s",
         **options: Any) -> PullResult:
    """Run pull strategy ``name`` for ``query`` against the storage nodes at ``endpoints``."""
    from dfs_cer.errors import ConfigError
    from dfs_cer.strategies.base import resolve_query

    if name not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    clients = [StorageClient(e, token) for e in endpoints]
    session = Session(clients, Trace(name))
    try:
        return STRATEGIES[name](session, resolve_query(query), integer_time_unit, **options)
    finally:
        session.close()
        for c in clients:
            c.close()
