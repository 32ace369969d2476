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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.query.expr import (
    CAST_TYPES,
    FUNCTIONS,
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
    like_regex,
)
from dfs_cer.query.numeric import (
    arithmetic,
    cast_to,
    comparison_type,
    convert,
    duration,
    is_approximate,
    is_exact,
    literal,
)


class NotPushable(Exception):
    """Raised internally for a node pyarrow cannot evaluate."""


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge,
}  # fmt: skip
_ARITH = {
    "+": "add_checked",
    "-": "subtract_checked",
    "*": "multiply_checked",
    "/": "divide_checked",
}
_FUNCTIONS = FUNCTIONS
#: unparameterised CAST targets pushed down to the scans (others keep rows conservatively)
_CASTS = {
    name: getattr(pa, arrow)()
    for name, arrow in CAST_TYPES.items()
    if arrow not in ("decimal128", "timestamp", "date32")
}


def _scalar(value: Any) -> Any:
    return pc.scalar(literal(value))


class _Converter:
    """Expression conversion; with a schema, comparisons of numbers follow SQL's rules exactly as
    the engines evaluate them (dfs_cer.query.numeric): operands are cast to one type first."""

    def __init__(self, schema: pa.Schema | None) -> None:
        self.schema = schema

    def type_of(self, e: Expr) -> pa.DataType | None:
        """The Arrow type ``e`` evaluates to (None: unknown), found by evaluating the same
        kernels on empty arrays."""
        if isinstance(e, Column) and self.schema is not None and e.name in self.schema.names:
            dtype = self.schema.field(e.name).type
            return dtype.value_type if pa.types.is_dictionary(dtype) else dtype
        if isinstance(e, Literal) and e.value is not None:
            return literal(e.value).type
        if isinstance(e, BinaryOp) and e.op in _ARITH:
            operands = self._arith_operands(e)
            return (
                None
                if operands is None
                else pc.call_function(_ARITH[e.op], [operands[0], operands[1]]).type
            )
        if isinstance(e, UnaryOp) and e.op == "-":
            return self.type_of(e.operand)
        if isinstance(e, Function) and e.name in _FUNCTIONS and len(e.args) == 1:
            arg = self.type_of(e.args[0])
            return None if arg is None else getattr(pc, _FUNCTIONS[e.name])(pa.array([], arg)).type
        if isinstance(e, Cast):
            temporal = _temporal(e)
            return _CASTS.get(e.to.upper()) if temporal is None else temporal.type
        return None

    def _arith_operands(self, e: BinaryOp) -> tuple[pa.Array, pa.Array] | None:
        """Empty arrays of the types ``e``'s operands are converted to (as the engines do)."""
        lt, rt = self.type_of(e.left), self.type_of(e.right)
        if lt is None or rt is None:
            return None
        return arithmetic(pa.array([], lt), pa.array([], rt), e.op)

    def arith(self, e: BinaryOp) -> Any:
        lhs, rhs = self(e.left), self(e.right)
        if self.schema is not None:
            operands = self._arith_operands(e)
            if operands is None:
                raise NotPushable("arithmetic on values of unknown type")  # keep the rows
            lt, rt = self.type_of(e.left), self.type_of(e.right)
            assert lt is not None and rt is not None
            if pa.types.is_decimal(operands[0].type):
                # pyarrow's filter simplification fails on some decimal arithmetic that plain
                # evaluation accepts: the matcher checks it instead
                raise NotPushable("decimal arithmetic")
            lhs, rhs = convert(lhs, lt, operands[0].type), convert(rhs, rt, operands[1].type)
        return getattr(pc, _ARITH[e.op])(lhs, rhs)

    def plain(self, e: Expr) -> Any:
        """``e`` with a dictionary-encoded column as its values (for string kernels)."""
        out = self(e)
        if isinstance(e, Column) and self.schema is not None and e.name in self.schema.names:
            dtype = self.schema.field(e.name).type
            if pa.types.is_dictionary(dtype):
                return out.cast(dtype.value_type)
        return out

    def compare(self, op: str, left: Expr, right: Expr) -> Any:
        lhs, rhs = self(left), self(right)
        lt, rt = self.type_of(left), self.type_of(right)
        if lt is not None and rt is not None:
            target = comparison_type(lt, rt)
            if target is not None:
                lhs, rhs = convert(lhs, lt, target), convert(rhs, rt, target)
        elif self.schema is not None and (_numeric(lt) or _numeric(rt)):
            raise NotPushable("a comparison of numbers of unknown type")  # keep the rows
        return _COMPARE[op](lhs, rhs)

    def truth(self, e: Expr) -> Any:
        """``e`` where a truth value is expected: a NULL literal is the unknown one (BOOLEAN)."""
        if isinstance(e, Literal) and e.value is None:
            return pc.scalar(pa.scalar(None, pa.bool_()))
        return self(e)

    def __call__(self, e: Expr) -> Any:
        if isinstance(e, Literal):
            return _scalar(e.value)
        if isinstance(e, Column):
            return pc.field(e.name)
        if isinstance(e, IntervalLiteral):
            return pc.scalar(duration(e))
        if isinstance(e, BinaryOp):
            if e.op == "AND":
                return self.truth(e.left) & self.truth(e.right)
            if e.op == "OR":
                return self.truth(e.left) | self.truth(e.right)
            if e.op in _COMPARE:
                return self.compare(e.op, e.left, e.right)
            if e.op in _ARITH:
                return self.arith(e)
            if e.op == "||":  # any value, as its text (as the engines evaluate it)
                return pc.binary_join_element_wise(
                    self.plain(e.left).cast(pa.string()), self.plain(e.right).cast(pa.string()), ""
                )
            raise NotPushable(e.op)
        if isinstance(e, UnaryOp):
            if e.op == "NOT":
                return ~self.truth(e.operand)
            return pc.negate_checked(self(e.operand))
        if isinstance(e, IsNull):
            inner = self(e.operand)
            return ~inner.is_null() if e.negated else inner.is_null()
        if isinstance(e, InList):
            if not all(isinstance(i, Literal) and i.value is not None for i in e.items):
                raise NotPushable("IN with non-literal items")
            if _numeric(self.type_of(e.operand)) or any(_numeric(self.type_of(i)) for i in e.items):
                # numbers: exact comparisons, OR-ed as a balanced tree; long lists only as an
                # exact isin of integers (thousands of OR-ed comparisons overflow Arrow's stack)
                values = [i.value for i in e.items if isinstance(i, Literal)]
                if len(values) > MAX_IN_ITEMS:
                    kind = self.type_of(e.operand)
                    if not (
                        kind is not None
                        and pa.types.is_integer(kind)
                        and all(type(v) is int for v in values)
                    ):
                        raise NotPushable(
                            f"IN with more than {MAX_IN_ITEMS} numbers that are not all integers"
                        )
                    info = np.iinfo(kind.to_pandas_dtype())
                    inside = [v for v in values if isinstance(v, int) and info.min <= v <= info.max]
                    test = _null_when_null(
                        self(e.operand), self(e.operand).isin(pa.array(inside, kind))
                    )
                    return ~test if e.negated else test
                tests = [self.compare("=", e.operand, item) for item in e.items]
                while len(tests) > 1:
                    tests = [
                        tests[i] | tests[i + 1] if i + 1 < len(tests) else tests[i]
                        for i in range(0, len(tests), 2)
                    ]
                test = tests[0]
            else:
                test = _null_when_null(
                    self(e.operand),
                    self(e.operand).isin([i.value for i in e.items if isinstance(i, Literal)]),
                )
            # x [NOT] IN (...) is NULL when x is NULL (the comparisons above are NULL there already)
            return ~test if e.negated else test
        if isinstance(e, Between):
            inside = self.compare(">=", e.operand, e.low) & self.compare("<=", e.operand, e.high)
            return ~inside if e.negated else inside
        if isinstance(e, Like):
            if not isinstance(e.pattern, Literal) or not isinstance(e.pattern.value, str):
                raise NotPushable("LIKE with a non-literal pattern")
            test = pc.match_substring_regex(self.plain(e.operand), like_regex(e.pattern.value))
            return ~test if e.negated else test
        if isinstance(e, Function):
            name = _FUNCTIONS.get(e.name)
            if name is None or len(e.args) != 1:
                raise NotPushable(e.name)
            return getattr(pc, name)(self.plain(e.args[0]))
        if isinstance(e, Cast):
            temporal = _temporal(e)
            if temporal is not None:
                return temporal
            target = _CASTS.get(e.to.upper())
            if target is None:
                raise NotPushable(e.to)
            source = self.type_of(e.operand)
            if source is None:
                raise NotPushable("CAST of an operand of unknown type")  # keep the rows
            return cast_to(self.plain(e.operand), source, target)
        if isinstance(e, Case):
            raise NotPushable("CASE")
        raise NotPushable(type(e).__name__)


