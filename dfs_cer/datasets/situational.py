"""TPStream's synthetic situation data: per key, one reading per second with boolean
attributes whose true periods last 10-100 s and false periods 10-50 s (uniform), plus a
numeric reading and payload columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

ATTRIBUTES = ("a", "b", "c")


def _periods(rng: np.random.Generator, n: int) -> np.ndarray:
    """A boolean series of length n alternating true (10-100) and false (10-50) periods."""
    out = np.zeros(n, bool)
    t = int(rng.integers(0, 50))
    on = bool(rng.integers(0, 2))
    while t < n:
        length = int(rng.integers(10, 101)) if on else int(rng.integers(10, 51))
        out[t : t + length] = on
        t += length
        on = not on
    return out


def situation_events(
    events: int, keys: int = 10, seed: int = 5, start: int = 1_700_000_000
) -> pa.Table:
    """``events`` readings over ``keys`` keys (one per key per second), sorted by time."""
    rng = np.random.default_rng(seed)
    per_key = max(1, events // keys)
    ts = np.tile(np.arange(per_key, dtype=np.int64), keys) + start
    key = np.repeat(np.arange(keys, dtype=np.int64), per_key)
    # milliseconds: the unit parquet stores, so shards and the in-memory table agree
    columns: dict[str, object] = {"key": key, "ts": pa.array(ts * 1000, pa.timestamp("ms"))}
    for name in ATTRIBUTES:
        columns[name] = np.concatenate([_periods(rng, per_key) for _ in range(keys)])
    columns["v"] = rng.normal(50, 10, per_key * keys).round(2)
    for i in range(3):
        columns[f"p{i}"] = rng.random(per_key * keys)
    table = pa.table(columns)
    return table.sort_by([("ts", "ascending"), ("key", "ascending")])
