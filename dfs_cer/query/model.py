"""The frozen query model: what :func:`dfs_cer.parse` returns.

Every class is a frozen, slotted dataclass registered for JSON round trips (``"type"``
discriminator), hashable and picklable, so a :class:`Query` can be shipped to Spark executors
and storage nodes unchanged.
"""

from __future__ import annotations

import decimal
import enum
from dataclasses import dataclass
from decimal import Decimal

from dfs_cer.pattern.ir import RowPattern
from dfs_cer.query.expr import Expr
from dfs_cer.serde import node


class RowsPerMatch(enum.Enum):
    ONE_ROW = "ONE ROW PER MATCH"
    ALL_ROWS_SHOW_EMPTY = "ALL ROWS PER MATCH SHOW EMPTY MATCHES"
    ALL_ROWS_OMIT_EMPTY = "ALL ROWS PER MATCH OMIT EMPTY MATCHES"
    ALL_ROWS_WITH_UNMATCHED = "ALL ROWS PER MATCH WITH UNMATCHED ROWS"

    @property
    def all_rows(self) -> bool:
        return self is not RowsPerMatch.ONE_ROW


class SkipTo(enum.Enum):
    PAST_LAST_ROW = "PAST LAST ROW"
    NEXT_ROW = "TO NEXT ROW"
    FIRST = "TO FIRST"
    LAST = "TO LAST"


@node("after_match_skip")
@dataclass(frozen=True, slots=True)
class AfterMatchSkip:
    """``AFTER MATCH SKIP ...``; ``TO v`` is stored as ``TO LAST v`` (the standard's meaning)."""

    to: SkipTo = SkipTo.PAST_LAST_ROW
    variable: str | None = None

    def sql(self) -> str:
        from dfs_cer.pattern.ir import format_label

        if self.variable is None:
            return f"AFTER MATCH SKIP {self.to.value}"
        return f"AFTER MATCH SKIP {self.to.value} {format_label(self.variable)}"


class WindowUnit(enum.Enum):
    MICROSECOND = "MICROSECOND"
    MILLISECOND = "MILLISECOND"
    SECOND = "SECOND"
    MINUTE = "MINUTE"
    HOUR = "HOUR"
    DAY = "DAY"
    #: calendar units (WITHIN only): a month or a year on from the first row's time
    MONTH = "MONTH"
    YEAR = "YEAR"

    @property
    def calendar(self) -> bool:
        return self in (WindowUnit.MONTH, WindowUnit.YEAR)

    @property
    def seconds(self) -> Decimal:
        """The unit's length; a calendar unit's longest (31 days, 366 days): a bound."""
        return {
            "MICROSECOND": Decimal("0.000001"),
            "MILLISECOND": Decimal("0.001"),
            "SECOND": Decimal(1),
            "MINUTE": Decimal(60),
            "HOUR": Decimal(3600),
            "DAY": Decimal(86400),
            "MONTH": Decimal(31 * 86400),
            "YEAR": Decimal(366 * 86400),
        }[self.value]


#: the units an exact duration is counted in, coarsest first, with their number per second
DURATION_UNITS = (("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9))


def exact_duration(value: str, unit: str) -> tuple[int, str] | None:
    """``INTERVAL 'value' unit`` as an integer count of the coarsest of s, ms, us and ns that
    holds it exactly (``'0.5' SECOND``: 500 ms, ``'0.000000003' SECOND``: 3 ns); None when it is
    finer than a nanosecond. A calendar unit counts as its longest length."""
    with decimal.localcontext(prec=400):
        seconds = Decimal(value) * WindowUnit(unit).seconds
        for name, per_second in DURATION_UNITS:
            count = seconds * per_second
            if count == count.to_integral_value():
                return int(count), name
    return None


@node("window")
@dataclass(frozen=True, slots=True)
class Window:
    """``WITHIN INTERVAL '30' MINUTE``: the first and last row of a match are at most this far
    apart (inclusive). ``unit=None`` means a bare number in the ORDER BY column's own units."""

    value: str
    unit: WindowUnit | None = None

    @property
    def amount(self) -> Decimal:
        return Decimal(self.value)

    def seconds(self) -> Decimal | None:
        """The window's length in seconds (for MONTH and YEAR the longest it can be)."""
        return None if self.unit is None else self.amount * self.unit.seconds

    @property
    def months(self) -> int | None:
        """Calendar months of a MONTH or YEAR window (None for a fixed length)."""
        if self.unit is None or not self.unit.calendar:
            return None
        return int(self.amount) * (12 if self.unit is WindowUnit.YEAR else 1)

    def sql(self) -> str:
        if self.unit is None:
            return f"WITHIN {self.value}"
        return f"WITHIN INTERVAL '{self.value}' {self.unit.value}"


@node("sort_item")
@dataclass(frozen=True, slots=True)
class SortItem:
    column: str
    descending: bool = False
    nulls_first: bool | None = None


@node("measure")
@dataclass(frozen=True, slots=True)
class Measure:
    expr: Expr
    name: str


@node("subset")
@dataclass(frozen=True, slots=True)
class Subset:
    name: str
    variables: tuple[str, ...]


@node("definition")
@dataclass(frozen=True, slots=True)
class Definition:
    variable: str
    condition: Expr


@node("match_recognize")
@dataclass(frozen=True, slots=True)
class MatchRecognize:
    """The body of ``MATCH_RECOGNIZE ( ... )``."""

    order_by: tuple[SortItem, ...]
    pattern: RowPattern
    partition_by: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    rows_per_match: RowsPerMatch = RowsPerMatch.ONE_ROW
    all_matches: bool = False
    after_match_skip: AfterMatchSkip = AfterMatchSkip()
    window: Window | None = None
    subsets: tuple[Subset, ...] = ()
    definitions: tuple[Definition, ...] = ()

    def definition(self, variable: str) -> Definition | None:
        for d in self.definitions:
            if d.variable == variable:
                return d
        return None


@node("outer_query")
@dataclass(frozen=True, slots=True)
class OuterQuery:
    """The SELECT around MATCH_RECOGNIZE, each part as SQL text in sqlglot's generic dialect.

    It runs on an embedded SQL engine (or Spark SQL) over the match relation, so it is kept as
    text rather than interpreted by dfs-cer.
    """

    select: tuple[str, ...] = ("*",)
    distinct: bool = False
    where: str | None = None
    order_by: tuple[str, ...] = ()
    limit: int | None = None
