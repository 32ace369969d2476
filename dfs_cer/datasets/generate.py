"""Stream any generator to parquet (any size: one batch in memory at a time)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dfs_cer.errors import ConfigError

KINDS = ("synthetic", "crimes", "citibike", "cluster", "stocks")


def batches(
    kind: str, n: int, *, seed: int = 7, batch: int = 1_000_000, **options: Any
) -> Iterator[pa.Table]:
    """``n`` events of data set ``kind`` in batches."""
    if n < 0:
        raise ConfigError(f"the number of events must be >= 0, got {n}")
    if kind == "synthetic":
        from dfs_cer.datasets.synthetic import INTERARRIVALS, synthetic_batches

        interarrival = options.pop("interarrival", "poisson")
        if interarrival not in INTERARRIVALS:
            raise ConfigError(
                f"--interarrival must be one of {', '.join(INTERARRIVALS)}, got {interarrival!r}"
            )
        yield from synthetic_batches(n, seed=seed, batch=batch, interarrival=interarrival)
        return
    if options:
        raise ConfigError(f"options {sorted(options)} apply to synthetic data only")
    if kind == "crimes":
        from dfs_cer.datasets.crimes import crimes_batches as make
    elif kind == "citibike":
        from dfs_cer.datasets.citibike import citibike_batches as make  # type: ignore[assignment]
    elif kind == "cluster":
        from dfs_cer.datasets.cluster import cluster_batches as make  # type: ignore[assignment]
    elif kind == "stocks":
        from dfs_cer.datasets.stocks import stock_batches as make  # type: ignore[assignment]
    else:
        raise ConfigError(f"data set must be one of {', '.join(KINDS)}, got {kind!r}")
    for b in make(n, seed=seed, batch=batch):
        yield pa.Table.from_batches([b])


def write_parquet(
    kind: str, n: int, out: str, *, progress: Callable[[int], None] | None = None, **options: Any
) -> int:
    """Write ``n`` events of ``kind`` to the parquet file ``out``; returns the rows written."""
    written = 0
    writer: pq.ParquetWriter | None = None
    try:
        for table in batches(kind, n, **options):
            if writer is None:
                writer = pq.ParquetWriter(out, table.schema)
            writer.write_table(table, row_group_size=65_536)
            written += table.num_rows
            if progress:
                progress(written)
    finally:
        if writer is not None:
            writer.close()
    return written
