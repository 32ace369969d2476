"""notebooks/query_iceberg_in_s3.ipynb, executed cell by cell
(nbclient) against moto's S3 server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fixtures.notebooks import boto_credentials, execute, s3_bucket

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def test_notebook_queries_an_iceberg_table_in_s3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import boto3

    with s3_bucket("lake") as s3_endpoint:
        outputs = execute(
            "query_iceberg_in_s3.ipynb",
            tmp_path,
            monkeypatch,
            {
                "AWS_ENDPOINT_URL": s3_endpoint,
                "DFS_CER_NOTEBOOK_WAREHOUSE": "s3://lake/warehouse",
                "DFS_CER_NOTEBOOK_EVENTS": "20000",
                "DFS_CER__TABLES__CATALOG_URI": f"sqlite:///{tmp_path / 'catalog.db'}",
                "DFS_CER__TABLES__ASSIGNMENTS_DIR": str(tmp_path / "assignments"),
            },
        )
        keys = [
            o["Key"]
            for o in boto3.client(
                "s3", endpoint_url=s3_endpoint, **boto_credentials()
            ).list_objects_v2(Bucket="lake")["Contents"]
        ]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert (
        "created logs.crimes at s3://lake/warehouse/logs/crimes with 20,000 events in 3 appends"
        in text
    )
    snapshots = re.findall(r"^  snapshot (\d+): append, \+[\d,]+ rows$", text, re.MULTILINE)
    assert len(snapshots) == 3
    current = snapshots[-1]
    assert f"snapshot {current}: 20,000 rows in 3 data files" in text
    assert f"the nodes serve snapshot {current}" in text
    assert f"read snapshot {current} on every node" in text
    assert re.search(r"all 3 strategies return the same [\d,]+ matches", text)
    late = re.search(r"appended 2,000 late events as snapshot (\d+)", text)
    assert late and late.group(1) not in snapshots
    assert re.search(rf"^current: [\d,]+ matches at snapshot {late.group(1)}$", text, re.MULTILINE)
    assert re.search(
        rf"^snapshot={current}: [\d,]+ matches at snapshot {current}$", text, re.MULTILINE
    )
    assert "the old snapshot gives the same matches as before the append" in text
    assert "matches reading iceberg://local/logs.crimes?time=date directly" in text
    assert "same matches as the storage nodes at the current snapshot" in text
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
    # served in place: the only objects are the table's own (four data files, one per append)
    assert all(k.startswith("warehouse/logs/crimes/") for k in keys)
    assert (
        len(
            [
                k
                for k in keys
                if k.startswith("warehouse/logs/crimes/data/") and k.endswith(".parquet")
            ]
        )
        == 4
    )
