"""Whole statements over storage nodes: every MATCH_RECOGNIZE clause that reads the nodes' table
is pulled with a strategy and matched on the compute node; clauses over registered tables match
in process; the SQL around them runs on the sandboxed embedded engine
(:func:`dfs_cer.local.run_statement`).

A clause whose input is ``SELECT * FROM t WHERE <row-local condition>`` (a subquery or a CTE)
over the nodes' table is pulled with the strategy too: the nodes drop the rows failing the
condition before anything else (:mod:`dfs_cer.query.input_filter`). Any other subquery or CTE
over the nodes' table needs that input's rows: the nodes' rows are pulled whole once (a
``pull_all``, named in the trace) and the engine computes the input from them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dfs_cer import interrupt
from dfs_cer.config import Config, StrategyConfig
from dfs_cer.local import match_clause, run_statement
from dfs_cer.query import Query
from dfs_cer.query.input_filter import INPUT_FILTER
from dfs_cer.query.statement import Part, Statement
from dfs_cer.strategies.base import PullResult, Trace


@dataclasses.dataclass
class StatementPlan:
    """Which of a statement's reads go to the storage nodes, and how."""

    #: the names (lower case) the statement reads the nodes' table by: every table a clause or
    #: a subquery reads that the caller did not register
    remote: set[str]
    #: parts whose input is a row-local filter of the nodes' table: pulled with the condition
    pushed: list[Part]
    #: the reasons pushed parts fell back to reading the table whole (filled while pulling)
    refused: dict[str, str] = dataclasses.field(default_factory=dict)

    def whole(self, statement: Statement) -> list[str]:
        """The nodes' table names read outside a clause (the SQL around the clauses, or a
        subquery / CTE that is not pushed): each is pulled whole once."""
        done = {p.relation for p in self.pushed} - set(self.refused)
        read = {t.lower() for t in statement.outer_tables} | {
            t.lower() for p in statement.parts if p.relation not in done for t in p.reads
        }
        return sorted(self.remote & read)

    def fallback(self, name: str) -> str:
        reasons = "; ".join(self.refused.values())
        return (
            f"pull_all (the query reads {name!r} outside a MATCH_RECOGNIZE clause: a subquery, a "
            "CTE or the statement around them computes from every row"
            + (f"; {reasons}" if reasons else "")
            + ")"
        )


def plan_statement(statement: Statement, registered: set[str]) -> StatementPlan:
    """The plan for ``statement`` when the caller registered the tables ``registered`` (lower
    case)."""
    remote = {p.query.table.lower() for p in statement.parts if p.input_sql is None} | {
        t.lower() for p in statement.parts for t in p.reads
    }
    remote -= registered
    pushed = [p for p in statement.parts if p.pushed is not None and p.pushed[0].lower() in remote]
    return StatementPlan(remote, pushed)


def whole_table_query(name: str, endpoints: Sequence[str], token: str) -> Query:
    """A clause reading every row of the nodes' table ``name`` (what a pull of the whole table
    opens with): ordered by the nodes' own time column, since the statement's clauses may order
    by columns only the compute node computes."""
    from sqlglot import exp

    from dfs_cer.query.parser import parse
    from dfs_cer.transport.client import StorageClient
    from dfs_cer.transport.replies import FilesReply

    client = StorageClient(endpoints[0], token)
    try:
        header, _ = client.call(FilesReply, {})
    finally:
        client.close()
    time_column = exp.to_identifier(str(header.time_column)).sql()
    return parse(
        f"SELECT * FROM {exp.to_identifier(name).sql()} MATCH_RECOGNIZE (ORDER BY {time_column} "
        "PATTERN (A) DEFINE A AS TRUE)"
    )


def pull_pushed(
    plan: StatementPlan,
    part: Part,
    strategy: str,
    endpoints: Sequence[str],
    token: str,
    **options: Any,
) -> PullResult | None:
    """Pull ``part`` with its input's condition applied on the storage nodes; None when a node
    refuses the condition (the reason is kept in ``plan.refused`` and named in the trace of
    the whole-table pull that replaces it)."""
    from dfs_cer.strategies import pull
    from dfs_cer.transport.client import NodeRefusedError

    assert part.pushed is not None
    table, condition = part.pushed
    from dfs_cer.errors import QueryValidationError
    from dfs_cer.query.filter_cost import check_like_size
    from dfs_cer.query.input_filter import parse_input_filter

    try:  # bounded before it reaches a node: what a node would spend on its LIKE patterns
        check_like_size(parse_input_filter(condition))
    except QueryValidationError as exc:
        plan.refused[part.relation] = (
            f"the input filter {condition[:120]!r}... is not pushed: {exc}"
        )
        return None
    try:
        return pull(
            strategy,
            dataclasses.replace(part.query, table=table),
            endpoints,
            token,
            input_filter=condition,
            **options,
        )
    except NodeRefusedError as exc:
        if exc.code != INPUT_FILTER:
            raise
        plan.refused[part.relation] = (
            f"the storage nodes did not take the input filter {condition!r}: {exc}"
        )
        return None


