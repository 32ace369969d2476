"""Brute-force reference for MATCH_RECOGNIZE (tests only): backtracking over the pattern IR in
the standard's preference order, DEFINE evaluated row by row in Python with running semantics.

Slow and simple on purpose: it shares no code with the VM beyond the parsed query.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
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
    Aggregate,
    Between,
    BinaryOp,
    Case,
    Classifier,
    Column,
    Expr,
    Function,
    InList,
    IsNull,
    Literal,
    MatchNumber,
    Navigation,
    NavKind,
    Star,
    UnaryOp,
    to_sql,
    walk,
)
from dfs_cer.query.model import SkipTo
from dfs_cer.query.root import Query

Row = dict[str, Any]
Path = tuple[tuple[int, str, bool], ...]  # (row, label, excluded)


def _navigated(e: Navigation, pos: list[int]) -> int | None:
    """The row ``e`` reads, given the rows of its variable matched so far (``pos``, not empty)."""
    if e.kind.physical:
        return pos[-1] + (-e.offset if e.kind == NavKind.PREV else e.offset)
    if e.offset >= len(pos):
        return None
    return pos[-1 - e.offset] if e.kind == NavKind.LAST else pos[e.offset]


def _function(e: Function, values: list[Any]) -> Any:
    if e.name == "abs":
        return None if values[0] is None else abs(values[0])
    if e.name == "coalesce":
        return next((v for v in values if v is not None), None)
    raise NotImplementedError(to_sql(e))


def _binary(op: str, a: Any, b: Any) -> Any:
    """``a op b`` with SQL's three-valued logic."""
    if op == "AND":
        return False if a is False or b is False else None if a is None or b is None else True
    if op == "OR":
        return True if a is True or b is True else None if a is None or b is None else False
    if a is None or b is None:
        return None
    return {
        "=": lambda: a == b,
        "<>": lambda: a != b,
        "<": lambda: a < b,
        "<=": lambda: a <= b,
        ">": lambda: a > b,
        ">=": lambda: a >= b,
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
    }[op]()


