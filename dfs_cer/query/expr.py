"""Scalar expressions of DEFINE, MEASURES and the other clauses, as frozen nodes.

sqlglot parses the SQL text; :mod:`dfs_cer.query.convert` maps its tree onto these nodes, which
carry the row-pattern meaning sqlglot does not know: pattern-variable qualifiers, physical and
logical navigation, RUNNING/FINAL, CLASSIFIER() and MATCH_NUMBER(). :func:`to_sql` prints the
canonical SQL text that parses back to the same nodes.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from dfs_cer.pattern.ir import format_label
from dfs_cer.serde import node

#: literal values: integers, exact decimals (``1.5``, as SQL reads a number with a point),
#: doubles (``1.5e0``), strings, booleans and NULL
Scalar = int | float | Decimal | str | bool | None


class Expr:
    """Base of every expression node."""

    __slots__ = ()


class Semantics(enum.Enum):
    RUNNING = "RUNNING"
    FINAL = "FINAL"


class NavKind(enum.Enum):
    PREV = "PREV"
    NEXT = "NEXT"
    FIRST = "FIRST"
    LAST = "LAST"

    @property
    def physical(self) -> bool:
        return self in (NavKind.PREV, NavKind.NEXT)

    @property
    def default_offset(self) -> int:
        return 1 if self.physical else 0


@node("literal")
@dataclass(frozen=True, slots=True)
class Literal(Expr):
    value: Scalar


@node("interval")
@dataclass(frozen=True, slots=True)
class IntervalLiteral(Expr):
    """``INTERVAL '30' MINUTE``; ``value`` keeps the decimal text exactly."""

    value: str
    unit: str


@node("column")
@dataclass(frozen=True, slots=True)
class Column(Expr):
    """``A.price`` (``variable='A'``) or ``price`` (the universal row pattern variable)."""

    name: str
    variable: str | None = None


@node("star")
@dataclass(frozen=True, slots=True)
class Star(Expr):
    """``*`` or ``A.*`` as the argument of ``count``."""

    variable: str | None = None


@node("navigation")
@dataclass(frozen=True, slots=True)
class Navigation(Expr):
    """``PREV/NEXT`` (physical) or ``FIRST/LAST`` (logical) navigation with an offset."""

    kind: NavKind
    operand: Expr
    offset: int
    semantics: Semantics | None = None


@node("classifier")
@dataclass(frozen=True, slots=True)
class Classifier(Expr):
    variable: str | None = None
    semantics: Semantics | None = None


@node("match_number")
@dataclass(frozen=True, slots=True)
class MatchNumber(Expr):
    pass


#: scalar functions conditions and measures may call: SQL name -> pyarrow compute kernel
#: (``coalesce`` is evaluated directly); everything else is refused at validation
FUNCTIONS = {
    "lower": "utf8_lower", "upper": "utf8_upper", "abs": "abs_checked", "length": "utf8_length",
    "trim": "utf8_trim_whitespace", "ltrim": "utf8_ltrim_whitespace",
    "rtrim": "utf8_rtrim_whitespace",
    "floor": "floor", "ceil": "ceil", "sqrt": "sqrt_checked", "ln": "ln_checked", "exp": "exp",
    "sign": "sign",
}  # fmt: skip
#: every scalar function: SQL name -> (fewest arguments, most arguments (-1: any), result family
#: "number", "string", "boolean", "temporal" or "same" as the first argument); the unary
#: pyarrow kernels above are pushed down to storage nodes' scans, the rest are evaluated by
#: the engines (dfs_cer.match.functions) and keep rows conservatively in pushed-down filters
SCALAR_FUNCTIONS = {
    "lower": (1, 1, "string"), "upper": (1, 1, "string"), "trim": (1, 1, "string"),
    "ltrim": (1, 1, "string"),
    "rtrim": (1, 1, "string"), "reverse": (1, 1, "string"), "substr": (2, 3, "string"),
    "concat": (1, -1, "string"), "replace": (2, 3, "string"), "length": (1, 1, "number"),
    "strpos": (2, 2, "number"), "starts_with": (2, 2, "boolean"), "regexp_like": (2, 2, "boolean"),
    "abs": (1, 1, "number"), "floor": (1, 1, "number"), "ceil": (1, 1, "number"),
    "sqrt": (1, 1, "number"),
    "ln": (1, 1, "number"), "exp": (1, 1, "number"), "sign": (1, 1, "number"),
    "round": (1, 2, "number"),
    "truncate": (1, 1, "number"), "power": (2, 2, "number"), "log": (2, 2, "number"),
    "greatest": (1, -1, "same"), "least": (1, -1, "same"), "nullif": (2, 2, "same"),
    "coalesce": (1, -1, "same"),
    "year": (1, 1, "number"), "quarter": (1, 1, "number"), "month": (1, 1, "number"),
    "week": (1, 1, "number"),
    "day": (1, 1, "number"), "day_of_week": (1, 1, "number"), "day_of_year": (1, 1, "number"),
    "hour": (1, 1, "number"), "minute": (1, 1, "number"), "second": (1, 1, "number"),
    "date_trunc": (2, 2, "temporal"),
}  # fmt: skip
#: CAST targets: SQL type name -> Arrow type name (VARCHAR(n) and DECIMAL(p, s) take parameters)
CAST_TYPES = {
    "DOUBLE": "float64", "FLOAT": "float32", "REAL": "float32", "BIGINT": "int64", "INT": "int32",
    "INTEGER": "int32", "SMALLINT": "int16", "TINYINT": "int8", "TEXT": "string",
    "VARCHAR": "string",
    "CHAR": "string", "BOOLEAN": "bool_", "DECIMAL": "decimal128", "DATE": "date32",
    "TIMESTAMP": "timestamp",
}  # fmt: skip
#: the deepest expression a query may hold (deeper ones are refused before any recursion)
MAX_DEPTH = 200

AGGREGATES = frozenset(
    {
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "stddev",
        "variance",
        "stddev_pop",
        "var_pop",
        "bool_and",
        "bool_or",
        "array_agg",
        "count_if",
        "max_by",
        "min_by",
        "any_value",
        "string_agg",
    }
)


def cast_target(to: str) -> tuple[str, tuple[int, ...]] | None:
    """``"VARCHAR(7)"`` -> ``("VARCHAR", (7,))``; None for a type CAST does not support."""
    import re

    m = re.fullmatch(r"\s*([A-Za-z]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*", to)
    if m is None or m.group(1).upper() not in CAST_TYPES:
        return None
    params = tuple(int(g) for g in m.groups()[1:] if g is not None)
    base = m.group(1).upper()
    allowed = {"VARCHAR": (0, 1), "CHAR": (0, 1), "DECIMAL": (1, 2)}.get(base, (0, 0))
    if not allowed[0] <= len(params) <= allowed[1] or (
        base == "DECIMAL" and not 1 <= params[0] <= 38
    ):
        return None
    return base, params


@node("aggregate")
@dataclass(frozen=True, slots=True)
class Aggregate(Expr):
    name: str
    args: tuple[Expr, ...]
    distinct: bool = False
    semantics: Semantics | None = None
    #: ``FILTER (WHERE ...)``: only rows where it is TRUE are aggregated
    filter: Expr | None = None


@node("binary")
@dataclass(frozen=True, slots=True)
class BinaryOp(Expr):
    op: str
    left: Expr
    right: Expr


@node("unary")
@dataclass(frozen=True, slots=True)
class UnaryOp(Expr):
    op: str  # NOT | -
    operand: Expr


@node("is_null")
@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False


@node("in_list")
@dataclass(frozen=True, slots=True)
class InList(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@node("between")
@dataclass(frozen=True, slots=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@node("like")
@dataclass(frozen=True, slots=True)
class Like(Expr):
    operand: Expr
    pattern: Expr
    negated: bool = False


@node("function")
@dataclass(frozen=True, slots=True)
class Function(Expr):
    name: str
    args: tuple[Expr, ...]


@node("when")
@dataclass(frozen=True, slots=True)
class When:
    condition: Expr
    result: Expr


@node("case")
@dataclass(frozen=True, slots=True)
class Case(Expr):
    whens: tuple[When, ...]
    default: Expr | None = None
    operand: Expr | None = None


@node("cast")
@dataclass(frozen=True, slots=True)
class Cast(Expr):
    operand: Expr
    to: str


COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "||"})
LOGICAL = frozenset({"AND", "OR"})

# ---------------------------------------------------------------------------------------------
# traversal


def like_regex(pattern: str) -> str:
    """The RE2 expression of SQL ``LIKE pattern`` (no escape character): ``%`` is any run of
    characters, line breaks included, ``_`` any one character; everything else is literal."""
    out = []
    for ch in pattern:
        out.append(
            ".*"
            if ch == "%"
            else "."
            if ch == "_"
            else ("\\" + ch if ch in r".^$*+?{}[]\|()" else ch)
        )
    return "(?s)^" + "".join(out) + "$"


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions of ``e``."""
    if isinstance(e, Navigation):
        return (e.operand,)
    if isinstance(e, Aggregate):
        return e.args if e.filter is None else (*e.args, e.filter)
    if isinstance(e, Function):
        return e.args
    if isinstance(e, BinaryOp):
        return (e.left, e.right)
    if isinstance(e, UnaryOp | IsNull | Cast):
        return (e.operand,)
    if isinstance(e, InList):
        return (e.operand, *e.items)
    if isinstance(e, Between):
        return (e.operand, e.low, e.high)
    if isinstance(e, Like):
        return (e.operand, e.pattern)
    if isinstance(e, Case):
        out: list[Expr] = [] if e.operand is None else [e.operand]
        for w in e.whens:
            out += [w.condition, w.result]
        if e.default is not None:
            out.append(e.default)
        return tuple(out)
    return ()


