"""The ``dfs-cer`` command line: thin wiring over the library.

Every command maps a :class:`~dfs_cer.errors.DfsCerError` to one line on stderr and the
error's exit code (2 for bad queries and settings, 1 otherwise); no tracebacks unless
``--debug`` is given.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import dfs_cer.cli.nodes  # registers ``dfs-cer storage-node``
import dfs_cer.cli.tables  # noqa: F401  (registers ``dfs-cer table``)
from dfs_cer.cli.app import State, cli, handle_errors, pass_state, without_pandas
from dfs_cer.errors import ConfigError, DfsCerError
from dfs_cer.options import COST_MODELS, KLEENE, SELECTIONS, STRATEGIES

if TYPE_CHECKING:
    import pyarrow as pa

    from dfs_cer.strategies.base import Trace

#: ``--selection``: strict contiguity is the library's only (the command line has no use for it)
CLI_SELECTIONS = tuple(s for s in SELECTIONS if s != "strict_contiguity")


def _read_sql(sql: str | None, file: str | None) -> str:
    if file is not None:
        from dfs_cer.io.files import names_a_file, read_text_file

        if file == "-":
            return sys.stdin.read()
        if not names_a_file(file):
            raise click.BadParameter(f"{file} is not a file", param_hint="--file")
        return read_text_file(file, "--file")
    if sql is None:
        raise click.UsageError("give the query as an argument or with --file")
    return sql


@cli.command()
@click.argument("sql", required=False)
@click.option("--file", "-f", "file", help="Read the query from a file ('-' for stdin).")
@click.option(
    "--schema-from",
    type=click.Path(exists=True, dir_okay=False),
    help="A parquet file whose schema binds the query (checks columns, converts the window).",
)
@pass_state
@handle_errors
def explain(state: State, sql: str | None, file: str | None, schema_from: str | None) -> None:
    """Print the analysed query: variables with their independent predicates, equality
    conditions, residuals, window, skip and output mode, and what pruning is exact."""
    from dfs_cer.query import analyze, parse
    from dfs_cer.query.explain import explain_dict, explain_lines

    query = parse(_read_sql(sql, file))
    schema = None
    if schema_from is not None:
        import pyarrow.parquet as pq

        schema = pq.read_schema(schema_from)
    analysis = analyze(query, schema, state.config.query)
    state.output.explain(explain_dict(analysis), explain_lines(analysis))


@cli.command("format")
@click.argument("sql", required=False)
@click.option("--file", "-f", "file", help="Read the query from a file ('-' for stdin).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the query model as JSON instead of SQL."
)
@pass_state
@handle_errors
def format_(state: State, sql: str | None, file: str | None, as_json: bool) -> None:
    """Parse a query and print its canonical SQL (or the query model as JSON)."""
    from dfs_cer.query import parse

    query = parse(_read_sql(sql, file))
    click.echo(query.to_json(indent=2) if as_json else query.to_sql())


@cli.command("config")
@pass_state
@handle_errors
def show_config(state: State) -> None:
    """Print the effective settings (defaults, files, DFS_CER__* overrides)."""
    state.output.mapping("dfs-cer settings", state.config.to_dict())


@cli.command()
@click.option(
    "--events",
    type=click.IntRange(min=1000),
    default=1_000_000,
    show_default=True,
    help="Size of the CRIMES-shaped sample (generated once).",
)
@click.option(
    "--data-dir",
    default="data/demo",
    show_default=True,
    help="Where the sample and its shards live (a local path or s3://bucket/prefix).",
)
@click.option(
    "--strategies",
    default="push_down,push_pull,dfs",
    show_default=True,
    help="Comma-separated pull strategies to compare.",
)
@pass_state
@handle_errors
def demo(state: State, events: int, data_dir: str, strategies: str) -> None:
    """Q1 and variants on a CRIMES-shaped sample: three storage nodes on loopback, local Spark,
    bytes, events and seconds per strategy."""
    from dfs_cer.cli.demo import run_demo

    run_demo(
        state.output,
        state.config,
        events=events,
        data_dir=data_dir,
        strategies=tuple(s.strip() for s in strategies.split(",") if s.strip()),
    )


def _load_tables(specs: tuple[str, ...], state: State) -> dict[str, Any]:
    """``--table NAME=PATH`` options as Arrow tables (parquet or CSV, file or directory, s3://,
    or a table: iceberg://CATALOG/NS.TABLE, hive:PATH)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from dfs_cer.io.csvfiles import CsvInput
    from dfs_cer.io.files import filesystem_for
    from dfs_cer.io.tables import is_table, plan_table, read_table

    out: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if (
            not sep
            or not name
            or not path
            or not (name[0].isalpha() or name[0] == "_")
            or not name.replace("_", "").isalnum()
        ):
            raise click.BadParameter(
                f"{spec!r}: write NAME=PATH with NAME a plain identifier, e.g. "
                "districts=districts.parquet",
                param_hint="--table",
            )
        if name.lower() in {n.lower() for n in out}:
            raise click.BadParameter(f"table {name!r} is given twice", param_hint="--table")
        if is_table(path):  # an Iceberg table or a Hive-style prefix, read in place
            plan = plan_table(
                path, tables=state.config.tables, storage=state.config.storage, events=False
            )
            out[name] = pa.concat_tables([*read_table(plan), plan.schema.empty_table()])
            continue
        location = filesystem_for(path, state.config.storage)
        if path.endswith(".csv"):  # column types from every value, as dfs-cer shard reads a CSV
            out[name] = CsvInput(location).to_table()
            continue
        try:
            out[name] = ds.dataset(
                location.path, filesystem=location.fs, format="parquet"
            ).to_table()
        except (FileNotFoundError, pa.ArrowInvalid, OSError) as exc:
            raise click.BadParameter(
                f"cannot read {path} for table {name!r}: {exc}", param_hint="--table"
            ) from None
    return out


def _split_statements(text: str) -> list[str]:
    """Statements separated by ``;`` (semicolons inside string literals or parentheses, such as
    a SITUATIONS pattern's alternatives, do not split)."""
    from sqlglot.tokens import Tokenizer, TokenType

    cuts, depth = [], 0
    for t in Tokenizer().tokenize(text):
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif t.token_type == TokenType.SEMICOLON and depth == 0:
            cuts.append(t.start)
    parts, last = [], 0
    for cut in cuts:
        parts.append(text[last:cut])
        last = cut + 1
    parts.append(text[last:])
    return [p.strip() for p in parts if p.strip()]


def _nodes(endpoints: str | None, token_file: str | None, nodes_dir: str) -> tuple[str, str]:
    """The endpoints and token file given, else those of the nodes file ``storage-node up``
    wrote."""
    if endpoints is not None and token_file is not None:
        return endpoints, token_file
    from dfs_cer.io.nodefile import nodes_path, read_nodes

    nodes = read_nodes(nodes_dir)
    if nodes is None:
        missing = " and ".join(
            name
            for name, given in (("--endpoints", endpoints), ("--token-file", token_file))
            if given is None
        )
        raise ConfigError(
            f"no storage nodes to ask: give {missing}, or start nodes with dfs-cer storage-node "
            f"up --shards DIR (no nodes file at {nodes_path(nodes_dir)})"
        )
    return endpoints or ",".join(nodes.endpoints), token_file or nodes.token_file


@cli.command("query")
@click.argument("sql", nargs=-1)
@click.option("--file", "-f", "file", help="Read the query from a file ('-' for stdin).")
@click.option(
    "--endpoints",
    default=None,
    help="Comma-separated storage node endpoints (host:port) [default: the nodes dfs-cer "
    "storage-node up started, from --nodes-dir].",
)
@click.option(
    "--token-file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="The nodes' token [default: the one dfs-cer storage-node up wrote].",
)
@click.option(
    "--nodes-dir",
    default=".dfs-cer/nodes",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where dfs-cer storage-node up wrote its nodes file.",
)
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default=None,
    help="Pull strategy [default: strategy.default, dfs].",
)
@click.option(
    "--cost-model",
    type=click.Choice(COST_MODELS),
    default=None,
    help="Round-trip cost model (default: strategy.cost_model).",
)
@click.option("--explain-analyze", is_flag=True, help="Print every round trip before the matches.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--limit", type=int, default=50, show_default=True, help="Matches printed as a table."
)
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="Match in this process, or through a local Spark session (executors match units).",
)
@click.option(
    "--selection",
    type=click.Choice(CLI_SELECTIONS),
    default=None,
    help="CER selection strategy (default: the SQL standard's semantics; ALL MATCHES: any match).",
)
@click.option(
    "--kleene",
    type=click.Choice(KLEENE),
    default=None,
    help="Kleene+ under a CER selection: every subset, or maximal sets.",
)
@click.option(
    "--save-run", is_flag=True, help="Save the matches with stable match ids under --runs-dir."
)
@click.option(
    "--since-run",
    default=None,
    metavar="RUN_ID",
    help="Re-run a saved run's query over the shard files added since (dfs-cer shard --append, "
    "table appends): recompute the affected time ranges and print the changelog; 'last' names "
    "the newest saved run.",
)
@click.option(
    "--runs-dir", default=".dfs-cer/runs", show_default=True, type=click.Path(file_okay=False)
)
@click.option(
    "--node-matching",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Where storage nodes hold whole PARTITION BY groups, match on them and pull only the "
    "result: when the cost model says so (auto), whenever possible (on), or never (off).",
)
@click.option(
    "--table",
    "table_specs",
    multiple=True,
    metavar="NAME=PATH",
    help="Register a table the query reads besides the storage nodes' (parquet or CSV, a file or a "
    "directory, local or s3://); repeat for more.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Fail the query after this many seconds, every round trip included "
    "[default: strategy.query_timeout_seconds, 300]; each call to a node is also bounded by "
    "strategy.call_timeout_seconds.",
)
@click.option(
    "--snapshot",
    type=int,
    default=None,
    metavar="ID",
    help="For storage nodes serving an Iceberg table: read this snapshot on every node "
    "[default: the table's current snapshot when the query starts].",
)
@pass_state
@handle_errors
def query_command(
    state: State,
    sql: tuple[str, ...],
    file: str | None,
    endpoints: str | None,
    token_file: str | None,
    nodes_dir: str,
    strategy: str | None,
    cost_model: str | None,
    explain_analyze: bool,
    fmt: str,
    limit: int,
    engine: str,
    selection: str | None,
    kleene: str | None,
    save_run: bool,
    since_run: str | None,
    runs_dir: str,
    node_matching: str,
    timeout: float | None,
    table_specs: tuple[str, ...] = (),
    snapshot: int | None = None,
) -> None:
    """Run a query against storage nodes with a pull strategy and print the matches.

    Several queries (several arguments, or statements separated by ';' in --file) run together:
    each storage node scans once for all of them and the final pulls are shared."""
    import json as json_lib
    import time

    from dfs_cer.phases import KernelClock, process_age

    began, startup = time.perf_counter(), process_age()
    if engine != "spark":
        without_pandas()
    kernels = KernelClock.start()
    kernels_before = kernels.seconds
    endpoints, token_file = _nodes(endpoints, token_file, nodes_dir)
    token = Path(token_file).read_text().strip()
    strategy = strategy or state.config.strategy.default
    nodes = [e.strip() for e in endpoints.split(",") if e.strip()]
    # every setting travels as the one Config (--config files and DFS_CER__* variables over the
    # defaults); an option given here wins over its setting
    options: dict[str, Any] = {"config": state.config, "timeout": timeout}
    if cost_model is not None:
        options["cost_model"] = cost_model
    matching: dict[str, Any] = {
        k: v for k, v in (("selection", selection), ("kleene", kleene)) if v
    }
    # selections and saved runs (match ids) match on this node
    options["node_matching"] = "off" if matching or save_run or since_run else node_matching
    statements = [
        q
        for text in ([_read_sql(None, file)] if file else list(sql))
        for q in _split_statements(text)
    ]
    checked = [q for q in statements if not _is_situations(q)]
    if not statements and since_run:  # the saved run's query: its times are shown as such
        from dfs_cer.io.runs import load_run

        checked = [q for q in [load_run(runs_dir, since_run)[0].sql] if not _is_situations(q)]
    time_type = None
    if checked:  # a misspelled column: one line (exit 2) before any query round
        from dfs_cer.strategies.statements import check_against_nodes

        schema = check_against_nodes(
            checked,
            nodes,
            token,
            state.config.query.integer_time_unit,
            [spec.split("=", 1)[0].strip() for spec in table_specs],
            selection=selection,
            kleene=kleene or state.config.matcher.kleene,
        )
        time_type = _time_type(checked[0], schema)
    if snapshot is not None:
        if save_run or since_run:
            raise click.UsageError(
                "--snapshot pins one query's snapshot; --save-run/--since-run read the table's "
                "current snapshot (a re-run's changes are those of the snapshots since)"
            )
        options["snapshot"] = snapshot
    if save_run or since_run:
        if engine == "spark":
            raise click.UsageError(
                "--save-run/--since-run match in this process (leave out --engine spark)"
            )
        if len(statements) > 1:
            raise click.UsageError("--save-run/--since-run take one query")
        if not statements and not since_run:
            raise click.UsageError("give the query as an argument or with --file")
        _saved_run(
            state,
            statements[0] if statements else "",
            nodes,
            token,
            strategy,
            runs_dir,
            since_run,
            fmt,
            limit,
            {**options, **matching},
            explain_analyze,
            time_type,
        )
        return
    if not statements:
        raise click.UsageError("give the query as an argument or with --file")
    if len(statements) == 1 and _is_situations(statements[0]):
        if snapshot is not None:
            raise click.UsageError(
                "--snapshot applies to MATCH_RECOGNIZE queries; a SITUATIONS query reads the "
                "table's current snapshot"
            )
        _situations_query(statements[0], nodes, token, strategy, fmt, limit, options)
        return
    if len(statements) > 1:
        if engine == "spark":
            raise click.UsageError(
                "several queries run in this process (leave out --engine spark, or use "
                "dfs_cer.spark.recognize_many)"
            )
        _query_group(statements, nodes, token, strategy, fmt, limit, options, matching)
        return
    sql_text = statements[0]
    if engine == "spark" and matching:
        raise click.UsageError(
            "--selection/--kleene run in this process (leave out --engine spark)"
        )
    from dfs_cer.query.parser import parse_statement

    statement = parse_statement(sql_text)
    result_trace: Trace | None
    if (table_specs or not statement.simple) and engine != "spark":
        from dfs_cer.strategies.statements import merged_trace, pull_statement

        run_all = pull_statement(
            strategy,
            statement,
            nodes,
            token,
            tables=_load_tables(table_specs, state),
            matching=matching,
            **options,
        )
        matches, result_trace = run_all.table, merged_trace(run_all.traces, strategy)
    elif engine == "spark":
        from dfs_cer.spark import local_session, recognize
        from dfs_cer.spark.session import cancelling

        spark = local_session()
        spark.sparkContext.setLogLevel("ERROR")
        with cancelling(spark):  # Ctrl-C cancels the Spark jobs too
            run = recognize(
                spark,
                sql_text,
                endpoints=nodes,
                token=token,
                strategy=strategy,
                tables=_load_tables(table_specs, state),
                **options,
            )
            matches, result_trace = run.matches.toArrow(), run.trace
    else:
        from dfs_cer.strategies import pull
        from dfs_cer.strategies.matching import match_pulled

        result = pull(strategy, sql_text, nodes, token, **options)
        matches, result_trace = match_pulled(result, **matching), result.trace
    assert result_trace is not None
    trace = result_trace.to_dict()
    trace["phases"] = _phases(
        trace, result_trace.began, began, startup, kernels.seconds - kernels_before
    )
    _warn(trace)
    if fmt == "json":
        click.echo(json_lib.dumps({"matches": matches.to_pylist(), "trace": trace}, default=str))
        return
    if explain_analyze:
        _print_rounds(trace)
    _print_table(matches, f"{matches.num_rows} rows", limit)


