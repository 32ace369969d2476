"""Column types of a CSV file, decided from every value of it (no I/O here).

pyarrow's CSV reader infers a column's type from the first block and then fails, or when the
odd value is in the first block silently reads the whole column as text. Here every value is
read as text first and classified, batch by batch (vectorized: one cast per candidate type, or
one regular expression per kind for a batch of mixed kinds), and the column's type is decided
once from all of them:

- every non-empty value fits one type: that type (``int64`` widened to ``float64``, ``date32``
  to ``timestamp[s]`` to ``timestamp[ns]`` where some values need it);
- most values fit one type and a few do not: an error naming the first misfit's row, column
  and value (fix it, or read the column as text with ``--schema COLUMN=string``);
- otherwise text.

An empty field is NULL in every column; in a text column a quoted empty field (``""``) is the
empty string, as PostgreSQL's ``COPY ... CSV`` reads it. Declared types (``--schema``) are
checked against every value the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import DfsCerError
from dfs_cer.io.csvexact import (
    fraction_digits,
    inexact_integers,
    kept_as_float,
    out_of_range,
    outside_ns,
)


class CsvError(DfsCerError):
    """A CSV value that does not fit its column's type, or a bad ``--schema``."""

    exit_code = 2


_TS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}(:[0-9]{2}){0,2}"
_TZ = r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)"
#: kind -> (its type, the family it widens within, the pattern of a batch of mixed kinds)
KINDS: dict[str, tuple[pa.DataType, str, str]] = {
    "int": (pa.int64(), "number", r"^-?[0-9]{1,19}$"),  # the cast refuses those past int64
    # an integer is no float: one past int64 would be rounded (it stays text, or is a misfit)
    "float": (
        pa.float64(),
        "number",
        r"^[+-]?(([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)$"
        r"|^[+-]?(?i:inf|infinity|nan)$",
    ),
    "date": (pa.date32(), "time", r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
    "ts": (pa.timestamp("s"), "time", f"^{_TS}$"),
    "tsfrac": (pa.timestamp("ns"), "time", rf"^{_TS}\.[0-9]{{1,9}}$"),
    "tz": (pa.timestamp("s", "UTC"), "zoned time", f"^{_TS}{_TZ}$"),
    "tzfrac": (pa.timestamp("ns", "UTC"), "zoned time", rf"^{_TS}\.[0-9]{{1,9}}{_TZ}$"),
    "bool": (pa.bool_(), "bool", r"^(true|false|True|False|TRUE|FALSE)$"),
}
#: kinds in the order one cast tests a whole batch (a date string also casts to a timestamp)
ORDER = ("int", "float", "date", "ts", "tsfrac", "tz", "tzfrac", "bool")


@dataclass(frozen=True)
class Where:
    """A value's place: the file, its 1-based row (the header not counted) and the value."""

    uri: str
    row: int
    value: str


@dataclass
class ColumnKinds:
    """What the values of one column seen so far are: a count and the first value per kind."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, Where] = field(default_factory=dict)
    #: the first value a type of its family would change: "inexact" (an integer float64 rounds),
    #: "range" (a number float64 reads as an infinity or zero), "ns" (a time timestamp[ns] cannot
    #: hold)
    changed: dict[str, Where] = field(default_factory=dict)
    #: per kind of fraction ("float", "tsfrac", "tzfrac"), the most digits after the point
    digits: dict[str, int] = field(default_factory=dict)

    def _saw(self, kind: str, values: pa.Array, rows: np.ndarray, uri: str, offset: int) -> None:
        """Count ``values`` (at ``rows`` of the batch) as ``kind``, noting the first one a type of
        the kind's family would change."""

        def where(i: int) -> Where:
            return Where(uri, offset + int(rows[i]) + 1, values[i].as_py())

        self.counts[kind] = self.counts.get(kind, 0) + len(values)
        self.first.setdefault(kind, where(0))
        changed: dict[str, np.ndarray] = {}
        if kind == "int":
            changed["inexact"] = inexact_integers(values)
        elif kind == "float":
            floats = pc.cast(values, pa.float64())
            changed["range"] = out_of_range(values, floats)
            # an integer written with a zero fraction (9007199254740993.0) is held exactly too
            changed["inexact"] = inexact_integers(values, floats=floats)
        elif kind in ("date", "ts", "tz"):
            changed["ns"] = outside_ns(values, KINDS[kind][0])
        if kind in ("float", "tsfrac", "tzfrac"):
            digits = fraction_digits(values, zoned=kind == "tzfrac")
            self.digits[kind] = max(self.digits.get(kind, 0), digits)
        for what, mask in changed.items():
            if what not in self.changed and mask.any():
                self.changed[what] = where(int(np.argmax(mask)))

    def observe(self, column: pa.Array, uri: str, offset: int) -> None:
        """Classify a batch of text values (rows ``offset + 1 ...`` of ``uri``)."""
        present = _present(column)
        values = column.filter(present)
        if len(values) == 0:
            return
        rows = np.flatnonzero(present.to_numpy(zero_copy_only=False))
        head = values.slice(
            0, 64
        )  # a failing cast costs per failing value: try kinds its head fits
        for (
            kind
        ) in ORDER:  # the common case: the whole batch is of one kind (spelled so, and casting:
            dtype, _, pattern = KINDS[kind]  # the cast alone also reads '0x10', '0' as false, ...)
            if (
                _spelled(head, pattern)
                and _fits(head, dtype)
                and _spelled(values, pattern)
                and _fits(values, dtype)
            ):
                self._saw(kind, values, rows, uri, offset)
                return
        left = np.ones(len(values), bool)
        for kind in ORDER:
            hit = left & pc.match_substring_regex(values, KINDS[kind][2]).to_numpy(
                zero_copy_only=False
            )
            hit = _cast_check(values, hit, KINDS[kind][0])
            left &= ~hit
            if hit.any():
                self._saw(kind, values.filter(pa.array(hit)), rows[hit], uri, offset)
        if left.any():
            i = int(np.argmax(left))
            self.counts["text"] = self.counts.get("text", 0) + int(left.sum())
            self.first.setdefault("text", Where(uri, offset + int(rows[i]) + 1, values[i].as_py()))

    def decide(self) -> pa.DataType:
        """The column's type, or a :class:`CsvError` naming the first value that breaks it."""
        total = sum(self.counts.values())
        families: dict[str, int] = {}
        for kind, n in self.counts.items():
            if kind != "text":
                families[KINDS[kind][1]] = families.get(KINDS[kind][1], 0) + n
        if not families:
            return pa.string()
        best = max(families, key=lambda f: families[f])
        kinds = [k for k in ORDER if k in self.counts and KINDS[k][1] == best]
        dtype = KINDS[kinds[-1]][
            0
        ]  # the widest kind of the family (kinds are ordered narrow to wide)
        if families[best] == total:
            self._check_kept(dtype, kinds)
            return dtype
        if 2 * families[best] <= total:
            return pa.string()
        odd = min(
            (w for k, w in self.first.items() if k == "text" or KINDS[k][1] != best),
            key=lambda w: w.row,
        )
        digits = max(self.digits.get(k, 0) for k in kinds)
        raise CsvError(
            f"{odd.uri}, row {odd.row:,}, column {self.name}: {odd.value!r} is not {dtype} like "
            f"the column's other {families[best]:,} values; "
            f"{misfit_fix(self.name, odd.value, dtype, digits)}"
        )

    def _check_kept(self, dtype: pa.DataType, kinds: list[str]) -> None:
        """Refuse the column's type where it would change a value (see :mod:`csvexact`)."""
        name = self.name
        if pa.types.is_floating(dtype) and "inexact" in self.changed:
            lost = self.changed["inexact"]
            fraction = self.first["float"]
            why = (
                ""
                if (fraction.uri, fraction.row) == (lost.uri, lost.row)
                else f", and the column is float64 for its fractions ({fraction.value!r} at row "
                f"{fraction.row:,})"
            )
            raise CsvError(
                f"{lost.uri}, row {lost.row:,}, column {name}: {lost.value} is an integer "
                f"float64 cannot hold exactly (it would read as {float(lost.value)!r}){why}; "
                f"{exact_fix(name, self.digits.get('float', 0))}"
            )
        if pa.types.is_floating(dtype) and "range" in self.changed:
            lost = self.changed["range"]
            raise CsvError(
                f"{lost.uri}, row {lost.row:,}, column {name}: {lost.value!r} is "
                f"{_out_of_range(lost.value, 'float64')}; fix the value, or read the column as "
                f"text with --schema {name}=string"
            )
        if pa.types.is_timestamp(dtype) and dtype.unit == "ns" and "ns" in self.changed:
            lost = self.changed["ns"]
            frac = "tsfrac" if "tsfrac" in kinds else "tzfrac"
            fraction = self.first[frac]
            raise CsvError(
                f"{lost.uri}, row {lost.row:,}, column {name}: {lost.value!r} is outside the "
                f"years timestamp[ns] holds (1677 to 2262), the column's type for its fractions "
                f"of a second ({fraction.value!r} at row {fraction.row:,}); "
                f"{_time_fix(name, dtype, self.digits[frac])}"
            )


#: how files spell a missing value (R writes NA): a misfit spelled so suggests --null-values
NULL_SPELLINGS = frozenset({"NA", "N/A", "n/a", "NULL", "null", "None", "\\N", "-", "?"})


def misfit_fix(name: str, value: object, dtype: pa.DataType | None = None, digits: int = 0) -> str:
    """What to do about a value that does not fit its column's type ``dtype`` (whose other
    values have up to ``digits`` after the point): an integer past int64 reads exactly as a
    decimal, a time outside timestamp[ns] in a coarser unit."""
    if value in NULL_SPELLINGS:
        return (
            f"read {value!r} as a missing value with --null-values {value}, or the column as "
            f"text with --schema {name}=string"
        )
    text = str(value)
    if (
        dtype is not None
        and (pa.types.is_integer(dtype) or pa.types.is_floating(dtype))
        and re.fullmatch(r"[+-]?[0-9]{1,38}", text)
    ):
        return exact_fix(name, digits if pa.types.is_floating(dtype) else 0)
    if (
        dtype is not None
        and pa.types.is_timestamp(dtype)
        and dtype.unit == "ns"
        and (spelled := re.fullmatch(rf"{_TS}(?P<fraction>\.[0-9]{{1,6}})?{_TZ}?", text))
        and _fits(pa.array([text]), pa.timestamp("us", dtype.tz))
    ):
        return _time_fix(name, dtype, max(digits, len(spelled["fraction"] or ".") - 1))
    return f"fix the value, or read the column as text with --schema {name}=string"


def exact_fix(name: str, digits: int) -> str:
    """How to read a column of numbers with every digit: as decimals with ``digits`` after the
    point (their most), or as text."""
    return (
        f"read the column as exact numbers with --schema {name}=decimal128(38, {min(digits, 37)}), "
        f"or as text with --schema {name}=string"
    )


def _time_fix(name: str, dtype: pa.DataType, digits: int) -> str:
    """How to read a column of times some of which timestamp[ns] cannot hold: in the coarsest
    unit that keeps its fractions of a second (``digits`` at most), if there is one."""
    unit = "ms" if digits <= 3 else "us" if digits <= 6 else None
    if unit is None:
        return f"fix the value, or read the column as text with --schema {name}=string"
    zone = f", tz={dtype.tz}" if dtype.tz else ""
    return (
        f"read the column with --schema {name}=timestamp[{unit}{zone}] (years 1 to 9999), or as "
        f"text with --schema {name}=string"
    )


def _present(column: pa.Array) -> pa.Array:
    """Values that are not NULL and not empty (an empty field, quoted or not, is no value)."""
    return pc.fill_null(pc.and_(pc.is_valid(column), pc.not_equal(column, "")), False)


def _spelled(values: pa.Array, pattern: str) -> bool:
    return bool(pc.all(pc.match_substring_regex(values, pattern)).as_py())


def _fits(values: pa.Array, dtype: pa.DataType) -> bool:
    try:
        pc.cast(values, dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _cast_check(
    values: pa.Array, hit: np.ndarray, dtype: pa.DataType, most: int = 16
) -> np.ndarray:
    """``hit`` without the values that look like ``dtype`` but do not cast (``2026-02-30``); past
    ``most`` such values, none of the batch counts as ``dtype``."""
    for _ in range(most):
        where = np.flatnonzero(hit)
        if where.size == 0 or _fits(values.take(pa.array(where)), dtype):
            return hit
        hit = hit.copy()
        hit[where[_first_misfit(values.take(pa.array(where)), dtype)]] = False
    return np.zeros_like(hit)


def _first_misfit(values: pa.Array, dtype: pa.DataType) -> int:
    """The first position of ``values`` (which do not all cast) that does not cast: halving, so
    every value is cast at most twice."""
    lo, hi = 0, len(values)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(values.slice(lo, mid - lo), dtype):
            lo = mid
        else:
            hi = mid
    return lo


def convert(
    column: pa.Array,
    dtype: pa.DataType,
    name: str,
    uri: str,
    offset: int,
    why: str | None = None,
    fix: str | None = None,
    exact: bool = True,
) -> pa.Array:
    """Text values (rows ``offset + 1 ...`` of ``uri``) as ``dtype``; empty fields are NULL. A
    misfit, or a value a float type would change (:mod:`csvexact`; not checked again when not
    ``exact``: a first pass over the values did), is an error naming why the column has that
    type and the fix (by default: inferred, read the column as text with ``--schema``)."""
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return column.cast(dtype)
    present = _present(column)
    values = pc.if_else(present, column, pa.scalar(None, pa.string()))
    try:
        if exact and pa.types.is_floating(dtype):
            floats, changed = kept_as_float(values, dtype)
            if changed.any():
                _changed(column, changed, dtype, name, uri, offset, why, fix)
            return floats
        return pc.cast(values, dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    rows = np.flatnonzero(present.to_numpy(zero_copy_only=False))
    kept = column.filter(present)
    i = _first_misfit(kept, dtype)
    raise CsvError(
        f"{uri}, row {offset + int(rows[i]) + 1:,}, column {name}: {kept[i].as_py()!r} is not "
        f"{dtype} ({why or 'inferred from its other values'}); "
        f"{fix or misfit_fix(name, kept[i].as_py())}"
    )


def _changed(
    column: pa.Array,
    changed: np.ndarray,
    dtype: pa.DataType,
    name: str,
    uri: str,
    offset: int,
    why: str | None,
    fix: str | None,
) -> None:
    """Refuse the first of ``column``'s values that ``dtype`` would change."""
    i = int(np.argmax(changed))
    value = str(column[i].as_py())
    read = float(pc.cast(pa.scalar(value), dtype).as_py())
    kind = _FLOAT_NAMES.get(dtype, str(dtype))
    because = f"; {why}" if why else ""
    if read in (0.0, float("inf"), float("-inf")):
        raise CsvError(
            f"{uri}, row {offset + i + 1:,}, column {name}: {value!r} is "
            f"{_out_of_range(value, kind, read, because)}; "
            f"{fix or f'fix the value, or read the column as text with --schema {name}=string'}"
        )
    raise CsvError(
        f"{uri}, row {offset + i + 1:,}, column {name}: {value} is an integer {kind} cannot hold "
        f"exactly (it would read as {read!r}{because}); "
        f"{fix or exact_fix(name, fraction_digits(column.drop_null()))}"
    )


def _out_of_range(value: str, kind: str, read: float | None = None, because: str = "") -> str:
    """Why the number ``value`` is out of the range of the float type ``kind``."""
    read = float(value) if read is None else read
    if read == 0:
        return f"nonzero but closer to 0 than {kind} holds (it would read as {read!r}{because})"
    return f"past the largest {kind} (it would read as {read!r}{because})"


_FLOAT_NAMES = {pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64"}
_SPLIT = re.compile(r"[,\n](?![^\[(]*[\])])")
_TIMESTAMP = re.compile(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=([^\]]+))?\]", re.IGNORECASE)
_DECIMAL = re.compile(r"decimal(?:128)?\((\d+),\s*(\d+)\)")


def parse_type(text: str) -> pa.DataType:
    """An Arrow type by name: ``int64``, ``float64``/``double``, ``string``, ``bool``,
    ``date32``, ``timestamp[ms]``, ``timestamp[us, tz=UTC]``, ``decimal128(10, 2)``."""
    if m := _TIMESTAMP.fullmatch(text.strip()):
        dtype = pa.timestamp(m.group(1).lower(), m.group(2).strip() if m.group(2) else None)
        try:  # pyarrow looks a zone up only when it converts a value
            pa.scalar(0, dtype).cast(pa.string())
        except pa.ArrowInvalid:
            raise CsvError(
                f"--schema: unknown time zone {dtype.tz!r} in {text.strip()!r}; use a zone of the "
                "tz database (UTC, Europe/Paris) or an offset (+01:00)"
            ) from None
        return dtype
    name = text.strip().lower().replace("boolean", "bool")
    if m := _DECIMAL.fullmatch(name):
        try:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        except ValueError:
            raise CsvError(
                f"--schema: {text.strip()!r}: a decimal128 has a precision of 1 to 38 digits; use "
                "e.g. decimal128(38, 2), or string"
            ) from None
    try:
        dtype = pa.type_for_alias(name)
    except ValueError:
        raise CsvError(
            f"--schema: unknown type {text.strip()!r}; use int64, float64, string, bool, date32, "
            "timestamp[s|ms|us|ns] (with tz=ZONE), decimal128(P, S)"
        ) from None
    if pa.types.is_float16(dtype):  # every value would be refused, the type not named
        raise CsvError(
            f"--schema: {text.strip()!r}: the CSV reader has no half floats; use float32 (or "
            "float64)"
        )
    return dtype


def parse_column_types(spec: str) -> dict[str, pa.DataType]:
    """``COLUMN=TYPE`` entries separated by commas or lines (``#`` starts a comment), e.g.
    ``dep_time=int64,origin=string``."""
    out: dict[str, pa.DataType] = {}
    lines = "\n".join(line.split("#", 1)[0] for line in spec.splitlines())
    for entry in (e.strip() for e in _SPLIT.split(lines)):
        if not entry:
            continue
        name, sep, type_name = entry.partition("=")
        if not sep or not name.strip():
            raise CsvError(
                f"--schema: {entry!r} is not COLUMN=TYPE; write e.g. --schema "
                "dep_time=int64,origin=string"
            )
        if name.strip() in out:
            raise CsvError(f"--schema: column {name.strip()} is given twice")
        out[name.strip()] = parse_type(type_name)
    return out


def check_declared(declared: Mapping[str, pa.DataType], names: list[str], uri: str) -> None:
    unknown = [n for n in declared if n not in names]
    if unknown:
        raise CsvError(
            f"--schema names {', '.join(unknown)}, not a column of {uri}; columns: "
            f"{', '.join(names)}"
        )
