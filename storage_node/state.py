"""Per-query state on a storage node: cached candidate rows, TTL eviction, memory admission.

The node holds, per query id, the rows that passed some variable's independent condition and,
per variable, the indices of its candidate rows (shrunk by each verification round). A query
that would push the held bytes past the budget waits (bounded) for others to finish, then is
refused; the node never scans itself out of memory. Abandoned state expires after the TTL.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import AdmissionError, UnknownQueryError, WorkMemoryError
from dfs_cer.work import MATCHING, Purpose, Work

#: a reservation not followed by an open is given back after this many seconds
RESERVATION_TTL = 30.0
#: a query that stopped asking for room leaves the line after this many seconds
WAITER_TTL = 2.0
#: queries that may wait for room at once, and how far back an arrival time may claim a place
MAX_WAITING = 1024
WAITER_AGE = 300.0
#: closed query ids remembered (so an open that arrives after its close keeps nothing)
MAX_TOMBSTONES = 65536


@dataclass
class QueryState:
    query_id: str
    analysis: Any
    table: pa.Table
    ts: np.ndarray
    candidates: dict[str, np.ndarray]
    reserved: int
    last_used: float = field(default_factory=time.monotonic)
    tis: bytes | None = None
    tis_format: str = "swf"  # "swf" or "intervals" (interval arrays: DFS-V2, Naive-DFS)
    #: push-pull: events of processed variables uploaded by the compute node (DoPut)
    uploads: dict[str, pa.Table] = field(default_factory=dict)
    #: an incremental re-run's time ranges ([[lo, hi], ...], inclusive): every pull stays inside
    ranges: np.ndarray | None = None
    #: False for the other queries of a group opened together: they share the first one's table
    owns_table: bool = True
    #: opened in a group: ``table`` is the whole shard set (so group pulls share row numbers)
    grouped: bool = False
    #: the group's table holds every row of the shard set (some query reads contiguous rows)
    whole: bool = False
    #: the shard set's generation at open (files appended since then make pulls refuse)
    generation: int = 0
    #: ``time.monotonic()`` after which the state is dropped whatever happens: the compute
    #: node's deadline for the query (plus a grace), so a query whose close never arrived
    #: (a hung or cut-off link) holds nothing past it; None: only the idle TTL
    expires: float | None = None
    #: how the node checked the query's PREV/NEXT conditions ("partitions", "time"; None: not)
    navigation: str | None = None
    #: the query may rely on the shard set's layout (storage_node.actions.base.Node.relies)
    layout: bool = True
    #: queries with PREV/NEXT: each row of ``table``'s index in the node's rows by time (inside
    #: ``ranges``), and the rows the final pull shipped, so halo replies skip what was sent
    row_ids: np.ndarray | None = None
    shipped: np.ndarray | None = None
    #: the row-local condition of the clause's input (``FROM (SELECT * FROM t WHERE ...)``): rows
    #: failing it do not exist for the query, in ``table`` and in every later read of the shards
    where: Any = None

    def size_in_bytes(self) -> int:
        table = self.table.nbytes + self.ts.nbytes if self.owns_table else 0
        return int(
            table
            + sum(c.nbytes for c in self.candidates.values())
            + sum(t.nbytes for t in self.uploads.values())
        )


class SnapshotGate:
    """Opens share the data a node has loaded; moving a table to another snapshot takes the node
    alone (no open is between choosing its snapshot and registering its state meanwhile)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writer)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def switching(self, until: float) -> Iterator[bool]:
        """Alone on the node (True), or not within ``until`` (``time.monotonic()``; False)."""
        with self._cond:
            got = self._cond.wait_for(lambda: not self._writer, max(0.0, until - time.monotonic()))
            if got:
                self._writer = True
                got = self._cond.wait_for(
                    lambda: self._readers == 0, max(0.0, until - time.monotonic())
                )
                if not got:
                    self._writer = False
                    self._cond.notify_all()
        try:
            yield got
        finally:
            if got:
                with self._cond:
                    self._writer = False
                    self._cond.notify_all()