@dataclasses.dataclass
class StatementResult:
    table: pa.Table
    #: one trace per pull from the storage nodes, in the order they ran
    traces: list[Trace]


@interrupt.guarded
def pull_statement(
    strategy: str,
    statement: Statement,
    endpoints: Sequence[str],
    token: str,
    *,
    tables: Mapping[str, pa.Table] | None = None,
    matching: Mapping[str, Any] | None = None,
    config: Config | StrategyConfig | None = None,
    **options: Any,
) -> StatementResult:
    """Run ``statement``: MATCH_RECOGNIZE clauses over a table that is not in ``tables`` read the
    storage nodes' shard set (any name; other tables must be registered), with the pull strategy
    ``strategy`` and ``options`` of
    :func:`dfs_cer.strategies.pull`; ``matching`` goes to
    :func:`dfs_cer.strategies.matching.match_pulled`. ``config``: the settings every pull and
    every clause runs with (as for ``pull``; the keywords given win over it). ``timeout`` bounds
    the whole statement: each pull gets what is left of it, and so does the SQL around the
    clauses."""
    from dfs_cer.strategies import pull
    from dfs_cer.strategies.base import check_limits
    from dfs_cer.strategies.matching import match_pulled
    from dfs_cer.strategies.request import settings_of

    config = settings_of(config)
    options["config"] = config
    deadline = time.monotonic() + check_limits(config.strategy, options.get("timeout"))

    def left() -> dict[str, Any]:
        return {**options, "timeout": max(deadline - time.monotonic(), 0.001)}

    registry = dict(tables or {})
    plan = plan_statement(statement, {n.lower() for n in registry})
    check_remote(plan, endpoints, token)
    traces: list[Trace] = []
    pulled: dict[str, pa.Table] = {}
    for index, part in enumerate(statement.parts):
        result: PullResult | None = None
        if part.input_sql is None and part.query.table.lower() in plan.remote:
            result = pull(strategy, part.query, endpoints, token, **left())
        elif part in plan.pushed:
            result = pull_pushed(plan, part, strategy, endpoints, token, **left())
        if result is not None:
            pulled[part.relation] = match_pulled(result, outer=False, **(matching or {}))
            result.trace.source = f"clause {index + 1}"
            traces.append(result.trace)
    # clauses matched here (over an input computed here) drop copies of an event as the nodes'
    # pulls do: with the event key asked for, else the shard sets' own, after their input
    event_key, dedup = options.get("event_key"), options.get("dedup")
    for name in plan.whole(
        statement
    ):  # a subquery / CTE / the outer SQL reads the nodes' rows themselves
        result = pull(
            "pull_all", whole_table_query(name, endpoints, token), endpoints, token, **left()
        )
        result.trace.fallback = plan.fallback(name)
        result.trace.source = f"table {name!r}"
        traces.append(result.trace)
        registry[name] = result.events
        if event_key is None:
            event_key = result.analysis.event_key
    choice = dict(matching or {})
    here = config.with_values(
        {
            "query": {"event_key": event_key, "dedup": dedup},
            "matcher": {
                k: choice.get(k) for k in ("kleene", "max_matches", "on_limit") if k in choice
            },
        },
        "the arguments",
    )

    def one(query: Query, data: pa.Table) -> pa.Table:
        return match_clause(
            query,
            data,
            here,
            choice.get("selection"),
            here.matcher.kleene,
            here.matcher.max_matches,
            here.matcher.on_limit,
            False,
            "auto",
        )

    table = run_statement(
        statement,
        registry,
        one,
        here.query.outer_dialect,
        pulled,
        config=here,
        deadline=deadline,
    )
    return StatementResult(table, traces)


