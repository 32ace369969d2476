from __future__ import annotations

import time

import pytest

from dfs_cer.errors import StorageError
from dfs_cer.io.files import filesystem_for, retrying
from dfs_cer.io.shard import ShardError, shard


def test_retrying_backs_off_then_names_the_object() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError(
                "AWS Error SLOW_DOWN during GetObject operation: please reduce your request rate"
            )
        return "ok"

    assert retrying("s3://b/k", flaky, budget=5, base=0.001) == "ok" and len(calls) == 3

    def always() -> str:
        raise OSError("Service Unavailable")

    began = time.monotonic()
    with pytest.raises(
        StorageError,
        match=r"cannot read s3://b/k after \d+ attempts in 0\.\d s: Service Unavailable",
    ):
        retrying("s3://b/k", always, budget=0.3, base=0.01)
    assert time.monotonic() - began < 0.6  # the budget bounds the retries

    def missing() -> str:
        raise FileNotFoundError("gone")

    with pytest.raises(StorageError, match="cannot read s3://b/missing: not found"):
        retrying("s3://b/missing", missing)


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("ACCESS_DENIED", "access denied"),
        ("INVALID_ACCESS_KEY_ID", "access key id is not known"),
        ("NO_SUCH_BUCKET", "no such bucket"),
    ],
)
def test_permanent_s3_errors_fail_at_once(code: str, why: str) -> None:
    calls = []

    def denied() -> str:
        calls.append(1)
        raise OSError(
            f"When reading information for key 'k' in bucket 'b': AWS Error {code} during "
            "HeadObject operation: No response body."
        )

    with pytest.raises(StorageError, match=f"cannot read s3://b/k: .*{why}"):
        retrying("s3://b/k", denied, budget=30)
    assert calls == [1]


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
def test_shard_errors(tmp_path, kwargs: dict[str, object], message: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"ts": [1, 2], "type": ["a", "b"]}), tmp_path / "e.parquet")
    args = {"nodes": 2, **kwargs}
    with pytest.raises(ShardError, match=message):
        shard(str(tmp_path / "e.parquet"), to=str(tmp_path / "out"), **args)  # type: ignore[arg-type]
    with pytest.raises(ShardError, match="no such file or directory"):
        shard(str(tmp_path / "missing.parquet"), 2, str(tmp_path / "out"))
