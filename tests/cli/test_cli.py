"""The dfs-cer console script, run as a user would (a subprocess)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.fixtures.queries import Q1

ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).parent / "dfs-cer"


def run(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [str(EXE), *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=full_env,
        cwd=ROOT,
        timeout=120,
    )


def test_help() -> None:
    out = run("--help")
    assert out.returncode == 0
    for command in ("explain", "format", "config", "demo"):
        assert command in out.stdout
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert importlib.metadata.version("dfs-cer") == declared  # the version from the metadata
    assert run("--version").stdout.strip() == f"dfs-cer, version {declared}"


def test_explain_text() -> None:
    out = run("explain", Q1)
    assert out.returncode == 0, out.stderr
    assert "R: head: first row of every match" in out.stdout
    assert "equality (window-wise join filter): M.district = B.district" in out.stdout
    assert "candidate rows only" in out.stdout
    assert "window:       INTERVAL '30' MINUTE = 1800 s" in out.stdout


def test_explain_json_from_stdin() -> None:
    out = run("--output", "json", "explain", "-f", "-", stdin=Q1)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [v["name"] for v in data["variables"]] == ["R", "N", "B", "M"]
    assert data["equalities"] == ["M.district = B.district"]
    assert data["rows_between_variables_skippable"] is True
    assert data["variables"][0]["pushed_filter"] == '(primary_type == "ROBBERY")'


def test_explain_binds_a_parquet_schema(tmp_path: Path) -> None:
    path = tmp_path / "crimes.parquet"
    pq.write_table(
        pa.table(
            {
                "primary_type": ["ROBBERY"],
                "district": [1],
                "date": pa.array([0], pa.timestamp("ms")),
            }
        ),
        path,
    )
    out = run("--output", "json", "explain", "--schema-from", str(path), Q1)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["window_units"] == 1_800_000
    out = run(
        "explain",
        "--schema-from",
        str(path),
        Q1.replace("M.district = B.district", "M.distrct = B.district"),
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: column distrct does not exist (in DEFINE M); did you mean district?"
    )


def test_bad_query_is_one_line_exit_2() -> None:
    out = run(
        "explain", "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE C AS C.x > 1)"
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr == (
        "error: DEFINE defines C, which does not appear in PATTERN (in DEFINE); "
        "pattern variables: A, B\n"
    )
    assert "Traceback" not in out.stderr


def test_syntax_error_points_at_the_position() -> None:
    out = run("explain", "SELECT * FROM t MATCH_RECOGNIZE (\nORDER BY ts\nPATTERN (A B #))")
    assert out.returncode == 2
    assert (
        out.stderr
        == "error: unexpected character '#' (in PATTERN, line 3, column 14); PATTERN allows "
        "variable names, ( ) | , ^ $ {- -} PERMUTE and quantifiers * + ? {n,m}\n"
    )


def test_format_round_trips() -> None:
    out = run("format", Q1)
    assert out.returncode == 0
    again = run("format", out.stdout)
    assert again.stdout == out.stdout
    model = json.loads(run("format", "--json", Q1).stdout)
    assert model["type"] == "query" and model["table"] == "CRIMES"


def test_config_and_overrides() -> None:
    out = run("--output", "json", "config", env={"DFS_CER__STORAGE__PORT": "9001"})
    assert out.returncode == 0
    assert json.loads(out.stdout)["storage"]["port"] == 9001
    bad = run("config", env={"DFS_CER__STORAGE__PORT": "x"})
    assert bad.returncode == 2
    assert bad.stderr == "error: conf key storage.port must be an integer, got 'x'\n"


def test_missing_query_is_a_usage_error() -> None:
    out = run("explain")
    assert out.returncode == 2
    assert "give the query as an argument or with --file" in out.stderr


def test_demo_refuses_bad_options_before_starting_anything(tmp_path: Path) -> None:
    out = run("demo", "--strategies", "dfs,fastest", "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 2
    assert (
        out.stderr
        == "error: unknown strategy 'fastest'; choose from pull_all, push_down, push_pull, "
        "naive_dfs, dfs, dfs_paper, swf_only, dfs_v1, dfs_v2\n"
    )
    assert not (tmp_path / "d").exists()
    assert run("demo", "--events", "10").returncode == 2  # at least 1000 events


def test_query_text_and_files_never_crash(tmp_path: Path) -> None:
    """A --file name longer than the system allows, or a file that cannot be read, is a clear
    error; query text of any length stays query text (spark_jobs/run_query.py --sql)."""
    too_long = run("explain", "--file", "q" * 300 + ".sql")
    assert (
        too_long.returncode == 2
        and "is not a file" in too_long.stderr
        and "Traceback" not in too_long.stderr
    )
    binary = tmp_path / "q.sql"
    binary.write_bytes(b"\xff\xfe\x00SELECT")
    unreadable = run("explain", "--file", str(binary))
    assert (
        unreadable.returncode != 0
        and "--file" in unreadable.stderr
        and "Traceback" not in unreadable.stderr
    )
    sys.path.insert(0, str(ROOT / "spark_jobs"))
    try:
        from run_query import main as run_query_main
        from run_query import sql_text
    finally:
        sys.path.remove(str(ROOT / "spark_jobs"))
    one_line = " ".join(Q1.split()) + " " * 300  # longer than a file name may be, no newline
    assert sql_text(one_line) == one_line
    query = tmp_path / "query.sql"
    query.write_text(Q1)
    assert sql_text(str(query)) == Q1
    # a missing token file is one error line (exit 2) before Spark starts, not a traceback
    assert (
        run_query_main(
            [
                "--sql",
                str(query),
                "--endpoints",
                "127.0.0.1:1",
                "--token-file",
                str(tmp_path / "missing"),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )


def test_shard_refuses_a_stray_text_in_a_numeric_csv_column(tmp_path: Path) -> None:
    csv = tmp_path / "flights.csv"
    csv.write_text(
        "ts,dep_time\n"
        + "".join(f"{i},{'abc' if i == 7 else '' if i == 3 else 600 + i}\n" for i in range(12))
    )
    out = run("shard", "--input", str(csv), "--nodes", "2", "--to", str(tmp_path / "out"))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"error: {csv}, row 8, column dep_time: 'abc' is not int64 like the column's "
        "other 10 values; fix the value, or read the column as text with --schema "
        "dep_time=string"
    )
    (tmp_path / "types").write_text("# flights\ndep_time=string\n")
    for schema in ("dep_time=string", str(tmp_path / "types")):
        out = run(
            "--output",
            "json",
            "shard",
            "--input",
            str(csv),
            "--nodes",
            "2",
            "--to",
            str(tmp_path / "out"),
            "--schema",
            schema,
        )
        assert out.returncode == 0, out.stderr
        doc = json.loads((tmp_path / "out" / "node-00" / "manifest.json").read_text())
        assert {"name": "dep_time", "type": "string"} in doc["schema"]
    out = run(
        "shard",
        "--input",
        str(csv),
        "--nodes",
        "2",
        "--to",
        str(tmp_path / "out"),
        "--schema",
        "dep_time",
    )
    assert out.returncode == 2 and out.stderr.startswith(
        "error: --schema: 'dep_time' is not COLUMN=TYPE"
    )
    out = run(
        "shard",
        "--input",
        str(csv),
        "--nodes",
        "2",
        "--to",
        str(tmp_path / "out"),
        "--schema",
        "dep_time=decimal128(99, 2)",
    )
    assert out.returncode == 2 and out.stderr.startswith(
        "error: --schema: 'decimal128(99, 2)': a decimal128"
    ), out.stderr


def test_a_query_past_the_step_budget_is_one_line_naming_the_partition(tmp_path: Path) -> None:
    """A pattern whose matching work grows with the cube of a partition's rows (C reads the row
    before B's last, so no thread pruning applies) ends at ``matcher.max_steps`` with one error
    line naming the partition, its rows and the setting, not a hang or a traceback."""
    import numpy as np

    from dfs_cer.io.shard import shard
    from storage_node.launcher import LocalCluster

    n = 2_000
    i = np.arange(n, dtype=np.int64)
    pq.write_table(
        pa.table({"k": np.zeros(n, np.int64), "ts": i, "v": i % 7}), tmp_path / "t.parquet"
    )
    shard(str(tmp_path / "t.parquet"), 1, str(tmp_path / "nodes"))
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
        "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > LAST(B.v, 1) + 100)"
    )
    with LocalCluster([str(tmp_path / "nodes" / "node-00")]) as cluster:
        token = tmp_path / "token"
        token.write_text(cluster.token)
        args = ["query", "--endpoints", ",".join(cluster.endpoints), "--token-file", str(token)]
        args += ["--strategy", "pull_all", sql]
        got = run(*args, env={"DFS_CER__MATCHER__MAX_STEPS": "200000"})
        # a longer budget: the match runs for seconds, and says how far it is meanwhile
        longer = run(
            *args,
            env={
                "DFS_CER__MATCHER__MAX_STEPS": "300000000",
                "DFS_CER__MATCHER__MAX_SECONDS": "600",
            },
        )
    assert got.returncode != 0 and "Traceback" not in got.stderr, got.stderr
    line = got.stderr.strip().splitlines()[-1]
    for part in ("matcher.max_steps = 200,000", "partition k = 0", "(2,000 rows)", "MAX_STEPS"):
        assert part in line, line
    lines = longer.stderr.strip().splitlines()
    assert longer.returncode != 0 and "matcher.max_steps = 300,000,000" in lines[-1], lines
    progress = [x for x in lines if x.startswith("matching: 0 of 2,000 rows, 1 of 1 partitions")]
    assert progress and "thread steps" in progress[-1], lines


def test_warm_compiles_every_engine_into_the_cache() -> None:
    """``dfs-cer warm`` (make install runs it) names each engine it compiled and its time; a
    query right after it loads the kernels from the cache."""
    got = run("warm")
    assert got.returncode == 0, got.stderr
    for step in ("row-pattern matcher", "row-pattern matcher with WITHIN", "CER engine", "filters"):
        assert f"compiling the {step} ..." in got.stderr, got.stderr
        assert f"{step} = " in got.stdout, got.stdout
