"""Steps the pull strategies share: open the query on every node, fall back to the nearest exact
strategy, halo rows for PREV/NEXT, and the final pull of the rows inside an interval set."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.config import QueryConfig
from dfs_cer.errors import CacheMissError, StorageError
from dfs_cer.events.order import sort_and_partition
from dfs_cer.events.schemas import aligned
from dfs_cer.events.time import time_values
from dfs_cer.filters import IntervalSet, RefreshTags, ShrinkingWindowFilter
from dfs_cer.filters.points import SliceRuns
from dfs_cer.match.rowpattern.navigation import candidate_reach
from dfs_cer.plan.halo import no_halo, subtract_rows
from dfs_cer.plan.layout import conflict
from dfs_cer.plan.layout import note as layout_note
from dfs_cer.query import Analysis, Query, Role, analyze
from dfs_cer.query.names import one_log, unchecked_note
from dfs_cer.strategies.admission import open_everywhere
from dfs_cer.strategies.base import PullResult, Session, Trace, sort_events
from dfs_cer.strategies.request import PullRequest
from dfs_cer.transport.client import NodeRefusedError
from dfs_cer.transport.protocol import HALO, POINT_AFTER, POINT_BEFORE, POINT_TIME, Halo
from dfs_cer.transport.replies import OpenReply

ROLE_NAMES = {Role.HEAD: "head", Role.TAIL: "tail", Role.MIDDLE: "middle"}


def open_query(
    session: Session, request: PullRequest
) -> tuple[Analysis, list[OpenReply], pa.Schema]:
    """Open ``request``'s query on every node (or take the group's replies): the bound query,
    the nodes' replies and the schema; the session learns what the nodes reported."""
    query, unit = request.query, request.integer_time_unit
    sql = query.to_sql()
    if session.opened is not None:  # opened together with other queries (strategies.multi)
        replies = session.opened
    else:
        extra: dict[str, Any] = (
            {}
            if session.time_ranges is None
            else {"time_ranges": [[int(a), int(b)] for a, b in session.time_ranges]}
        )
        # the order PREV/NEXT read in, for nodes that check such conditions themselves (the
        # nodes' defaults, dedup on and integer times in seconds, travel as nothing)
        if not session.dedup:
            extra["dedup"] = False
        if unit != "s":
            extra["integer_time_unit"] = unit
        if session.input_filter is not None:
            extra["input_filter"] = session.input_filter
        if session.event_key is not None:
            extra["event_key"] = list(session.event_key)
        # a node relies on its shard set's layout only for a query on as many nodes as the set
        # has, and not at all once the compute node found the nodes' claims in conflict
        extra["nodes"] = len(session.clients)
        where = endpoints(session)

        def again(headers: list[OpenReply]) -> str | None:
            """Some node checked PREV/NEXT conditions by a layout the nodes' claims do not bear
            out: open again, the nodes relying on none."""
            if extra.get("own_layout") is not False and any(h.navigation_on_node for h in headers):
                reason = conflict([h.layout for h in headers], where)
                if reason is not None:
                    extra["own_layout"] = False
                    return reason
            return None

        # admitted on every node or on none, inside open (no query holds one node waiting for
        # another); the schema from node 0 only
        replies = open_everywhere(
            session,
            lambda i: (
                {"sql": sql, **extra} if i == 0 else {"sql": sql, "schema": False, **extra},
                [],
            ),
            again,
        )
    schema = pa.ipc.read_schema(pa.py_buffer(replies[0][1][0]))
    session.prime(schema)
    headers = trusted_headers(session, query, [h for h, _ in replies])
    served = {h.snapshot for h in headers}
    if len(served) > 1:
        raise StorageError(
            "the storage nodes served different snapshots of the table "
            f"({sorted(map(str, served))}); run the query again (a commit raced it) or pin one "
            "with ?snapshot=ID"
        )
    session.trace.snapshot = served.pop() if served else None
    if session.snapshot is not None and session.trace.snapshot != session.snapshot:
        raise StorageError(
            f"the storage nodes served snapshot {session.trace.snapshot} of the table, not "
            f"{session.snapshot} as asked; run the query again"
        )
    if len({h.schema_digest for h in headers}) > 1:  # one schema for every node's rows, or why not
        schema = session.same_schemas(session.schemas())
    key = session.event_key
    if key is None:  # the shard sets' own event key (dfs-cer shard --event-key)
        keys = {h.event_key for h in headers}
        if len(keys) > 1:
            from dfs_cer.errors import ConfigError

            raise ConfigError(
                f"the storage nodes' shard sets name different event keys {sorted(keys)}; "
                "re-shard with one --event-key or pass event_key="
            )
        key = keys.pop() if keys else ()
    config = QueryConfig(integer_time_unit=unit, event_key=key, dedup=session.dedup)  # type: ignore[arg-type]
    session.split_copies = bool(key) and session.dedup and not all(h.copies_whole for h in headers)
    on_nodes = bool(headers) and all(h.navigation_on_node for h in headers)
    analysis = analyze(query, schema, config, navigation_on_nodes=on_nodes)
    session.analysis = analysis
    mins = [h.min_ts for h in headers if h.min_ts is not None]
    maxs = [h.max_ts for h in headers if h.max_ts is not None]
    session.time_span = (int(min(mins)), int(max(maxs))) if mins and maxs else None
    session.rows_total = sum(h.rows for h in headers)
    # the nodes' own halo limits (storage.halo_limit) bound what the query may ask of them
    session.halo_limit = min(
        [session.halo_limit, *(h.halo_limit for h in headers if h.halo_limit is not None)]
    )
    if on_nodes:
        modes = sorted({str(h.navigation_on_node) for h in headers})
        session.trace.navigation = (
            f"PREV/NEXT conditions checked on the storage nodes ({', '.join(modes)})"
        )
    return analysis, headers, schema


