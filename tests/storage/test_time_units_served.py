"""Times below the microsecond are served as written: a storage node starts on a shard set (or
a Hive-style prefix) whose times have nanoseconds, and every strategy matches them as the local
engine does, windows below the microsecond included. A node process has no pandas, and pyarrow
turns a time into a Python datetime only down to the microsecond."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

NS = 1_735_689_600 * 10**9  # 2025-01-01 00:00:00 in nanoseconds
OFFSETS = [1, 2, 5, 9, 12, 13, 20, 21, 1_000, 1_002]  # nanoseconds past NS


def events() -> pa.Table:
    """Ten events, nanoseconds apart, with a column of every time unit the shard writer keeps."""
    ns = [NS + k for k in OFFSETS]
    return pa.table(
        {
            "ts": pa.array(ns, pa.timestamp("ns")),
            "type": ["A", "B"] * 5,
            "v": list(range(1, 11)),
            "z": pa.array(ns, pa.timestamp("ns", "Europe/Paris")),
            "us": pa.array([t // 1000 + k for k, t in enumerate(ns)], pa.timestamp("us")),
            "ms": pa.array([t // 10**6 + k for k, t in enumerate(ns)], pa.timestamp("ms")),
            "s": pa.array([t // 10**9 + k for k, t in enumerate(ns)], pa.timestamp("s")),
            "d": pa.array([20_089 + k for k in range(10)], pa.date32()),
        }
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Nodes 0 and 1: ``dfs-cer shard``'s two shard sets; node 2: the same rows as a Hive-style
    prefix, served in place with the zoned column ``z`` as its time."""
    root: Path = tmp_path_factory.mktemp("nanoseconds")
    pq.write_table(events(), root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"))
    (root / "hive" / "day=1").mkdir(parents=True)
    pq.write_table(events(), root / "hive" / "day=1" / "part-0.parquet")
    with LocalCluster(
        [
            str(root / "nodes" / "node-00"),
            str(root / "nodes" / "node-01"),
            f"hive:{root / 'hive'}?time=z",
        ],
        env={"DFS_CER__TABLES__ASSIGNMENTS_DIR": str(root / "assign")},
    ) as c:
        yield c


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


QUERIES = [
    # a window of 3 ns: A at 5 ns and B at 9 ns are 4 ns apart
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY {time} MEASURES A.v AS a, B.v AS b, A.{time} AS at "
    "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN INTERVAL "
    "'0.000000003' SECOND DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v > A.v)",
    # conditions and measures on times of every unit, a join on nanoseconds
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY {time} MEASURES A.v AS a, B.v AS b, B.z AS bz, "
    "B.us AS bus, B.ms AS bms, B.s AS bs, B.d AS bd ALL MATCHES PATTERN (A B) WITHIN INTERVAL "
    "'0.000001' SECOND DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.z > A.z AND B.us > A.us "
    "AND B.ms > A.ms AND B.s > A.s AND B.d > A.d AND B.ts - A.ts <= INTERVAL '0.000000004' SECOND)",
    # every row of each match, and the time of the row before
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY {time} MEASURES PREV(B.{time}) AS p ALL ROWS PER "
    "MATCH PATTERN (A B) WITHIN INTERVAL '0.000000001' SECOND DEFINE A AS A.type = 'A', B AS "
    "B.type = 'B')",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_every_strategy_matches_nanosecond_times_as_the_local_engine(
    cluster: LocalCluster, sql: str
) -> None:
    hive = events().append_column("day", pa.array([1] * 10, pa.int32()))  # its folder's key
    for time, endpoints, table in (
        ("ts", cluster.endpoints[:2], events()),
        ("z", cluster.endpoints[2:], hive),
    ):
        query = sql.format(time=time)
        expected = rows(match_recognize(table, query))
        assert expected
        for name in STRATEGIES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # fallbacks (tiny inputs) are not the point here
                got = rows(match_pulled(pull(name, query, endpoints, cluster.token)))
            assert got == expected, (time, name)
    assert all(p.poll() is None for p in cluster.procs)


def test_a_shard_file_is_identified_alike_in_every_process(tmp_path: Path) -> None:
    """A restarted node must recognise its own files: the digest holds nothing of one process
    (the parquet schema's text starts with its memory address)."""
    import subprocess
    import sys

    from storage_node.store import footer_digest

    path = tmp_path / "e.parquet"
    pq.write_table(events(), path)
    here = footer_digest(pq.read_metadata(path))
    code = (
        "import sys, pyarrow.parquet as pq; from storage_node.store import footer_digest; "
        "print(footer_digest(pq.read_metadata(sys.argv[1])))"
    )
    there = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert there.stdout.strip() == here
