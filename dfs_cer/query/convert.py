"""Map sqlglot expression trees onto dfs-cer's expression nodes (:mod:`dfs_cer.query.expr`).

sqlglot knows SQL, not row pattern recognition: ``A.price`` is a table-qualified column to it and
``PREV(x, 2)`` an anonymous function. This module gives those their MATCH_RECOGNIZE meaning and
rejects what cannot appear in a row pattern expression, naming the construct.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from dfs_cer.errors import QueryValidationError, SourcePosition, UnsupportedFeatureError
from dfs_cer.query.expr import (
    AGGREGATES,
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
    NavKind,
    Semantics,
    Star,
    UnaryOp,
    When,
    left_deep,
)
from dfs_cer.query.model import exact_duration

#: names the parser substitutes for ``RUNNING f(...)`` / ``FINAL f(...)``
SEMANTICS_WRAPPERS = {"DFSCER_RUNNING": Semantics.RUNNING, "DFSCER_FINAL": Semantics.FINAL}

_BINARY: dict[type[exp.Expression], str] = {
    exp.And: "AND", exp.Or: "OR",
    exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.DPipe: "||",
}  # fmt: skip

_UNITS = {
    "MICROSECOND": "MICROSECOND", "MICROSECONDS": "MICROSECOND", "US": "MICROSECOND",
    "MILLISECOND": "MILLISECOND", "MILLISECONDS": "MILLISECOND", "MS": "MILLISECOND",
    "SECOND": "SECOND", "SECONDS": "SECOND", "S": "SECOND",
    "MINUTE": "MINUTE", "MINUTES": "MINUTE",
    "HOUR": "HOUR", "HOURS": "HOUR",
    "DAY": "DAY", "DAYS": "DAY",
}  # fmt: skip


def normalize_unit(unit: str) -> str | None:
    """Canonical singular unit name, or None if unknown."""
    return _UNITS.get(unit.upper())


def variable_name(identifier: exp.Expression | str) -> str:
    """Canonical pattern variable name: unquoted names are upper-cased."""
    if isinstance(identifier, str):
        return identifier.upper()
    if isinstance(identifier, exp.Identifier):
        return identifier.this if identifier.quoted else identifier.this.upper()
    return str(identifier.name).upper()


class Converter:
    """Converts one clause's sqlglot expressions; knows the clause for error messages."""

    def __init__(self, clause: str, position: SourcePosition | None = None) -> None:
        self.clause = clause
        self.position = position

    def unsupported(self, what: str, hint: str | None = None) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            f"{what} is not supported in a row pattern expression",
            clause=self.clause,
            position=self.position,
            hint=hint,
            code="unsupported",
        )

    def invalid(
        self, message: str, hint: str | None = None, code: str = "invalid"
    ) -> QueryValidationError:
        return QueryValidationError(
            message, clause=self.clause, position=self.position, hint=hint, code=code
        )

    def convert(self, e: exp.Expression) -> Expr:
        handler = _HANDLERS.get(type(e))
        if handler is not None:
            return handler(self, e)
        op = _BINARY.get(type(e))
        if op is not None:
            left, right = self.convert(e.this), self.convert(e.expression)
            if op in ("AND", "OR"):
                return left_deep(op, left, right)
            return BinaryOp(op, left, right)
        if isinstance(e, exp.AggFunc):
            return self._aggregate(e)
        if isinstance(e, exp.Func):
            return self._function(e)
        if isinstance(e, exp.Subquery | exp.Select | exp.Exists):
            raise self.unsupported("a subquery")
        if isinstance(e, exp.Escape):
            raise self.unsupported(
                "LIKE ... ESCAPE", "match the escape character with a different pattern"
            )
        if isinstance(e, exp.Window):
            raise self.unsupported("a window function (OVER)")
        raise self.unsupported(f"the SQL construct {type(e).__name__.upper()} ({e.sql()})")

    # ------------------------------------------------------------------------------ leaves

    def _literal(self, e: exp.Literal) -> Expr:
        if e.is_string:
            return Literal(str(e.this))
        text = str(e.this)
        if any(c in text for c in "eE"):  # 1.5e0: an approximate (DOUBLE) literal
            value = float(text)
            if math.isinf(value):
                raise self.invalid(
                    f"the number {text} is beyond the range of DOUBLE",
                    "write a smaller number",
                    code="bad-literal",
                )
            return Literal(value)
        if "." in text:  # 1.5: an exact (DECIMAL) literal, as in SQL
            exact = Decimal(text)
            if len(exact.as_tuple().digits) > 76:
                raise self.invalid(
                    f"the number {text} has more than 76 digits",
                    "write it with fewer digits or as a DOUBLE (1.5e0)",
                    code="bad-literal",
                )
            return Literal(exact)
        return Literal(int(text))

    def _column(self, e: exp.Column) -> Expr:
        if e.args.get("db") is not None or e.args.get("catalog") is not None:
            raise self.invalid(
                f"column reference {e.sql()} has too many qualifiers",
                "qualify a column with at most one pattern variable, e.g. A.price",
                code="bad-column",
            )
        qualifier = e.args.get("table")
        variable = variable_name(qualifier) if qualifier is not None else None
        if isinstance(e.this, exp.Star):
            return Star(variable)
        return Column(str(e.this.this), variable)

    def _neg(self, e: exp.Neg) -> Expr:
        inner = self.convert(e.this)
        if (
            isinstance(inner, Literal)
            and isinstance(inner.value, int | float | Decimal)
            and not isinstance(inner.value, bool)
            and inner.value >= 0
        ):
            return Literal(-inner.value)
        return UnaryOp("-", inner)

    def _not(self, e: exp.Not) -> Expr:
        inner = e.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        converted = self.convert(inner)
        if isinstance(converted, IsNull | InList | Between | Like) and not converted.negated:
            return dataclasses.replace(converted, negated=True)
        return UnaryOp("NOT", converted)

    def _is(self, e: exp.Is) -> Expr:
        if not isinstance(e.expression, exp.Null):
            raise self.unsupported(f"IS {e.expression.sql()}", "use = TRUE / = FALSE or IS NULL")
        return IsNull(self.convert(e.this), negated=bool(e.args.get("negate")))

    def _in(self, e: exp.In) -> Expr:
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise self.unsupported("IN with a subquery")
        return InList(
            self.convert(e.this),
            tuple(self.convert(i) for i in e.expressions),
            negated=bool(e.args.get("negate")),
        )

    def _between(self, e: exp.Between) -> Expr:
        return Between(
            self.convert(e.this),
            self.convert(e.args["low"]),
            self.convert(e.args["high"]),
            negated=bool(e.args.get("negate")),
        )

    def _like(self, e: exp.Like) -> Expr:
        if e.args.get("escape") is not None:
            raise self.unsupported("LIKE ... ESCAPE")
        return Like(
            self.convert(e.this), self.convert(e.expression), negated=bool(e.args.get("negate"))
        )

    def _case(self, e: exp.Case) -> Expr:
        whens = tuple(
            When(self.convert(i.this), self.convert(i.args["true"]))
            for i in e.args.get("ifs") or []
        )
        default = e.args.get("default")
        operand = e.this
        return Case(
            whens,
            None if default is None else self.convert(default),
            None if operand is None else self.convert(operand),
        )

    def _if(self, e: exp.If) -> Expr:
        false = e.args.get("false")
        return Case(
            (When(self.convert(e.this), self.convert(e.args["true"])),),
            None if false is None else self.convert(false),
        )

    def _cast(self, e: exp.Cast) -> Expr:
        return Cast(self.convert(e.this), e.args["to"].sql())

    def _interval(self, e: exp.Interval) -> Expr:
        unit_node = e.args.get("unit")
        value = e.this
        if unit_node is None or not isinstance(value, exp.Literal):
            raise self.invalid(
                f"interval {e.sql()} needs a quoted value and a unit",
                "write INTERVAL '30' MINUTE",
                code="bad-interval",
            )
        unit = normalize_unit(unit_node.name)
        if unit is None:
            raise self.invalid(
                f"interval unit {unit_node.name} is not supported",
                "use MILLISECOND, SECOND, MINUTE, HOUR or DAY",
                code="bad-interval",
            )
        text = str(value.this).strip()
        try:
            Decimal(text)
        except InvalidOperation:
            raise self.invalid(
                f"interval value {text!r} is not a number", code="bad-interval"
            ) from None
        exact = exact_duration(text, unit) if Decimal(text).is_finite() else None
        if exact is None or not -(2**63) < exact[0] < 2**63:
            raise self.invalid(
                f"interval {e.sql()} is not a whole number of nanoseconds of 64 bits",
                "write a duration between a nanosecond and about 292 years",
                code="bad-interval",
            )
        return IntervalLiteral(text, unit)

    # ---------------------------------------------------------------------------- pattern functions

    def _offset(self, name: str, node: exp.Expression | None, default: int) -> int:
        if node is None:
            return default
        converted = self.convert(node)
        if (
            isinstance(converted, Literal)
            and isinstance(converted.value, int)
            and not isinstance(converted.value, bool)
            and converted.value >= 0
        ):
            return converted.value
        raise self.invalid(
            f"the offset of {name} must be a non-negative integer literal, got {node.sql()}",
            f"write e.g. {name}(A.price, 2)",
            code="bad-offset",
        )

    def _first_last(self, e: exp.First | exp.Last) -> Expr:
        kind = NavKind.FIRST if isinstance(e, exp.First) else NavKind.LAST
        return Navigation(kind, self.convert(e.this), self._offset(kind.value, e.expression, 0))

    def _anonymous(self, e: exp.Anonymous) -> Expr:
        name = str(e.this).upper()
        args = list(e.expressions)
        if name in SEMANTICS_WRAPPERS:
            inner = self.convert(args[0])
            semantics = SEMANTICS_WRAPPERS[name]
            if isinstance(inner, Navigation | Aggregate | Classifier):
                if inner.semantics is not None:
                    raise self.invalid(f"{semantics.value} is given twice on {inner}")
                return dataclasses.replace(inner, semantics=semantics)
            raise self.invalid(
                f"{semantics.value} applies to navigation functions, aggregates and CLASSIFIER, "
                f"not to {args[0].sql()}",
                code="bad-semantics",
            )
        if name in ("PREV", "NEXT"):
            if not 1 <= len(args) <= 2:
                raise self.invalid(
                    f"{name} takes an expression and an optional offset, got {len(args)} arguments",
                    code="bad-navigation",
                )
            kind = NavKind[name]
            return Navigation(
                kind,
                self.convert(args[0]),
                self._offset(name, args[1] if len(args) > 1 else None, 1),
            )
        if name == "CLASSIFIER":
            if len(args) > 1:
                raise self.invalid(
                    "CLASSIFIER takes at most one pattern variable", code="bad-classifier"
                )
            if not args:
                return Classifier()
            arg = args[0]
            if not isinstance(arg, exp.Column) or arg.args.get("table") is not None:
                raise self.invalid(
                    f"CLASSIFIER takes a pattern variable name, got {arg.sql()}",
                    code="bad-classifier",
                )
            return Classifier(variable_name(arg.this))
        if name == "MATCH_NUMBER":
            if args:
                raise self.invalid("MATCH_NUMBER takes no arguments", code="bad-match-number")
            return MatchNumber()
        lowered = AGGREGATE_NAMES.get(name.lower(), name.lower())
        if lowered in AGGREGATES:
            return Aggregate(lowered, tuple(self.convert(a) for a in args))
        return Function(
            FUNCTION_NAMES.get(name.lower(), name.lower()), tuple(self.convert(a) for a in args)
        )

    def _aggregate(self, e: exp.Expression) -> Expr:
        name = e.sql_name().lower() if isinstance(e, exp.Func) else type(e).__name__.lower()
        name = AGGREGATE_NAMES.get(name, name)
        this = e.this
        distinct = False
        args: list[exp.Expression]
        if isinstance(this, exp.Distinct):
            distinct = True
            args = list(this.expressions)
            rest = [
                e.args[k]
                for k in ("expression", "separator")
                if isinstance(e.args.get(k), exp.Expression)
            ]
            args += rest
        else:
            args = _func_args(e) if isinstance(e, exp.Func) else ([] if this is None else [this])
        if name == "count" and not args:
            args = [exp.Star()]
        return Aggregate(name, tuple(self.convert(a) for a in args), distinct)

    def _filter(self, e: exp.Filter) -> Expr:
        inner = self.convert(e.this)
        where = e.expression
        if not isinstance(inner, Aggregate) or not isinstance(where, exp.Where):
            raise self.invalid(
                f"FILTER applies to an aggregate call, not to {e.this.sql()}", code="bad-aggregate"
            )
        if inner.filter is not None:
            raise self.invalid(f"FILTER is given twice on {e.sql()}", code="bad-aggregate")
        return dataclasses.replace(inner, filter=self.convert(where.this))

    def _function(self, e: exp.Func) -> Expr:
        if isinstance(e, exp.Extract):
            unit = _EXTRACT_UNITS.get(
                e.this.name.lower() if isinstance(e.this, exp.Var | exp.Literal) else ""
            )
            if unit is None:
                raise self.unsupported(
                    f"EXTRACT({e.this.sql()} FROM ...)",
                    f"extract one of {', '.join(sorted(set(_EXTRACT_UNITS)))}",
                )
            return Function(unit, (self.convert(e.expression),))
        if isinstance(e, exp.DateTrunc | exp.TimestampTrunc):
            unit = e.args.get("unit")
            text = (unit.name if isinstance(unit, exp.Var | exp.Literal) else "").lower()
            if text not in TRUNC_UNITS:
                raise self.unsupported(
                    f"date_trunc to {unit.sql() if unit is not None else '?'}",
                    f"truncate to one of {', '.join(TRUNC_UNITS)}",
                )
            return Function("date_trunc", (Literal(text), self.convert(e.this)))
        name = e.sql_name().lower()
        if isinstance(e, exp.Anonymous):
            name = str(e.this).lower()
        return Function(
            FUNCTION_NAMES.get(name, name), tuple(self.convert(a) for a in _func_args(e))
        )

    def _paren(self, e: exp.Paren) -> Expr:
        return self.convert(e.this)


