"""What every pull strategy returns: the pulled events and a trace of the round trips."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.config import MAX_SECONDS, Config, StrategyConfig
from dfs_cer.errors import (
    AdmissionError,
    ConfigError,
    DfsCerError,
    QueryValidationError,
)
from dfs_cer.events.schemas import concat, unify
from dfs_cer.filters import IntervalSet
from dfs_cer.query import Analysis, Query
from dfs_cer.query.names import UNKNOWN_TABLE
from dfs_cer.transport.actions import FINAL_PULLS
from dfs_cer.transport.client import NodeTimeoutError, StorageClient
from dfs_cer.transport.envelope import primer
from dfs_cer.transport.protocol import LEASE_GRACE_SECONDS, MAX_HALO, Close, Release, Reserve
from dfs_cer.transport.replies import (
    CloseReply,
    OpenReply,
    ReleaseReply,
    Reply,
    ReserveReply,
    SchemaReply,
)

T = TypeVar("T")
R = TypeVar("R")
P = TypeVar("P", bound=Reply)


@dataclass
class Round:
    action: str
    bytes_to_sn: int
    bytes_to_cn: int
    events: int
    seconds: float
    decision: dict[str, Any] | None = None
    note: str | None = None
    #: the slowest node's own time on the round, as the replies say (the rest of ``seconds`` is
    #: the wire, the waiting and the compute node reading the replies); None: not said
    node_seconds: float | None = None
    #: the compute node's time before the round: what it computed since the previous round
    #: ended (pruning, the next filter), or since the query began (planning, connecting)
    cn_seconds: float | None = None

    @property
    def wire_seconds(self) -> float | None:
        """The round's time outside the slowest node: the wire and the waiting."""
        return None if self.node_seconds is None else max(0.0, self.seconds - self.node_seconds)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if v is not None}
        if self.wire_seconds is not None:
            out["wire_seconds"] = self.wire_seconds
        return out


@dataclass
class Matching:
    """The compute node's matching step: engine, matches, seconds and the matcher's peak working
    memory (the row-pattern VM's thread lists, dedup tables and paths; 0 when not measured)."""

    engine: str
    matches: int
    seconds: float
    work_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Trace:
    strategy: str
    rounds: list[Round] = field(default_factory=list)
    fallback: str | None = None
    matching: Matching | None = None
    #: what went wrong without spoiling the result (e.g. a node that did not confirm close)
    warnings: list[str] = field(default_factory=list)
    #: what the user should know about the run that is not wrong (e.g. the nodes' layout was not
    #: relied on, the table's name was not checked)
    notes: list[str] = field(default_factory=list)
    #: how the rows for navigation were pulled ("halo around intervals", "halo around candidates",
    #: "node-side matching", ...; None when the query does not navigate physically)
    navigation: str | None = None
    #: rows received only for PREV/NEXT to read (never matched)
    halo_rows: int = 0
    #: the row-local condition the storage nodes applied to the table before anything else
    #: (``FROM (SELECT * FROM t WHERE ...) MATCH_RECOGNIZE``); None: every row
    input_filter: str | None = None
    #: what the pull was for in a statement of several pulls ("clause 2", "table 't'")
    source: str | None = None
    #: the table snapshot every storage node served (tables served in place; None: shard sets)
    snapshot: int | None = None
    #: when the query's session began (``time.perf_counter()``; not in :meth:`to_dict`): what
    #: came before it in the process is planning
    began: float | None = None

    @property
    def bytes_to_cn(self) -> int:
        return sum(r.bytes_to_cn for r in self.rounds)

    @property
    def bytes_to_sn(self) -> int:
        return sum(r.bytes_to_sn for r in self.rounds)

    @property
    def events_received(self) -> int:
        return sum(r.events for r in self.rounds)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "rounds": [r.to_dict() for r in self.rounds],
            "bytes_to_cn": self.bytes_to_cn,
            "bytes_to_sn": self.bytes_to_sn,
            "events_received": self.events_received,
            "seconds": self.seconds,
            "fallback": self.fallback,
            "matching": None if self.matching is None else self.matching.to_dict(),
            "warnings": self.warnings,
            "notes": self.notes,
            "navigation": self.navigation,
            "halo_rows": self.halo_rows,
            "input_filter": self.input_filter,
            "source": self.source,
            "snapshot": self.snapshot,
        }


