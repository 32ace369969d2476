"""Join keys: (attribute value, window id) pairs hashed to 64 bits for the window-wise join filter.

Numbers use a vectorised integer mix (splitmix64 finaliser) of the value's bits with the window
id; strings use one mmh3 hash of the UTF-8 bytes seeded by the window id. Values of both sides
of an equality must hash alike, so they are first normalised to one :class:`KeyKind`: integers
(and timestamps, dates, booleans) as int64 (uint64 above 2**63 wraps), any side with a float or
a decimal as a correctly rounded float64 (``-0.0`` -> ``0.0``; see dfs_cer.query.numeric),
text as UTF-8. NULL never equals anything: null values are reported so callers skip them.
"""

from __future__ import annotations

import enum

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from dfs_cer.events.time import time_ints
from dfs_cer.query.numeric import convert, to_double


class KeyKind(enum.IntEnum):
    INT = 1
    FLOAT = 2
    STRING = 3
    REAL = 4  # a float32 column next to an exact one: both compared as float32 (SQL's REAL)


def kind_of(dtype: pa.DataType) -> KeyKind:
    """The key kind of one column type."""
    if pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return KeyKind.FLOAT
    if pa.types.is_integer(dtype) or pa.types.is_boolean(dtype) or pa.types.is_temporal(dtype):
        return KeyKind.INT
    if (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_dictionary(dtype)
    ):
        return KeyKind.STRING
    raise TypeError(f"cannot use a {dtype} column in an equality join filter")


def join_kind(left: pa.DataType, right: pa.DataType) -> KeyKind:
    """The kind both sides of ``X.a = Y.b`` are hashed as (int = float compares as float)."""
    a, b = kind_of(left), kind_of(right)
    exact = [t for t in (left, right) if pa.types.is_integer(t) or pa.types.is_decimal(t)]
    if any(pa.types.is_float32(t) for t in (left, right)) and len(exact) == 1:
        return KeyKind.REAL  # mirrors dfs_cer.query.numeric.comparison_type
    if a == b:
        return a
    if {a, b} == {KeyKind.INT, KeyKind.FLOAT}:
        return KeyKind.FLOAT
    raise TypeError(f"cannot compare {left} with {right} in an equality join filter")


def normalize(
    values: pa.Array | pa.ChunkedArray | np.ndarray, kind: KeyKind
) -> tuple[object, np.ndarray]:
    """Values as int64 / float64 numpy arrays or a list of str, plus a validity mask."""
    if isinstance(values, np.ndarray):
        values = pa.array(values)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if kind == KeyKind.STRING:
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            values = pc.cast(values, pa.string())
        return values.to_pylist(), valid
    if kind in (KeyKind.FLOAT, KeyKind.REAL):
        # correctly rounded, so numerically equal values of any two types hash alike (SQL
        # compares exact with approximate numbers as doubles, or as REAL next to a float32)
        if kind == KeyKind.REAL and not pa.types.is_float32(values.type):
            values = convert(values, values.type, pa.float32())
        arr = to_double(values).fill_null(0.0).to_numpy(zero_copy_only=False)
        arr = np.where(arr == 0.0, 0.0, arr)  # -0.0 equals 0.0
        valid &= ~np.isnan(arr)  # NaN = NaN is not true in SQL
        return np.ascontiguousarray(arr, dtype=np.float64), valid
    if pa.types.is_timestamp(values.type) or pa.types.is_date(values.type):
        # instants in microseconds: equal times of any unit (and dates, as midnight) hash alike;
        # nanoseconds floor, so distinct ones within a microsecond only collide (a false positive)
        raw = time_ints(values.fill_null(0) if values.null_count else values)
        if pa.types.is_date32(values.type):
            micros = raw * np.int64(86_400_000_000)
        elif pa.types.is_date64(values.type):
            micros = raw * np.int64(1000)
        else:
            scale = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 1}[values.type.unit]
            micros = raw // 1000 if values.type.unit == "ns" else raw * np.int64(scale)
        return np.ascontiguousarray(micros, dtype=np.int64), valid
    if pa.types.is_temporal(values.type):
        values = (
            values.view(pa.int64())
            if values.type.bit_width == 64
            else pc.cast(values.view(pa.int32()), pa.int64())
        )
    if pa.types.is_uint64(values.type):  # values above 2**63 wrap: equal values keep equal bits
        arr = values.fill_null(0).to_numpy(zero_copy_only=False).view(np.int64)
    else:
        arr = pc.cast(values, pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(arr, dtype=np.int64), valid


@njit(cache=True, inline="always")
def _mix(x: np.uint64) -> np.uint64:
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@njit(cache=True)
def hash_numbers(bits: np.ndarray, windows: np.ndarray, seed: np.uint64) -> np.ndarray:
    """64-bit hash of (value bits, window id) for every element."""
    out = np.empty(bits.shape[0], np.uint64)
    for i in range(bits.shape[0]):
        out[i] = _mix(
            np.uint64(bits[i]) ^ _mix(np.uint64(windows[i]) + seed + np.uint64(0x9E3779B97F4A7C15))
        )
    return out


def hash_keys(values: object, kind: KeyKind, windows: np.ndarray, seed: int) -> np.ndarray:
    """Hashes of (value, window) pairs; ``values`` as returned by :func:`normalize`."""
    windows = np.ascontiguousarray(windows, dtype=np.int64)
    if kind == KeyKind.STRING:
        assert isinstance(values, list)
        seeds = ((windows ^ np.int64(seed & 0x7FFFFFFFFFFFFFFF)) & 0xFFFFFFFF).tolist()
        return np.fromiter(
            (
                mmh3.hash64(v if v is not None else "", s, signed=False)[0]
                for v, s in zip(values, seeds, strict=True)
            ),
            dtype=np.uint64,
            count=len(values),
        )
    assert isinstance(values, np.ndarray)
    bits = values.view(np.int64) if values.dtype == np.float64 else values
    return hash_numbers(bits, windows, np.uint64(seed))
