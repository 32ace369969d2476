"""Bad data fails once, clearly, and alike for every strategy: truncated or corrupt shard files,
NULL times, storage nodes serving different schemas."""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.datasets import synthetic_events
from dfs_cer.errors import DfsCerError, StorageError
from dfs_cer.io.shard import ShardError, shard
from dfs_cer.strategies import STRATEGIES, pull
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts ONE ROW PER MATCH "
    "AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN INTERVAL '20' SECOND "
    "DEFINE A AS A.type = 'T_03', B AS B.type = 'T_07' AND B.a1 > A.a1)"
)


def sharded(root: Path, events: pa.Table, nodes: int = 2, **kwargs: object) -> list[str]:
    pq.write_table(events, root / "e.parquet")
    shard(str(root / "e.parquet"), nodes, str(root / "nodes"), **kwargs, name="t")  # type: ignore[arg-type]
    return [str(root / "nodes" / f"node-{i:02d}") for i in range(nodes)]


def test_a_truncated_shard_stops_the_node_naming_the_file(tmp_path: Path) -> None:
    dirs = sharded(tmp_path, synthetic_events(20_000, seed=1), batch_rows=5_000)
    victim = sorted(glob.glob(f"{dirs[0]}/*.parquet"))[
        -1
    ]  # not the first file: every file is checked
    data = Path(victim).read_bytes()
    Path(victim).write_bytes(data[: len(data) - 10])
    token = tmp_path / "token"
    token.write_text("x" * 32)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "storage_node.server",
            "--data",
            dirs[0],
            "--port",
            "0",
            "--token-file",
            str(token),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and victim in lines[0] and "not a readable parquet file" in lines[0], (
        proc.stderr
    )


def test_a_corrupt_page_fails_the_query_naming_the_file(tmp_path: Path) -> None:
    dirs = sharded(tmp_path, synthetic_events(20_000, seed=2))
    victim = sorted(glob.glob(f"{dirs[1]}/*.parquet"))[0]
    data = bytearray(Path(victim).read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    end = len(data) - footer - 8
    data[8:end] = bytes(
        (b * 7 + 13) % 256 for b in data[8:end]
    )  # garble every page, keep the footer
    Path(victim).write_bytes(bytes(data))
    with LocalCluster(dirs) as cluster:  # the footer is fine: the node starts
        for name in ("dfs", "pull_all"):
            with pytest.raises(
                DfsCerError, match=f"round 1 \\(open\\).*shard file {victim} cannot be read"
            ):
                pull(name, SQL, cluster.endpoints, cluster.token)


def test_null_times_are_refused_by_shard_and_by_the_nodes(tmp_path: Path) -> None:
    events = synthetic_events(1_000, seed=3)
    ts = events.column("ts").to_pylist()
    ts[5] = ts[17] = None
    broken = events.set_column(
        events.schema.get_field_index("ts"), "ts", pa.array(ts, events.schema.field("ts").type)
    )
    pq.write_table(broken, tmp_path / "broken.parquet")
    with pytest.raises(ShardError, match="2 rows of the input have no ts \\(NULL\\)"):
        shard(str(tmp_path / "broken.parquet"), 2, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.parquet"))
    # a shard set written by other means: the node refuses it at start-up (every strategy alike)
    dirs = sharded(tmp_path, events, nodes=1)
    victim = sorted(glob.glob(f"{dirs[0]}/*.parquet"))[0]
    table = pq.read_table(victim)
    ts = table.column("ts").to_pylist()
    ts[0] = None
    pq.write_table(
        table.set_column(
            table.schema.get_field_index("ts"), "ts", pa.array(ts, table.schema.field("ts").type)
        ),
        victim,
    )
    with pytest.raises(StorageError, match="has 1 row without a ts \\(NULL\\)"), LocalCluster(dirs):
        pass


def test_nodes_serving_different_schemas_are_named(tmp_path: Path) -> None:
    events = synthetic_events(4_000, seed=5)
    (tmp_path / "a").mkdir()
    naive = sharded(tmp_path / "a", events, nodes=2)
    zoned_events = events.set_column(
        events.schema.get_field_index("ts"),
        "ts",
        events.column("ts").cast(pa.timestamp("ms", tz="UTC")),
    )
    (tmp_path / "b").mkdir()
    zoned = sharded(tmp_path / "b", zoned_events, nodes=2)
    dirs = [naive[0], zoned[1]]
    with LocalCluster(dirs) as cluster:
        for name in STRATEGIES:
            with pytest.raises(
                StorageError,
                match=r"serve different schemas \(ts: timestamp\[ms\] vs "
                r"timestamp\[ms, tz=UTC\]\)",
            ):
                pull(name, SQL, cluster.endpoints, cluster.token)
