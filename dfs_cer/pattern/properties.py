"""Structural facts about a row pattern that planning needs (pure functions over the IR).

- :func:`nullable`: can the pattern match the empty sequence?
- :func:`first_labels` / :func:`last_labels`: variables that can label the first / last row of
  a non-empty match (``{R}`` and ``{M}`` for ``R {- N* -} B {- N* -} M``).
- :func:`mandatory_labels`: variables that label at least one row of every match.
- :func:`top_level_positions`: index of the top-level sequence element holding each variable,
  used to tell whether one variable always precedes another.
"""

from __future__ import annotations

from dfs_cer.pattern.ir import (
    Alternation,
    Anchor,
    Concatenation,
    EmptyPattern,
    Exclusion,
    Label,
    Negation,
    Permutation,
    Quantified,
    RowPattern,
    labels,
)


def nullable(p: RowPattern) -> bool:
    """True if ``p`` matches the empty sequence of rows (anchors consume no rows)."""
    if isinstance(p, Label):
        return False
    if isinstance(p, EmptyPattern | Anchor | Negation):
        return True
    if isinstance(p, Concatenation | Permutation):
        return all(nullable(i) for i in p.items)
    if isinstance(p, Alternation):
        return any(nullable(i) for i in p.items)
    if isinstance(p, Exclusion):
        return nullable(p.pattern)
    if isinstance(p, Quantified):
        return p.min == 0 or nullable(p.pattern)
    raise TypeError(type(p).__name__)


def first_labels(p: RowPattern) -> frozenset[str]:
    """Variables that can label the first row of a non-empty match of ``p``."""
    if isinstance(p, Label):
        return frozenset({p.name})
    if isinstance(p, EmptyPattern | Anchor | Negation):
        return frozenset()
    if isinstance(p, Concatenation):
        out: set[str] = set()
        for item in p.items:
            out |= first_labels(item)
            if not nullable(item):
                break
        return frozenset(out)
    if isinstance(p, Alternation | Permutation):
        # in a permutation every item can come first
        return frozenset().union(*(first_labels(i) for i in p.items))
    if isinstance(p, Exclusion | Quantified):
        if isinstance(p, Quantified) and p.max == 0:
            return frozenset()
        return first_labels(p.pattern)
    raise TypeError(type(p).__name__)


def last_labels(p: RowPattern) -> frozenset[str]:
    """Variables that can label the last row of a non-empty match of ``p``."""
    return first_labels(_reverse(p))


def _reverse(p: RowPattern) -> RowPattern:
    if isinstance(p, Concatenation):
        return Concatenation(tuple(_reverse(i) for i in reversed(p.items)))
    if isinstance(p, Alternation):
        return Alternation(tuple(_reverse(i) for i in p.items))
    if isinstance(p, Permutation):
        return Permutation(tuple(_reverse(i) for i in p.items))
    if isinstance(p, Exclusion):
        return Exclusion(_reverse(p.pattern))
    if isinstance(p, Quantified):
        return Quantified(_reverse(p.pattern), p.min, p.max, p.greedy)
    return p


def mandatory_labels(p: RowPattern) -> frozenset[str]:
    """Variables that label at least one row in every match of ``p``."""
    if isinstance(p, Label):
        return frozenset({p.name})
    if isinstance(p, EmptyPattern | Anchor | Negation):
        return frozenset()
    if isinstance(p, Concatenation | Permutation):
        return frozenset().union(*(mandatory_labels(i) for i in p.items))
    if isinstance(p, Alternation):
        sets = [mandatory_labels(i) for i in p.items]
        return frozenset.intersection(*sets) if sets else frozenset()
    if isinstance(p, Exclusion):
        return mandatory_labels(p.pattern)
    if isinstance(p, Quantified):
        return mandatory_labels(p.pattern) if p.min >= 1 else frozenset()
    raise TypeError(type(p).__name__)


def max_rows(p: RowPattern) -> dict[str, int | None]:
    """For each variable, the most rows it can label in one match (None: unbounded).

    ``A B+ A`` gives ``{A: 2, B: None}``; ``A (B | C) D`` gives 1 for every variable."""

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None or y is None else x + y

    if isinstance(p, Label):
        return {p.name: 1}
    if isinstance(p, EmptyPattern | Anchor):
        return {}
    if isinstance(p, Negation):
        return {name: 0 for name in labels(p)}
    if isinstance(p, Concatenation | Permutation | Alternation):
        out: dict[str, int | None] = {}
        for item in p.items:
            for name, k in max_rows(item).items():
                if name not in out:
                    out[name] = k
                elif isinstance(p, Alternation):
                    current = out[name]
                    out[name] = None if k is None or current is None else max(current, k)
                else:
                    out[name] = add(out[name], k)
        return out
    if isinstance(p, Exclusion):
        return max_rows(p.pattern)
    if isinstance(p, Quantified):
        inner = max_rows(p.pattern)
        if p.max is None:
            return {name: (0 if k == 0 else None) for name, k in inner.items()}
        return {name: None if k is None else k * p.max for name, k in inner.items()}
    raise TypeError(type(p).__name__)


def top_level_items(p: RowPattern) -> tuple[RowPattern, ...]:
    """Elements of the top-level sequence (nested concatenations flattened)."""
    if isinstance(p, Concatenation):
        out: list[RowPattern] = []
        for item in p.items:
            out.extend(top_level_items(item))
        return tuple(out)
    return (p,)


def top_level_positions(p: RowPattern) -> dict[str, tuple[int, ...]]:
    """For each variable, the indices of the top-level sequence elements it occurs in."""
    out: dict[str, list[int]] = {}
    for index, item in enumerate(top_level_items(p)):
        for name in labels(item):
            out.setdefault(name, []).append(index)
    return {k: tuple(v) for k, v in out.items()}


def has_anchor(p: RowPattern) -> bool:
    """True if ``p`` contains ``^`` or ``$``."""
    from dfs_cer.pattern.ir import walk

    return any(isinstance(n, Anchor) for n in walk(p))
