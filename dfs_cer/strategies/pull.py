"""The compute node's pull strategies (paper §III–IV and its baselines).

- ``pull_all``: every event.
- ``push_down``: every event that passes some variable's independent condition (exact only
  when rows between variables may be skipped; otherwise it falls back to pull_all).
- ``push_pull``: variables one by one; each node keeps the next variable's events that complete
  a match of the pattern projected on the variables pulled so far (uploaded to it).
- ``dfs``: dual filtering — Eq. 1 intervals of the first variable in a shrinking window filter,
  shrunk by each later variable's verification (SWF, then window-wise join filters for
  equalities) when the cost model says the round trip pays, in two passes over the variables;
  one final pull of the rows inside the final interval set.
- ``naive_dfs``: interval arrays of every variable and exact join pairs in one trip, then a pull.
- ablations of ``dfs``: ``swf_only`` (no join filters), ``dfs_v1`` (exact (value, window) tables
  for join filters), ``dfs_v2`` (interval arrays for the SWF as well).

Every strategy returns events whose matches equal pull_all's; one that cannot be exact for a
query runs the nearest exact one and says so in the trace.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.config import QueryConfig, StrategyConfig
from dfs_cer.errors import DfsCerError, StorageError
from dfs_cer.events.order import sort_and_partition
from dfs_cer.events.time import time_values
from dfs_cer.filters import (
    IntervalSet,
    RefreshTags,
    ShrinkingWindowFilter,
    WindowJoinFilter,
    WindowKeySet,
    eq1_offsets,
    join_kind,
)
from dfs_cer.match.rowpattern.navigation import candidate_reach
from dfs_cer.plan.cost import CostInputs, CostModel
from dfs_cer.plan.halo import no_halo, subtract_rows
from dfs_cer.plan.order import variable_order
from dfs_cer.query import Analysis, Query, Role, analyze
from dfs_cer.query.expr import Column, to_sql, walk
from dfs_cer.strategies.base import DeferredPull, PullResult, Round, Session, Trace, sort_events
from dfs_cer.strategies.options import PullOptions
from dfs_cer.transport.client import NodeRefusedError, StorageClient
from dfs_cer.transport.protocol import (
    CACHE_MISS,
    HALO,
    POINT_AFTER,
    POINT_BEFORE,
    POINT_TIME,
    ROW_ID,
    SNAPSHOT_BUSY,
    Build,
    Halo,
    Intervals,
    NodeMatch,
    Probe,
    PushPull,
    Upload,
    Verify,
    Wjf,
)

ROLE_NAMES = {Role.HEAD: "head", Role.TAIL: "tail", Role.MIDDLE: "middle"}


def _open(session: Session, query: Query, unit: str) -> tuple[Analysis, list[dict[str, Any]], pa.Schema]:
    sql = query.to_sql()
    if session.opened is not None:  # opened together with other queries (strategies.multi)
        replies = session.opened
    else:
        extra: dict[str, Any] = {} if session.time_ranges is None else {
            "time_ranges": [[int(a), int(b)] for a, b in session.time_ranges]}
        # the order PREV/NEXT read in, for nodes that check such conditions themselves
        extra["dedup"] = session.dedup
        if session.input_filter is not None:
            extra["input_filter"] = session.input_filter
        if session.event_key is not None:
            extra["event_key"] = list(session.event_key)
        session.reserve()  # room on every node or on none (no query holds one node waiting for another)
        replies = session.action("open", {}, per_node=lambda i: (
            {"sql": sql, "integer_time_unit": unit, "schema": i == 0, **extra}, []))
    schema = pa.ipc.read_schema(pa.py_buffer(replies[0][1][0]))
    headers = [h for h, _ in replies]
    served = {h.get("snapshot") for h in headers}
    if len(served) > 1:
        raise StorageError(f"the storage nodes served different snapshots of the table ({sorted(map(str, served))}); "
                           "run the query again (a commit raced it) or pin one with ?snapshot=ID")
    session.trace.snapshot = served.pop() if served else None
    if session.snapshot is not None and session.trace.snapshot != session.snapshot:
        raise StorageError(f"the storage nodes served snapshot {session.trace.snapshot} of the table, not {session.snapshot} "
                           "as asked; run the query again")
    if len({h.get("schema_digest") for h in headers}) > 1:
        session.same_schemas(session.schemas())
    key = session.event_key
    if key is None:  # the shard sets' own event key (dfs-cer shard --event-key)
        keys = {tuple(h.get("event_key") or ()) for h in headers}
        if len(keys) > 1:
            from dfs_cer.errors import ConfigError

            raise ConfigError(f"the storage nodes' shard sets name different event keys {sorted(keys)}; "
                              "re-shard with one --event-key or pass event_key=")
        key = keys.pop() if keys else ()
    config = QueryConfig(integer_time_unit=unit, event_key=key, dedup=session.dedup)  # type: ignore[arg-type]
    session.split_copies = bool(key) and session.dedup and not all(h.get("copies_whole") for h in headers)
    on_nodes = bool(headers) and all(h.get("navigation_on_node") for h in headers)
    analysis = analyze(query, schema, config, navigation_on_nodes=on_nodes)
    session.analysis = analysis
    mins = [h["min_ts"] for h in headers if h.get("min_ts") is not None]
    maxs = [h["max_ts"] for h in headers if h.get("max_ts") is not None]
    session.time_span = (int(min(mins)), int(max(maxs))) if mins and maxs else None
    session.rows_total = sum(int(h.get("rows") or 0) for h in headers)
    # the nodes' own halo limits (storage.halo_limit) bound what the query may ask of them
    session.halo_limit = min([session.halo_limit, *(int(h["halo_limit"]) for h in headers if "halo_limit" in h)])
    if on_nodes:
        modes = sorted({str(h["navigation_on_node"]) for h in headers})
        session.trace.navigation = f"PREV/NEXT conditions checked on the storage nodes ({', '.join(modes)})"
    return analysis, headers, schema


def _time_column(schema: pa.Schema, analysis: Analysis) -> str:
    return analysis.order_column  # bound to the schema's spelling by the analysis


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


def pull_all(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    analysis, _, schema = _open(session, query, unit)
    if analysis.prev_reach or analysis.next_reach:
        session.trace.navigation = "every row pulled: PREV/NEXT read them in place"
    return _finish(session, session.pull("pull_all"), analysis, schema)


def push_down(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    analysis, headers, schema = _open(session, query, unit)
    if not analysis.skippable:
        return _pull_everything(session, analysis, schema, f"pull_all ({analysis.skip_reason})")
    unordered = _no_halo(session, analysis, schema)
    if unordered:
        return _pull_everything(session, analysis, schema, unordered)
    everything = _every_row_a_candidate(session, analysis) or _too_many_candidates(session, analysis, headers)
    if everything:
        return _pull_everything(session, analysis, schema, f"pull_all ({everything})")
    return _finish(session, _pushdown_events(session, analysis, headers), analysis, schema)


def _every_row_a_candidate(session: Session, analysis: Analysis) -> str | None:
    """Why push-down would pull every row anyway (then with halo rows on top), or None."""
    if not (analysis.prev_reach or analysis.next_reach) or session.group is not None:
        return None  # a group's shared pull holds every row only when opened whole
    for v in analysis.variables:
        if not v.any_row and v.independent is None and not v.navigating:
            return (f"every row is a candidate of {v.name}: its condition reads other rows only, so the halo "
                    "would pull rows twice")
    return None


def _pushdown_events(session: Session, analysis: Analysis, headers: list[dict[str, Any]]) -> pa.Table:
    """Every row some variable's independent condition accepts, with their halo rows."""
    if _local_halo(session, analysis, headers):
        return _pull_with_local_halo(session, analysis, "pull_pushdown", None, [])
    return _with_candidate_halo(session, analysis, session.pull("pull_pushdown"), shipped=True)


