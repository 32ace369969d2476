"""Dual filtering at cloud scale (``dfs``): every node gets only what can touch its own rows.

1. ``open`` tells the compute node each node's candidates per variable and time range.
2. Round 1 (``collect``): the nodes send where the rare variables' candidates lie, as points
   on a slice grid (about a sixteenth of the window) with short hashes of their equality
   columns; no filter travels to the nodes. The compute node checks every pair of variables
   on them (window, order, equalities) until nothing changes (:mod:`dfs_cer.plan.narrow`).
3. Round 2 (``collect``, when it pays in wire bytes): the other variables. Each node gets
   the interval set only where its own time range meets it, and only when that costs less
   than the points it saves; a node with no candidates left there is not called.
4. The final pull asks each node only for its own surviving slices (nodes with none are not
   called), or, where a pull cannot be cut per node (rows the nodes' halo brings, every row
   of a contiguous pattern, executors' slices), for the interval set.

Every step only drops candidates that cannot be in a match, so the result is pull_all's. The
paper's rounds (shrinking window filter, window-wise join filters) are ``dfs_paper`` and the
ablations in :mod:`.dfs`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import ProtocolError
from dfs_cer.filters import IntervalSet
from dfs_cer.filters.points import Points, load_kernels, unpack_points
from dfs_cer.plan.narrow import Grid, Narrow
from dfs_cer.plan.order import variable_order
from dfs_cer.query import Analysis, Role
from dfs_cer.strategies.base import PullResult, Round, Session
from dfs_cer.strategies.dfs import open_for_pruning, paper_dfs
from dfs_cer.strategies.request import PullRequest
from dfs_cer.strategies.steps import (
    Tis,
    candidate_counts,
    final_pull,
    finish_pull,
    pull_everything,
    pushdown_events,
    with_candidate_halo,
)
from dfs_cer.transport.protocol import Collect, Gather
from dfs_cer.transport.replies import CollectReply, OpenReply

#: a variable joins the first round when it has at most this many times the rarest's candidates
RARE_FACTOR = 3.0
#: wire bytes of a point before its hashes (a varint step, after zstd), and of a request's and a
#: reply's framing and header per node
POINT_BYTES = 1.1
ROUND_BYTES = 160
#: a final pull's slice runs, beyond push-down's ticket
SLICES_BYTES = 60
#: compressed bytes of a pulled row against its Arrow size, with zstd or lz4 on the wire
COMPRESSED_SHARE = 0.35


def dfs(session: Session, request: PullRequest) -> PullResult:
    """DFS with per-node rounds (see the module docstring)."""
    if session.group is not None:  # queries run together share the paper's rounds
        return paper_dfs(session, request)
    # the points' decoder loads while the nodes open the query (the first kernel a process
    # loads also starts numba's compiler, a sixth of a second)
    threading.Thread(target=load_kernels, name="dfs-cer kernels", daemon=True).start()
    opened = open_for_pruning(session, request)
    if isinstance(opened, PullResult):
        return opened
    analysis, headers, schema = opened
    window = analysis.window_units
    assert window is not None
    trace = session.trace
    counts = candidate_counts(headers)
    names = [v.name for v in analysis.filter_variables]
    empty = next((n for n in names if counts.get(n, 0) == 0), None)
    if empty is not None:
        trace.fallback = f"no match possible: {empty} has no candidate event"
        return finish_pull(session, pa.table({}), analysis, schema)
    mins = [int(h.min_ts) for h in headers if h.min_ts is not None]
    maxs = [int(h.max_ts) for h in headers if h.max_ts is not None]
    grid = Grid.of(min(mins), window, max(maxs))
    narrow = Narrow(analysis, grid, schema)
    narrow.bits = hash_bits(narrow, counts, max(maxs) - min(mins))
    order = variable_order(analysis, counts)
    optional = [
        v.name for v in analysis.variables if v.role is Role.OPTIONAL and counts.get(v.name, 0)
    ]
    first = [order[0]] + [v for v in order[1:] if counts[v] <= RARE_FACTOR * counts[order[0]]]
    cheaper = _pushdown_is_cheaper(session, narrow, headers, first)
    navigating = analysis.prev_reach or analysis.next_reach
    adaptive = request.options.cost_model == "adaptive"
    if cheaper is not None and adaptive and analysis.skippable and not navigating:
        trace.fallback = f"push_down ({cheaper})"
        return finish_pull(session, pushdown_events(session, analysis, headers), analysis, schema)
    span = int(grid.slices(np.array([max(maxs)]))[0]) + 1
    whole = _covers_all(narrow, analysis, counts, span)
    if adaptive and whole is not None and not analysis.skippable:
        return pull_everything(session, analysis, schema, f"pull_all ({whole})")
    _collect(session, narrow, headers, first, None, None)
    narrow.prune()
    runs = narrow.runs()
    covered = runs.total_length() / span
    if adaptive and not analysis.skippable and covered >= COVERS_ALL:
        return pull_everything(
            session,
            analysis,
            schema,
            f"pull_all (the interval set covers {covered:.0%} of the nodes' time after the "
            "first round: every row inside it matters to a pattern of consecutive rows)",
        )
    rest = [v for v in order if v not in first] + optional
    if rest and not runs.is_empty:
        planned = _second_round(session, narrow, headers, first, rest, runs, request)
        if planned is not None:
            _collect(session, narrow, headers, rest, *planned)
            narrow.prune()
            runs = narrow.runs()
    narrow.keep_inside(runs)
    if runs.is_empty:
        trace.fallback = "no match possible: the interval set is empty after the pairwise checks"
        return finish_pull(session, pa.table({}), analysis, schema)
    uncollected = [n for n in names + optional if n not in narrow.variables]
    tis = Tis.of_slices(grid.wire(runs), window)
    session.expect_rows(session.rows_total * min(1.0, runs.total_length() / max(1, span)))
    if _per_node(session, analysis):
        return _pull_per_node(session, narrow, tis, analysis, schema, headers, uncollected)
    return final_pull(session, tis, analysis, schema, headers)


#: the share of the nodes' time an interval set may cover before a pattern of consecutive rows
#: pulls every row instead (its rounds would buy nothing)
COVERS_ALL = 0.95


def _covers_all(
    narrow: Narrow, analysis: Analysis, counts: dict[str, int], span: int
) -> str | None:
    """Why the interval set will cover about every slice (so a pattern of consecutive rows would
    pull every row after its rounds), or None: each required variable's candidates, spread over
    the nodes' time, put an interval of its role's reach around each; the rarest of them bounds
    the intersection (``1 - exp(-n * reach / span)`` covered, for ``n`` candidates placed at
    random)."""
    least: tuple[float, str, int] | None = None
    for v in analysis.filter_variables:
        if v.role not in (Role.HEAD, Role.TAIL, Role.MIDDLE):
            continue
        lo, hi = narrow.grid.role_offsets(v.role)
        n = counts.get(v.name, 0)
        share = 1.0 - float(np.exp(-n * (hi - lo + 1) / max(1, span)))
        if least is None or share < least[0]:
            least = (share, v.name, n)
    if least is None or least[0] < COVERS_ALL:
        return None
    share, name, n = least
    return (
        f"the interval set would cover ~{share:.0%} of the nodes' time: {name}, the rarest "
        f"variable, has {n:,} candidates in {span:,} time slices, a window spanning "
        f"{narrow.grid.reach + 1}; every row inside it matters to a pattern of consecutive rows"
    )


def hash_bits(narrow: Narrow, counts: dict[str, int], span: int) -> int:
    """Bits of the value hashes: enough that a candidate's partners within the window (their
    expected number, over every equality and PARTITION BY) match its hash by chance about once
    in 64."""
    grid, partners = narrow.grid, 1.0
    slices = max(1.0, (span + 1) / grid.quantum)
    for e in narrow.analysis.equalities:
        for u in (e.left_variable, e.right_variable):
            partners = max(partners, counts.get(u, 0) * (2 * grid.reach + 1) / slices)
    if narrow.partition_columns:  # every pair of variables is an equality there
        for n in counts.values():
            partners = max(partners, n * (2 * grid.reach + 1) / slices)
    return int(min(16, max(4, np.ceil(np.log2(partners * 64)))))


def _pushdown_is_cheaper(
    session: Session, narrow: Narrow, headers: list[OpenReply], first: list[str]
) -> str | None:
    """Why pulling every candidate costs fewer wire bytes than what DFS adds at least (the first
    round's framing on every node that holds any, the points, the slices in each final pull's
    request), or None: with a handful of candidates per node DFS cannot pay."""
    compressed = session.clients[0].compression not in (None, "none")
    share = COMPRESSED_SHARE if compressed else 1.0
    rows = points = 0.0
    for h in headers:
        if any(_count(h, v) for v in first):
            points += ROUND_BYTES + sum(_count(h, v) * _point_bytes(narrow, v) for v in first)
        if h.rows:  # its final pull's request carries its slices
            points += SLICES_BYTES
        rows += h.rows * h.row_bytes * share
    if points < rows:
        return None
    return (
        f"pulling the {sum(h.rows for h in headers):,} candidates, ~{rows:,.0f} B, costs less "
        f"than DFS's first round, ~{points:,.0f} B"
    )


def _per_node(session: Session, analysis: Analysis) -> bool:
    """Can the final pull ask each node for its own slices? Candidates only (a pattern that may
    skip rows), no halo rows to bring for PREV/NEXT, and no executors taking it in slices."""
    return (
        analysis.skippable
        and not (analysis.prev_reach or analysis.next_reach)
        and not session.defer
    )


def _pull_per_node(
    session: Session,
    narrow: Narrow,
    tis: Tis,
    analysis: Analysis,
    schema: pa.Schema,
    headers: list[OpenReply],
    uncollected: list[str],
) -> PullResult:
    """Each node's own slices: those of its surviving points, and, where it holds candidates of
    a variable never collected, the interval set within its time range."""
    assert tis.runs is not None
    grid = narrow.grid
    requests: dict[int, tuple[dict[str, Any], list[bytes]]] = {}
    for i, h in enumerate(headers):
        mine = narrow.node_runs(i, tis.runs.runs)
        if h.min_ts is not None and h.max_ts is not None and any(_count(h, v) for v in uncollected):
            lo, hi = grid.slices(np.array([int(h.min_ts), int(h.max_ts)]))
            mine = mine.union(tis.runs.runs.intersection(IntervalSet([lo], [hi])))
        if not mine.is_empty:
            requests[i] = ({"tis": "slices"}, [grid.wire(mine).to_bytes()])
    silent = len(session.clients) - len(requests)
    note = "each node's own surviving slices" + (
        f" ({silent} node(s) with none not called)" if silent else ""
    )
    events = session.pull_each("pull", requests, note=note)
    if events.num_columns == 0:
        events = schema.empty_table()
    events = with_candidate_halo(session, analysis, events, shipped=True)
    return finish_pull(session, events, analysis, schema)


def _point_bytes(narrow: Narrow, name: str) -> float:
    return POINT_BYTES + len(narrow.hashed_columns(name)) * narrow.bits / 8


def _second_round(
    session: Session,
    narrow: Narrow,
    headers: list[OpenReply],
    first: list[str],
    rest: list[str],
    runs: IntervalSet,
    request: PullRequest,
) -> tuple[dict[int, bytes | None], dict[str, Any]] | None:
    """Per node: the interval set it gets (its part of it, where that saves more points than it
    costs) or None (it sends every point), nodes with nothing to send left out; None when the
    round is not worth its wire bytes against pulling those variables' candidates inside the
    interval set."""
    grid = narrow.grid
    plan: dict[int, bytes | None] = {}
    estimate = skip = 0.0
    compressed = session.clients[0].compression not in (None, "none")
    row_share = COMPRESSED_SHARE if compressed else 1.0
    for i, h in enumerate(headers):
        if h.min_ts is None or h.max_ts is None:
            continue
        n = {v: h.variables[v].count if v in h.variables else 0 for v in rest}
        if not any(n.values()):
            continue
        lo, hi = grid.slices(np.array([int(h.min_ts), int(h.max_ts)]))
        mine = runs.intersection(IntervalSet([lo], [hi]))
        if mine.is_empty:
            continue  # every candidate it has of them lies outside the interval set
        every = sum(n[v] * _point_bytes(narrow, v) for v in rest)
        sent, blob = _cheapest_part(grid, mine, lo, hi, every)
        plan[i] = blob
        estimate += ROUND_BYTES + sent
        # skipped, the final pull asks the node for its candidates of them inside its part of
        # the interval set (sent to it); run, only for its own few surviving slices
        exact = grid.wire(mine).to_bytes()
        cover = mine.total_length() / max(1, hi - lo + 1)
        skip += cover * sum(n.values()) * h.row_bytes * row_share + len(exact)
    decision: dict[str, Any] = {
        "variables": rest,
        "estimated_bytes": round(float(estimate)),
        "pull_instead_bytes": round(float(skip)),
        "nodes": len(plan),
        "interval_set_sent_to": sum(1 for b in plan.values() if b is not None),
    }
    model = request.options.cost_model
    run = bool(model == "always_on" or (model != "always_off" and estimate < skip))
    if run and model == "adaptive":  # fewer bytes, but does the round cost more time than they?
        timed = _round_time(session.trace.rounds, headers, first, rest, skip - estimate)
        if timed is not None:
            decision.update(timed)
            run = timed["saved_seconds"] > timed["round_seconds"]
    decision["run"] = run
    if not run:
        session.trace.rounds.append(
            Round("skip", 0, 0, 0, 0.0, decision, f"cost model skipped {', '.join(rest)}")
        )
        return None
    return plan, decision


def _round_time(
    rounds: list[Round],
    headers: list[OpenReply],
    first: list[str],
    rest: list[str],
    saved_bytes: float,
) -> dict[str, float] | None:
    """What a second collect round costs in time and what its bytes would save, from what the
    query's rounds so far took: the nodes' work grows with the candidates they turn into points
    (the first collect's node time, scaled by candidates), a round trip costs at least the
    least wire time of the rounds so far, and bytes cost the first collect's rate (its reply
    over its wire time: a lower bound of the link's). None when a node did not say its time."""
    collect = next((r for r in reversed(rounds) if r.action == "collect"), None)
    if collect is None or collect.node_seconds is None or collect.wire_seconds is None:
        return None
    before = sum(_count(h, v) for h in headers for v in first)
    now = sum(_count(h, v) for h in headers for v in rest)
    nodes = collect.node_seconds * (now / before if before else 1.0)
    # every round trip so far took at least this outside the nodes
    latency = min(r.wire_seconds for r in rounds if r.wire_seconds is not None)
    rate = collect.bytes_to_cn / max(collect.wire_seconds, 1e-4)
    return {
        "round_seconds": nodes + latency,
        "saved_seconds": max(0.0, saved_bytes) / max(rate, 1.0),
        "rate_bytes_per_s": rate,
    }


def _cheapest_part(
    grid: Grid, mine: IntervalSet, lo: int, hi: int, every: float
) -> tuple[float, bytes | None]:
    """What a node's round-2 request costs at least, with what it carries: nothing (the node
    sends every point, ``every`` bytes), or its part of the interval set with holes of up to
    2^k - 1 slices filled (a coarser set is smaller, and lets more points through)."""
    best: tuple[float, bytes | None] = (every, None)
    span = max(1, hi - lo + 1)
    for k in range(0, 12):
        part = mine.bridged((1 << k) - 1)
        blob = grid.wire(part).to_bytes()
        sent = len(blob) + part.total_length() / span * every
        if sent < best[0]:
            best = (sent, blob)
        if len(part) <= 1:
            break
    return best


def _collect(
    session: Session,
    narrow: Narrow,
    headers: list[OpenReply],
    names: list[str],
    plan: dict[int, bytes | None] | None,
    decision: dict[str, Any] | None,
) -> None:
    """One ``collect`` round over ``names``: each node's points added to ``narrow``."""
    gather = tuple(Gather(v, narrow.hashed_columns(v)) for v in names)
    nodes = (
        [i for i, h in enumerate(headers) if any(_count(h, v) for v in names)]
        if plan is None
        else sorted(plan)
    )
    base, quantum, bits = narrow.grid.base, narrow.grid.quantum, narrow.bits

    def one(i: int) -> tuple[dict[str, Any], list[bytes]]:
        blob = None if plan is None else plan[i]
        request = Collect(session.query_id, base, quantum, gather, bits, blob is not None)
        return request.header(), [] if blob is None else [blob]

    replies = (
        session.action(
            CollectReply,
            {},
            per_node=one,
            only=nodes,
            decision=decision,
            note=f"points of {', '.join(names)} from {len(nodes)} node(s)",
        )
        if nodes  # none: no node holds a candidate of them inside the interval set
        else []
    )
    columns = [len(g.hashed) for g in gather]
    for i, (_, blobs) in zip(nodes, replies, strict=True):
        if len(blobs) != 1:
            raise ProtocolError(f"collect: a node sent {len(blobs)} blobs, expected one")
        for v, points in zip(names, unpack_points(blobs[0], columns, bits), strict=True):
            narrow.add(v, i, points)
    for v in names:  # a node not called holds none of them
        for i in range(len(headers)):
            if v not in narrow.variables or i not in narrow.variables[v].points:
                narrow.add(v, i, Points(np.empty(0, np.int64), _no_hashes(narrow, v)))


def _count(h: OpenReply, v: str) -> int:
    return h.variables[v].count if v in h.variables else 0


def _no_hashes(narrow: Narrow, v: str) -> np.ndarray:
    return np.zeros((len(narrow.hashed_columns(v)), 0), np.uint8)
