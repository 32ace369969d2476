"""The pulls (DoGet tickets) on a node: ``pull`` routes a ticket by its ``kind`` through the
protocol table (:data:`dfs_cer.transport.actions.PULLS`); the final pulls (``pull``,
``pull_range``, ``pull_all``, ``pull_pushdown``, an executor's time ``slice`` of each: see
:mod:`storage_node.actions.slices`), halo rows, node-side matches and a group's shared pull live
here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import CacheMissError, ProtocolError
from dfs_cer.filters import IntervalSet
from dfs_cer.transport.actions import FINAL_PULLS, PULLS
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import (
    HALO,
    MEMBERS,
    POINT_AFTER,
    POINT_BEFORE,
    POINT_TIME,
    Halo,
    NodeMatch,
)
from dfs_cer.work import ROWS, Work
from storage_node.actions.base import (
    Family,
    Node,
    int_times,
    load_tis,
    ship,
    table_blob,
    tis_format_of,
    union_rows,
)
from storage_node.actions.slices import candidates_within, cut, time_slice
from storage_node.rows import copy_bytes, keep, take
from storage_node.state import QueryState

#: bytes per row of the row arrays an ordering makes beside its copy (order, partition, time)
ORDER_BYTES = 24


class PullActions(Family):
    """The pull kinds of this family and the routing of every kind (``kinds``: kind -> handler)."""

    def __init__(self, node: Node, kinds: Mapping[str, Callable[..., pa.Table]]) -> None:
        super().__init__(node)
        #: every pull kind's handler (the protocol table resolved by the node's routes):
        #: ``(header, blobs)`` for a kind that needs no opened query, else
        #: ``(state, header, blobs, work)``, run in a work slot of the query
        self.kinds = kinds

    def pull(
        self,
        header: dict[str, Any],
        blobs: list[bytes],
        finish: Callable[[pa.Table, Work], pa.Table] | None = None,
    ) -> tuple[pa.Table, Work]:
        """Route a DoGet ticket by its ``kind`` (a ``slice``: the rows of an inclusive time range
        of a final pull, one executor's share). Every copy the pull makes is charged to the
        query's work (a pull outside an opened query: a work of its own); ``finish`` makes the
        reply of the rows (compressed for the wire) in the same call. Returns the reply and the
        work that holds its bytes: settle it once the reply has been sent."""
        import uuid

        kind = field(header, "kind", str, "pull")
        if "slice" in header:  # one executor's share of a final pull (each handler reads it)
            if kind not in FINAL_PULLS:
                raise ProtocolError(f"{kind}: slice applies to {', '.join(FINAL_PULLS)} only")
            time_slice(header, kind)
        entry = PULLS.get(kind)
        if entry is not None and entry.lifecycle:
            qid = header.get("query_id")
            opened = isinstance(qid, str) and self.node.registry.find(qid) is not None
            name = qid if opened and isinstance(qid, str) else f"{kind}-{uuid.uuid4().hex[:8]}"
            try:
                with self.node.working(name, slot=False) as work:
                    return _reply(self.kinds[kind](header, blobs), work, finish)
            finally:
                if not opened:
                    self.node.registry.end_work(name)
        state = self.node.registry.get(field(header, "query_id", str, kind))
        with self.node.working(
            state.query_id
        ) as work:  # the pulls of an opened query, bounded by its work
            if entry is None:
                raise ProtocolError(
                    f"unknown pull kind {kind!r}; use pull, pull_range, pull_halo, pull_variable, "
                    "pull_pushdown or pull_all"
                )
            return _reply(self.kinds[kind](state, header, blobs, work), work, finish)

    def pull_all(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        """Every row of the shard set (of the opened query's rows when it is open here)."""
        kind = "pull_all"
        window = time_slice(header, kind)
        opened = (
            self.node.registry.find(header["query_id"])
            if isinstance(header.get("query_id"), str)
            else None
        )
        if opened is not None:  # the open reserved the memory
            self.node.same_generation(opened, kind)
            return self.node.whole(opened.ranges, opened.where, window)
        if header.get("opened"):  # the compute node opened it here: this node restarted since
            self.node.registry.get(field(header, "query_id", str, kind))  # raises UnknownQueryError
        if "table" in header:  # the table a query without an open reads (a situation query)
            from dfs_cer.query.names import check_table

            check_table(field(header, "table", str, kind), self.node.store.name)
        return self.node.admitted(kind, lambda: self.node.whole(None, window=window))

    def pull_pushdown(
        self, state: QueryState, header: dict[str, Any], blobs: list[bytes], work: Work
    ) -> pa.Table:
        """Every candidate row of the query (with their halo when this node holds whole groups)."""
        window = time_slice(header, "pull_pushdown")
        if window is not None and "halo" not in header:
            rows, looked = candidates_within(state, window)
            self.node.sliced(looked)
            ship(state, rows)
            return take(state.table, rows, work)
        rows = union_rows(state)
        ship(state, rows)
        if "halo" in header:
            table = self._with_local_halo(
                state, Halo.parse(header, self.node.halo_limit), rows, work
            )
            return cut(table, window, self.node.store.time_column, work)
        return take(state.table, rows, work)

    def pull_final(
        self, state: QueryState, header: dict[str, Any], blobs: list[bytes], work: Work
    ) -> pa.Table:
        """``pull``: candidate rows inside the final interval set (blob 0)."""
        kind = "pull"
        if not blobs:
            raise ProtocolError(f"{kind}: the final interval set blob is missing")
        swf = load_tis(tis_format_of(header, kind), blobs[0])
        window = time_slice(header, kind)
        if window is not None and "halo" not in header:
            rows, looked = candidates_within(state, window)
            self.node.sliced(looked)
        else:
            rows = union_rows(state)
        rows = rows[swf.contains(state.ts[rows])]
        ship(state, rows)
        if "halo" in header:
            table = self._with_local_halo(
                state, Halo.parse(header, self.node.halo_limit), rows, work
            )
            return cut(table, window, self.node.store.time_column, work)
        return take(state.table, rows, work)

    def pull_range(
        self, state: QueryState, header: dict[str, Any], blobs: list[bytes], work: Work
    ) -> pa.Table:
        """Every row inside the final intervals (contiguous patterns), from the shards."""
        kind = "pull_range"
        window = time_slice(header, kind)
        if "halo" in header:
            table = self._pull_range_halo(
                state, Halo.parse(header, self.node.halo_limit), blobs, work
            )
            return cut(table, window, self.node.store.time_column, work)
        if not blobs:
            raise ProtocolError(f"{kind}: the final interval set blob is missing")
        swf = load_tis(tis_format_of(header, kind), blobs[0])
        self.node.same_generation(state, kind)
        table = self.node.whole(state.ranges, state.where, window)
        ts = int_times(table.column(self.node.store.time_column))
        return keep(table, swf.contains(ts), work)

    def pull_halo(
        self, state: QueryState, header: dict[str, Any], blobs: list[bytes], work: Work
    ) -> pa.Table:
        """Rows next to the pulled candidates' (partition, time) points."""
        return self._pull_halo(state, Halo.parse(header, self.node.halo_limit), blobs, work)

    def _canonical(
        self, state: QueryState, request: Halo, kind: str, work: Work
    ) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """This node's rows of the query (inside its time ranges) in the matcher's order (the
        ordered copy and its row arrays charged to ``work`` first)."""
        from dfs_cer.plan.halo import canonical

        self.node.same_generation(state, kind)
        table = self.node.whole(state.ranges, state.where)
        work.charge(copy_bytes(table) + ORDER_BYTES * table.num_rows, ROWS)
        unknown = [c for c in request.event_key if c not in table.column_names]
        if unknown:
            raise ProtocolError(
                f"{kind}: event key column(s) {unknown} are not columns of this node's rows"
            )
        mr = state.analysis.query.recognize
        if mr.order_by[0].descending:
            raise ProtocolError(f"{kind}: a halo needs an ascending first ORDER BY column")
        return canonical(table, state.analysis, request.event_key, request.dedup)

    def _pull_range_halo(
        self, state: QueryState, request: Halo, blobs: list[bytes], work: Work
    ) -> pa.Table:
        """Every row inside the closed intervals, and the ``before``/``after`` rows next to each
        interval in every partition (marked in :data:`HALO`), in the matcher's order."""
        from dfs_cer.plan.halo import around_intervals

        if not blobs:
            raise ProtocolError("pull_range: the final interval set blob is missing")
        intervals = IntervalSet.from_bytes(blobs[0])
        ordered, pid, t, _, _ = self._canonical(state, request, "pull_range", work)
        inside, halo = around_intervals(
            pid, t, intervals.starts, intervals.ends, request.before, request.after
        )
        kept = inside | halo
        return keep(ordered, kept, work).append_column(HALO, pa.array(halo[kept]))

    def _pull_halo(
        self, state: QueryState, request: Halo, blobs: list[bytes], work: Work
    ) -> pa.Table:
        """Rows at the points (ties) and the ``before``/``after`` rows next to each point of its
        partition. Points: an Arrow table of the PARTITION BY columns and :data:`POINT_TIME`."""
        from dfs_cer.plan.halo import around_points, point_partitions

        points = table_blob(blobs, "pull_halo", "points table")
        partition_by = list(state.analysis.query.recognize.partition_by)
        columns = [*partition_by, POINT_TIME]
        reach = points.column_names == [*columns, POINT_BEFORE, POINT_AFTER]
        if not (points.column_names == columns or reach) or not all(
            pa.types.is_integer(points.schema.field(c).type)
            for c in points.column_names[len(partition_by) :]
        ):
            raise ProtocolError(
                f"pull_halo: the points table needs the columns {columns} (integer times), "
                f"optionally followed by {POINT_BEFORE} and {POINT_AFTER} (integer row counts)"
            )
        before: int | np.ndarray = request.before
        after: int | np.ndarray = request.after
        if reach:  # rows per point, each within the request's halo
            before = np.asarray(
                points.column(POINT_BEFORE).to_numpy(zero_copy_only=False), np.int64
            )
            after = np.asarray(points.column(POINT_AFTER).to_numpy(zero_copy_only=False), np.int64)
            if (
                points.column(POINT_BEFORE).null_count
                or points.column(POINT_AFTER).null_count
                or (
                    before.size
                    and (
                        before.min() < 0
                        or before.max() > request.before
                        or after.min() < 0
                        or after.max() > request.after
                    )
                )
            ):
                raise ProtocolError(
                    f"pull_halo: {POINT_BEFORE}/{POINT_AFTER} must lie in 0..halo "
                    f"({request.before}, {request.after})"
                )
        if (
            request.skip_shipped and state.shipped is None
        ):  # re-opened after a restart: the client asks again
            raise CacheMissError(
                "pull_halo: skip_shipped, but this node holds no record of rows it shipped for the "
                "query (it restarted and the query was re-opened); ask without skip_shipped"
            )
        ordered, pid, t, bounds, order = self._canonical(state, request, "pull_halo", work)
        try:
            point_pid = point_partitions(ordered, bounds, partition_by, points.select(partition_by))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ProtocolError(
                f"pull_halo: the points' partition columns do not match this node's ({exc})"
            ) from None
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
        return keep(ordered, mask, work)

    def _with_local_halo(
        self, state: QueryState, request: Halo, rows: np.ndarray, work: Work
    ) -> pa.Table:
        """The final pull's candidate ``rows`` and, since this node holds whole PARTITION BY
        groups, their neighbours PREV/NEXT read (per candidate, by the variables it is a
        candidate of), marked in :data:`HALO`: no round trip with points."""
        from dfs_cer.match.rowpattern.navigation import candidate_reach
        from dfs_cer.plan.halo import around_points

        if not self.node.local(state.analysis, state.layout):
            raise ProtocolError(
                f"{request.kind}: a halo in the final pull needs whole PARTITION BY groups on this "
                "node; use pull_halo"
            )
        if state.row_ids is None:
            raise ProtocolError(f"{request.kind}: the query reads no neighbours (no PREV/NEXT)")
        ordered, pid, t, bounds, order = self._canonical(state, request, request.kind, work)
        taken = take(state.table, rows, work)
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
            points = keep(taken, wanted, work)
            point_pid = point_partitions(ordered, bounds, partition_by, points.select(partition_by))
            point_t = time_values(points, state.analysis.order_column)
            by_point = np.lexsort((point_t, point_pid))
            halo = around_points(
                pid,
                t,
                point_pid[by_point],
                point_t[by_point],
                before[wanted][by_point],
                after[wanted][by_point],
            )
            halo &= ~np.isin(order, state.row_ids[rows])  # those rows are in the reply already
        near = keep(ordered, halo, work)
        return pa.concat_tables(
            [
                taken.append_column(HALO, pa.array(np.zeros(rows.size, bool))),
                near.append_column(HALO, pa.array(np.ones(near.num_rows, bool))),
            ]
        )

    def pull_matches(
        self, state: QueryState, header: dict[str, Any], blobs: list[bytes], work: Work
    ) -> pa.Table:
        """Run the query's MATCH_RECOGNIZE over this node's rows (its partitions are whole here)
        and return the relation (the outer SELECT stays on the compute node); the schema's
        metadata says how many matches and the seconds spent."""
        import time

        from dfs_cer.match.cer.engine import run_cer
        from dfs_cer.match.rowpattern.engine import run_row_pattern

        request = NodeMatch.parse(header)
        if not self.node.local(state.analysis, state.layout):
            raise ProtocolError(
                "pull_matches: this node does not hold whole PARTITION BY groups of the query "
                "(shard with --partitioning type --type-column <a PARTITION BY column>)"
            )
        self.node.same_generation(state, "pull_matches")
        table = self.node.whole(state.ranges, state.where)
        # the engine's copy of the rows in its order, charged before it runs (given back after)
        copy = copy_bytes(table) + ORDER_BYTES * table.num_rows
        work.charge(copy, ROWS)
        unknown = [c for c in request.event_key if c not in table.column_names]
        if unknown:
            raise ProtocolError(
                f"pull_matches: event key column(s) {unknown} are not columns of this node's rows"
            )
        import dataclasses

        query = state.analysis.query
        analysis = dataclasses.replace(
            state.analysis, event_key=request.event_key, dedup=request.dedup
        )
        began = time.process_time()
        if query.recognize.all_matches:
            out = run_cer(
                table,
                analysis,
                kleene=request.kleene,
                max_matches=request.max_matches,
                on_limit=request.on_limit,
                work=work,
                max_steps=request.max_steps,
            )
        else:
            out = run_row_pattern(
                table,
                analysis,
                max_matches=request.max_matches,
                on_limit=request.on_limit,
                work=work,
                max_steps=request.max_steps,
                max_seconds=request.max_seconds,
            )
        seconds = time.process_time() - began
        work.uncharge(copy, ROWS)
        return out.table.replace_schema_metadata(
            {
                "dfs_cer_matches": str(out.matches),
                "dfs_cer_truncated": str(out.truncated).lower(),
                "dfs_cer_seconds": f"{seconds:.6f}",
            }
        )

    def pull_group(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        """The final pulls of queries opened together, in one stream: the union of their rows
        (each row once) with a ``__dfs_cer_members`` bit mask saying which pulls asked for it."""
        pulls = field(header, "pulls", list, "pull_group")
        if not pulls or len(pulls) > 64 or not all(isinstance(p, dict) for p in pulls):
            raise ProtocolError("pull_group: pulls must be a list of 1 to 64 pull headers")
        states = [self.node.registry.get(field(p, "query_id", str, "pull_group")) for p in pulls]
        base = states[0].table
        if not all(s.grouped and s.table is base for s in states):
            raise ProtocolError(
                "pull_group: the queries were not opened together (open with a group)"
            )
        chosen = []
        for p, state in zip(pulls, states, strict=True):
            kind = field(p, "kind", str, "pull_group")
            if kind == "pull_all":
                if not state.whole:
                    raise ProtocolError("pull_group: pull_all needs a group opened over every row")
                rows = np.arange(state.table.num_rows, dtype=np.int64)
            elif kind == "pull_pushdown":
                rows = union_rows(state)
            elif kind in ("pull", "pull_range"):
                if kind == "pull_range" and not state.whole:
                    raise ProtocolError(
                        "pull_group: pull_range needs a group opened over every row"
                    )
                index = field(p, "blob", int, "pull_group")
                if not 0 <= index < len(blobs):
                    raise ProtocolError(f"pull_group: blob {index} is missing")
                swf = load_tis(tis_format_of(p, kind), blobs[index])
                if kind == "pull":
                    rows = union_rows(state)
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
        return take(base, union, self.node.current()).append_column(MEMBERS, pa.array(members))


def _reply(
    table: pa.Table, work: Work, finish: Callable[[pa.Table, Work], pa.Table] | None
) -> tuple[pa.Table, Work]:
    """The reply ``finish`` makes of a pull's rows, and a work holding what it takes (the
    copies the pull charged, down to the reply's own size) until it has been sent."""
    if finish is not None:
        table = finish(table, work)
    held = work.hand_over(ROWS)
    held.uncharge(max(0, held.charged - table.nbytes), ROWS)
    return table, held
