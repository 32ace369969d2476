"""``dfs-cer query --save-run`` / ``--since-run`` as a user runs them: a query with ``{- N* -}``
saved by two strategies has the same match ids, and a duplicate delivery of the data (copies
dropped by the event key) changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.io.runs import RunError, resolve_run_id
from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

EXE = str(Path(sys.executable).parent / "dfs-cer")
SQL = (
    "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY g ORDER BY ts "
    "MEASURES A.id AS a, C.id AS c ONE ROW PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN (A {- N* -} B {- N* -} C) WITHIN 12 "
    "DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v > 4, C AS C.type = 'C')"
)


def test_saved_runs_share_match_ids_and_a_duplicate_delivery_changes_nothing(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(9)
    n = 600
    log = pa.table(
        {
            "id": np.arange(n),
            "g": rng.choice(["x", "y"], n),
            "type": rng.choice(["A", "B", "C", "N", "N", "N"], n),
            "v": rng.integers(0, 9, n),
            "ts": np.cumsum(rng.integers(0, 3, n)).astype(np.int64),
        }
    )
    pq.write_table(log, tmp_path / "log.parquet")
    pq.write_table(
        log.slice(200, 200), tmp_path / "again.parquet"
    )  # part of the log, delivered twice
    shard(
        str(tmp_path / "log.parquet"), 2, str(tmp_path / "shards"), event_key=("id",), name="events"
    )
    with LocalCluster([str(tmp_path / "shards" / f"node-{i:02d}") for i in range(2)]) as cluster:
        base = [
            EXE,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(cluster.token_file),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--format",
            "json",
        ]
        saved = {}
        for strategy in ("pull_all", "dfs"):
            done = subprocess.run(
                [*base, "--strategy", strategy, "--save-run", SQL],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            saved[strategy] = json.loads(done.stdout)
        ids = {s: sorted(m["__match_id"] for m in run["matches"]) for s, run in saved.items()}
        assert len(ids["dfs"]) > 10 and ids["dfs"] == ids["pull_all"]
        append = subprocess.run(
            [
                EXE,
                "shard",
                "--input",
                str(tmp_path / "again.parquet"),
                "--nodes",
                "2",
                "--to",
                str(tmp_path / "shards"),
                "--event-key",
                "id",
                "--append",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert append.returncode == 0, append.stderr
        for strategy, run in saved.items():
            again = subprocess.run(
                [*base, "--since-run", run["run_id"]], capture_output=True, text=True, timeout=120
            )
            assert again.returncode == 0, again.stderr
            rerun = json.loads(again.stdout)
            assert rerun["changes"] == [], strategy
            assert sorted(m["__match_id"] for m in rerun["matches"]) == ids[strategy]
        # a saved run with --explain-analyze prints its rounds before the run's line
        text = [a for a in base if a not in ("--format", "json")]
        shown = subprocess.run(
            [*text, "--save-run", "--explain-analyze", SQL],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == "strategy dfs" and lines[1].startswith("round")
        assert any(line.startswith("total ") for line in lines)
        assert next(i for i, x in enumerate(lines) if x.startswith("run ")) > 3
        newest = next(x for x in lines if x.startswith("run ")).split()[1]
        # --since-run last: the newest saved run (that one) is the re-run's parent
        last = subprocess.run(
            [*text, "--since-run", "last"], capture_output=True, text=True, timeout=120
        )
        assert last.returncode == 0, last.stderr
        rerun_id = next(x for x in last.stdout.splitlines() if x.startswith("run ")).split()[1]
        record = json.loads((tmp_path / "runs" / rerun_id / "run.json").read_text())
        assert record["parent"] == newest


def test_since_run_last_without_a_saved_run_says_how_to_save_one(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"no saved run under .* --save-run"):
        resolve_run_id(tmp_path / "runs", "last")
    assert resolve_run_id(tmp_path / "runs", "20261123T101500-1a2b3c") == "20261123T101500-1a2b3c"