@dataclass
class PullResult:
    """Events pulled from every storage node (sorted by time, ties by node and row) and the trace.

    ``segments`` are the start times of the final intervals when the pull kept only rows inside
    them and the pattern is contiguous: matches must not cross a gap between them.
    """

    events: pa.Table
    trace: Trace
    analysis: Analysis
    segments: np.ndarray | None = None
    #: the MATCH_RECOGNIZE relation when the storage nodes matched (node-side matching; then
    #: ``events`` is empty and only the outer query is left to run)
    relation: pa.Table | None = None
    #: matches the storage nodes found (node-side matching)
    node_matches: int = 0
    #: the final pull left for executors to take (``pull(..., defer=True)``); None: pulled here
    deferred: DeferredPull | None = None
    #: the settings the pull ran with (its matcher section is what ``match_pulled`` uses by
    #: default); None: a result built by hand
    config: Config | None = None
    #: the query's deadline (``time.monotonic()``): what is left of it bounds the SQL around
    #: the clause (None: ``strategy.query_timeout_seconds`` from when that runs)
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class FinalPull:
    """A final pull not made yet: its kind, ticket header and blobs (one left for executors to
    take, or one a group of queries makes together); ``cover``: the exact closed intervals of its
    interval set when the compute node knows them (each executor's slice then carries only
    their part inside its time range)."""

    kind: str
    header: dict[str, Any]
    blobs: list[bytes]
    cover: IntervalSet | None = None


class DeferredPull:
    """A final pull left open on the storage nodes for executors to take in time slices: the
    query's id, the pull's kind, header and blobs, where to reach the nodes, and the time span of
    their rows. :meth:`close` ends the query on every node (call it when the executors are done,
    whatever happened); :meth:`account` adds the executors' transfers to the trace.

    ``cover``: the pull's interval set as exact closed intervals (given, or read from an
    ``intervals`` blob): each executor's request carries only its slice's part of it (see
    :func:`dfs_cer.strategies.slices.slice_request`)."""

    def __init__(
        self,
        session: Session,
        endpoints: list[str],
        token: str,
        kind: str,
        header: dict[str, Any],
        blobs: list[bytes],
        span: tuple[int, int] | None,
        config: StrategyConfig,
        cover: IntervalSet | None = None,
    ) -> None:
        if cover is None and header.get("tis") == "intervals" and blobs:
            cover = IntervalSet.from_bytes(blobs[0])
        self.session, self.endpoints, self.kind, self.header, self.blobs = (
            session,
            endpoints,
            kind,
            header,
            blobs,
        )
        self.cover = cover
        self.token = Secret(token)
        self.span = span
        self.query_id = session.query_id
        self.call_timeout = config.call_timeout_seconds
        self.compression = config.transfer_compression

    def account(
        self, bytes_to_sn: int, bytes_to_cn: int, events: int, seconds: float, calls: int
    ) -> None:
        self.session.trace.rounds.append(
            Round(
                self.kind,
                bytes_to_sn,
                bytes_to_cn,
                events,
                seconds,
                None,
                f"taken by executors in {calls} time-slice calls",
            )
        )

    def close(self) -> list[str]:
        warnings = self.session.close()
        self.session.close_connections()
        self.session.trace.warnings.extend(warnings)
        return warnings


class Secret:
    """A token that does not show itself in reprs, logs or Spark's plan strings."""

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


class Coordinator(Protocol):
    """Queries run together (:mod:`dfs_cer.strategies.multi`): the open replies fetched for the
    group, round trips several queries share, and their final pulls made as one."""

    def opened(self, session: Session) -> list[tuple[OpenReply, list[bytes]]]: ...

    def shared(self, session: Session, key: tuple[object, ...], call: Callable[[], T]) -> T: ...

    def request(
        self, session: Session, kind: str, header: dict[str, Any], blobs: list[bytes]
    ) -> pa.Table: ...