def _phases(
    trace: dict[str, Any],
    session_began: float | None,
    began: float,
    startup: float | None,
    kernels: float,
) -> dict[str, float]:
    """The query's time by phase, from the process's start to now (see :mod:`dfs_cer.phases`)."""
    import time

    from dfs_cer.phases import split

    matching = trace["matching"]["seconds"] if trace.get("matching") else None
    return split(
        trace["rounds"],
        matching,
        wall=time.perf_counter() - began + (startup or 0.0),
        startup=startup,
        planning=None if session_began is None else max(0.0, session_began - began),
        kernels=kernels,
    )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _print_rounds(trace: dict[str, Any]) -> None:
    """--explain-analyze: the strategy, every round trip with its bytes, events and time, and
    what the compute node did with the rows."""
    click.echo(
        f"strategy {trace['strategy']}"
        + (f" (fell back to {trace['fallback']})" if trace["fallback"] else "")
    )
    click.echo(
        f"{'round':<16}{'to SN (B)':>12}{'to CN (B)':>12}{'events':>10}{'CN ms':>8}"
        f"{'node ms':>9}{'wire ms':>9}{'ms':>9}  cost model"
    )
    for r in trace["rounds"]:
        d = r.get("decision")
        note = ""
        if d and "node_seconds" in d:  # node-side matching against pulling
            note = (
                f"node-side matching: nodes {d['node_seconds'] * 1e3:.1f} ms (budget "
                f"{d['cpu_budget'] * 1e3:,.0f} ms) vs pull "
                f"~{d['pull_seconds_estimate'] * 1e3:.1f} ms"
            )
        elif d and "estimated_bytes" in d:  # a per-node round against pulling instead
            timed = (
                f", ~{d['round_seconds'] * 1e3:.1f} ms for the round vs "
                f"~{d['saved_seconds'] * 1e3:.1f} ms for the bytes"
                if "round_seconds" in d
                else ""
            )
            note = (
                f"{', '.join(d['variables'])}: {'run' if d['run'] else 'skip'} (round "
                f"~{d['estimated_bytes']:,} B vs pulling ~{d['pull_instead_bytes']:,} B{timed}; "
                f"interval set sent to {d['interval_set_sent_to']} of {d['nodes']} node(s))"
            )
        elif d:
            note = (
                f"{d['variable']}: {'run' if d['run'] else 'skip'} (benefit "
                f"{d['benefit_s'] * 1e3:.3f} ms, harm {d['harm_s'] * 1e3:.3f} ms)"
            )
        elif r.get("note"):
            note = r["note"]
        click.echo(
            f"{r['action']:<16}{r['bytes_to_sn']:>12,}{r['bytes_to_cn']:>12,}{r['events']:>10,}"
            f"{_ms(r.get('cn_seconds')):>8}{_ms(r.get('node_seconds')):>9}"
            f"{_ms(r.get('wire_seconds')):>9}{r['seconds'] * 1e3:>9.1f}  {note}"
        )
    click.echo(
        f"{'total':<16}{trace['bytes_to_sn']:>12,}{trace['bytes_to_cn']:>12,}"
        f"{trace['events_received']:>10,}{'':>26}{trace['seconds'] * 1e3:>9.1f}"
    )
    if trace.get("input_filter"):
        click.echo(f"input filter on the storage nodes: {trace['input_filter']}")
    if trace.get("snapshot") is not None:
        click.echo(f"table snapshot read on every storage node: {trace['snapshot']}")
    if trace.get("navigation"):
        click.echo(f"navigation: {trace['navigation']}; {trace['halo_rows']:,} halo rows received")
    m = trace.get("matching")
    if m and m["engine"] == "storage nodes":
        click.echo(
            f"matching: on the storage nodes, {m['matches']:,} "
            f"match{'' if m['matches'] == 1 else 'es'}"
        )
    elif m:
        memory = (
            f", matcher working memory {m['work_bytes'] / 1024:,.1f} KiB" if m["work_bytes"] else ""
        )
        plural = "" if m["matches"] == 1 else "es"
        click.echo(
            f"matching: {m['engine']} engine, {m['matches']:,} match{plural} in "
            f"{m['seconds'] * 1e3:.1f} ms{memory}"
        )
    if trace.get("phases"):
        from dfs_cer.phases import line

        click.echo(line(trace["phases"]))
    click.echo("")


