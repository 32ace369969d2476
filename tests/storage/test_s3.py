"""Storage nodes over S3: moto's server mode is a real S3 endpoint on loopback."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dfs_cer.config import StorageConfig
from dfs_cer.datasets import synthetic_events
from dfs_cer.errors import StorageError
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import StorageClient
from storage_node.launcher import LocalCluster
from tests.fixtures.round_trip import dual_filtering_round_trip
from tests.fixtures.s3 import CREDENTIALS

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="events")
    try:
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def test_shard_to_s3_and_serve_from_s3(s3: str, tmp_path: Path) -> None:
    events = synthetic_events(30_000, seed=9)
    pq.write_table(events, tmp_path / "events.parquet")
    manifests = shard(
        str(tmp_path / "events.parquet"),
        3,
        "s3://events/crimes",
        batch_rows=10_000,
        config=StorageConfig(s3_endpoint=s3),
        name="t",
    )
    assert sum(m.rows for m in manifests) == events.num_rows
    env = {**CREDENTIALS, "DFS_CER__STORAGE__S3_ENDPOINT": s3}
    with LocalCluster([f"s3://events/crimes/node-{i:02d}" for i in range(3)], env=env) as cluster:
        nodes = [StorageClient(e, cluster.token) for e in cluster.endpoints]
        assert [c.action("health")[0]["rows"] for c in nodes] == [10_000] * 3
        dual_filtering_round_trip(nodes, events)


def test_missing_objects_are_reported_by_name(s3: str) -> None:
    env = {**CREDENTIALS, "DFS_CER__STORAGE__S3_ENDPOINT": s3}
    with (
        pytest.raises(StorageError, match=re.escape("s3://events/nothing-here/manifest.json")),
        LocalCluster(["s3://events/nothing-here"], env=env),
    ):
        pass


def test_a_missing_bucket_and_a_csv_given_as_data_are_errors_naming_the_fix(
    s3: str, tmp_path: Path
) -> None:
    events = synthetic_events(1_000, seed=1)
    pq.write_table(events, tmp_path / "events.parquet")
    with pytest.raises(StorageError) as info:
        shard(str(tmp_path / "events.parquet"), 2, "s3://no-such-bucket/x",
              config=StorageConfig(s3_endpoint=s3))  # fmt: skip
    assert str(info.value).startswith(
        "the bucket no-such-bucket of s3://no-such-bucket/x does not exist: create it first"
    )
    from dfs_cer.errors import ConfigError
    from dfs_cer.io.rowgroups import location_files

    with pytest.raises(ConfigError, match=r"flights.csv is not parquet: .*\(dfs-cer shard --input"):
        location_files(str(tmp_path / "flights.csv"))