def _null_when_null(operand: pc.Expression, test: pc.Expression) -> pc.Expression:
    """Arrow's ``isin`` is FALSE for a NULL operand; SQL's ``IN`` is NULL (so ``NOT (x IN ...)``
    drops the row too)."""
    return pc.if_else(operand.is_null(), pa.scalar(None, pa.bool_()), test)


#: CAST targets of a string literal that are temporal literals (``TIMESTAMP '2024-01-01'``)
TEMPORAL_LITERALS = frozenset({"TIMESTAMP", "TIMESTAMPNTZ", "DATETIME", "DATE"})


def _temporal(e: Cast) -> pa.Scalar | None:
    """``TIMESTAMP '2024-01-01 10:00:00'`` / ``DATE '2024-01-01'`` (a string literal cast to a
    naive timestamp or a date) as its Arrow scalar; None for any other cast."""
    to = e.to.upper()
    if (
        to not in TEMPORAL_LITERALS
        or not isinstance(e.operand, Literal)
        or not isinstance(e.operand.value, str)
    ):
        return None
    try:
        value = dt.datetime.fromisoformat(e.operand.value.strip())
    except ValueError:
        raise NotPushable(f"the {to} literal {e.operand.value!r}") from None
    if value.tzinfo is not None:
        raise NotPushable(f"the {to} literal {e.operand.value!r} with a time zone")
    if to == "DATE":
        if value.time() != dt.time():
            raise NotPushable(f"the DATE literal {e.operand.value!r}")
        return pa.scalar(value.date(), pa.date32())
    return pa.scalar(value, pa.timestamp("us"))


