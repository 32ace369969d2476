"""Matching pulled events on the compute node (in process; Spark comes with its own issue)."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from dfs_cer.local import run_outer
from dfs_cer.match.rowpattern import run_row_pattern
from dfs_cer.strategies.base import Matching, PullResult


def match_pulled(result: PullResult, *, outer: bool = True, match_ids: bool = False, **options: Any) -> pa.Table:
    """The query's result over the pulled events: final intervals are matched as independent
    units for contiguous patterns (no match may cross a gap of unpulled rows). Records the
    matching step (engine, matches, seconds, matcher memory) in ``result.trace.matching``.

    ``selection``/``kleene`` choose CER semantics; ``match_ids`` adds the stable match id and
    time span columns; ``outer=False`` returns the MATCH_RECOGNIZE relation without the
    SELECT around it."""
    from dfs_cer.match.cer import run_cer

    analysis = result.analysis
    query = analysis.query
    began = time.perf_counter()
    if query.recognize.all_matches or options.get("selection"):
        engine = "cer"
        out = run_cer(result.events, analysis, match_ids=match_ids,
                      **{k: v for k, v in options.items() if k != "engine"})
    else:
        engine = "rowpattern"
        out = run_row_pattern(result.events, analysis, segments=result.segments, match_ids=match_ids)
    result.trace.matching = Matching(engine, out.matches, time.perf_counter() - began, out.work_bytes)
    return run_outer(query, out.table) if outer else out.table
