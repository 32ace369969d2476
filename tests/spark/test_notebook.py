"""notebooks/query_logs_in_s3.ipynb, executed cell by cell (nbclient) against moto's S3 server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.storage.test_s3 import CREDENTIALS

pytestmark = [pytest.mark.spark, pytest.mark.s3]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "query_logs_in_s3.ipynb"


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, **_boto_credentials()).create_bucket(Bucket="logs")
    try:
        yield endpoint
    finally:
        server.stop()


def _boto_credentials() -> dict[str, str]:
    return {"aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "region_name": CREDENTIALS["AWS_DEFAULT_REGION"]}


def test_notebook_queries_s3_and_plots_bytes_per_strategy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    import boto3
    import nbformat
    from nbclient import NotebookClient

    for key, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": s3_endpoint, "DFS_CER_NOTEBOOK_PREFIX": "s3://logs/crimes",
                       "DFS_CER_NOTEBOOK_EVENTS": "30000", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                       }.items():
        monkeypatch.setenv(key, value)
    from ipykernel.kernelspec import install

    # a kernel running this interpreter (whatever other kernels the machine has registered)
    install(prefix=str(tmp_path / "jupyter"), kernel_name="dfs-cer-test")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter" / "share" / "jupyter"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="dfs-cer-test",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "generated 30,000 events at s3://logs/crimes/crimes.parquet" in text
    assert "matches reading s3://logs/crimes/crimes.parquet directly" in text
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) == 1  # bytes per strategy
    table = next(o["data"]["text/plain"] for o in outputs if o.output_type == "execute_result"
                 and "bytes to driver" in o.get("data", {}).get("text/plain", ""))
    assert all(s in table for s in ("push_down", "push_pull", "dfs"))
    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=s3_endpoint, **_boto_credentials())
            .list_objects_v2(Bucket="logs")["Contents"]]
    assert "crimes/results/q1-matches.parquet" in keys and "crimes/shards/node-02/manifest.json" in keys