class Reference:
    def __init__(
        self, query: Query, rows: list[Row], window: int | None = None, time: str = "ts"
    ) -> None:
        self.q = query
        self.mr = query.recognize
        self.rows = rows
        self.window = window
        self.time = time
        self.subsets = {s.name: set(s.variables) for s in self.mr.subsets}
        self.match_number = 1  # of the match being attempted in the current partition

    def _row(self, e: Expr, r: int, label: str | None) -> Any:
        """``e`` at row ``r`` alone (an aggregate's argument or filter, a navigated expression)."""
        if isinstance(e, Literal):
            return e.value
        if isinstance(e, Column):
            return self.rows[r][e.name]
        if isinstance(e, Classifier):
            return label
        if isinstance(e, Function):
            return _function(e, [self._row(a, r, label) for a in e.args])
        if isinstance(e, Case):
            for w in e.whens:
                if self._row(w.condition, r, label) is True:
                    return self._row(w.result, r, label)
            return None if e.default is None else self._row(e.default, r, label)
        if isinstance(e, IsNull):
            v = self._row(e.operand, r, label)
            return (v is not None) if e.negated else (v is None)
        if isinstance(e, UnaryOp):
            v = self._row(e.operand, r, label)
            return None if v is None else (not v) if e.op == "NOT" else -v
        if isinstance(e, BinaryOp):
            return _binary(e.op, self._row(e.left, r, label), self._row(e.right, r, label))
        raise NotImplementedError(type(e).__name__)

    # ------------------------------------------------------------------ conditions

    def _positions(
        self, name: str | None, path: Path, cur: int, cur_label: str, start: int
    ) -> list[int]:
        rows = [r for r, _, _ in path] + [cur]
        labels = [lab for _, lab, _ in path] + [cur_label]
        if name is None:
            return list(range(start, cur + 1))
        names = self.subsets.get(name, {name})
        return [r for r, lab in zip(rows, labels, strict=True) if lab in names]

    def _label_of(self, r: int, path: Path, cur: int, label: str) -> str | None:
        if r == cur:
            return label
        return next((lab for row, lab, _ in path if row == r), None)

    def _value(
        self, e: Expr, path: Path, cur: int, label: str, start: int, p0: int, p1: int
    ) -> Any:
        if isinstance(e, Literal):
            return e.value
        if isinstance(e, MatchNumber):
            return self.match_number
        if isinstance(e, Aggregate):  # running: the rows matched so far and the current one
            arg = e.args[0] if e.args else Star()
            parts = [arg, *([e.filter] if e.filter is not None else [])]
            variables = {n.variable for p in parts for n in walk(p) if isinstance(n, Column | Star)}
            rows = self._positions(next(iter(variables), None), path, cur, label, start)
            labelled = [(r, self._label_of(r, path, cur, label)) for r in rows]
            if e.filter is not None:
                labelled = [(r, lab) for r, lab in labelled if self._row(e.filter, r, lab) is True]
            if isinstance(arg, Star):
                return len(labelled)
            values = [v for v in (self._row(arg, r, lab) for r, lab in labelled) if v is not None]
            if e.name == "count":
                return len(values)
            if e.name == "count_if":
                return sum(1 for v in values if v is True)
            if not values:
                return None
            aggregates: dict[str, Callable[[list[Any]], Any]] = {
                "sum": sum,
                "min": min,
                "max": max,
                "avg": lambda v: sum(v) / len(v),
                "bool_and": all,
                "bool_or": any,
            }
            return aggregates[e.name](values)
        if isinstance(e, Classifier | Navigation) and isinstance(
            getattr(e, "operand", e), Classifier
        ):
            cls = e if isinstance(e, Classifier) else e.operand
            assert isinstance(cls, Classifier)
            pos = self._positions(cls.variable, path, cur, label, start)
            if not pos:
                return None
            row = _navigated(e, pos) if isinstance(e, Navigation) else pos[-1]
            return (
                self._label_of(row, path, cur, label)
                if row is not None and start <= row <= cur
                else None
            )
        if isinstance(e, Function):  # of values, each evaluated as the rest of the condition
            return _function(e, [self._value(a, path, cur, label, start, p0, p1) for a in e.args])
        if isinstance(e, Navigation) and not isinstance(e.operand, Column | Navigation):
            # navigation over an expression: the expression at the navigated row
            columns = [n for n in walk(e.operand) if isinstance(n, Column)]
            variable = columns[0].variable if columns else None
            pos = self._positions(variable, path, cur, label, start)
            target = _navigated(e, pos) if pos else None
            if target is None or not p0 <= target < p1:
                return None
            return self._row(e.operand, target, None)
        if isinstance(e, Column | Navigation):
            phys, logical, off = 0, NavKind.LAST, 0
            col: Expr = e
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
            return _binary(
                e.op,
                self._value(e.left, path, cur, label, start, p0, p1),
                self._value(e.right, path, cur, label, start, p0, p1),
            )
        if isinstance(e, UnaryOp):
            v = self._value(e.operand, path, cur, label, start, p0, p1)
            if v is None:
                return None
            return (not v) if e.op == "NOT" else -v
        if isinstance(e, IsNull):
            v = self._value(e.operand, path, cur, label, start, p0, p1)
            return (v is not None) if e.negated else (v is None)
        if isinstance(e, Between):
            return self._value(
                BinaryOp(
                    "AND", BinaryOp(">=", e.operand, e.low), BinaryOp("<=", e.operand, e.high)
                ),
                path,
                cur,
                label,
                start,
                p0,
                p1,
            )
        if isinstance(e, InList):
            v = self._value(e.operand, path, cur, label, start, p0, p1)
            if v is None:
                return None
            return (v in [i.value for i in e.items if isinstance(i, Literal)]) != e.negated
        raise NotImplementedError(type(e).__name__)

    def _can_label(self, label: str, path: Path, cur: int, start: int, p0: int, p1: int) -> bool:
        if cur >= p1:
            return False
        if (
            self.window is not None
            and self.rows[cur][self.time] - self.rows[start][self.time] > self.window
        ):
            return False
        d = self.mr.definition(label)
        if d is None:
            return True
        return self._value(d.condition, path, cur, label, start, p0, p1) is True

    # ------------------------------------------------------------------ backtracking

    def _match(
        self, p: RowPattern, pos: int, path: Path, excl: bool, start: int, p0: int, p1: int
    ) -> Iterator[tuple[int, Path]]:
        if isinstance(p, Label):
            if self._can_label(p.name, path, pos, start, p0, p1):
                yield pos + 1, (*path, (pos, p.name, excl))
        elif isinstance(p, EmptyPattern):
            yield pos, path
        elif isinstance(p, Anchor):
            if (p.kind is AnchorKind.PARTITION_START and pos == p0) or (
                p.kind is AnchorKind.PARTITION_END and pos == p1
            ):
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

    def _seq(
        self,
        items: list[RowPattern],
        pos: int,
        path: Path,
        excl: bool,
        start: int,
        p0: int,
        p1: int,
    ) -> Iterator[tuple[int, Path]]:
        if not items:
            yield pos, path
            return
        for mid, mid_path in self._match(items[0], pos, path, excl, start, p0, p1):
            yield from self._seq(items[1:], mid, mid_path, excl, start, p0, p1)

    def _rep(
        self,
        q: Quantified,
        count: int,
        pos: int,
        path: Path,
        excl: bool,
        start: int,
        p0: int,
        p1: int,
        last_empty: bool = False,
    ) -> Iterator[tuple[int, Path]]:
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

    def first_match(self, pos: int, p0: int, p1: int) -> tuple[int, Path] | None:
        """The preferred match starting at ``pos``: (exclusive end, path)."""
        return next(self._match(self.mr.pattern, pos, (), False, pos, p0, p1), None)

    # ------------------------------------------------------------------ driver

    def matches(self, partitions: list[tuple[int, int]]) -> list[tuple[int, int, Path]]:
        """(start, end, path) of every match, partitions in order, honouring AFTER MATCH SKIP."""
        out = []
        skip = self.mr.after_match_skip
        for p0, p1 in partitions:
            pos = p0
            self.match_number = 1
            while pos < p1:
                found = self.first_match(pos, p0, p1)
                if found is None:
                    pos += 1
                    continue
                end, path = found
                out.append((pos, end, path))
                self.match_number += 1
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


