"""Sample data sets, generated and sharded on first use (the demo, the notebook, tutorials).

A sample lives under one location, local or ``s3://bucket/prefix``::

    <to>/crimes.parquet          the whole log (what Spark reads with ``data=``)
    <to>/shards/node-00/ ...     one shard set per storage node (``dfs-cer shard``'s layout)

It is generated only when absent or of another size, so repeated runs start at once.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from dfs_cer.config import StorageConfig
from dfs_cer.errors import StorageError
from dfs_cer.io.files import filesystem_for
from dfs_cer.io.shard import read_manifest, shard


@dataclass(frozen=True)
class Sample:
    log: str  # the whole log as one parquet file
    shards: list[str]  # one shard set per storage node
    events: int
    generated: bool  # False when an existing sample was reused


def _existing(shard_dirs: list[str], log: str, events: int, config: StorageConfig) -> bool:
    try:
        rows = [int(read_manifest(filesystem_for(d, config))["rows"]) for d in shard_dirs]
        where = filesystem_for(log, config)
        with where.fs.open_input_file(where.path) as fh:
            log_rows = pq.ParquetFile(fh).metadata.num_rows
    except (StorageError, OSError, KeyError, ValueError):
        return False
    return sum(rows) == events and log_rows == events


def crimes_sample(
    to: str,
    *,
    events: int = 1_000_000,
    nodes: int = 3,
    seed: int = 7,
    config: StorageConfig | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Sample:
    """A CRIMES-shaped sample of ``events`` rows under ``to``, sharded over ``nodes`` storage nodes
    at random (as the paper's round-robin split). ``progress(step, done, total)`` reports rows."""
    from dfs_cer.datasets.crimes import SCHEMA, crimes_batches

    if events < 1 or nodes < 1:
        raise StorageError(
            f"a sample needs at least one event and one node, got events={events}, nodes={nodes}"
        )
    config = config or StorageConfig()
    root = to.rstrip("/")
    log = f"{root}/crimes.parquet"
    shard_dirs = [f"{root}/shards/node-{k:02d}" for k in range(nodes)]
    if _existing(shard_dirs, log, events, config):
        return Sample(log, shard_dirs, events, generated=False)
    where = filesystem_for(root, config)
    if where.fs.get_file_info(where.join("shards")).type.name != "NotFound":
        where.fs.delete_dir(where.join("shards"))  # stale: another size or node count
    else:
        where.make_dirs()
    with tempfile.TemporaryDirectory(prefix="dfs-cer-sample-") as tmp:
        local = Path(tmp) / "crimes.parquet"
        done = 0
        with pq.ParquetWriter(local, SCHEMA) as writer:
            for batch in crimes_batches(events, seed=seed, batch=250_000):
                writer.write_batch(batch, row_group_size=65_536)
                done += batch.num_rows
                if progress:
                    progress("generating", done, events)
        target = filesystem_for(log, config)
        with open(local, "rb") as src, target.fs.open_output_stream(target.path) as dst:
            while chunk := src.read(8 << 20):
                dst.write(chunk)
        shard(
            str(local),
            nodes,
            f"{root}/shards",
            partitioning="random",
            time_column="date",
            type_column="primary_type",
            batch_rows=250_000,
            config=config,
            progress=(lambda rows: progress("sharding", rows, events)) if progress else None,
        )
    return Sample(log, shard_dirs, events, generated=True)
