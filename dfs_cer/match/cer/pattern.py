"""The CER engine's view of a PATTERN: sequences of single-event and Kleene+ variables.

A pattern is first normalised (``B{1}`` is ``B``; grouping is already flat), then each element
of its top-level sequence becomes a *slot*:

- ``X`` (one event), ``X+`` (a non-empty, time-ordered set), ``NOT X`` (negation);
- ``N*`` of an any-row variable, in or out of ``{- -}``: dropped (events may be skipped);
- ``(B | C)`` of single variables (SASE's OR): one event labelled by the first alternative whose
  condition holds, as SQL's preference order labels it — the branch for ``C`` requires
  ``NOT coalesce(B's condition, FALSE)`` of the same event;
- ``PERMUTE(B, C)`` of single variables inside a sequence: the events in any order.

A pattern with alternations or permutations expands into *branches*, one sequence each (the
product of the slots' choices): ``A (B | C) PERMUTE(D, E)`` gives ``A B D E``, ``A B E D``,
``A C D E`` and ``A C E D``. A match belongs to exactly one branch, so the union of the branches'
matches is the pattern's. In a branch, references to variables it does not contain are NULL
(as SQL reads a variable that matched no row). A whole-pattern ``PERMUTE(A, B, C)`` stays one
unordered conjunction (the events in any time order).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from dfs_cer.errors import UnsupportedFeatureError
from dfs_cer.pattern.ir import (
    Alternation,
    Concatenation,
    Exclusion,
    Label,
    Negation,
    Permutation,
    Quantified,
    RowPattern,
    to_text,
)
from dfs_cer.pattern.properties import top_level_items
from dfs_cer.query.expr import (
    Aggregate,
    BinaryOp,
    Classifier,
    Column,
    Expr,
    Function,
    Literal,
    Navigation,
    Star,
    UnaryOp,
    transform,
)
from dfs_cer.query.model import Definition, MatchRecognize

#: at most this many branches (e.g. PERMUTE of 5 variables alone gives 120)
MAX_BRANCHES = 256


@dataclass(frozen=True)
class Item:
    name: str
    kleene: bool
    negated: bool = False


@dataclass(frozen=True)
class Branch:
    """One sequence of a pattern's expansion and the clause rewritten for it (pattern = this
    sequence, definitions with preference guards, references to absent variables NULL)."""

    items: tuple[Item, ...]
    recognize: MatchRecognize


def normalise(p: RowPattern) -> RowPattern:
    """``X{1}`` / ``X{1}?`` become ``X``; nested sequences are flattened."""
    if isinstance(p, Quantified):
        inner = normalise(p.pattern)
        return inner if p.min == 1 and p.max == 1 else dataclasses.replace(p, pattern=inner)
    if isinstance(p, Concatenation):
        items = tuple(normalise(i) for i in top_level_items(p))
        return items[0] if len(items) == 1 else Concatenation(items)
    if isinstance(p, Alternation | Permutation):
        return dataclasses.replace(p, items=tuple(normalise(i) for i in p.items))
    if isinstance(p, Exclusion | Negation):
        return dataclasses.replace(p, pattern=normalise(p.pattern))
    return p


def _unsupported(item: RowPattern) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        "the CER engine evaluates sequences of variables, Kleene+ (A B+ C), alternations of "
        f"single variables (A (B | C)) and PERMUTE of single variables, not {to_text(item)}",
        clause="PATTERN",
        hint="drop ALL MATCHES / selection= to use SQL row pattern semantics",
        code="unsupported",
    )


Choice = tuple[tuple[Item, tuple[str, ...]], ...]  # items of one alternative, each with its guards


def _slot(item: RowPattern, any_row: set[str]) -> list[Choice] | None:
    """The alternatives of one top-level element (None: a skip item, dropped)."""
    if isinstance(item, Negation) and isinstance(item.pattern, Label):
        return [((Item(item.pattern.name, False, True), ()),)]
    inner = item.pattern if isinstance(item, Exclusion) else item
    if (
        isinstance(inner, Quantified)
        and isinstance(inner.pattern, Label)
        and inner.min == 0
        and inner.max is None
        and inner.pattern.name in any_row
    ):
        return None
    if isinstance(inner, Label):
        return [((Item(inner.name, False), ()),)]
    if (
        isinstance(inner, Quantified)
        and isinstance(inner.pattern, Label)
        and inner.min == 1
        and inner.max is None
    ):
        return [((Item(inner.pattern.name, True), ()),)]
    if isinstance(inner, Alternation) and all(isinstance(i, Label) for i in inner.items):
        names = [i.name for i in inner.items if isinstance(i, Label)]
        return [
            ((Item(n, False), tuple(names[:k])),) for k, n in enumerate(names) if n not in names[:k]
        ]
    if isinstance(inner, Permutation) and all(isinstance(i, Label) for i in inner.items):
        names = [i.name for i in inner.items if isinstance(i, Label)]
        return [
            tuple((Item(n, False), ()) for n in order) for order in itertools.permutations(names)
        ]
    raise _unsupported(item)


def _sequences(pattern: RowPattern, any_row: set[str]) -> tuple[list[Choice], bool]:
    pattern = normalise(pattern)
    if isinstance(pattern, Permutation):  # the whole pattern: an unordered conjunction
        if not all(isinstance(i, Label) for i in pattern.items):
            raise UnsupportedFeatureError(
                "the CER engine evaluates PERMUTE (conjunction) of single variables",
                clause="PATTERN",
                code="unsupported",
            )
        return [
            tuple((Item(i.name, False), ()) for i in pattern.items if isinstance(i, Label))
        ], True
    slots = [s for s in (_slot(i, any_row) for i in top_level_items(pattern)) if s is not None]
    total = 1
    for s in slots:
        total *= len(s)
    if total > MAX_BRANCHES:
        raise UnsupportedFeatureError(
            f"the pattern expands into {total} sequences (alternations and PERMUTE "
            f"multiply), more than {MAX_BRANCHES}",
            clause="PATTERN",
            hint="split the query or use fewer alternatives",
            code="unsupported",
        )
    out = [tuple(x for choice in combo for x in choice) for combo in itertools.product(*slots)]
    for seq in out:
        _check(seq)
    return out, False


def _check(seq: Choice) -> None:
    items = [i for i, _ in seq]
    names = [i.name for i in items]
    if len(set(names)) != len(names):
        raise UnsupportedFeatureError(
            "a variable appears twice in the CER pattern", clause="PATTERN", code="unsupported"
        )
    if not any(not i.negated for i in items):
        raise UnsupportedFeatureError(
            "the CER pattern has no positive variable", clause="PATTERN", code="unsupported"
        )
    for a, b in itertools.pairwise(items):
        if (a.negated and b.kleene) or (a.kleene and b.negated):
            raise UnsupportedFeatureError(
                "a negated variable next to a Kleene variable",
                clause="PATTERN",
                hint="put a single-event variable between them",
                code="unsupported",
            )


def pattern_items(pattern: RowPattern, any_row: set[str]) -> tuple[list[Item], bool]:
    """The single sequence of a pattern without alternations or inner permutations, and whether
    it is an unordered conjunction (``PERMUTE(A, B, C)``)."""
    sequences, unordered = _sequences(pattern, any_row)
    if len(sequences) != 1:
        raise UnsupportedFeatureError(
            "an alternation or PERMUTE inside the sequence is not supported here",
            clause="PATTERN",
            code="unsupported",
        )
    return [i for i, _ in sequences[0]], unordered


def without(e: Expr, absent: set[str]) -> Expr:
    """``e`` with every reference to a variable in ``absent`` read as SQL reads a variable that
    matched no row: columns and labels NULL, ``count(X.*)`` 0."""
    if not absent:
        return e

    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Column | Classifier) and x.variable in absent:
            return Literal(None)
        if isinstance(x, Navigation) and isinstance(x.operand, Literal) and x.operand.value is None:
            return Literal(None)
        if isinstance(x, Aggregate) and any(
            (isinstance(a, Star) and a.variable in absent)
            or (isinstance(a, Literal) and a.value is None)
            for a in x.args
        ):
            return Literal(0) if x.name == "count" else Literal(None)
        return None

    return transform(e, fn)


def _renamed(e: Expr, old: str, new: str) -> Expr:
    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Column) and x.variable == old:
            return Column(x.name, new)
        if isinstance(x, Classifier) and x.variable == old:
            return Classifier(new, x.semantics)
        return None

    return transform(e, fn)


def branches(
    mr: MatchRecognize, any_row: set[str], guards: bool = True
) -> tuple[list[Branch], bool]:
    """The pattern's sequences with their rewritten clauses, and whether it is an unordered
    conjunction (module docstring). ``guards=False`` leaves out the preference guards of
    alternatives: a superset of the matches (storage-side filters over weakened conditions,
    where a guard could wrongly reject)."""
    use_guards = guards
    sequences, unordered = _sequences(mr.pattern, any_row)
    everything = {d.variable for d in mr.definitions} | {
        i.name for seq in sequences for i, _ in seq
    }
    out = []
    for seq in sequences:
        items = tuple(i for i, _ in seq)
        present = {i.name for i in items if not i.negated}
        absent = everything - present - {i.name for i in items if i.negated}
        # a SUBSET none of whose members is in this sequence reads as NULL too
        absent |= {sub.name for sub in mr.subsets if not set(sub.variables) & present}
        definitions = []
        for item, earlier in seq:
            d = mr.definition(item.name)
            parts: list[Expr] = [] if d is None else [without(d.condition, absent)]
            for g in (
                earlier if use_guards else ()
            ):  # an earlier alternative takes the event when it holds
                gd = mr.definition(g)
                # tried first, the alternative sees this variable unmatched (NULL), then takes the
                # row
                held: Expr = (
                    Literal(True)
                    if gd is None
                    else _renamed(without(gd.condition, (absent - {g}) | {item.name}), g, item.name)
                )
                parts.append(UnaryOp("NOT", Function("coalesce", (held, Literal(False)))))
            if parts:
                cond = parts[0]
                for p in parts[1:]:
                    cond = BinaryOp("AND", cond, p)
                definitions.append(Definition(item.name, cond))
        pattern: RowPattern = _as_pattern(items, unordered)
        recognize = dataclasses.replace(
            mr,
            pattern=pattern,
            definitions=tuple(definitions),
            # a negated variable labels no row of a match: MEASURES read it as NULL
            measures=tuple(
                dataclasses.replace(
                    m, expr=without(m.expr, absent | {i.name for i in items if i.negated})
                )
                for m in mr.measures
            ),
            subsets=tuple(
                dataclasses.replace(sub, variables=tuple(v for v in sub.variables if v in present))
                for sub in mr.subsets
                if set(sub.variables) & present
            ),
        )
        out.append(Branch(items, recognize))
    return out, unordered


def _as_pattern(items: tuple[Item, ...], unordered: bool) -> RowPattern:
    def one(i: Item) -> RowPattern:
        if i.negated:
            return Negation(Label(i.name))
        return Quantified(Label(i.name), 1, None) if i.kleene else Label(i.name)

    parts = tuple(one(i) for i in items)
    if unordered:
        return Permutation(parts)
    return parts[0] if len(parts) == 1 else Concatenation(parts)
