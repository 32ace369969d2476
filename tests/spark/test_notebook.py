"""notebooks/query_logs_in_s3.ipynb, executed cell by cell (nbclient) against moto's S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.notebooks import boto_credentials, execute, s3_bucket

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def test_notebook_queries_s3_and_plots_bytes_per_strategy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import boto3

    with s3_bucket("logs") as s3_endpoint:
        outputs = execute(
            "query_logs_in_s3.ipynb",
            tmp_path,
            monkeypatch,
            {
                "AWS_ENDPOINT_URL": s3_endpoint,
                "DFS_CER_NOTEBOOK_PREFIX": "s3://logs/crimes",
                "DFS_CER_NOTEBOOK_EVENTS": "30000",
            },
        )
        keys = [
            o["Key"]
            for o in boto3.client(
                "s3", endpoint_url=s3_endpoint, **boto_credentials()
            ).list_objects_v2(Bucket="logs")["Contents"]
        ]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "generated 30,000 events at s3://logs/crimes/crimes.parquet" in text
    assert "matches reading s3://logs/crimes/crimes.parquet directly" in text
    images = [
        o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})
    ]
    assert len(images) == 1  # bytes per strategy
    table = next(
        o["data"]["text/plain"]
        for o in outputs
        if o.output_type == "execute_result"
        and "bytes to driver" in o.get("data", {}).get("text/plain", "")
    )
    assert all(s in table for s in ("push_down", "push_pull", "dfs"))
    assert (
        "crimes/results/q1-matches.parquet" in keys
        and "crimes/shards/node-02/manifest.json" in keys
    )
