"""The storage node's round-trip actions (DESIGN.md "DFS protocol"), over one query's state.

Each handler takes the decoded header and blobs and returns ``(header, blobs)``; payload sizes
are reported by the server. Handlers raise DfsCerError subclasses for bad requests; the server
turns them into Flight errors and keeps serving.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from dfs_cer.config import QueryConfig
from dfs_cer.errors import DfsCerError, ProtocolError, StorageError, WorkMemoryError
from dfs_cer.events.time import time_ints
from dfs_cer.filters import (
    IntervalSet,
    KeyKind,
    ShrinkingWindowFilter,
    WindowJoinFilter,
    WindowKeySet,
    eq1_offsets,
)
from dfs_cer.io.shard import schema_digest
from dfs_cer.plan.halo import no_halo
from dfs_cer.query import Analysis, Query, analyze, parse
from dfs_cer.query.arrow_filter import to_arrow_filter, union_filter
from dfs_cer.query.expr import Column, walk
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import (
    HALO,
    LEASE_GRACE_SECONDS,
    MAX_HALO,
    MEMBERS,
    POINT_AFTER,
    POINT_BEFORE,
    POINT_TIME,
    ROW_ID,
    SEGMENT,
    SNAPSHOT_BUSY,
    Close,
    Halo,
    Intervals,
    NodeMatch,
    PushPull,
    Release,
    Reserve,
    Upload,
    Verify,
    Wjf,
    lease,
)
from dfs_cer.work import Work
from storage_node.state import CacheMissError, QueryState, SnapshotGate, StateRegistry
from storage_node.store import ShardStore

Reply = tuple[dict[str, Any], list[bytes]]
T = TypeVar("T")
#: hidden column with a row's position on its storage node (lets the compute node drop the copies
#: of an event that several variables pulled)


def _time_ints(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(time_ints(col), np.int64)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _any_of(filters: list[Any]) -> Any:
    out = filters[0]
    for f in filters[1:]:
        out = out | f
    return out


def _inside(table: pa.Table, ts: np.ndarray, ranges: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """Rows of a time-sorted table inside any of the inclusive ``ranges``."""
    lo = np.searchsorted(ts, ranges[:, 0], side="left")
    hi = np.searchsorted(ts, ranges[:, 1], side="right")
    keep = np.zeros(ts.size + 1, np.int64)
    np.add.at(keep, lo, 1)
    np.add.at(keep, hi, -1)
    rows = np.nonzero(np.cumsum(keep[:-1]) > 0)[0]
    return table.take(pa.array(rows)), ts[rows]


def snapshot_of(header: dict[str, Any]) -> int | None:
    """The table snapshot a request pins (an integer), or None."""
    raw = header.get("snapshot")
    if raw is None:
        return None
    if type(raw) is not int or not -(2**63) <= raw < 2**63:
        raise ProtocolError("snapshot must be an Iceberg snapshot id (a 64-bit integer)")
    return raw


def _time_ranges(raw: object) -> np.ndarray | None:
    """``[[lo, hi], ...]`` (inclusive, in the time column's integer units) from an open header."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
            and r[0] <= r[1] for r in raw):
        raise ProtocolError("action open: time_ranges must be a list of [lo, hi] integer pairs with lo <= hi")
    return np.array(raw, np.int64).reshape(-1, 2)




