"""The compute node's pull strategies (paper §III–IV and its baselines).

- ``pull_all``: every event.
- ``push_down``: every event that passes some variable's independent condition (exact only
  when rows between variables may be skipped; otherwise it falls back to pull_all).
- ``push_pull``: variables one by one; each node keeps the next variable's events that complete
  a match of the pattern projected on the variables pulled so far (uploaded to it).
- ``dfs``: dual filtering with per-node rounds — the nodes send where their rare variables'
  candidates lie (slice points with value hashes), the compute node checks every pair of
  variables on them, sends each node only its part of the interval set for the others when
  that pays in wire bytes, and pulls from each node only its own surviving slices.
- ``dfs_paper``: the paper's dual filtering — Eq. 1 intervals of the first variable in a
  shrinking window filter, shrunk by each later variable's verification (SWF, then window-wise
  join filters for equalities), every filter broadcast to every node, when the cost model says
  the round trip pays; one final pull of the rows inside the final interval set.
- ``naive_dfs``: interval arrays of every variable and exact join pairs in one trip, then a pull.
- ablations of ``dfs_paper``: ``swf_only`` (no join filters), ``dfs_v1`` (exact (value,
  window) tables for join filters), ``dfs_v2`` (interval arrays for the SWF as well).

Every strategy returns events whose matches equal pull_all's; one that cannot be exact for a
query runs the nearest exact one and says so in the trace.

This module is the API: :func:`pull` (the keywords users pass), :func:`run` (a
:class:`~dfs_cer.strategies.request.PullRequest`) and :data:`STRATEGIES`. Each strategy is a
function of the session and the request: the baselines in :mod:`.baselines`, the paper's DFS,
its ablations and naive DFS in :mod:`.dfs`, DFS in :mod:`.sliced`, the steps they share in
:mod:`.steps`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from dfs_cer import interrupt
from dfs_cer.config import Config, StrategyConfig
from dfs_cer.errors import SNAPSHOT_BUSY
from dfs_cer.query import Query
from dfs_cer.strategies.base import DeferredPull, PullResult, Session, Trace, name_stops
from dfs_cer.strategies.baselines import pull_all, push_down, push_pull
from dfs_cer.strategies.dfs import dfs_v1, dfs_v2, naive_dfs, paper_dfs, swf_only
from dfs_cer.strategies.request import PullRequest
from dfs_cer.strategies.sliced import dfs
from dfs_cer.transport.retry import retry_on

Strategy = Callable[[Session, PullRequest], PullResult]


def _naming_stops(strategy: Strategy) -> Strategy:
    """``strategy``, its trace's fallback naming any node-side work that stopped at a bound."""

    @functools.wraps(strategy)
    def run(session: Session, request: PullRequest) -> PullResult:
        return name_stops(session, strategy(session, request))

    return run


STRATEGIES: dict[str, Strategy] = {
    name: _naming_stops(fn)
    for name, fn in {
        "pull_all": pull_all,
        "push_down": push_down,
        "push_pull": push_pull,
        "naive_dfs": naive_dfs,
        "dfs": dfs,
        "dfs_paper": paper_dfs,
        "swf_only": swf_only,
        "dfs_v1": dfs_v1,
        "dfs_v2": dfs_v2,
    }.items()
}