def check_limits(config: StrategyConfig, timeout: float | None) -> float:
    """The query's seconds (``timeout``, else ``query_timeout_seconds``), once checked with the
    halo limit: a clear error for a timeout or limit that cannot be."""
    seconds = config.query_timeout_seconds if timeout is None else timeout
    if not 0 < seconds <= MAX_SECONDS:
        raise ConfigError(
            f"the query timeout must be a positive number of seconds, at most {MAX_SECONDS:,}, "
            f"got {seconds}; pass e.g. --timeout 60"
        )
    if not 0 <= config.halo_limit <= MAX_HALO:
        raise ConfigError(
            f"strategy.halo_limit must be in 0..{MAX_HALO} (the protocol's halo limit), got "
            f"{config.halo_limit}; lower it or leave the default"
        )
    return seconds


#: seconds a close waits for its threads beyond the calls' own ``close_timeout``
CLOSE_GRACE_SECONDS = 1.0


class Session:
    """One query's conversation with all storage nodes; calls run on every node in parallel.

    ``deadline`` (``time.monotonic()`` seconds) bounds every call (with the clients' per-call
    timeout); a failing call is reported with its round, node and action; :meth:`close`
    reaches every node, concurrently and briefly, whatever happened before."""

    def __init__(
        self,
        clients: Sequence[StorageClient],
        trace: Trace,
        event_key: Sequence[str] | None = None,
        dedup: bool = True,
        *,
        deadline: float | None = None,
        close_timeout: float = 2.0,
        admission_wait: float = 60.0,
        query_id: str | None = None,
        time_ranges: Sequence[tuple[int, int]] | None = None,
        input_filter: str | None = None,
        snapshot: int | None = None,
        group: Coordinator | None = None,
        defer: bool = False,
        defer_min_rows: int = 0,
        halo_limit: int = MAX_HALO,
    ) -> None:
        self.clients = list(clients)
        self.trace = trace
        self.deadline = deadline
        self.close_timeout = close_timeout
        self.admission_wait = admission_wait
        for c in self.clients:
            c.deadline = deadline
        # 64 random bits: unique among the queries a node sees, in 16 bytes of every message
        self.query_id = query_id or uuid.uuid4().hex[:16]
        #: columns identifying an event; None: the storage nodes' manifests say (--event-key)
        self.event_key = None if event_key is None else tuple(event_key)
        self.dedup = dedup
        #: restrict the query to these inclusive time ranges (an incremental re-run)
        self.time_ranges = (
            None if time_ranges is None else [(int(a), int(b)) for a, b in time_ranges]
        )
        #: a row-local condition every node applies to its rows first (SQL text; None: none)
        self.input_filter = input_filter
        #: several queries run together (strategies.multi): the coordinator that holds the open
        #: replies fetched for the whole group and turns final pulls into one shared pull
        self.group = group
        #: executors take the final pull themselves (see :class:`DeferredPull`): a final pull
        #: that needs no halo rows is recorded here instead of run, when ``defer`` is on
        self.defer = defer
        self.deferred: FinalPull | None = None
        self.analysis: Analysis | None = None  # the bound query, once opened (open_query)
        #: copies of an event (same time and event key) may lie on several nodes, each keeping
        #: its own: a candidate pull brings every candidate's copies from every node
        self.split_copies = False
        self.time_span: tuple[int, int] | None = None  # the nodes' rows' first and last time
        self.rows_total = 0  # rows the nodes scanned at open
        self.defer_min_rows = (
            defer_min_rows  # smaller inputs are pulled by the driver even when deferring
        )
        #: the table snapshot the query reads on every node (tables served in place): the one
        #: given, else the current one the nodes report when admitting the query
        self.snapshot = None if snapshot is None else int(snapshot)
        #: the most rows PREV/NEXT may reach beyond the pulled rows (``strategy.halo_limit``)
        self.halo_limit = halo_limit
        #: node-side work that stopped at a bound (a match limit, a step budget, memory) and
        #: what was done instead: named first in the trace's fallback (:func:`name_stops`)
        self.stops: list[str] = []
        self._pool = ThreadPoolExecutor(max(1, len(self.clients)))
        self._closed = False
        #: when the compute node last stopped waiting for the nodes (a round's ``cn_seconds``)
        self._idle_since = time.perf_counter()
        if trace.began is None:
            trace.began = self._idle_since
        #: nodes that did not answer a call in time: closed in the background, not waited for
        self._hung: set[int] = set()

    @property
    def opened(self) -> list[tuple[OpenReply, list[bytes]]] | None:
        """The open replies fetched for the whole group (a query run in a group), else None."""
        return None if self.group is None else self.group.opened(self)

    @classmethod
    def connect(
        cls,
        endpoints: Sequence[str],
        token: str,
        trace: Trace,
        config: StrategyConfig | None = None,
        timeout: float | None = None,
        event_key: Sequence[str] | None = None,
        dedup: bool = True,
        *,
        deadline: float | None = None,
        **state: Any,
    ) -> Session:
        """A session over new connections to ``endpoints``: each call gets the config's per-call
        timeout, the whole query ``timeout`` seconds (default ``query_timeout_seconds``) unless
        a ``deadline`` is given (one shared with other sessions); ``state``: the other keywords
        of the constructor."""
        config = config or StrategyConfig()
        seconds = check_limits(config, timeout)
        clients = [
            StorageClient(
                e,
                token,
                timeout=config.call_timeout_seconds,
                compression=config.transfer_compression,
            )
            for e in endpoints
        ]
        return cls(
            clients,
            trace,
            event_key,
            dedup,
            deadline=time.monotonic() + seconds if deadline is None else deadline,
            close_timeout=config.close_timeout_seconds,
            admission_wait=config.admission_wait_seconds,
            halo_limit=config.halo_limit,
            **state,
        )

    def finish(self, work: Callable[[], R], trace: Callable[[R], Trace]) -> R:
        """Run ``work`` and close the query on every node whatever happens. A failure is
        reported as it happened (a close that fails too does not replace it); when the work
        completed and only some close failed, the result is kept and ``trace(result)``'s
        warnings say so. The connections are closed."""
        try:
            try:
                with interrupt.interruptible():
                    result = work()
            except BaseException:
                self.close()  # best effort: the error that stopped the query is the one reported
                raise
            trace(result).warnings.extend(self.close())
            return result
        finally:
            self.close_connections()

    def close_connections(self) -> None:
        self._pool.shutdown(wait=False)
        for c in self.clients:
            c.close()

    def all(
        self,
        name: str,
        fn: Callable[[StorageClient], T],
        events: Callable[[list[T]], int] | None = None,
        decision: dict[str, Any] | None = None,
        note: str | None = None,
        only: Sequence[int] | None = None,
    ) -> list[T]:
        """``fn`` on every node (``only``: on those nodes, by index), in parallel, as one round."""
        interrupt.check()  # Ctrl-C: no new round
        clients = self.clients if only is None else [self.clients[i] for i in only]
        marks = [len(c.transfers) for c in clients]
        start = time.perf_counter()
        before = start - self._idle_since

        def guarded(c: StorageClient) -> T:
            interrupt.check()  # Ctrl-C: a call not made yet is not made
            try:
                return fn(c)
            except NodeTimeoutError:
                self._hung.add(id(c))  # close does not wait for it again
                raise

        try:
            results = list(self._pool.map(guarded, clients))
        except DfsCerError as exc:  # name the round: the node and the action are in the message
            if exc.code == UNKNOWN_TABLE:  # the query names another table than the nodes' log
                raise QueryValidationError(
                    str(exc).split(f"{QueryValidationError.__name__}: ", 1)[-1], code=UNKNOWN_TABLE
                ) from None
            exc.args = (
                f"round {len(self.trace.rounds) + 1} ({name}): {exc.args[0] if exc.args else exc}",
                *exc.args[1:],
            )
            raise
        self._idle_since = time.perf_counter()
        seconds = self._idle_since - start
        new = [t for c, m in zip(clients, marks, strict=True) for t in c.transfers[m:]]
        said = [t.node_seconds for t in new if t.node_seconds is not None]
        self.trace.rounds.append(
            Round(
                name,
                sum(t.bytes_to_sn for t in new),
                sum(t.bytes_to_cn for t in new),
                events(results) if events else 0,
                seconds,
                decision,
                note,
                node_seconds=min(max(said), seconds) if said else None,
                cn_seconds=before,
            )
        )
        return results

    def action(
        self,
        reply: type[P],
        header: dict[str, Any],
        blobs: list[bytes] | None = None,
        per_node: Callable[[int], tuple[dict[str, Any], list[bytes]]] | None = None,
        share: tuple[object, ...] | None = None,
        **round_info: Any,
    ) -> list[tuple[P, list[bytes]]]:
        """Call ``reply.ACTION`` on every node; each node's reply parsed into ``reply``.
        ``share``: a key saying the replies depend only on it (not on this query), so queries
        run together make the round trip once."""
        name = reply.ACTION
        if share is not None and self.group is not None:
            return self.group.shared(
                self,
                (name, *share),
                lambda: self.action(reply, header, blobs, per_node, **round_info),
            )
        lease: dict[str, Any] = {}
        if (
            name == "open" and self.deadline is not None
        ):  # the nodes drop the state by themselves after it
            lease["lease_seconds"] = round(max(1.0, self.deadline - time.monotonic()), 3)
        if name == "open" and self.snapshot is not None:  # one snapshot on every node
            lease["snapshot"] = self.snapshot
        body = {"query_id": self.query_id, **header, **lease}
        index = {id(c): i for i, c in enumerate(self.clients)}

        def call(c: StorageClient) -> tuple[P, list[bytes]]:
            if per_node is not None:
                h, b = per_node(index[id(c)])
                return c.call(reply, {"query_id": self.query_id, **h, **lease}, b)
            return c.call(reply, body, blobs)

        return self.all(name, call, **round_info)

    def pull(
        self,
        kind: str,
        header: dict[str, Any] | None = None,
        blobs: list[bytes] | None = None,
        shared: bool = True,
        cover: Callable[[], IntervalSet] | None = None,
        **round_info: Any,
    ) -> pa.Table:
        """``kind`` from every node, concatenated; a final pull of a query run in a group is
        shared with the group's others unless ``shared`` is False (e.g. a pull with halo rows).
        ``cover``: the pull's interval set as exact closed intervals, asked for only when the
        pull is left to executors (see :class:`DeferredPull`)."""
        if self.group is not None and kind in FINAL_PULLS and shared:
            return self.group.request(self, kind, header or {}, blobs or [])
        if self.defer and kind in FINAL_PULLS and self.deferrable(kind, header or {}):
            exact = cover() if cover is not None else None
            self.deferred = FinalPull(kind, dict(header or {}), list(blobs or []), exact)
            return pa.table({})
        body = {"query_id": self.query_id, "kind": kind, **(header or {})}
        tables = self.all(
            kind,
            lambda c: c.pull(body, blobs),
            events=lambda ts: sum(t.num_rows for t in ts),
            **round_info,
        )
        return self.concat(tables)

    def pull_each(
        self, kind: str, requests: dict[int, tuple[dict[str, Any], list[bytes]]], **round_info: Any
    ) -> pa.Table:
        """``kind`` from the nodes in ``requests`` (node index -> its own header and blobs),
        concatenated in node order; the other nodes are not called."""
        nodes = sorted(requests)
        if not nodes:
            return pa.table({})

        def one(c: StorageClient) -> pa.Table:
            header, blobs = requests[index[id(c)]]
            return c.pull({"query_id": self.query_id, "kind": kind, **header}, blobs)

        index = {id(c): i for i, c in enumerate(self.clients)}
        tables = self.all(
            kind, one, events=lambda ts: sum(t.num_rows for t in ts), only=nodes, **round_info
        )
        return self.concat(tables, nodes)

    def deferrable(self, kind: str, header: dict[str, Any]) -> bool:
        """May executors take this final pull in time slices? Every row (``pull_all``) always;
        other pulls when no halo rows must follow them (no PREV/NEXT)."""
        if "halo" in header or self.analysis is None or self.rows_total < self.defer_min_rows:
            return False
        return kind == "pull_all" or not (
            self.analysis.prev_reach or self.analysis.next_reach or self.split_copies
        )

    def expect_rows(self, rows: float) -> None:
        """The final pull should bring about ``rows`` rows (an estimate: the share of the nodes'
        time span its interval set covers): fewer than ``defer_min_rows`` are pulled here, not
        left to executors (starting their tasks, each pulling a slice, costs seconds; matching a
        few rows here costs milliseconds)."""
        if self.defer and rows < self.defer_min_rows:
            self.defer = False
            self.trace.notes.append(
                f"the final pull (~{rows:,.0f} rows expected) is pulled and matched here, not by "
                f"executors (fewer than {self.defer_min_rows:,})"
            )

    def prime(self, schema: pa.Schema) -> None:
        """The rows' schema is known: small compressed pulls of it travel primed with it."""
        primed = primer(schema)
        for c in self.clients:
            c.primer = primed

    def same_schemas(self, schemas: Sequence[pa.Schema]) -> pa.Schema:
        """The one schema of every node's rows (``schemas``, in node order): schemas that differ
        only in nullability or text width unify; any other difference (e.g. a time zone on one
        node and plain timestamps on another) is a clear error naming the column, its two types
        and two nodes (:mod:`dfs_cer.events.schemas`)."""
        return unify(schemas, [c.endpoint for c in self.clients])

    def concat(self, tables: Sequence[pa.Table], nodes: Sequence[int] | None = None) -> pa.Table:
        """Tables from the nodes (``nodes``: their indices; default every node, in order) as one,
        under their unified schema (:meth:`same_schemas`)."""
        names = [self.clients[i].endpoint for i in (range(len(tables)) if nodes is None else nodes)]
        return concat(tables, names)

    @property
    def lease_end(self) -> float:
        """When the nodes drop this query's state by themselves (its deadline plus their grace)."""
        return (self.deadline or time.monotonic()) + LEASE_GRACE_SECONDS

    def schemas(self) -> list[pa.Schema]:
        """Every node's exact schema (one round trip)."""
        return [
            pa.ipc.read_schema(pa.py_buffer(blobs[0])) for _, blobs in self.action(SchemaReply, {})
        ]

    def reserve(self) -> None:
        """Room for the query on every storage node or on none (never one while waiting for
        another): ask all at once; when some refuse, give back what was granted and ask again
        after a short, growing pause, keeping the query's place in each node's line, until
        ``admission_wait`` passes."""
        arrival = time.time()
        give_up = time.monotonic() + self.admission_wait
        pause = 0.02
        while True:
            replies = self.action(ReserveReply, Reserve(self.query_id, arrival).header())
            refused = [i for i, (h, _) in enumerate(replies) if not h.granted]
            if not refused:
                if (
                    self.snapshot is None
                ):  # a table's current snapshot (the latest commit any node saw)
                    pins = [
                        (h.snapshot_ms or 0, h.snapshot)
                        for h, _ in replies
                        if h.snapshot is not None
                    ]
                    self.snapshot = max(pins)[1] if pins else None
                return
            self.trace.rounds.pop()  # waiting is not a round trip of the strategy
            for i, c in enumerate(self.clients):
                if i not in refused:
                    c.call(ReleaseReply, Release(self.query_id).header())
            if time.monotonic() > give_up:
                raise self.no_room("reserve", refused)
            time.sleep(pause * (0.5 + random.random()))
            pause = min(0.5, pause * 2)

    def no_room(self, action: str, refused: Sequence[int]) -> DfsCerError:
        """The error of a query that found no room on nodes ``refused`` within its admission
        wait (``action``: the round that asked, reserve or open)."""
        from dfs_cer.transport.client import NodeRefusedError

        busy = ", ".join(self.clients[i].endpoint for i in refused)
        return NodeRefusedError(
            f"round {len(self.trace.rounds) + 1} ({action}): storage nodes {busy} had no room "
            f"for the query within {self.admission_wait:.0f} s (memory budget held by other "
            "queries); retry later, raise --memory-budget or strategy.admission_wait_seconds",
            AdmissionError.code,
        )

    def close(self) -> list[str]:
        """Close the query on every node, concurrently, each within ``close_timeout`` seconds
        (even past the deadline); returns what failed (the state expires on the node's TTL).

        Each close has a thread of its own, not the session's pool: after Ctrl-C or a failed
        call the pool's threads may still wait for a node's answer to the round (the close ends
        that work on the node, and the call with it), and a close must not queue behind them."""

        def one(c: StorageClient) -> str | None:
            if id(c) in self._hung:
                CLOSER.later(c, self.query_id, self.lease_end)
                return (
                    f"close: storage node {c.endpoint} did not answer in time; closed in the "
                    "background (it drops the query's state by itself "
                    f"{max(0.0, self.lease_end - time.monotonic()):.0f} s from now at the latest)"
                )
            c.deadline, c.timeout = None, self.close_timeout
            try:
                c.call(CloseReply, Close(self.query_id).header())
            except Exception as exc:
                CLOSER.later(c, self.query_id, self.lease_end)
                return (
                    f"close: {exc} (retried in the background; the node drops the query's state by "
                    "itself "
                    f"{max(0.0, self.lease_end - time.monotonic()):.0f} s from now at the latest)"
                )
            return None

        if self._closed:
            return []
        self._closed = True
        self._pool.shutdown(wait=False)
        out: list[str | None] = [None] * len(self.clients)

        def run(i: int) -> None:
            out[i] = one(self.clients[i])

        threads = [
            threading.Thread(target=run, args=(i,), name="dfs-cer close", daemon=True)
            for i in range(len(self.clients))
        ]
        for t in threads:
            t.start()
        give_up = time.monotonic() + self.close_timeout + CLOSE_GRACE_SECONDS
        for i, t in enumerate(threads):
            t.join(max(0.0, give_up - time.monotonic()))
            if t.is_alive():  # (the call's own deadline should have ended it)
                c = self.clients[i]
                CLOSER.later(c, self.query_id, self.lease_end)
                out[i] = (
                    f"close: storage node {c.endpoint} did not answer in time; closed in the "
                    "background"
                )
        return [w for w in out if w]