def _local_halo(session: Session, analysis: Analysis, headers: list[dict[str, Any]]) -> bool:
    """Can the final pull carry the halo rows (every node holds whole PARTITION BY groups, so a
    candidate's neighbours are on its own node)? Not for a pull shared by a group."""
    return bool(analysis.prev_reach or analysis.next_reach) and session.opened is None and bool(headers) \
        and all(h.get("local_partitions") for h in headers) and not analysis.query.recognize.order_by[0].descending


def _pull_with_local_halo(session: Session, analysis: Analysis, kind: str, tis: str | None,
                          blobs: list[bytes]) -> pa.Table:
    request = replace(_halo_request(session, analysis, kind), tis=tis)
    events = session.pull(kind, request.header(), blobs, shared=False,
                          note="candidates and their halo rows (whole partitions on every node)")
    halo = int(np.count_nonzero(events.column(HALO).to_numpy(zero_copy_only=False))) if events.num_rows else 0
    session.trace.halo_rows += halo
    _say_navigation(session.trace, f"halo in the final pull (up to {analysis.prev_reach} row(s) before, "
                    f"{analysis.next_reach} after, per variable; whole partitions on every node)")
    return events


def _pull_everything(session: Session, analysis: Analysis, schema: pa.Schema, reason: str) -> PullResult:
    session.trace.fallback = reason
    if analysis.prev_reach or analysis.next_reach:
        session.trace.navigation = "every row pulled: PREV/NEXT read them in place"
    return _finish(session, session.pull("pull_all"), analysis, schema)


def _halo_request(session: Session, analysis: Analysis, kind: str) -> Halo:
    return Halo(session.query_id, kind, analysis.prev_reach, analysis.next_reach, analysis.event_key, analysis.dedup)


