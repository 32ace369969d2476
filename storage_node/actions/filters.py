"""The filter round trips on a node: Eq. 1 ``intervals``, naive-DFS ``summaries``, join filter
builds (``wjf``), two-phase ``verify`` and DFS's per-node ``collect``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import CacheMissError, ProtocolError
from dfs_cer.filters import IntervalSet, KeyKind, WindowJoinFilter, WindowKeySet, eq1_offsets
from dfs_cer.filters.points import Points, SliceRuns, pack_points, slice_ids, value_hashes
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import Collect, Intervals, Verify, Wjf
from storage_node.actions.base import Family, Reply, load_tis
from storage_node.rows import ARRAY_BYTES, take
from storage_node.state import QueryState

Handler = Callable[["FilterActions", dict[str, Any], list[bytes]], Reply]


def _charged(handler: Handler) -> Handler:
    """Run a filter action in a call of its query's work: the column values it copies are
    charged to the query (given back when the call ends)."""

    @functools.wraps(handler)
    def run(self: FilterActions, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        qid = header.get("query_id")
        if not isinstance(qid, str):  # the handler names the error
            return handler(self, header, blobs)
        with self.node.working(qid, slot=False):
            return handler(self, header, blobs)

    return run


class FilterActions(Family):
    """``intervals``, ``summaries``, ``wjf``, ``verify`` and ``collect``."""

    def _values(self, state: QueryState, column: str, rows: np.ndarray) -> pa.ChunkedArray:
        """The values of ``column`` at ``rows``, a copy charged to the call's work."""
        picked = take(state.table.select([column]), rows, self.node.current(), ARRAY_BYTES)
        return picked.column(0)

    def intervals(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Intervals.parse(header)
        state = self.node.registry.get(request.query_id)
        name = self.node.variable(state, request.variable, "intervals")
        lo, hi = eq1_offsets(request.role, request.window)
        out = IntervalSet.around(state.ts[state.candidates[name]], lo, hi)
        return {"intervals": len(out)}, [out.to_bytes()]

    @_charged
    def summaries(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Naive-DFS trip 1: every variable's Eq. 1 interval array and the (timestamp, value) pairs
        of every (variable, column) in an equality condition, in one reply."""
        state = self.node.registry.get(field(header, "query_id", str, "summaries"))
        window = field(header, "window", int, "summaries")
        out = []
        for v in field(header, "variables", list, "summaries"):
            if not isinstance(v, dict):
                raise ProtocolError("action summaries: each variable must be an object")
            lo, hi = eq1_offsets(field(v, "role", str, "summaries"), window)
            out.append(
                IntervalSet.around(
                    state.ts[state.candidates[self.node.variable(state, v, "summaries")]], lo, hi
                ).to_bytes()
            )
        for p in field(header, "pairs", list, "summaries"):
            if not isinstance(p, dict):
                raise ProtocolError("action summaries: each pair request must be an object")
            rows = state.candidates[self.node.variable(state, p, "summaries")]
            column = field(p, "column", str, "summaries")
            if column not in state.table.column_names:
                raise ProtocolError(f"action summaries: unknown column {column!r}")
            pairs = pa.table(
                {"ts": pa.array(state.ts[rows]), "value": self._values(state, column, rows)}
            )
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, pairs.schema) as writer:
                writer.write_table(pairs)
            out.append(sink.getvalue().to_pybytes())
        return {"blobs": len(out)}, out

    @_charged
    def wjf(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Wjf.parse(header)
        total = sum(b.bits for b in request.builds)
        if (
            len(request.builds) > 64 or total > 8 * self.node.max_blob
        ):  # the reply must fit one message
            raise ProtocolError(
                f"action wjf: {len(request.builds)} builds of {total} bits in all exceed the limit "
                f"of 64 builds and {8 * self.node.max_blob} bits (storage.max_message_bytes)"
            )
        state = self.node.registry.get(request.query_id)
        tis_format = request.tis
        swf = load_tis(tis_format, blobs[0]) if blobs else None
        if swf is not None:
            state.tis, state.tis_format = blobs[0], tis_format  # the following verify may reuse it
        out = []
        for b in request.builds:
            name = self.node.variable(state, b.variable, "wjf")
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
                if (
                    not 0 < b.bits <= 8 * self.node.max_blob
                ):  # its bytes could not travel back anyway
                    raise ProtocolError(
                        f"action wjf: bits must be in 1..{8 * self.node.max_blob} (the message "
                        f"limit), got {b.bits}"
                    )
                f = WindowJoinFilter(b.bits, b.hashes, b.window, _key_kind(b.kind), seed=b.seed)
            f.add(self._values(state, column, rows), state.ts[rows])
            out.append(f.to_bytes())
        return {"filters": len(out)}, out

    @_charged
    def verify(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        request = Verify.parse(header)
        state = self.node.registry.get(request.query_id)
        name = self.node.variable(state, request.variable, "verify")
        role = request.role
        tis_format = request.tis
        if request.cached_swf:  # the SWF sent with the preceding wjf action
            if state.tis is None or state.tis_format != tis_format:
                raise CacheMissError(
                    f"action verify: no cached {tis_format} interval set (the node restarted); "
                    "send it"
                )
            blobs = [state.tis, *blobs]
        if not blobs:
            raise ProtocolError("action verify: the interval set blob is missing")
        swf = load_tis(tis_format, blobs[0])
        rows = state.candidates[name]
        before = rows.size
        rows = rows[swf.contains(state.ts[rows])]  # phase 1: timestamps inside the interval set
        for p in request.probes:  # phase 2: equality conditions through the join filters
            if not 0 < p.blob < len(blobs):
                raise ProtocolError(f"action verify: probe blob {p.blob} does not exist")
            g: WindowJoinFilter | WindowKeySet
            g = (
                WindowKeySet.from_bytes(blobs[p.blob])
                if p.format == "keyset"
                else WindowJoinFilter.from_bytes(blobs[p.blob])
            )
            if p.column not in state.table.column_names:
                raise ProtocolError(f"action verify: unknown column {p.column!r}")
            keep = g.might_contain(self._values(state, p.column, rows), state.ts[rows], p.direction)
            rows = rows[keep]
        state.candidates[name] = rows
        if isinstance(swf, IntervalSet):  # interval arrays: send the survivors' Eq. 1 intervals
            lo, hi = eq1_offsets(role, request.window)
            return {"before": int(before), "survivors": int(rows.size)}, [
                IntervalSet.around(state.ts[rows], lo, hi).intersection(swf).to_bytes()
            ]
        tags = swf.refresh(state.ts[rows], role)
        return {"before": int(before), "survivors": int(rows.size)}, [tags.to_bytes()]

    @_charged
    def collect(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Where each asked variable's candidates lie: their slices on the request's grid and
        the hashes of the asked columns, in one blob (:func:`dfs_cer.filters.points.pack_points`).
        With ``runs`` the candidates outside the slice runs in blob 0 are dropped first, for
        good."""
        request = Collect.parse(header)
        state = self.node.registry.get(request.query_id)
        inside = None
        if request.runs:
            if not blobs:
                raise ProtocolError("action collect: the slice runs blob is missing")
            runs = SliceRuns.from_bytes(blobs[0])
            if (runs.base, runs.quantum) != (request.base, request.quantum):
                raise ProtocolError("action collect: the slice runs are on another grid")
            inside = runs.to_time()
        out = []
        for g in request.gather:
            name = self.node.variable(state, g.variable, "collect")
            rows = state.candidates[name]
            if inside is not None:
                rows = rows[inside.contains(state.ts[rows])]
                state.candidates[name] = rows
            self.node.check()
            ts = state.ts[rows]
            if ts.size and not (
                int(ts.min()) >= request.base
                and (int(ts.max()) - request.base) // request.quantum < 2**62
            ):
                raise ProtocolError(
                    "action collect: the grid does not cover the rows (base after the earliest, "
                    "or slice ids beyond 2**62)"
                )
            slices = slice_ids(ts, request.base, request.quantum)
            hashes = []
            for column, kind in g.hashed:
                if column not in state.table.column_names:
                    raise ProtocolError(f"action collect: unknown column {column!r}")
                values = self._values(state, column, rows)
                hashes.append(value_hashes(values, _key_kind(kind), request.bits))
            stacked = np.vstack(hashes) if hashes else None
            out.append(Points(slices, stacked))
        return {}, [pack_points(out, request.bits)]


def _key_kind(kind: int) -> KeyKind:
    try:
        return KeyKind(kind)
    except ValueError as e:
        raise ProtocolError(f"action wjf: unknown key kind {kind!r}") from e
