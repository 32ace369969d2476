"""Scalar functions and CASTs over whole Arrow columns (pyarrow compute kernels, no per-row Python).

Semantics follow Trino: string positions count from 1, ``substr`` with a negative start counts
from the end, ``round`` rounds half away from zero, ``greatest``/``least`` are NULL when an
argument is, ``day_of_week`` is ISO (Monday 1), ``CAST(x AS VARCHAR(n))`` truncates strings and
refuses other values longer than ``n``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import MatchError, UnsupportedFeatureError
from dfs_cer.query.expr import FUNCTIONS, cast_target
from dfs_cer.query.numeric import cast_to, plain, to_double

Value = Any  # a pa.Array or pa.Scalar


def _literal_arg(name: str, value: Value, what: str) -> Any:
    if not isinstance(value, pa.Scalar):
        raise UnsupportedFeatureError(
            f"{name}() with a {what} that is not a literal",
            code="unsupported",
            hint=f"give {name}() a constant {what}",
        )
    return value.as_py()


def _text(value: Value) -> Value:
    value = plain(value)
    if isinstance(value, pa.Scalar):
        return pc.cast(value, pa.string()) if value.type != pa.string() else value
    return (
        value
        if pa.types.is_string(value.type) or pa.types.is_large_string(value.type)
        else pc.cast(value, pa.string())
    )


def _substr(name: str, args: list[Value]) -> Value:
    start = _literal_arg(name, args[1], "start")
    length = _literal_arg(name, args[2], "length") if len(args) > 2 else None
    if start is None or (len(args) > 2 and length is None):
        return pa.scalar(None, pa.string())
    text = _text(args[0])
    if start == 0 or (length is not None and length <= 0):
        return pc.if_else(
            pc.is_null(text), pa.scalar(None, pa.string()), pa.scalar("", pa.string())
        )
    begin = start - 1 if start > 0 else start
    stop = None if length is None else begin + length
    if start < 0 and stop is not None and stop >= 0:
        stop = None
    return pc.utf8_slice_codeunits(text, start=begin, stop=stop)


def _strpos(name: str, args: list[Value]) -> Value:
    needle = _literal_arg(name, args[1], "substring")
    if needle is None:
        return pa.scalar(None, pa.int64())
    text = _text(args[0])
    found = pc.find_substring(text, needle)  # a byte offset, -1 when absent
    byte_pos = pc.cast(found, pa.int64())
    chars = _chars_before(text, byte_pos)
    return pc.if_else(pc.less(byte_pos, 0), pa.scalar(0, pa.int64()), pc.add(chars, 1))


def _chars_before(text: Value, byte_pos: Value) -> Value:
    """Characters in the first ``byte_pos`` bytes of each string (UTF-8 continuation bytes
    skipped)."""
    import numpy as np

    if isinstance(text, pa.Scalar):
        s = text.as_py()
        b = byte_pos.as_py()
        return pa.scalar(
            None if s is None or b is None else len(s.encode()[: max(b, 0)].decode()), pa.int64()
        )
    arr = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    data = np.frombuffer(arr.buffers()[2] or b"", np.uint8) if len(arr) else np.zeros(0, np.uint8)
    offsets = (
        np.frombuffer(arr.buffers()[1], np.int32)[arr.offset : arr.offset + len(arr) + 1]
        if pa.types.is_string(arr.type)
        else np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
    )
    starts = np.cumsum(np.concatenate([[0], ((data & 0xC0) != 0x80).astype(np.int64)]))
    pos = np.asarray(pc.fill_null(byte_pos, 0).to_numpy(zero_copy_only=False), np.int64)
    begin = offsets[:-1].astype(np.int64)
    end = np.clip(begin + np.maximum(pos, 0), begin, offsets[1:])
    return pa.array(starts[end] - starts[begin], pa.int64())


def _replace(name: str, args: list[Value]) -> Value:
    pattern = _literal_arg(name, args[1], "search string")
    replacement = _literal_arg(name, args[2], "replacement") if len(args) > 2 else ""
    if pattern is None or replacement is None:
        return pa.scalar(None, pa.string())
    if pattern == "":
        return _text(args[0])
    return pc.replace_substring(_text(args[0]), pattern=pattern, replacement=replacement)


def _concat(name: str, args: list[Value]) -> Value:
    return pc.binary_join_element_wise(*[_text(a) for a in args], "")


def _pattern_test(kernel: str) -> Callable[[str, list[Value]], Value]:
    def run(name: str, args: list[Value]) -> Value:
        pattern = _literal_arg(name, args[1], "pattern")
        if pattern is None:
            return pa.scalar(None, pa.bool_())
        return pc.call_function(kernel, [_text(args[0])], pc.MatchSubstringOptions(pattern))

    return run


def _round(name: str, args: list[Value]) -> Value:
    digits = _literal_arg(name, args[1], "number of digits") if len(args) > 1 else 0
    value = plain(args[0])
    if digits is None:
        return pa.scalar(None, value.type)
    if pa.types.is_integer(value.type) and digits >= 0:
        return value
    return pc.round(value, ndigits=int(digits), round_mode="half_towards_infinity")


def _log(name: str, args: list[Value]) -> Value:
    base, x = to_double(plain(args[0])), to_double(plain(args[1]))
    return pc.divide(pc.ln_checked(x), pc.ln_checked(base))


def _extreme(kernel: str) -> Callable[[str, list[Value]], Value]:
    def run(name: str, args: list[Value]) -> Value:
        values = [plain(a) for a in args]
        if any(pa.types.is_floating(v.type) for v in values) or len({v.type for v in values}) > 1:
            numeric = all(
                pa.types.is_integer(v.type)
                or pa.types.is_floating(v.type)
                or pa.types.is_decimal(v.type)
                for v in values
            )
            if numeric:
                values = [to_double(v) for v in values]
        return pc.call_function(kernel, values, pc.ElementWiseAggregateOptions(skip_nulls=False))

    return run


def _nullif(name: str, args: list[Value]) -> Value:
    from dfs_cer.query.numeric import comparable

    a, b = comparable(plain(args[0]), plain(args[1]))
    same = pc.fill_null(pc.equal(a, b), False)
    first = plain(args[0])
    return pc.if_else(same, pa.scalar(None, first.type), first)


def _temporal(kernel: str, **options: Any) -> Callable[[str, list[Value]], Value]:
    def run(name: str, args: list[Value]) -> Value:
        value = plain(args[0])
        if not pa.types.is_temporal(value.type):
            raise MatchError(f"{name}() takes a date or timestamp, got {value.type}")
        return pc.cast(
            pc.call_function(
                kernel, [value], *([pc.DayOfWeekOptions(**options)] if options else [])
            ),
            pa.int64(),
        )

    return run


def _date_trunc(name: str, args: list[Value]) -> Value:
    unit = _literal_arg(name, args[0], "unit")
    value = plain(args[1])
    if not pa.types.is_temporal(value.type):
        raise MatchError(f"date_trunc() takes a date or timestamp, got {value.type}")
    if unit == "week":
        return pc.floor_temporal(value, unit="week", week_starts_monday=True)
    return pc.floor_temporal(value, unit=unit)


def _unary(kernel: str) -> Callable[[str, list[Value]], Value]:
    def run(name: str, args: list[Value]) -> Value:
        return pc.call_function(kernel, [plain(args[0])])

    return run


_IMPLEMENTATIONS: dict[str, Callable[[str, list[Value]], Value]] = {
    **{name: _unary(kernel) for name, kernel in FUNCTIONS.items()},
    "reverse": _unary("utf8_reverse"), "truncate": _unary("trunc"),
    "substr": _substr, "strpos": _strpos, "replace": _replace, "concat": _concat,
    "starts_with": _pattern_test("starts_with"),
    "regexp_like": _pattern_test("match_substring_regex"),
    "round": _round, "log": _log,
    "power": lambda n, a: pc.power(to_double(plain(a[0])), to_double(plain(a[1]))),
    "greatest": _extreme("max_element_wise"), "least": _extreme("min_element_wise"),
    "nullif": _nullif,
    "coalesce": lambda n, a: pc.coalesce(*a),
    "year": _temporal("year"), "quarter": _temporal("quarter"), "month": _temporal("month"),
    "week": _temporal("iso_week"), "day": _temporal("day"), "day_of_year": _temporal("day_of_year"),
    "day_of_week": _temporal("day_of_week", count_from_zero=False, week_start=1),
    "hour": _temporal("hour"), "minute": _temporal("minute"), "second": _temporal("second"),
    "date_trunc": _date_trunc,
}  # fmt: skip


def call(name: str, args: list[Value]) -> Value:
    """``name(args)`` over arrays and scalars."""
    implementation = _IMPLEMENTATIONS.get(name)
    if implementation is None:
        raise UnsupportedFeatureError(
            f"function {name}() is not supported in MATCH_RECOGNIZE",
            code="unsupported",
            hint=f"supported: {', '.join(sorted(_IMPLEMENTATIONS))}",
        )
    return implementation(name, args)


def cast(value: Value, to: str) -> Value:
    """SQL's ``CAST(value AS to)``."""
    target = cast_target(to)
    if target is None:
        raise UnsupportedFeatureError(f"CAST to {to} is not supported", code="unsupported")
    base, params = target
    value = plain(value)
    if base in ("VARCHAR", "CHAR", "TEXT"):
        text = _text(value)
        if not params:
            return text
        limit = params[0]
        if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
            return pc.utf8_slice_codeunits(text, 0, limit)  # Trino truncates strings
        longest = (
            pc.max(pc.utf8_length(text))
            if not isinstance(text, pa.Scalar)
            else pc.utf8_length(text)
        )
        if longest.is_valid and longest.as_py() > limit:
            raise MatchError(f"a value of CAST(... AS {to}) has more than {limit} characters")
        return text
    if base == "DECIMAL":
        precision, scale = params[0], params[1] if len(params) > 1 else 0
        return cast_to(value, value.type, pa.decimal128(precision, scale))
    if base == "DATE":
        return pc.cast(value, pa.date32())
    if base == "TIMESTAMP":
        if pa.types.is_timestamp(value.type):
            return value
        return pc.cast(value, pa.timestamp("us"))
    arrow = {
        "DOUBLE": pa.float64(),
        "FLOAT": pa.float32(),
        "REAL": pa.float32(),
        "BIGINT": pa.int64(),
        "INT": pa.int32(),
        "INTEGER": pa.int32(),
        "SMALLINT": pa.int16(),
        "TINYINT": pa.int8(),
        "BOOLEAN": pa.bool_(),
    }[base]
    return cast_to(value, value.type, arrow)
