"""The ``dfs-cer`` root group, its state and the error decorator every command uses."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

import dfs_cer
from dfs_cer import interrupt
from dfs_cer.cli.output import Output, make_output
from dfs_cer.config import Config, load_config
from dfs_cer.errors import DfsCerError
from dfs_cer.lean import hide
from dfs_cer.logs import DEFAULT_LEVEL, LEVELS, configure
from dfs_cer.match.progress import MatchProgress, listening

F = TypeVar("F", bound=Callable[..., Any])


#: the last progress line written where stderr is not a terminal
_LAST_LINE = [""]


def _show_progress(progress: MatchProgress) -> None:
    """A long match's progress on stderr: one line, rewritten on a terminal (and cleared when
    the run ends); elsewhere a line per report."""
    if sys.stderr.isatty():
        click.echo(
            "\r\x1b[K" if progress.finished else f"\r{progress.line()}\x1b[K", err=True, nl=False
        )
    elif not progress.finished and progress.line() != _LAST_LINE[0]:
        # elsewhere a line per report, and a report that says nothing new is left out (the
        # compiling line, every second for a minute)
        _LAST_LINE[0] = progress.line()
        click.echo(_LAST_LINE[0], err=True)


def _interrupted() -> NoReturn:
    """Ctrl-C: one line on stderr and exit code 130, at once. The interrupted work has cleaned up
    on the way here (the query closed on every storage node); threads still inside a call to a
    node are not waited for, and the interpreter is not torn down around them."""
    click.echo("interrupted", err=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(interrupt.EXIT_CODE)


def without_pandas() -> None:
    """A command that matches in this process never needs pandas: hide it (see
    :mod:`dfs_cer.lean`). Not for a command that starts Spark (``toPandas``)."""
    hide(("pandas",), "dfs-cer query matching in its own process")


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: read only when asked (the package metadata costs every command's start)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"dfs-cer, version {dfs_cer.__version__}")
        ctx.exit()


def handle_errors(func: F) -> F:
    """Turn library errors into one line on stderr and an exit code; Ctrl-C into
    ``interrupted`` and exit code 130 (a second Ctrl-C exits at once, clean-up or not)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().params.get("debug"))
        try:
            with interrupt.interruptible(exit_on_second=True), listening(_show_progress):
                return func(*args, **kwargs)
        except KeyboardInterrupt:
            _interrupted()
        except DfsCerError as exc:
            if interrupt.interrupted():  # what Ctrl-C cut short (e.g. a cancelled Spark job)
                _interrupted()
            if debug:
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as exc:  # a bug: one line, and how to see more
            if interrupt.interrupted():
                _interrupted()
            if debug:
                raise
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for a traceback)",
                err=True,
            )
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


class State:
    def __init__(self, config: Config, output: Output) -> None:
        self.config = config
        self.output = output


pass_state = click.make_pass_decorator(State)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@click.option(
    "--config",
    "config_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="TOML settings file (repeatable); DFS_CER__SECTION__KEY variables override it.",
)
@click.option(
    "--output",
    "output_kind",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default=DEFAULT_LEVEL,
    show_default=True,
    help="Log dfs-cer's work at this level and above on stderr.",
)
@click.pass_context
def cli(
    ctx: click.Context, config_files: tuple[str, ...], output_kind: str, debug: bool, log_level: str
) -> None:
    """dfs-cer: find MATCH_RECOGNIZE patterns in event logs on storage nodes, pulling only
    the events inside time intervals that can contain matches."""
    configure(log_level)
    try:
        config = load_config(tuple(config_files))
    except DfsCerError as exc:
        if debug:
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    ctx.obj = State(config, make_output(output_kind))
