"""Saved query runs (``dfs-cer query --save-run`` / ``--since-run``): one directory per run with
``run.json`` (the query, strategy, options, window and the shard files each storage node had)
and ``matches.parquet`` (the MATCH_RECOGNIZE relation with stable match ids); an incremental
run also keeps ``changelog.parquet``."""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dfs_cer.errors import DfsCerError


class RunError(DfsCerError):
    """A saved run is missing or unusable."""

    exit_code = 2


@dataclass
class RunRecord:
    run_id: str
    sql: str
    strategy: str
    options: dict[str, Any]
    #: per storage node (in endpoint order): the shard files it served, as its manifest lists them
    files: list[list[str]]
    window_units: int | None
    parent: str | None = None
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    #: how the run was computed: "full", or "incremental" with the ranges it recomputed
    mode: str = "full"
    recomputed: list[list[int]] | None = None
    note: str | None = None
    #: tables served in place: the snapshot the run read, and each file's first and last time
    #: (a file a later snapshot removes changes the matches of its time range)
    snapshot: int | None = None
    bounds: dict[str, list[int | None]] | None = None


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def save_run(
    runs_dir: str | Path, record: RunRecord, matches: pa.Table, changes: pa.Table | None = None
) -> Path:
    where = Path(runs_dir) / record.run_id
    where.mkdir(parents=True, exist_ok=False)
    pq.write_table(matches, where / "matches.parquet")
    if changes is not None:
        pq.write_table(changes, where / "changelog.parquet")
    tmp = where / "run.json.tmp"
    tmp.write_text(json.dumps(asdict(record), indent=1))
    tmp.replace(where / "run.json")  # the record appears last: a run without it is incomplete
    return where


#: what a run id looks like (``new_run_id``): a name, never a path
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


#: the run id that names the newest saved run
LAST = "last"


def saved_runs(runs_dir: str | Path) -> list[str]:
    """The ids of the complete runs under ``runs_dir``, oldest first (ids begin with the time)."""
    root = Path(runs_dir)
    return sorted(p.parent.name for p in root.glob("*/run.json")) if root.is_dir() else []


def resolve_run_id(runs_dir: str | Path, run_id: str) -> str:
    """``run_id``, or for ``last`` the newest saved run's id."""
    if run_id != LAST:
        return run_id
    known = saved_runs(runs_dir)
    if not known:
        raise RunError(f"no saved run under {runs_dir} (save one with dfs-cer query --save-run)")
    return known[-1]


def load_run(runs_dir: str | Path, run_id: str) -> tuple[RunRecord, pa.Table]:
    """A saved run's record and matches; ``last`` names the newest."""
    run_id = resolve_run_id(runs_dir, run_id)
    if not _RUN_ID.match(run_id) or run_id in (".", ".."):
        raise RunError(
            f"{run_id!r} is not a run id (letters, digits, '-', '_' and '.'; e.g. "
            "20261123T101500-1a2b3c); --since-run names a run under --runs-dir, not a path"
        )
    root = Path(runs_dir).resolve()
    where = (root / run_id).resolve()
    if where.parent != root:  # a symlink pointing elsewhere
        raise RunError(f"saved run {run_id!r} resolves outside {runs_dir}")
    meta = where / "run.json"
    if not meta.is_file():
        known = saved_runs(runs_dir)
        raise RunError(
            f"no saved run {run_id!r} under {runs_dir}; saved runs: "
            f"{', '.join(known[-5:]) or 'none'} (save one with dfs-cer query --save-run)"
        )
    try:
        record = RunRecord(**json.loads(meta.read_text()))
        matches = pq.read_table(where / "matches.parquet")
    except (OSError, TypeError, ValueError, pa.ArrowInvalid) as exc:
        raise RunError(
            f"saved run {run_id!r} under {runs_dir} is unreadable ({exc}); run the query again "
            "with --save-run"
        ) from exc
    return record, matches