def endpoints(session: Session) -> list[str]:
    """The session's nodes as errors and notes name them."""
    return [f"storage node {c.endpoint}" for c in session.clients]


def trusted_headers(session: Session, query: Query, headers: list[OpenReply]) -> list[OpenReply]:
    """The nodes' open replies, checked against each other: one log (its name checked by every
    named node; a note where some shard set has none), and what the nodes say they hold whole
    (PARTITION BY groups, copies of an event) dropped, with a note, when their layouts do not
    make one shard set (:mod:`dfs_cer.plan.layout`)."""
    where = endpoints(session)
    names = [h.table for h in headers]
    one_log(names, where)
    if any(n is None for n in names):
        session.trace.notes.append(unchecked_note(query.table))
    reason = conflict([h.layout for h in headers], where)
    if reason is None:
        return headers
    session.trace.notes.append(layout_note(reason))
    return [replace(h, local_partitions=False, copies_whole=False) for h in headers]


def time_column_of(schema: pa.Schema, analysis: Analysis) -> str:
    return analysis.order_column  # bound to the schema's spelling by the analysis


def candidate_counts(headers: list[OpenReply]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in headers:
        for v, info in h.variables.items():
            out[v] = out.get(v, 0) + info.count
    return out


def finish_pull(
    session: Session,
    events: pa.Table,
    analysis: Analysis,
    schema: pa.Schema,
    segments: np.ndarray | None = None,
) -> PullResult:
    if events.num_columns == 0:
        events = schema.empty_table()
    return PullResult(
        sort_events(events, time_column_of(schema, analysis)), session.trace, analysis, segments
    )


def every_row_a_candidate(session: Session, analysis: Analysis) -> str | None:
    """Why push-down would pull every row anyway (then with halo rows on top), or None."""
    if not (analysis.prev_reach or analysis.next_reach) or session.group is not None:
        return None  # a group's shared pull holds every row only when opened whole
    for v in analysis.variables:
        if not v.any_row and v.independent is None and not v.navigating:
            return (
                f"every row is a candidate of {v.name}: its condition reads other rows only, so "
                "the halo would pull rows twice"
            )
    return None


def pushdown_events(session: Session, analysis: Analysis, headers: list[OpenReply]) -> pa.Table:
    """Every row some variable's independent condition accepts, with their halo rows."""
    if local_halo(session, analysis, headers):
        return pull_with_local_halo(session, analysis, "pull_pushdown", None, [])
    return with_candidate_halo(session, analysis, session.pull("pull_pushdown"), shipped=True)


def local_halo(session: Session, analysis: Analysis, headers: list[OpenReply]) -> bool:
    """Can the final pull carry the halo rows (every node holds whole PARTITION BY groups, so a
    candidate's neighbours are on its own node)? Not for a pull shared by a group."""
    return (
        bool(analysis.prev_reach or analysis.next_reach)
        and session.opened is None
        and bool(headers)
        and all(h.local_partitions for h in headers)
        and not analysis.query.recognize.order_by[0].descending
    )


def pull_with_local_halo(
    session: Session, analysis: Analysis, kind: str, tis: str | None, blobs: list[bytes]
) -> pa.Table:
    request = replace(halo_request(session, analysis, kind), tis=tis)
    events = session.pull(
        kind,
        request.header(),
        blobs,
        shared=False,
        note="candidates and their halo rows (whole partitions on every node)",
    )
    halo = (
        int(np.count_nonzero(events.column(HALO).to_numpy(zero_copy_only=False)))
        if events.num_rows
        else 0
    )
    session.trace.halo_rows += halo
    say_navigation(
        session.trace,
        f"halo in the final pull (up to {analysis.prev_reach} row(s) before, "
        f"{analysis.next_reach} after, per variable; whole partitions on every node)",
    )
    return events


def pull_everything(
    session: Session, analysis: Analysis, schema: pa.Schema, reason: str
) -> PullResult:
    session.trace.fallback = reason
    if analysis.prev_reach or analysis.next_reach:
        session.trace.navigation = "every row pulled: PREV/NEXT read them in place"
    return finish_pull(session, session.pull("pull_all"), analysis, schema)


def halo_request(session: Session, analysis: Analysis, kind: str) -> Halo:
    return Halo(
        session.query_id,
        kind,
        analysis.prev_reach,
        analysis.next_reach,
        analysis.event_key,
        analysis.dedup,
    )


def with_candidate_halo(
    session: Session, analysis: Analysis, events: pa.Table, shipped: bool = False
) -> pa.Table:
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
        say_navigation(
            trace,
            f"halo around candidates (up to {analysis.prev_reach} row(s) before, "
            f"{analysis.next_reach} after, per variable)",
        )
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
    points = (
        events.select(partition_by)
        .append_column(POINT_TIME, pa.array(times))
        .append_column(POINT_BEFORE, pa.array(before.astype(np.int32)))
        .append_column(POINT_AFTER, pa.array(after.astype(np.int32)))
        .filter(pa.array(wanted))
    )
    points = sort_and_partition(points, (), [(c, False) for c in points.column_names], dedup=True)[
        0
    ]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, points.schema) as writer:
        writer.write_table(points)
    # a node re-opened after a restart has no record of the rows its pulls shipped before
    skip = shipped and session.opened is None and not any(c.reopened for c in session.clients)
    request = replace(halo_request(session, analysis, "pull_halo"), skip_shipped=skip)
    blobs = [sink.getvalue().to_pybytes()]
    note = f"rows next to {points.num_rows} candidate points"
    try:
        near = session.pull("pull_halo", request.header(), blobs, shared=False, note=note)
    except (
        NodeRefusedError
    ) as exc:  # a node restarted since the final pull: every node sends them all
        if exc.code != CacheMissError.code or not skip:
            raise
        skip = False
        near = session.pull(
            "pull_halo",
            replace(request, skip_shipped=False).header(),
            blobs,
            shared=False,
            note=f"{note}, shipped rows included (a storage node restarted)",
        )
    if near.num_rows == 0:
        return events
    # one schema for both (nodes whose schemas differ in nullability alone are one log)
    events, near = aligned([events, near.select(events.column_names)], ["events", "halo rows"])
    # without skip_shipped the candidates come back among them
    halo = near if skip else near.filter(pa.array(subtract_rows(near, events)))
    trace.halo_rows += halo.num_rows
    return pa.concat_tables(
        [
            events.append_column(HALO, pa.array(np.zeros(events.num_rows, bool))),
            halo.append_column(HALO, pa.array(np.ones(halo.num_rows, bool))),
        ]
    )


