"""What every pull strategy returns: the pulled events and a trace of the round trips."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from dfs_cer.query import Analysis, Query
from dfs_cer.transport.client import StorageClient

T = TypeVar("T")


@dataclass
class Round:
    action: str
    bytes_to_sn: int
    bytes_to_cn: int
    events: int
    seconds: float
    decision: dict[str, Any] | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


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
        return {"strategy": self.strategy, "rounds": [r.to_dict() for r in self.rounds],
                "bytes_to_cn": self.bytes_to_cn, "bytes_to_sn": self.bytes_to_sn,
                "events_received": self.events_received, "seconds": self.seconds, "fallback": self.fallback,
                "matching": None if self.matching is None else self.matching.to_dict()}


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


#: pulls that end a strategy (the data it matches); a group of queries shares them
FINAL_PULLS = ("pull", "pull_range", "pull_pushdown", "pull_all")


class Session:
    """One query's conversation with all storage nodes; calls run on every node in parallel."""

    def __init__(self, clients: Sequence[StorageClient], trace: Trace, event_key: Sequence[str] | None = None,
                 dedup: bool = True) -> None:
        self.clients = list(clients)
        self.trace = trace
        self.query_id = uuid.uuid4().hex
        #: columns identifying an event; None: the storage nodes' manifests say (--event-key)
        self.event_key = None if event_key is None else tuple(event_key)
        self.dedup = dedup
        #: restrict the query to these inclusive time ranges (an incremental re-run)
        self.time_ranges: list[tuple[int, int]] | None = None
        #: several queries run together (strategies.multi): the open replies fetched for the
        #: whole group, and the coordinator that turns final pulls into one shared pull
        self.opened: list[tuple[dict[str, Any], list[bytes]]] | None = None
        self.group: Any = None
        self._pool = ThreadPoolExecutor(max(1, len(self.clients)))

    def all(self, name: str, fn: Callable[[StorageClient], T], events: Callable[[list[T]], int] | None = None,
            decision: dict[str, Any] | None = None, note: str | None = None) -> list[T]:
        marks = [len(c.transfers) for c in self.clients]
        start = time.perf_counter()
        results = list(self._pool.map(fn, self.clients))
        seconds = time.perf_counter() - start
        new = [t for c, m in zip(self.clients, marks, strict=True) for t in c.transfers[m:]]
        self.trace.rounds.append(Round(name, sum(t.bytes_to_sn for t in new), sum(t.bytes_to_cn for t in new),
                                       events(results) if events else 0, seconds, decision, note))
        return results

    def action(self, name: str, header: dict[str, Any], blobs: list[bytes] | None = None,
               per_node: Callable[[int], tuple[dict[str, Any], list[bytes]]] | None = None,
               share: tuple[object, ...] | None = None,
               **round_info: Any) -> list[tuple[dict[str, Any], list[bytes]]]:
        """Call ``name`` on every node. ``share``: a key saying the replies depend only on it (not
        on this query), so queries run together make the round trip once."""
        if share is not None and self.group is not None:
            return self.group.shared(self, (name, *share),
                                     lambda: self.action(name, header, blobs, per_node, **round_info))
        body = {"query_id": self.query_id, **header}
        index = {id(c): i for i, c in enumerate(self.clients)}

        def call(c: StorageClient) -> tuple[dict[str, Any], list[bytes]]:
            if per_node is not None:
                h, b = per_node(index[id(c)])
                return c.action(name, {"query_id": self.query_id, **h}, b)
            return c.action(name, body, blobs)

        return self.all(name, call, **round_info)

    def pull(self, kind: str, header: dict[str, Any] | None = None, blobs: list[bytes] | None = None,
             **round_info: Any) -> pa.Table:
        if self.group is not None and kind in FINAL_PULLS:
            return self.group.request(self, kind, header or {}, blobs or [])
        body = {"query_id": self.query_id, "kind": kind, **(header or {})}
        tables = self.all(kind, lambda c: c.pull(body, blobs), events=lambda ts: sum(t.num_rows for t in ts),
                          **round_info)
        return pa.concat_tables(tables) if tables else pa.table({})

    def close(self) -> None:
        try:
            for c in self.clients:
                c.action("close", {"query_id": self.query_id})
        finally:
            self._pool.shutdown(wait=False)


def sort_events(table: pa.Table, time_column: str) -> pa.Table:
    """Deterministic order: time, then storage node order and row order (a stable sort)."""
    if table.num_rows == 0:
        return table
    return table.take(pa.compute.sort_indices(table, sort_keys=[(time_column, "ascending")]))


def resolve_query(query: Query | str) -> Query:
    if isinstance(query, str):
        from dfs_cer.query import parse

        return parse(query)
    return query
