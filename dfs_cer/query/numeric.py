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

import decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.query.expr import IntervalLiteral
from dfs_cer.query.model import exact_duration

#: a pyarrow Array, ChunkedArray or Scalar (pyarrow ships no type stubs)
Value = Any


def is_approximate(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_floating(dtype))


def is_exact(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_integer(dtype) or pa.types.is_decimal(dtype))


def to_double(value: Value) -> Value:
    """``value`` as float64, correctly rounded (equal numbers give equal doubles)."""
    if not (is_exact(value.type) or is_approximate(value.type)):
        return value
    return convert(value, value.type, pa.float64())


def _exact_common(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """A type both exact operands convert to without loss, where pyarrow's own promotion could
    fail (uint64 next to a signed type; decimals whose common type needs more than 38 digits)."""
    decimal = [t for t in (a, b) if pa.types.is_decimal(t)]
    if decimal:
        scale = max(t.scale for t in decimal)
        digits = max(
            [t.precision - t.scale for t in decimal]
            + [20 for t in (a, b) if pa.types.is_integer(t)]
        )  # uint64 needs 20 digits
        precision = digits + scale
        if precision <= 38:
            return pa.decimal128(max(precision, 1), scale)
        return pa.decimal256(min(precision, 76), scale)
    if (pa.types.is_uint64(a) or pa.types.is_uint64(b)) and any(
        pa.types.is_signed_integer(t) for t in (a, b)
    ):
        return pa.decimal128(20, 0)
    return None


def comparison_type(left: pa.DataType, right: pa.DataType) -> pa.DataType | None:
    """The type both operands of a comparison convert to (None: compare them as they are)."""
    numeric = (is_exact(left) or is_approximate(left)) and (
        is_exact(right) or is_approximate(right)
    )
    if not numeric:
        return None
    if is_approximate(left) or is_approximate(right):
        if pa.types.is_float64(left) and pa.types.is_float64(right):
            return None
        if pa.types.is_float64(left) or pa.types.is_float64(right):
            return pa.float64()
        return pa.float32()  # REAL next to REAL or an exact number compares as REAL (Trino, DuckDB)
    return _exact_common(left, right)


def convert(value: Any, source: pa.DataType, target: pa.DataType) -> Any:
    """``value`` (an array, scalar or dataset expression of type ``source``) as ``target``; to
    DOUBLE or REAL correctly rounded (decimals through their exact text)."""
    if source == target:
        return value
    if pa.types.is_floating(target) and pa.types.is_decimal(source):
        return _cast(_cast(value, pa.string(), True), target, True)
    return _cast(value, target, not pa.types.is_floating(target))


def _cast(value: Any, target: pa.DataType, safe: bool) -> Any:
    if isinstance(value, pc.Expression):
        return value.cast(target, safe=safe)
    return pc.cast(value, target, safe=safe)


def comparable(left: Value, right: Value) -> tuple[Value, Value]:
    """Operands converted as SQL compares them (see the module docstring)."""
    left, right = plain(left), plain(right)
    target = comparison_type(left.type, right.type)
    if target is None:
        return left, right
    return convert(left, left.type, target), convert(right, right.type, target)


def arithmetic(left: Value, right: Value, op: str = "+") -> tuple[Value, Value]:
    """Operands of ``+ - * /``: an approximate side makes both DOUBLE (REAL next to a float32, as
    in Trino and DuckDB); decimals whose result needs more than 38 digits are computed as 256-bit
    decimals (up to 76 digits)."""
    lt, rt = left.type, right.type
    if (is_approximate(lt) and is_exact(rt)) or (is_exact(lt) and is_approximate(rt)):
        if pa.types.is_float32(lt) or pa.types.is_float32(
            rt
        ):  # REAL with an exact number stays REAL
            return convert(left, lt, pa.float32()), convert(right, rt, pa.float32())
        return to_double(left), to_double(right)
    if is_exact(lt) and is_exact(rt) and (pa.types.is_decimal(lt) or pa.types.is_decimal(rt)):
        # integers next to a decimal become the decimals that hold them (no implicit cast that
        # could lack digits); results past 38 digits are computed as 256-bit decimals
        (p1, s1), (p2, s2) = _digits(lt), _digits(rt)
        needed = p1 + p2 + 1 if op in ("*", "/") else max(s1, s2) + max(p1 - s1, p2 - s2) + 1
        wide = needed > 38
        return _as_decimal(left, p1, s1, wide), _as_decimal(right, p2, s2, wide)
    return left, right


def _as_decimal(value: Any, precision: int, scale: int, wide: bool) -> Any:
    target = (
        pa.decimal256(min(max(precision, 1), 76), scale)
        if wide
        else pa.decimal128(max(precision, 1), scale)
    )
    return value if value.type == target else _cast(value, target, True)


_ARITH_KERNELS = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked"}


def calculate(op: str, left: Value, right: Value) -> Value:
    """``left op right`` for ``+ - * / %`` as SQL computes it: exact numbers exactly (integer
    division truncates toward zero, as Trino; a division with a decimal gives a DOUBLE, as
    DuckDB), an approximate side makes DOUBLE arithmetic; dividing by zero gives NULL."""
    left, right = arithmetic(plain(left), plain(right), op)
    if op in _ARITH_KERNELS:
        return pc.call_function(_ARITH_KERNELS[op], [left, right])
    if op == "/" and (pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type)):
        left, right = to_double(left), to_double(right)
    right = _nonzero(right)
    if op == "/":
        return pc.divide_checked(left, right)
    if pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type):
        return _decimal_mod(left, right)
    quotient = pc.divide(left, right)
    if pa.types.is_floating(quotient.type):
        quotient = pc.trunc(quotient)
    return pc.subtract(left, pc.multiply(quotient, right))  # the sign of the dividend, as SQL


