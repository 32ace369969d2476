"""``dfs-cer table``: look at a table served in place (snapshots, files, each node's share) and
append an event log to an Iceberg table (a new snapshot: late data for ``--since-run``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from dfs_cer.cli.app import State, cli, handle_errors, pass_state

#: snapshots ``table show`` lists unless told to list every one
SNAPSHOTS_SHOWN = 5


@cli.group("table")
def table_group() -> None:
    """Tables served in place: iceberg://CATALOG/NAMESPACE.TABLE or hive:PATH."""


def _when(ms: int | None) -> str:
    return (
        ""
        if ms is None
        else dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    )


@table_group.command("show")
@click.argument("table")
@click.option(
    "--nodes",
    type=click.IntRange(min=1),
    default=None,
    help="Also show which files each of this many storage nodes serves (writes the assignment "
    "once).",
)
@click.option(
    "--all-snapshots", is_flag=True, help=f"List every snapshot (else the last {SNAPSHOTS_SHOWN})."
)
@pass_state
@handle_errors
def show(state: State, table: str, nodes: int | None, all_snapshots: bool = False) -> None:
    """The table's snapshot, files (rows, bytes, time range) and, with --nodes, each node's
    share."""
    from dfs_cer.io.tables import node_share, parse_table, plan_table

    ref = parse_table(table)
    plan = plan_table(ref, tables=state.config.tables, storage=state.config.storage)
    summary: dict[str, Any] = {"table": ref.name}
    if ref.kind == "iceberg":
        summary.update(snapshot=plan.snapshot, committed=_when(plan.snapshot_ms))
    summary.update(
        {
            "files": len(plan.files),
            "rows": plan.rows,
            "bytes": sum(f.bytes for f in plan.files),
            "columns": ", ".join(f"{f.name} {f.type}" for f in plan.schema),
        }
    )
    if ref.kind == "iceberg":
        from dfs_cer.io.tables import load_iceberg

        snaps = load_iceberg(ref, state.config.tables, state.config.storage).snapshots()
        shown = snaps if all_snapshots else snaps[-SNAPSHOTS_SHOWN:]
        summary["snapshots"] = ", ".join(str(s.snapshot_id) for s in shown) + (
            f" (the last {len(shown)}; {len(snaps) - len(shown)} older: --all-snapshots lists "
            "every one)"
            if len(shown) < len(snaps)
            else ""
        )
    state.output.mapping(plan.describe(), summary)
    if nodes:
        import pyarrow as pa

        dtype = (
            plan.schema.field(ref.time_column).type
            if ref.time_column in plan.schema.names
            else pa.int64()
        )

        from dfs_cer.events.time import moment as as_moment

        def moment(value: int | None) -> object:
            return "" if value is None else as_moment(value, dtype)

        rows = []
        for k in range(nodes):
            share = node_share(
                plan_table(
                    ref.for_node(k, nodes), tables=state.config.tables, storage=state.config.storage
                ),
                state.config.tables,
            )
            times = [f for f in share.files if f.min_ts is not None]
            rows.append(
                {
                    "node": f"{k}/{nodes}",
                    "files": len(share.files),
                    "rows": share.rows,
                    "first time": moment(min((f.min_ts for f in times), default=None)),  # type: ignore[type-var]
                    "last time": moment(max((f.max_ts for f in times), default=None)),  # type: ignore[type-var]
                }
            )
        state.output.table(f"shares of {nodes} storage nodes (by {ref.by})", rows)


@table_group.command("append")
@click.argument("table")
@click.option(
    "--input",
    "input_path",
    required=True,
    help="Parquet or CSV file or directory (local or s3://).",
)
@click.option(
    "--create", is_flag=True, help="Create the table (and its namespace) when it does not exist."
)
@pass_state
@handle_errors
def append(state: State, table: str, input_path: str, create: bool) -> None:
    """Append an event log to an Iceberg table as one new snapshot."""
    from dfs_cer.io.tables import append_iceberg

    snapshot, rows = append_iceberg(
        table, input_path, create=create, tables=state.config.tables, storage=state.config.storage
    )
    state.output.mapping(f"appended to {table}", {"rows": rows, "snapshot": snapshot})
