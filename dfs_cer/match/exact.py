"""Exact comparisons of numbers the row-pattern VM cannot hold as int64 or double.

The VM's condition programs keep each value as an int64 or a double. That is exact for every
integer that fits int64 and, when compared, for decimals of at most 15 digits (any such decimal
round-trips through a double, and SQL compares exact with approximate numbers as doubles). Two
kinds of values do not fit: uint64 values of 2**63 and above, and decimals of more than 15
digits. Conditions compare them exactly through *rank codes*: every value the comparison may
meet (the columns involved and the literals) is converted to one decimal type that holds them
all, and replaced by its index in their sorted distinct values, which orders and equals
exactly as the numbers do.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: decimals with at most this many digits compare exactly as doubles
DOUBLE_EXACT_DIGITS = 15


def is_wide(arr: pa.Array) -> bool:
    """Does ``arr`` hold numbers an int64 or a double cannot compare exactly?"""
    if pa.types.is_decimal(arr.type):
        return bool(arr.type.precision > DOUBLE_EXACT_DIGITS)
    if pa.types.is_uint64(arr.type):
        top = pc.max(arr).as_py()
        return top is not None and top >= 2**63
    return False


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
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(min(precision, 76), scale)


class RankSpace:
    """Order-preserving int64 codes for the values of several exact numeric columns and literals."""

    def __init__(self, columns: list[pa.Array], literals: list[int]) -> None:
        digits = max([len(str(abs(v))) for v in literals] + [1])
        lit_type = [pa.decimal128(min(digits, 76), 0) if digits <= 38 else pa.decimal256(min(digits, 76), 0)]
        self.type = common_exact_type([c.type for c in columns] + (lit_type if literals else []))
        parts = [pc.cast(c.drop_null(), self.type) for c in columns]
        parts += [pa.array([decimal.Decimal(v) for v in literals], self.type)] if literals else []
        merged = pa.chunked_array(parts, self.type).combine_chunks() if parts else pa.array([], self.type)
        self.dictionary = pc.unique(merged).sort()

    def codes(self, arr: pa.Array) -> np.ndarray:
        """Rank of each value (0 where NULL: callers keep the null mask)."""
        index = pc.index_in(pc.cast(arr, self.type), value_set=self.dictionary).fill_null(0)
        return np.asarray(index.to_numpy(zero_copy_only=False), np.int64)

    def code(self, value: int) -> int:
        found = pc.index_in(pa.scalar(decimal.Decimal(value), self.type), value_set=self.dictionary).as_py()
        assert found is not None, f"{value} was not registered in the rank space"
        return int(found)
