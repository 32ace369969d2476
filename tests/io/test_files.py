from __future__ import annotations

import pytest

from dfs_cer.errors import StorageError
from dfs_cer.io.files import filesystem_for, retrying
from dfs_cer.io.shard import ShardError, shard


def test_retrying_backs_off_then_names_the_object() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("SlowDown: please reduce your request rate")
        return "ok"

    assert retrying("s3://b/k", flaky, attempts=5, base=0.001) == "ok" and len(calls) == 3

    def always() -> str:
        raise OSError("Service Unavailable")

    with pytest.raises(StorageError, match=r"cannot read s3://b/k after 3 attempts: Service Unavailable"):
        retrying("s3://b/k", always, attempts=3, base=0.001)

    def missing() -> str:
        raise FileNotFoundError("gone")

    with pytest.raises(StorageError, match="cannot read s3://b/missing: not found"):
        retrying("s3://b/missing", missing)


def test_locations() -> None:
    assert filesystem_for("s3://bucket/prefix/").path == "bucket/prefix"
    with pytest.raises(StorageError, match="unsupported location gs://x"):
        filesystem_for("gs://x")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "--nodes must be at least 1"),
        ({"partitioning": "hash"}, "--partitioning must be one of random, time, type"),
        ({"time_column": "when"}, "--time-column when is not a column"),
        ({"event_key": ("id",)}, "--event-key column id is not a column"),
    ],
)
def test_shard_errors(tmp_path, kwargs: dict[str, object], message: str) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"ts": [1, 2], "type": ["a", "b"]}), tmp_path / "e.parquet")
    args = {"nodes": 2, **kwargs}
    with pytest.raises(ShardError, match=message):
        shard(str(tmp_path / "e.parquet"), to=str(tmp_path / "out"), **args)  # type: ignore[arg-type]
    with pytest.raises(ShardError, match="no such file or directory"):
        shard(str(tmp_path / "missing.parquet"), 2, str(tmp_path / "out"))
