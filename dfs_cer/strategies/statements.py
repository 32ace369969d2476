"""Whole statements over storage nodes: every MATCH_RECOGNIZE clause that reads the nodes' table
is pulled with a strategy and matched on the compute node; clauses over registered tables match
in process; the SQL around them runs on the sandboxed embedded engine
(:func:`dfs_cer.local.run_statement`).

A clause whose input is a subquery or CTE over the nodes' table needs that input's rows: the
nodes' rows are pulled whole once (a ``pull_all``, named in the trace) and the engine computes
the input from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dfs_cer.config import load_config
from dfs_cer.local import match_clause, run_statement
from dfs_cer.query import Query
from dfs_cer.query.statement import Statement
from dfs_cer.strategies.base import Trace


@dataclasses.dataclass
class StatementResult:
    table: pa.Table
    #: one trace per pull from the storage nodes, in the order they ran
    traces: list[Trace]


def pull_statement(strategy: str, statement: Statement, endpoints: Sequence[str], token: str, *,
                   tables: Mapping[str, pa.Table] | None = None, matching: Mapping[str, Any] | None = None,
                   **options: Any) -> StatementResult:
    """Run ``statement``: MATCH_RECOGNIZE clauses over a table that is not in ``tables`` read the
    storage nodes' shard set (any name; other tables must be registered), with the pull strategy
    ``strategy`` and ``options`` of
    :func:`dfs_cer.strategies.pull`; ``matching`` goes to
    :func:`dfs_cer.strategies.matching.match_pulled`."""
    from dfs_cer.strategies import pull
    from dfs_cer.strategies.matching import match_pulled

    registry = dict(tables or {})
    known = {n.lower() for n in registry}
    # the nodes' table: what the clauses read (by any name) and the caller did not register
    remote = {p.query.table.lower() for p in statement.parts if p.input_sql is None} | {
        t.lower() for p in statement.parts for t in p.reads}
    remote -= known
    traces: list[Trace] = []
    pulled: dict[str, pa.Table] = {}
    for part in statement.parts:
        if part.input_sql is None and part.query.table.lower() in remote:
            result = pull(strategy, part.query, endpoints, token, **options)
            pulled[part.relation] = match_pulled(result, outer=False, **(matching or {}))
            traces.append(result.trace)
    read_whole = {t.lower() for t in statement.outer_tables} | {t.lower() for p in statement.parts for t in p.reads}
    for name in sorted(remote & read_whole):  # a subquery / CTE / the outer SQL reads the nodes' rows themselves
        first = statement.parts[0].query
        result = pull("pull_all", dataclasses.replace(first, table=name), endpoints, token, **options)
        result.trace.fallback = (f"pull_all (the query reads {name!r} outside a MATCH_RECOGNIZE clause: a subquery, "
                                 "a CTE or the statement around them computes from every row)")
        traces.append(result.trace)
        registry[name] = result.events
    config = load_config()
    settings = config.matcher
    choice = dict(matching or {})

    def one(query: Query, data: pa.Table) -> pa.Table:
        return match_clause(query, data, config, choice.get("selection"), choice.get("kleene") or settings.kleene,
                            settings.max_matches, settings.on_limit, False, "auto")

    return StatementResult(run_statement(statement, registry, one, config.query.outer_dialect, pulled), traces)


def merged_trace(traces: Sequence[Trace], strategy: str) -> Trace:
    """One trace for a statement's pulls: every round in order, fallbacks and paths joined."""
    out = Trace(strategy)
    for i, t in enumerate(traces):
        prefix = f"clause {i + 1}: " if len(traces) > 1 else ""
        out.rounds.extend(dataclasses.replace(r, note=prefix + (r.note or "")) if prefix else r for r in t.rounds)
        if t.fallback:
            out.fallback = f"{out.fallback}; {prefix}{t.fallback}" if out.fallback else prefix + t.fallback
        if t.navigation:
            out.navigation = f"{out.navigation}; {prefix}{t.navigation}" if out.navigation else prefix + t.navigation
        out.warnings.extend(prefix + w for w in t.warnings)
        out.halo_rows += t.halo_rows
        out.matching = out.matching or t.matching
    return out
