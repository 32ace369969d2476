"""Which CSV values a type would change: vectorized checks over a batch of text values (no I/O).

A CSV value is read exactly or refused. A cast alone changes some values silently:

- an integer read as ``float64`` (the column also holds fractions) is rounded past 2^53
  (9007199254740993 reads as 9007199254740992);
- a number past ``float64``'s range reads as infinity (``1e400``), a nonzero one below it as
  zero (``1e-400``), as PostgreSQL's ``float8`` refuses both;
- a time before 1677 or after 2262 does not fit ``timestamp[ns]``, the type of a column of
  fractional seconds.

A fraction is read as the ``float64`` nearest to it, as SQL reads a DOUBLE (``0.1`` is the
double nearest one tenth), so only integers are held to every digit: written in digits, with or
without a zero fraction (``9007199254740993.0`` is the integer). A literal with an exponent
(``9.007199254740993e15``) is an approximate number, as in SQL, read as the nearest double.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: per float type, the fewest significant digits of an integer it may not hold (fewer always
#: fit: 15 digits are below 2^53, 7 below 2^24, 3 below 2^11)
_SAFE_DIGITS = {16: 3, 32: 7, 64: 15}
#: an integer too long to check through decimal256 (76 digits)
_HUGE_INTEGER = r"^[+-]?0*[1-9][0-9]{76,}$"
#: a literal whose digits before any exponent are not all zero
_NONZERO = r"^[^eE]*[1-9]"
_INFINITE = r"(?i)inf"
FLOAT64 = pa.float64()
#: whole seconds of the times timestamp[ns] holds (1677-09-21 00:12:44 to 2262-04-11 23:47:16)
NS_SECONDS = (-(2**63) // 10**9 + 1, (2**63 - 1) // 10**9)


def _where(mask: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), bool)


def inexact_integers(
    text: pa.Array, dtype: pa.DataType = FLOAT64, floats: pa.Array | None = None
) -> np.ndarray:
    """Which of ``text`` (read as ``floats``, else cast to the float type ``dtype`` here) are
    integers the float type does not hold exactly (an integer past 76 digits counts as one: it
    cannot be checked). Only integers of more digits than the type always holds are cast."""
    safe = _SAFE_DIGITS[dtype.bit_width]
    long = _flagged(
        _where(pc.greater(pc.utf8_length(text), safe)),
        text,
        rf"^[+-]?0*[1-9][0-9]{{{safe},}}(\.0*)?$",  # an integer, a zero fraction or none
        want=True,
    )
    out = np.zeros(len(text), bool)
    if not long.any():
        return out
    at = pa.array(np.flatnonzero(long))
    digits = pc.replace_substring_regex(text.take(at), r"\.0*$", "")
    values = pc.cast(digits, dtype) if floats is None else floats.take(at)
    exact = ~_where(pc.is_finite(values))  # an infinity is out of range, not inexact
    huge = _where(pc.match_substring_regex(digits, _HUGE_INTEGER))
    fits = np.flatnonzero(~huge & ~exact)
    if fits.size:
        wide = pa.decimal256(76, 0)
        exact[fits] = _where(
            pc.equal(
                pc.cast(digits.take(pa.array(fits)), wide),
                pc.cast(pc.cast(values.take(pa.array(fits)), pa.float64()), wide),
            )
        )
    out[np.flatnonzero(long)] = ~exact
    return out


def _flagged(candidates: np.ndarray, text: pa.Array, pattern: str, want: bool) -> np.ndarray:
    """``candidates`` whose text matches ``pattern`` (``want``) or does not: the pattern is
    tried on the candidates only."""
    at = np.flatnonzero(candidates)
    if at.size:
        match = _where(pc.match_substring_regex(text.take(pa.array(at)), pattern))
        candidates = candidates.copy()
        candidates[at] = match if want else ~match
    return candidates


def out_of_range(text: pa.Array, floats: pa.Array) -> np.ndarray:
    """Which of ``text`` (read as ``floats``) are finite, nonzero numbers that read as an infinity
    or as zero."""
    infinite = _flagged(_where(pc.is_inf(floats)), text, _INFINITE, want=False)
    zero = _flagged(_where(pc.equal(floats, 0)), text, _NONZERO, want=True)
    return np.asarray(infinite | zero, bool)


def outside_ns(text: pa.Array, dtype: pa.DataType) -> np.ndarray:
    """Which of ``text`` (dates or timestamps of ``dtype``) are outside the range of
    ``timestamp[ns]``: only those of years 1677, 2262 and beyond are converted to tell."""
    year = pc.utf8_slice_codeunits(text, 0, 4)
    edge = ~_where(pc.and_(pc.greater(year, "1677"), pc.less(year, "2262")))
    out = np.zeros(len(text), bool)
    at = np.flatnonzero(edge)
    if at.size == 0:
        return out
    near = pc.cast(text.take(pa.array(at)), dtype)
    if pa.types.is_date(near.type):
        days = pc.cast(pc.cast(near, pa.date32()), pa.int32())
        seconds = pc.multiply(pc.cast(days, pa.int64()), 86_400)
    else:
        seconds = pc.cast(pc.cast(near, pa.timestamp("s", near.type.tz)), pa.int64())
    low, high = NS_SECONDS
    out[at] = _where(pc.or_(pc.less(seconds, low), pc.greater(seconds, high)))
    return out


def fraction_digits(text: pa.Array, zoned: bool = False) -> int:
    """The most characters after a point among ``text`` (0 without a point): the digits of a
    fraction, or more where an exponent (or, ``zoned``, a zone) follows them, which a zone is
    cut from first."""
    if len(text) == 0:
        return 0
    if zoned:
        text = pc.replace_substring_regex(text, r"(Z|[+-][0-9:]+)$", "")
    point = pc.find_substring(text, ".")
    after = pc.subtract(pc.subtract(pc.utf8_length(text), point), 1)
    most = pc.max(pc.if_else(pc.greater_equal(point, 0), after, 0)).as_py()
    return int(most or 0)


def kept_as_float(text: pa.Array, dtype: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """``text`` cast to the floating-point ``dtype``, and which values that changes (see
    :func:`inexact_integers`, :func:`out_of_range`)."""
    floats = pc.cast(text, dtype)
    return floats, inexact_integers(text, dtype, floats) | out_of_range(text, floats)