def pull(
    name: str,
    query: Query | str,
    endpoints: Sequence[str],
    token: str,
    *,
    config: Config | StrategyConfig | None = None,
    integer_time_unit: str | None = None,
    event_key: Sequence[str] | None = None,
    dedup: bool | None = None,
    time_ranges: Sequence[tuple[int, int]] | None = None,
    timeout: float | None = None,
    input_filter: str | None = None,
    defer: bool = False,
    defer_min_rows: int = 0,
    snapshot: int | None = None,
    **options: Any,
) -> PullResult:
    """Run pull strategy ``name`` for ``query`` against the storage nodes at ``endpoints``.

    ``config``: the settings (a :class:`~dfs_cer.config.Config`; None: :func:`load_config`, the
    ``DFS_CER_CONFIG`` file and ``DFS_CER__*`` variables over the defaults): ``query.*`` and
    ``strategy.*`` for the pull, ``matcher.*`` for what the nodes match and for
    :func:`~dfs_cer.strategies.matching.match_pulled` on the result; the keywords below win
    over it (``integer_time_unit``, ``event_key``, ``dedup``; ``cost_model`` and
    ``calibration_file`` among the ``options``).

    ``event_key`` (default: the shard sets' own, from ``dfs-cer shard --event-key``; else the whole
    row) identifies an event; with ``dedup`` the matcher drops duplicates that several nodes (or
    one) returned, and ties on time are matched in event key order. ``time_ranges`` (inclusive, in
    the time column's integer units) restricts the query to the rows inside them (incremental
    re-runs). ``input_filter`` (one SQL condition over the table's columns, of the subset in
    :mod:`dfs_cer.query.input_filter`) keeps only the rows passing it: the nodes drop the others
    before anything else, so the query runs as over ``SELECT * FROM t WHERE input_filter``; a node
    that cannot evaluate it exactly refuses (code ``input-filter``). ``timeout`` bounds the whole
    query in seconds (default ``strategy.query_timeout_seconds``; each call also gets
    ``strategy.call_timeout_seconds``). ``snapshot``: the table snapshot every node reads, for nodes
    serving an Iceberg table in place (default: the table's current snapshot when the query starts;
    ``trace.snapshot``).

    Whatever happens, the query is closed on every node; a failure names its round and node.
    When the pull completed but some node did not confirm ``close``, the result is kept and the
    trace's ``warnings`` say so.

    ``defer``: when the final pull needs no halo rows, it is not run; ``result.deferred`` (a
    :class:`DeferredPull`) holds it, the query stays open on the nodes for executors to take it
    in time slices, and the caller must call ``result.deferred.close()`` (inputs of fewer than
    ``defer_min_rows`` rows on the nodes are pulled here all the same)."""
    return run(
        PullRequest.of(
            name,
            query,
            endpoints,
            token,
            integer_time_unit=integer_time_unit,
            event_key=event_key,
            dedup=dedup,
            time_ranges=time_ranges,
            timeout=timeout,
            config=config,
            input_filter=input_filter,
            defer=defer,
            defer_min_rows=defer_min_rows,
            snapshot=snapshot,
            **options,
        )
    )


@interrupt.guarded
def run(request: PullRequest) -> PullResult:
    """Run ``request`` (see :func:`pull`)."""
    deadline: float | None = None

    def once() -> PullResult:
        nonlocal deadline
        left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        session = Session.connect(
            request.endpoints,
            request.token,
            Trace(request.strategy, input_filter=request.input_filter),
            request.settings,
            request.timeout if left is None else left,
            request.event_key,
            request.dedup,
            time_ranges=request.time_ranges,
            snapshot=request.snapshot,
            input_filter=request.input_filter,
            defer=request.defer,
            defer_min_rows=request.defer_min_rows,
        )
        deadline = session.deadline
        result = _pull_once(session, request)
        result.deadline = session.deadline
        return result

    # a node serves running queries on another snapshot of the table: try again shortly (at the
    # then current snapshot, unless one was asked for), within the deadline
    return retry_on((SNAPSHOT_BUSY,), once, lambda: deadline)


def _pull_once(session: Session, request: PullRequest) -> PullResult:
    strategy = STRATEGIES[request.strategy]

    def work() -> PullResult:
        result = strategy(session, request)
        result.config = request.config  # the settings match_pulled matches with
        return result

    if not request.defer:
        return session.finish(work, lambda r: r.trace)
    try:
        result = work()
    except BaseException:
        session.close()
        session.close_connections()
        raise
    if session.deferred is None or result.relation is not None:
        result.trace.warnings.extend(session.close())
        session.close_connections()
        return result
    final = session.deferred
    result.deferred = DeferredPull(
        session,
        list(request.endpoints),
        request.token,
        final.kind,
        final.header,
        final.blobs,
        session.time_span,
        request.settings,
        final.cover,
    )
    return result
