"""Runs that remember what they saw, and re-runs after late files (``--since-run``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from dfs_cer.io.runs import RunError, RunRecord, load_run, new_run_id, save_run
from dfs_cer.plan import changelog as cl
from dfs_cer.query import analyze, parse
from dfs_cer.strategies.base import PullResult
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.pull import pull
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.replies import FilesReply

#: options that change which matches a query has (a re-run must use the saved run's)
SEMANTIC = ("integer_time_unit", "event_key", "dedup")


@dataclass
class RunResult:
    record: RunRecord
    #: the MATCH_RECOGNIZE relation with ``__match_id``, ``__match_start``, ``__match_end``
    matches: pa.Table
    #: changes since the previous run (``--since-run``), else None
    changes: pa.Table | None
    #: the pull behind it (None when nothing new had to be read)
    pulled: PullResult | None
    where: Path


def shard_files(
    endpoints: Sequence[str], token: str, snapshot: int | None = None
) -> tuple[list[list[dict[str, Any]]], int | None]:
    """Every storage node's files (with time bounds), in endpoint order, and the table snapshot
    they are of (nodes serving a table in place; None for shard sets): ``snapshot``, else the
    table's current one, the same on every node."""

    def ask(pin: int | None) -> list[FilesReply]:
        out = []
        for e in endpoints:
            client = StorageClient(e, token)
            try:
                header, _ = client.call(FilesReply, {} if pin is None else {"snapshot": pin})
            finally:
                client.close()
            out.append(header)
        return out

    headers = ask(snapshot)
    seen = [h.snapshot for h in headers]
    if (
        snapshot is None and len(set(seen)) > 1
    ):  # a commit between two calls: all at the last node's
        snapshot = seen[-1]
        headers = ask(snapshot)
    return [list(h.files) for h in headers], headers[0].snapshot if headers else None


def _key(f: dict[str, Any]) -> str:
    """A served file's identity: its path, and its version when it has one (Hive files)."""
    return str(f["path"]) if f.get("version") is None else f"{f['path']}#{f['version']}"


def _matching_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: options[k] for k in ("selection", "kleene") if options.get(k)}


