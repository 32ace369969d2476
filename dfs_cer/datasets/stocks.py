"""Stock-like ticks for the canonical MATCH_RECOGNIZE example (prices that fall, then rise):
``sym`` over a few thousand symbols, a random-walk ``price`` per symbol (each tick moves it down
or up by 1 with probability 1/4 each, else leaves it unchanged), ``volume`` and ``ts`` in ms with
exponential(1 s) gaps from 2026-11-02 14:30 UTC."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

#: 2026-11-02 14:30 UTC (a market open)
START_MS = 1793629800000


def stock_events(n: int, *, keys: int = 3000, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, keys, n)
    ts = START_MS + np.cumsum(rng.exponential(1.0, n) * 1000).astype(np.int64)
    steps = rng.choice([-1.0, 0.0, 1.0], n, p=[0.25, 0.5, 0.25])
    order = np.lexsort((ts, sym))  # by symbol, then time: each symbol's walk is a cumulative sum
    walked = np.cumsum(steps[order])
    starts = np.r_[0, np.nonzero(np.diff(sym[order]))[0] + 1]
    offset = np.repeat(walked[starts] - steps[order][starts], np.diff(np.r_[starts, n]))
    price = np.empty(n)
    price[order] = 100.0 + walked - offset
    return pa.table(
        {
            "sym": pa.array(np.char.add("S", np.char.zfill(sym.astype(str), 4))),
            "price": pa.array(price),
            "volume": pa.array(rng.integers(1, 1000, n)),
            "ts": pa.array(ts, pa.timestamp("ms")),
        }
    )


def stock_batches(n: int, *, seed: int = 3, batch: int = 1_000_000) -> Iterator[pa.RecordBatch]:
    """One table's batches (each symbol's walk needs all its ticks at once)."""
    yield from stock_events(n, seed=seed).to_batches(max_chunksize=batch)
