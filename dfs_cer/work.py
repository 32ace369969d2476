"""One query's work on a storage node: a deadline, a cancelled flag and a memory charge.

Every long loop that runs for a query (push-pull matching, node-side matching, input filters,
halo rows, navigation masks) is handed the query's :class:`Work` and calls :meth:`Work.check`
between bounded steps and :meth:`Work.charge` before it allocates a structure whose size
follows the input (partial matches, matches). The node sets the deadline from the query's
lease (the compute node's time left), cancels the work when the query is closed or expires,
and charges memory against the query's reservation, so an abandoned or runaway query stops
within one step instead of running on past its compute node (DESIGN.md "Work on a node
belongs to a query"). Pure logic: no I/O; the engines take ``work=None`` where nothing bounds
them (the local engine).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dfs_cer.errors import WorkCancelledError

#: engines check the work at least once per this many steps of a Python-level loop
CHECK_EVERY = 4096


@dataclass(frozen=True, slots=True)
class Purpose:
    """What a charge holds and how a user keeps the query within the memory (named when the node
    refuses the charge)."""

    what: str
    fix: str


#: an engine's structures: partial matches, matches, a filter's results
MATCHING = Purpose(
    "its work (partial matches, matches or filter results)",
    "bound the query (a WITHIN window, a lower max_matches)",
)
#: copies of a query's rows: a scan, a sort, a pull's rows, a reply compressed for the wire
ROWS = Purpose(
    "copies of its rows (scanned, sorted or pulled rows, or a reply on its way)",
    "narrow the query (fewer or shorter columns, a tighter condition or WITHIN window)",
)


class Work:
    """The bounds of one query's work (thread-safe: ``cancel`` comes from another call).

    ``grant(nbytes, purpose)`` reserves ``nbytes`` more for the query or raises (the node's
    :class:`~dfs_cer.errors.WorkMemoryError` naming the query, the node, what the bytes are for
    and the setting); ``give_back(nbytes, purpose)`` returns them. ``deadline`` is a
    ``time.monotonic()`` value. Bytes reserved for the work beforehand (an open's admission)
    are :meth:`prepay`-ed: charges take them first and ask the node only for the rest.
    """

    def __init__(
        self,
        query_id: str,
        where: str = "",
        deadline: float | None = None,
        grant: Callable[[int, Purpose], None] | None = None,
        give_back: Callable[[int, Purpose], None] | None = None,
    ) -> None:
        self.query_id = query_id
        self.where = where
        self.deadline = deadline
        self._grant = grant
        self._give_back = give_back
        self._cancelled = threading.Event()
        self._reason = [""]
        self._lock = threading.Lock()
        self.charged = 0
        #: of ``charged``, the bytes ``grant`` gave, by purpose (the rest came from the prepaid
        #: bytes)
        self._granted: dict[Purpose, int] = {}
        #: bytes reserved for this work beforehand and not charged yet
        self._credit = 0
        #: what set the deadline, and how to move it (named when the work stops there)
        self.deadline_reason = (
            "the compute node's lease_seconds at open); run it again with a longer "
            "strategy.query_timeout_seconds"
        )
        #: the most bytes charged at once (reported by the node's stats)
        self.peak = 0

    def bound(self, seconds: float, reason: str) -> None:
        """End the work ``seconds`` from now at the latest (``reason``: the setting that says so,
        and how to raise it)."""
        end = time.monotonic() + seconds
        if self.deadline is None or end < self.deadline:
            self.deadline = end
            self.deadline_reason = reason

    def cancel(self, reason: str) -> None:
        """Stop the work at its next check (the query was closed or expired)."""
        self._reason[0] = reason
        self._cancelled.set()

    def call(self) -> Work:
        """The work of one call of the query: the query's deadline and cancellation, its own
        charges (settled when the call ends, whatever other calls of the query hold)."""
        out = Work(self.query_id, self.where, self.deadline, self._grant, self._give_back)
        out._cancelled, out._reason = self._cancelled, self._reason
        return out

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _wait(self, done: threading.Event, flag: Any) -> None:
        """Set ``flag[0]`` once the work is cancelled or past its deadline, unless ``done``
        first."""
        while not done.is_set():
            left = None if self.deadline is None else self.deadline - time.monotonic()
            if self._cancelled.wait(
                WATCH_SECONDS if left is None else max(0.0, min(WATCH_SECONDS, left))
            ) or (self.deadline is not None and time.monotonic() > self.deadline):
                flag[0] = 1
                return

    def check(self) -> None:
        """Raise :class:`WorkCancelledError` when the query was cancelled or its deadline passed."""
        if self._cancelled.is_set():
            raise WorkCancelledError(
                f"query {self.query_id}{self.where}: stopped, {self._reason[0]}"
            )
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise WorkCancelledError(
                f"query {self.query_id}{self.where}: stopped at its deadline "
                f"({self.deadline_reason}"
            )

    def prepay(self, nbytes: int) -> None:
        """Bytes already reserved for this work (an open's admission): charges take them first."""
        with self._lock:
            self._credit += max(0, int(nbytes))

    def charge(self, nbytes: int, purpose: Purpose = MATCHING) -> None:
        """Hold ``nbytes`` more for this query, before allocating them (checked first: a
        cancelled query takes nothing); ``purpose`` says what for when the node refuses."""
        self.check()
        nbytes = int(nbytes)
        if nbytes <= 0:
            return
        with self._lock:
            prepaid = min(self._credit, nbytes)
            self._credit -= prepaid
        rest = nbytes - prepaid
        if rest and self._grant is not None:
            try:
                self._grant(rest, purpose)
            except BaseException:
                with self._lock:
                    self._credit += prepaid
                raise
        with self._lock:
            self.charged += nbytes
            self._granted[purpose] = self._granted.get(purpose, 0) + rest
            self.peak = max(self.peak, self.charged)

    def uncharge(self, nbytes: int, purpose: Purpose = MATCHING) -> None:
        """Give back ``nbytes`` of what :meth:`charge` took for ``purpose`` (a structure was
        freed): the node's bytes first, then the prepaid ones (kept for later charges)."""
        with self._lock:
            nbytes = min(int(nbytes), self.charged)
            self.charged -= nbytes
            back = min(nbytes, self._granted.get(purpose, 0))
            self._granted[purpose] = self._granted.get(purpose, 0) - back
            self._credit += nbytes - back
        if back > 0 and self._give_back is not None:
            self._give_back(back, purpose)

    def hand_over(self, purpose: Purpose) -> Work:
        """A work holding the bytes the node granted this one for ``purpose`` (this one then
        holds the rest): a reply keeps its bytes charged until it has been sent, after the call
        that made it ends. Settle the new work when the reply is gone."""
        out = Work(self.query_id, self.where, self.deadline, self._grant, self._give_back)
        out._cancelled, out._reason = self._cancelled, self._reason
        with self._lock:
            moved = self._granted.pop(purpose, 0)
            out._granted = {purpose: moved}
            out.charged = out.peak = moved
            self.charged -= moved
        return out

    def settle(self) -> None:
        """Give back everything charged (the call that did the work ends)."""
        with self._lock:
            granted, self._granted = self._granted, {}
            self._credit += self.charged - sum(granted.values())
            self.charged = 0
        if self._give_back is not None:
            for purpose, nbytes in granted.items():
                if nbytes > 0:
                    self._give_back(nbytes, purpose)


def check(work: Work | None) -> None:
    """:meth:`Work.check` when there is a work to check."""
    if work is not None:
        work.check()


#: how often a watch (:func:`watch`) wakes to see whether its loop has ended
WATCH_SECONDS = 0.05


@contextlib.contextmanager
def watch(work: Work | None, flag: Any) -> Iterator[None]:
    """For a compiled loop that cannot call :meth:`Work.check` (it reads ``flag[0]``, a one-item
    integer array, instead): a thread sets ``flag[0] = 1`` when the work is cancelled or passes
    its deadline while the loop runs. The caller calls :meth:`Work.check` after the loop."""
    if work is None:
        yield
        return
    done = threading.Event()
    watcher = threading.Thread(
        target=work._wait, args=(done, flag), name=f"watch {work.query_id}", daemon=True
    )
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
