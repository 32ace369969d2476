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


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 60),
    span=st.sampled_from([3, 50, 400, 10**6]),
    nulls=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_duplicates_dropped_are_the_full_sort_s(n: int, span: int, nulls: bool, seed: int) -> None:
    """With dedup, a row equal to the previous one in every column is dropped, the first kept."""
    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "k": rng.integers(0, 2, n),
            "ts": pa.array(rng.integers(0, span, n), mask=rng.random(n) < 0.2 if nulls else None),
            "x": pa.array(rng.integers(0, 2, n), mask=rng.random(n) < 0.3 if nulls else None),
            "s": pa.array(rng.choice(["a", "b"], n).tolist(), pa.string()),
        }
    )
    _, _, order, _ = sort_partition_flags(table, ("k",), [("ts", False)], dedup=True)
    full = pc.sort_indices(
        table, sort_keys=[(c, "ascending", "at_end") for c in ("k", "ts", "x", "s")]
    ).to_numpy()
    rows = table.take(pa.array(full, pa.int64())).to_pylist()
    expected = [int(full[i]) for i in range(n) if i == 0 or rows[i] != rows[i - 1]]
    assert order.tolist() == expected
