"""Query analysis: what each pattern variable needs, and what a pull strategy may prune.

For every variable: its *independent* condition (row-local, no navigation: pushed to storage
nodes as a pyarrow dataset filter), its *equality* conditions with other variables
(``M.district = B.district``: the window-wise join filter), and the *residual* conditions
(checked only by the matcher). For the query: the window in the ORDER BY column's units, whether
time-interval pruning can be exact, whether rows between variables may be dropped, and how far
physical navigation reaches beyond a match. See "When pruning is exact" in DESIGN.md.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from dfs_cer.config import QueryConfig
from dfs_cer.errors import QueryValidationError
from dfs_cer.pattern.ir import (
    Alternation,
    Exclusion,
    Label,
    Quantified,
    RowPattern,
    labels,
    to_text,
)
from dfs_cer.pattern.properties import (
    first_labels,
    has_anchor,
    last_labels,
    mandatory_labels,
    max_rows,
    nullable,
    top_level_items,
    top_level_positions,
)
from dfs_cer.query.bind import bind_names, resolve_column
from dfs_cer.query.expr import (
    Aggregate,
    BinaryOp,
    Classifier,
    Column,
    Expr,
    Literal,
    MatchNumber,
    Navigation,
    Star,
    and_all,
    children,
    conjuncts,
    walk,
)
from dfs_cer.query.model import RowsPerMatch
from dfs_cer.query.root import Query
from dfs_cer.serde import node

if TYPE_CHECKING:
    import pyarrow as pa


class Role(enum.Enum):
    """Where a variable sits in every match; selects the Eq. 1 interval of the paper."""

    HEAD = "head"  # labels the first row of every match: [t, t + w]
    TAIL = "tail"  # labels the last row of every match: [t - w, t]
    MIDDLE = "middle"  # in every match, neither always first nor always last: [t - w, t + w]
    OPTIONAL = "optional"  # not in every match: cannot shrink the interval set
    ANY_ROW = "any-row"  # no condition: matches any row, ignored by the filters


@node("equality")
@dataclass(frozen=True, slots=True)
class Equality:
    """``left_variable.left_column = right_variable.right_column``,
    written in ``defined_in``'s DEFINE."""

    left_variable: str
    left_column: str
    right_variable: str
    right_column: str
    defined_in: str

    def sql(self) -> str:
        return (
            f"{self.left_variable}.{self.left_column} = {self.right_variable}.{self.right_column}"
        )

    def column_of(self, variable: str) -> str:
        return self.left_column if variable == self.left_variable else self.right_column

    def other(self, variable: str) -> str:
        return self.right_variable if variable == self.left_variable else self.left_variable


@node("variable_info")
@dataclass(frozen=True, slots=True)
class VariableInfo:
    name: str
    role: Role
    independent: Expr | None
    equalities: tuple[Equality, ...]
    residuals: tuple[Expr, ...]
    positions: tuple[int, ...]
    defined: bool
    #: the most rows this variable labels in one match (None: unbounded)
    max_rows: int | None = 1
    #: conjuncts that read only the current row, some through PREV/NEXT (``price < PREV(price)``):
    #: storage nodes holding whole partitions (or time windows) can check them alone
    navigating: tuple[Expr, ...] = ()

    @property
    def any_row(self) -> bool:
        return self.role is Role.ANY_ROW

    @property
    def filterable(self) -> bool:
        """Can this variable's events shrink the time interval set (Eq. 1)?"""
        return self.role in (Role.HEAD, Role.TAIL, Role.MIDDLE)