class _Closer:
    """Closes queries on nodes that did not confirm ``close`` in time (a hung node that may come
    back), retrying in a background thread until the node's own lease on the state ends."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, str, bytes | None, str, float]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def later(self, client: StorageClient, query_id: str, until: float) -> None:
        with self._lock:
            self._pending.append(
                (client.endpoint, client.token, client.tls_root_certs, query_id, until)
            )
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="dfs-cer-closer", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        pause = 0.25
        while True:
            time.sleep(pause)
            pause = min(2.0, pause * 2)
            with self._lock:
                work, self._pending = self._pending, []
            if not work:
                with self._lock:
                    if not self._pending:
                        self._thread = None
                        return
                continue
            left = []
            for endpoint, token, certs, qid, until in work:
                if time.monotonic() > until:
                    continue  # the node has dropped it by itself
                client = StorageClient(endpoint, token, timeout=1.0, tls_root_certs=certs)
                try:
                    client.call(CloseReply, Close(qid).header())
                except DfsCerError:
                    left.append((endpoint, token, certs, qid, until))
                finally:
                    client.close()
            with self._lock:
                self._pending.extend(left)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)


#: the process's background closer
CLOSER = _Closer()


def name_stops(session: Session, result: PullResult) -> PullResult:
    """``result`` with the node-side work that stopped at a bound (``session.stops``) named in
    its trace's fallback, before the strategy's own fallback if it has one."""
    if session.stops:
        own = [result.trace.fallback] if result.trace.fallback else []
        result.trace.fallback = "; ".join([*session.stops, *own])
    return result


def sort_events(table: pa.Table, time_column: str) -> pa.Table:
    """Deterministic order: time, then storage node order and row order (a stable sort)."""
    if table.num_rows == 0:
        return table
    return table.take(pa.compute.sort_indices(table, sort_keys=[(time_column, "ascending")]))


def resolve_query(query: Query | str) -> Query:
    from dfs_cer.query.validate import require_order_by

    if isinstance(query, str):
        from dfs_cer.query import parse

        query = parse(query)
    require_order_by(query, "storage nodes")
    if query.recognize.all_matches:  # what the CER engine refuses, it refuses before any round
        from dfs_cer.match.cer.rules import check_cer_query

        check_cer_query(query)
    return query
