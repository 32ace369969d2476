"""What every family of storage node actions shares: the node (its store, query states,
work slots and limits) and the helpers over a query's rows.

Each handler takes the decoded header and blobs and returns ``(header, blobs)`` (a DoAction) or
an Arrow table (a pull); payload sizes are reported by the server. Handlers raise DfsCerError
subclasses for bad requests; the server turns them into Flight errors and keeps serving.
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

from dfs_cer.errors import SNAPSHOT_BUSY, ProtocolError, StorageError
from dfs_cer.events.time import time_ints
from dfs_cer.filters import IntervalSet, ShrinkingWindowFilter
from dfs_cer.filters.points import SliceRuns
from dfs_cer.query import Analysis
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import MAX_HALO, TIS_FORMATS
from dfs_cer.transport.replies import Layout
from dfs_cer.work import Work
from storage_node.rows import take
from storage_node.state import QueryState, SnapshotGate, StateRegistry
from storage_node.store import ShardStore

Reply = tuple[dict[str, Any], list[bytes]]
T = TypeVar("T")


def int_times(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(time_ints(col), np.int64)


def ipc_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def inside(
    table: pa.Table, ts: np.ndarray, ranges: np.ndarray, work: Work | None = None
) -> tuple[pa.Table, np.ndarray]:
    """Rows of a time-sorted table inside any of the inclusive ``ranges`` (a copy charged to
    ``work``)."""
    lo = np.searchsorted(ts, ranges[:, 0], side="left")
    hi = np.searchsorted(ts, ranges[:, 1], side="right")
    keep = np.zeros(ts.size + 1, np.int64)
    np.add.at(keep, lo, 1)
    np.add.at(keep, hi, -1)
    rows = np.nonzero(np.cumsum(keep[:-1]) > 0)[0]
    return take(table, rows, work), ts[rows]


def snapshot_of(header: dict[str, Any]) -> int | None:
    """The table snapshot a request pins (an integer), or None."""
    raw = header.get("snapshot")
    if raw is None:
        return None
    if type(raw) is not int or not -(2**63) <= raw < 2**63:
        raise ProtocolError("snapshot must be an Iceberg snapshot id (a 64-bit integer)")
    return raw


class Node:
    """One storage node's shared context: its store, query states, snapshot gate, work slots and
    limits (every family of actions holds it)."""

    def __init__(
        self,
        store: ShardStore,
        registry: StateRegistry,
        max_blob: int = 256 * 1024**2,
        betas: dict[str, float] | None = None,
        cpu_budget: float = 5.0,
        work_threads: int = 0,
        filter_cost_limit: int = 2_000_000_000,
        halo_limit: int = MAX_HALO,
    ) -> None:
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
        #: the work of the call this thread runs (read by the row filters of ``whole``)
        self.calls = threading.local()
        #: the most rows a halo request may reach (reported at open)
        self.halo_limit = halo_limit
        #: rows executors' slice pulls looked at (``stats``: ``slice_rows``)
        self.slice_rows = 0
        self._slice_lock = threading.Lock()

    def sliced(self, rows: int) -> None:
        """Count the rows a slice pull looked at: the rows of its time range."""
        with self._slice_lock:
            self.slice_rows += int(rows)

    def check(self) -> None:
        """Stop here when the query of this thread's call is past its deadline or closed."""
        work = self.current()
        if work is not None:
            work.check()

    def current(self) -> Work | None:
        """The work of the call this thread runs (None outside a query's call)."""
        work: Work | None = getattr(self.calls, "work", None)
        return work

    @contextlib.contextmanager
    def working(
        self, query_id: str, deadline: float | None = None, slot: bool = True
    ) -> Iterator[Work]:
        """One call's share of a query's work (its deadline, cancellation and memory charges,
        given back when the call ends); with ``slot``, the call waits for a work slot first,
        checking its deadline and cancellation while it waits. A call ends at the node's idle TTL
        at the latest, whatever lease the client sent (or none): its query's state is dropped
        then."""
        call = self.registry.work(query_id, self.where, deadline).call()
        call.bound(
            self.registry.ttl,
            f"storage.state_ttl_seconds={self.registry.ttl:g}: one call of a query runs "
            "no longer than its state stays without calls); raise the setting",
        )
        taken = False
        try:
            while slot and not taken:
                call.check()
                taken = self.slots.acquire(timeout=0.05)
            call.check()
            self.calls.work = call
            yield call
        finally:
            self.calls.work = None
            if taken:
                self.slots.release()
            call.settle()

    def local(self, analysis: Analysis, layout: bool = True) -> bool:
        """Does this node hold every row of each PARTITION BY group it holds any row of? True for
        the only node of a shard set, or a shard set type-partitioned by a PARTITION BY column,
        when the query may rely on the shard set's layout (``layout``: see :meth:`relies`)."""
        manifest = self.store.manifest
        if not layout:
            return False
        if manifest.get("nodes") == 1:
            return True
        column = manifest.get("type_column")
        return (
            manifest.get("partitioning") == "type"
            and column is not None
            and column in analysis.query.recognize.partition_by
        )

    def layout(self) -> dict[str, Any]:
        """What this node says of its shard set's place among the nodes of the log (the compute
        node checks the nodes of a query against each other): its index and their count, how
        rows were placed (and by which column), and the shard set's identity."""
        manifest = self.store.manifest
        out = {
            "node": manifest.get("node"),
            "nodes": manifest.get("nodes"),
            "partitioning": manifest.get("partitioning"),
            "key": manifest.get("type_column"),
            "shard_set": manifest.get("shard_set"),
        }
        return Layout.lean({k: v for k, v in out.items() if v is not None})

    def relies(self, header: dict[str, Any], action: str = "open") -> bool:
        """May a query rely on this node's shard set layout (whole PARTITION BY groups, whole time
        windows, every copy of an event here)? Only when the query runs on as many nodes as the
        shard set has (``nodes`` in the request: two shard sets written separately, each "node
        0 of 1", do not hold whole groups together), and its compute node has not found the
        nodes' claims in conflict (``own_layout: false``). A request naming neither (an older
        compute node) relies on it as before."""
        nodes, own = header.get("nodes"), header.get("own_layout", True)
        if nodes is not None and (type(nodes) is not int or not 1 <= nodes <= 1_000_000):
            raise ProtocolError(f"action {action}: nodes must be a count of storage nodes")
        if not isinstance(own, bool):
            raise ProtocolError(f"action {action}: own_layout must be true or false")
        return own and (nodes is None or nodes == self.store.manifest.get("nodes"))

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
            raise StorageError(
                f"this storage node serves running queries on another snapshot of the table "
                f"({self.store.snapshot_id()}; {open_now} running); the query asked for snapshot "
                f"{snapshot}: run it again when they end",
                code=SNAPSHOT_BUSY,
            )

    def admitted(self, kind: str, read: Callable[[], T]) -> T:
        """A read outside an opened query passes admission like an open: it waits for room for
        the shard set's size (or is refused). A pull's copies are then charged to the work of
        its call as it makes them; another read holds the reservation while it runs, its copies
        charged to it first."""
        import uuid

        estimate = self.store.estimate_bytes()
        name = f"{kind}-{uuid.uuid4().hex[:8]}"
        self.registry.reserve(name, estimate)
        if self.current() is not None:
            self.registry.release(estimate)
            return read()
        try:
            with self.working(name, slot=False) as work:
                work.prepay(estimate)
                return read()
        finally:
            self.registry.release(estimate)
            self.registry.end_work(name)

    def same_generation(self, state: QueryState, kind: str) -> None:
        if state.generation != self.store.generation:
            raise StorageError(
                f"{kind}: files were appended to the shard set (or another snapshot of the table "
                f"was loaded) while query {state.query_id} ran; run the query again"
            )

    def whole(
        self, ranges: np.ndarray | None, where: Any = None, window: tuple[int, int] | None = None
    ) -> pa.Table:
        """Every row of the shard set, by time (inside ``ranges`` and passing the input filter
        ``where`` when given; with ``window``, an executor's slice ``(lo, hi)``: only the rows
        of that inclusive time range, selected before anything else looks at a row)."""
        work = self.current()
        if window is None:
            table = self.store.sorted_rows(work)
        else:
            table = self.store.rows_between(*window, work=work)
            self.sliced(table.num_rows)
        if where is not None:
            table = take(table, matching_rows(table, where, work), work)
        if ranges is None:
            return table
        return inside(table, int_times(table.column(self.store.time_column)), ranges, work)[0]

    def variable(self, state: QueryState, header: dict[str, Any] | str, action: str) -> str:
        name = header if isinstance(header, str) else field(header, "variable", str, action)
        if name not in state.candidates:
            raise ProtocolError(
                f"action {action}: {name!r} is not a variable with candidates in this query"
            )
        return name