def _warn(trace: dict[str, Any]) -> None:
    """What went wrong without spoiling the result (e.g. a node that did not confirm close), on
    stderr."""
    for w in trace.get("warnings") or ():
        click.echo(f"warning: {w}", err=True)
    for n in trace.get("notes") or ():
        click.echo(f"note: {n}", err=True)
    fallback = trace.get("fallback")
    if fallback and not str(fallback).startswith("no match possible"):
        click.echo(f"note: {fallback_note(trace['strategy'], str(fallback))}", err=True)


#: what to change when a strategy falls back, by words of its reason
_FALLBACK_FIXES = (
    ("no WITHIN window", "add WITHIN INTERVAL 'n' <unit> after PATTERN to bound a match in time"),
    ("PREV/NEXT", "e.g. dfs-cer shard --partitioning type --type-column <a PARTITION BY column>"),
    (
        "the shards are kept by",
        "shard by the query's ORDER BY column (dfs-cer shard --time-column)",
    ),
    ("halo", "shard by type on a PARTITION BY column, or raise strategy.halo_limit"),
    ("every row of the partition", "leave out ^ and $, or add WITHIN"),
    ("match empty", "make some variable of the pattern mandatory (no * or ? around all)"),
    (
        "interval set would cover",
        "narrow the rarest variable's condition or shorten WITHIN, so its candidates leave "
        "gaps in time",
    ),
    ("interval set covers", "narrow the rarest variable's condition or shorten WITHIN"),
    (
        "hit a bound",
        "raise matcher.max_matches or matcher.max_steps (or the nodes' storage.memory_budget), "
        "or narrow the query (e.g. a shorter WITHIN window)",
    ),
)