def _numeric(dtype: pa.DataType | None) -> bool:
    return dtype is not None and (is_exact(dtype) or is_approximate(dtype))


def _convert(e: Expr, schema: pa.Schema | None = None) -> Any:
    return _Converter(schema).truth(e)


#: longer IN lists of numbers are pushed down only as an exact isin of integers
MAX_IN_ITEMS = 64


def to_arrow_filter(
    condition: Expr | None, schema: pa.Schema | None = None
) -> pc.Expression | None:
    """Convert an independent condition; unconvertible conjuncts are dropped (None: keep all rows).

    The result is a necessary condition for ``condition``: every row that satisfies the
    condition satisfies the filter. With the data's ``schema``, numbers compare exactly as the
    engines compare them (storage nodes always pass it).
    """
    if condition is None:
        return None
    parts = []
    for c in conjuncts(condition):
        try:
            parts.append(_convert(c, schema))
        except NotPushable:
            continue
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def is_fully_pushable(condition: Expr | None, schema: pa.Schema | None = None) -> bool:
    """True if every conjunct of ``condition`` converts."""
    if condition is None:
        return True
    try:
        for c in conjuncts(condition):
            _convert(c, schema)
    except NotPushable:
        return False
    return True


def union_filter(
    conditions: list[Expr | None], schema: pa.Schema | None = None
) -> pc.Expression | None:
    """OR of the variables' filters: a row survives if any variable may label it
    (None: all rows)."""
    filters = [to_arrow_filter(c, schema) for c in conditions]
    out = None
    for f in filters:
        if f is None:
            return None
        out = f if out is None else out | f
    return out
