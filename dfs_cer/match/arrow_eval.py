"""Evaluate row-local expressions over whole Arrow columns (vectorised DEFINE masks, measures).

A resolver maps each leaf (column reference or physical navigation of one) to an Arrow array of
the table's length; everything above the leaves is pyarrow.compute with SQL's three-valued
logic (``and_kleene`` / ``or_kleene``).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.match import functions
from dfs_cer.query.expr import (
    Aggregate,
    Between,
    BinaryOp,
    Case,
    Cast,
    Classifier,
    Column,
    Expr,
    Function,
    InList,
    IntervalLiteral,
    IsNull,
    Like,
    Literal,
    MatchNumber,
    Navigation,
    UnaryOp,
    like_regex,
    to_sql,
)
from dfs_cer.query.numeric import calculate, comparable, duration, literal, plain

Resolver = Callable[[Expr], pa.Array]

_COMPARE = {
    "=": "equal",
    "<>": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}
_ARITH = {
    "+": "add_checked",
    "-": "subtract_checked",
    "*": "multiply_checked",
    "/": "divide_checked",
}


def _compare(op: str, a: pa.Array | pa.Scalar, b: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    """``a op b`` with SQL's numeric comparison rules (dfs_cer.query.numeric)."""
    left, right = comparable(a, b)
    return pc.call_function(_COMPARE[op], [left, right])


def evaluate(e: Expr, resolve: Resolver, length: int) -> pa.Array | pa.Scalar:
    """Evaluate ``e``; leaves come from ``resolve``; scalars broadcast lazily."""

    def ev(x: Expr) -> pa.Array | pa.Scalar:
        if isinstance(x, Literal):
            return literal(x.value)
        if isinstance(x, IntervalLiteral):
            return duration(x)
        if isinstance(x, Column | Navigation | Classifier | MatchNumber | Aggregate):
            return resolve(x)
        if isinstance(x, BinaryOp):
            if x.op == "AND":
                return pc.and_kleene(_logical(ev(x.left)), _logical(ev(x.right)))
            if x.op == "OR":
                return pc.or_kleene(_logical(ev(x.left)), _logical(ev(x.right)))
            if x.op in _COMPARE:
                return _compare(x.op, ev(x.left), ev(x.right))
            if x.op in _ARITH or x.op == "%":
                return calculate(x.op, ev(x.left), ev(x.right))
            if x.op == "||":
                return pc.binary_join_element_wise(
                    pc.cast(plain(ev(x.left)), pa.string()),
                    pc.cast(plain(ev(x.right)), pa.string()),
                    "",
                )
        if isinstance(x, UnaryOp):
            inner = ev(x.operand)
            return pc.invert(_logical(inner)) if x.op == "NOT" else pc.negate_checked(inner)
        if isinstance(x, IsNull):
            inner = ev(x.operand)
            out = pc.is_valid(inner) if x.negated else pc.is_null(inner)
            return out
        if isinstance(x, InList):
            operand = ev(x.operand)
            result: pa.Array | pa.Scalar = pa.scalar(False)
            for item in x.items:
                result = pc.or_kleene(result, _compare("=", operand, ev(item)))
            return pc.invert(result) if x.negated else result
        if isinstance(x, Between):
            v = ev(x.operand)
            inside = pc.and_kleene(_compare(">=", v, ev(x.low)), _compare("<=", v, ev(x.high)))
            return pc.invert(inside) if x.negated else inside
        if isinstance(x, Like):
            if not isinstance(x.pattern, Literal) or not isinstance(x.pattern.value, str):
                raise UnsupportedFeatureError(
                    f"LIKE with a non-literal pattern ({to_sql(x)})", code="unsupported"
                )
            test = pc.match_substring_regex(plain(ev(x.operand)), like_regex(x.pattern.value))
            return pc.invert(test) if x.negated else test
        if isinstance(x, Function):
            return functions.call(x.name, [ev(a) for a in x.args])
        if isinstance(x, Cast):
            return functions.cast(ev(x.operand), x.to)
        if isinstance(x, Case):
            conds, values = [], []
            for w in x.whens:
                cond = (
                    ev(w.condition)
                    if x.operand is None
                    else _compare("=", ev(x.operand), ev(w.condition))
                )
                conds.append(pc.fill_null(_broadcast(cond, length), False))
                values.append(_broadcast(ev(w.result), length))
            default = _broadcast(
                ev(x.default) if x.default is not None else pa.scalar(None), length
            )
            # one result type: NULL branches (no ELSE) take the others' type
            known = next((v.type for v in [*values, default] if v.type != pa.null()), pa.null())
            values = [v.cast(known) if v.type == pa.null() else v for v in values]
            default = default.cast(known) if default.type == pa.null() else default
            struct = pa.StructArray.from_arrays(conds, [f"c{i}" for i in range(len(conds))])
            return pc.case_when(struct, *values, default)
        raise UnsupportedFeatureError(f"{to_sql(x)} cannot be evaluated here", code="unsupported")

    try:
        return ev(e)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        # a value SQL would also reject (an overflow, a string that is not a number, ...)
        from dfs_cer.errors import MatchError

        raise MatchError(f"cannot evaluate {to_sql(e)}: {exc}") from None


def _logical(v: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    """A NULL literal where a truth value is expected is the unknown truth value (BOOLEAN NULL)."""
    return v.cast(pa.bool_()) if v.type == pa.null() else v


def _broadcast(v: pa.Array | pa.Scalar, length: int) -> pa.Array:
    if isinstance(v, pa.Scalar):
        return pa.nulls(length) if v.type == pa.null() else pa.repeat(v, length)
    return v


def evaluate_mask(e: Expr, resolve: Resolver, length: int) -> pa.Array:
    """Evaluate a condition to a boolean array where NULL counts as FALSE."""
    result = evaluate(e, resolve, length)
    result = _broadcast(result, length)
    result = _logical(result)  # DEFINE A AS NULL: unknown, so never true
    if result.type != pa.bool_():
        raise UnsupportedFeatureError(
            f"condition {to_sql(e)} is not boolean (it is {result.type})", code="not-boolean"
        )
    return pc.fill_null(result, False)
