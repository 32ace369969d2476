"""The command line over Iceberg tables: ``dfs-cer table append/show``, storage nodes serving a
table, ``dfs-cer query`` with the pinned snapshot, ``--snapshot`` and ``--table NAME=iceberg://``,
``dfs-cer shard --input iceberg://`` and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from storage_node.launcher import LocalCluster
from tests.fixtures.statements import NAMES, STATEMENTS, events

pytestmark = pytest.mark.flight

EXE = Path(sys.executable).parent / "dfs-cer"


def test_cli_over_an_iceberg_table(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DFS_CER__TABLES__CATALOG_URI": f"sqlite:///{tmp_path}/catalog.db",
        "DFS_CER__TABLES__WAREHOUSE": str(tmp_path / "wh"),
        "DFS_CER__TABLES__ASSIGNMENTS_DIR": str(tmp_path / "a"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EXE), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )

    log = events()
    pq.write_table(log.slice(0, 1000), tmp_path / "early.parquet")
    pq.write_table(log.slice(1000), tmp_path / "late.parquet")
    pq.write_table(NAMES, tmp_path / "names.parquet")
    out = run(
        "--output",
        "json",
        "table",
        "append",
        "iceberg://local/logs.events",
        "--input",
        "early.parquet",
        "--create",
    )
    assert out.returncode == 0, out.stderr
    first = json.loads(out.stdout)["snapshot"]
    assert (
        run(
            "table", "append", "iceberg://local/logs.names", "--input", "names.parquet", "--create"
        ).returncode
        == 0
    )
    shown = run("table", "show", "iceberg://local/logs.events", "--nodes", "2")
    assert shown.returncode == 0 and "shares of 2 storage nodes (by time)" in shown.stdout, (
        shown.stderr
    )
    missing = run("table", "show", "iceberg://local/logs.nope")
    assert missing.returncode == 2 and missing.stderr.startswith(
        "error: no Iceberg table logs.nope"
    )
    assert "Traceback" not in missing.stderr

    sql = STATEMENTS[1].replace("FROM t ", "FROM events ")  # the table's name
    cluster_env = {k: v for k, v in env.items() if k.startswith("DFS_CER__TABLES__")}
    with LocalCluster(
        [f"iceberg://local/logs.events?node={i}/2" for i in range(2)], env=cluster_env
    ) as cluster:
        token = tmp_path / "token"
        token.write_text(cluster.token)
        base = ["query", "--endpoints", ",".join(cluster.endpoints), "--token-file", str(token)]
        clause = "SELECT * " + sql.split("SELECT * ", 1)[1].split(") SELECT", 1)[0]
        explained = run(*base, "--explain-analyze", clause)
        assert explained.returncode == 0, explained.stderr
        assert f"table snapshot read on every storage node: {first}" in explained.stdout
        assert (
            run(
                "table", "append", "iceberg://local/logs.events", "--input", "late.parquet"
            ).returncode
            == 0
        )
        now = run(*base, "--format", "json", "--table", "names=iceberg://local/logs.names", sql)
        assert now.returncode == 0, now.stderr
        assert (
            json.loads(now.stdout)["matches"]
            == match_recognize(log, sql, tables={"names": NAMES}).to_pylist()
        )
        then = run(
            *base,
            "--format",
            "json",
            "--snapshot",
            str(first),
            "--table",
            "names=iceberg://local/logs.names",
            sql,
        )
        assert then.returncode == 0, then.stderr
        assert (
            json.loads(then.stdout)["matches"]
            == match_recognize(log.slice(0, 1000), sql, tables={"names": NAMES}).to_pylist()
        )
        situations = run(
            *base,
            "--snapshot",
            str(first),
            "SELECT * FROM t SITUATIONS (ORDER BY ts DEFINE A AS x > 5)",
        )
        assert (
            situations.returncode == 2
            and "--snapshot applies to MATCH_RECOGNIZE queries" in situations.stderr
        )
        wrong = run(*base, "--snapshot", "5", clause)
        assert (
            wrong.returncode != 0
            and "has no snapshot 5" in wrong.stderr
            and "Traceback" not in wrong.stderr
        )
    sharded = run(
        "shard", "--input", "iceberg://local/logs.events", "--nodes", "2", "--to", "shards"
    )
    assert sharded.returncode == 0, sharded.stderr
    assert (
        sum(pq.read_metadata(p).num_rows for p in (tmp_path / "shards").rglob("*.parquet"))
        == log.num_rows
    )


def test_table_show_says_how_many_snapshots_it_leaves_out(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DFS_CER__TABLES__CATALOG_URI": f"sqlite:///{tmp_path}/catalog.db",
        "DFS_CER__TABLES__WAREHOUSE": str(tmp_path / "wh"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EXE), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )

    log = events()
    ids = []
    for i in range(7):
        pq.write_table(log.slice(i * 100, 100), tmp_path / f"day{i}.parquet")
        extra = ["--create"] if i == 0 else []
        out = run(
            "--output", "json", "table", "append", "iceberg://local/logs.events",
            "--input", f"day{i}.parquet", *extra,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        ids.append(str(json.loads(out.stdout)["snapshot"]))
    shown = run("--output", "json", "table", "show", "iceberg://local/logs.events")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["snapshots"] == (
        ", ".join(ids[-5:]) + " (the last 5; 2 older: --all-snapshots lists every one)"
    )
    every = run(
        "--output", "json", "table", "show", "iceberg://local/logs.events", "--all-snapshots"
    )
    assert json.loads(every.stdout)["snapshots"] == ", ".join(ids)
