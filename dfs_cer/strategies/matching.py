"""Matching pulled events on the compute node (in process; Spark comes with its own issue)."""

from __future__ import annotations

import time

import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.config import Config, load_config
from dfs_cer.errors import ConfigError
from dfs_cer.local import run_outer
from dfs_cer.match.rowpattern.engine import run_row_pattern
from dfs_cer.options import SELECTIONS
from dfs_cer.strategies.base import Matching, PullResult


@interrupt.guarded
def match_pulled(
    result: PullResult,
    *,
    outer: bool = True,
    match_ids: bool = False,
    selection: str | None = None,
    kleene: str | None = None,
    max_matches: int | None = None,
    on_limit: str | None = None,
    config: Config | None = None,
) -> pa.Table:
    """The query's result over the pulled events: final intervals are matched as independent
    units for contiguous patterns (no match may cross a gap of unpulled rows). Records the
    matching step (engine, matches, seconds, matcher memory) in ``result.trace.matching``.

    ``selection``/``kleene`` choose CER semantics (the CER engine runs ALL MATCHES and
    selections); ``max_matches``/``on_limit`` bound either engine. Settings not given come from
    ``config``: by default the settings the pull ran with (``result.config``; a result built by
    hand: :func:`load_config`): ``matcher.*`` for the engines, ``query.outer_dialect`` for the
    SELECT around the clause. ``match_ids`` adds the stable match id and time span columns;
    ``outer=False`` returns the MATCH_RECOGNIZE relation without the SELECT around it."""
    from dfs_cer.match.cer.engine import run_cer

    config = config or result.config or load_config()
    dialect = config.query.outer_dialect
    analysis = result.analysis
    query = analysis.query
    began = time.perf_counter()
    if result.relation is not None:  # the storage nodes matched (whole PARTITION BY groups there)
        if (
            match_ids
            or selection
            or kleene is not None
            or max_matches is not None
            or on_limit is not None
        ):
            raise ConfigError(
                "this result was matched on the storage nodes with the matcher settings; pull it "
                "with node_matching='off' to choose match ids, selections or limits here"
            )
        result.trace.matching = Matching(
            "storage nodes", result.node_matches, time.perf_counter() - began, 0
        )
        return (
            run_outer(query, result.relation, dialect, config=config, deadline=result.deadline)
            if outer
            else result.relation
        )
    # the arguments given win over the settings, checked as the settings are
    given = (("kleene", kleene), ("max_matches", max_matches), ("on_limit", on_limit))
    settings = config.with_values(
        {"matcher": {k: v for k, v in given if v is not None}}, "match_pulled's arguments"
    ).matcher
    limit, bound = settings.max_matches, settings.on_limit
    if selection is not None and selection not in SELECTIONS:
        raise ConfigError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    if query.recognize.all_matches or selection:
        engine = "cer"
        out = run_cer(
            result.events,
            analysis,
            match_ids=match_ids,
            selection=selection or "skip_till_any_match",
            kleene=settings.kleene,
            max_matches=limit,
            on_limit=bound,
            max_steps=settings.max_steps,
        )
    else:
        engine = "rowpattern"
        out = run_row_pattern(
            result.events,
            analysis,
            segments=result.segments,
            match_ids=match_ids,
            max_matches=limit,
            on_limit=bound,
            max_steps=settings.max_steps,
            max_seconds=settings.max_seconds,
        )
    result.trace.matching = Matching(
        engine, out.matches, time.perf_counter() - began, out.work_bytes
    )
    return (
        run_outer(query, out.table, dialect, config=config, deadline=result.deadline)
        if outer
        else out.table
    )