def fallback_note(strategy: str, fallback: str) -> str:
    """One line: the strategy that fell back, to what, why, and what would avoid it."""
    to, _, why = fallback.partition(" (")
    why = why.removesuffix(")")
    fix = next((f for words, f in _FALLBACK_FIXES if words in why), None)
    # pull_all reading every row anyway has no strategy to fall back from: say what it does
    head = f"{strategy} reads every row" if to == strategy else f"{strategy} fell back to {to}"
    text = head + (f": {why}" if why else "")
    return text + (f"; to avoid it, {fix}" if fix else "")


def _print_table(table: pa.Table, title: str, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    ids = {"__match_id", "previous_match_id"}  # 64-bit ids read better in hex
    out = Table(title=title)
    for name in table.column_names:
        out.add_column(name)
    for row in table.slice(0, limit).to_pylist():
        out.add_row(
            *[f"{v:016x}" if k in ids and v is not None else str(v) for k, v in row.items()]
        )
    console = Console()
    if not console.is_terminal:
        console.width = 140  # tables in files and pipes: no folding at 80 columns
    console.print(out)


def _is_situations(sql: str) -> bool:
    from sqlglot.tokens import Tokenizer

    return any(t.text.upper() == "SITUATIONS" for t in Tokenizer().tokenize(sql))


def _situations_query(
    sql: str,
    nodes: list[str],
    token: str,
    strategy: str,
    fmt: str,
    limit: int,
    options: dict[str, Any],
) -> None:
    import json as json_lib

    from dfs_cer.situations import outer, parse_situations
    from dfs_cer.strategies.situations import STRATEGIES, pull_situations

    if strategy not in STRATEGIES:
        raise click.UsageError(f"situation queries run with --strategy {' or '.join(STRATEGIES)}")
    result = pull_situations(
        sql,
        nodes,
        token,
        strategy=strategy,
        timeout=options.get("timeout"),
        config=options["config"],
    )
    table = outer(parse_situations(sql), result.relation, config=options["config"])
    trace = result.trace.to_dict()
    _warn(trace)
    if fmt == "json":
        click.echo(json_lib.dumps({"matches": table.to_pylist(), "trace": trace}, default=str))
        return
    rounds = ", ".join(f"{r['action']} {r['bytes_to_cn']:,} B" for r in trace["rounds"])
    note = f" (fell back to {trace['fallback']})" if trace["fallback"] else ""
    click.echo(f"situations ({strategy}{note}): {rounds}")
    _print_table(table, f"{table.num_rows} rows", limit)


def _query_group(
    statements: list[str],
    nodes: list[str],
    token: str,
    strategy: str,
    fmt: str,
    limit: int,
    options: dict[str, Any],
    matching: dict[str, Any],
) -> None:
    import json as json_lib

    from dfs_cer.strategies.matching import match_pulled
    from dfs_cer.strategies.multi import pull_many

    group = pull_many(strategy, statements, nodes, token, **options)
    results = [match_pulled(r, **matching) for r in group.results]
    for r in group.results:
        _warn(r.trace.to_dict())
    if fmt == "json":
        click.echo(
            json_lib.dumps(
                {
                    "queries": [
                        {"sql": q, "matches": m.to_pylist(), "trace": r.trace.to_dict()}
                        for q, m, r in zip(statements, results, group.results, strict=True)
                    ],
                    "group": {
                        **group.trace.to_dict(),
                        "total_bytes_to_cn": group.bytes_to_cn,
                        "total_bytes_to_sn": group.bytes_to_sn,
                        "seconds": group.seconds,
                    },
                },
                default=str,
            )
        )
        return
    click.echo(
        f"{len(statements)} queries together ({strategy}): one scan per storage node, "
        f"{group.bytes_to_sn + group.bytes_to_cn:,} bytes in all, {group.seconds:.2f} s"
    )
    for i, (q, m) in enumerate(zip(statements, results, strict=True), 1):
        text = " ".join(q.split())
        click.echo(f"\nquery {i}: {text[:100]}{'…' if len(text) > 100 else ''}")
        _print_table(m, f"{m.num_rows} rows", limit)


def _time_type(sql: str, schema: pa.Schema) -> pa.DataType | None:
    """The type of the first clause's ORDER BY column in the nodes' schema (None: unknown)."""
    from dfs_cer.query.bind import resolve_column
    from dfs_cer.query.parser import parse_statement

    try:
        order_by = parse_statement(sql).parts[0].query.recognize.order_by
    except (DfsCerError, IndexError):
        return None
    if not order_by:
        return None
    try:
        return schema.field(resolve_column(order_by[0].column, schema, "ORDER BY")).type
    except DfsCerError:
        return None


def _readable_times(table: pa.Table, time_type: pa.DataType | None) -> pa.Table:
    """A run's relation with ``__match_start`` and ``__match_end`` (stored as the time column's
    integers) in the time column's type."""
    import pyarrow as pa

    from dfs_cer.events.identity import ID_COLUMNS

    if time_type is None or not (pa.types.is_timestamp(time_type) or pa.types.is_date(time_type)):
        return table
    storage = pa.int32() if pa.types.is_date32(time_type) else pa.int64()
    for name in ID_COLUMNS[1:]:
        if name in table.column_names:
            i = table.column_names.index(name)
            column = table.column(i).cast(storage).cast(time_type)
            table = table.set_column(i, name, column)
    return table


def _saved_run(
    state: State,
    sql: str,
    nodes: list[str],
    token: str,
    strategy: str,
    runs_dir: str,
    since_run: str | None,
    fmt: str,
    limit: int,
    options: dict[str, Any],
    explain_analyze: bool = False,
    time_type: pa.DataType | None = None,
) -> None:
    import json as json_lib

    from dfs_cer.events.time import moment
    from dfs_cer.io.runs import resolve_run_id
    from dfs_cer.strategies.incremental import run_and_save

    if since_run is not None:
        since_run = resolve_run_id(runs_dir, since_run)
    run = run_and_save(
        sql, nodes, token, strategy=strategy, runs_dir=runs_dir, since_run=since_run, **options
    )
    rec = run.record
    matches = _readable_times(run.matches, time_type)
    changes = None if run.changes is None else _readable_times(run.changes, time_type)
    recomputed = (
        [[moment(lo, time_type), moment(hi, time_type)] for lo, hi in rec.recomputed]
        if rec.recomputed
        else rec.recomputed
    )
    if run.pulled is not None:
        _warn(run.pulled.trace.to_dict())
    if fmt == "json":
        click.echo(
            json_lib.dumps(
                {
                    "run_id": rec.run_id,
                    "parent": rec.parent,
                    "mode": rec.mode,
                    "note": rec.note,
                    "recomputed": recomputed,
                    "path": str(run.where),
                    "snapshot": rec.snapshot,
                    "matches": matches.to_pylist(),
                    "changes": None if changes is None else changes.to_pylist(),
                    "trace": None if run.pulled is None else run.pulled.trace.to_dict(),
                },
                default=str,
            )
        )
        return
    what = (
        rec.mode
        + (f", table snapshot {rec.snapshot}" if rec.snapshot is not None else "")
        + (
            ", recomputed starts in " + ", ".join(f"[{lo}, {hi}]" for lo, hi in recomputed or [])
            if rec.recomputed
            else ""
        )
    )
    if explain_analyze and run.pulled is not None:
        _print_rounds(run.pulled.trace.to_dict())
    click.echo(
        f"run {rec.run_id} ({what}{'; ' + rec.note if rec.note else ''}) saved to {run.where}"
    )
    if changes is not None:
        kinds = changes.column("change").to_pylist() if changes.num_rows else []
        counts = (
            ", ".join(f"{kinds.count(k)} {k}" for k in ("new", "updated", "invalidated"))
            or "no changes"
        )
        _print_table(changes, f"changes since {since_run}: {counts}", limit)
    _print_table(matches, f"{matches.num_rows} rows", limit)


@cli.command("shard")
@click.option(
    "--input",
    "input_path",
    required=True,
    help="Parquet or CSV file or directory (local or s3://), or a table: "
    "iceberg://CATALOG/NS.TABLE, hive:PATH.",
)
@click.option("--nodes", type=int, required=True, help="Number of storage nodes.")
@click.option("--to", "to", required=True, help="Output directory or s3://bucket/prefix.")
@click.option(
    "--partitioning",
    type=click.Choice(["random", "time", "type"]),
    default="random",
    show_default=True,
)
@click.option("--time-column", default="ts", show_default=True)
@click.option("--type-column", default="type", show_default=True)
@click.option(
    "--event-key",
    default="",
    help="Comma-separated columns that identify an event (with its time); default: the whole row.",
)
@click.option(
    "--dedup", is_flag=True, help="Drop duplicate events (same time and event key) of the input."
)
@click.option(
    "--append", is_flag=True, help="Add the input to existing shard sets as new files (late data)."
)
@click.option(
    "--schema",
    "schema",
    default=None,
    help="CSV input: column types, COLUMN=TYPE separated by commas (e.g. "
    "dep_time=int64,origin=string), "
    "or a file of such lines; other columns' types are decided from every value.",
)
@click.option(
    "--null-values",
    default="",
    help="CSV input: field values read as NULL besides the empty field, separated by commas "
    "(e.g. NA for files R wrote).",
)
@click.option(
    "--name",
    default=None,
    help="The log's name, which queries read it by (FROM NAME); default: the input's "
    "(ticks.parquet: ticks; a table: its own name).",
)
@pass_state
@handle_errors
def shard_command(
    state: State,
    input_path: str,
    nodes: int,
    to: str,
    partitioning: str,
    time_column: str,
    type_column: str,
    event_key: str,
    dedup: bool,
    append: bool,
    schema: str | None,
    null_values: str,
    name: str | None,
) -> None:
    """Split an event log into one parquet shard set per storage node, with manifests."""
    from rich.progress import Progress

    from dfs_cer.io.csvtypes import parse_column_types
    from dfs_cer.io.files import names_a_file, read_text_file
    from dfs_cer.io.shard import shard

    column_types = None
    if schema is not None:
        column_types = parse_column_types(
            read_text_file(schema, "--schema") if names_a_file(schema) else schema
        )

    with Progress(transient=True) as progress:
        task = progress.add_task("sharding", total=None)
        manifests = shard(
            input_path,
            nodes,
            to,
            partitioning=partitioning,
            time_column=time_column,
            type_column=type_column,
            event_key=tuple(k.strip() for k in event_key.split(",") if k.strip()),
            dedup=dedup,
            append=append,
            config=state.config.storage,
            progress=lambda rows: progress.update(task, completed=rows),
            tables=state.config.tables,
            column_types=column_types,
            null_values=tuple(v for v in null_values.split(",") if v),
            name=name,
        )
    from dfs_cer.events.time import moment

    summary: dict[str, Any] = (
        {} if not manifests or manifests[0].name is None else {"name": manifests[0].name}
    )
    summary |= {
        f"node-{m.node:02d}": {
            "rows": m.rows,
            "files": len(m.files),
            "first time": moment(m.min_ts, m.time_type),
            "last time": moment(m.max_ts, m.time_type),
        }
        for m in manifests
    }
    if dedup and manifests:
        summary["duplicates dropped"] = manifests[0].duplicates_dropped
    state.output.mapping("shards appended" if append else "shards written", summary)


@cli.command("generate")
@click.argument("kind", type=click.Choice(["synthetic", "crimes", "citibike", "cluster", "stocks"]))
@click.option("--events", type=click.IntRange(min=1), required=True, help="Number of events.")
@click.option(
    "--out", "out", required=True, type=click.Path(dir_okay=False), help="Parquet file to write."
)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--interarrival",
    type=click.Choice(["poisson", "uniform", "gaussian", "rayleigh"]),
    default=None,
    help="Synthetic data: inter-arrival distribution (mean 1 s; default poisson).",
)
@pass_state
@handle_errors
def generate_command(
    state: State, kind: str, events: int, out: str, seed: int, interarrival: str | None
) -> None:
    """Generate a data set (the paper's synthetic data, CRIMES-, CITIBIKE-, CLUSTER-shaped, or stock
    ticks) as parquet."""
    from rich.progress import Progress

    from dfs_cer.datasets.generate import write_parquet

    options = {"interarrival": interarrival} if interarrival else {}
    if interarrival and kind != "synthetic":
        raise click.UsageError("--interarrival applies to synthetic data only")
    with Progress(transient=True) as progress:
        task = progress.add_task(f"generating {kind}", total=events)
        rows = write_parquet(
            kind,
            events,
            out,
            seed=seed,
            progress=lambda n: progress.update(task, completed=n),
            **options,
        )
    state.output.mapping("generated", {"kind": kind, "rows": rows, "file": out})


