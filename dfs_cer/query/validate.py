"""Rules of row pattern recognition a parsed query must satisfy (ISO/IEC 19075-5, as Trino).

Each rule raises :class:`~dfs_cer.errors.QueryValidationError` naming the clause, the offending
variable or expression, and the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfs_cer.errors import QueryValidationError, UnsupportedFeatureError
from dfs_cer.pattern.ir import Exclusion, labels
from dfs_cer.pattern.ir import walk as walk_pattern
from dfs_cer.query.expr import (
    AGGREGATES,
    CAST_TYPES,
    MAX_DEPTH,
    SCALAR_FUNCTIONS,
    Aggregate,
    Cast,
    Classifier,
    Column,
    Expr,
    Function,
    Literal,
    MatchNumber,
    Navigation,
    Semantics,
    Star,
    cast_target,
    children,
    depth,
    to_sql,
    walk,
)
from dfs_cer.query.model import RowsPerMatch

if TYPE_CHECKING:
    from dfs_cer.query.root import Query

#: how many arguments each aggregate takes (others: exactly one)
AGGREGATE_ARITY = {"count": (0, 1), "min_by": (2, 2), "max_by": (2, 2), "string_agg": (1, 2)}
#: aggregates the row-pattern VM evaluates inside DEFINE (running, per thread)
DEFINE_AGGREGATES = frozenset(
    {"count", "sum", "avg", "min", "max", "count_if", "bool_and", "bool_or"}
)


def _fail(
    message: str, clause: str, hint: str | None = None, code: str = "invalid"
) -> QueryValidationError:
    return QueryValidationError(message, clause=clause, hint=hint, code=code)


def validate(query: Query) -> None:
    """Check ``query`` against the rules; raise on the first violation."""
    mr = query.recognize
    variables = labels(mr.pattern)
    var_set = set(variables)
    known = ", ".join(variables) or "none"

    seen: set[str] = set()
    for d in mr.definitions:
        if d.variable in seen:
            raise _fail(
                f"pattern variable {d.variable} is defined twice in DEFINE",
                "DEFINE",
                "remove one of the definitions",
                "duplicate-variable",
            )
        seen.add(d.variable)
        if d.variable not in var_set:
            raise _fail(
                f"DEFINE defines {d.variable}, which does not appear in PATTERN",
                "DEFINE",
                f"pattern variables: {known}",
                "undefined-variable",
            )

    subsets: dict[str, tuple[str, ...]] = {}
    for s in mr.subsets:
        if s.name in subsets:
            raise _fail(
                f"SUBSET {s.name} is defined twice",
                "SUBSET",
                "remove one definition",
                "duplicate-subset",
            )
        if s.name in var_set:
            raise _fail(
                f"SUBSET name {s.name} is also a pattern variable",
                "SUBSET",
                "rename the subset",
                "duplicate-subset",
            )
        for v in s.variables:
            if v not in var_set:
                raise _fail(
                    f"SUBSET {s.name} names {v}, which does not appear in PATTERN",
                    "SUBSET",
                    f"pattern variables: {known}",
                    "undefined-variable",
                )
        subsets[s.name] = s.variables
    names = var_set | set(subsets)

    _pattern_rules(query)

    skip = mr.after_match_skip
    if skip.variable is not None and skip.variable not in names:
        raise _fail(
            f"AFTER MATCH SKIP {skip.to.value} {skip.variable}: {skip.variable} is not a "
            "pattern variable or SUBSET",
            "AFTER MATCH SKIP",
            f"pattern variables: {known}",
            "undefined-variable",
        )

    for clause, e in [(f"DEFINE {d.variable}", d.condition) for d in mr.definitions] + [
        (f"MEASURES {m.name}", m.expr) for m in mr.measures
    ]:
        if depth(e) > MAX_DEPTH:  # before anything walks it recursively
            raise _fail(
                f"the expression is nested {depth(e)} levels deep, more than {MAX_DEPTH}",
                clause,
                "simplify the expression",
                "too-deep",
            )
    context = _Context(query, names, known)
    for d in mr.definitions:
        context.check(d.condition, f"DEFINE {d.variable}", in_define=True)
    for m in mr.measures:
        context.check(m.expr, f"MEASURES {m.name}", in_define=False)


def _pattern_rules(query: Query) -> None:
    mr = query.recognize
    if mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED and any(
        isinstance(p, Exclusion) for p in walk_pattern(mr.pattern)
    ):
        # ISO/IEC 19075-5: excluded rows belong to a match yet are not output, so they would be
        # neither matched nor unmatched rows
        raise _fail(
            "pattern exclusion {- ... -} cannot be used with ALL ROWS PER MATCH WITH "
            "UNMATCHED ROWS: the rows it excludes are part of a match, so they are neither "
            "output as matched nor as unmatched rows",
            "PATTERN",
            "remove the exclusion, or use ALL ROWS PER MATCH without WITH UNMATCHED ROWS",
            "exclusion-with-unmatched-rows",
        )


class _Context:
    def __init__(self, query: Query, names: set[str], known: str) -> None:
        self.query = query
        self.names = names
        self.known = known

    def check(self, e: Expr, clause: str, in_define: bool) -> None:
        for n in walk(e):
            variable = (
                getattr(n, "variable", None) if isinstance(n, Column | Star | Classifier) else None
            )
            if variable is not None and variable not in self.names:
                # ISO/IEC 19075-5 and Trino: inside MATCH_RECOGNIZE the input table's name is not
                # in scope, only pattern variables qualify columns (DuckDB accepts t.x;
                # dfs-cer does not)
                hint = (
                    f"pattern variables and subsets: {self.known}; inside MATCH_RECOGNIZE, "
                    "qualify columns with pattern variables, not the table or its alias "
                    "(as the standard and Trino; DuckDB accepts t.x): write x for the "
                    "current row or A.x for a variable's row"
                )
                raise _fail(
                    f"{to_sql(n)} refers to {variable}, which is not a pattern variable or SUBSET",
                    clause,
                    hint,
                    "undefined-variable",
                )
            if isinstance(n, Star) and not _inside_count(e, n):
                raise _fail(
                    f"{to_sql(n)} is only allowed as the argument of count", clause, code="bad-star"
                )
            if in_define and getattr(n, "semantics", None) is Semantics.FINAL:
                raise _fail(
                    f"FINAL is not allowed in DEFINE ({to_sql(n)})",
                    clause,
                    "DEFINE always sees RUNNING values; use FINAL in MEASURES",
                    "final-in-define",
                )
            if isinstance(n, Navigation):
                self._navigation(n, clause)
            if isinstance(n, Aggregate):
                self._aggregate(n, clause, in_define)
            if isinstance(n, Function):
                self._function(n, clause)
            if isinstance(n, Cast) and cast_target(n.to) is None:
                raise _fail(
                    f"CAST to {n.to} is not supported",
                    clause,
                    f"supported: {', '.join(sorted(CAST_TYPES))} (VARCHAR(n), DECIMAL(p, s))",
                    "unknown-type",
                )

    def _function(self, f: Function, clause: str) -> None:
        spec = SCALAR_FUNCTIONS.get(f.name)
        if spec is None:
            raise _fail(
                f"function {f.name}() is not supported",
                clause,
                f"supported: {', '.join(sorted(SCALAR_FUNCTIONS))}",
                "unknown-function",
            )
        low, high, _ = spec
        if len(f.args) < low or (high >= 0 and len(f.args) > high):
            want = f"{low}" if low == high else f"{low} or more" if high < 0 else f"{low} to {high}"
            raise _fail(
                f"{f.name}() takes {want} arguments, got {len(f.args)}: {to_sql(f)}",
                clause,
                code="bad-arguments",
            )

    def _navigation(self, nav: Navigation, clause: str) -> None:
        if nav.kind.physical and nav.semantics is not None:
            raise _fail(
                f"{nav.semantics.value} cannot be applied to {nav.kind.value} "
                f"({to_sql(nav)}): RUNNING and FINAL apply to FIRST, LAST, CLASSIFIER and "
                "aggregates, not to physical navigation",
                clause,
                f"apply it to the nested logical navigation, e.g. {nav.kind.value}("
                f"{nav.semantics.value} LAST(A.x), 1)",
                "bad-semantics",
            )
        inner_navs = [n for n in walk(nav.operand) if isinstance(n, Navigation)]
        for inner in inner_navs:
            if not nav.kind.physical or inner.kind.physical:
                raise _fail(
                    f"cannot nest {inner.kind.value} inside {nav.kind.value} in {to_sql(nav)}",
                    clause,
                    "only FIRST/LAST may be nested inside PREV/NEXT, e.g. PREV(LAST(A.x, 1), 2)",
                    "bad-navigation",
                )
            if inner is not nav.operand:
                raise _fail(
                    f"in {to_sql(nav)}, the nested {inner.kind.value} must be the whole argument",
                    clause,
                    "write PREV(LAST(A.x, 1), 2)",
                    "bad-navigation",
                )
        for n in walk(nav.operand):
            if isinstance(n, Aggregate):
                raise _fail(
                    f"aggregates cannot appear inside {nav.kind.value}: {to_sql(nav)}",
                    clause,
                    code="bad-navigation",
                )
            if isinstance(n, MatchNumber):
                raise _fail(
                    f"MATCH_NUMBER() cannot appear inside {nav.kind.value}",
                    clause,
                    code="bad-navigation",
                )
        refs = [n for n in walk(nav.operand) if isinstance(n, Column | Classifier)]
        if not refs:
            raise _fail(
                f"{to_sql(nav)} navigates nothing: "
                "its argument has no column reference or CLASSIFIER()",
                clause,
                "write e.g. PREV(A.price)",
                "bad-navigation",
            )
        targets = {n.variable for n in refs if isinstance(n, Column)}
        if len(targets) > 1:
            raise _fail(
                f"column references inside {to_sql(nav)} mix pattern variables "
                f"{', '.join(sorted(str(t) for t in targets))}",
                clause,
                "all columns in one navigation must use the same variable (or none)",
                "bad-navigation",
            )

    def _aggregate(self, agg: Aggregate, clause: str, in_define: bool) -> None:
        if agg.name not in AGGREGATES:
            raise _fail(
                f"aggregate {agg.name}() is not supported",
                clause,
                f"supported: {', '.join(sorted(AGGREGATES))}",
                "unknown-function",
            )
        low, high = AGGREGATE_ARITY.get(agg.name, (1, 1))
        if not low <= len(agg.args) <= high:
            want = f"{low}" if low == high else f"{low} to {high}"
            raise _fail(
                f"{agg.name}() takes {want} arguments, got {len(agg.args)}: {to_sql(agg)}",
                clause,
                code="bad-aggregate",
            )
        if (
            agg.name == "string_agg"
            and len(agg.args) == 2
            and not (isinstance(agg.args[1], Literal) and isinstance(agg.args[1].value, str))
        ):
            raise _fail(
                f"the separator of {to_sql(agg)} must be a string literal",
                clause,
                "write e.g. string_agg(A.name, ', ')",
                "bad-aggregate",
            )
        parts = [*agg.args, *([agg.filter] if agg.filter is not None else [])]
        for arg in parts:
            for n in walk(arg):
                if isinstance(n, Aggregate):
                    raise _fail(
                        f"aggregates cannot be nested: {to_sql(agg)}", clause, code="bad-aggregate"
                    )
                if isinstance(n, Navigation):
                    raise _fail(
                        f"navigation cannot appear inside an aggregate: {to_sql(agg)}",
                        clause,
                        code="bad-aggregate",
                    )
                if in_define and isinstance(n, Classifier):
                    raise UnsupportedFeatureError(
                        f"{to_sql(n)} inside an aggregate in DEFINE ({to_sql(agg)})",
                        clause=clause,
                        hint="aggregate columns of the rows in DEFINE; CLASSIFIER() inside "
                        "aggregates works in MEASURES",
                        code="unsupported",
                    )
        if in_define and (agg.distinct or agg.name not in DEFINE_AGGREGATES):
            what = (
                f"DISTINCT in {to_sql(agg)}"
                if agg.distinct
                else f"aggregate {agg.name}() in DEFINE"
            )
            raise UnsupportedFeatureError(
                what,
                clause=clause,
                code="unsupported",
                hint=f"DEFINE supports {', '.join(sorted(DEFINE_AGGREGATES))} without DISTINCT; "
                "the others work in MEASURES",
            )
        # the rows an aggregate runs over are those of the one variable its arguments name
        # (unqualified columns, * and CLASSIFIER(): the universal row pattern variable, every row)
        targets = {
            n.variable
            for a in agg.args
            for n in walk(a)
            if isinstance(n, Column | Star | Classifier)
        }
        if len(targets) > 1:
            raise _fail(
                f"arguments of {to_sql(agg)} mix pattern variables {_row_sets(targets)}",
                clause,
                "all arguments of one aggregate must apply to rows of the same pattern variable "
                "(ISO/IEC 19075-5)",
                "bad-aggregate",
            )
        if agg.filter is not None:
            # FILTER is evaluated on each row of that set: X.col reads the row where it is mapped
            # to X (NULL elsewhere), an unqualified column reads the row itself
            read = {
                n.variable for n in walk(agg.filter) if isinstance(n, Column | Star | Classifier)
            } - {None}
            rows = targets - {None}
            if len(read) > 1 or (read and rows and read != rows):
                raise _fail(
                    f"FILTER of {to_sql(agg)} reads pattern variables {_row_sets(read | rows)}",
                    clause,
                    "the FILTER condition may read one pattern variable, the one the arguments "
                    "aggregate (or any when the arguments are unqualified)",
                    "bad-aggregate",
                )


def _row_sets(names: set[str | None]) -> str:
    named = ", ".join(sorted(n for n in names if n is not None))
    return named + (
        " and the universal one (unqualified: every row of the match)" if None in names else ""
    )


def _inside_count(root: Expr, star: Star) -> bool:
    def visit(e: Expr, parent: Expr | None) -> bool | None:
        if e is star:
            return isinstance(parent, Aggregate) and parent.name == "count"
        for c in children(e):
            found = visit(c, e)
            if found is not None:
                return found
        return None

    return bool(visit(root, None))


def require_order_by(query: Query, where: str) -> None:
    """Refuse a query without ORDER BY where rows have no input order to match in (storage
    nodes, Spark): the time column must be named."""
    if not query.recognize.order_by:
        raise QueryValidationError(
            "MATCH_RECOGNIZE without ORDER BY matches rows in input "
            f"order, which {where} do not have",
            clause="MATCH_RECOGNIZE",
            hint="add ORDER BY <time column>, e.g. ORDER BY ts (or run it with the local "
            "engine over a table in the order you want)",
            code="no-order-by",
        )