@node("analysis")
@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the planner, the storage nodes and EXPLAIN need to know about a query."""

    query: Query
    variables: tuple[VariableInfo, ...]
    equalities: tuple[Equality, ...]
    order_column: str
    #: window in the ORDER BY column's units (None: no WITHIN, or not bound to a schema yet)
    window_units: int | None
    #: the unit the window was converted to ("s", "ms", "us", "ns", "days", "raw")
    window_unit: str | None
    interval_pruning: bool
    pruning_reason: str | None
    skippable: bool
    skip_reason: str | None
    prev_reach: int
    next_reach: int
    nullable: bool
    bound: bool
    #: columns identifying an event (empty: the whole row) and whether duplicates are dropped
    event_key: tuple[str, ...] = ()
    dedup: bool = True
    #: (variable, rows before, rows after) PREV/NEXT read around each row the variable labels
    variable_reach: tuple[tuple[str, int, int], ...] = ()
    #: the storage nodes check each variable's ``navigating`` conjuncts (they said so at open)
    navigation_on_nodes: bool = False
    #: a calendar window (``WITHIN INTERVAL '3' MONTH``): its months. ``window_units`` is then
    #: the longest span it can have (31 days a month), which every time range uses (a superset);
    #: the matchers end each match at its first row's time plus these months exactly
    calendar_months: int | None = None

    def reach_of(self, name: str) -> tuple[int, int]:
        for v, before, after in self.variable_reach:
            if v == name:
                return before, after
        return 0, 0

    def variable(self, name: str) -> VariableInfo:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    def constrains(self, equality: Equality, variable: str) -> bool:
        """Does ``equality`` hold for every row ``variable`` labels in a match? Always for the
        variable whose DEFINE states it. For the other side only when that variable labels a
        single row (or under ALL MATCHES, where a bare reference to a Kleene variable holds for
        each of its rows): in ``A N*? B N*? A`` with ``B.k = A.k`` in B's DEFINE the second A
        is unconstrained (running semantics read the last A before B), so join filters must not
        drop A rows by it."""
        if variable == equality.defined_in:
            return True
        if variable not in (equality.left_variable, equality.right_variable):
            return False
        if not self.variable(equality.defined_in).filterable:  # a match may not contain the definer
            return False
        return self.query.recognize.all_matches or self.variable(variable).max_rows == 1

    def precedes(self, a: str, b: str) -> bool | None:
        """True if ``a``'s rows always come before ``b``'s,
        False if always after, None if unknown."""
        pa_, pb = self.variable(a).positions, self.variable(b).positions
        if not pa_ or not pb:
            return None
        if max(pa_) < min(pb):
            return True
        if min(pa_) > max(pb):
            return False
        return None

    @property
    def filter_variables(self) -> tuple[VariableInfo, ...]:
        return tuple(v for v in self.variables if v.filterable)


_UNITS_PER_SECOND = {
    "s": Decimal(1),
    "ms": Decimal(1000),
    "us": Decimal(10**6),
    "ns": Decimal(10**9),
}


def _is_true(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is True


def _row_local(e: Expr, variable: str) -> bool:
    for n in walk(e):
        if isinstance(n, Navigation | Aggregate | Classifier | MatchNumber | Star):
            return False
        if isinstance(n, Column) and n.variable not in (None, variable):
            return False
    return True


def navigates_alone(e: Expr, variable: str) -> bool:
    """Does ``e`` read only the row being labelled ``variable``, some of it through PREV/NEXT
    (``price < PREV(price, 2)``, ``NEXT(B.x) > B.x``)? Then the storage node holding the rows
    around it can check it; the engines evaluate the same conjuncts as one mask."""
    physical = False

    def ok(x: Expr) -> bool:
        nonlocal physical
        if isinstance(x, Aggregate | Classifier | MatchNumber | Star):
            return False
        if isinstance(x, Column):
            return x.variable in (None, variable)
        if isinstance(x, Navigation):
            if x.kind.physical:
                physical = True
            elif x.kind.value == "FIRST" or x.offset != 0:
                return False
        return all(ok(c) for c in children(x))

    return ok(e) and physical


def _equality(e: Expr, variable: str, pattern_vars: set[str]) -> Equality | None:
    if not (
        isinstance(e, BinaryOp)
        and e.op == "="
        and isinstance(e.left, Column)
        and isinstance(e.right, Column)
    ):
        return None
    lv = e.left.variable or variable
    rv = e.right.variable or variable
    if lv == rv or lv not in pattern_vars or rv not in pattern_vars:
        return None
    if rv == variable:  # orient as (this variable, other variable)
        return Equality(rv, e.right.name, lv, e.left.name, variable)
    return Equality(lv, e.left.name, rv, e.right.name, variable)


def _classify(
    query: Query,
) -> tuple[dict[str, tuple[Expr | None, list[Equality], list[Expr]]], set[str]]:
    mr = query.recognize
    pattern_vars = set(labels(mr.pattern))
    out: dict[str, tuple[Expr | None, list[Equality], list[Expr]]] = {}
    any_row: set[str] = set()
    for name in labels(mr.pattern):
        d = mr.definition(name)
        parts = [] if d is None else [c for c in conjuncts(d.condition) if not _is_true(c)]
        if not parts:
            any_row.add(name)
            out[name] = (None, [], [])
            continue
        independent: list[Expr] = []
        equalities: list[Equality] = []
        residuals: list[Expr] = []
        for c in parts:
            if _row_local(c, name):
                independent.append(c)
                continue
            eq = _equality(c, name, pattern_vars)
            if eq is not None:
                equalities.append(eq)
            else:
                residuals.append(c)
        out[name] = (and_all(independent), equalities, residuals)
    return out, any_row


def _all_expressions(query: Query) -> list[Expr]:
    mr = query.recognize
    return [d.condition for d in mr.definitions] + [m.expr for m in mr.measures]


def _variable_reach(query: Query) -> dict[str, tuple[int, int]]:
    """Rows PREV/NEXT read before / after each row a variable labels: a chain of physical
    navigations anchored at ``B.x`` (or ``LAST(B.x)``, ``CLASSIFIER(B)``) reads around B's rows;
    an unqualified column in B's DEFINE is B's current row; anything else (MEASURES' unqualified
    columns, FIRST over all rows) may be any variable's row. Empty under ALL MATCHES (see
    :func:`_reach`)."""
    mr = query.recognize
    if mr.all_matches:
        return {}
    names = list(dict.fromkeys(labels(mr.pattern)))
    subsets = {s.name: set(s.variables) for s in mr.subsets}
    out = {n: (0, 0) for n in names}

    def chain(e: Expr, back: int, ahead: int, logical: bool, defining: str | None) -> None:
        if isinstance(e, Navigation):
            if e.kind.physical:
                back, ahead = (
                    (back + e.offset, ahead) if e.kind.value == "PREV" else (back, ahead + e.offset)
                )
            elif e.kind.value == "FIRST" or e.offset:
                logical = True
        if (back or ahead) and isinstance(e, Column | Classifier):
            if e.variable is not None:
                targets = subsets.get(e.variable, {e.variable})
            elif defining is not None and not logical:
                targets = {defining}
            else:
                targets = set(names)
            for t in targets & set(names):
                out[t] = (max(out[t][0], back), max(out[t][1], ahead))
        for c in children(e):
            chain(c, back, ahead, logical, defining)

    for d in mr.definitions:
        chain(d.condition, 0, 0, False, d.variable)
    for m in mr.measures:
        chain(m.expr, 0, 0, False, None)
    return out


def _reach(query: Query) -> tuple[int, int]:
    """How many rows PREV/NEXT can read before the first / after the last row of a match: the
    largest sum of PREV (NEXT) offsets along a chain of nested physical navigations (logical
    FIRST/LAST pick a matched row). Under ALL MATCHES, NEXT/PREV read the previous/next
    *selected* event, which is always pulled: nothing is reached outside."""
    if query.recognize.all_matches:
        return 0, 0

    def chain(e: Expr, back: int, ahead: int) -> tuple[int, int]:
        if isinstance(e, Navigation) and e.kind.physical:
            if e.kind.value == "PREV":
                back += e.offset
            else:
                ahead += e.offset
        best = (back, ahead)
        for c in children(e):
            b, a = chain(c, back, ahead)
            best = (max(best[0], b), max(best[1], a))
        return best

    prev = nxt = 0
    for e in _all_expressions(query):
        b, a = chain(e, 0, 0)
        prev, nxt = max(prev, b), max(nxt, a)
    return prev, nxt


def _skip_item(item: RowPattern, any_row: set[str]) -> str | None:
    inner = item.pattern if isinstance(item, Exclusion) else item
    if (
        isinstance(inner, Quantified)
        and inner.min == 0
        and inner.max is None
        and isinstance(inner.pattern, Label)
        and inner.pattern.name in any_row
    ):
        return inner.pattern.name
    return None


def _single_row(item: RowPattern) -> bool:
    if isinstance(item, Label):
        return True
    return isinstance(item, Alternation) and all(isinstance(i, Label) for i in item.items)


def _skippable(query: Query, any_row: set[str]) -> tuple[bool, str | None]:
    mr = query.recognize
    exprs = _all_expressions(query)
    # PREV/NEXT may read rows between variables: the pull adds them as halo rows (only read)
    for e in exprs:
        for n in walk(e):
            if isinstance(n, Aggregate) and any(
                isinstance(x, Column | Star) and x.variable is None for a in n.args for x in walk(a)
            ):
                return (
                    False,
                    "an aggregate over all rows of the match observes rows between variables",
                )
            if (
                isinstance(n, Navigation)
                and not n.kind.physical
                and n.offset
                and any(
                    isinstance(x, Column | Classifier) and x.variable is None
                    for x in walk(n.operand)
                )
            ):
                return False, (
                    f"{n.kind.value}(..., {n.offset}) over all rows of the match reads a "
                    "row between variables"
                )
    items = top_level_items(mr.pattern)
    skips = [_skip_item(i, any_row) for i in items]
    if mr.all_matches:
        # the CER engine drops only N* skip items; N, N+ or N{2} take rows of their own (every
        # combination of them), so the rows between variables are part of the matches
        for item, skip in zip(items, skips, strict=True):
            taken = set(labels(item)) & any_row
            if skip is None and taken:
                return False, (
                    f"under ALL MATCHES {', '.join(sorted(taken))} in {to_text(item)} takes "
                    "rows of its own, so every row between variables matters"
                )
        return True, None
    if skips[0] is not None or skips[-1] is not None:
        return False, "a leading or trailing any-row variable absorbs rows outside the variables"
    referenced: set[str] = set()
    for e in exprs:
        for n in walk(e):
            if isinstance(n, Column | Star | Classifier) and n.variable is not None:
                referenced.add(n.variable)
    for s in mr.subsets:
        if s.name in referenced:
            referenced.update(s.variables)
    if mr.after_match_skip.variable is not None:
        referenced.add(mr.after_match_skip.variable)
    skip_names = {s for s in skips if s is not None}
    real_names: set[str] = set()
    previous_real = False
    for item, skip in zip(items, skips, strict=True):
        if skip is not None:
            if mr.rows_per_match.all_rows and not isinstance(item, Exclusion):
                return False, (
                    f"ALL ROWS PER MATCH outputs the rows {skip} absorbs (exclude them with "
                    f"{{- {skip}* -}})"
                )
            previous_real = False
            continue
        names = set(labels(item))
        if not _single_row(item) or names & any_row:
            return (
                False,
                "a pattern element matches consecutive rows, so every row in the intervals matters",
            )
        if previous_real:
            return False, (
                f"{' and '.join(sorted(names))} follow(s) "
                "another variable without a skip between them"
            )
        previous_real = True
        real_names |= names
    if skip_names & real_names:
        return False, "a skip variable also labels single rows"
    observed = skip_names & referenced
    if observed:
        return (
            False,
            f"{', '.join(sorted(observed))} is referenced, so the rows it absorbs are observed",
        )
    if not skip_names:
        return False, "no {- N* -} or N*? between variables: the pattern is contiguous"
    return True, None


def _pruning(
    query: Query,
    roles: dict[str, Role],
    classified: dict[str, tuple[Expr | None, list[Equality], list[Expr]]],
    navigating: dict[str, tuple[Expr, ...]],
) -> tuple[bool, str | None]:
    mr = query.recognize
    if mr.window is None:
        return False, "no WITHIN window: a match can span any time range"
    if has_anchor(mr.pattern):
        return False, "anchors ^ $ depend on every row of the partition"
    if mr.rows_per_match is RowsPerMatch.ALL_ROWS_WITH_UNMATCHED:
        return False, "WITH UNMATCHED ROWS outputs every row"
    if nullable(mr.pattern):
        return False, "the pattern can match empty, so every row can produce a match"
    if any(isinstance(n, MatchNumber) for d in mr.definitions for n in walk(d.condition)):
        return False, "MATCH_NUMBER() in DEFINE depends on every earlier match of the partition"
    if not any(r in (Role.HEAD, Role.TAIL, Role.MIDDLE) for r in roles.values()):
        return False, "no variable with a condition appears in every match"
    if not any(
        roles[name] in (Role.HEAD, Role.TAIL, Role.MIDDLE)
        and (classified[name][0] is not None or classified[name][1] or navigating.get(name))
        for name in roles
    ):
        return False, (
            "no variable in every match has a condition the storage nodes can check alone "
            "(conditions with PREV/NEXT or other variables' values only): the intervals "
            "would hold every row; storage nodes check PREV/NEXT conditions themselves on "
            "shards partitioned by type on a PARTITION BY column, or by time"
        )
    return True, None


def _bind_window(
    query: Query, schema: pa.Schema | None, config: QueryConfig
) -> tuple[int | None, str | None]:
    import pyarrow as pa

    mr = query.recognize
    window = mr.window
    if window is None:
        return None, None
    if window.unit is None:
        # a bare number is in the ORDER BY column's own units; integer keys make floor exact
        return int(window.amount.to_integral_value(ROUND_FLOOR)), "raw"
    if schema is None:
        return None, None
    if mr.order_by[0].descending:
        raise QueryValidationError(
            "WITHIN needs an ascending ORDER BY column",
            clause="WITHIN",
            hint="remove DESC from the first ORDER BY column",
            code="bad-window",
        )
    column = resolve_column(mr.order_by[0].column, schema, "ORDER BY")
    dtype = schema.field(column).type
    seconds = window.seconds()
    assert seconds is not None
    if pa.types.is_timestamp(dtype):
        unit = dtype.unit
    elif pa.types.is_date64(dtype):  # milliseconds since the epoch (at midnights)
        unit = "ms"
    elif pa.types.is_date(dtype):
        return int((seconds / Decimal(86400)).to_integral_value(ROUND_FLOOR)), "days"
    elif pa.types.is_integer(dtype):
        unit = config.integer_time_unit
    else:
        raise QueryValidationError(
            f"WITHIN {window.value} {window.unit.value} needs a temporal ORDER BY column, "
            f"but {column} is {dtype}",
            clause="WITHIN",
            hint="order by a timestamp or an integer epoch column, or give the window as a bare "
            "number in the column's units (WITHIN 1800)",
            code="non-temporal-order",
        )
    amount = seconds * _UNITS_PER_SECOND[unit]
    # timestamps are integers: span <= 0.5 s in whole seconds is span <= 0
    return int(amount.to_integral_value(ROUND_FLOOR)), unit


def _event_key(key: tuple[str, ...], schema: pa.Schema | None) -> tuple[str, ...]:
    if schema is None:
        return tuple(key)
    from dfs_cer.errors import ConfigError

    out = []
    for name in key:
        try:  # the one resolver (exact, else the only case-insensitive match)
            out.append(resolve_column(name, schema, "event key"))
        except QueryValidationError as exc:
            raise ConfigError(
                f"event key column {name!r}: {exc} (set query.event_key or --event-key)"
            ) from None
    return tuple(out)


def analyze(
    query: Query,
    schema: pa.Schema | None = None,
    config: QueryConfig | None = None,
    *,
    navigation_on_nodes: bool = False,
) -> Analysis:
    """Analyse a parsed query; with ``schema``, also check columns and convert the window.

    Args:
        query: the parsed query.
        schema: the events' Arrow schema; when given, unknown columns and a WITHIN over a
            non-temporal ORDER BY column are errors, and ``window_units`` is filled in.
        config: front-end settings (the unit of integer time columns).
        navigation_on_nodes: the storage nodes check conditions with PREV/NEXT that read only
            the labelled row's neighbours (they hold whole partitions or time windows), so such
            a condition makes a variable's candidates selective.
    """
    config = config or QueryConfig()
    if schema is not None:  # column names spelled as in the data, once, for every later stage
        query = bind_names(query, schema)
    mr = query.recognize
    classified, any_row = _classify(query)
    mandatory = mandatory_labels(mr.pattern)
    first, last = first_labels(mr.pattern), last_labels(mr.pattern)
    positions = top_level_positions(mr.pattern)
    rows_per_match = max_rows(mr.pattern)
    navigating = (
        {}
        if mr.all_matches or not navigation_on_nodes
        else {
            name: tuple(c for c in classified[name][2] if navigates_alone(c, name))
            for name in classified
        }
    )
    roles: dict[str, Role] = {}
    for name in labels(mr.pattern):
        if name in any_row:
            roles[name] = Role.ANY_ROW
        elif name not in mandatory:
            roles[name] = Role.OPTIONAL
        elif first == {name}:
            roles[name] = Role.HEAD
        elif last == {name}:
            roles[name] = Role.TAIL
        else:
            roles[name] = Role.MIDDLE
    variables = tuple(
        VariableInfo(
            name=name,
            role=roles[name],
            independent=classified[name][0],
            equalities=tuple(classified[name][1]),
            residuals=tuple(classified[name][2]),
            positions=positions.get(name, ()),
            defined=mr.definition(name) is not None,
            max_rows=rows_per_match.get(name, 1),
            navigating=navigating.get(name, ()),
        )
        for name in labels(mr.pattern)
    )
    window_units, window_unit = _bind_window(query, schema, config)
    pruning, pruning_reason = _pruning(query, roles, classified, navigating)
    skippable, skip_reason = _skippable(query, any_row)
    prev_reach, next_reach = _reach(query)
    return Analysis(
        query=query,
        variables=variables,
        equalities=tuple(eq for v in variables for eq in v.equalities),
        order_column=query.order_column,
        window_units=window_units,
        calendar_months=query.recognize.window.months
        if query.recognize.window is not None and window_units is not None
        else None,
        window_unit=window_unit,
        interval_pruning=pruning,
        pruning_reason=pruning_reason,
        skippable=skippable,
        skip_reason=skip_reason,
        prev_reach=prev_reach,
        next_reach=next_reach,
        nullable=nullable(mr.pattern),
        bound=schema is not None,
        event_key=_event_key(config.event_key, schema),
        dedup=config.dedup,
        variable_reach=tuple((n, b, a) for n, (b, a) in _variable_reach(query).items() if b or a),
        navigation_on_nodes=navigation_on_nodes and not mr.all_matches,
    )