@cli.command("load")
@click.argument("kind", type=click.Choice(["crimes", "citibike", "cluster"]))
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--out", "out", required=True, type=click.Path(dir_okay=False), help="Parquet file to write."
)
@pass_state
@handle_errors
def load_command(state: State, kind: str, files: tuple[str, ...], out: str) -> None:
    """Convert the real public files (Chicago crimes CSV, Citi Bike trip CSVs, Google cluster
    task_events) to parquet in dfs-cer's schemas, cleaned as the paper's scripts do."""
    from rich.progress import Progress

    from dfs_cer.datasets import loaders

    load = {
        "crimes": loaders.load_chicago_crimes,
        "citibike": loaders.load_citibike,
        "cluster": loaders.load_google_cluster,
    }[kind]
    with Progress(transient=True) as progress:
        task = progress.add_task(f"loading {kind}", total=None)
        result = load(list(files), out, progress=lambda n: progress.update(task, completed=n))
    state.output.mapping(
        "loaded",
        {"kind": kind, "rows": result.rows, "dropped (nulls)": result.dropped, "file": out},
    )


@cli.command("warm")
@pass_state
@handle_errors
def warm_command(state: State) -> None:
    """Compile the engines' kernels into the cache now (make install does it; a first query
    otherwise waits for it)."""
    from dfs_cer.warm import warm

    took = warm(lambda text: click.echo(f"{text} ...", err=True))
    state.output.mapping(
        "compiled (later runs load them from numba's cache)",
        {step: f"{seconds:.1f} s" for step, seconds in took},
    )