def say_navigation(trace: Trace, text: str) -> None:
    """Add a step of the PREV/NEXT path to the trace (after e.g. the nodes' own checks)."""
    trace.navigation = f"{trace.navigation}; {text}" if trace.navigation else text


class Tis:
    """The compute node's time interval set: a shrinking window filter (the paper's DFS), an
    exact interval array (the DFS-V2 ablation and Naive-DFS) or slice runs (DFS: exact on its
    slice grid, and the smallest on the wire)."""

    def __init__(
        self, fmt: str, initial: IntervalSet, window: int, runs: SliceRuns | None = None
    ) -> None:
        self.fmt, self.window = fmt, window
        self.swf = (
            ShrinkingWindowFilter.from_intervals(initial.starts, initial.ends, window)
            if fmt == "swf"
            else None
        )
        self.exact = initial
        self.runs = runs

    @classmethod
    def of_slices(cls, runs: SliceRuns, window: int) -> Tis:
        return cls("slices", runs.to_time(), window, runs)

    def to_bytes(self) -> bytes:
        if self.runs is not None:
            return self.runs.to_bytes()
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
        starts, ends = self.swf.covered_intervals()
        return IntervalSet(starts, ends)


def no_halo_reason(session: Session, analysis: Analysis, schema: pa.Schema) -> str | None:
    """Why halo rows cannot be found for this query (its fallback reason), or None. Decided here,
    from the analysis, before any halo request (a group's nodes decide the same at open)."""
    reason = no_halo(analysis, schema, session.halo_limit)
    return None if reason is None else f"pull_all ({reason})"