Instruction = tuple[str, Any, int]  # (op, target or label name, second target)


def trino_program(p: RowPattern) -> list[Instruction]:
    """``p`` compiled the way Trino's IrRowPatternToProgramRewriter does (written here from its
    description, independently of dfs_cer.match.rowpattern.program): alternatives as a chain of
    splits, PERMUTE as the alternation of its permutations in lexicographic order, ``{n,m}`` as n
    copies then (m - n) optional copies, loops as the body (n copies for ``{n,}``; an entry split
    for ``*``) and a split back to the last copy's start."""
    code: list[list[Any]] = []

    def emit(*ins: Any) -> int:
        code.append(list(ins) + [0] * (3 - len(ins)))
        return len(code) - 1

    def order(greedy: bool, body: int, out: int) -> tuple[int, int]:
        return (body, out) if greedy else (out, body)

    def go(x: RowPattern) -> None:
        if isinstance(x, Label):
            emit("label", x.name)
        elif isinstance(x, Anchor):
            emit("start" if x.kind is AnchorKind.PARTITION_START else "end")
        elif isinstance(x, Concatenation):
            for item in x.items:
                go(item)
        elif isinstance(x, Alternation | Permutation):
            items = (
                list(x.items)
                if isinstance(x, Alternation)
                else [
                    Concatenation(tuple(x.items[i] for i in o))
                    for o in itertools.permutations(range(len(x.items)))
                ]
            )
            jumps = []
            for item in items[:-1]:
                split = emit("split")
                code[split][1] = len(code)
                go(item)
                jumps.append(emit("jump"))
                code[split][2] = len(code)
            go(items[-1])
            for j in jumps:
                code[j][1] = len(code)
        elif isinstance(x, Exclusion):
            emit("excl_in")
            go(x.pattern)
            emit("excl_out")
        elif isinstance(x, Quantified):
            for _ in range(x.min):
                body = len(code)
                go(x.pattern)
            if x.max is None:
                entry = emit("split") if x.min == 0 else -1
                if x.min == 0:
                    body = len(code)
                    go(x.pattern)
                back = emit("split")
                code[back][1:] = order(x.greedy, body, len(code))
                if entry >= 0:
                    code[entry][1:] = order(x.greedy, entry + 1, len(code))
            else:
                splits = []
                for _ in range(x.max - x.min):
                    splits.append(emit("split"))
                    go(x.pattern)
                for sp in splits:
                    code[sp][1:] = order(x.greedy, sp + 1, len(code))
        else:
            assert isinstance(x, EmptyPattern), type(x).__name__

    go(p)
    emit("done")
    return [(op, a, b) for op, a, b in code]


class ProgramReference(Reference):
    """Backtracking over Trino's program for the pattern, in preference order, dropping a branch
    that reaches an instruction at a row with the same matched rows and labels as an earlier
    (preferred) branch. That is the Pike matcher's rule, and it decides what empty iterations of
    quantified sub-patterns do; so this reference covers patterns whose quantified bodies can
    match empty, where the standard's text leaves the answer open and Trino's matcher gives it."""

    def __init__(
        self, query: Query, rows: list[Row], window: int | None = None, time: str = "ts"
    ) -> None:
        super().__init__(query, rows, window, time)
        self.program = trino_program(self.mr.pattern)

    def first_match(self, pos: int, p0: int, p1: int) -> tuple[int, Path] | None:
        seen: set[tuple[int, int, Path, int]] = set()
        start = pos
        # explicit stack of (pc, row, path, exclusion depth); the last pushed is preferred
        stack: list[tuple[int, int, Path, int]] = [(0, pos, (), 0)]
        while stack:
            pc, row, path, depth = stack.pop()
            if (pc, row, path, depth) in seen:
                continue
            seen.add((pc, row, path, depth))
            op, a, b = self.program[pc]
            if op == "done":
                return row, path
            if op == "jump":
                stack.append((a, row, path, depth))
            elif op == "split":
                stack.append((b, row, path, depth))
                stack.append((a, row, path, depth))
            elif op == "start":
                if row == p0:
                    stack.append((pc + 1, row, path, depth))
            elif op == "end":
                if row == p1:
                    stack.append((pc + 1, row, path, depth))
            elif op in ("excl_in", "excl_out"):
                stack.append((pc + 1, row, path, depth + (1 if op == "excl_in" else -1)))
            elif self._can_label(a, path, row, start, p0, p1):  # label
                stack.append((pc + 1, row + 1, (*path, (row, a, depth > 0)), depth))
        return None
