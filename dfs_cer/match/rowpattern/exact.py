"""Exact comparisons of numbers the row-pattern VM cannot hold as int64 or double.

The VM's condition programs keep each value as an int64 or a double. That is exact for every integer
that fits int64 and, when compared, for decimals of at most 15 digits (any such decimal round-trips
through a double, and SQL compares exact with approximate numbers as doubles). Two kinds of values
do not fit: uint64 values of 2**63 and above, and decimals of more than 15 digits. Such columns
(decided by their type: every uint64, decimals of more than 15 digits) are compared exactly through
*rank codes*: every value the comparison may meet (the columns involved and the literals) is
converted to one decimal type that holds them all, and replaced by its index in their sorted
distinct values, which orders and equals exactly as the numbers do.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: decimals with at most this many digits compare exactly as doubles
DOUBLE_EXACT_DIGITS = 15


def is_wide(dtype: pa.DataType) -> bool:
    """Can values of this type lie beyond what an int64 or a double compares exactly? Decided
    by the type alone, so every strategy (whatever rows it pulled) reads a column the same way."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return bool(
        pa.types.is_uint64(dtype)
        or (pa.types.is_decimal(dtype) and dtype.precision > DOUBLE_EXACT_DIGITS)
    )


def common_exact_type(types: list[pa.DataType]) -> pa.DataType:
    """One decimal type that holds every value of ``types`` (integers and decimals) exactly."""
    scale = max([t.scale for t in types if pa.types.is_decimal(t)] + [0])
    digits = 1
    for t in types:
        if pa.types.is_decimal(t):
            digits = max(digits, t.precision - t.scale)
        elif pa.types.is_integer(t):
            digits = max(digits, 20)
        else:
            raise TypeError(f"{t} is not an exact number")
    precision = digits + scale
    return (
        pa.decimal128(precision, scale)
        if precision <= 38
        else pa.decimal256(min(precision, 76), scale)
    )


class RankSpace:
    """Order-preserving int64 codes for the values of several exact numeric columns and literals."""

    def __init__(self, columns: list[pa.Array], literals: list[int | decimal.Decimal]) -> None:
        from dfs_cer.query.numeric import literal

        self.type = common_exact_type(
            [c.type for c in columns] + [literal(v).type for v in literals]
        )
        parts = [pc.cast(c.drop_null(), self.type) for c in columns]
        parts += [pa.array([decimal.Decimal(v) for v in literals], self.type)] if literals else []
        merged = (
            pa.chunked_array(parts, self.type).combine_chunks()
            if parts
            else pa.array([], self.type)
        )
        self.dictionary = pc.unique(merged).sort()

    def codes(self, arr: pa.Array) -> np.ndarray:
        """Rank of each value (0 where NULL: callers keep the null mask)."""
        index = pc.index_in(pc.cast(arr, self.type), value_set=self.dictionary).fill_null(0)
        return np.asarray(index.to_numpy(zero_copy_only=False), np.int64)

    def code(self, value: int | decimal.Decimal) -> int:
        found = pc.index_in(
            pa.scalar(decimal.Decimal(value), self.type), value_set=self.dictionary
        ).as_py()
        assert found is not None, f"{value} was not registered in the rank space"
        return int(found)