def _with_candidate_halo(session: Session, analysis: Analysis, events: pa.Table, shipped: bool = False) -> pa.Table:
    """Skip patterns that navigate physically: the rows next to every pulled candidate (in the
    matcher's order, per partition), from every node, marked as :data:`HALO` rows. One more round
    trip: the nodes learn the candidates' (partition, time) points, since a candidate's global
    neighbours may lie on any node (``spec/navigation-notes.md``). Each point asks only for the
    rows the variables it may be labelled with read, in their direction. Where copies of an
    event may lie on several nodes (``session.split_copies``), every candidate's copies come
    too, also without PREV/NEXT: the matcher keeps the same copy as over every row. ``shipped``: the
    compute node kept every row the nodes' pulls shipped for the query (not a group's pulls), so
    the nodes leave those rows out."""
    navigating = bool(analysis.prev_reach or analysis.next_reach)
    if not (navigating or session.split_copies):
        return events
    trace = session.trace
    if navigating:
        _say_navigation(trace, f"halo around candidates (up to {analysis.prev_reach} row(s) before, "
                        f"{analysis.next_reach} after, per variable)")
    if events.num_rows == 0:
        return events
    partition_by = list(analysis.query.recognize.partition_by)
    before, after = candidate_reach(events, analysis)
    # copies of an event (same key and time) that differ in other columns: the matcher keeps the
    # canonical one, which may not be a candidate itself (or lie on another node); every
    # candidate's tie group brings it
    ties = bool(analysis.event_key) and analysis.dedup
    wanted = (before > 0) | (after > 0) | ties
    if not wanted.any():
        return events
    times = time_values(events, analysis.order_column)
    points = events.select(partition_by).append_column(POINT_TIME, pa.array(times)) \
        .append_column(POINT_BEFORE, pa.array(before.astype(np.int32))) \
        .append_column(POINT_AFTER, pa.array(after.astype(np.int32))).filter(pa.array(wanted))
    points = sort_and_partition(points, (), [(c, False) for c in points.column_names], dedup=True)[0]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, points.schema) as writer:
        writer.write_table(points)
    # a node re-opened after a restart has no record of the rows its pulls shipped before
    skip = shipped and session.opened is None and not any(c.reopened for c in session.clients)
    request = replace(_halo_request(session, analysis, "pull_halo"), skip_shipped=skip)
    blobs = [sink.getvalue().to_pybytes()]
    note = f"rows next to {points.num_rows} candidate points"
    try:
        near = session.pull("pull_halo", request.header(), blobs, shared=False, note=note)
    except NodeRefusedError as exc:  # a node restarted since the final pull: every node sends them all
        if exc.code != CACHE_MISS or not skip:
            raise
        skip = False
        near = session.pull("pull_halo", replace(request, skip_shipped=False).header(), blobs, shared=False,
                            note=f"{note}, shipped rows included (a storage node restarted)")
    if near.num_rows == 0:
        return events
    near = near.select(events.column_names).cast(events.schema)
    # without skip_shipped the candidates come back among them
    halo = near if skip else near.filter(pa.array(subtract_rows(near, events)))
    trace.halo_rows += halo.num_rows
    return pa.concat_tables([events.append_column(HALO, pa.array(np.zeros(events.num_rows, bool))),
                             halo.append_column(HALO, pa.array(np.ones(halo.num_rows, bool)))])


def _say_navigation(trace: Trace, text: str) -> None:
    """Add a step of the PREV/NEXT path to the trace (after e.g. the nodes' own checks)."""
    trace.navigation = f"{trace.navigation}; {text}" if trace.navigation else text


