"""Exact time chunks of a dense input, for distributed matching.

A log without PARTITION BY (or with one huge partition) has no natural place to split. It is cut
into time chunks; chunk ``k`` *owns* the matches whose first row lies in
``[starts[k], starts[k+1])`` and reads a little more: ``lead`` time units before (rows PREV can
reach, never a match's start) and ``tail`` after (the WITHIN window, so an owned match can end
there, plus the rows NEXT can reach). Each chunk is matched alone.

Where a match depends on where the previous one ended (AFTER MATCH SKIP PAST LAST ROW, TO
FIRST/LAST), a chunk computed from scratch can be wrong: the previous chunk's last match may end
inside it, and the single run would resume there. Chunks therefore report, per partition, where
matching resumes after their last match when that lies past their end (and, for ALL ROWS ... WITH
UNMATCHED ROWS, the last matched row). :func:`required_states` replays the single run's order
over the reports and says which chunks must be re-run from which position; the re-run chunks
report again, until every chunk was computed from the state the chunks before it leave
(:func:`stale_chunks`). Rows are named across chunks by (partition, time, rank among the rows of
that partition and time in the engine's canonical order), which every chunk holding the row
computes alike.

Anchors hold only at the input's edges: a chunk that leaves out rows before (after) the ones it
reads is *cut* there (:meth:`ChunkPlan.cut`, from the input's exact first and last time), and
``^`` (``$``) never holds at its edge. A measure MATCH_NUMBER() alone is numbered per chunk and
renumbered after the merge (:func:`renumbered`). Patterns that cannot be split this way (no
WITHIN, ORDER BY ... DESC, MATCH_NUMBER() in DEFINE or an expression, PREV/NEXT or anchors
across partitions, anchors without the input's exact first and last time) run as one chunk, or
one chunk per group of partitions; :func:`split_reason` says why.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from dfs_cer.pattern.properties import has_anchor
from dfs_cer.query import Analysis
from dfs_cer.query.expr import MatchNumber, walk

#: "minus/plus infinity" for times: int64's ends (times may sit anywhere in int64; sums with a
#: lead or tail are Python integers, or clamped before they are made in numpy)
NEG = int(np.iinfo(np.int64).min)
POS = int(np.iinfo(np.int64).max)


def owns(ts: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Times in the owned range ``[lo, hi)``; the last chunk's range, ending at :data:`POS`,
    holds :data:`POS` too (no time lies beyond it)."""
    ts = np.asarray(ts)
    return (ts >= lo) & ((ts < hi) | (hi >= POS))


Key = tuple[int, int]  # (time, rank): a row's place within its partition
Part = tuple[Hashable, ...]  # a partition's PARTITION BY values (() without PARTITION BY)


@dataclass(frozen=True)
class State:
    """What the chunks before leave for one partition: matches may start only at rows with key
    >= ``cursor``; rows with key <= ``cover`` were matched already (not reported unmatched)."""

    cursor: Key | None = None
    cover: Key | None = None


