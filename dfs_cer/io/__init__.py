"""Storage access: the only package (with storage_node/ and spark_jobs/) that touches
``pyarrow.fs`` and ``boto3``. Local paths and ``s3://bucket/prefix`` URIs resolve to a pyarrow
filesystem through :func:`filesystem_for`; S3 errors become :class:`~dfs_cer.errors.StorageError`
naming the object."""

from dfs_cer.io.files import FileLocation, filesystem_for, list_files

__all__ = ["FileLocation", "filesystem_for", "list_files"]