def merged_trace(traces: Sequence[Trace], strategy: str) -> Trace:
    """One trace for a statement's pulls: every round in order, fallbacks and paths joined."""
    out = Trace(strategy)
    for i, t in enumerate(traces):
        prefix = f"{t.source or f'pull {i + 1}'}: " if len(traces) > 1 else ""
        out.rounds.extend(
            dataclasses.replace(r, note=prefix + (r.note or "")) if prefix else r for r in t.rounds
        )
        if t.fallback:
            out.fallback = (
                f"{out.fallback}; {prefix}{t.fallback}" if out.fallback else prefix + t.fallback
            )
        if t.navigation:
            out.navigation = (
                f"{out.navigation}; {prefix}{t.navigation}"
                if out.navigation
                else prefix + t.navigation
            )
        out.warnings.extend(prefix + w for w in t.warnings)
        out.notes.extend(n for n in t.notes if n not in out.notes)  # the same for every pull
        out.halo_rows += t.halo_rows
        if t.input_filter:
            text = prefix + t.input_filter
            out.input_filter = f"{out.input_filter}; {text}" if out.input_filter else text
        out.matching = out.matching or t.matching
    return out


def check_against_nodes(
    sqls: Sequence[str],
    endpoints: Sequence[str],
    token: str,
    integer_time_unit: str | None = None,
    registered: Sequence[str] = (),
    selection: str | None = None,
    kleene: str = "all",
) -> pa.Schema:
    """Check every statement against what the storage nodes serve (one small call per node, in
    parallel) before any query round: a table read from the nodes that is not their log and,
    in each clause reading the log directly, a misspelled column or a type mismatch are a
    :class:`~dfs_cer.errors.QueryValidationError` here, with its suggestion, not an open
    refused by every node. What only the nodes can decide is left to them. Clauses the CER
    engine will match (ALL MATCHES, or every clause under ``selection``) are checked against
    its rules first, before any node is contacted. Returns the schema the first node serves."""
    from dfs_cer.config import QueryConfig
    from dfs_cer.errors import DfsCerError, QueryValidationError
    from dfs_cer.match.cer.rules import check_cer_query
    from dfs_cer.query.analyze import analyze
    from dfs_cer.query.names import check_table, one_log
    from dfs_cer.query.parser import parse_statement

    skip = {t.lower() for t in registered}
    # the text first: what it alone refuses is refused before any node is contacted
    statements = [parse_statement(sql) for sql in sqls]
    parts = [
        part
        for statement in statements
        for part in statement.parts
        if part.input_sql is None and part.query.table.lower() not in skip
    ]  # the clauses reading the nodes' table as it is (others' inputs are computed here)
    for statement in statements:
        for part in statement.parts:
            if selection or part.query.recognize.all_matches:
                check_cer_query(part.query, selection or "skip_till_any_match", kleene)

    replies = node_schemas(endpoints, token)
    served = one_log([h.table for h, _ in replies], [f"storage node {e}" for e in endpoints])
    for statement in statements:  # every table read from the nodes (not registered)
        for table in sorted(plan_statement(statement, skip).remote):
            check_table(table, served, registered)
    schema = pa.ipc.read_schema(pa.py_buffer(replies[0][1][0]))
    config = (
        QueryConfig(integer_time_unit=integer_time_unit)  # type: ignore[arg-type]
        if integer_time_unit
        else QueryConfig()
    )
    for part in parts:
        try:
            analyze(part.query, schema, config)
        except QueryValidationError:
            raise
        except DfsCerError:  # the nodes decide (and name) anything else
            continue
    return schema


def node_schemas(endpoints: Sequence[str], token: str) -> list[tuple[Any, list[bytes]]]:
    """Every node's ``schema`` reply (its schema and its log's name), asked in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    from dfs_cer.transport.client import StorageClient
    from dfs_cer.transport.replies import SchemaReply

    def ask(endpoint: str) -> tuple[SchemaReply, list[bytes]]:
        client = StorageClient(endpoint, token)
        try:
            return client.call(SchemaReply, {})
        finally:
            client.close()

    with ThreadPoolExecutor(min(len(endpoints), 16) or 1) as pool:
        return list(pool.map(ask, endpoints))


def check_remote(plan: StatementPlan, endpoints: Sequence[str], token: str) -> None:
    """A statement reading several tables the caller did not register names some table that is
    not the nodes' log: refused before any of its pulls (one small call per node). One such
    table is checked by the nodes when its first pull opens, before any round."""
    if len(plan.remote) < 2:
        return
    from dfs_cer.query.names import check_table, one_log

    served = one_log(
        [h.table for h, _ in node_schemas(endpoints, token)],
        [f"storage node {e}" for e in endpoints],
    )
    for name in sorted(plan.remote):
        check_table(name, served)