class Actions:
    def __init__(self, store: ShardStore, registry: StateRegistry, max_blob: int = 256 * 1024**2,
                 betas: dict[str, float] | None = None, cpu_budget: float = 5.0, work_threads: int = 0,
                 filter_cost_limit: int = 2_000_000_000, halo_limit: int = MAX_HALO) -> None:
        self.store = store
        self.registry = registry
        #: opens share the loaded data; a switch to another table snapshot is alone
        self.gate = SnapshotGate()
        #: the largest message (and so blob) the node sends or takes
        self.max_blob = max_blob
        #: seconds per event of each matching engine on this node (node-side matching)
        self.betas = betas or node_betas("")
        #: the most seconds one query may spend matching here
        self.cpu_budget = cpu_budget
        #: slots for node-side work (push-pull, node-side matching, halo pulls): control calls
        #: take none, so they never wait behind a query's work
        self.slots = threading.BoundedSemaphore(work_threads or os.cpu_count() or 1)
        #: the most character steps an input filter may cost here (see dfs_cer.query.filter_cost)
        self.filter_cost_limit = filter_cost_limit
        #: names this node in a query's errors
        self.where = f" on the storage node serving {store.location.uri}"
        #: the work of the call this thread runs (read by the row filters of ``_whole``)
        self._calls = threading.local()
        #: the most rows a halo request may reach (reported at open)
        self.halo_limit = halo_limit

    def _check(self) -> None:
        """Stop here when the query of this thread's call is past its deadline or closed."""
        work = getattr(self._calls, "work", None)
        if work is not None:
            work.check()

    @contextlib.contextmanager
    def _working(self, query_id: str, deadline: float | None = None, slot: bool = True) -> Iterator[Work]:
        """One call's share of a query's work (its deadline, cancellation and memory charges,
        given back when the call ends); with ``slot``, the call waits for a work slot first,
        checking its deadline and cancellation while it waits. A call ends at the node's idle TTL
        at the latest, whatever lease the client sent (or none): its query's state is dropped then."""
        call = self.registry.work(query_id, self.where, deadline).call()
        call.bound(self.registry.ttl, f"storage.state_ttl_seconds={self.registry.ttl:g}: one call of a query runs "
                                      "no longer than its state stays without calls); raise the setting")
        taken = False
        try:
            while slot and not taken:
                call.check()
                taken = self.slots.acquire(timeout=0.05)
            call.check()
            self._calls.work = call
            yield call
        finally:
            self._calls.work = None
            if taken:
                self.slots.release()
            call.settle()

    # ------------------------------------------------------------------ open

    def _query(self, header: dict[str, Any], action: str, navigation: bool = False) -> tuple[Analysis, str]:
        qid = field(header, "query_id", str, action)
        try:
            if "sql" in header:  # canonical SQL text: a fraction of the model's JSON on the wire
                query = parse(field(header, "sql", str, action))
            else:
                query = Query.from_json(field(header, "query", str, action))
        except DfsCerError as exc:
            raise ProtocolError(f"action {action}: the query is not a valid query ({exc})") from None
        except RecursionError:
            raise ProtocolError(f"action {action}: the query is nested too deeply") from None
        except (ValueError, OverflowError) as exc:  # e.g. an integer literal of thousands of digits
            raise ProtocolError(f"action {action}: the query is not a valid query ({exc})") from None
        unit = header.get("integer_time_unit", "s")
        if unit not in ("s", "ms", "us", "ns"):
            raise ProtocolError(f"action {action}: integer_time_unit must be s, ms, us or ns, got {unit!r}")
        config = QueryConfig(integer_time_unit=unit)
        analysis = analyze(query, self.store.schema, config)
        if navigation and self._navigation_mode(analysis) is not None:
            analysis = analyze(query, self.store.schema, config, navigation_on_nodes=True)
        return analysis, qid

    def _navigation_mode(self, analysis: Analysis) -> str | None:
        """How this node can check PREV/NEXT conditions alone: ``partitions`` (it holds whole
        PARTITION BY groups), ``time`` (whole time windows of a shard set partitioned by the
        query's ORDER BY column) or None (random shards: the neighbours are anywhere)."""
        mr = analysis.query.recognize
        if mr.all_matches or mr.order_by[0].descending:
            return None
        if self._local(analysis):
            return "partitions"
        if self.store.manifest.get("partitioning") == "time" and analysis.order_column == self.store.time_column:
            return "time"
        return None

    def _event_key(self, header: dict[str, Any], schema: pa.Schema) -> tuple[list[str], bool]:
        """The event key and dedup the compute node matches with (open's header, else the
        manifest's key), the key spelled as this node's columns."""
        from dfs_cer.query.bind import resolve_column

        key = header.get("event_key", self.store.manifest.get("event_key") or [])
        if not isinstance(key, list) or len(key) > 64 or any(not isinstance(c, str) for c in key):
            raise ProtocolError(f"open: event_key must list columns of this node's rows, got {key!r}")
        try:  # spelled as the compute node's analysis resolves them (exact, else case-insensitive)
            key = [resolve_column(c, schema, "event key") for c in key]
        except DfsCerError as exc:
            raise ProtocolError(f"open: event_key must list columns of this node's rows ({exc})") from None
        dedup = header.get("dedup", True)
        if not isinstance(dedup, bool):
            raise ProtocolError(f"open: dedup must be true or false, got {dedup!r}")
        return key, dedup

    def _navigation_candidates(self, table: pa.Table, analysis: Analysis, header: dict[str, Any],
                               candidates: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Narrow each variable's candidates by its PREV/NEXT conjuncts, checked over this node's
        rows in the matcher's order (the event key and dedup the compute node matches with)."""
        from dfs_cer.io.shard import window_units
        from dfs_cer.match.rowpattern.navigation import navigation_masks

        mode = self._navigation_mode(analysis)
        if mode is None or not any(v.navigating for v in analysis.variables):
            return candidates
        key, dedup = self._event_key(header, table.schema)
        self._check()
        masks = navigation_masks(table, analysis, key, dedup, mode,
                                 window_units(table.schema.field(self.store.time_column).type))
        self._check()
        return {name: rows[masks[name][rows]] if name in masks else rows for name, rows in candidates.items()}

    def _candidates(self, table: pa.Table, analysis: Analysis,
                    shared: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Rows of ``table`` each variable's independent condition accepts; ``shared`` caches them
        by condition across the queries of a group (identical conditions are evaluated once)."""
        indexed: pa.Table | None = None
        out: dict[str, np.ndarray] = {}
        for v in analysis.variables:
            if v.any_row:
                continue
            expr = to_arrow_filter(v.independent, table.schema)
            key = "TRUE" if expr is None else str(expr)
            if shared is not None and key in shared:
                out[v.name] = shared[key]
                continue
            if expr is None:
                rows = np.arange(table.num_rows, dtype=np.int64)
            else:
                if indexed is None:
                    indexed = table.append_column("__row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
                col = ds.dataset(indexed).to_table(filter=expr, columns=["__row"]).column("__row")
                rows = np.asarray(col.to_numpy(), np.int64)
            out[v.name] = rows
            if shared is not None:
                shared[key] = rows
        return out

    def _info(self, state: QueryState) -> dict[str, Any]:
        info = {}
        for name, rows in state.candidates.items():
            t = state.ts[rows]
            info[name] = {"count": int(rows.size), "min_ts": int(t.min()) if t.size else None,
                          "max_ts": int(t.max()) if t.size else None}
        table = state.table
        # a group's table holds every row; report what this query alone would have scanned
        scanned = int(_union(state).size) if state.grouped else table.num_rows
        return {"rows": scanned, "variables": info, "min_ts": self.store.manifest.get("min_ts"),
                "max_ts": self.store.manifest.get("max_ts"), "total_rows": self.store.manifest.get("rows"),
                "held_bytes": state.size_in_bytes(), "event_key": list(self.store.manifest.get("event_key") or []),
                "row_bytes": (table.nbytes / table.num_rows) if table.num_rows else 0.0,
                "schema_digest": schema_digest(self.store.schema), "data_digest": self.store.data_digest,
                "local_partitions": self._local(state.analysis), "beta": self.betas,
                "time_column": self.store.time_column,
                **self.store.served_snapshot(),
                "navigation_on_node": state.navigation,
                "match_cpu_budget": self.cpu_budget, "halo_limit": self.halo_limit}

    def _copies_whole(self, analysis: Analysis, key: list[str]) -> bool:
        """Does this node hold every copy of each event it holds one of (rows equal in the
        query's partition, ORDER BY column and event ``key``)? Only then is the copy it keeps
        the copy the matcher keeps; else the compute node fetches each candidate's copies from
        every node."""
        manifest = self.store.manifest
        if manifest.get("nodes") == 1:
            return True
        mr = analysis.query.recognize
        shared = {c.lower() for c in [*key, *mr.partition_by, analysis.order_column]}  # columns copies share
        how = manifest.get("partitioning")
        placed_by = {"time": [self.store.time_column],  # by time window
                     "random": [self.store.time_column, *manifest.get("event_key", [])] if manifest.get("event_key")
                     else None,  # by a hash of time and the shard set's key, else round robin
                     "type": [manifest.get("type_column")]}.get(str(how))
        return placed_by is not None and all(isinstance(c, str) and c.lower() in shared for c in placed_by)

    def _local(self, analysis: Analysis) -> bool:
        """Does this node hold every row of each PARTITION BY group it holds any row of? True for
        the only node of a shard set, or a shard set type-partitioned by a PARTITION BY column."""
        manifest = self.store.manifest
        if manifest.get("nodes") == 1:
            return True
        column = manifest.get("type_column")
        return manifest.get("partitioning") == "type" and column is not None and \
            column in analysis.query.recognize.partition_by

    @contextlib.contextmanager
    def pinned(self, snapshot: int | None) -> Iterator[None]:
        """Serve ``snapshot`` of a table (None: its current one; for a shard set, pick up late
        files) for the duration of the block. A node holds one snapshot at a time: while
        queries are open on the one loaded, a query asking for another is refused at once
        (SNAPSHOT_BUSY; the compute node tries again shortly), never made to wait here, since
        queries pinned on either side of a commit would each wait on one node for the other.
        No open switches the node between choosing its snapshot and registering its state."""
        if snapshot is None:
            snapshot = self.store.current_snapshot().get("snapshot")
        give_up = time.monotonic() + min(self.registry.wait, 10.0)
        while True:
            with self.gate.reading():
                if not self.store.switches(snapshot):
                    self.store.refresh(snapshot)
                    yield
                    return
                self._busy(snapshot)
            with self.gate.switching(give_up) as alone:  # waits only for the opens under way
                if not alone:
                    self._busy(snapshot, force=True)
                if self.store.switches(snapshot):
                    self._busy(snapshot)
                    self.store.refresh(snapshot)

    def _busy(self, snapshot: int | None, force: bool = False) -> None:
        open_now = self.registry.open_on(self.store.generation)
        if open_now or force:
            raise StorageError(f"this storage node {SNAPSHOT_BUSY} ({self.store.snapshot_id()}; {open_now} running); "
                               f"the query asked for snapshot {snapshot}: run it again when they end")

    def open(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        qid = header.get("query_id")
        seconds = lease(header)  # the query's work stops when its compute node's time is up
        with self._working(qid if isinstance(qid, str) else "open",
                           None if seconds is None else time.monotonic() + seconds, slot=False):
            try:
                # late files added with dfs-cer shard --append; for a table, the snapshot the query pinned
                with self.pinned(snapshot_of(header)):
                    return self._open(header)
            except BaseException:
                if isinstance(qid, str):
                    self.registry.end_work(qid)
                raise

    def _open(self, header: dict[str, Any]) -> Reply:
        if "group" in header:
            return self._open_group(header)
        analysis, qid = self._query(header, "open", navigation=True)
        condition, where = self._input_filter(header)
        # (an incremental re-run matches only rows inside its ranges: it keeps every candidate)
        navigating = analysis.navigation_on_nodes and any(v.navigating for v in analysis.variables) \
            and header.get("time_ranges") is None
        # PREV/NEXT conditions read neighbours any condition may have filtered out: every row
        filt = None if navigating else union_filter([v.independent for v in analysis.variables if not v.any_row],
                                                    self.store.schema)
        estimate = self._admit(qid)
        key, dedup = self._event_key(header, self.store.schema)
        copies = bool(key) and dedup  # copies of an event may differ in other columns
        halo = bool(analysis.prev_reach or analysis.next_reach) or copies
        try:
            if condition is not None:  # after admission: the checks read the shards
                self._filter_cost(condition)
                self._no_nan(condition)
            ranges = _time_ranges(header.get("time_ranges"))
            row_ids = None
            kept = None
            if halo:  # rows keep their index in the node's rows by time: halo replies skip shipped ones
                table = self._whole(ranges, where)
                if copies:
                    kept = _canonical_copies(table, analysis, key)
                if filt is not None:
                    indexed = self._indexed_rows(analysis, filt) if ranges is None and where is None else None
                    if indexed is not None and indexed[0] is table:  # the same rows, found through the indexes
                        row_ids = indexed[1]
                    else:
                        row_ids = _matching_rows(table, filt)
                    table = table.take(pa.array(row_ids))
                else:
                    row_ids = np.arange(table.num_rows, dtype=np.int64)
                ts = _time_ints(table.column(self.store.time_column))
            else:
                indexed = self._indexed_rows(analysis, filt) if filt is not None and where is None else None
                if indexed is not None:  # the rows passing the same filter, found through the indexes
                    table = indexed[0].take(pa.array(indexed[1]))
                else:
                    table = self.store.scan(filt if where is None else where if filt is None else filt & where,
                                            ranges=ranges, condition=condition).sort_by(self.store.time_column)
                ts = _time_ints(table.column(self.store.time_column))
                if ranges is not None:  # an incremental re-run: only rows inside these closed ranges
                    table, ts = _inside(table, ts, ranges)
            candidates = self._candidates(table, analysis)
            if kept is not None and row_ids is not None:  # only the copy the matcher keeps stands for an event
                candidates = {name: rows[np.isin(row_ids[rows], kept)] for name, rows in candidates.items()}
            if navigating:
                candidates = self._navigation_candidates(table, analysis, header, candidates)
            state = QueryState(qid, analysis, table, ts, candidates, estimate, ranges=ranges,
                               generation=self.store.generation,
                               navigation=self._navigation_mode(analysis) if navigating else None,
                               row_ids=row_ids, where=where)
        except pa.ArrowException as exc:
            self.registry.release(estimate)
            if where is None:
                raise
            from dfs_cer.errors import QueryValidationError
            from dfs_cer.query.input_filter import INPUT_FILTER

            raise QueryValidationError(f"the input filter failed on this node's rows ({exc})", clause="input filter",
                                       code=INPUT_FILTER) from None
        except BaseException:
            self.registry.release(estimate)
            raise
        state.expires = _lease(header)
        self.registry.put(state)
        info = {**self._info(state), "copies_whole": self._copies_whole(analysis, key)}
        return info, ([self.store.schema.serialize().to_pybytes()] if header.get("schema", True) else [])

    def _indexed_rows(self, analysis: Analysis, filt: Any) -> tuple[pa.Table, np.ndarray] | None:
        """The node's rows by time and the positions of those passing ``filt`` (the union of the
        variables' independent conditions), found through the value indexes: only the rows of
        the values each variable's equality names are tested. None when some variable has no
        equality on an indexed column (the caller scans every row)."""
        from storage_node.index import equality, int_range

        parts: list[np.ndarray] = []
        rows: pa.Table | None = None
        for v in analysis.variables:
            if v.any_row:
                return None
            found = equality(v.independent, self.store.schema)
            if found is None:
                return None
            bounded = int_range(v.independent, self.store.schema, found[0])
            projected = self.store.projection(found[0], bounded[0]) if bounded is not None else None
            if bounded is not None and projected is not None:  # the value's rows inside the range only
                if parts and projected[0] is not rows:
                    return None
                rows = projected[0]
                parts.append(projected[2].rows(projected[1].codes(found[1]), bounded[1]))
                continue
            indexed = self.store.value_index(found[0])
            if indexed is None or (parts and indexed[0] is not rows):
                return None
            rows = indexed[0]
            parts.append(indexed[1].rows(found[1]))
        if rows is None:
            return None
        narrowed = np.sort(np.concatenate(parts), kind="stable")  # sorted runs: a merge
        if narrowed.size > 1:
            narrowed = narrowed[np.concatenate(([True], narrowed[1:] != narrowed[:-1]))]
        needed = sorted({n.name for v in analysis.variables if v.independent is not None
                         for n in walk(v.independent) if isinstance(n, Column)} & set(rows.column_names))
        probe = rows.select(needed).take(pa.array(narrowed))  # only the columns the filter reads
        return rows, narrowed[_matching_rows(probe, filt)]

    def _input_filter(self, header: dict[str, Any]) -> tuple[Any, Any]:
        """The open's ``input_filter`` (a row-local SQL condition) and its exact dataset filter
        over this node's rows, or (None, None); a condition outside the pushed subset, or one
        this node's columns cannot evaluate, is refused with the code the compute node falls
        back on."""
        raw = header.get("input_filter")
        if raw is None:
            return None, None
        from dfs_cer.query.input_filter import input_filter_expression, parse_input_filter

        condition = parse_input_filter(raw)
        return condition, input_filter_expression(condition, self.store.schema)

    def _filter_cost(self, condition: Any) -> None:
        """Refuse the input filter when its LIKE patterns would cost this node more than
        ``storage.filter_cost_limit`` character steps over its rows (the compute node then
        computes the input itself; see dfs_cer.query.filter_cost)."""
        import pyarrow.compute as pc

        from dfs_cer.errors import QueryValidationError
        from dfs_cer.query.bind import resolve_column
        from dfs_cer.query.filter_cost import check_like_size, filter_cost
        from dfs_cer.query.input_filter import INPUT_FILTER

        check_like_size(condition)
        seen: dict[str, tuple[int, int]] = {}

        def lengths(name: str) -> tuple[int, int]:
            if name not in seen:
                column = resolve_column(name, self.store.schema, "input filter")
                values = self.store.scan(None, columns=[column]).column(column)
                if pa.types.is_dictionary(values.type):  # what the filter reads: the decoded strings
                    values = values.cast(values.type.value_type)
                chars = pc.utf8_length(values) if pa.types.is_string(values.type) or \
                    pa.types.is_large_string(values.type) else pa.array([], pa.int64())
                seen[name] = (int(pc.sum(chars).as_py() or 0), int(pc.max(chars).as_py() or 0))
            return seen[name]

        cost = filter_cost(condition, lengths)
        if cost > self.filter_cost_limit:
            raise QueryValidationError(
                f"the input filter's LIKE patterns would cost this node about {cost:,} character steps over its "
                f"rows, more than storage.filter_cost_limit={self.filter_cost_limit:,}",
                clause="input filter", code=INPUT_FILTER, hint="the input is computed on the compute node instead")

    def _no_nan(self, condition: Any) -> None:
        """Refuse the input filter when a floating-point column it reads holds NaN here (one
        scan of that column, of its NaN rows only)."""
        import pyarrow.compute as pc

        from dfs_cer.query.input_filter import nan_columns

        nan_columns(condition, self.store.schema,
                    lambda c: self.store.scan(pc.is_nan(pc.field(c)), columns=[c]).num_rows > 0)

    def _admit(self, query_id: str) -> int:
        """The bytes this opening holds: the reservation ``reserve`` granted it, else one made now
        (waiting for room up to the admission wait)."""
        held = self.registry.take_reservation(query_id)
        if held is not None:
            return held
        estimate = self.store.estimate_bytes()
        self.registry.reserve(query_id, estimate)
        return estimate

    def reserve(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Room for a query about to open, granted at once or not at all (the compute node
        reserves on every node or on none; see StateRegistry.try_reserve)."""
        request = Reserve.parse(header)
        granted = self.registry.try_reserve(request.query_id, self.store.estimate_bytes(), request.arrival)
        # a table's current snapshot: the compute node pins one for every node
        pinned = self.store.current_snapshot() if granted else {}
        return {"granted": granted, **pinned}, []

    def release(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        self.registry.release_reservation(Release.parse(header).query_id)
        return {"released": True}, []

    def _open_group(self, header: dict[str, Any]) -> Reply:
        """Several queries over one scan: every row of the shard set, read and sorted once; each
        query gets its own state (and candidates) over that shared table, and conditions that
        coincide across the queries are evaluated once."""
        group = field(header, "group", list, "open")
        if not group or not all(isinstance(g, dict) for g in group):
            raise ProtocolError("action open: group must be a non-empty list of query headers")
        if any("input_filter" in g for g in group):
            raise ProtocolError("action open: queries opened in a group share one scan and take no input_filter; "
                                "open such a query alone")
        queries = [self._query(g, "open") for g in group]
        if len({qid for _, qid in queries}) != len(queries):
            raise ProtocolError("action open: the queries of a group need distinct query ids")
        # the group's own id holds the reservation (StorageClient reserve with it), else the first query's
        estimate = self._admit(header["query_id"] if isinstance(header.get("query_id"), str) else queries[0][1])
        states = []
        keys = [self._event_key(g, self.store.schema) for g in group]
        # contiguous patterns read every row; when none of the queries has one, the scan keeps
        # only rows some variable of some query may take (and every row when a query drops
        # copies of an event: which copy stands for it is decided among all of them; and when a
        # query pulls every row because halo rows cannot serve it, as the compute node decides)
        whole = bool(header.get("whole")) or any(not a.skippable for a, _ in queries) or \
            any(key and dedup for key, dedup in keys) or \
            any(no_halo(a, self.store.schema, self.halo_limit) is not None for a, _ in queries)
        try:
            if whole:
                table = self.store.sorted_rows()
            else:
                filters = [union_filter([v.independent for v in a.variables if not v.any_row], self.store.schema)
                           for a, _ in queries]
                table = self.store.scan(None if any(f is None for f in filters) else _any_of(filters)
                                        ).sort_by(self.store.time_column)
            ts = _time_ints(table.column(self.store.time_column))
            shared: dict[str, np.ndarray] = {}
            for i, ((analysis, qid), (key, dedup)) in enumerate(zip(queries, keys, strict=True)):
                candidates = self._candidates(table, analysis, shared)
                if key and dedup:  # only the copy the matcher keeps stands for an event
                    kept = _canonical_copies(table, analysis, key)
                    candidates = {name: rows[np.isin(rows, kept)] for name, rows in candidates.items()}
                states.append(QueryState(qid, analysis, table, ts, candidates,
                                         estimate if i == 0 else 0, owns_table=i == 0, grouped=True,
                                         whole=whole, generation=self.store.generation))
        except BaseException:
            self.registry.release(estimate)
            raise
        for state in states:
            state.expires = _lease(header)
        self.registry.put(*states)
        info = {"group": [{**self._info(s), "copies_whole": self._copies_whole(s.analysis, key)}
                          for s, (key, _) in zip(states, keys, strict=True)], "shared_conditions": len(shared),
                "conditions": sum(len(s.candidates) for s in states)}
        return info, ([self.store.schema.serialize().to_pybytes()] if header.get("schema", True) else [])

    # ------------------------------------------------------------------ situations

    def situations(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Situation fragments of the shard set, read within a reservation like any read."""
        return self._admitted("situations", lambda: self._situations(header))

    def _situations(self, header: dict[str, Any]) -> Reply:
        """Situation fragments of this shard set (see dfs_cer.situations.fragments): runs of
        every symbol's condition per time block, and each block's first time. Only shard sets
        partitioned by time hold whole blocks; others answer ``derived: false``."""
        from dfs_cer.events.time import time_values
        from dfs_cer.io.shard import window_units
        from dfs_cer.query.expr import Navigation, walk
        from dfs_cer.situations import parse_situations
        from dfs_cer.situations.fragments import block_fragments
        from dfs_cer.situations.run import column_name, condition_masks, sorted_rows

        try:
            query = parse_situations(field(header, "sql", str, "situations"))
        except DfsCerError as exc:
            raise ProtocolError(f"action situations: not a situation query ({exc})") from None
        self.store.refresh()
        manifest = self.store.manifest
        if manifest.get("partitioning") != "time":
            return {"derived": False, "reason": f"the shard set is partitioned by {manifest.get('partitioning')}, "
                    "not time: a node does not hold whole time blocks (re-shard with --partitioning time to "
                    "derive situations on the storage nodes)"}, []
        if any(isinstance(n, Navigation) for sit in query.situations for n in walk(sit.condition)):
            return {"derived": False, "reason": "PREV/NEXT in a condition reads rows of the neighbouring block"}, []
        table = self.store.sorted_rows()
        rows, part, bounds = sorted_rows(table, query, tuple(manifest.get("event_key") or ()), True)
        order = column_name(rows, query.order_by)
        if order != self.store.time_column:
            return {"derived": False, "reason": f"the shards are blocked by {self.store.time_column}, "
                    f"the query orders by {order}"}, []
        n = rows.num_rows
        ts = time_values(rows, order) if n else np.zeros(0, np.int64)
        dtype = rows.schema.field(order).type
        units = window_units(dtype)
        masks = condition_masks(rows, query, bounds[part] if n else part, bounds[part + 1] if n else part)
        partition = [column_name(rows, c) for c in query.partition_by]
        fragments, blocks = block_fragments(rows, partition, ts, units, masks)
        return {"derived": True, "fragments": fragments.num_rows, "blocks": blocks.num_rows,
                "rows": n}, [_ipc(fragments), _ipc(blocks), self.store.schema.serialize().to_pybytes()]

    # ------------------------------------------------------------------ round trips

    def _variable(self, state: QueryState, header: dict[str, Any] | str, action: str) -> str:
        name = header if isinstance(header, str) else field(header, "variable", str, action)
        if name not in state.candidates:
            raise ProtocolError(f"action {action}: {name!r} is not a variable with candidates in this query")
        return name

    def intervals(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Intervals.parse(header)
        state = self.registry.get(request.query_id)
        name = self._variable(state, request.variable, "intervals")
        lo, hi = eq1_offsets(request.role, request.window)
        out = IntervalSet.around(state.ts[state.candidates[name]], lo, hi)
        return {"intervals": len(out)}, [out.to_bytes()]

    def summaries(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Naive-DFS trip 1: every variable's Eq. 1 interval array and the (timestamp, value) pairs
        of every (variable, column) in an equality condition, in one reply."""
        state = self.registry.get(field(header, "query_id", str, "summaries"))
        window = field(header, "window", int, "summaries")
        out = []
        for v in field(header, "variables", list, "summaries"):
            if not isinstance(v, dict):
                raise ProtocolError("action summaries: each variable must be an object")
            lo, hi = eq1_offsets(field(v, "role", str, "summaries"), window)
            out.append(IntervalSet.around(state.ts[state.candidates[self._variable(state, v, "summaries")]],
                                          lo, hi).to_bytes())
        for p in field(header, "pairs", list, "summaries"):
            if not isinstance(p, dict):
                raise ProtocolError("action summaries: each pair request must be an object")
            rows = state.candidates[self._variable(state, p, "summaries")]
            column = field(p, "column", str, "summaries")
            if column not in state.table.column_names:
                raise ProtocolError(f"action summaries: unknown column {column!r}")
            pairs = pa.table({"ts": pa.array(state.ts[rows]), "value": state.table.column(column).take(rows)})
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, pairs.schema) as writer:
                writer.write_table(pairs)
            out.append(sink.getvalue().to_pybytes())
        return {"blobs": len(out)}, out

    def wjf(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Wjf.parse(header)
        total = sum(b.bits for b in request.builds)
        if len(request.builds) > 64 or total > 8 * self.max_blob:  # the reply must fit one message
            raise ProtocolError(f"action wjf: {len(request.builds)} builds of {total} bits in all exceed the limit "
                                f"of 64 builds and {8 * self.max_blob} bits (storage.max_message_bytes)")
        state = self.registry.get(request.query_id)
        tis_format = request.tis
        swf = _load_tis(tis_format, blobs[0]) if blobs else None
        if swf is not None:
            state.tis, state.tis_format = blobs[0], tis_format  # the following verify may reuse it
        out = []
        for b in request.builds:
            name = self._variable(state, b.variable, "wjf")
            rows = state.candidates[name]
            if swf is not None:  # prune the list with the current interval set first
                rows = rows[swf.contains(state.ts[rows])]
                state.candidates[name] = rows
            column = b.column
            if column not in state.table.column_names:
                raise ProtocolError(f"action wjf: unknown column {column!r}")
            f: WindowJoinFilter | WindowKeySet
            if b.format == "keyset":  # the ablations' exact (value, window) table
                f = WindowKeySet(b.window, _key_kind(b.kind))
            else:
                if not 0 < b.bits <= 8 * self.max_blob:  # its bytes could not travel back anyway
                    raise ProtocolError(f"action wjf: bits must be in 1..{8 * self.max_blob} (the message limit), "
                                        f"got {b.bits}")
                f = WindowJoinFilter(b.bits, b.hashes, b.window, _key_kind(b.kind), seed=b.seed)
            f.add(state.table.column(column).take(pa.array(rows)), state.ts[rows])
            out.append(f.to_bytes())
        return {"filters": len(out)}, out

    def verify(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Verify.parse(header)
        state = self.registry.get(request.query_id)
        name = self._variable(state, request.variable, "verify")
        role = request.role
        tis_format = request.tis
        if request.cached_swf:  # the SWF sent with the preceding wjf action
            if state.tis is None or state.tis_format != tis_format:
                raise CacheMissError(f"action verify: no cached {tis_format} interval set (the node restarted); "
                                     "send it")
            blobs = [state.tis, *blobs]
        if not blobs:
            raise ProtocolError("action verify: the interval set blob is missing")
        swf = _load_tis(tis_format, blobs[0])
        rows = state.candidates[name]
        before = rows.size
        rows = rows[swf.contains(state.ts[rows])]  # phase 1: timestamps inside the interval set
        for p in request.probes:  # phase 2: equality conditions through the join filters
            if not 0 < p.blob < len(blobs):
                raise ProtocolError(f"action verify: probe blob {p.blob} does not exist")
            g: WindowJoinFilter | WindowKeySet
            g = WindowKeySet.from_bytes(blobs[p.blob]) if p.format == "keyset" else \
                WindowJoinFilter.from_bytes(blobs[p.blob])
            if p.column not in state.table.column_names:
                raise ProtocolError(f"action verify: unknown column {p.column!r}")
            keep = g.might_contain(state.table.column(p.column).take(pa.array(rows)), state.ts[rows], p.direction)
            rows = rows[keep]
        state.candidates[name] = rows
        if isinstance(swf, IntervalSet):  # interval arrays: send the survivors' Eq. 1 intervals
            lo, hi = eq1_offsets(role, request.window)
            return {"before": int(before), "survivors": int(rows.size)}, [
                IntervalSet.around(state.ts[rows], lo, hi).intersection(swf).to_bytes()]
        tags = swf.refresh(state.ts[rows], role)
        return {"before": int(before), "survivors": int(rows.size)}, [tags.to_bytes()]

    # ------------------------------------------------------------------ push-pull

    def upload(self, header: dict[str, Any], table: pa.Table) -> None:
        """DoPut: the compute node sends a processed variable's events (push-pull)."""
        request = Upload.parse(header)
        state = self.registry.get(request.query_id)
        name = self._variable(state, request.variable, "upload")
        if table.schema.names != state.table.schema.names:
            raise ProtocolError(f"upload: columns {table.schema.names} differ from the shards' "
                                f"{state.table.schema.names}")
        previous = state.uploads.get(name)
        state.uploads[name] = table if previous is None else pa.concat_tables([previous, table])
        self.registry.account(state)  # the uploads count against the memory budget

    def push_pull(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Keep the requested variable's candidates that complete a match of the pattern projected
        on the processed variables and itself, with the uploaded events (skip-till-any-match)."""
        from dfs_cer.match.push_pull import filter_by_projection

        request = PushPull.parse(header)
        state = self.registry.get(request.query_id)
        name = self._variable(state, request.variable, "push_pull")
        processed = list(request.processed)
        missing = [p for p in processed if p not in state.uploads]
        if missing:
            raise ProtocolError(f"push_pull: no events uploaded for {missing}")
        rows = state.candidates[name]
        before = rows.size
        unfiltered: dict[str, str] = {}
        with self._working(state.query_id) as work:
            try:
                keep = filter_by_projection(state.analysis.query, name, state.table.take(pa.array(rows)),
                                            {p: state.uploads[p] for p in processed}, work)
            except WorkMemoryError as exc:  # the filter only narrows: every candidate kept is still exact
                keep = np.ones(rows.size, bool)
                unfiltered["unfiltered"] = str(exc)
        state.candidates[name] = rows[keep]
        return {"before": int(before), "survivors": int(keep.sum()), **unfiltered}, []

    def close(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        return {"closed": self.registry.close(Close.parse(header).query_id)}, []

    # ------------------------------------------------------------------ pulls (DoGet)

    def pull(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        kind = field(header, "kind", str, "pull")
        if "slice" in header:  # one executor's share of a final pull: the rows of an inclusive time range
            if kind not in SLICEABLE:
                raise ProtocolError(f"{kind}: slice applies to {', '.join(SLICEABLE)} only")
            lo, hi = _slice(header["slice"], kind)
            table = self.pull({k: v for k, v in header.items() if k != "slice"}, blobs)
            if table.num_rows == 0:
                return table
            column = self.store.time_column
            ts = _time_ints(table.column(column))
            return table.filter(pa.array((ts >= lo) & (ts <= hi)))
        if kind == "pull_group":
            return self._pull_group(header, blobs)
        if kind == "pull_times":  # rows inside per-partition time intervals (situations' measures)
            return self._admitted(kind, lambda: self._pull_times(header, blobs))
        if kind == "pull_all":
            opened = self.registry.find(header["query_id"]) if isinstance(header.get("query_id"), str) else None
            if opened is not None:  # the open reserved the memory
                self._same_generation(opened, kind)
                return self._whole(opened.ranges, opened.where)
            if header.get("opened"):  # the compute node opened it here: this node restarted since
                self.registry.get(field(header, "query_id", str, kind))  # raises UnknownQueryError
            return self._admitted(kind, lambda: self._whole(None))
        state = self.registry.get(field(header, "query_id", str, kind))
        with self._working(state.query_id) as work:
            return self._pull_opened(state, kind, header, blobs, work)

    def _pull_opened(self, state: QueryState, kind: str, header: dict[str, Any], blobs: list[bytes],
                     work: Work) -> pa.Table:
        """The pulls of an opened query, in a work slot and bounded by its work."""
        if kind == "pull_variable":  # push-pull: one variable's current candidates, with their row ids
            name = self._variable(state, header, kind)
            rows = state.candidates[name]
            _ship(state, rows)
            return state.table.take(pa.array(rows)).append_column(ROW_ID, pa.array(rows))
        if kind == "pull_pushdown":
            rows = _union(state)
            _ship(state, rows)
            if "halo" in header:
                return self._with_local_halo(state, Halo.parse(header, self.halo_limit), rows)
            return state.table.take(pa.array(rows))
        if kind == "pull_matches":  # node-side matching: the MATCH_RECOGNIZE relation of this node's rows
            return self._pull_matches(state, header, work)
        if kind == "pull_halo":  # rows next to the pulled candidates' (partition, time) points
            return self._pull_halo(state, Halo.parse(header, self.halo_limit), blobs)
        if kind not in ("pull", "pull_range"):
            raise ProtocolError(f"unknown pull kind {kind!r}; use pull, pull_range, pull_halo, pull_variable, "
                                "pull_pushdown or pull_all")
        if kind == "pull_range" and "halo" in header:
            return self._pull_range_halo(state, Halo.parse(header, self.halo_limit), blobs)
        if not blobs:
            raise ProtocolError(f"{kind}: the final interval set blob is missing")
        swf = _load_tis(_tis_format(header, kind), blobs[0])
        if kind == "pull":  # candidate rows inside the final interval set
            rows = _union(state)
            rows = rows[swf.contains(state.ts[rows])]
            _ship(state, rows)
            if "halo" in header:
                return self._with_local_halo(state, Halo.parse(header, self.halo_limit), rows)
            return state.table.take(pa.array(rows))
        # pull_range: every row inside the intervals (contiguous patterns), from the shards
        self._same_generation(state, kind)
        table = self._whole(state.ranges, state.where)
        ts = _time_ints(table.column(self.store.time_column))
        return table.filter(pa.array(swf.contains(ts)))

    def _canonical(self, state: QueryState, request: Halo, kind: str) -> tuple[pa.Table, np.ndarray, np.ndarray,
                                                                               np.ndarray, np.ndarray]:
        """This node's rows of the query (inside its time ranges) in the matcher's order."""
        from dfs_cer.plan.halo import canonical

        self._same_generation(state, kind)
        table = self._whole(state.ranges, state.where)
        self._check()
        unknown = [c for c in request.event_key if c not in table.column_names]
        if unknown:
            raise ProtocolError(f"{kind}: event key column(s) {unknown} are not columns of this node's rows")
        mr = state.analysis.query.recognize
        if mr.order_by[0].descending:
            raise ProtocolError(f"{kind}: a halo needs an ascending first ORDER BY column")
        return canonical(table, state.analysis, request.event_key, request.dedup)

    def _pull_range_halo(self, state: QueryState, request: Halo, blobs: list[bytes]) -> pa.Table:
        """Every row inside the closed intervals, and the ``before``/``after`` rows next to each
        interval in every partition (marked in :data:`HALO`), in the matcher's order."""
        from dfs_cer.plan.halo import around_intervals

        if not blobs:
            raise ProtocolError("pull_range: the final interval set blob is missing")
        intervals = IntervalSet.from_bytes(blobs[0])
        ordered, pid, t, _, _ = self._canonical(state, request, "pull_range")
        inside, halo = around_intervals(pid, t, intervals.starts, intervals.ends, request.before, request.after)
        keep = inside | halo
        return ordered.filter(pa.array(keep)).append_column(HALO, pa.array(halo[keep]))

    def _pull_halo(self, state: QueryState, request: Halo, blobs: list[bytes]) -> pa.Table:
        """Rows at the points (ties) and the ``before``/``after`` rows next to each point of its
        partition. Points: an Arrow table of the PARTITION BY columns and :data:`POINT_TIME`."""
        from dfs_cer.plan.halo import around_points, point_partitions

        points = _table_blob(blobs, "pull_halo", "points table")
        partition_by = list(state.analysis.query.recognize.partition_by)
        columns = [*partition_by, POINT_TIME]
        reach = points.column_names == [*columns, POINT_BEFORE, POINT_AFTER]
        if not (points.column_names == columns or reach) or not all(
                pa.types.is_integer(points.schema.field(c).type) for c in points.column_names[len(partition_by):]):
            raise ProtocolError(f"pull_halo: the points table needs the columns {columns} (integer times), "
                                f"optionally followed by {POINT_BEFORE} and {POINT_AFTER} (integer row counts)")
        before: int | np.ndarray = request.before
        after: int | np.ndarray = request.after
        if reach:  # rows per point, each within the request's halo
            before = np.asarray(points.column(POINT_BEFORE).to_numpy(zero_copy_only=False), np.int64)
            after = np.asarray(points.column(POINT_AFTER).to_numpy(zero_copy_only=False), np.int64)
            if points.column(POINT_BEFORE).null_count or points.column(POINT_AFTER).null_count or \
                    (before.size and (before.min() < 0 or before.max() > request.before or after.min() < 0
                                      or after.max() > request.after)):
                raise ProtocolError(f"pull_halo: {POINT_BEFORE}/{POINT_AFTER} must lie in 0..halo "
                                    f"({request.before}, {request.after})")
        if request.skip_shipped and state.shipped is None:  # re-opened after a restart: the client asks again
            raise CacheMissError("pull_halo: skip_shipped, but this node holds no record of rows it shipped for the "
                                 "query (it restarted and the query was re-opened); ask without skip_shipped")
        ordered, pid, t, bounds, order = self._canonical(state, request, "pull_halo")
        try:
            point_pid = point_partitions(ordered, bounds, partition_by, points.select(partition_by))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ProtocolError(f"pull_halo: the points' partition columns do not match this node's ({exc})") from None
        point_t = np.asarray(points.column(POINT_TIME).to_numpy(zero_copy_only=False), np.int64)
        by_point = np.lexsort((point_t, point_pid))
        if isinstance(before, np.ndarray):
            before, after = before[by_point], np.asarray(after)[by_point]
        try:
            mask = around_points(pid, t, point_pid[by_point], point_t[by_point], before, after)
        except ValueError as exc:
            raise ProtocolError(f"pull_halo: {exc}") from None
        if request.skip_shipped:  # the compute node holds those rows already
            assert state.shipped is not None
            mask &= ~np.isin(order, state.shipped)
        return ordered.filter(pa.array(mask))

    def _with_local_halo(self, state: QueryState, request: Halo, rows: np.ndarray) -> pa.Table:
        """The final pull's candidate ``rows`` and, since this node holds whole PARTITION BY
        groups, their neighbours PREV/NEXT read (per candidate, by the variables it is a
        candidate of), marked in :data:`HALO`: no round trip with points."""
        from dfs_cer.match.rowpattern.navigation import candidate_reach
        from dfs_cer.plan.halo import around_points

        if not self._local(state.analysis):
            raise ProtocolError(f"{request.kind}: a halo in the final pull needs whole PARTITION BY groups on this "
                                "node; use pull_halo")
        if state.row_ids is None:
            raise ProtocolError(f"{request.kind}: the query reads no neighbours (no PREV/NEXT)")
        ordered, pid, t, bounds, order = self._canonical(state, request, request.kind)
        taken = state.table.take(pa.array(rows))
        # the compute node's engine evaluates every variable whose independent condition a row
        # passes (even where this node's PREV/NEXT check dropped it): all of those read around it
        before, after = candidate_reach(taken, state.analysis)
        before, after = np.minimum(before, request.before), np.minimum(after, request.after)
        # an event key's copies differing in other columns: the tie group brings the canonical one
        wanted = (before > 0) | (after > 0) | (bool(request.event_key) and request.dedup)
        halo = np.zeros(ordered.num_rows, bool)
        if wanted.any() and ordered.num_rows:
            from dfs_cer.events.time import time_values
            from dfs_cer.plan.halo import point_partitions

            partition_by = list(state.analysis.query.recognize.partition_by)
            points = taken.filter(pa.array(wanted))
            point_pid = point_partitions(ordered, bounds, partition_by, points.select(partition_by))
            point_t = time_values(points, state.analysis.order_column)
            by_point = np.lexsort((point_t, point_pid))
            halo = around_points(pid, t, point_pid[by_point], point_t[by_point], before[wanted][by_point],
                                 after[wanted][by_point])
            halo &= ~np.isin(order, state.row_ids[rows])  # those rows are in the reply already
        near = ordered.filter(pa.array(halo))
        return pa.concat_tables([taken.append_column(HALO, pa.array(np.zeros(rows.size, bool))),
                                 near.append_column(HALO, pa.array(np.ones(near.num_rows, bool)))])

    def _pull_matches(self, state: QueryState, header: dict[str, Any], work: Work | None = None) -> pa.Table:
        """Run the query's MATCH_RECOGNIZE over this node's rows (its partitions are whole here)
        and return the relation (the outer SELECT stays on the compute node); the schema's
        metadata says how many matches and the seconds spent."""
        import time

        from dfs_cer.match.cer.engine import run_cer
        from dfs_cer.match.rowpattern.engine import run_row_pattern

        request = NodeMatch.parse(header)
        if not self._local(state.analysis):
            raise ProtocolError("pull_matches: this node does not hold whole PARTITION BY groups of the query "
                                "(shard with --partitioning type --type-column <a PARTITION BY column>)")
        self._same_generation(state, "pull_matches")
        table = self._whole(state.ranges, state.where)
        unknown = [c for c in request.event_key if c not in table.column_names]
        if unknown:
            raise ProtocolError(f"pull_matches: event key column(s) {unknown} are not columns of this node's rows")
        import dataclasses

        query = state.analysis.query
        analysis = dataclasses.replace(state.analysis, event_key=request.event_key, dedup=request.dedup)
        began = time.process_time()
        if query.recognize.all_matches:
            out = run_cer(table, analysis, max_matches=request.max_matches, on_limit=request.on_limit, work=work)
        else:
            out = run_row_pattern(table, analysis, max_matches=request.max_matches, on_limit=request.on_limit,
                                  work=work)
        seconds = time.process_time() - began
        return out.table.replace_schema_metadata({"dfs_cer_matches": str(out.matches),
                                                  "dfs_cer_truncated": str(out.truncated).lower(),
                                                  "dfs_cer_seconds": f"{seconds:.6f}"})

    def _pull_times(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        """Rows whose partition key and time fall in one of the intervals of an Arrow table
        ``(partition columns..., __lo, __hi)`` (inclusive, disjoint per partition), with only
        the ``columns`` asked for."""
        from dfs_cer.local import sandboxed_duckdb

        intervals = _table_blob(blobs, "pull_times", "interval table")
        table = self.store.sorted_rows()
        columns = header.get("columns") or table.column_names
        if not isinstance(columns, list) or any(c not in table.column_names for c in columns) \
                or len(set(columns)) != len(columns):
            raise ProtocolError(f"pull_times: columns must name distinct columns of {table.column_names}")
        keys = [c for c in intervals.column_names if c not in ("__lo", "__hi", "__k")]
        if any(k not in table.column_names for k in keys) or not {"__lo", "__hi", "__k"} <= set(intervals.column_names):
            raise ProtocolError("pull_times: the interval table needs partition columns, __lo, __hi and __k")
        ts = _time_ints(table.column(self.store.time_column))
        con = sandboxed_duckdb()
        try:
            con.register("iv", intervals)
            # disjoint per partition: each row comes back at most once (no output of rows x intervals)
            by = ", ".join(f'"{k}"' for k in keys) or "NULL"
            overlaps = con.execute(f"SELECT count(*) FROM (SELECT __lo, lag(__hi) OVER (PARTITION BY {by} ORDER BY __lo) "
                               "AS prev FROM iv) WHERE prev >= __lo").fetchall()[0][0]
            if overlaps:
                raise ProtocolError(f"pull_times: {overlaps} intervals overlap others of their partition; send "
                                    "disjoint intervals")
            con.register("r", table.select(keys).append_column("__t", pa.array(ts)).append_column(
                "__i", pa.array(np.arange(table.num_rows, dtype=np.int64))))
            on = " AND ".join([f'r."{k}" IS NOT DISTINCT FROM iv."{k}"' for k in keys] +
                              ["r.__t BETWEEN iv.__lo AND iv.__hi"])
            got = con.sql(f"SELECT r.__i, iv.__k FROM r JOIN iv ON {on} ORDER BY r.__i").fetchnumpy()
        finally:
            con.close()
        rows = np.asarray(got["__i"], np.int64)
        # each row says which interval it came from (rows of different intervals were not adjacent)
        return table.select(columns).take(pa.array(rows)).append_column(
            SEGMENT, pa.array(np.asarray(got["__k"], np.int64)))

    def _pull_group(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        """The final pulls of queries opened together, in one stream: the union of their rows
        (each row once) with a ``__dfs_cer_members`` bit mask saying which pulls asked for it."""
        pulls = field(header, "pulls", list, "pull_group")
        if not pulls or len(pulls) > 64 or not all(isinstance(p, dict) for p in pulls):
            raise ProtocolError("pull_group: pulls must be a list of 1 to 64 pull headers")
        states = [self.registry.get(field(p, "query_id", str, "pull_group")) for p in pulls]
        base = states[0].table
        if not all(s.grouped and s.table is base for s in states):
            raise ProtocolError("pull_group: the queries were not opened together (open with a group)")
        chosen = []
        for p, state in zip(pulls, states, strict=True):
            kind = field(p, "kind", str, "pull_group")
            if kind == "pull_all":
                if not state.whole:
                    raise ProtocolError("pull_group: pull_all needs a group opened over every row")
                rows = np.arange(state.table.num_rows, dtype=np.int64)
            elif kind == "pull_pushdown":
                rows = _union(state)
            elif kind in ("pull", "pull_range"):
                if kind == "pull_range" and not state.whole:
                    raise ProtocolError("pull_group: pull_range needs a group opened over every row")
                index = field(p, "blob", int, "pull_group")
                if not 0 <= index < len(blobs):
                    raise ProtocolError(f"pull_group: blob {index} is missing")
                swf = _load_tis(_tis_format(p, kind), blobs[index])
                if kind == "pull":
                    rows = _union(state)
                    rows = rows[swf.contains(state.ts[rows])]
                else:  # the group's table holds every row: the whole time range of the intervals
                    rows = np.nonzero(swf.contains(state.ts))[0]
            else:
                raise ProtocolError(f"pull_group: unknown pull kind {kind!r}")
            chosen.append(rows)
        # the narrowest unsigned type with a bit per pull (one byte per row for up to 8 queries)
        width = next(w for w in (8, 16, 32, 64) if len(chosen) <= w)
        dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
        bits = np.zeros(base.num_rows, dtype)  # per row of the group's table: the pulls it is in
        for j, rows in enumerate(chosen):
            bits[rows] |= dtype(1 << j)
        union = np.flatnonzero(bits)
        members = bits[union]
        return base.take(pa.array(union)).append_column(MEMBERS, pa.array(members))

    def _admitted(self, kind: str, read: Callable[[], T]) -> T:
        """A read outside an opened query passes admission like an open: it reserves the shard
        set's size (waiting for room, or refused) for the time of the read."""
        import uuid

        estimate = self.store.estimate_bytes()
        self.registry.reserve(f"{kind}-{uuid.uuid4().hex[:8]}", estimate)
        try:
            return read()
        finally:
            self.registry.release(estimate)

    def _same_generation(self, state: QueryState, kind: str) -> None:
        if state.generation != self.store.generation:
            raise StorageError(f"{kind}: files were appended to the shard set (or another snapshot of the table "
                               f"was loaded) while query {state.query_id} ran; run the query again")

    def _whole(self, ranges: np.ndarray | None, where: Any = None) -> pa.Table:
        """Every row of the shard set, by time (inside ``ranges`` and passing the input filter
        ``where`` when given)."""
        table = self.store.sorted_rows()
        if where is not None:
            table = table.take(pa.array(_matching_rows(table, where, getattr(self._calls, "work", None))))
        if ranges is None:
            return table
        return _inside(table, _time_ints(table.column(self.store.time_column)), ranges)[0]


def _canonical_copies(table: pa.Table, analysis: Analysis, key: list[str]) -> np.ndarray:
    """Sorted indices of ``table``'s rows the matcher keeps when it drops copies of an event (same
    partition, ORDER BY values and event key): the first in its order. Copies of an event lie
    on one node (shards place them by time and key, by type or by time window), so only that
    copy may be a candidate: another copy passing a condition would stand for the event."""
    from dfs_cer.events.order import sort_and_partition

    mr = analysis.query.recognize
    order_by = [(analysis.order_column, False)] if mr.all_matches else \
        [(s.column, s.descending, bool(s.nulls_first)) for s in mr.order_by]
    return np.sort(sort_and_partition(table, tuple(mr.partition_by), order_by, None, tuple(key), True)[2])


#: rows a filter is evaluated over between two checks of the query's work
FILTER_CHUNK = 65536


def _matching_rows(table: pa.Table, filt: Any, work: Work | None = None) -> np.ndarray:
    """Indices of ``table``'s rows passing a dataset filter expression, in order; with a query's
    ``work``, in chunks of rows with its deadline and cancellation checked between them."""
    if work is not None and table.num_rows > FILTER_CHUNK:
        parts = []
        for start in range(0, table.num_rows, FILTER_CHUNK):
            work.check()
            parts.append(start + _matching_rows(table.slice(start, FILTER_CHUNK), filt))
        return np.concatenate(parts)
    indexed = table.append_column("__row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    col = ds.dataset(indexed).to_table(filter=filt, columns=["__row"]).column("__row")
    # the scanner's batches are each in order: a merge of sorted runs (timsort), not a full sort
    return np.sort(np.asarray(col.to_numpy(), np.int64), kind="stable")


def _table_blob(blobs: list[bytes], kind: str, what: str) -> pa.Table:
    """The Arrow IPC stream in the first blob of a pull, or a clear protocol error."""
    if not blobs:
        raise ProtocolError(f"{kind}: the {what} blob is missing")
    try:
        return pa.ipc.open_stream(pa.py_buffer(blobs[0])).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ProtocolError(f"{kind}: the {what} is not an Arrow stream ({exc})") from None


def _tis_format(header: dict[str, Any], action: str) -> str:
    tis_format = header.get("tis", "swf")
    if tis_format not in ("swf", "intervals"):
        raise ProtocolError(f"action {action}: tis must be 'swf' or 'intervals', got {tis_format!r}")
    return str(tis_format)


def _load_tis(tis_format: str, blob: bytes) -> ShrinkingWindowFilter | IntervalSet:
    return IntervalSet.from_bytes(blob) if tis_format == "intervals" else ShrinkingWindowFilter.from_bytes(blob)


def _key_kind(kind: int) -> KeyKind:
    try:
        return KeyKind(kind)
    except ValueError as e:
        raise ProtocolError(f"action wjf: unknown key kind {kind!r}") from e


def _ship(state: QueryState, rows: np.ndarray) -> None:
    """Remember the rows pulls send (as indices into the node's rows by time), for a later
    ``pull_halo`` with ``skip_shipped``; only queries with PREV/NEXT keep row ids."""
    if state.row_ids is not None:
        ids = state.row_ids[rows]
        state.shipped = ids if state.shipped is None else np.union1d(state.shipped, ids)


#: final pulls an executor may take a time slice of (``slice``: [lo, hi], inclusive)
SLICEABLE = ("pull", "pull_range", "pull_all", "pull_pushdown")


def _slice(raw: object, kind: str) -> tuple[int, int]:
    if (not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                               for x in raw) or raw[0] > raw[1]):
        raise ProtocolError(f"{kind}: slice must be [lo, hi], two integers with lo <= hi")
    return int(raw[0]), int(raw[1])


def _union(state: QueryState) -> np.ndarray:
    """The rows some variable holds as a candidate, ascending: a mask over the table (linear; a
    sort of the concatenated lists took a second at millions of candidates)."""
    mask = np.zeros(state.table.num_rows, bool)
    for rows in state.candidates.values():
        mask[rows] = True
    return np.flatnonzero(mask)


def _lease(header: dict[str, Any]) -> float | None:
    """When an opened query's state expires: the compute node's time left for the query from
    now, plus a grace (None without one: the idle TTL only)."""
    import time

    seconds = lease(header)
    return None if seconds is None else time.monotonic() + seconds + LEASE_GRACE_SECONDS


def node_betas(calibration_file: str) -> dict[str, float]:
    """Seconds per event of each matching engine on this node: from a ``dfs-cer calibrate``
    file when one is configured, else the cost model's built-in estimate."""
    import json

    from dfs_cer.plan.cost import FIXED

    out = {"rowpattern": FIXED["beta"], "cer": FIXED["beta"]}
    if calibration_file:
        try:
            with open(calibration_file, encoding="utf-8") as fh:
                betas = json.load(fh).get("beta", {})
            out.update({str(k): float(v) for k, v in betas.items() if k in out})
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            raise StorageError(f"storage.calibration_file {calibration_file}: cannot read its beta ({exc}); "
                               "run dfs-cer calibrate --out FILE") from None
    return out