class Family:
    """One family of actions (a module of this package) over the node's shared context."""

    def __init__(self, node: Node) -> None:
        self.node = node


#: rows a filter is evaluated over between two checks of the query's work
FILTER_CHUNK = 65536


def matching_rows(table: pa.Table, filt: Any, work: Work | None = None) -> np.ndarray:
    """Indices of ``table``'s rows passing a dataset filter expression, in order; with a query's
    ``work``, in chunks of rows with its deadline and cancellation checked between them."""
    if work is not None and table.num_rows > FILTER_CHUNK:
        parts = []
        for start in range(0, table.num_rows, FILTER_CHUNK):
            work.check()
            parts.append(start + matching_rows(table.slice(start, FILTER_CHUNK), filt))
        return np.concatenate(parts)
    indexed = table.append_column("__row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    col = ds.dataset(indexed).to_table(filter=filt, columns=["__row"]).column("__row")
    # the scanner's batches are each in order: a merge of sorted runs (timsort), not a full sort
    return np.sort(np.asarray(col.to_numpy(), np.int64), kind="stable")


def table_blob(blobs: list[bytes], kind: str, what: str) -> pa.Table:
    """The Arrow IPC stream in the first blob of a pull, or a clear protocol error."""
    if not blobs:
        raise ProtocolError(f"{kind}: the {what} blob is missing")
    try:
        return pa.ipc.open_stream(pa.py_buffer(blobs[0])).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ProtocolError(f"{kind}: the {what} is not an Arrow stream ({exc})") from None


def tis_format_of(header: dict[str, Any], action: str) -> str:
    tis_format = header.get("tis", "swf")
    if tis_format not in TIS_FORMATS:
        raise ProtocolError(
            f"action {action}: tis must be one of {', '.join(TIS_FORMATS)}, got {tis_format!r}"
        )
    return str(tis_format)


def load_tis(tis_format: str, blob: bytes) -> ShrinkingWindowFilter | IntervalSet:
    """The interval set a request sends: an SWF, exact intervals, or slice runs (as the exact
    time intervals they cover)."""
    if tis_format == "slices":
        return SliceRuns.from_bytes(blob).to_time()
    return (
        IntervalSet.from_bytes(blob)
        if tis_format == "intervals"
        else ShrinkingWindowFilter.from_bytes(blob)
    )


def ship(state: QueryState, rows: np.ndarray) -> None:
    """Remember the rows pulls send (as indices into the node's rows by time), for a later
    ``pull_halo`` with ``skip_shipped``; only queries with PREV/NEXT keep row ids."""
    if state.row_ids is not None:
        ids = state.row_ids[rows]
        state.shipped = ids if state.shipped is None else np.union1d(state.shipped, ids)


def union_rows(state: QueryState) -> np.ndarray:
    """The rows some variable holds as a candidate, ascending: a mask over the table (linear; a
    sort of the concatenated lists took a second at millions of candidates)."""
    mask = np.zeros(state.table.num_rows, bool)
    for rows in state.candidates.values():
        mask[rows] = True
    return np.flatnonzero(mask)


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
            raise StorageError(
                f"storage.calibration_file {calibration_file}: cannot read its beta ({exc}); "
                "run dfs-cer calibrate --out FILE"
            ) from None
    return out
