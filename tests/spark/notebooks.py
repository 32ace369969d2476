"""Running a notebook of ``notebooks/`` in the tests: moto's S3 server with a bucket, and the
notebook executed cell by cell (nbclient) on a kernel of this interpreter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.s3 import CREDENTIALS

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


@contextlib.contextmanager
def s3_bucket(bucket: str) -> Iterator[str]:
    """moto's S3 server on loopback with ``bucket``; yields its endpoint URL."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, **boto_credentials()).create_bucket(Bucket=bucket)
    try:
        yield endpoint
    finally:
        server.stop()


def execute(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> list[Any]:
    """Run notebook ``name`` with ``env`` (plus the test S3 credentials);
    its code cells' outputs."""
    import nbformat
    from ipykernel.kernelspec import install
    from nbclient import NotebookClient

    for key, value in {
        **CREDENTIALS,
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        **env,
    }.items():
        monkeypatch.setenv(key, value)
    # a kernel running this interpreter (whatever other kernels the machine has registered)
    install(prefix=str(tmp_path / "jupyter"), kernel_name="dfs-cer-test")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter" / "share" / "jupyter"))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(
        nb, timeout=240, kernel_name="dfs-cer-test", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
