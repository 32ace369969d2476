"""One time slice of a query's input matched on its own (see :mod:`dfs_cer.plan.slices`)."""

from __future__ import annotations

import pyarrow as pa

from dfs_cer.config import MatcherConfig
from dfs_cer.events.time import time_values
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.match.rowpattern.engine import run_row_pattern
from dfs_cer.plan.slices import TimeSlice, owned
from dfs_cer.query import Analysis


def match_slice(
    table: pa.Table, analysis: Analysis, piece: TimeSlice, matcher: MatcherConfig
) -> pa.Table:
    """The MATCH_RECOGNIZE relation rows of the matches ``piece`` owns, from ``table`` (any
    rows: those outside the slice's read range are left out first)."""
    mr = analysis.query.recognize
    times = time_values(table, mr.order_by[0].column) if table.num_rows else None
    if times is not None:
        lo, hi = piece.read
        table = table.filter(pa.array((times >= lo) & (times <= hi)))
    if mr.all_matches:
        found = run_cer(
            table,
            analysis,
            match_ids=True,
            kleene=matcher.kleene,
            max_matches=matcher.max_matches,
            on_limit=matcher.on_limit,
            max_steps=matcher.max_steps,
        ).table
    else:
        found = run_row_pattern(
            table,
            analysis,
            match_ids=True,
            max_matches=matcher.max_matches,
            on_limit=matcher.on_limit,
            max_steps=matcher.max_steps,
            max_seconds=matcher.max_seconds,
        ).table
    return owned(found, piece)