def run_and_save(
    sql: str,
    endpoints: Sequence[str],
    token: str,
    *,
    strategy: str = "dfs",
    runs_dir: str | Path = ".dfs-cer/runs",
    since_run: str | None = None,
    **options: Any,
) -> RunResult:
    """Run ``sql`` (or, with ``since_run``, the saved run's query) and save the run.

    With ``since_run``: only the shard files added since that run (``dfs-cer shard --append``)
    are new; the time ranges they can affect are recomputed (all of them when the query's
    matches are not independent of each other, see :mod:`dfs_cer.plan.changelog`), merged with
    the saved matches, and the changes are returned and saved: new, updated (same first and
    last time, different events) and invalidated matches by stable match id. Running it again
    with no new files changes nothing."""
    from dfs_cer.strategies.request import settings_of

    # the settings that decide the matches, as given or from the settings in force: saved with
    # the run, so that a re-run matches as it did
    settings = settings_of(options.get("config"))
    options = {
        **options,
        "config": settings,
        "integer_time_unit": options.get("integer_time_unit") or settings.query.integer_time_unit,
        "dedup": settings.query.dedup if options.get("dedup") is None else options["dedup"],
        "event_key": options.get("event_key") or list(settings.query.event_key) or None,
    }
    configured = {"kleene": settings.matcher.kleene}
    match_opts = {**configured, **_matching_options(options)}
    previous: RunRecord | None = None
    old = None
    if since_run is not None:
        previous, old = load_run(runs_dir, since_run)
        if sql and parse(sql).to_sql() != parse(previous.sql).to_sql():
            raise RunError(
                f"the query differs from run {since_run}'s; --since-run re-runs that run's query "
                "(leave the query out)"
            )
        sql = previous.sql
        strategy = previous.strategy
        match_opts = {
            **configured,
            **_matching_options(previous.options),
            **_matching_options(options),
        }
    files, snapshot = shard_files(endpoints, token)
    names = [[_key(f) for f in node] for node in files]
    versioned = any(
        "version" in f for node in files for f in node
    )  # Hive files, rewritable in place
    bounds = (
        {_key(f): [f.get("min_ts"), f.get("max_ts")] for node in files for f in node}
        if snapshot is not None or versioned
        else None
    )
    # match ids are computed here: the events are pulled, never matched on the nodes
    pull_opts = {
        **{k: v for k, v in options.items() if k not in ("selection", "kleene")},
        "node_matching": "off",
        "snapshot": snapshot,
    }
    if previous is not None:  # what decides the matches comes from the saved run
        pull_opts.update({k: v for k, v in previous.options.items() if k in SEMANTIC})
    if previous is None:
        pulled = pull(strategy, sql, endpoints, token, **pull_opts)
        matches = match_pulled(pulled, outer=False, match_ids=True, **match_opts)
        kept = {
            k: v for k, v in {**pull_opts, **match_opts}.items() if k not in ("timeout", "config")
        }
        kept.pop("snapshot", None)
        record = RunRecord(
            new_run_id(),
            sql,
            strategy,
            kept,
            names,
            pulled.analysis.window_units,
            snapshot=snapshot,
            bounds=bounds,
        )
        where = save_run(runs_dir, record, matches)
        return RunResult(record, matches, None, pulled, where)
    assert old is not None
    if len(files) != len(previous.files):
        raise RunError(
            f"run {since_run} saw {len(previous.files)} storage nodes, now {len(files)}; re-run in "
            "full (without --since-run)"
        )
    seen_before = {p for node in previous.files for p in node}
    new_files = [f for node in files for f in node if _key(f) not in seen_before]
    # a table's later snapshot may also remove files (an overwrite, a compaction), and a Hive
    # file rewritten in place is a removed and an added version: their time ranges change too
    now = {_key(f) for node in files for f in node}
    old_bounds = previous.bounds or {}
    removed = [
        {
            "path": p,
            "min_ts": old_bounds.get(p, [None, None])[0],
            "max_ts": old_bounds.get(p, [None, None])[1],
        }
        for seen in previous.files
        for p in seen
        if p not in now
    ]
    changed = [*new_files, *removed]
    record = RunRecord(
        new_run_id(),
        sql,
        strategy,
        previous.options,
        names,
        previous.window_units,
        parent=previous.run_id,
        mode="incremental",
        recomputed=[],
        snapshot=snapshot,
        bounds=bounds,
    )
    if not changed:
        record.note = (
            f"no new {'data' if snapshot is not None else 'shard'} files since the previous run"
        )
        changes = cl.changelog(old, old, [])
        where = save_run(runs_dir, record, old, changes)
        return RunResult(record, old, changes, None, where)
    query = parse(sql)
    window = previous.window_units
    reason = cl.incremental_reason(analyze(query), window, bool(match_opts.get("selection")))
    recomputed: list[tuple[int, int]] | None = None
    if reason is None and any(f.get("min_ts") is None or f.get("max_ts") is None for f in changed):
        reason = "a new or removed file has no time statistics"
    if reason is None and window is not None:
        read, recomputed = cl.affected(changed, window)
        record.recomputed = [[a, b] for a, b in recomputed]
        pulled = pull(strategy, sql, endpoints, token, time_ranges=read, **pull_opts)
    else:
        record.mode = "full"
        record.note = f"recomputed every match: {reason}"
        pulled = pull(strategy, sql, endpoints, token, **pull_opts)
    fresh = match_pulled(pulled, outer=False, match_ids=True, **match_opts)
    bound = pulled.analysis.query.recognize  # column names as the data spells them
    partition = list(bound.partition_by)
    order = [*partition, bound.order_by[0].column]
    merged = cl.combine(old, fresh, recomputed, order)
    changes = cl.changelog(old, merged, partition)
    where = save_run(runs_dir, record, merged, changes)
    return RunResult(record, merged, changes, pulled, where)