def _nonzero(value: Value) -> Value:
    """``value`` with zeros as NULL (a division by zero is NULL)."""
    zero = pc.equal(
        value,
        pa.scalar(0, value.type)
        if not pa.types.is_decimal(value.type)
        else pa.scalar(decimal.Decimal(0), value.type),
    )
    return pc.if_else(zero, pa.scalar(None, value.type), value)


def _decimal_mod(left: Value, right: Value) -> Value:
    """Exact ``left % right`` of decimals (through their unscaled integers at one scale when they
    fit 18 digits; in doubles otherwise)."""
    import numpy as np

    lt, rt = left.type, right.type
    scale = max(lt.scale, rt.scale)
    digits = max(lt.precision - lt.scale, rt.precision - rt.scale) + scale
    if digits > 18:
        a, b = to_double(left), to_double(right)
        return pc.subtract(a, pc.multiply(pc.trunc(pc.divide(a, b)), b))
    common = pa.decimal128(18, scale)
    factor = pa.scalar(decimal.Decimal(10) ** scale, pa.decimal128(19, 0))

    def unscaled(v: Value) -> Value:
        return pc.cast(pc.multiply(pc.cast(v, common), factor), pa.int64())

    a, b = unscaled(left), unscaled(right)
    rest = pc.subtract(a, pc.multiply(pc.divide(a, b), b))
    if isinstance(rest, pa.Scalar):
        value = rest.as_py()
        return pa.scalar(None if value is None else decimal.Decimal(value).scaleb(-scale), common)
    ints = np.asarray(rest.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    words = np.stack(
        [ints, np.where(ints < 0, -1, 0).astype(np.int64)], axis=1
    )  # 128-bit two's complement
    data = pa.py_buffer(words.tobytes())
    validity = rest.buffers()[0] if rest.null_count else None
    return pa.Array.from_buffers(common, len(rest), [validity, data], null_count=rest.null_count)


def _digits(dtype: pa.DataType) -> tuple[int, int]:
    """(precision, scale) of an exact type (integers as the decimals that hold them)."""
    if pa.types.is_decimal(dtype):
        return dtype.precision, dtype.scale
    return (20 if pa.types.is_uint64(dtype) else 19), 0


def duration(interval: IntervalLiteral) -> pa.Scalar:
    """An ``INTERVAL`` literal as an exact Arrow duration, in the coarsest unit that holds it
    (a ``timedelta`` would round it to the microsecond, through a float)."""
    exact = exact_duration(interval.value, interval.unit)
    if exact is None:  # the parser refuses these
        raise ValueError(f"interval {interval.value!r} {interval.unit} is finer than 1 ns")
    return pa.scalar(exact[0], pa.duration(exact[1]))


def literal(value: object) -> pa.Scalar:
    """A SQL literal as an Arrow scalar: integers beyond int64 become uint64 (below 2**64) or an
    exact decimal, never an overflow."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        if 0 <= value < 2**64:
            return pa.scalar(value, pa.uint64())
        import decimal

        digits = len(str(abs(value)))
        return pa.scalar(
            decimal.Decimal(value),
            pa.decimal128(digits, 0) if digits <= 38 else pa.decimal256(min(digits, 76), 0),
        )
    if type(value).__name__ == "Decimal":
        return pa.scalar(value, decimal_type(value))
    return pa.scalar(value)


def decimal_type(value: Any) -> pa.DataType:
    """The narrowest decimal type holding a ``decimal.Decimal`` exactly."""
    _, digits, exponent = value.as_tuple()
    scale = max(0, -int(exponent))
    precision = max(len(digits) + max(0, int(exponent)), scale, 1)
    return (
        pa.decimal128(precision, scale)
        if precision <= 38
        else pa.decimal256(min(precision, 76), scale)
    )


def cast_to(value: Any, source: pa.DataType | None, target: pa.DataType) -> Any:
    """SQL's CAST of ``value`` (an array, scalar or dataset expression of type ``source``) to
    ``target``: an approximate number becomes an integer rounded half to even and a decimal
    rounded half away from zero (as the embedded SQL engine, DuckDB, does), never truncated;
    a value out of the target's range is an error."""
    if source is not None and pa.types.is_integer(target):
        if is_approximate(source):
            value = pc.round(value, round_mode="half_to_even")
        elif pa.types.is_decimal(source):  # one more digit: rounding 0.5 up needs it
            wider = (
                pa.decimal128(source.precision + 1, source.scale)
                if source.precision < 38
                else pa.decimal256(min(source.precision + 1, 76), source.scale)
            )
            value = pc.round(_cast(value, wider, True), round_mode="half_towards_infinity")
    return _cast(value, target, True)


def plain(value: Any) -> Any:
    """A dictionary-encoded array as its values (string kernels do not take dictionaries)."""
    if hasattr(value, "type") and pa.types.is_dictionary(value.type):
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        return (
            value.dictionary_decode()
            if isinstance(value, pa.Array)
            else pc.cast(value, value.type.value_type)
        )
    return value
