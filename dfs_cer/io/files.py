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


#: S3 error codes (as pyarrow's AWS SDK spells them) that no retry can fix: fail at once
PERMANENT = {
    "ACCESS_DENIED": "access denied (check the credentials and the bucket policy)",
    "INVALID_ACCESS_KEY_ID": "access denied: the access key id is not known (check "
    "AWS_ACCESS_KEY_ID)",
    "SIGNATURE_DOES_NOT_MATCH": "access denied: the secret key does not match (check "
    "AWS_SECRET_ACCESS_KEY)",
    "INVALID_SIGNATURE": "access denied: the request signature is invalid (check the credentials)",
    "MISSING_AUTHENTICATION_TOKEN": "access denied: no credentials were found",
    "EXPIRED_TOKEN": "access denied: the session token has expired",
    "NO_SUCH_BUCKET": "no such bucket",
    "NO_SUCH_KEY": "not found",
    "RESOURCE_NOT_FOUND": "not found",
    "INVALID_PARAMETER_VALUE": "the request was refused as invalid",
}


@dataclass(frozen=True)
class FileLocation:
    """A directory-like location: ``fs`` plus a ``path`` inside it (``bucket/prefix`` for S3);
    reads of it retry transient errors for at most ``retry_seconds``."""

    fs: pafs.FileSystem
    path: str
    uri: str
    retry_seconds: float = 10.0

    def join(self, *parts: str) -> str:
        return "/".join([self.path.rstrip("/"), *parts])

    def retrying(self, what: str, fn: Callable[[], T]) -> T:
        return retrying(what, fn, budget=self.retry_seconds)

    def make_dirs(self, path: str | None = None) -> None:
        """Create ``path`` (default: the location itself) and its parents; a bucket that does
        not exist is an error naming it and the fix (dfs-cer creates no buckets)."""
        try:
            self.fs.create_dir(path or self.path, recursive=True)
        except OSError as exc:
            text = str(exc)
            if "allow_bucket_creation" in text or "NoSuchBucket" in text:
                bucket = self.path.split("/", 1)[0]
                raise StorageError(
                    f"the bucket {bucket} of {self.uri} does not exist: create it first (e.g. "
                    f"aws s3 mb s3://{bucket}, with --endpoint-url for a local S3), or check "
                    "the name and storage.s3_endpoint"
                ) from None
            raise StorageError(f"cannot create {self.uri}: {exc}") from exc


def _s3(config: StorageConfig) -> pafs.S3FileSystem:
    endpoint = config.s3_endpoint or os.environ.get("AWS_ENDPOINT_URL") or None
    kwargs: dict[str, object] = {
        "region": config.s3_region,
        "connect_timeout": config.s3_connect_timeout_seconds,
        "request_timeout": config.s3_request_timeout_seconds,
    }
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        kwargs["endpoint_override"] = rest or scheme
        kwargs["scheme"] = scheme if rest else "https"
    # one attempt per call: ``retrying`` retries transient errors within the time budget and
    # gives up at once on permanent ones (the SDK's own retries would retry access denied too)
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=1)
    return pafs.S3FileSystem(**kwargs)  # credentials from the usual AWS sources


def filesystem_for(uri: str, config: StorageConfig | None = None) -> FileLocation:
    """Resolve a local path or ``s3://bucket/prefix``."""
    config = config or StorageConfig()
    if uri.startswith("s3://"):
        return FileLocation(
            _s3(config), uri[len("s3://") :].rstrip("/"), uri, config.s3_retry_seconds
        )
    if "://" in uri:
        raise StorageError(f"unsupported location {uri}; use a local path or s3://bucket/prefix")
    # a local disk's read errors (a corrupt page) do not pass by retrying
    return FileLocation(pafs.LocalFileSystem(), os.path.abspath(uri), uri, 0.0)


def permanent(exc: BaseException) -> str | None:
    """Why ``exc`` (an error of a read) cannot be fixed by retrying, or None when it may pass."""
    if isinstance(exc, FileNotFoundError):
        return "not found"
    if isinstance(exc, PermissionError):
        return "access denied"
    text = str(exc)
    for code, why in PERMANENT.items():
        if f"AWS Error {code} " in text or f"AWS Error {code}:" in text:
            return why
    return None


def retrying(what: str, fn: Callable[[], T], budget: float = 10.0, base: float = 0.1) -> T:
    """Run ``fn``, retrying transient storage errors (network, throttling, 5xx) with
    exponential backoff until ``budget`` seconds have passed; permanent errors (not found,
    access denied, no such bucket) fail at once."""
    began = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except OSError as exc:
            why = permanent(exc)
            if why is not None:
                raise StorageError(f"cannot read {what}: {why}") from exc
            pause = min(2.0, base * 2 ** (attempt - 1))
            spent = time.monotonic() - began
            if spent + pause > budget:
                raise StorageError(
                    f"cannot read {what} after {attempt} attempt{'s' if attempt > 1 else ''} in "
                    f"{spent:.1f} s: {exc} (storage.s3_retry_seconds bounds the retries)"
                ) from exc
            time.sleep(pause)


def list_files(location: FileLocation, suffix: str = ".parquet") -> list[str]:
    """Files under ``location`` ending with ``suffix``, sorted (paths inside the filesystem)."""
    selector = pafs.FileSelector(location.path, recursive=True, allow_not_found=True)
    infos = location.retrying(location.uri, lambda: location.fs.get_file_info(selector))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(suffix))


def names_a_file(text: str) -> bool:
    """Does ``text`` name an existing regular file? False for text no file can be named by, such
    as query text longer than the system's file-name limit (where ``Path.is_file`` raises)."""
    return bool(text) and "\n" not in text and os.path.isfile(text)  # isfile: False on OSError


def read_text_file(path: str, what: str) -> str:
    """The text of the file ``path``, or a clear error naming it and ``what`` it was for."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StorageError(f"{what} {path} cannot be read ({reason})") from None
