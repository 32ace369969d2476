"""Independent time slices of one query: the Spark data source's parallel reads (no I/O here).

A query whose every match depends only on rows within a window of it (the queries a late file
recomputes in place, :func:`dfs_cer.plan.changelog.incremental_reason`; and no PREV/NEXT, which
read rows at any distance) has exactly the same matches when its input is cut in time: slice
``k`` owns the matches that *start* in ``[lo, hi)`` and reads the rows of ``[lo - W, hi - 1 + W]``
(``W`` the window). That holds every row of such a match, and every row that decides whether it
is one: a leading negation (``~B A C``) or a maximal Kleene set (``A+`` under ``kleene =
maximal``) looks back up to a window from the match's last row. So each slice is read, pulled
and matched on its own, with no exchange between slices, and their union is the query's
relation. The first slice owns every start before it and the last every start after it (rows
committed after the plan was made).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dfs_cer.events.identity import ID_COLUMNS
from dfs_cer.plan.changelog import incremental_reason
from dfs_cer.query import Analysis, Query


@dataclass(frozen=True)
class TimeSlice:
    """Owns the matches starting in ``[lo, hi)``; reads the rows of ``read`` (inclusive), in
    the time column's integer units."""

    lo: int
    hi: int
    read: tuple[int, int]


def slice_reason(query: Query, analysis: Analysis, simple: bool) -> str | None:
    """None when the query's relation is the union of its time slices' (``simple``: the
    statement is one clause over the table); else why it is read as one piece."""
    if not simple:
        return "the statement is more than one MATCH_RECOGNIZE clause over the table"
    outer = query.outer
    if outer.select != ("*",) or outer.distinct or outer.order_by or outer.limit is not None:
        return "the SELECT around MATCH_RECOGNIZE is not a plain SELECT * (it reads every match)"
    if outer.where is not None and _reads_the_relation(outer.where):
        return "the WHERE around MATCH_RECOGNIZE holds a subquery (it reads every match)"
    if analysis.prev_reach or analysis.next_reach:
        return "PREV/NEXT read rows before or after a slice"
    if query.recognize.order_by[0].descending:
        return "ORDER BY ... DESC"
    return incremental_reason(analysis, analysis.window_units, False)


#: the first slice owns every start from int64's first value, the last up to its last one
#: (``hi`` is exclusive: one past int64, a Python integer); reads stay inside int64
FIRST, PAST_LAST = -(2**63), 2**63


def _reads_the_relation(where: str) -> bool:
    """Whether a WHERE condition holds a subquery (EXISTS, IN (SELECT ...), ALL (...)): it would
    read the other matches, which another slice has."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(where)
    except sqlglot.errors.ParseError:
        return True  # unknown: read in one piece
    return tree.find(exp.Select) is not None


def time_slices(first: int, last: int, window: int, count: int) -> list[TimeSlice]:
    """At most ``count`` slices covering ``[first, last]`` (the first and last open-ended),
    each at least a window wide (a narrower one would read mostly its neighbours' rows)."""
    span = last - first + 1
    count = max(1, min(count, span // max(1, window)))
    cuts = [first + span * i // count for i in range(count + 1)]
    cuts[0], cuts[-1] = FIRST, PAST_LAST
    return [
        TimeSlice(lo, hi, (max(FIRST, lo - window), min(PAST_LAST - 1, hi - 1 + window)))
        for lo, hi in itertools.pairwise(cuts)
        if hi > lo
    ]


def owned(relation: pa.Table, piece: TimeSlice) -> pa.Table:
    """The rows of the matches ``piece`` owns (by their start), without the match id columns."""
    start = np.asarray(
        relation.column(ID_COLUMNS[1])
        .fill_null(np.iinfo(np.int64).min)
        .to_numpy(zero_copy_only=False),
        np.int64,
    )
    keep = (start >= piece.lo) & (start < piece.hi)
    return relation.filter(pa.array(keep)).drop_columns(
        [c for c in ID_COLUMNS if c in relation.column_names]
    )