class StateRegistry:
    def __init__(self, budget: int, ttl: float, wait: float, query_work: int = 0) -> None:
        self.budget = budget
        #: the most bytes one query's work may hold at once (0: whatever the budget has free)
        self.query_work = query_work
        #: bytes each query's work holds now
        self._work_of: dict[str, int] = {}
        self.ttl = ttl
        self.wait = wait
        self._states: dict[str, QueryState] = {}
        self._reserved = 0
        self._lock = threading.Condition()
        self.evicted = 0
        self.refused = 0
        #: queries granted room (a reservation or a scan's bytes)
        self.admitted = 0
        #: reservations made by ``try_reserve`` for queries not opened yet: id -> (bytes, expiry)
        self._held: dict[str, tuple[int, float]] = {}
        #: queries asking for room, by arrival: id -> (arrival, last asked); FIFO order of grants
        self._waiting: dict[str, tuple[float, float]] = {}
        #: query ids closed by their compute node, in closing order: a call of that query still
        #: in flight (a hung node that resumes) must not leave state behind once it completes
        self._closed: OrderedDict[str, None] = OrderedDict()
        #: each query's work (deadline, cancellation, memory charges) while it is opening or open:
        #: id -> (work, when created)
        self._works: dict[str, tuple[Work, float]] = {}
        #: per open query, the room its admission promised beyond what its state holds (its
        #: reservation less its state's size): later admissions leave it free, so the copies the
        #: query makes next (pulled rows, replies) find room however many queries came after it
        self._headroom: dict[str, int] = {}
        #: bytes each query's work holds now (all purposes), drawn from its headroom first
        self._charged: dict[str, int] = {}
        #: bytes charged by the work of queries (inside ``_reserved``) and the most at once
        self.work_bytes = 0
        self.work_peak = 0
        #: calls stopped at a deadline or a close, and refused for memory
        self.stopped = 0

    def _refuse_closed(self, query_id: str) -> None:
        if query_id in self._closed:
            raise UnknownQueryError(
                f"query {query_id} was closed by its compute node (it gave up on this call); "
                "nothing is kept"
            )

    def _promised(self) -> int:
        """Room promised to open queries and not taken yet (see ``_headroom``)."""
        return sum(max(0, room - self._charged.get(q, 0)) for q, room in self._headroom.items())

    @property
    def held(self) -> int:
        with self._lock:
            return self._reserved

    def sweep(self) -> None:
        now = time.monotonic()
        with self._lock:
            for qid in [
                q
                for q, s in self._states.items()
                if now - s.last_used > self.ttl or (s.expires is not None and now > s.expires)
            ]:
                self._drop(
                    qid, "it expired (no call within storage.state_ttl_seconds, or past its lease)"
                )
                self.evicted += 1
            for qid in [
                q
                for q, (w, made) in self._works.items()
                if q not in self._states
                and q not in self._held
                and (
                    w.cancelled
                    or now - made > self.ttl
                    or (w.deadline is not None and now > w.deadline + 60.0)
                )
            ]:
                self._works.pop(qid)[0].cancel("it expired")
            self._expire(now)
            self._lock.notify_all()

    def _expire(self, now: float) -> None:
        for qid in [q for q, (_, expiry) in self._held.items() if expiry < now]:
            self._reserved -= self._held.pop(qid)[0]
            self.evicted += 1
        for qid in [q for q, (_, seen) in self._waiting.items() if now - seen > WAITER_TTL]:
            del self._waiting[qid]

    def try_reserve(self, query_id: str, estimate: int, arrival: float) -> bool:
        """Reserve ``estimate`` bytes for a query about to open, without waiting: True when
        granted. Grants go in arrival order: while an earlier query that holds no reservation
        here keeps asking, a later one is not granted (the compute node asks every node and
        keeps reservations only when all grant, so a query never holds one node while waiting
        for another, and the earliest query is served first everywhere)."""
        if estimate > self.budget:
            self.refused += 1
            raise AdmissionError(
                f"query {query_id} needs about {estimate} bytes, more than the storage node's "
                f"memory budget of {self.budget}; raise --memory-budget or add storage nodes"
            )
        now = time.monotonic()
        with self._lock:
            self._refuse_closed(query_id)
            self._expire(now)
            if query_id not in self._waiting and len(self._waiting) >= MAX_WAITING:
                raise AdmissionError(
                    f"{len(self._waiting)} queries are waiting for room on this storage node; "
                    "retry later"
                )
            # nobody may claim a place far ahead of the others: arrivals older than the waiting
            # limit count as that old
            arrival = max(arrival, time.time() - WAITER_AGE)
            first = self._waiting.get(query_id, (arrival, now))[0]
            self._waiting[query_id] = (first, now)
            if query_id in self._held or query_id in self._states:
                return True
            ahead = any(
                (a, q) < (first, query_id)
                for q, (a, _) in self._waiting.items()
                if q != query_id and q not in self._held and q not in self._states
            )
            if ahead or self._reserved + self._promised() + estimate > self.budget:
                return False
            self._reserved += estimate
            self._held[query_id] = (estimate, now + RESERVATION_TTL)
            self.admitted += 1
            return True

    def withdraw(self, query_id: str, arrival: float | None) -> None:
        """Give back all a query holds here without closing it (an ``open`` admitted on this
        node while another refused it): its reservation, or its opened state and work; with
        ``arrival``, it keeps its place in line, and may open again."""
        with self._lock:
            held = self._held.pop(query_id, None)
            if held is not None:
                self._reserved -= held[0]
            if query_id in self._states:
                self._drop(query_id)
                work = self._works.pop(query_id, None)
                if work is not None:
                    work[0].cancel("its compute node released it to wait for room elsewhere")
            if (
                arrival is not None
                and query_id not in self._closed
                and (query_id in self._waiting or len(self._waiting) < MAX_WAITING)
            ):
                now = time.monotonic()
                first = max(arrival, time.time() - WAITER_AGE)
                self._waiting[query_id] = (self._waiting.get(query_id, (first, now))[0], now)
            self._lock.notify_all()

    def take_reservation(self, query_id: str) -> int | None:
        """The bytes reserved for ``query_id`` (now owned by its opening), or None."""
        with self._lock:
            self._waiting.pop(query_id, None)
            held = self._held.pop(query_id, None)
            return None if held is None else held[0]

    def reserve(self, query_id: str, estimate: int) -> None:
        """Reserve ``estimate`` bytes for a scan, waiting up to ``wait`` seconds for room."""
        if estimate > self.budget:
            self.refused += 1
            raise AdmissionError(
                f"query {query_id} needs about {estimate} bytes, more than the storage node's "
                f"memory budget of {self.budget}; raise --memory-budget or add storage nodes"
            )
        deadline = time.monotonic() + self.wait
        with self._lock:
            self._refuse_closed(query_id)
            while self._reserved + self._promised() + estimate > self.budget:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.refused += 1
                    raise AdmissionError(
                        f"storage node memory budget exceeded: query {query_id} needs about "
                        f"{estimate} bytes, {self._reserved} of {self.budget} are held by other "
                        "queries; retry later"
                    )
                self._lock.wait(min(left, 0.1))
            self._reserved += estimate
            self.admitted += 1

    def release(self, estimate: int) -> None:
        with self._lock:
            self._reserved -= estimate
            self._lock.notify_all()

    def put(self, *states: QueryState) -> None:
        """Keep the opened states (all, or none when one's query was closed meanwhile: then
        their reservations are given back and UnknownQueryError says so)."""
        with self._lock:
            closed = [s.query_id for s in states if s.query_id in self._closed]
            if closed:
                for state in states:
                    self._reserved -= state.reserved
                self._lock.notify_all()
                self._refuse_closed(closed[0])
            for state in states:
                if state.query_id in self._states:
                    self._drop(state.query_id)
                # keep the real size reserved instead of the estimate, the rest promised
                self._headroom[state.query_id] = max(0, state.reserved - state.size_in_bytes())
                self._reserved += state.size_in_bytes() - state.reserved
                state.reserved = state.size_in_bytes()
                self._states[state.query_id] = state

    def account(self, state: QueryState) -> None:
        """Hold what an open query's state takes now (it grew: push-pull uploads)."""
        with self._lock:
            if self._states.get(state.query_id) is state:
                size = state.size_in_bytes()
                self._reserved += size - state.reserved
                state.reserved = size

    def get(self, query_id: str) -> QueryState:
        with self._lock:
            state = self._states.get(query_id)
            if state is None:
                raise UnknownQueryError(
                    f"unknown query id {query_id!r}: open it first (state may have expired "
                    f"after {self.ttl:.0f} s)"
                )
            state.last_used = time.monotonic()
            return state

    def open_on(self, generation: int) -> int:
        """Queries open on the data of ``generation`` (the store's loads, see ShardStore)."""
        with self._lock:
            return sum(1 for s in self._states.values() if s.generation == generation)

    def find(self, query_id: str) -> QueryState | None:
        """The open query's state, or None (pull_all works with or without one)."""
        with self._lock:
            return self._states.get(query_id)

    def close(self, query_id: str) -> bool:
        with self._lock:
            found = query_id in self._states
            if found:
                self._drop(query_id, "its compute node closed it")
            work = self._works.pop(query_id, None)
            if work is not None:
                work[0].cancel("its compute node closed it")
            held = self._held.pop(query_id, None)
            if held is not None:
                self._reserved -= held[0]
            self._waiting.pop(query_id, None)
            if len(query_id) <= 64:
                self._closed[query_id] = None
                self._closed.move_to_end(query_id)
                while len(self._closed) > MAX_TOMBSTONES:
                    self._closed.popitem(last=False)
            self._lock.notify_all()
            return found or held is not None

    def _drop(self, query_id: str, reason: str | None = None) -> None:
        """Forget a query's state; with a ``reason``, its work stops too (it expired or closed)."""
        state = self._states.pop(query_id)
        self._reserved -= state.reserved
        self._headroom.pop(query_id, None)
        self._lock.notify_all()
        if reason is not None and query_id in self._works:
            self._works.pop(query_id)[0].cancel(reason)

    def work(self, query_id: str, where: str, deadline: float | None = None) -> Work:
        """The query's work (made at its open with the lease's ``deadline``): each call takes
        ``.call()`` of it. A closed query's work is cancelled at once."""
        with self._lock:
            found = self._works.get(query_id)
            if found is None:
                work = Work(
                    query_id,
                    where,
                    deadline,
                    lambda n, purpose: self._grant(query_id, n, purpose),
                    lambda n, purpose: self._give_back(query_id, n, purpose),
                )
                self._works[query_id] = (work, time.monotonic())
            else:
                work = found[0]
                if deadline is not None:
                    work.deadline = deadline
            if query_id in self._closed:
                work.cancel("its compute node closed it")
            return work

    def end_work(self, query_id: str) -> None:
        """Forget the work of a query whose open failed (nothing of it is kept)."""
        with self._lock:
            if query_id not in self._states:
                found = self._works.pop(query_id, None)
                if found is not None:
                    found[0].cancel("its open failed")

    def _grant(self, query_id: str, nbytes: int, purpose: Purpose) -> None:
        """Room for ``nbytes`` more of a query's work, or WorkMemoryError naming what they are
        for and the way out; ``storage.query_work_bytes`` bounds the engines' work (partial
        matches, matches, filter results), the budget bounds everything."""
        with self._lock:
            where = self._works[query_id][0].where if query_id in self._works else ""
            mine = self._work_of.get(query_id, 0) + nbytes
            if purpose is MATCHING and self.query_work and mine > self.query_work:
                self.stopped += 1
                raise WorkMemoryError(
                    f"query {query_id}{where} needs {mine:,} bytes for {purpose.what}, more than "
                    f"storage.query_work_bytes={self.query_work:,} allows one query: "
                    f"{purpose.fix} or raise the setting"
                )
            if self._reserved + nbytes > self.budget:
                self.stopped += 1
                raise WorkMemoryError(
                    f"query {query_id}{where} needs {nbytes:,} more bytes for {purpose.what} but "
                    f"only {max(0, self.budget - self._reserved):,} of the node's memory budget of "
                    f"{self.budget:,} are free (storage.memory_budget, --memory-budget): "
                    f"{purpose.fix} or raise the budget"
                )
            self._reserved += nbytes
            self._charged[query_id] = self._charged.get(query_id, 0) + nbytes
            if purpose is MATCHING:
                self._work_of[query_id] = mine
            self.work_bytes += nbytes
            self.work_peak = max(self.work_peak, self.work_bytes)

    def _give_back(self, query_id: str, nbytes: int, purpose: Purpose) -> None:
        with self._lock:
            if purpose is MATCHING:
                left = self._work_of.get(query_id, 0) - nbytes
                if left > 0:
                    self._work_of[query_id] = left
                else:
                    self._work_of.pop(query_id, None)
            self._reserved -= nbytes
            left = self._charged.get(query_id, 0) - nbytes
            if left > 0:
                self._charged[query_id] = left
            else:
                self._charged.pop(query_id, None)
            self.work_bytes -= nbytes
            self._lock.notify_all()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "queries": len(self._states) + len(self._held),
                "held_bytes": self._reserved,
                "budget_bytes": self.budget,
                "reservations": len(self._held),
                "waiting": len(self._waiting),
                "evicted": self.evicted,
                "refused": self.refused,
                "admitted": self.admitted,
                "work_bytes": self.work_bytes,
                "work_peak_bytes": self.work_peak,
                "stopped": self.stopped,
                # sizes only: query ids are what protects a query's state from other token holders
                "per_query_bytes": sorted(
                    (s.size_in_bytes() for s in self._states.values()), reverse=True
                ),
            }