def push_pull(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    analysis, headers, schema = _open(session, query, unit)
    if not analysis.skippable:
        return _pull_everything(session, analysis, schema, f"pull_all ({analysis.skip_reason})")
    unordered = _no_halo(session, analysis, schema)
    if unordered:
        return _pull_everything(session, analysis, schema, unordered)
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
            c.upload(Upload(session.query_id, p).header(), t)

        session.all("upload", send)
        replies = session.action("push_pull", PushPull(session.query_id, name, tuple(order[:i])).header())
        session.trace.warnings.extend(f"push_pull: storage node {k} kept every candidate of {name} ({h['unfiltered']})"
                                      for k, (h, _) in enumerate(replies) if h.get("unfiltered"))
        pulled[name] = _pull_variable(session, name)
    events = pa.concat_tables(list(pulled.values()))
    # an event may have been pulled for several variables: keep one copy per (node, row), in
    # (node, row) order so that tied timestamps end up in the order every other strategy uses
    keys = np.asarray(events.column(NODE).to_numpy(), np.int64) * (1 << 40) + \
        np.asarray(events.column(ROW_ID).to_numpy(), np.int64)
    first = np.unique(keys, return_index=True)[1]
    events = events.take(pa.array(first)).drop([NODE, ROW_ID])
    return _finish(session, _with_candidate_halo(session, analysis, events, shipped=True), analysis, schema)


NODE = "__dfs_cer_node"


def _pull_variable(session: Session, name: str) -> pa.Table:
    body = {"query_id": session.query_id, "kind": "pull_variable", "variable": name}
    index = {id(c): i for i, c in enumerate(session.clients)}

    def one(c: StorageClient) -> pa.Table:
        t = c.pull(body)
        return t.append_column(NODE, pa.array(np.full(t.num_rows, index[id(c)], np.int64)))

    tables = session.all("pull_variable", one, events=lambda ts: sum(t.num_rows for t in ts),
                         note=f"events of {name}")
    return pa.concat_tables(tables)


class _Tis:
    """The compute node's time interval set: a shrinking window filter (DFS) or an exact
    interval array (the DFS-V2 ablation and Naive-DFS)."""

    def __init__(self, fmt: str, initial: IntervalSet, window: int) -> None:
        self.fmt, self.window = fmt, window
        self.swf = ShrinkingWindowFilter.from_intervals(initial.starts, initial.ends, window) if fmt == "swf" else None
        self.exact = initial

    def to_bytes(self) -> bytes:
        return self.swf.to_bytes() if self.swf is not None else self.exact.to_bytes()

    @property
    def covered_length(self) -> float:
        return self.swf.covered_length if self.swf is not None else float(self.exact.total_length())

    @property
    def is_empty(self) -> bool:
        return self.swf.is_empty if self.swf is not None else self.exact.is_empty

    def apply(self, replies: list[bytes]) -> None:
        """Shrink to what the nodes' verification replies keep."""
        if self.swf is not None:
            self.swf.apply_refresh([RefreshTags.from_bytes(b) for b in replies])
        else:
            parts = [IntervalSet.from_bytes(b) for b in replies]
            self.exact = parts[0].union(*parts[1:]) if parts else IntervalSet()

    def segments(self) -> np.ndarray:
        return self.swf.covered_intervals()[0] if self.swf is not None else self.exact.starts

    def closed(self) -> IntervalSet:
        """The covered time as exact closed intervals (what a pull with halo rows is sent)."""
        if self.swf is None:
            return self.exact
        starts, ends = self.swf.covered_intervals()  # half-open
        return IntervalSet(starts, ends - 1)


def _no_halo(session: Session, analysis: Analysis, schema: pa.Schema) -> str | None:
    """Why halo rows cannot be found for this query (its fallback reason), or None. Decided here,
    from the analysis, before any halo request (a group's nodes decide the same at open)."""
    reason = no_halo(analysis, schema, session.halo_limit)
    return None if reason is None else f"pull_all ({reason})"


def _fallback(session: Session, analysis: Analysis, schema: pa.Schema,
              headers: list[dict[str, Any]] | None = None) -> PullResult | None:
    """The exact strategy to run instead of interval pruning when the query does not allow it."""
    trace = session.trace
    unordered = _no_halo(session, analysis, schema)
    if unordered:
        return _pull_everything(session, analysis, schema, unordered)
    shard_times = {str(h["time_column"]) for h in headers or [] if h.get("time_column")}
    if analysis.interval_pruning and shard_times and shard_times != {analysis.order_column}:
        # the nodes build intervals over their own time column: they do not bound this ORDER BY
        analysis = replace(analysis, interval_pruning=False, pruning_reason=(
            f"the shards are kept by {', '.join(sorted(shard_times))}, the query orders by {analysis.order_column}: "
            "time intervals of the one do not bound matches in the other"))
    if not analysis.interval_pruning:
        everything = _every_row_a_candidate(session, analysis) or _too_many_candidates(session, analysis, headers or [])
        if analysis.skippable and not everything:
            trace.fallback = f"push_down ({analysis.pruning_reason})"
            return _finish(session, _pushdown_events(session, analysis, headers or []), analysis, schema)
        return _pull_everything(session, analysis, schema, f"pull_all ({analysis.pruning_reason})")
    return None


def _too_many_candidates(session: Session, analysis: Analysis, headers: list[dict[str, Any]],
                         share: float = 1.0) -> str | None:
    """Why pulling the candidates (``share`` of them, inside the intervals) with their halo rows
    would move about as much as every row, or None. Halo rows and the points sent for them cost
    about as much again as the candidates, so half of all rows is where pulling everything wins."""
    if not (analysis.prev_reach or analysis.next_reach) or not headers or session.group is not None:
        return None  # a group's shared pull holds every row only when opened whole
    total = sum(int(h.get("total_rows") or h.get("rows") or 0) for h in headers)
    candidates = min(total, sum(_counts(headers).values())) * min(1.0, share)
    if total and candidates >= 0.5 * total:
        return (f"about {candidates:,.0f} of {total:,} rows are candidates: with their halo rows the pull would "
                "move more than every row")
    return None


def _final_pull(session: Session, tis: _Tis, analysis: Analysis, schema: pa.Schema,
                headers: list[dict[str, Any]] | None = None) -> PullResult:
    if analysis.skippable:
        if headers:
            mins = [h["min_ts"] for h in headers if h.get("min_ts") is not None]
            maxs = [h["max_ts"] for h in headers if h.get("max_ts") is not None]
            span = float(max(maxs) - min(mins)) if mins else 1.0
            broad = _too_many_candidates(session, analysis, headers, tis.covered_length / max(span, 1.0))
            if broad:
                return _pull_everything(session, analysis, schema, f"pull_all ({broad})")
        fmt = "intervals" if tis.swf is None else "swf"
        if _local_halo(session, analysis, headers or []):
            events = _pull_with_local_halo(session, analysis, "pull", fmt, [tis.to_bytes()])
            return _finish(session, events, analysis, schema)
        events = session.pull("pull", {"tis": fmt}, [tis.to_bytes()])
        return _finish(session, _with_candidate_halo(session, analysis, events, shipped=True), analysis, schema)
    if analysis.prev_reach or analysis.next_reach:
        # contiguous: every row inside the intervals, and each partition's neighbours of them
        closed = tis.closed()
        events = session.pull("pull_range", _halo_request(session, analysis, "pull_range").header(),
                              [closed.to_bytes()], shared=False, note="every row inside the intervals, with halo rows")
        halo = int(np.count_nonzero(events.column(HALO).to_numpy(zero_copy_only=False))) if events.num_rows else 0
        session.trace.halo_rows += halo
        _say_navigation(session.trace, f"halo around intervals ({analysis.prev_reach} row(s) before, "
                        f"{analysis.next_reach} after)")
        return _finish(session, events, analysis, schema, closed.starts)
    events = session.pull("pull_range", {"tis": "intervals" if tis.swf is None else "swf"}, [tis.to_bytes()])
    return _finish(session, events, analysis, schema, tis.segments())


JOIN_FILTERS = ("wjf", "keyset", "none")


def _node_matching(session: Session, analysis: Analysis, headers: list[dict[str, Any]], schema: pa.Schema,
                   options: PullOptions) -> PullResult | None:
    """Where every node holds whole PARTITION BY groups, the nodes may run the matcher and ship
    only the MATCH_RECOGNIZE relation. ``auto``: when the busiest node's matching time (its
    calibrated beta x its rows) fits its CPU budget and beats the estimated pull (bytes over the
    network rate plus the compute node's matching of them)."""
    if options.node_matching == "off" or not headers:
        return None
    trace = session.trace
    if not all(h.get("local_partitions") for h in headers):
        if options.node_matching == "on":
            trace.warnings.append("node_matching=on: the storage nodes do not hold whole PARTITION BY groups "
                                  "(shard with --partitioning type by a PARTITION BY column); events were pulled")
        return None
    engine = "cer" if analysis.query.recognize.all_matches else "rowpattern"
    rows = [int(h.get("total_rows") or h.get("rows") or 0) for h in headers]
    node_seconds = max(float(h.get("beta", {}).get(engine, 200e-9)) * r for h, r in zip(headers, rows, strict=True))
    budget = min(float(h.get("match_cpu_budget", 0.0)) for h in headers)
    model = CostModel.load(options.cost_model, options.calibration_file, engine=engine).misestimate(options.rate_scale)
    rate, beta = model.constants["rate_bytes_per_s"], model.constants["beta"]
    row_bytes = float(np.mean([h.get("row_bytes", 0.0) for h in headers])) or 64.0
    total = sum(rows)
    pulled = float(total)
    if analysis.interval_pruning and analysis.window_units is not None:
        counts = _counts(headers)
        mins = [h["min_ts"] for h in headers if h.get("min_ts") is not None]
        maxs = [h["max_ts"] for h in headers if h.get("max_ts") is not None]
        span = float(max(maxs) - min(mins)) if mins else 1.0
        rarest = min((counts.get(v.name, 0) for v in analysis.filter_variables
                      if v.independent is not None), default=total)
        share = min(1.0, rarest * 2.0 * max(1, analysis.window_units) / max(span, 1.0))
        pulled = share * (sum(int(h.get("rows", 0)) for h in headers) if analysis.skippable else total)
    pull_seconds = pulled * row_bytes / rate + beta * pulled
    decision = {"node_seconds": node_seconds, "cpu_budget": budget, "pull_seconds_estimate": pull_seconds,
                "pulled_rows_estimate": int(pulled)}
    if options.node_matching == "auto" and (node_seconds > budget or node_seconds >= pull_seconds):
        why = "over the nodes' CPU budget" if node_seconds > budget else "pulling is estimated cheaper"
        trace.rounds.append(Round("skip", 0, 0, 0, 0.0, decision, f"node-side matching not chosen: {why}"))
        return None
    from dfs_cer.config import load_config

    settings = load_config().matcher
    request = NodeMatch(session.query_id, analysis.event_key, analysis.dedup, settings.max_matches, settings.on_limit)
    from dfs_cer.transport.client import NodeRefusedError
    from dfs_cer.transport.protocol import WORK_MEMORY

    try:
        tables = session.all("pull_matches", lambda c: c.pull(request.header()),
                             events=lambda ts: sum(t.num_rows for t in ts), decision=decision,
                             note="matched on the storage nodes (whole PARTITION BY groups there)")
    except NodeRefusedError as exc:  # the matches do not fit a node's memory: pull the events (exact)
        if exc.code != WORK_MEMORY:
            raise
        trace.rounds.append(Round("skip", 0, 0, 0, 0.0, decision, f"node-side matching stopped, events pulled: {exc}"))
        return None
    matches = sum(int((t.schema.metadata or {}).get(b"dfs_cer_matches", b"0")) for t in tables)
    truncated = [t for t in tables if (t.schema.metadata or {}).get(b"dfs_cer_truncated") == b"true"]
    if truncated:
        trace.warnings.append(f"{len(truncated)} storage node(s) stopped at max_matches={settings.max_matches}")
    relation = pa.concat_tables([t.replace_schema_metadata(None) for t in tables], promote_options="permissive")
    partition_by = list(analysis.query.recognize.partition_by)
    if partition_by and relation.num_rows:  # the nodes' partitions in the order one engine run gives
        keys = [(c, "ascending", "at_end") for c in partition_by]
        relation = relation.take(pc.sort_indices(relation, sort_keys=keys))
    trace.navigation = "node-side matching"
    return PullResult(schema.empty_table(), trace, analysis, None, relation, matches)


def dfs(session: Session, query: Query, unit: str, options: PullOptions, tis_format: str = "swf",
        join_filter: str = "wjf") -> PullResult:
    """Dual filtering; ``tis_format`` ("swf" or "intervals") and ``join_filter`` ("wjf",
    "keyset" or "none") select the paper's ablations. ``passes`` > 1 verifies every variable
    again against the interval set the others shrank (the first variable's events are checked
    only against its own intervals in pass 1); the cost model gates each of these round trips.
    ``rate_scale`` misestimates the network rate R by that factor (an ablation)."""
    cost_model, calibration_file, target_fpr = options.cost_model, options.calibration_file, options.target_fpr
    passes, rate_scale = options.passes, options.rate_scale
    if tis_format not in ("swf", "intervals") or join_filter not in JOIN_FILTERS:
        from dfs_cer.errors import ConfigError

        raise ConfigError(f"tis_format must be swf or intervals and join_filter one of {', '.join(JOIN_FILTERS)}; "
                          f"got {tis_format!r}, {join_filter!r}")
    analysis, headers, schema = _open(session, query, unit)
    trace = session.trace
    on_nodes = _node_matching(session, analysis, headers, schema, options)
    if on_nodes is not None:
        return on_nodes
    fallback = _fallback(session, analysis, schema, headers)
    if fallback is not None:
        return fallback
    window = analysis.window_units
    assert window is not None
    counts = _counts(headers)
    mins = [h["min_ts"] for h in headers if h.get("min_ts") is not None]
    maxs = [h["max_ts"] for h in headers if h.get("max_ts") is not None]
    span = float(max(maxs) - min(mins)) if mins else 1.0
    candidates = sum(int(h["rows"]) for h in headers)
    row_bytes = float(np.mean([h.get("row_bytes", 0.0) for h in headers])) or 64.0
    engine = "cer" if analysis.query.recognize.all_matches else "rowpattern"
    model = CostModel.load(cost_model, calibration_file, engine=engine).misestimate(rate_scale)
    order = variable_order(analysis, counts)
    first = order[0]
    role = ROLE_NAMES[analysis.variable(first).role]
    # the reply depends on the variable's condition, role and the window only: queries run
    # together with the same first variable share the round trip
    condition = analysis.variable(first).independent
    replies = session.action("intervals", Intervals(session.query_id, first, role, window).header(),
                             share=(None if condition is None else to_sql(condition), role, window))
    model.probe(trace.rounds[-1].bytes_to_cn + trace.rounds[-1].bytes_to_sn, trace.rounds[-1].seconds)
    parts = [IntervalSet.from_bytes(b[0]) for _, b in replies]
    initial = parts[0].union(*parts[1:]) if parts else IntervalSet()
    if initial.is_empty:
        trace.fallback = f"no match possible: {first} has no candidate event"
        return _finish(session, pa.table({}), analysis, schema)
    tis = _Tis(tis_format, initial, window)
    processed = [first]
    # later passes verify every variable again against the interval set the others shrank
    for v in order[1:] + order * (passes - 1):
        info = analysis.variable(v)
        partners: dict[str, tuple[str, str]] = {}
        for e in analysis.equalities if join_filter != "none" else ():
            if v in (e.left_variable, e.right_variable) and e.other(v) in processed and e.other(v) not in partners \
                    and e.other(v) != v and analysis.constrains(e, v):
                partners[e.other(v)] = (e.column_of(e.other(v)), e.column_of(v))
        tis_bytes = tis.to_bytes()
        inside = min(1.0, 1.5 * tis.covered_length / max(span, 1.0))
        if join_filter == "keyset":  # 8 bytes per (value, window) pair inside the interval set
            join_bytes = sum(8 * int(counts.get(p, 0) * inside) for p in partners)
        else:
            join_bytes = sum(WindowJoinFilter.with_estimates(max(1, counts.get(p, 0)), window, join_kind(
                schema.field(c_p).type, schema.field(c_v).type), target_fpr=target_fpr).bits // 8
                for p, (c_p, c_v) in partners.items())
        decision = model.decide(CostInputs(
            variable=v, middle=info.role is Role.MIDDLE, count=counts.get(v, 0), span=span, window=window,
            covered=tis.covered_length, event_rate=candidates / max(span, 1.0), equalities=len(partners),
            join_keys=sum(counts.get(p, 0) for p in partners), swf_bytes=len(tis_bytes), wjf_bytes=join_bytes,
            nodes=len(session.clients), event_bytes=row_bytes))
        if not decision.run:
            trace.rounds.append(_skip(v, decision.to_dict()))
            processed.append(v)  # a skipped variable still provides join filters later
            continue
        blobs = [tis_bytes]
        probes = []
        # the join filter holds only the partner's events inside the interval set: size it for them
        for p, (c_p, c_v) in partners.items():
            kind = join_kind(schema.field(c_p).type, schema.field(c_v).type)
            f0 = WindowJoinFilter.with_estimates(max(1, int(counts.get(p, 0) * inside)), window, kind,
                                                 target_fpr=target_fpr)
            build = Build(p, c_p, window, int(kind), join_filter, f0.bits, f0.hashes)
            built = session.action("wjf", Wjf(session.query_id, (build,), tis_format).header(), [tis_bytes],
                                   decision=decision.to_dict(), note=f"{join_filter} of {p}.{c_p} for {v}.{c_v}")
            joined: WindowJoinFilter | WindowKeySet
            if join_filter == "keyset":
                joined = WindowKeySet.union([WindowKeySet.from_bytes(b[0]) for _, b in built])
            else:
                joined = WindowJoinFilter.union([WindowJoinFilter.from_bytes(b[0]) for _, b in built])
            order_pv = analysis.precedes(p, v)
            probes.append(Probe(c_v, -1 if order_pv else (1 if order_pv is False else 0), len(blobs), join_filter))
            blobs.append(joined.to_bytes())
        request = Verify(session.query_id, v, ROLE_NAMES[info.role], window, tuple(probes), tis_format)
        if partners:  # the nodes kept the interval set sent with the wjf action
            # probe blob indexes stay valid: the cached set becomes blob 0 again on the node
            try:
                verified = session.action("verify", replace(request, cached_swf=True).header(), blobs[1:])
            except NodeRefusedError as exc:  # a node restarted since the wjf round: send the set again
                if exc.code != CACHE_MISS:
                    raise
                verified = session.action("verify", request.header(), blobs,
                                          note="the interval set sent again (a storage node restarted)")
        else:
            verified = session.action("verify", request.header(), blobs, decision=decision.to_dict())
        tis.apply([b[0] for _, b in verified])
        model.observe_transfer(sum(len(blob) for blob in blobs) * len(session.clients),
                               trace.rounds[-1].seconds)
        processed.append(v)
        if tis.is_empty:
            trace.fallback = f"no match possible: the interval set is empty after {v}"
            return _finish(session, pa.table({}), analysis, schema)
    return _final_pull(session, tis, analysis, schema, headers)


def swf_only(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    """Ablation: DFS without join filters (equalities are checked only on the compute node)."""
    return dfs(session, query, unit, options, join_filter="none")


def dfs_v1(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    """Ablation: DFS with exact (value, window) tables in place of window-wise join filters."""
    return dfs(session, query, unit, options, join_filter="keyset")


def dfs_v2(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    """Ablation: interval arrays in place of the SWF and exact tables in place of join filters."""
    return dfs(session, query, unit, options, tis_format="intervals", join_filter="keyset")


def naive_dfs(session: Session, query: Query, unit: str, options: PullOptions) -> PullResult:
    """Naive-DFS (reference notes §6): one trip for every variable's Eq. 1 interval arrays and the
    (timestamp, value) pairs of every equality column; the compute node intersects the arrays and
    applies the equalities on window ids; a second trip pulls the rows inside the result."""
    analysis, headers, schema = _open(session, query, unit)
    on_nodes = _node_matching(session, analysis, headers, schema, options)
    if on_nodes is not None:
        return on_nodes
    fallback = _fallback(session, analysis, schema, headers)
    if fallback is not None:
        return fallback
    window = analysis.window_units
    assert window is not None
    names = [v.name for v in analysis.filter_variables]
    pair_keys = sorted({(v, e.column_of(v)) for e in analysis.equalities
                        for v in (e.left_variable, e.right_variable) if v in names})
    replies = session.action("summaries", {
        "window": window, "variables": [{"variable": v, "role": ROLE_NAMES[analysis.variable(v).role]}
                                        for v in names],
        "pairs": [{"variable": v, "column": c} for v, c in pair_keys]}, note="interval arrays and join pairs")
    per_var: dict[str, IntervalSet] = {}
    for i, v in enumerate(names):
        parts = [IntervalSet.from_bytes(b[i]) for _, b in replies]
        per_var[v] = parts[0].union(*parts[1:])
    pairs = {k: pa.concat_tables([pa.ipc.open_stream(b[len(names) + j]).read_all() for _, b in replies])
             for j, k in enumerate(pair_keys)}
    tis = per_var[names[0]]
    for v in names[1:]:
        tis = tis.intersection(per_var[v])
    processed: list[str] = []
    for v in sorted(names, key=lambda n: (per_var[n].total_length(), names.index(n))):
        for e in analysis.equalities:
            if tis.is_empty or v not in (e.left_variable, e.right_variable) or e.other(v) not in processed \
                    or not analysis.constrains(e, v):
                continue
            p = e.other(v)
            mine, theirs = pairs[(v, e.column_of(v))], pairs[(p, e.column_of(p))]
            theirs = theirs.filter(pa.array(tis.contains(theirs.column("ts").to_numpy())))
            kind = join_kind(theirs.schema.field("value").type, mine.schema.field("value").type)
            table = WindowKeySet(window, kind)  # the same (value, window) table as dfs_v1
            table.add(theirs.column("value"), theirs.column("ts").to_numpy())
            order_pv = analysis.precedes(p, v)
            ts = mine.column("ts").to_numpy()
            hit = table.might_contain(mine.column("value"), ts, -1 if order_pv else (1 if order_pv is False else 0))
            lo, hi = eq1_offsets(ROLE_NAMES[analysis.variable(v).role], window)
            tis = tis.intersection(IntervalSet.around(ts[hit], lo, hi))
        processed.append(v)
    if tis.is_empty:
        session.trace.fallback = "no match possible: the intersected interval set is empty"
        return _finish(session, pa.table({}), analysis, schema)
    return _final_pull(session, _Tis("intervals", tis, window), analysis, schema, headers)


def _skip(variable: str, decision: dict[str, Any]) -> Any:
    from dfs_cer.strategies.base import Round

    return Round("skip", 0, 0, 0, 0.0, decision, f"cost model skipped {variable}")


STRATEGIES = {"pull_all": pull_all, "push_down": push_down, "push_pull": push_pull, "naive_dfs": naive_dfs,
              "dfs": dfs, "swf_only": swf_only, "dfs_v1": dfs_v1, "dfs_v2": dfs_v2}


def pull(name: str, query: Query | str, endpoints: Sequence[str], token: str, *, integer_time_unit: str = "s",
         event_key: Sequence[str] | None = None, dedup: bool = True,
         time_ranges: Sequence[tuple[int, int]] | None = None, timeout: float | None = None,
         config: StrategyConfig | None = None, input_filter: str | None = None, defer: bool = False,
         defer_min_rows: int = 0, snapshot: int | None = None, **options: Any) -> PullResult:
    """Run pull strategy ``name`` for ``query`` against the storage nodes at ``endpoints``.

    ``event_key`` (default: the shard sets' own, from ``dfs-cer shard --event-key``; else the
    whole row) identifies an event; with ``dedup`` the matcher drops duplicates that several
    nodes (or one) returned, and ties on time are matched in event key order. ``time_ranges``
    (inclusive, in the time column's integer units) restricts the query to the rows inside them
    (incremental re-runs). ``input_filter`` (one SQL condition over the table's columns, of the
    subset in :mod:`dfs_cer.query.input_filter`) keeps only the rows passing it: the nodes drop
    the others before anything else, so the query runs as over ``SELECT * FROM t WHERE
    input_filter``; a node that cannot evaluate it exactly refuses (code ``input-filter``). ``timeout`` bounds the whole query in seconds (default
    ``strategy.query_timeout_seconds``; each call also gets ``strategy.call_timeout_seconds``).
    ``snapshot``: the table snapshot every node reads, for nodes serving an Iceberg table in
    place (default: the table's current snapshot when the query starts; ``trace.snapshot``).

    Whatever happens, the query is closed on every node; a failure names its round and node.
    When the pull completed but some node did not confirm ``close``, the result is kept and the
    trace's ``warnings`` say so.

    ``defer``: when the final pull needs no halo rows, it is not run; ``result.deferred`` (a
    :class:`DeferredPull`) holds it, the query stays open on the nodes for executors to take it
    in time slices, and the caller must call ``result.deferred.close()`` (inputs of fewer than
    ``defer_min_rows`` rows on the nodes are pulled here all the same)."""
    from dfs_cer.errors import ConfigError
    from dfs_cer.strategies.base import resolve_query

    if name not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    checked = PullOptions.parse(options)
    pause, deadline = 0.05, None
    while True:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        session = Session.connect(endpoints, token, Trace(name), config, timeout if left is None else left,
                                  event_key, dedup)
        deadline = session.deadline
        session.time_ranges = None if time_ranges is None else [(int(a), int(b)) for a, b in time_ranges]
        session.snapshot = None if snapshot is None else int(snapshot)
        session.input_filter = input_filter
        session.trace.input_filter = input_filter
        try:
            return _pull_once(session, name, resolve_query(query), integer_time_unit, checked, list(endpoints), token,
                              defer, defer_min_rows, config)
        except DfsCerError as exc:
            # a node serves running queries on another snapshot of the table: try again shortly
            # (at the then current snapshot, unless one was asked for), within the deadline
            if SNAPSHOT_BUSY not in str(exc) or deadline is None or time.monotonic() + pause >= deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(1.0, pause * 2)


def _pull_once(session: Session, name: str, query: Query, unit: str, checked: PullOptions, endpoints: list[str],
               token: str, defer: bool, defer_min_rows: int, config: StrategyConfig | None) -> PullResult:
    if not defer:
        return session.finish(lambda: STRATEGIES[name](session, query, unit, checked), lambda r: r.trace)
    session.defer = True
    session.defer_min_rows = defer_min_rows
    try:
        result = STRATEGIES[name](session, query, unit, checked)
    except BaseException:
        session.close()
        session.close_connections()
        raise
    if session.deferred is None or result.relation is not None:
        result.trace.warnings.extend(session.close())
        session.close_connections()
        return result
    kind, header, blobs = session.deferred
    result.deferred = DeferredPull(session, endpoints, token, kind, header, blobs, session.time_span,
                                   config or StrategyConfig())
    return result
    kind, header, blobs = session.deferred
    result.deferred = DeferredPull(session, list(endpoints), token, kind, header, blobs, session.time_span,
                                   config or StrategyConfig())
    return result
