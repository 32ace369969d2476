"""Admission inside ``open``: the query opens on every storage node or on none, in one round
trip when the nodes have room.

Each ``open`` carries the query's arrival (the compute node's wall clock when it first asked):
a node admits the query at once, in arrival order among the queries waiting for it, or refuses
it (``refused``, holding nothing). When some node refuses, the compute node releases the query
on the nodes that opened it (``release`` with the arrival: they drop its state, and it keeps its
place in their line) and opens again after a short, growing pause, until
``strategy.admission_wait_seconds`` passes; no query holds one node while it waits for another.
Where the nodes serve a table and no snapshot was pinned, each opens its current one: when a
commit raced the opens and they differ, the query is released and opened again pinned on the
latest.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from dfs_cer.strategies.base import Session
from dfs_cer.transport.protocol import Release
from dfs_cer.transport.replies import OpenReply, ReleaseReply

#: the first pause before opening again (seconds); it doubles up to :data:`MAX_PAUSE`
FIRST_PAUSE = 0.02
MAX_PAUSE = 0.5


def open_everywhere(
    session: Session,
    per_node: Callable[[int], tuple[dict[str, Any], list[bytes]]],
    again: Callable[[list[OpenReply]], str | None] | None = None,
) -> list[tuple[OpenReply, list[bytes]]]:
    """``open`` on every node of ``session`` (``per_node(i)``: node i's header and blobs), admitted
    on all of them or retried (see the module docstring); a NodeRefusedError naming the busy
    nodes when the admission wait passes. ``again``: why the opened query must be opened once
    more (``per_node`` then asks otherwise; None: it need not), e.g. the nodes narrowed their
    candidates by a layout their claims do not bear out."""
    arrival = round(time.time(), 3)  # to the millisecond
    give_up = time.monotonic() + session.admission_wait
    pause = FIRST_PAUSE

    def with_arrival(i: int) -> tuple[dict[str, Any], list[bytes]]:
        header, blobs = per_node(i)
        return {**header, "arrival": arrival}, blobs

    while True:
        replies = session.action(OpenReply, {}, per_node=with_arrival)
        refused = [i for i, (h, _) in enumerate(replies) if h.refused]
        pins = [(h.snapshot_ms or 0, h.snapshot) for h, _ in replies if h.snapshot is not None]
        raced = not refused and session.snapshot is None and len({p[1] for p in pins}) > 1
        redo = None if refused or raced or again is None else again([h for h, _ in replies])
        if not refused and not raced and redo is None:
            if session.snapshot is None and pins:  # the one snapshot every node serves
                session.snapshot = pins[0][1]
            return replies
        if redo is not None:  # a round that ran: kept in the trace, with why it ran again
            session.trace.rounds[-1].note = f"opened again: {redo}"
            if session.snapshot is None and pins:  # the same snapshot again
                session.snapshot = pins[0][1]
            for c in session.clients:
                c.call(ReleaseReply, Release(session.query_id, arrival).header())
            continue
        session.trace.rounds.pop()  # waiting is not a round trip of the strategy
        for i, c in enumerate(session.clients):
            if i not in refused:
                c.call(ReleaseReply, Release(session.query_id, arrival).header())
        if raced:  # every node opens the latest commit any of them saw
            session.snapshot = max(pins)[1]
            continue
        if time.monotonic() > give_up:
            raise session.no_room("open", refused)
        time.sleep(pause * (0.5 + random.random()))
        pause = min(MAX_PAUSE, pause * 2)
