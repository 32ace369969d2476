"""Storage node processes at rest hold only what serving needs: the query handlers, the SQL
parser and the compiled kernels load with the first query call, pandas never."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.datasets import synthetic_events
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.replies import HealthReply, StatsReply
from storage_node.launcher import LocalCluster
from storage_node.store import by_time, in_time_order
from tests.fixtures.round_trip import dual_filtering_round_trip

pytestmark = pytest.mark.flight

#: what a node at rest must not have loaded
NOT_AT_REST = {"pandas", "pyspark", "duckdb", "sqlglot", "matplotlib", "numba", "llvmlite"}


@pytest.fixture(scope="module")
def events() -> pa.Table:
    return synthetic_events(30_000, seed=11)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory, events: pa.Table) -> list[str]:
    root = tmp_path_factory.mktemp("light")
    pq.write_table(events, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), batch_rows=10_000, name="t")
    return [str(root / "nodes" / f"node-{i:02d}") for i in range(2)]


@pytest.fixture(scope="module")
def cluster(shards: list[str]) -> Iterator[LocalCluster]:
    with LocalCluster(shards) as c:
        yield c


def stats(cluster: LocalCluster) -> list[StatsReply]:
    return [StorageClient(e, cluster.token).call(StatsReply)[0] for e in cluster.endpoints]


def test_a_node_at_rest_loads_no_heavy_module_and_stays_small(cluster: LocalCluster) -> None:
    for c in (StorageClient(e, cluster.token) for e in cluster.endpoints):
        assert c.call(HealthReply)[0].status == "ok"  # health and stats load no handler
    for reply in stats(cluster):
        assert not NOT_AT_REST & set(reply.heavy_modules), reply.heavy_modules
        # 360 MB before the handlers loaded lazily (and pandas never); about 135 MB now
        assert reply.resident_bytes is not None and reply.resident_bytes < 200 * 1024**2


def test_the_first_query_loads_the_handlers_and_the_result_is_exact(
    cluster: LocalCluster, events: pa.Table
) -> None:
    dual_filtering_round_trip([StorageClient(e, cluster.token) for e in cluster.endpoints], events)
    for reply in stats(cluster):
        assert {"numba", "sqlglot"} <= set(reply.heavy_modules)  # the filters ran here
        assert "pandas" not in reply.heavy_modules  # pyarrow ran as if pandas were not there


def test_warm_up_loads_the_handlers_before_ready(shards: list[str]) -> None:
    with LocalCluster(shards[:1], env={"DFS_CER__STORAGE__WARM_UP": "true"}) as warm:
        (reply,) = stats(warm)
    assert {"numba", "sqlglot"} <= set(reply.heavy_modules)
    assert "pandas" not in reply.heavy_modules


def test_hidden_modules_fail_like_missing_ones_and_pyarrow_works_without_them() -> None:
    code = textwrap.dedent(
        """
        import sys
        from storage_node.lean import hide
        assert hide()
        import pyarrow as pa
        import pyarrow.dataset as ds
        table = pa.table({"a": [1, 2, 3], "s": ["x", "y", None]})
        assert ds.dataset(table).to_table(filter=ds.field("a") > 1).num_rows == 2
        try:
            import pandas
        except ModuleNotFoundError as exc:
            print(exc)
        assert "pandas" not in sys.modules
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "pandas is not loaded in a storage node process" in run.stdout


@pytest.mark.parametrize("shuffle", [False, True])
def test_rows_by_time_are_sorted_stably_one_chunk_per_column(shuffle: bool) -> None:
    n = 5000
    ts = pa.array(np.arange(n) // 3, pa.timestamp("ms"))  # ties: their order must stay
    table = pa.table({"ts": ts, "i": pa.array(np.arange(n)), "s": [f"v{k % 7}" for k in range(n)]})
    if shuffle:  # two sorted runs that overlap in time, as two shard files may
        table = pa.concat_tables([table.slice(n // 2), table.slice(0, n // 2)])
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=512))
    assert in_time_order(chunked.column("ts")) is not shuffle
    out = by_time(chunked.to_batches(), "ts")
    assert isinstance(out, pa.Table) and all(c.num_chunks == 1 for c in out.columns)
    assert out.equals(chunked.sort_by([("ts", "ascending")]))  # pyarrow's sort is stable
    with_null = pa.chunked_array([pa.array([1, None, 2], pa.timestamp("ms"))])
    assert not in_time_order(with_null)
