"""Storage node: an Arrow Flight server over parquet shards (local disk or S3).

Wiring only: the server, shard store, per-query cache, admission and auth live here; the
filters and query analysis come from :mod:`dfs_cer`.
"""
