"""SQL's rules for comparing numbers of different types, in one place for every evaluator
(pyarrow masks, the row-pattern VM's programs, the CER engine, join filter keys).

As in Trino and DuckDB:

- exact numbers (integers of any width and signedness, decimals) compare exactly:
  ``uint64 2**63 = uint64 2**63`` and ``int64 -1 < uint64 2**64-1`` hold;
- when either side is approximate (``float``/``double``), both sides become DOUBLE first, so
  ``int64 2**53+1 = double 2**53`` is TRUE (the integer rounds to the nearest double);
- NaN equals nothing and ``-0.0 = 0.0``.

The conversion to DOUBLE is correctly rounded for every type (pyarrow's direct decimal cast is
not, so decimals go through their exact text), hence numerically equal values always become
the same double: join filters that hash doubles never lose an equal pair.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: a pyarrow Array, ChunkedArray or Scalar (pyarrow ships no type stubs)
Value = Any


def is_approximate(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_floating(dtype))


def is_exact(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_integer(dtype) or pa.types.is_decimal(dtype))


def to_double(value: Value) -> Value:
    """``value`` as float64, correctly rounded (equal numbers give equal doubles)."""
    dtype = value.type
    if pa.types.is_float64(dtype):
        return value
    if pa.types.is_decimal(dtype):
        return pc.cast(pc.cast(value, pa.string()), pa.float64())
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        # the C++ integer -> double conversion rounds to nearest (no range check needed)
        return pc.cast(value, pa.float64(), safe=False)
    return value


def _exact_common(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """A type both exact operands convert to without loss, when pyarrow's own promotion could
    fail (uint64 next to a signed type, decimals next to uint64)."""
    unsigned64 = pa.types.is_uint64(a) or pa.types.is_uint64(b)
    signed = any(pa.types.is_signed_integer(t) for t in (a, b))
    decimal = [t for t in (a, b) if pa.types.is_decimal(t)]
    if decimal:
        if not any(pa.types.is_integer(t) for t in (a, b)):
            return None  # decimal against decimal: pyarrow rescales exactly
        scale = max(t.scale for t in decimal)
        digits = max([t.precision - t.scale for t in decimal] + [20])  # uint64 needs 20 digits
        precision = digits + scale
        if precision <= 38:
            return pa.decimal128(precision, scale)
        return pa.decimal256(min(precision, 76), scale)
    if unsigned64 and signed:
        return pa.decimal128(20, 0)
    return None


def comparable(left: Value, right: Value) -> tuple[Value, Value]:
    """Operands converted as SQL compares them (see the module docstring)."""
    lt, rt = left.type, right.type
    numeric = (is_exact(lt) or is_approximate(lt)) and (is_exact(rt) or is_approximate(rt))
    if not numeric:
        return left, right
    if is_approximate(lt) or is_approximate(rt):
        return to_double(left), to_double(right)
    common = _exact_common(lt, rt)
    if common is None:
        return left, right
    return pc.cast(left, common), pc.cast(right, common)


def arithmetic(left: Value, right: Value) -> tuple[Value, Value]:
    """Operands of ``+ - * /``: an approximate side makes both DOUBLE (as in SQL)."""
    lt, rt = left.type, right.type
    if (is_approximate(lt) and is_exact(rt)) or (is_exact(lt) and is_approximate(rt)):
        return to_double(left), to_double(right)
    return left, right
