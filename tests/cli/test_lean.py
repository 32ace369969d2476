"""The command line loads only what a command uses: ``--help`` no Arrow, numpy or kernels, and a
query matching in its own process no pandas, Spark, DuckDB or plotting (each costs start-up time
on every query; pyarrow would import pandas the first time it converts a list)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

#: runs ``dfs-cer ARGS`` and writes the modules it loaded to stderr as it exits
RUN = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
sys.argv = ["dfs-cer", *sys.argv[1:]]
from dfs_cer.cli.main import main
main()
"""

#: what no query matching in its own process may load
NEVER_ON_A_QUERY = {"pandas", "pyspark", "duckdb", "matplotlib", "scipy", "boto3", "pyiceberg"}


def loaded(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    run = subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300
    )
    assert "MODULES " in run.stderr, run.stderr
    err, modules = run.stderr.split("MODULES ", 1)
    return subprocess.CompletedProcess(run.args, run.returncode, run.stdout, err), {
        m.split(".")[0] for m in json.loads(modules)
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    root = tmp_path_factory.mktemp("lean")
    i = np.arange(6_000, dtype=np.int64)
    events = pa.table({"k": i % 3, "ts": i, "v": (i * 7) % 11})
    pq.write_table(events, root / "t.parquet")
    shard(str(root / "t.parquet"), 2, str(root / "nodes"), name="t")
    with LocalCluster([str(root / "nodes" / f"node-{n:02d}") for n in range(2)]) as c:
        (root / "token").write_text(c.token)
        yield c, root / "token"


def test_help_loads_no_arrow_numpy_or_kernels() -> None:
    run, modules = loaded("--help")
    assert run.returncode == 0 and "query" in run.stdout
    assert not {"pyarrow", "numpy", "numba", "pandas", "sqlglot"} & modules


def test_a_query_loads_no_pandas_spark_or_duckdb(cluster: tuple[LocalCluster, Path]) -> None:
    c, token = cluster
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a "
        "ONE ROW PER MATCH PATTERN (A B) WITHIN INTERVAL '5' SECOND "
        "DEFINE A AS A.v = 10, B AS B.v = 9)"
    )
    endpoints = ",".join(c.endpoints)
    run, modules = loaded(
        "query", "--endpoints", endpoints, "--token-file", str(token), "--format", "json", sql
    )
    assert run.returncode == 0, run.stderr
    # v = 10 exactly where i % 11 == 3, and the next row of the group (i + 3) then has v = 9
    expected = sorted(int(i) for i in range(6_000 - 3) if (i * 7) % 11 == 10)
    out = json.loads(run.stdout)
    assert sorted(m["a"] for m in out["matches"]) == expected
    # where the time went: every round split into the compute node's, the nodes' and the wire's
    rounds, phases = out["trace"]["rounds"], out["trace"]["phases"]
    assert rounds and all(
        0 <= r["node_seconds"] <= r["seconds"] and r["cn_seconds"] >= 0 for r in rounds
    )
    held = sum(phases[k] for k in ("start-up", "planning", "rounds", "pull", "matching", "other"))
    assert held == pytest.approx(phases["wall"]) and phases["start-up"] > 0
    assert not NEVER_ON_A_QUERY & modules, NEVER_ON_A_QUERY & modules
    assert {"pyarrow", "numba"} <= modules  # it did match, here