@dataclass(frozen=True)
class ChunkPlan:
    """Chunk ``k`` owns times ``[starts[k], starts[k+1])`` (the first from ``NEG``, the last to
    ``POS``) and reads ``[owned start - lead, owned end + tail]``. ``mode`` is ``time`` (these
    chunks), ``partition`` (``chunks`` groups of whole partitions, by hash) or ``single``."""

    mode: str
    starts: np.ndarray
    lead: int = 0
    tail: int = 0
    reason: str | None = None
    #: the earliest and latest time in the input (a chunk reaching them needs no more lead/tail)
    first: int = NEG
    last: int = POS
    groups: int = 1
    #: chunks whose lead/tail was widened (a re-run found too few rows for PREV/NEXT)
    widened: tuple[int, ...] = field(default=())
    #: (chunk, time): a re-run of the chunk reads no rows after that time (it expects to meet its
    #: fresh run early; see :func:`dfs_cer.match.chunked.rerun_chunk`)
    limits: tuple[tuple[int, int], ...] = field(default=())

    def __post_init__(self) -> None:
        starts = np.asarray(self.starts, np.int64)
        if self.mode == "time" and starts.size > 1 and (starts[1:] == POS).any():
            # a chunk from POS would own POS alone, which the chunk before it holds already (an
            # owned range ending at POS holds POS): matches at POS were found twice
            object.__setattr__(self, "starts", np.append(starts[:1], starts[1:][starts[1:] < POS]))

    def limit(self, k: int) -> int | None:
        for chunk, until in self.limits:
            if chunk == k:
                return until
        return None

    def limited(self, limits: Mapping[int, int]) -> ChunkPlan:
        return replace(self, limits=tuple(sorted((int(k), int(v)) for k, v in limits.items())))

    @property
    def chunks(self) -> int:
        return int(self.starts.size) if self.mode == "time" else self.groups

    def owned(self, k: int) -> tuple[int, int]:
        if self.mode != "time":
            return NEG, POS
        lo = NEG if k == 0 else int(self.starts[k])
        hi = POS if k + 1 >= self.starts.size else int(self.starts[k + 1])
        return lo, hi

    def reads(self, k: int) -> tuple[int, int]:
        lo, hi = self.owned(k)
        until = self.limit(k)
        end = min(POS, hi + self.tail)
        return max(NEG, lo - self.lead), end if until is None else min(end, until)

    def cut(self, k: int) -> tuple[bool, bool]:
        """Does chunk ``k`` leave out rows before / after the ones it reads? (``^`` / ``$`` then
        never hold at its first / last row.) Exact when ``first``/``last`` are the input's exact
        first and last times, as :func:`plan_chunks` requires of plans for anchored patterns."""
        if self.mode != "time":
            return False, False
        lo, hi = self.reads(k)
        return lo > self.first, hi < self.last

    def wider(self, before: bool = True, after: bool = True) -> ChunkPlan:
        """The same chunks reading further back (``before``: PREV found too few rows) or further
        ahead (``after``: NEXT did): eight times as far, up to all of int64 (a span of 2**64
        reaches every time from any time)."""
        cap = 2**64
        lead = min(cap, 8 * self.lead + 1) if before else self.lead
        tail = min(cap, self.tail + 8 * max(self.tail, 1)) if after else self.tail
        return replace(self, lead=lead, tail=tail)


def split_reason(analysis: Analysis) -> str | None:
    """Why the input cannot be cut into time chunks (None: it can)."""
    mr = analysis.query.recognize
    if not mr.order_by:
        return "no ORDER BY: rows have no time to cut at"
    if mr.order_by[0].descending:
        return "ORDER BY ... DESC: chunks are cut in ascending time"
    numbered = renumbered(analysis)
    exprs = [
        *(m.expr for m in mr.measures if m.name not in numbered),
        *(d.condition for d in mr.definitions),
    ]
    if any(isinstance(n, MatchNumber) for e in exprs for n in walk(e)):
        return (
            "MATCH_NUMBER() in DEFINE, ALL MATCHES or an expression depends on the earlier "
            "matches of the whole partition (a measure MATCH_NUMBER() alone is renumbered after "
            "the chunks)"
        )
    if analysis.window_units is None:
        return "no WITHIN: a match may span the whole input"
    if mr.partition_by and (analysis.prev_reach or analysis.next_reach):
        return (
            "PREV/NEXT under PARTITION BY: a chunk cannot tell how far back a partition's rows go"
        )
    if mr.partition_by and has_anchor(mr.pattern):
        return (
            "^ or $ under PARTITION BY: a chunk cannot tell where a partition's rows begin or end"
        )
    return None


def renumbered(analysis: Analysis) -> tuple[str, ...]:
    """The measures that are MATCH_NUMBER() alone (not under ALL MATCHES): chunks number their
    own matches from 1 and the merge renumbers them in the order of the matches' first rows."""
    mr = analysis.query.recognize
    if mr.all_matches:
        return ()
    return tuple(m.name for m in mr.measures if isinstance(m.expr, MatchNumber))


