"""``dfs-cer storage-node``: serve a shard set in the foreground, or start and stop storage nodes
in the background on this machine (``up`` / ``down``; ``dfs-cer query`` then finds them)."""

from __future__ import annotations

from pathlib import Path

import click

from dfs_cer.cli.app import State, cli, handle_errors, pass_state
from dfs_cer.errors import ConfigError

#: where ``up`` writes the token, the nodes file and the logs (status and down read it)
state_dir_option = click.option(
    "--dir",
    "state_dir",
    default=".dfs-cer/nodes",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the token, the nodes file and the nodes' logs go.",
)


@cli.group("storage-node")
def storage_node_group() -> None:
    """Storage nodes: Arrow Flight servers over shard sets or tables in place."""


@storage_node_group.command("serve", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def storage_node_serve(args: tuple[str, ...]) -> None:
    """dfs-cer storage-node serve --data <dir|s3://...|iceberg://...> --port P --token-file F
    [--memory-budget 2GiB]: one node in the foreground."""
    from storage_node.server import main as serve_main

    serve_main(list(args))


@storage_node_group.command("token")
@click.argument("path", type=click.Path(dir_okay=False))
@pass_state
@handle_errors
def token_command(state: State, path: str) -> None:
    """Write a random token to PATH (readable by you only) for --token-file; an existing file is
    kept, made readable by you only when it was open to others (said on stderr)."""
    from storage_node.daemons import write_token

    done = write_token(Path(path))
    if done == "tightened":
        click.echo(f"note: the token file {path} was readable by others: made it 0600", err=True)
    state.output.message(f"{'wrote a new' if done == 'wrote' else 'kept the'} token in {path}")


@storage_node_group.command("up")
@click.option(
    "--shards",
    type=click.Path(file_okay=False),
    default=None,
    help="A directory dfs-cer shard wrote: one node per node-XX shard set in it.",
)
@click.option(
    "--table",
    default=None,
    metavar="REF",
    help="A table served in place (iceberg://CATALOG/NS.TABLE or hive:PATH), shared among "
    "--nodes nodes.",
)
@click.option("--nodes", type=click.IntRange(1, 256), default=None, help="How many nodes.")
@state_dir_option
@click.option("--memory-budget", default=None, help="Each node's memory budget (e.g. 2GiB).")
@click.option("--host", default=None, help="The address the nodes listen on [127.0.0.1].")
@click.option(
    "--metrics",
    is_flag=True,
    help="Each node serves Prometheus metrics on a free port of 127.0.0.1 (status lists them).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="How long the nodes may take to load their rows and start.",
)
@pass_state
@handle_errors
def up_command(
    state: State,
    shards: str | None,
    table: str | None,
    nodes: int | None,
    state_dir: str,
    memory_budget: str | None,
    host: str | None,
    metrics: bool,
    timeout: float,
) -> None:
    """Start storage nodes in the background, write a token and a nodes file, print the
    endpoints; dfs-cer query finds them without --endpoints or --token-file."""
    from storage_node.daemons import nodes_path, shard_sets, table_shares, up

    if (shards is None) == (table is None):
        raise ConfigError("give --shards DIR (the output of dfs-cer shard) or --table REF")
    if shards is not None:
        data = shard_sets(shards)
        if nodes is not None and nodes != len(data):
            raise ConfigError(
                f"--shards {shards} holds {len(data)} shard sets, one per node, but --nodes is "
                f"{nodes}: leave --nodes out, or shard again with dfs-cer shard --nodes {nodes}"
            )
    else:
        assert table is not None
        data = table_shares(table, nodes or 1)
    started = up(
        data,
        state_dir,
        memory_budget=memory_budget,
        host=host,
        timeout=timeout,
        progress=lambda text: click.echo(f"{text} ...", err=True),
        metrics=metrics,
        notice=lambda text: click.echo(f"note: {text}", err=True),
    )
    state.output.mapping(
        f"{len(started.endpoints)} storage nodes up (stop them with dfs-cer storage-node down)",
        {
            "endpoints": ",".join(started.endpoints),
            "token file": started.token_file,
            "nodes file": str(nodes_path(state_dir)),
            "logs": str(Path(started.logs[0]).parent) if started.logs else "",
            **({"metrics": ",".join(started.metrics)} if started.metrics else {}),
        },
    )


@storage_node_group.command("status")
@state_dir_option
@pass_state
@handle_errors
def status_command(state: State, state_dir: str) -> None:
    """The nodes dfs-cer storage-node up started, and whether each still runs."""
    from storage_node.daemons import is_node, nodes_path, read_nodes

    nodes = read_nodes(state_dir)
    if nodes is None:
        state.output.message(f"no storage nodes: {nodes_path(state_dir)} does not exist")
        return
    state.output.table(
        f"storage nodes of {nodes_path(state_dir)}",
        [
            {
                "endpoint": e,
                "data": d,
                "pid": str(p),
                "running": "yes" if is_node(p) else "no",
                "log": _near(log),
                **({"metrics": nodes.metrics[i]} if i < len(nodes.metrics) else {}),
            }
            for i, (e, d, p, log) in enumerate(
                zip(nodes.endpoints, nodes.data, nodes.pids, nodes.logs, strict=True)
            )
        ],
    )


def _near(path: str) -> str:
    """A path relative to the working directory when it is under it (shorter to read)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


@storage_node_group.command("down")
@state_dir_option
@pass_state
@handle_errors
def down_command(state: State, state_dir: str) -> None:
    """Stop the storage nodes dfs-cer storage-node up started."""
    from storage_node.daemons import down, nodes_path

    stopped = down(state_dir)
    if not stopped.pids:
        state.output.message(f"no storage nodes: {nodes_path(state_dir)} does not exist")
        return
    where = (
        ", ".join(stopped.nodes.endpoints)
        if stopped.nodes is not None
        else "started by an up that did not finish"
    )
    state.output.message(
        f"stopped {stopped.running} of {len(stopped.pids)} storage nodes ({where})"
    )