def exact_fallback(
    session: Session, analysis: Analysis, schema: pa.Schema, headers: list[OpenReply] | None = None
) -> PullResult | None:
    """The exact strategy to run instead of interval pruning when the query does not allow it."""
    trace = session.trace
    unordered = no_halo_reason(session, analysis, schema)
    if unordered:
        return pull_everything(session, analysis, schema, unordered)
    shard_times = {h.time_column for h in headers or [] if h.time_column}
    if analysis.interval_pruning and shard_times and shard_times != {analysis.order_column}:
        # the nodes build intervals over their own time column: they do not bound this ORDER BY
        analysis = replace(
            analysis,
            interval_pruning=False,
            pruning_reason=(
                f"the shards are kept by {', '.join(sorted(shard_times))}, the query orders by "
                f"{analysis.order_column}: time intervals of the one do not bound matches in the "
                "other"
            ),
        )
    if not analysis.interval_pruning:
        everything = every_row_a_candidate(session, analysis) or too_many_candidates(
            session, analysis, headers or []
        )
        if analysis.skippable and not everything:
            trace.fallback = f"push_down ({analysis.pruning_reason})"
            return finish_pull(
                session, pushdown_events(session, analysis, headers or []), analysis, schema
            )
        return pull_everything(session, analysis, schema, f"pull_all ({analysis.pruning_reason})")
    return None


def too_many_candidates(
    session: Session, analysis: Analysis, headers: list[OpenReply], share: float = 1.0
) -> str | None:
    """Why pulling the candidates (``share`` of them, inside the intervals) with their halo rows
    would move about as much as every row, or None. Halo rows and the points sent for them cost
    about as much again as the candidates, so half of all rows is where pulling everything wins."""
    if not (analysis.prev_reach or analysis.next_reach) or not headers or session.group is not None:
        return None  # a group's shared pull holds every row only when opened whole
    total = sum(h.total_rows or h.rows for h in headers)
    candidates = min(total, sum(candidate_counts(headers).values())) * min(1.0, share)
    if total and candidates >= 0.5 * total:
        return (
            f"about {candidates:,.0f} of {total:,} rows are candidates: with their halo rows the "
            "pull would move more than every row"
        )
    return None


def final_pull(
    session: Session,
    tis: Tis,
    analysis: Analysis,
    schema: pa.Schema,
    headers: list[OpenReply] | None = None,
) -> PullResult:
    if analysis.skippable:
        if headers:
            mins = [h.min_ts for h in headers if h.min_ts is not None]
            maxs = [h.max_ts for h in headers if h.max_ts is not None]
            span = float(max(maxs) - min(mins)) if mins else 1.0
            broad = too_many_candidates(
                session, analysis, headers, tis.covered_length / max(span, 1.0)
            )
            if broad:
                return pull_everything(session, analysis, schema, f"pull_all ({broad})")
        fmt = tis.fmt
        if local_halo(session, analysis, headers or []):
            events = pull_with_local_halo(session, analysis, "pull", fmt, [tis.to_bytes()])
            return finish_pull(session, events, analysis, schema)
        events = session.pull("pull", {"tis": fmt}, [tis.to_bytes()], cover=tis.closed)
        return finish_pull(
            session, with_candidate_halo(session, analysis, events, shipped=True), analysis, schema
        )
    if analysis.prev_reach or analysis.next_reach:
        # contiguous: every row inside the intervals, and each partition's neighbours of them
        closed = tis.closed()
        events = session.pull(
            "pull_range",
            halo_request(session, analysis, "pull_range").header(),
            [closed.to_bytes()],
            shared=False,
            note="every row inside the intervals, with halo rows",
        )
        halo = (
            int(np.count_nonzero(events.column(HALO).to_numpy(zero_copy_only=False)))
            if events.num_rows
            else 0
        )
        session.trace.halo_rows += halo
        say_navigation(
            session.trace,
            f"halo around intervals ({analysis.prev_reach} row(s) before, "
            f"{analysis.next_reach} after)",
        )
        return finish_pull(session, events, analysis, schema, closed.starts)
    events = session.pull("pull_range", {"tis": tis.fmt}, [tis.to_bytes()], cover=tis.closed)
    return finish_pull(session, events, analysis, schema, tis.segments())
