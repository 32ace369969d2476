"""Expressions: print -> parse gives the same nodes, for random trees (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dfs_cer import parse
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
    NavKind,
    Semantics,
    Star,
    UnaryOp,
    When,
    left_deep,
    to_sql,
)

variables = st.sampled_from([None, "A", "B"])
column_names = st.sampled_from(["x", "price", "date", "first", "Mixed", "with space", "ts"])
columns = st.builds(Column, column_names, variables)
ints = st.integers(-(2**40), 2**40)
floats = st.integers(-4000, 4000).map(lambda i: i / 4).filter(lambda f: f != int(f))
strings = st.text(alphabet="ab XY'%_z0", max_size=6)
literals = st.one_of(
    ints.map(Literal),
    floats.map(Literal),
    strings.map(Literal),
    st.sampled_from([Literal(True), Literal(False), Literal(None)]),
)
intervals = st.builds(
    IntervalLiteral,
    st.sampled_from(["1", "30", "1.5"]),
    st.sampled_from(["SECOND", "MINUTE", "HOUR", "DAY", "MILLISECOND"]),
)


def navigation(kind: NavKind, column: Column, offset: int, semantics: Semantics | None) -> Expr:
    return Navigation(kind, column, offset, semantics)


semantics = st.sampled_from([None, Semantics.RUNNING, Semantics.FINAL])
navs = st.builds(navigation, st.sampled_from(list(NavKind)), columns, st.integers(0, 3), semantics)
physical_over_logical = st.builds(
    lambda inner, off: Navigation(NavKind.PREV, inner, off),
    st.builds(lambda c, o: Navigation(NavKind.LAST, c, o), columns, st.integers(0, 2)),
    st.integers(1, 3),
)
aggregates = st.one_of(
    st.builds(lambda v: Aggregate("count", (Star(v),)), variables),
    st.builds(
        lambda name, c, s: Aggregate(name, (c,), semantics=s),
        st.sampled_from(["sum", "avg", "min", "max"]),
        columns,
        semantics,
    ),
    st.builds(lambda c: Aggregate("count", (c,), distinct=True), columns),
)
leaves = st.one_of(
    literals,
    columns,
    navs,
    physical_over_logical,
    aggregates,
    intervals,
    st.builds(Classifier, variables, semantics),
    st.just(MatchNumber()),
)

_NEGATABLE = (IsNull, InList, Between, Like)


def unary_not(e: Expr) -> Expr:
    return UnaryOp("NOT", e) if not isinstance(e, _NEGATABLE) else e


def unary_minus(e: Expr) -> Expr:
    if (
        isinstance(e, Literal)
        and isinstance(e.value, int | float)
        and not isinstance(e.value, bool)
    ):
        return e
    return UnaryOp("-", e)


def binary(op: str, left: Expr, right: Expr) -> Expr:
    if op in ("AND", "OR"):
        return left_deep(op, left, right)
    return BinaryOp(op, left, right)


def expressions(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.builds(
            binary,
            st.sampled_from(
                ["AND", "OR", "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"]
            ),
            inner,
            inner,
        ),
        inner.map(unary_not),
        inner.map(unary_minus),
        st.builds(IsNull, inner, st.booleans()),
        st.builds(
            InList, inner, st.lists(literals, min_size=1, max_size=3).map(tuple), st.booleans()
        ),
        st.builds(Between, inner, literals, literals, st.booleans()),
        st.builds(Like, columns, strings.map(Literal), st.booleans()),
        st.builds(
            lambda name, e: Function(name, (e,)), st.sampled_from(["lower", "upper", "abs"]), inner
        ),
        st.builds(lambda a, b: Function("coalesce", (a, b)), inner, inner),
        st.builds(
            lambda c, r, d: Case((When(c, r),), d), inner, inner, st.one_of(st.none(), inner)
        ),
        st.builds(lambda o, v, r: Case((When(v, r),), None, o), inner, literals, inner),
        st.builds(Cast, inner, st.sampled_from(["DOUBLE", "BIGINT", "VARCHAR", "BOOLEAN"])),
    )


trees = st.recursive(leaves, expressions, max_leaves=10)


@given(trees)
def test_measure_round_trip(expr: Expr) -> None:
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {to_sql(expr)} AS v PATTERN (A B))"
    )
    try:
        query = parse(sql)
    except Exception as exc:  # validation may reject nonsense such as PREV(1); nothing else
        from dfs_cer.errors import QueryValidationError

        assert isinstance(exc, QueryValidationError), (sql, exc)
        return
    assert query.recognize.measures[0].expr == expr, sql
