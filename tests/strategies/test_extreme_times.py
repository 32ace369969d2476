"""Times anywhere in int64 and gaps of any size, through real storage nodes: every strategy
answers exactly what the local engine answers over the same rows with the gaps shortened (a
gap longer than the window separates the same matches at any length)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.config import Config, QueryConfig
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster
from tests.fixtures.timeline import compact

pytestmark = pytest.mark.flight

MIN, MAX = -(2**63), 2**63 - 1
WINDOW = 10**6  # WITHIN INTERVAL '1' MILLISECOND over integer nanoseconds
QUERIES = {
    "all": "PARTITION BY k ORDER BY ts MEASURES A.ts AS a, B.ts AS b ALL MATCHES "
    "PATTERN (A N*? B) WITHIN INTERVAL '1' MILLISECOND "
    "DEFINE A AS A.v = 1, B AS B.v = 2 AND B.w = A.w",
    "prev": "PARTITION BY k ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A B) "
    "WITHIN INTERVAL '1' MILLISECOND DEFINE A AS A.v = 1 AND PREV(A.v) = 0, B AS B.v = 2",
}


def _world(starts: list[int], seed: int) -> pa.Table:
    """Runs of 150 rows (steps up to 0.4 ms), one PARTITION BY key each, from each start."""
    rng = np.random.default_rng(seed)
    ts: list[int] = []
    for start in starts:
        steps = np.cumsum(rng.integers(1, 400_000, 150)).tolist()
        ts += [min(MAX, start + int(s)) for s in steps]
    n = len(ts)
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array(np.repeat(np.arange(len(starts)), 150) % 2, pa.int64()),
            "v": pa.array(rng.integers(0, 5, n), pa.int64()),
            "w": pa.array(rng.integers(0, 2, n), pa.int64()),
        }
    )


WORLDS = {
    # nanoseconds past 2**61 (the year 2043) with a gap of 2**56 (about two years)
    "after-2043": [2**61 + 2**59, 2**61 + 2**59 + 2**56],
    # both ends of int64 and the middle: the rows span all of it
    "whole-range": [MIN, -(2**62), 0, 2**62, MAX - 150 * 400_000],
}


def _compacted(table: pa.Table, sql: str) -> list[str]:
    """The local engine's matches over the same rows with every gap longer than the window
    shortened to window + 1, mapped back to the real times."""
    ts = table.column("ts").to_pylist()
    small = compact(ts, WINDOW)
    back = {v: k for k, v in small.items()}
    rows = table.set_column(0, "ts", pa.array([small[t] for t in ts], pa.int64()))
    config = Config(query=QueryConfig(integer_time_unit="ns"))
    return _canonical(match_recognize(rows, sql, config=config), back)


def _canonical(t: pa.Table, back: dict[int, int] | None = None) -> list[str]:
    return sorted(
        repr({k: back[v] if back and k in ("a", "b") else v for k, v in r.items()})
        for r in t.to_pylist()
    )


def _every_strategy_answers(cluster: LocalCluster, sql: str, expected: list[str]) -> None:
    for name in STRATEGIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fallback notes
            result = pull(
                name,
                sql,
                cluster.endpoints,
                cluster.token,
                integer_time_unit="ns",
                cost_model="always_on",
            )
        assert _canonical(match_pulled(result)) == expected, (name, result.trace.fallback)


@pytest.fixture(scope="module", params=list(WORLDS))
def served(request: Any, tmp_path_factory: Any) -> Iterator[tuple[pa.Table, LocalCluster]]:
    root: Path = tmp_path_factory.mktemp(request.param)
    table = _world(WORLDS[request.param], seed=len(request.param))
    pq.write_table(table, root / "events.parquet")
    shard(str(root / "events.parquet"), 3, str(root / "nodes"))
    cluster = LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]).start()
    yield table, cluster
    cluster.stop()
    cluster.tmp.cleanup()


@pytest.mark.parametrize("query", list(QUERIES))
def test_every_strategy_answers_anywhere_in_int64(
    served: tuple[pa.Table, LocalCluster], query: str
) -> None:
    table, cluster = served
    sql = f"SELECT * FROM events MATCH_RECOGNIZE ({QUERIES[query]})"
    expected = _compacted(table, sql)
    assert expected, "the world must hold matches"
    config = Config(query=QueryConfig(integer_time_unit="ns"))
    assert _canonical(match_recognize(table, sql, config=config)) == expected
    _every_strategy_answers(cluster, sql, expected)


def test_a_window_as_wide_as_the_type(served: tuple[pa.Table, LocalCluster]) -> None:
    """``WITHIN INTERVAL '106751' DAY`` over nanoseconds is a window of about 2**63 - 2**43
    units: every round's request carries it (it was refused past 2**62 on the wire) and every
    strategy answers the local engine's matches over the same rows."""
    table, cluster = served
    sql = (
        "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, "
        "LAST(B.ts) AS b ONE ROW PER MATCH PATTERN (A B+ C) WITHIN INTERVAL '106751' DAY "
        "DEFINE A AS A.v = 1, B AS B.v <> 4, C AS C.v = 2 AND C.w = A.w AND PREV(C.v) <> 1)"
    )
    config = Config(query=QueryConfig(integer_time_unit="ns"))
    expected = _canonical(match_recognize(table, sql, config=config))
    assert expected, "the world must hold matches"
    _every_strategy_answers(cluster, sql, expected)
