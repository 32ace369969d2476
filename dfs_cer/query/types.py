"""Type families of expressions, so that a comparison SQL would reject (a string with a number, a
boolean with an integer, a zoned timestamp with a naive one) is one clear error at analysis,
the same for every engine and storage node, instead of a failure (or a silent answer) deep in
one of them.

Families: ``number`` (integers, decimals, floats), ``string``, ``boolean``, ``timestamp``
(naive; dates compare with them as midnight), ``timestamptz`` (zoned: instants), ``date``,
``interval``, ``binary`` and ``nested`` (lists, structs, maps). None means unknown: the check is
left to evaluation.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.expr import (
    SCALAR_FUNCTIONS,
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
    Literal,
    MatchNumber,
    Navigation,
    UnaryOp,
    cast_target,
    to_sql,
    walk,
)
from dfs_cer.query.root import Query

if TYPE_CHECKING:
    import pyarrow as pa

_CAST_FAMILY = {
    "DOUBLE": "number",
    "FLOAT": "number",
    "REAL": "number",
    "BIGINT": "number",
    "INT": "number",
    "INTEGER": "number",
    "SMALLINT": "number",
    "TINYINT": "number",
    "DECIMAL": "number",
    "TEXT": "string",
    "VARCHAR": "string",
    "CHAR": "string",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
}


def family(dtype: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return "number"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_timestamp(dtype):
        return "timestamptz" if dtype.tz else "timestamp"
    if pa.types.is_date(dtype):
        return "date"
    if pa.types.is_duration(dtype) or pa.types.is_interval(dtype):
        return "interval"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "binary"
    return "nested"


def _comparable(a: str, b: str) -> bool:
    if a == b and a != "nested":
        return True
    # dates are midnights; integer time columns take INTERVALs in the ORDER BY column's units
    return {a, b} in ({"date", "timestamp"}, {"number", "interval"})


class _Typer:
    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def __call__(self, e: Expr) -> str | None:
        if isinstance(e, Column):
            return family(self.schema.field(e.name).type) if e.name in self.schema.names else None
        if isinstance(e, Literal):
            value = e.value
            if value is None:
                return None
            if isinstance(value, bool):
                return "boolean"
            return "string" if isinstance(value, str) else "number"
        if isinstance(e, IntervalLiteral):
            return "interval"
        if isinstance(e, Navigation):
            return self(e.operand)
        if isinstance(e, Classifier):
            return "string"
        if isinstance(e, MatchNumber):
            return "number"
        if isinstance(e, Aggregate):
            if e.name in (
                "count",
                "sum",
                "avg",
                "stddev",
                "variance",
                "stddev_pop",
                "var_pop",
                "count_if",
            ):
                return "number"
            if e.name in ("min", "max", "any_value", "min_by", "max_by") and e.args:
                return self(e.args[0])
            if e.name in ("bool_and", "bool_or"):
                return "boolean"
            if e.name == "string_agg":
                return "string"
            return "nested" if e.name == "array_agg" else None
        if isinstance(e, BinaryOp):
            if e.op in ("AND", "OR") or e.op in ("=", "<>", "<", "<=", ">", ">="):
                return "boolean"
            if e.op == "||":
                return "string"
            left, right = self(e.left), self(e.right)
            if left == "number" and right == "number":
                return "number"
            if left in ("timestamp", "timestamptz", "date") and right == "interval":
                return left
            if e.op == "-" and left == right and left in ("timestamp", "timestamptz"):
                return "interval"
            return None
        if isinstance(e, UnaryOp):
            return "boolean" if e.op == "NOT" else self(e.operand)
        if isinstance(e, Function):
            spec = SCALAR_FUNCTIONS.get(e.name)
            if spec is None:
                return None
            if spec[2] == "same":
                return next((f for f in (self(a) for a in e.args) if f is not None), None)
            if spec[2] == "temporal":
                return self(e.args[-1]) if e.args else None
            return spec[2]
        if isinstance(e, Cast):
            target = cast_target(e.to)
            return None if target is None else _CAST_FAMILY.get(target[0])
        if isinstance(e, Case):
            return next((f for f in (self(w.result) for w in e.whens) if f is not None), None)
        return None


def _pairs(e: Expr) -> list[tuple[Expr, Expr]]:
    out: list[tuple[Expr, Expr]] = []
    for x in walk(e):
        if isinstance(x, BinaryOp) and x.op in ("=", "<>", "<", "<=", ">", ">="):
            out.append((x.left, x.right))
        elif isinstance(x, InList):
            out += [(x.operand, i) for i in x.items]
        elif isinstance(x, Between):
            out += [(x.operand, x.low), (x.operand, x.high)]
        elif isinstance(x, Case) and x.operand is not None:
            out += [(x.operand, w.condition) for w in x.whens]
    return out


def _alternatives(e: Expr) -> list[list[Expr]]:
    """Expressions whose values must be of one kind: coalesce's arguments, CASE's results."""
    out = []
    for x in walk(e):
        if isinstance(x, Function) and x.name == "coalesce":
            out.append(list(x.args))
        elif isinstance(x, Case):
            out.append([w.result for w in x.whens] + ([x.default] if x.default is not None else []))
    return out


def check_types(query: Query, schema: pa.Schema) -> None:
    """Raise QueryValidationError for the first comparison of two incompatible families (or
    coalesce / CASE mixing them)."""
    typer = _Typer(schema)
    mr = query.recognize
    clauses = [(f"DEFINE {d.variable}", d.condition) for d in mr.definitions] + [
        (f"MEASURES {m.name}", m.expr) for m in mr.measures
    ]
    for clause, e in clauses:
        for group in _alternatives(e):
            typed = [(x, typer(x)) for x in group]
            known = [(x, f) for x, f in typed if f is not None]
            for (x, fx), (y, fy) in itertools.pairwise(known):
                if not _comparable(fx, fy):
                    raise QueryValidationError(
                        f"{to_sql(x)} ({fx}) and {to_sql(y)} ({fy}) are alternatives of "
                        "one value but of different kinds",
                        clause=clause,
                        hint="give every branch of coalesce / CASE one kind",
                        code="type-mismatch",
                    )
        for left, right in _pairs(e):
            a, b = typer(left), typer(right)
            if a is None or b is None or _comparable(a, b):
                continue
            hint = (
                "compare values of one kind, or CAST one side (e.g. CAST(x AS VARCHAR))"
                if "timestamptz" not in (a, b)
                else "timestamps with a time zone are instants: "
                "compare them with zoned timestamps only"
            )
            raise QueryValidationError(
                f"cannot compare {to_sql(left)} ({a}) with {to_sql(right)} ({b})",
                clause=clause,
                hint=hint,
                code="type-mismatch",
            )
