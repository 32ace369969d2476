"""The ``dfs-cer`` command line: thin wiring over the library.

Every command maps a :class:`~dfs_cer.errors.DfsCerError` to one line on stderr and the
error's exit code (2 for bad queries and settings, 1 otherwise); no tracebacks unless
``--debug`` is given.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from dfs_cer import __version__
from dfs_cer.cli.output import Output, make_output
from dfs_cer.config import Config, load_config
from dfs_cer.errors import DfsCerError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn library errors into one line on stderr and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().params.get("debug"))
        try:
            return func(*args, **kwargs)
        except DfsCerError as exc:
            if debug:
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug: one line, and how to see more
            if debug:
                raise
            click.echo(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for a traceback)", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


class State:
    def __init__(self, config: Config, output: Output) -> None:
        self.config = config
        self.output = output


pass_state = click.make_pass_decorator(State)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dfs-cer")
@click.option("--config", "config_files", multiple=True, type=click.Path(dir_okay=False),
              help="TOML settings file (repeatable); DFS_CER__SECTION__KEY variables override it.")
@click.option("--output", "output_kind", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, config_files: tuple[str, ...], output_kind: str, debug: bool) -> None:
    """dfs-cer: find MATCH_RECOGNIZE patterns in event logs on storage nodes, pulling only
    the events inside time intervals that can contain matches."""
    try:
        config = load_config(tuple(config_files))
    except DfsCerError as exc:
        if debug:
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    ctx.obj = State(config, make_output(output_kind))


def _read_sql(sql: str | None, file: str | None) -> str:
    if file is not None:
        if file == "-":
            return sys.stdin.read()
        path = Path(file)
        if not path.is_file():
            raise click.BadParameter(f"{file} is not a file", param_hint="--file")
        return path.read_text()
    if sql is None:
        raise click.UsageError("give the query as an argument or with --file")
    return sql


@cli.command()
@click.argument("sql", required=False)
@click.option("--file", "-f", "file", help="Read the query from a file ('-' for stdin).")
@click.option("--schema-from", type=click.Path(exists=True, dir_okay=False),
              help="A parquet file whose schema binds the query (checks columns, converts the window).")
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
@click.option("--json", "as_json", is_flag=True, help="Print the query model as JSON instead of SQL.")
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
@pass_state
@handle_errors
def demo(state: State) -> None:
    """Run the embedded demo on the paper's example query."""
    from dfs_cer.cli.demo import run_demo

    run_demo(state.output, state.config)


def main() -> None:
    cli(prog_name="dfs-cer")


if __name__ == "__main__":
    main()
