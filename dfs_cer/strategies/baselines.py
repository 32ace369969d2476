"""The baselines: ``pull_all``, ``push_down`` and ``push_pull`` (see :mod:`.pull`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer.events.schemas import concat
from dfs_cer.query.expr import Column, walk
from dfs_cer.strategies.base import PullResult, Session
from dfs_cer.strategies.request import PullRequest
from dfs_cer.strategies.steps import (
    candidate_counts,
    every_row_a_candidate,
    finish_pull,
    no_halo_reason,
    open_query,
    pull_everything,
    pushdown_events,
    too_many_candidates,
    with_candidate_halo,
)
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.protocol import ROW_ID, PushPull, Upload
from dfs_cer.transport.replies import PushPullReply


def pull_all(session: Session, request: PullRequest) -> PullResult:
    analysis, _, schema = open_query(session, request)
    if analysis.prev_reach or analysis.next_reach:
        session.trace.navigation = "every row pulled: PREV/NEXT read them in place"
    return finish_pull(session, session.pull("pull_all"), analysis, schema)


def push_down(session: Session, request: PullRequest) -> PullResult:
    analysis, headers, schema = open_query(session, request)
    if not analysis.skippable:
        return pull_everything(session, analysis, schema, f"pull_all ({analysis.skip_reason})")
    unordered = no_halo_reason(session, analysis, schema)
    if unordered:
        return pull_everything(session, analysis, schema, unordered)
    everything = every_row_a_candidate(session, analysis) or too_many_candidates(
        session, analysis, headers
    )
    if everything:
        return pull_everything(session, analysis, schema, f"pull_all ({everything})")
    return finish_pull(session, pushdown_events(session, analysis, headers), analysis, schema)


def push_pull(session: Session, request: PullRequest) -> PullResult:
    analysis, headers, schema = open_query(session, request)
    if not analysis.skippable:
        return pull_everything(session, analysis, schema, f"pull_all ({analysis.skip_reason})")
    unordered = no_halo_reason(session, analysis, schema)
    if unordered:
        return pull_everything(session, analysis, schema, unordered)
    counts = candidate_counts(headers)
    names = [v.name for v in analysis.variables if not v.any_row]
    order = [min(names, key=lambda n: (counts.get(n, 0), names.index(n)))]
    while len(order) < len(names):
        visited = set(order)

        def score(n: str, visited: set[str] = visited) -> float:
            eq = sum(
                1
                for e in analysis.equalities
                if n in (e.left_variable, e.right_variable) and e.other(n) in visited
            )
            other = sum(
                1
                for r in analysis.variable(n).residuals
                if {c.variable for c in walk(r) if isinstance(c, Column)} & visited
            )
            return (1 + 10 * eq + 2.4 * other) / max(1, counts.get(n, 0))

        order.append(
            max((n for n in names if n not in visited), key=lambda n: (score(n), -names.index(n)))
        )
    settings = request.config.matcher  # the nodes' matching of projections stops where ours would
    pulled = {order[0]: _pull_variable(session, order[0])}
    for i, name in enumerate(order[1:], start=1):
        if not session.stops:
            _filter(session, pulled, order[: i + 1], settings.max_matches, settings.max_steps)
        # after a fallback: the variable's candidates, as push_down pulls them
        pulled[name] = _pull_variable(session, name)
    events = concat(list(pulled.values()), [f"the pull of {v}" for v in pulled])
    # an event may have been pulled for several variables: keep one copy per (node, row), in
    # (node, row) order so that tied timestamps end up in the order every other strategy uses
    keys = np.asarray(events.column(NODE).to_numpy(), np.int64) * (1 << 40) + np.asarray(
        events.column(ROW_ID).to_numpy(), np.int64
    )
    first = np.unique(keys, return_index=True)[1]
    events = events.take(pa.array(first)).drop([NODE, ROW_ID])
    return finish_pull(
        session, with_candidate_halo(session, analysis, events, shipped=True), analysis, schema
    )


NODE = "__dfs_cer_node"


def _filter(
    session: Session, pulled: dict[str, pa.Table], order: list[str], limit: int, steps: int
) -> None:
    """Upload the last pulled variable's events and have the nodes keep the next variable's
    (``order[-1]``) candidates that complete a match of the pattern projected on ``order``. A
    node whose matching of the projection hits a bound (match limit, step budget, memory) keeps
    every candidate: push-down from here on, named in the trace (the result is exact either
    way; the filter only narrows)."""
    name, previous = order[-1], order[-2]
    table = pulled[previous].drop([NODE, ROW_ID])

    def send(c: StorageClient) -> None:
        c.upload(Upload(session.query_id, previous).header(), table)

    session.all("upload", send)
    replies = session.action(
        PushPullReply,
        PushPull(session.query_id, name, tuple(order[:-1]), limit, steps).header(),
    )
    stopped = [
        (c.endpoint, h.unfiltered)
        for c, (h, _) in zip(session.clients, replies, strict=True)
        if h.unfiltered
    ]
    if stopped:
        node, why = stopped[0]
        session.stops.append(
            f"push_down (from {name} on: storage node {node} could not filter {name}'s "
            f"candidates, its matching of the pattern projected on {', '.join(order)} hit a "
            f"bound: {why})"
        )


def _pull_variable(session: Session, name: str) -> pa.Table:
    body = {"query_id": session.query_id, "kind": "pull_variable", "variable": name}
    index = {id(c): i for i, c in enumerate(session.clients)}

    def one(c: StorageClient) -> pa.Table:
        t = c.pull(body)
        return t.append_column(NODE, pa.array(np.full(t.num_rows, index[id(c)], np.int64)))

    tables = session.all(
        "pull_variable",
        one,
        events=lambda ts: sum(t.num_rows for t in ts),
        note=f"events of {name}",
    )
    return session.concat(tables)
