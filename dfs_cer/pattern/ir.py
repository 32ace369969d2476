"""Row pattern IR: the regular expression of a ``PATTERN`` clause as frozen nodes.

The parser (:mod:`dfs_cer.pattern.parser`) produces these nodes; :func:`to_text` prints the
canonical text the parser reads back (``parse(to_text(p)) == p``). Later stages rewrite the IR
and compile it to an instruction program, as Trino's ``IrRowPattern`` does.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from dfs_cer.serde import node


class RowPattern:
    """Base of every pattern node."""

    __slots__ = ()


@node("label")
@dataclass(frozen=True, slots=True)
class Label(RowPattern):
    """One row matched by pattern variable ``name`` (canonical: unquoted names upper-cased)."""

    name: str


@node("empty")
@dataclass(frozen=True, slots=True)
class EmptyPattern(RowPattern):
    """``()``: matches the empty sequence of rows."""


class AnchorKind(enum.Enum):
    PARTITION_START = "^"
    PARTITION_END = "$"


@node("anchor")
@dataclass(frozen=True, slots=True)
class Anchor(RowPattern):
    """``^`` (partition start) or ``$`` (partition end)."""

    kind: AnchorKind


@node("concatenation")
@dataclass(frozen=True, slots=True)
class Concatenation(RowPattern):
    """``A B C``: patterns matched one after the other."""

    items: tuple[RowPattern, ...]


@node("alternation")
@dataclass(frozen=True, slots=True)
class Alternation(RowPattern):
    """``A | B``: the first alternative is preferred."""

    items: tuple[RowPattern, ...]


@node("permutation")
@dataclass(frozen=True, slots=True)
class Permutation(RowPattern):
    """``PERMUTE(A, B)``: every order, preferred in lexicographic order of the items."""

    items: tuple[RowPattern, ...]


@node("exclusion")
@dataclass(frozen=True, slots=True)
class Exclusion(RowPattern):
    """``{- A -}``: matched, but its rows are left out of ALL ROWS PER MATCH output."""

    pattern: RowPattern


@node("negation")
@dataclass(frozen=True, slots=True)
class Negation(RowPattern):
    """``~B`` (CER extension, ALL MATCHES only): no qualifying B event lies between the
    neighbouring variables' events."""

    pattern: RowPattern


@node("quantified")
@dataclass(frozen=True, slots=True)
class Quantified(RowPattern):
    """``A*``, ``A+?``, ``A{2,5}``: ``min`` to ``max`` (None: unbounded) repetitions."""

    pattern: RowPattern
    min: int
    max: int | None
    greedy: bool = True

    def __post_init__(self) -> None:
        if self.min < 0 or (self.max is not None and self.max < self.min):
            raise ValueError(f"invalid range: ({self.min}, {self.max})")


_BARE_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_RESERVED = frozenset({"PERMUTE"})


def format_label(name: str) -> str:
    """Print a variable name so the parser reads back the same canonical name."""
    if _BARE_NAME.match(name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def quantifier_text(q: Quantified) -> str:
    """The quantifier suffix of ``q`` (``*``, ``+?``, ``{2,}`` ...)."""
    lo, hi = q.min, q.max
    if hi is None:
        text = "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    elif lo == 0 and hi == 1:
        text = "?"
    elif lo == hi:
        text = f"{{{lo}}}"
    elif lo == 0:
        text = f"{{,{hi}}}"
    else:
        text = f"{{{lo},{hi}}}"
    return text if q.greedy else text + "?"


# precedence: alternation < concatenation < quantified/primary
_PREC_ALT, _PREC_CONCAT, _PREC_PRIMARY = 1, 2, 3


def _prec(p: RowPattern) -> int:
    if isinstance(p, Alternation):
        return _PREC_ALT
    if isinstance(p, Concatenation):
        return _PREC_CONCAT
    return _PREC_PRIMARY


def to_text(pattern: RowPattern) -> str:
    """Canonical text of a pattern, e.g. ``R {- N* -} B {- N* -} M``."""
    return _text(pattern)


def _wrap(p: RowPattern, min_prec: int) -> str:
    inner = _text(p)
    return f"({inner})" if _prec(p) < min_prec else inner


def _text(p: RowPattern) -> str:
    if isinstance(p, Label):
        return format_label(p.name)
    if isinstance(p, EmptyPattern):
        return "()"
    if isinstance(p, Anchor):
        return p.kind.value
    if isinstance(p, Concatenation):
        return " ".join(
            _wrap(i, _PREC_CONCAT + 1 if isinstance(i, Concatenation) else _PREC_CONCAT)
            for i in p.items
        )
    if isinstance(p, Alternation):
        return " | ".join(
            _wrap(i, _PREC_ALT + 1 if isinstance(i, Alternation) else _PREC_ALT) for i in p.items
        )
    if isinstance(p, Permutation):
        return "PERMUTE(" + ", ".join(_text(i) for i in p.items) + ")"
    if isinstance(p, Exclusion):
        return "{- " + _text(p.pattern) + " -}"
    if isinstance(p, Negation):
        return "~" + _text(p.pattern)
    if isinstance(p, Quantified):
        inner = p.pattern
        needs_parens = _prec(inner) < _PREC_PRIMARY or isinstance(inner, Quantified)
        body = f"({_text(inner)})" if needs_parens else _text(inner)
        return body + quantifier_text(p)
    raise TypeError(f"unknown pattern node: {type(p).__name__}")


def children(p: RowPattern) -> tuple[RowPattern, ...]:
    """Direct sub-patterns of ``p``."""
    if isinstance(p, Concatenation | Alternation | Permutation):
        return p.items
    if isinstance(p, Exclusion | Quantified | Negation):
        return (p.pattern,)
    return ()


def walk(p: RowPattern) -> list[RowPattern]:
    """Every node of ``p`` in pre-order."""
    out = [p]
    for c in children(p):
        out.extend(walk(c))
    return out


def labels(p: RowPattern) -> tuple[str, ...]:
    """Distinct variable names in order of first appearance."""
    seen: dict[str, None] = {}
    for n in walk(p):
        if isinstance(n, Label):
            seen.setdefault(n.name, None)
    return tuple(seen)
