"""Several queries over the same storage nodes, together: one scan, one final pull.

Every storage node opens the queries as a group: it reads and sorts its shard set once, gives
each query its own state over that table and evaluates conditions the queries share once. The
queries then run their strategies side by side (their filter round trips overlap in time);
their final pulls become one pull per node that sends each row once, with a bit mask of the
queries that asked for it, and the compute node fans the rows out to per-query matchers.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.config import Config, StrategyConfig
from dfs_cer.errors import SNAPSHOT_BUSY, ConfigError
from dfs_cer.query import Query, analyze
from dfs_cer.strategies.base import FinalPull, PullResult, Round, Session, Trace, resolve_query
from dfs_cer.strategies.options import PullOptions
from dfs_cer.strategies.request import PullRequest
from dfs_cer.transport.protocol import MEMBERS
from dfs_cer.transport.replies import GroupOpenReply, OpenReply
from dfs_cer.transport.retry import retry_on

T = TypeVar("T")
MAX_GROUP = 64


@dataclass
class GroupResult:
    """Each query's pull (in the order given) and the group's own trace (the shared open and
    the shared final pull); every byte is in exactly one of the traces."""

    results: list[PullResult]
    trace: Trace
    seconds: float

    @property
    def bytes_to_cn(self) -> int:
        return self.trace.bytes_to_cn + sum(r.trace.bytes_to_cn for r in self.results)

    @property
    def bytes_to_sn(self) -> int:
        return self.trace.bytes_to_sn + sum(r.trace.bytes_to_sn for r in self.results)


class _Call:
    def __init__(self) -> None:
        self.ready = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class _SharedPull:
    """Collects the queries' final pulls; when every query has asked or finished without one,
    the last to arrive runs one ``pull_group`` per node and hands each query its rows."""

    def __init__(self, group: Session, query_ids: list[str]) -> None:
        self.group = group
        self.query_ids = query_ids
        self.index = {q: i for i, q in enumerate(query_ids)}
        #: each query's share of the group's open replies (:meth:`receive`)
        self.replies: list[list[tuple[OpenReply, list[bytes]]]] = []
        self.pending: dict[int, FinalPull] = {}
        self.finished: set[int] = set()
        self.results: dict[int, pa.Table] = {}
        self.error: BaseException | None = None
        self.count = len(query_ids)
        self.cond = threading.Condition()
        self.ran = False
        self.calls: dict[tuple[object, ...], _Call] = {}

    def receive(self, replies: list[tuple[GroupOpenReply, list[bytes]]]) -> None:
        """The group's open replies: each query gets its own part of every node's."""
        self.replies = [[(h.group[k], blobs) for h, blobs in replies] for k in range(self.count)]

    def opened(self, session: Session) -> list[tuple[OpenReply, list[bytes]]]:
        return self.replies[self.index[session.query_id]]

    def done(self, session: Session) -> None:
        with self.cond:
            self.finished.add(self.index[session.query_id])
            self._maybe_run()

    def request(
        self, session: Session, kind: str, header: dict[str, Any], blobs: list[bytes]
    ) -> pa.Table:
        i = self.index[session.query_id]
        with self.cond:
            self.pending[i] = FinalPull(kind, header, blobs)
            self._maybe_run()
            while i not in self.results and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise self.error
            table = self.results[i]
        session.trace.rounds.append(
            Round(
                f"{kind} (shared)",
                0,
                0,
                table.num_rows,
                0.0,
                note="one pull for the group: its bytes are in the group trace",
            )
        )
        return table

    def _maybe_run(self) -> None:
        if self.ran or len(self.pending) + len(self.finished - set(self.pending)) < self.count:
            return
        self.ran = True
        try:
            self.results = self._pull()
        except BaseException as exc:  # every waiting query gets the error
            self.error = exc
        self.cond.notify_all()

    def _pull(self) -> dict[int, pa.Table]:
        order = sorted(self.pending)
        pulls: list[dict[str, Any]] = []
        blobs: list[bytes] = []
        for i in order:
            final = self.pending[i]
            kind, header, own = final.kind, final.header, final.blobs
            entry: dict[str, Any] = {"query_id": self._qid(i), "kind": kind, **header}
            if own:
                entry["blob"] = len(blobs)
                blobs.append(own[0])
            pulls.append(entry)
        table = self.group.pull("pull_group", {"pulls": pulls}, blobs)
        out = {}
        members = (
            np.asarray(
                table.column(MEMBERS).cast(pa.uint64()).to_numpy(zero_copy_only=False), np.uint64
            )
            if table.num_rows
            else np.zeros(0, np.uint64)
        )
        rows = table.drop([MEMBERS]) if table.num_columns else table
        for j, i in enumerate(order):
            mask = (members & np.uint64(1 << j)) != 0
            out[i] = rows.filter(pa.array(mask))
        return out

    def shared(self, session: Session, key: tuple[object, ...], call: Callable[[], T]) -> T:
        """The first query with ``key`` makes the call; the others wait for and reuse its
        replies."""
        with self.cond:
            entry = self.calls.get(key)
            mine = entry is None
            if mine:
                entry = self.calls[key] = _Call()
        assert entry is not None
        if mine:
            try:
                entry.value = call()
            except BaseException as exc:
                entry.error = exc
            entry.ready.set()
        else:
            entry.ready.wait()
            session.trace.rounds.append(
                Round(
                    f"{key[0]} (shared)",
                    0,
                    0,
                    0,
                    0.0,
                    note="same request as another query of the group: made once",
                )
            )
        if entry.error is not None:
            raise entry.error
        return entry.value

    def _qid(self, i: int) -> str:
        return self.query_ids[i]


@interrupt.guarded
def pull_many(
    name: str,
    queries: Sequence[Query | str],
    endpoints: Sequence[str],
    token: str,
    *,
    config: Config | StrategyConfig | None = None,
    integer_time_unit: str | None = None,
    event_key: Sequence[str] | None = None,
    dedup: bool | None = None,
    timeout: float | None = None,
    snapshot: int | None = None,
    **options: Any,
) -> GroupResult:
    """Run pull strategy ``name`` for every query together (see the module docstring);
    ``config`` and the keywords as for :func:`dfs_cer.strategies.pull` (the settings every query
    runs with, the keywords winning over them); ``timeout`` bounds the whole group (default
    ``strategy.query_timeout_seconds``); ``snapshot``: the table snapshot every query reads
    (nodes serving an Iceberg table). A node busy with another snapshot of the table
    (SNAPSHOT_BUSY) is asked again shortly."""
    from dfs_cer.strategies.request import settings_of

    settings = settings_of(config)
    if isinstance(event_key, str):  # one column named as a string
        event_key = (event_key,)
    if dedup is not None and not isinstance(dedup, bool):
        raise ConfigError(f"dedup must be True or False, got {dedup!r}")
    if event_key is None and settings.query.event_key:
        event_key = settings.query.event_key
    options = {
        "cost_model": settings.strategy.cost_model,
        "calibration_file": settings.strategy.calibration_file or None,
        **options,
    }
    seconds = settings.strategy.query_timeout_seconds if timeout is None else timeout
    deadline = time.monotonic() + seconds
    return retry_on(
        (SNAPSHOT_BUSY,),
        lambda: _pull_many_once(
            name,
            queries,
            endpoints,
            token,
            integer_time_unit=(
                settings.query.integer_time_unit if integer_time_unit is None else integer_time_unit
            ),
            event_key=event_key,
            dedup=settings.query.dedup if dedup is None else dedup,
            timeout=max(deadline - time.monotonic(), 0.001),
            config=settings,
            snapshot=snapshot,
            **options,
        ),
        lambda: deadline,
    )


def _pull_many_once(
    name: str,
    queries: Sequence[Query | str],
    endpoints: Sequence[str],
    token: str,
    *,
    integer_time_unit: str,
    event_key: Sequence[str] | None,
    dedup: bool,
    timeout: float,
    config: Config,
    snapshot: int | None,
    **options: Any,
) -> GroupResult:
    from dfs_cer.strategies.pull import STRATEGIES

    if name not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    if not 1 <= len(queries) <= MAX_GROUP:
        raise ConfigError(f"give 1 to {MAX_GROUP} queries to run together, got {len(queries)}")
    parsed = [resolve_query(q) for q in queries]
    checked = PullOptions.parse(options)
    if len(parsed) == 1:  # nothing to share: the query's own (filtered) scan
        began = time.perf_counter()
        from dfs_cer.strategies.pull import pull

        result = pull(
            name,
            parsed[0],
            endpoints,
            token,
            integer_time_unit=integer_time_unit,
            event_key=event_key,
            dedup=dedup,
            timeout=timeout,
            config=config,
            snapshot=snapshot,
            **options,
        )
        return GroupResult([result], Trace(f"{name} x1"), time.perf_counter() - began)
    # a client (connection) per query and node: each counts the bytes of its own calls while
    # the queries' round trips overlap
    group = Session.connect(
        endpoints,
        token,
        Trace(f"{name} x{len(parsed)}"),
        config.strategy,
        timeout,
        snapshot=snapshot,
    )
    query_ids = [uuid.uuid4().hex for _ in parsed]
    shared = _SharedPull(group, query_ids)
    sessions: list[Session] = []
    request = PullRequest(
        name,
        parsed[0],
        tuple(endpoints),
        token,
        integer_time_unit,
        None if event_key is None else tuple(event_key),
        dedup,
        timeout=timeout,
        config=config,
        snapshot=snapshot,
        options=checked,
    )
    began = time.perf_counter()
    try:
        # the event key and dedup decide which copy of an event is a candidate on the nodes
        keyed = {} if event_key is None else {"event_key": list(event_key)}
        members = [
            {
                "query_id": qid,
                "sql": q.to_sql(),
                "integer_time_unit": integer_time_unit,
                "dedup": dedup,
                **keyed,
            }
            for qid, q in zip(query_ids, parsed, strict=True)
        ]
        # pull_all's final pulls take every row: the group's table must hold them all (so do
        # queries reaching past this compute node's halo limit; the nodes add their own)
        limit = config.strategy.halo_limit
        whole = name == "pull_all" or any(
            max(a.prev_reach, a.next_reach) > limit for a in map(analyze, parsed)
        )
        # room on every node or on none (and a table's snapshot for all the queries)
        group.reserve()
        # a client (connection) per query and node; one deadline for the whole group
        sessions.extend(
            Session.connect(
                endpoints,
                token,
                Trace(name),
                config.strategy,
                timeout,
                event_key,
                dedup,
                deadline=group.deadline,
                query_id=qid,
                snapshot=group.snapshot,
                group=shared,
            )
            for qid in query_ids
        )
        shared.receive(
            group.action(
                GroupOpenReply,
                {},
                per_node=lambda i: (
                    {
                        "group": members,
                        "schema": i == 0,
                        "whole": whole,
                        "nodes": len(endpoints),  # a node relies on its layout only then
                    },
                    [],
                ),
            )
        )

        def run(k: int) -> PullResult:
            try:
                return STRATEGIES[name](sessions[k], request.with_query(parsed[k]))
            finally:
                shared.done(sessions[k])

        # not waited for on the way out: after Ctrl-C or a failure, closing the queries below
        # ends their rounds on the nodes
        pool = ThreadPoolExecutor(len(parsed))
        try:
            results = list(pool.map(run, range(len(parsed))))
        finally:
            pool.shutdown(wait=False)
        for r, s in zip(results, sessions, strict=True):  # complete results are kept
            r.trace.warnings += s.close()
            r.config = config  # the settings match_pulled matches with
            r.deadline = s.deadline
        return GroupResult(results, group.trace, time.perf_counter() - began)
    except BaseException:
        for s in [group, *sessions]:
            s.close()  # best effort: the error that stopped the group is the one reported
        raise
    finally:
        group.close_connections()
        for s in sessions:
            s.close_connections()