def _func_args(e: exp.Func) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    for key in type(e).arg_types:
        value = e.args.get(key)
        if isinstance(value, exp.Expression):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, exp.Expression))
    return out


_HANDLERS: dict[type[exp.Expression], Callable[[Converter, Any], Expr]] = {
    exp.Literal: Converter._literal,
    exp.Boolean: lambda c, e: Literal(bool(e.this)),
    exp.Null: lambda c, e: Literal(None),
    exp.Column: Converter._column,
    exp.Star: lambda c, e: Star(None),
    exp.Paren: Converter._paren,
    exp.Neg: Converter._neg,
    exp.Not: Converter._not,
    exp.Is: Converter._is,
    exp.In: Converter._in,
    exp.Between: Converter._between,
    exp.Like: Converter._like,
    exp.Case: Converter._case,
    exp.If: Converter._if,
    exp.Cast: Converter._cast,
    exp.Interval: Converter._interval,
    exp.First: Converter._first_last,
    exp.Last: Converter._first_last,
    exp.Anonymous: Converter._anonymous,
    exp.Filter: Converter._filter,
}

#: other spellings of the supported aggregates (Trino, DuckDB, Oracle, sqlglot's names)
AGGREGATE_NAMES = {
    "arg_min": "min_by", "arg_max": "max_by", "arbitrary": "any_value", "logical_and": "bool_and",
    "logical_or": "bool_or", "every": "bool_and", "group_concat": "string_agg",
    "listagg": "string_agg",
    "stddev_samp": "stddev", "var_samp": "variance", "variance_samp": "variance",
    "variance_pop": "var_pop",
}  # fmt: skip
#: other spellings of the supported scalar functions
FUNCTION_NAMES = {
    "substring": "substr", "str_position": "strpos", "pow": "power", "ceiling": "ceil",
    "trunc": "truncate",
    "dow": "day_of_week", "doy": "day_of_year", "day_of_month": "day", "dayofweek": "day_of_week",
    "dayofyear": "day_of_year", "dayofmonth": "day",
}  # fmt: skip
_EXTRACT_UNITS = {
    "year": "year", "quarter": "quarter", "month": "month", "week": "week", "day": "day",
    "dow": "day_of_week",
    "day_of_week": "day_of_week", "doy": "day_of_year", "day_of_year": "day_of_year",
    "hour": "hour",
    "minute": "minute", "second": "second",
}  # fmt: skip
#: date_trunc units
TRUNC_UNITS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year")
