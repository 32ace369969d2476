"""What the CER engine evaluates, decided from the query alone (never from the data).

A query the CER engine cannot evaluate is refused before any row is read or any round trip is
made, whether or not some variable has candidates: the same query gets the same outcome from
every strategy and from the local engine. :func:`check_cer` holds every such rule; the engine's
parts rely on it (they meet only the forms it lets through).

Under ``ALL MATCHES`` (a CER selection) the events between a match's events are skipped, so
``PREV``/``NEXT`` have no "row before" to read: inside a Kleene variable's own condition they
read the previous / next *selected* event of its set (``B AS B.x > PREV(B.x)``: the set
increases); a positive single-event variable's condition may read them of the one Kleene
variable it refers to (for every pair of consecutive selected events). Anything else (``PREV``
of a single-event variable, offsets other than 1, ``FIRST``/``LAST`` with an offset) has no
meaning there and is refused naming the rule and the fix (``../shared/spec/
matching-semantics-notes.md``; SQL's physical ``PREV`` is the row-pattern engine's, without
``ALL MATCHES``).
"""

from __future__ import annotations

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.match.cer.conditions import variables_of
from dfs_cer.match.cer.pattern import Item, branches
from dfs_cer.query.expr import (
    Aggregate,
    Classifier,
    Column,
    Expr,
    MatchNumber,
    Navigation,
    NavKind,
    conjuncts,
    to_sql,
    walk,
)
from dfs_cer.query.model import MatchRecognize
from dfs_cer.query.root import Query

#: navigations the engine reads of a Kleene set (first, last, neighbouring selected events)
SET_NAVIGATIONS = frozenset({(NavKind.FIRST, 0), (NavKind.LAST, 0)})
NEIGHBOURS = frozenset({(NavKind.PREV, 1), (NavKind.NEXT, 1)})
#: the fix for a physical navigation the CER semantics does not define
PHYSICAL_FIX = (
    "under ALL MATCHES (a CER selection) PREV/NEXT read the neighbouring selected event of a "
    "Kleene variable (B+) in its own DEFINE (B AS B.x > PREV(B.x)); compare with another "
    "variable instead (B.x > A.x), or leave out ALL MATCHES (and selection=) for SQL's PREV/NEXT, "
    "the rows next to the row in the partition"
)


def check_cer(
    mr: MatchRecognize,
    any_row: set[str],
    selection: str = "skip_till_any_match",
    kleene: str = "all",
) -> None:
    """Refuse (:class:`~dfs_cer.errors.UnsupportedFeatureError`, naming the clause, the rule and
    the fix) a clause the CER engine cannot evaluate under ``selection``/``kleene``; ``any_row``:
    the variables without a condition (skipped). Depends on the query only."""
    expanded, _ = branches(mr, any_row)  # the pattern's shapes (sequences, Kleene+, ...)
    sequences = [b.items for b in expanded]
    kleene_vars = {i.name for items in sequences for i in items if i.kleene}
    negated = {i.name for items in sequences for i in items if i.negated}
    if selection == "strict_contiguity":
        raise UnsupportedFeatureError(
            "strict_contiguity is evaluated by the row-pattern engine",
            hint="omit selection= and ALL MATCHES: SQL PATTERN (A B C) is strictly contiguous",
            code="unsupported",
        )
    if selection == "skip_till_next_match":
        _next_match_rules(sequences, kleene)
    if mr.window is None:
        _negation_windows(sequences)
    for d in mr.definitions:
        for p in conjuncts(d.condition):
            _condition(p, d.variable, kleene_vars, negated)
    for m in mr.measures:
        _measure(m.expr)


def _next_match_rules(sequences: list[tuple[Item, ...]], kleene: str) -> None:
    for items in sequences:
        if items and items[0].kleene:
            raise UnsupportedFeatureError(
                "skip_till_next_match with a Kleene first variable",
                clause="PATTERN",
                hint="use skip_till_any_match with kleene='maximal'",
                code="unsupported",
            )
        if kleene == "all" and sum(i.kleene for i in items) > 1:
            raise UnsupportedFeatureError(
                "skip_till_next_match with several Kleene variables in all mode",
                clause="PATTERN",
                hint="use kleene='maximal', or one Kleene variable",
                code="unsupported",
            )


