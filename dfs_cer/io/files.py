"""Local and S3 file locations behind pyarrow's filesystem interface."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pyarrow.fs as pafs

from dfs_cer.config import StorageConfig
from dfs_cer.errors import StorageError

T = TypeVar("T")


@dataclass(frozen=True)
class FileLocation:
    """A directory-like location: ``fs`` plus a ``path`` inside it (``bucket/prefix`` for S3)."""

    fs: pafs.FileSystem
    path: str
    uri: str

    def join(self, *parts: str) -> str:
        return "/".join([self.path.rstrip("/"), *parts])


def _s3(config: StorageConfig) -> pafs.S3FileSystem:
    endpoint = config.s3_endpoint or os.environ.get("AWS_ENDPOINT_URL") or None
    kwargs: dict[str, object] = {"region": config.s3_region}
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        kwargs["endpoint_override"] = rest or scheme
        kwargs["scheme"] = scheme if rest else "https"
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=max(1, config.s3_retries))
    return pafs.S3FileSystem(**kwargs)  # credentials from the usual AWS sources


def filesystem_for(uri: str, config: StorageConfig | None = None) -> FileLocation:
    """Resolve a local path or ``s3://bucket/prefix``."""
    config = config or StorageConfig()
    if uri.startswith("s3://"):
        return FileLocation(_s3(config), uri[len("s3://") :].rstrip("/"), uri)
    if "://" in uri:
        raise StorageError(f"unsupported location {uri}; use a local path or s3://bucket/prefix")
    return FileLocation(pafs.LocalFileSystem(), os.path.abspath(uri), uri)


def retrying(what: str, fn: Callable[[], T], attempts: int = 5, base: float = 0.1) -> T:
    """Run ``fn``, retrying transient storage errors with bounded exponential backoff."""
    for attempt in range(attempts):
        try:
            return fn()
        except FileNotFoundError as exc:
            raise StorageError(f"cannot read {what}: not found") from exc
        except PermissionError as exc:
            raise StorageError(f"cannot read {what}: access denied") from exc
        except OSError as exc:
            if attempt == attempts - 1:
                raise StorageError(f"cannot read {what} after {attempts} attempts: {exc}") from exc
            time.sleep(min(5.0, base * 2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def list_files(location: FileLocation, suffix: str = ".parquet") -> list[str]:
    """Files under ``location`` ending with ``suffix``, sorted (paths inside the filesystem)."""
    selector = pafs.FileSelector(location.path, recursive=True, allow_not_found=True)
    infos = retrying(location.uri, lambda: location.fs.get_file_info(selector))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(suffix))
