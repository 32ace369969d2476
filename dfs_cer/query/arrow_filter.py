"""Independent conditions -> pyarrow compute expressions (dataset filters for storage nodes).

A storage node scans its parquet shards once with the OR of every variable's independent
condition as the dataset filter, so row groups and rows that no variable can label never leave
the disk. Conditions are rewritten for one row: ``R.primary_type = 'ROBBERY'`` becomes
``pc.field("primary_type") == "ROBBERY"``.

:func:`to_arrow_filter` converts what pyarrow can evaluate and drops (conservatively, by
returning None for the conjunct) what it cannot, so the pushed filter may keep too many rows
but never too few.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.query.expr import (
    Between,
    BinaryOp,
    Case,
    Cast,
    Column,
    Expr,
    Function,
    InList,
    IntervalLiteral,
    IsNull,
    Like,
    Literal,
    UnaryOp,
    conjuncts,
)
from dfs_cer.query.model import WindowUnit


class NotPushable(Exception):
    """Raised internally for a node pyarrow cannot evaluate."""


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
_ARITH = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked", "/": "divide_checked"}
_FUNCTIONS = {
    "lower": "utf8_lower", "upper": "utf8_upper", "abs": "abs_checked", "length": "utf8_length",
    "trim": "utf8_trim_whitespace", "ltrim": "utf8_ltrim_whitespace", "rtrim": "utf8_rtrim_whitespace",
    "floor": "floor", "ceil": "ceil", "sqrt": "sqrt_checked", "ln": "ln_checked",
}  # fmt: skip
_CASTS = {
    "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "REAL": pa.float32(), "BIGINT": pa.int64(), "INT": pa.int32(),
    "INTEGER": pa.int32(), "SMALLINT": pa.int16(), "TEXT": pa.string(), "VARCHAR": pa.string(), "BOOLEAN": pa.bool_(),
}  # fmt: skip


def _scalar(value: Any) -> Any:
    return pc.scalar(value)


def _like_to_regex(pattern: str) -> str:
    out = []
    for ch in pattern:
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append("\\" + ch if ch in r".^$*+?{}[]\|()" else ch)
    return "^" + "".join(out) + "$"


def _convert(e: Expr) -> Any:
    if isinstance(e, Literal):
        return _scalar(e.value)
    if isinstance(e, Column):
        return pc.field(e.name)
    if isinstance(e, IntervalLiteral):
        seconds = Decimal(e.value) * WindowUnit(e.unit).seconds
        return _scalar(dt.timedelta(seconds=float(seconds)))
    if isinstance(e, BinaryOp):
        if e.op == "AND":
            return _convert(e.left) & _convert(e.right)
        if e.op == "OR":
            return _convert(e.left) | _convert(e.right)
        if e.op in _COMPARE:
            return _COMPARE[e.op](_convert(e.left), _convert(e.right))
        if e.op in _ARITH:
            return getattr(pc, _ARITH[e.op])(_convert(e.left), _convert(e.right))
        if e.op == "||":
            return pc.binary_join_element_wise(_convert(e.left), _convert(e.right), "")
        raise NotPushable(e.op)
    if isinstance(e, UnaryOp):
        if e.op == "NOT":
            return ~_convert(e.operand)
        return pc.negate_checked(_convert(e.operand))
    if isinstance(e, IsNull):
        inner = _convert(e.operand)
        return ~inner.is_null() if e.negated else inner.is_null()
    if isinstance(e, InList):
        if not all(isinstance(i, Literal) and i.value is not None for i in e.items):
            raise NotPushable("IN with non-literal items")
        values = [i.value for i in e.items if isinstance(i, Literal)]
        test = _convert(e.operand).isin(values)
        # x NOT IN (...) is NULL (not TRUE) when x is NULL: keep SQL's answer
        return ~test & ~_convert(e.operand).is_null() if e.negated else test
    if isinstance(e, Between):
        x = _convert(e.operand)
        inside = (x >= _convert(e.low)) & (x <= _convert(e.high))
        return ~inside if e.negated else inside
    if isinstance(e, Like):
        if not isinstance(e.pattern, Literal) or not isinstance(e.pattern.value, str):
            raise NotPushable("LIKE with a non-literal pattern")
        test = pc.match_substring_regex(_convert(e.operand), _like_to_regex(e.pattern.value))
        return ~test if e.negated else test
    if isinstance(e, Function):
        name = _FUNCTIONS.get(e.name)
        if name is None or len(e.args) != 1:
            raise NotPushable(e.name)
        return getattr(pc, name)(_convert(e.args[0]))
    if isinstance(e, Cast):
        target = _CASTS.get(e.to.upper())
        if target is None:
            raise NotPushable(e.to)
        return _convert(e.operand).cast(target)
    if isinstance(e, Case):
        raise NotPushable("CASE")
    raise NotPushable(type(e).__name__)


def to_arrow_filter(condition: Expr | None) -> pc.Expression | None:
    """Convert an independent condition; unconvertible conjuncts are dropped (None: keep all rows).

    The result is a necessary condition for ``condition``: every row that satisfies the
    condition satisfies the filter.
    """
    if condition is None:
        return None
    parts = []
    for c in conjuncts(condition):
        try:
            parts.append(_convert(c))
        except NotPushable:
            continue
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def is_fully_pushable(condition: Expr | None) -> bool:
    """True if every conjunct of ``condition`` converts."""
    if condition is None:
        return True
    try:
        for c in conjuncts(condition):
            _convert(c)
    except NotPushable:
        return False
    return True


def union_filter(conditions: list[Expr | None]) -> pc.Expression | None:
    """OR of the variables' filters: a row survives if any variable may label it (None: all rows)."""
    filters = [to_arrow_filter(c) for c in conditions]
    out = None
    for f in filters:
        if f is None:
            return None
        out = f if out is None else out | f
    return out