def _negation_windows(sequences: list[tuple[Item, ...]]) -> None:
    for items in sequences:
        for pos, it in enumerate(items):
            if not it.negated:
                continue
            before = any(not o.negated for o in items[:pos])
            after = any(not o.negated for o in items[pos + 1 :])
            if not (before and after):
                raise UnsupportedFeatureError(
                    "a leading or trailing negation needs a WITHIN window",
                    clause="PATTERN",
                    hint="add WITHIN INTERVAL 'n' <unit> after PATTERN",
                    code="unsupported",
                )


def _condition(p: Expr, owner: str, kleene_vars: set[str], negated: set[str]) -> None:
    """One DEFINE conjunct of ``owner``."""
    clause = f"DEFINE {owner}"
    for node in walk(p):
        if isinstance(node, Aggregate | Classifier | MatchNumber):
            raise UnsupportedFeatureError(
                f"{to_sql(node)} in a CER condition", clause=clause, code="unsupported"
            )
    refs = variables_of(p) | {owner}
    if owner not in negated and refs & negated:
        raise UnsupportedFeatureError(
            f"{to_sql(p)} refers to a negated variable",
            clause=clause,
            hint="put conditions on the negated variable in its own DEFINE",
            code="unsupported",
        )
    if owner in negated and refs & kleene_vars:
        raise UnsupportedFeatureError(
            f"{to_sql(p)}: a negated variable's condition reads Kleene variable "
            f"{', '.join(sorted(refs & kleene_vars))}",
            clause=clause,
            hint="a negated variable's condition may read its own event and single-event variables",
            code="unsupported",
        )
    for nav in (x for x in walk(p) if isinstance(x, Navigation)):
        _navigation(nav, p, owner, kleene_vars, negated)


def _navigation(
    nav: Navigation, p: Expr, owner: str, kleene_vars: set[str], negated: set[str]
) -> None:
    clause = f"DEFINE {owner}"
    key = (nav.kind, nav.offset)
    if not isinstance(nav.operand, Column) or (
        key not in SET_NAVIGATIONS and key not in NEIGHBOURS
    ):
        raise UnsupportedFeatureError(
            f"{to_sql(nav)} in a CER condition",
            clause=clause,
            hint="CER conditions use columns, FIRST/LAST (no offset) of a column, and NEXT/PREV "
            "(offset 1) of a Kleene variable's column inside its own condition",
            code="unsupported",
        )
    target = nav.operand.variable or owner
    if key in SET_NAVIGATIONS:
        return
    if target not in kleene_vars:
        raise UnsupportedFeatureError(
            f"{to_sql(nav)} reads the row next to single-event variable {target}'s event",
            clause=clause,
            hint=PHYSICAL_FIX,
            code="unsupported",
        )
    own = target == owner
    # a positive single-event variable's condition may read them of the one Kleene set it reads
    alone = (
        owner not in kleene_vars
        and owner not in negated
        and (variables_of(p) | {owner}) & kleene_vars == {target}
    )
    if not (own or alone):
        raise UnsupportedFeatureError(
            f"{to_sql(nav)} in DEFINE {owner} reads Kleene variable {target}'s neighbouring "
            "selected event outside its own condition",
            clause=clause,
            hint=PHYSICAL_FIX,
            code="unsupported",
        )


def _measure(e: Expr) -> None:
    for x in walk(e):
        if isinstance(x, Aggregate) and (x.name != "count" or len(x.args) != 1):
            raise UnsupportedFeatureError(
                f"{to_sql(x)} in MEASURES under ALL MATCHES",
                clause="MEASURES",
                hint="the CER engine's measures take count(X.*), FIRST/LAST of "
                "variables, CLASSIFIER() and MATCH_NUMBER()",
                code="unsupported",
            )
        if isinstance(x, Navigation) and (
            not isinstance(x.operand, Column) or (x.kind, x.offset) not in SET_NAVIGATIONS
        ):
            raise UnsupportedFeatureError(
                f"{to_sql(x)} in MEASURES under ALL MATCHES",
                clause="MEASURES",
                hint="the CER engine's measures take count(X.*), FIRST/LAST of "
                "variables (no offset), CLASSIFIER() and MATCH_NUMBER()",
                code="unsupported",
            )


def check_cer_query(
    query: Query, selection: str = "skip_till_any_match", kleene: str = "all"
) -> None:
    """:func:`check_cer` for a parsed query (its any-row variables from the analysis)."""
    from dfs_cer.query.analyze import analyze

    any_row = {v.name for v in analyze(query).variables if v.any_row}
    check_cer(query.recognize, any_row, selection, kleene)