def time_quantiles(mins: np.ndarray, maxs: np.ndarray, rows: np.ndarray, cuts: int) -> np.ndarray:
    """``cuts - 1`` interior boundaries splitting the rows about evenly, from per-block time
    ranges (parquet row-group statistics, or sorted runs): each block counts as uniform over
    its range. Approximate balance only; exactness never depends on where the cuts fall."""
    mins, maxs = np.asarray(mins, np.float64), np.asarray(maxs, np.float64)
    rows = np.asarray(rows, np.float64)
    if cuts <= 1 or rows.sum() == 0:
        return np.zeros(0, np.int64)
    steps = 16
    grid = np.linspace(0.0, 1.0, steps)
    points = (mins[:, None] + (maxs - mins)[:, None] * grid[None, :]).ravel()
    weights = np.repeat(rows / steps, steps)
    order = np.argsort(points, kind="stable")
    points, cum = points[order], np.cumsum(weights[order])
    targets = cum[-1] * np.arange(1, cuts) / cuts
    cut = points[np.minimum(np.searchsorted(cum, targets), points.size - 1)]
    # inside int64 (float64's 2**63 is not): a cut only balances the chunks
    return np.unique(np.clip(np.floor(cut), -(2.0**63), 2.0**63 - 1024).astype(np.int64))