def transform(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``e`` bottom-up: ``fn`` returns a replacement for a node (children already
    transformed) or None to keep it. Nodes are frozen, so unchanged subtrees are shared."""
    import dataclasses

    def rebuild(x: Expr) -> Expr:
        changes: dict[str, object] = {}
        if isinstance(x, Navigation | UnaryOp | IsNull | Cast):
            changes["operand"] = rebuild(x.operand)
        elif isinstance(x, Aggregate):
            changes["args"] = tuple(rebuild(a) for a in x.args)
            if x.filter is not None:
                changes["filter"] = rebuild(x.filter)
        elif isinstance(x, Function):
            changes["args"] = tuple(rebuild(a) for a in x.args)
        elif isinstance(x, BinaryOp):
            changes = {"left": rebuild(x.left), "right": rebuild(x.right)}
        elif isinstance(x, InList):
            changes = {"operand": rebuild(x.operand), "items": tuple(rebuild(i) for i in x.items)}
        elif isinstance(x, Between):
            changes = {
                "operand": rebuild(x.operand),
                "low": rebuild(x.low),
                "high": rebuild(x.high),
            }
        elif isinstance(x, Like):
            changes = {"operand": rebuild(x.operand), "pattern": rebuild(x.pattern)}
        elif isinstance(x, Case):
            changes = {
                "whens": tuple(When(rebuild(w.condition), rebuild(w.result)) for w in x.whens),
                "default": None if x.default is None else rebuild(x.default),
                "operand": None if x.operand is None else rebuild(x.operand),
            }
        out = dataclasses.replace(x, **changes) if changes else x  # type: ignore[type-var]
        replaced = fn(out)
        return out if replaced is None else replaced

    return rebuild(e)


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order traversal."""
    yield e
    for c in children(e):
        yield from walk(c)


def depth(e: Expr) -> int:
    """The depth of ``e``'s tree, computed without recursion (any depth is safe to measure)."""
    deepest = 0
    stack: list[tuple[Expr, int]] = [(e, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children(node))
    return deepest


def conjuncts(e: Expr) -> list[Expr]:
    """Split a condition on its top-level ANDs."""
    if isinstance(e, BinaryOp) and e.op == "AND":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def and_all(items: list[Expr]) -> Expr | None:
    """AND the items together, left-deep as the parser builds chains (None when empty)."""
    if not items:
        return None
    out = items[0]
    for item in items[1:]:
        out = BinaryOp("AND", out, item)
    return out


def left_deep(op: str, left: Expr, right: Expr) -> BinaryOp:
    """``left op right`` for an associative ``op`` (AND, OR) as a left-deep chain, so
    ``a AND (b AND c)`` and ``a AND b AND c`` give the same tree."""
    items = _chain(op, left) + _chain(op, right)
    out = BinaryOp(op, items[0], items[1])
    for item in items[2:]:
        out = BinaryOp(op, out, item)
    return out


def _chain(op: str, e: Expr) -> list[Expr]:
    if isinstance(e, BinaryOp) and e.op == op:
        return _chain(op, e.left) + _chain(op, e.right)
    return [e]


def referenced_variables(e: Expr) -> set[str | None]:
    """Variables (None = universal) whose rows ``e`` reads through columns, stars or classifiers."""
    out: set[str | None] = set()
    for n in walk(e):
        if isinstance(n, Column | Star | Classifier):
            out.add(n.variable)
    return out


# ---------------------------------------------------------------------------------------------
# printing

_PREC = {
    "OR": 1,
    "AND": 2,
    "NOT": 3,
    "CMP": 4,
    "||": 5,
    "+": 6,
    "-": 6,
    "*": 7,
    "/": 7,
    "%": 7,
    "NEG": 8,
    "ATOM": 9,
}
_BARE_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# words sqlglot treats as keywords: a column with such a name is quoted when printed
_KEYWORDS = frozenset(
    [
        "ALL",
        "AND",
        "ANY",
        "ARRAY",
        "AS",
        "ASC",
        "BETWEEN",
        "BY",
        "CASE",
        "CAST",
        "COLLATE",
        "CROSS",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "DATE",
        "DATETIME",
        "DEFAULT",
        "DESC",
        "DISTINCT",
        "ELSE",
        "END",
        "ESCAPE",
        "EXCEPT",
        "EXISTS",
        "FALSE",
        "FILTER",
        "FIRST",
        "FOLLOWING",
        "FOR",
        "FROM",
        "FULL",
        "GROUP",
        "HAVING",
        "IF",
        "ILIKE",
        "IN",
        "INNER",
        "INTERVAL",
        "INTERSECT",
        "INTO",
        "IS",
        "JOIN",
        "LAST",
        "LEFT",
        "LIKE",
        "LIMIT",
        "MAP",
        "NATURAL",
        "NEXT",
        "NOT",
        "NULL",
        "NULLS",
        "OFFSET",
        "ON",
        "OR",
        "ORDER",
        "OUTER",
        "OVER",
        "PARTITION",
        "PERCENT",
        "PIVOT",
        "PRECEDING",
        "RANGE",
        "RIGHT",
        "ROW",
        "ROWS",
        "SELECT",
        "SET",
        "SOME",
        "STRUCT",
        "TABLE",
        "THEN",
        "TIME",
        "TIMESTAMP",
        "TOP",
        "TRUE",
        "UNBOUNDED",
        "UNION",
        "UNNEST",
        "USING",
        "VALUES",
        "WHEN",
        "WHERE",
        "WINDOW",
        "WITH",
        "YEAR",
        "MONTH",
        "DAY",
        "HOUR",
        "MINUTE",
        "SECOND",
    ]
)


def format_column_name(name: str) -> str:
    """Quote a column name when it is not a plain identifier or is a keyword."""
    if _BARE_COLUMN.match(name) and name.upper() not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def format_literal(value: Scalar) -> str:
    if value is None:
        return "NULL"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):  # always with a point, never an exponent: it reads back exact
        text = format(value, "f")
        return text if "." in text else text + ".0"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"CAST('{value}' AS DOUBLE)"
        text = repr(value)
        return text if ("e" in text or "E" in text) else text + "e0"  # a double literal
    return "'" + value.replace("'", "''") + "'"


def _prec(e: Expr) -> int:
    if isinstance(e, BinaryOp):
        return _PREC["CMP"] if e.op in COMPARISONS else _PREC[e.op]
    if isinstance(e, UnaryOp):
        return _PREC["NOT"] if e.op == "NOT" else _PREC["NEG"]
    if isinstance(e, IsNull | InList | Between | Like):
        return _PREC["CMP"]
    if (
        isinstance(e, Literal)
        and isinstance(e.value, int | float)
        and not isinstance(e.value, bool)
        and e.value < 0
    ):
        return _PREC["NEG"]
    return _PREC["ATOM"]


def _sub(e: Expr, min_prec: int) -> str:
    text = to_sql(e)
    return f"({text})" if _prec(e) < min_prec else text


def _semantics(s: Semantics | None) -> str:
    return "" if s is None else s.value + " "


def _qualified(variable: str | None, name: str) -> str:
    column = format_column_name(name)
    return column if variable is None else f"{format_label(variable)}.{column}"


def to_sql(e: Expr) -> str:
    """Canonical SQL text of an expression (parses back to an equal node)."""
    if isinstance(e, Literal):
        return format_literal(e.value)
    if isinstance(e, IntervalLiteral):
        return f"INTERVAL '{e.value}' {e.unit}"
    if isinstance(e, Column):
        return _qualified(e.variable, e.name)
    if isinstance(e, Star):
        return "*" if e.variable is None else f"{format_label(e.variable)}.*"
    if isinstance(e, Navigation):
        args = to_sql(e.operand)
        if e.offset != e.kind.default_offset:
            args += f", {e.offset}"
        return f"{_semantics(e.semantics)}{e.kind.value}({args})"
    if isinstance(e, Classifier):
        inner = "" if e.variable is None else format_label(e.variable)
        return f"{_semantics(e.semantics)}CLASSIFIER({inner})"
    if isinstance(e, MatchNumber):
        return "MATCH_NUMBER()"
    if isinstance(e, Aggregate):
        args = ", ".join(to_sql(a) for a in e.args)
        where = "" if e.filter is None else f" FILTER (WHERE {to_sql(e.filter)})"
        return (
            f"{_semantics(e.semantics)}{e.name}({'DISTINCT ' if e.distinct else ''}{args}){where}"
        )
    if isinstance(e, Function):
        return f"{e.name}({', '.join(to_sql(a) for a in e.args)})"
    if isinstance(e, BinaryOp):
        p = _prec(e)
        # left-associative: the right operand of an equal-precedence operator needs parentheses
        left_min = p + 1 if e.op in COMPARISONS else p
        return f"{_sub(e.left, left_min)} {e.op} {_sub(e.right, p + 1)}"
    if isinstance(e, UnaryOp):
        if e.op == "NOT":
            return f"NOT {_sub(e.operand, _PREC['NOT'])}"
        return f"-{_sub(e.operand, _PREC['ATOM'])}"
    if isinstance(e, IsNull):
        return f"{_sub(e.operand, _PREC['CMP'] + 1)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, InList):
        items = ", ".join(to_sql(i) for i in e.items)
        return f"{_sub(e.operand, _PREC['CMP'] + 1)} {'NOT ' if e.negated else ''}IN ({items})"
    if isinstance(e, Between):
        lo, hi = _sub(e.low, _PREC["CMP"] + 1), _sub(e.high, _PREC["CMP"] + 1)
        return (
            f"{_sub(e.operand, _PREC['CMP'] + 1)} "
            f"{'NOT ' if e.negated else ''}BETWEEN {lo} AND {hi}"
        )
    if isinstance(e, Like):
        return (
            f"{_sub(e.operand, _PREC['CMP'] + 1)} {'NOT ' if e.negated else ''}LIKE "
            f"{_sub(e.pattern, _PREC['CMP'] + 1)}"
        )
    if isinstance(e, Case):
        parts = ["CASE"]
        if e.operand is not None:
            parts.append(to_sql(e.operand))
        for w in e.whens:
            parts.append(f"WHEN {to_sql(w.condition)} THEN {to_sql(w.result)}")
        if e.default is not None:
            parts.append(f"ELSE {to_sql(e.default)}")
        parts.append("END")
        return " ".join(parts)
    if isinstance(e, Cast):
        return f"CAST({to_sql(e.operand)} AS {e.to})"
    raise TypeError(f"unknown expression node: {type(e).__name__}")


#: operators whose result is NULL whenever an operand is NULL
_NULL_PROPAGATING_OPS = frozenset(
    {"+", "-", "*", "/", "%", "=", "<>", "!=", "<", "<=", ">", ">=", "||"}
)


def _null_propagating(e: Expr) -> bool:
    """Is ``e`` NULL whenever one of its columns is NULL (arithmetic, comparisons, casts and the
    scalar kernels; not COALESCE, CASE, IS NULL, AND/OR)?"""
    for n in walk(e):
        if isinstance(n, Column | Literal | IntervalLiteral | Cast):
            continue
        if isinstance(n, BinaryOp) and n.op in _NULL_PROPAGATING_OPS:
            continue
        if isinstance(n, UnaryOp) and n.op in ("-", "NOT"):
            continue
        if isinstance(n, Function) and n.name.lower() in FUNCTIONS:
            continue
        return False
    return True


def distribute_navigation(e: Expr) -> Expr:
    """``FIRST(A.v * 1000)``, ``PREV(B.price + B.tax, 2)``: navigation over an expression of one
    variable's columns reads one row and evaluates the expression there, which is the expression
    over each column navigated alike (``FIRST(A.v) * 1000``) when the expression is NULL wherever
    a column is (no row: NULL either way). Other expressions are left for validation to refuse."""

    def fn(x: Expr) -> Expr | None:
        if not isinstance(x, Navigation) or isinstance(x.operand, Column | Classifier | Navigation):
            return None
        columns = [n for n in walk(x.operand) if isinstance(n, Column)]
        if (
            not columns
            or len({c.variable for c in columns}) != 1
            or not _null_propagating(x.operand)
        ):
            return None

        def navigate(y: Expr) -> Expr | None:
            return Navigation(x.kind, y, x.offset, x.semantics) if isinstance(y, Column) else None

        return transform(x.operand, navigate)

    return transform(e, fn)
