"""The query lifecycle on a node: ``reserve``, ``release``, ``open`` (alone or as a group) and
``close``. An ``open`` with an ``arrival`` admits the query at once or refuses it, as ``reserve``
would (one round trip instead of two); ``release`` then gives back what an admitted one holds."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import ProtocolError
from dfs_cer.plan.halo import no_halo
from dfs_cer.query.arrow_filter import union_filter
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import Close, Release, Reserve, arrival, lease
from dfs_cer.transport.replies import OpenReply
from dfs_cer.work import ROWS, Work
from storage_node.actions.base import Reply, inside, int_times, matching_rows, snapshot_of
from storage_node.actions.opening import Opener, any_of, canonical_copies, expiry, time_ranges
from storage_node.rows import sort, take
from storage_node.state import QueryState


class LifecycleActions(Opener):
    """Reserve room, open a query (scan once, keep candidates), release and close."""

    def open(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        qid = header.get("query_id")
        seconds = lease(header)  # the query's work stops when its compute node's time is up
        with self.node.working(
            qid if isinstance(qid, str) else "open",
            None if seconds is None else time.monotonic() + seconds,
            slot=False,
        ):
            try:
                # late files added with dfs-cer shard --append; for a table, the snapshot the query
                # pinned
                with self.node.pinned(snapshot_of(header)):
                    reply = self._open(header)
            except BaseException:
                if isinstance(qid, str):
                    self.node.registry.end_work(qid)
                raise
            if reply[0].get("refused") and isinstance(qid, str):
                self.node.registry.end_work(qid)  # no room now: nothing of it is kept
            return reply

    def _open(self, header: dict[str, Any]) -> Reply:
        if "group" in header:
            return self._open_group(header)
        layout = self.node.relies(header)  # else: no whole groups or windows taken as here
        analysis, qid = self._query(header, "open", navigation=True, layout=layout)
        condition, where = self._input_filter(header)
        # (an incremental re-run matches only rows inside its ranges: it keeps every candidate)
        navigating = (
            analysis.navigation_on_nodes
            and any(v.navigating for v in analysis.variables)
            and header.get("time_ranges") is None
        )
        # PREV/NEXT conditions read neighbours any condition may have filtered out: every row
        filt = (
            None
            if navigating
            else union_filter(
                [v.independent for v in analysis.variables if not v.any_row], self.node.store.schema
            )
        )
        when = arrival(header)
        estimate = self._admit(qid) if when is None else self._admit_now(qid, when)
        if estimate is None:  # no room now: the compute node asks again (its place kept)
            return {"refused": True}, []
        work = self.node.current()
        if work is not None:  # what the open copies is charged to the reservation first
            work.prepay(estimate)
        key, dedup = self._event_key(header, self.node.store.schema)
        copies = bool(key) and dedup  # copies of an event may differ in other columns
        halo = bool(analysis.prev_reach or analysis.next_reach) or copies
        try:
            if condition is not None:  # after admission: the checks read the shards
                self._filter_cost(condition)
                self._no_nan(condition)
            ranges = time_ranges(header.get("time_ranges"))
            row_ids = None
            kept = None
            if (
                halo
            ):  # rows keep their index in the node's rows by time: halo replies skip shipped ones
                table = self.node.whole(ranges, where)
                if copies:
                    kept = canonical_copies(table, analysis, key)
                if filt is not None:
                    indexed = (
                        self._indexed_rows(analysis, filt)
                        if ranges is None and where is None
                        else None
                    )
                    if (
                        indexed is not None and indexed[0] is table
                    ):  # the same rows, found through the indexes
                        row_ids = indexed[1]
                    else:
                        row_ids = matching_rows(table, filt)
                    table = take(table, row_ids, work)
                else:
                    row_ids = np.arange(table.num_rows, dtype=np.int64)
                ts = int_times(table.column(self.node.store.time_column))
            else:
                indexed = (
                    self._indexed_rows(analysis, filt)
                    if filt is not None and where is None
                    else None
                )
                if (
                    indexed is not None
                ):  # the rows passing the same filter, found through the indexes
                    table = take(indexed[0], indexed[1], work)
                else:
                    table = self._sorted_scan(
                        filt if where is None else where if filt is None else filt & where,
                        work,
                        ranges=ranges,
                        condition=condition,
                    )
                ts = int_times(table.column(self.node.store.time_column))
                if (
                    ranges is not None
                ):  # an incremental re-run: only rows inside these closed ranges
                    table, ts = inside(table, ts, ranges, work)
            candidates = self._candidates(table, analysis)
            if (
                kept is not None and row_ids is not None
            ):  # only the copy the matcher keeps stands for an event
                candidates = {
                    name: rows[np.isin(row_ids[rows], kept)] for name, rows in candidates.items()
                }
            if navigating:
                candidates = self._navigation_candidates(
                    table, analysis, header, candidates, layout
                )
            state = QueryState(
                qid,
                analysis,
                table,
                ts,
                candidates,
                estimate,
                ranges=ranges,
                generation=self.node.store.generation,
                navigation=self._navigation_mode(analysis, layout) if navigating else None,
                row_ids=row_ids,
                where=where,
                layout=layout,
            )
        except pa.ArrowException as exc:
            self.node.registry.release(estimate)
            if where is None:
                raise
            from dfs_cer.errors import QueryValidationError
            from dfs_cer.query.input_filter import INPUT_FILTER

            raise QueryValidationError(
                f"the input filter failed on this node's rows ({exc})",
                clause="input filter",
                code=INPUT_FILTER,
            ) from None
        except BaseException:
            self.node.registry.release(estimate)
            raise
        state.expires = expiry(header)
        self.node.registry.put(state)
        bounds = header.get("variable_bounds", False)
        if not isinstance(bounds, bool):
            raise ProtocolError(f"open: variable_bounds must be true or false, got {bounds!r}")
        info = {
            **self._info(state, bounds),
            "copies_whole": self._copies_whole(analysis, key, layout),
        }
        if "snapshot" in info and snapshot_of(header) is None:  # the latest commit wins a race
            info["snapshot_ms"] = self.node.store.manifest.get("snapshot_ms")
        return OpenReply.lean(info), (
            [self.node.store.schema.serialize().to_pybytes()] if header.get("schema", True) else []
        )

    def _sorted_scan(self, filt: Any, work: Work | None, **hints: Any) -> pa.Table:
        """The rows passing ``filt`` sorted by time, both copies charged to ``work`` (the
        scan's given back once sorted)."""
        scanned = self.node.store.scan(filt, work=work, **hints)
        table = sort(scanned, self.node.store.time_column, work)
        if work is not None and table is not scanned:
            work.uncharge(scanned.nbytes, ROWS)
        return table

    def _admit(self, query_id: str) -> int:
        """The bytes this opening holds: the reservation ``reserve`` granted it, else one made now
        (waiting for room up to the admission wait)."""
        held = self.node.registry.take_reservation(query_id)
        if held is not None:
            return held
        estimate = self.node.store.estimate_bytes()
        self.node.registry.reserve(query_id, estimate)
        return estimate

    def _admit_now(self, query_id: str, arrival: float) -> int | None:
        """The bytes an opening with an ``arrival`` holds (the compute node opens on every node or
        on none): the reservation ``reserve`` granted it, else room granted at once in arrival
        order, else None (refused: the query keeps its place in line)."""
        held = self.node.registry.take_reservation(query_id)
        if held is not None:
            return held
        if not self.node.registry.try_reserve(query_id, self.node.store.estimate_bytes(), arrival):
            return None
        return self.node.registry.take_reservation(query_id)

    def reserve(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Room for a query about to open, granted at once or not at all (the compute node
        reserves on every node or on none; see StateRegistry.try_reserve)."""
        request = Reserve.parse(header)
        granted = self.node.registry.try_reserve(
            request.query_id, self.node.store.estimate_bytes(), request.arrival
        )
        # a table's current snapshot: the compute node pins one for every node
        pinned = self.node.store.current_snapshot() if granted else {}
        return {"granted": granted, **pinned}, []

    def release(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Release.parse(header)
        self.node.registry.withdraw(request.query_id, request.arrival)
        return {"released": True}, []

    def _open_group(self, header: dict[str, Any]) -> Reply:
        """Several queries over one scan: every row of the shard set, read and sorted once; each
        query gets its own state (and candidates) over that shared table, and conditions that
        coincide across the queries are evaluated once."""
        group = field(header, "group", list, "open")
        if not group or not all(isinstance(g, dict) for g in group):
            raise ProtocolError("action open: group must be a non-empty list of query headers")
        if any("input_filter" in g for g in group):
            raise ProtocolError(
                "action open: queries opened in a group share one scan and take no input_filter; "
                "open such a query alone"
            )
        layout = self.node.relies(header)
        queries = [self._query(g, "open", layout=layout) for g in group]
        if len({qid for _, qid in queries}) != len(queries):
            raise ProtocolError("action open: the queries of a group need distinct query ids")
        # the group's own id holds the reservation (StorageClient reserve with it), else the first
        # query's
        estimate = self._admit(
            header["query_id"] if isinstance(header.get("query_id"), str) else queries[0][1]
        )
        work = self.node.current()
        if work is not None:  # what the open copies is charged to the reservation first
            work.prepay(estimate)
        states = []
        keys = [self._event_key(g, self.node.store.schema) for g in group]
        # contiguous patterns read every row; when none of the queries has one, the scan keeps
        # only rows some variable of some query may take (and every row when a query drops
        # copies of an event: which copy stands for it is decided among all of them; and when a
        # query pulls every row because halo rows cannot serve it, as the compute node decides)
        whole = (
            bool(header.get("whole"))
            or any(not a.skippable for a, _ in queries)
            or any(key and dedup for key, dedup in keys)
            or any(
                no_halo(a, self.node.store.schema, self.node.halo_limit) is not None
                for a, _ in queries
            )
        )
        try:
            if whole:
                table = self.node.store.sorted_rows(work)
            else:
                filters = [
                    union_filter(
                        [v.independent for v in a.variables if not v.any_row],
                        self.node.store.schema,
                    )
                    for a, _ in queries
                ]
                table = self._sorted_scan(
                    None if any(f is None for f in filters) else any_of(filters), work
                )
            ts = int_times(table.column(self.node.store.time_column))
            shared: dict[str, np.ndarray] = {}
            for i, ((analysis, qid), (key, dedup)) in enumerate(zip(queries, keys, strict=True)):
                candidates = self._candidates(table, analysis, shared)
                if key and dedup:  # only the copy the matcher keeps stands for an event
                    kept = canonical_copies(table, analysis, key)
                    candidates = {
                        name: rows[np.isin(rows, kept)] for name, rows in candidates.items()
                    }
                states.append(
                    QueryState(
                        qid,
                        analysis,
                        table,
                        ts,
                        candidates,
                        estimate if i == 0 else 0,
                        owns_table=i == 0,
                        grouped=True,
                        whole=whole,
                        generation=self.node.store.generation,
                        layout=layout,
                    )
                )
        except BaseException:
            self.node.registry.release(estimate)
            raise
        for state in states:
            state.expires = expiry(header)
        self.node.registry.put(*states)
        info = {
            "group": [
                OpenReply.lean(
                    {**self._info(s), "copies_whole": self._copies_whole(s.analysis, key, layout)}
                )
                for s, (key, _) in zip(states, keys, strict=True)
            ],
            "shared_conditions": len(shared),
            "conditions": sum(len(s.candidates) for s in states),
        }
        return info, (
            [self.node.store.schema.serialize().to_pybytes()] if header.get("schema", True) else []
        )

    def close(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        return {"closed": self.node.registry.close(Close.parse(header).query_id)}, []