def plan_chunks(
    analysis: Analysis,
    *,
    mins: Sequence[int],
    maxs: Sequence[int],
    rows: Sequence[int],
    chunks: int,
    nulls: int = 0,
    exact: bool = True,
) -> ChunkPlan:
    """Cut an input with the given per-block time ranges into about ``chunks`` time chunks
    (when the query allows, else groups of partitions or one chunk). ``exact``: the smallest of
    ``mins`` and the largest of ``maxs`` are times of rows of the input (not only bounds), which
    anchored patterns need to tell where the input begins and ends."""
    reason = split_reason(analysis)
    if reason is None and nulls:
        reason = f"the time column has {nulls} NULL values (they sort after every time)"
    if reason is None and not exact and has_anchor(analysis.query.recognize.pattern):
        reason = "^ or $ needs the input's exact first and last time, and only bounds are known"
    total = int(np.sum(rows)) if len(rows) else 0
    first = int(min(mins)) if len(mins) else NEG
    last = int(max(maxs)) if len(maxs) else POS
    mr = analysis.query.recognize
    if reason is not None:
        if mr.partition_by:
            return ChunkPlan(
                "partition", np.zeros(1, np.int64), reason=reason, groups=max(1, chunks)
            )
        return ChunkPlan("single", np.zeros(1, np.int64), reason=reason)
    cuts = time_quantiles(
        np.asarray(mins), np.asarray(maxs), np.asarray(rows), max(1, min(chunks, total // 64 + 1))
    )
    starts = np.concatenate([[NEG], cuts[cuts > first]]).astype(np.int64)
    gap = (last - first) / max(total, 1) if total else 1.0  # mean time between rows
    lead = int(np.ceil(8 * analysis.prev_reach * gap)) + 1 if analysis.prev_reach else 0
    extra = int(np.ceil(8 * analysis.next_reach * gap)) + 1 if analysis.next_reach else 0
    assert analysis.window_units is not None
    return ChunkPlan(
        "time", starts, lead=lead, tail=int(analysis.window_units) + extra, first=first, last=last
    )


def assign(
    ts: np.ndarray, plan: ChunkPlan, only: Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(row, chunk) pairs: every chunk whose read range holds the row's time (a row near a
    boundary goes to both sides). ``only`` keeps the pairs of those chunks."""
    ts = np.asarray(ts, np.int64)
    if plan.mode != "time":
        raise ValueError("assign() cuts time chunks; partition groups are hashed")
    k = plan.starts.size
    starts = plan.starts.copy()
    starts[0] = NEG
    ends = np.append(starts[1:], POS)
    # each chunk's read range in Python integers, then stopped at int64's ends: a lead or tail
    # may reach past int64 (a window as wide as the type plus NEXT's reach); one per chunk
    first = np.array([max(NEG, int(t) - plan.lead) for t in starts], np.int64)
    last = np.array([min(POS, int(t) + plan.tail) for t in ends], np.int64)
    hi = np.searchsorted(first, ts, side="right") - 1
    lo = np.searchsorted(last, ts, side="left")
    hi, lo = np.clip(hi, 0, k - 1), np.clip(lo, 0, k - 1)
    count = np.maximum(hi - lo + 1, 0)
    rows = np.repeat(np.arange(ts.size, dtype=np.int64), count)
    offset = np.arange(rows.size, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    chunk = np.repeat(lo, count) + offset
    if only is not None:
        keep = np.isin(chunk, np.asarray(list(only), np.int64))
        rows, chunk = rows[keep], chunk[keep]
    if plan.limits:
        until = np.full(k, POS, np.int64)
        for c, t in plan.limits:
            if 0 <= c < k:
                until[c] = t
        keep = ts[rows] <= until[chunk]
        rows, chunk = rows[keep], chunk[keep]
    return rows, chunk


@dataclass(frozen=True)
class Report:
    """A chunk's word about one partition: where matching resumes after its last match and its
    last matched row, each only when it lies past the chunk's end."""

    part: Part
    resume: Key | None
    cover: Key | None


def required_states(
    plan: ChunkPlan, reports: Mapping[int, Sequence[Report]]
) -> list[dict[Part, State]]:
    """The state each chunk must start from, replaying the single run's order over the chunks'
    reports (only states that reach into a chunk are kept)."""
    carried: dict[Part, State] = {}
    out: list[dict[Part, State]] = []
    for k in range(plan.chunks):
        lo = (plan.owned(k)[0], 0)
        here = {}
        for part, s in carried.items():
            cursor = s.cursor if s.cursor is not None and s.cursor > lo else None
            cover = s.cover if s.cover is not None and s.cover >= lo else None
            if cursor is not None or cover is not None:
                here[part] = State(cursor, cover)
        out.append(here)
        carried = dict(here)
        for r in reports.get(k, ()):
            old = carried.get(r.part, State())
            cover = (
                old.cover
                if r.cover is None
                else (r.cover if old.cover is None else max(old.cover, r.cover))
            )
            carried[r.part] = State(r.resume if r.resume is not None else old.cursor, cover)
    return out


def stale_chunks(
    required: Sequence[Mapping[Part, State]], computed: Sequence[Mapping[Part, State]]
) -> list[int]:
    """Chunks computed from another state than the one the chunks before them now leave."""
    return [
        k
        for k, (want, have) in enumerate(zip(required, computed, strict=True))
        if dict(want) != dict(have)
    ]


def settle(
    plan: ChunkPlan, computed: list[dict[Part, State]], reports: Mapping[int, Sequence[Report]]
) -> list[int]:
    """The chunks to re-run now (their ``computed`` states updated to the required ones); an
    empty list when every chunk ran from the state the chunks before it leave."""
    required = required_states(plan, reports)
    todo = stale_chunks(required, computed)
    for k in todo:
        computed[k] = required[k]
    return todo


def pick_reports(
    fresh: Sequence[Report],
    fresh_last: int | None,
    rerun: Sequence[Report] | None,
    since: int | None,
) -> list[Report]:
    """A chunk's reports: its re-run's, or the fresh run's where the re-run met it (at ``since``)
    before the fresh run's last match started (from there on the two are one run)."""
    if rerun is None:
        return list(fresh)
    if since is not None and fresh_last is not None and fresh_last >= since:
        return list(fresh)
    return list(rerun)
