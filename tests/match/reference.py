"""Brute-force reference for MATCH_RECOGNIZE (tests only): backtracking over the pattern IR in
the standard's preference order, DEFINE evaluated row by row in Python with running semantics.

Slow and simple on purpose: it shares no code with the VM beyond the parsed query.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from dfs_cer.pattern.ir import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    EmptyPattern,
    Exclusion,
    Label,
    Permutation,
    Quantified,
    RowPattern,
)
from dfs_cer.query.expr import (
    Between,
    BinaryOp,
    Column,
    Expr,
    InList,
    IsNull,
    Literal,
    Navigation,
    NavKind,
    UnaryOp,
)
from dfs_cer.query.model import Query, SkipTo

Row = dict[str, Any]
Path = tuple[tuple[int, str, bool], ...]  # (row, label, excluded)


class Reference:
    def __init__(self, query: Query, rows: list[Row], window: int | None = None, time: str = "ts") -> None:
        self.q = query
        self.mr = query.recognize
        self.rows = rows
        self.window = window
        self.time = time
        self.subsets = {s.name: set(s.variables) for s in self.mr.subsets}

    # ------------------------------------------------------------------ conditions

    def _positions(self, name: str | None, path: Path, cur: int, cur_label: str, start: int) -> list[int]:
        rows = [r for r, _, _ in path] + [cur]
        labels = [lab for _, lab, _ in path] + [cur_label]
        if name is None:
            return list(range(start, cur + 1))
        names = self.subsets.get(name, {name})
        return [r for r, lab in zip(rows, labels, strict=True) if lab in names]

    def _value(self, e: Expr, path: Path, cur: int, label: str, start: int, p0: int, p1: int) -> Any:
        if isinstance(e, Literal):
            return e.value
        if isinstance(e, Column | Navigation):
            phys, logical, off, col = 0, NavKind.LAST, 0, e
            if isinstance(col, Navigation) and col.kind.physical:
                phys = -col.offset if col.kind == NavKind.PREV else col.offset
                col = col.operand
            if isinstance(col, Navigation):
                logical, off, col = col.kind, col.offset, col.operand
            assert isinstance(col, Column)
            pos = self._positions(col.variable, path, cur, label, start)
            if off >= len(pos):
                return None
            r = pos[-1 - off] if logical == NavKind.LAST else pos[off]
            r += phys
            if not p0 <= r < p1:
                return None
            return self.rows[r][col.name]
        if isinstance(e, BinaryOp):
            a = self._value(e.left, path, cur, label, start, p0, p1)
            if e.op == "AND":
                b = self._value(e.right, path, cur, label, start, p0, p1)
                if a is False or b is False:
                    return False
                return None if a is None or b is None else True
            if e.op == "OR":
                b = self._value(e.right, path, cur, label, start, p0, p1)
                if a is True or b is True:
                    return True
                return None if a is None or b is None else False
            b = self._value(e.right, path, cur, label, start, p0, p1)
            if a is None or b is None:
                return None
            ops = {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b} \
                if e.op in ("=", "<>", "<", "<=", ">", ">=") else None
            if ops is not None:
                return ops[e.op]
            return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b}[e.op]()
        if isinstance(e, UnaryOp):
            v = self._value(e.operand, path, cur, label, start, p0, p1)
            if v is None:
                return None
            return (not v) if e.op == "NOT" else -v
        if isinstance(e, IsNull):
            v = self._value(e.operand, path, cur, label, start, p0, p1)
            return (v is not None) if e.negated else (v is None)
        if isinstance(e, Between):
            return self._value(BinaryOp("AND", BinaryOp(">=", e.operand, e.low), BinaryOp("<=", e.operand, e.high)),
                               path, cur, label, start, p0, p1)
        if isinstance(e, InList):
            v = self._value(e.operand, path, cur, label, start, p0, p1)
            if v is None:
                return None
            return (v in [i.value for i in e.items if isinstance(i, Literal)]) != e.negated
        raise NotImplementedError(type(e).__name__)

    def _can_label(self, label: str, path: Path, cur: int, start: int, p0: int, p1: int) -> bool:
        if cur >= p1:
            return False
        if self.window is not None and self.rows[cur][self.time] - self.rows[start][self.time] > self.window:
            return False
        d = self.mr.definition(label)
        if d is None:
            return True
        return self._value(d.condition, path, cur, label, start, p0, p1) is True

    # ------------------------------------------------------------------ backtracking

    def _match(self, p: RowPattern, pos: int, path: Path, excl: bool, start: int, p0: int,
               p1: int) -> Iterator[tuple[int, Path]]:
        if isinstance(p, Label):
            if self._can_label(p.name, path, pos, start, p0, p1):
                yield pos + 1, (*path, (pos, p.name, excl))
        elif isinstance(p, EmptyPattern):
            yield pos, path
        elif isinstance(p, Anchor):
            if (p.kind is AnchorKind.PARTITION_START and pos == p0) or (p.kind is AnchorKind.PARTITION_END and pos == p1):
                yield pos, path
        elif isinstance(p, Concatenation):
            yield from self._seq(list(p.items), pos, path, excl, start, p0, p1)
        elif isinstance(p, Alternation):
            for item in p.items:
                yield from self._match(item, pos, path, excl, start, p0, p1)
        elif isinstance(p, Permutation):
            for order in itertools.permutations(range(len(p.items))):
                yield from self._seq([p.items[i] for i in order], pos, path, excl, start, p0, p1)
        elif isinstance(p, Exclusion):
            yield from self._match(p.pattern, pos, path, True, start, p0, p1)
        elif isinstance(p, Quantified):
            yield from self._rep(p, 0, pos, path, excl, start, p0, p1)

    def _seq(self, items: list[RowPattern], pos: int, path: Path, excl: bool, start: int, p0: int,
             p1: int) -> Iterator[tuple[int, Path]]:
        if not items:
            yield pos, path
            return
        for mid, mid_path in self._match(items[0], pos, path, excl, start, p0, p1):
            yield from self._seq(items[1:], mid, mid_path, excl, start, p0, p1)

    def _rep(self, q: Quantified, count: int, pos: int, path: Path, excl: bool, start: int, p0: int,
             p1: int, last_empty: bool = False) -> Iterator[tuple[int, Path]]:
        # Loops (*, +, {n,}) as Trino compiles them: the body n times (once for *), then a split
        # S back to the last copy's start; its matcher drops a thread that reaches an instruction
        # twice at one row. So with T = max(min, 1): an empty iteration k < T is fine; an empty
        # iteration T ends the loop (the way back to its own start is cut; the exit stays open);
        # an empty iteration k > T started from S at this row and is dropped when it comes back to
        # S (the next alternative is tried). Bounded quantifiers ({n,m}, ?) are unrolled: their
        # empty iterations are iterations like any other.
        threshold = max(q.min, 1)
        stuck = q.max is None and last_empty and count >= threshold
        can_more = (q.max is None or count < q.max) and not stuck
        can_stop = count >= q.min

        def more() -> Iterator[tuple[int, Path]]:
            if not can_more:
                return
            for mid, mid_path in self._match(q.pattern, pos, path, excl, start, p0, p1):
                if mid == pos and q.max is None and count + 1 > threshold:
                    continue
                yield from self._rep(q, count + 1, mid, mid_path, excl, start, p0, p1, mid == pos)

        if q.greedy:
            yield from more()
            if can_stop:
                yield pos, path
        else:
            if can_stop:
                yield pos, path
            yield from more()

    # ------------------------------------------------------------------ driver

    def matches(self, partitions: list[tuple[int, int]]) -> list[tuple[int, int, Path]]:
        """(start, end, path) of every match, partitions in order, honouring AFTER MATCH SKIP."""
        out = []
        skip = self.mr.after_match_skip
        for p0, p1 in partitions:
            pos = p0
            while pos < p1:
                found = next(self._match(self.mr.pattern, pos, (), False, pos, p0, p1), None)
                if found is None:
                    pos += 1
                    continue
                end, path = found
                out.append((pos, end, path))
                if end == pos or skip.to is SkipTo.NEXT_ROW:
                    pos += 1
                elif skip.to is SkipTo.PAST_LAST_ROW:
                    pos = end
                else:
                    names = self.subsets.get(skip.variable or "", {skip.variable})
                    rows = [r for r, lab, _ in path if lab in names]
                    target = rows[0] if skip.to is SkipTo.FIRST else rows[-1]
                    if target == pos:
                        raise RuntimeError("skip to first row")
                    pos = target
        return out