@cli.command("calibrate")
@click.option(
    "--out",
    "out_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the tables (default: strategy.calibration_file, conf/calibration.json).",
)
@click.option("--quick", is_flag=True, help="Sizes up to 100k events only (about 10 s).")
@pass_state
@handle_errors
def calibrate_command(state: State, out_file: str | None, quick: bool) -> None:
    """Measure the cost model's per-event constants (C_p1, C_p2, C_b, beta) on this machine."""
    import json as json_lib

    from dfs_cer.calibrate import SIZES, calibrate

    target = Path(out_file or state.config.strategy.calibration_file)
    doc = calibrate(
        SIZES[:3] if quick else SIZES,
        sample_events=state.config.strategy.beta_sample_events,
        progress=lambda text: click.echo(f"calibrating {text} ...", err=True),
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json_lib.dumps(doc, indent=2) + "\n")
    rows = {
        f"{name} at {int(n):,} events (ns/event)": round(cost * 1e9, 1)
        for name, table in doc["tables"].items()
        for n, cost in table
    }
    rows.update(
        {f"beta, {engine} (ns/event)": round(cost * 1e9, 1) for engine, cost in doc["beta"].items()}
    )
    state.output.mapping(f"calibration written to {target}", rows)


def main() -> None:
    try:
        cli(prog_name="dfs-cer")
    finally:
        # the answer is out: the interpreter's last collections would walk every object the
        # command made (numba's kernels dispose of their code one by one, ~0.3 s after a query);
        # the operating system takes the process's memory back at once instead
        gc.disable()
        gc.freeze()


if __name__ == "__main__":
    main()
