"""The canonical event order: the linear path for integer keys gives exactly the full sort."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.events.order import sort_partition_flags


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(0, 60),
    keys=st.integers(1, 5),
    span=st.sampled_from([3, 50, 400, 10**6, 10**12]),
    nulls=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_integer_keys_sort_exactly_as_every_key_sorts(
    n: int, keys: int, span: int, nulls: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    ts = rng.integers(0, span, n)
    table = pa.table(
        {
            "k": rng.integers(0, keys, n),
            "ts": pa.array(ts, mask=rng.random(n) < 0.2 if nulls else None),
            "x": rng.integers(0, 3, n),
            "s": pa.array(rng.choice(["b", "a", "c"], n).tolist(), pa.string()),
        }
    )
    got, bounds, order, _ = sort_partition_flags(table, ("k",), [("ts", False)])
    expected = pc.sort_indices(
        table,
        sort_keys=[
            ("k", "ascending", "at_end"),
            ("ts", "ascending", "at_end"),
            ("x", "ascending", "at_end"),
            ("s", "ascending", "at_end"),
        ],
    ).to_numpy()
    assert order.tolist() == expected.tolist()
    assert got.equals(table.take(pa.array(expected, pa.int64())))
    k = got.column("k").to_numpy()
    assert bounds.tolist() == [0, *np.flatnonzero(k[1:] != k[:-1]) + 1, n] if n else [0]
