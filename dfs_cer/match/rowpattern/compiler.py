"""Row pattern IR -> instruction program (Trino's ``IrRowPatternToProgramRewriter`` design).

Alternatives become a chain of ``SPLIT``s in preference order, ``PERMUTE`` the alternation of
its permutations in lexicographic order, bounded quantifiers copies of their body with optional
copies behind splits, and loops the body followed by a split back to it (see
:mod:`dfs_cer.match.rowpattern.program` for the instructions).
"""

from __future__ import annotations

import itertools

import numpy as np

from dfs_cer.match.rowpattern.program import (
    DONE,
    END,
    EXCL_IN,
    EXCL_OUT,
    JUMP,
    LABEL,
    SPLIT,
    START,
    Program,
)
from dfs_cer.pattern.ir import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    EmptyPattern,
    Exclusion,
    Label,
    Negation,
    Permutation,
    Quantified,
    RowPattern,
    to_text,
)

MAX_PROGRAM = 1_000_000


class _Builder:
    def __init__(self, label_ids: dict[str, int]) -> None:
        self.label_ids = label_ids
        self.code: list[list[int]] = []

    def emit(self, op: int, a: int = 0, b: int = 0) -> int:
        if len(self.code) >= MAX_PROGRAM:
            from dfs_cer.errors import UnsupportedFeatureError

            raise UnsupportedFeatureError(
                f"the pattern compiles to more than {MAX_PROGRAM} instructions",
                clause="PATTERN",
                hint="use smaller bounded quantifiers such as {n,m}",
                code="pattern-too-large",
            )
        self.code.append([op, a, b])
        return len(self.code) - 1

    def compile(self, p: RowPattern) -> None:
        if isinstance(p, Label):
            self.emit(LABEL, self.label_ids[p.name])
        elif isinstance(p, EmptyPattern):
            return
        elif isinstance(p, Anchor):
            self.emit(START if p.kind is AnchorKind.PARTITION_START else END)
        elif isinstance(p, Concatenation):
            for item in p.items:
                self.compile(item)
        elif isinstance(p, Alternation):
            self._alternatives(list(p.items))
        elif isinstance(p, Permutation):
            orders = itertools.permutations(range(len(p.items)))
            self._alternatives(
                [Concatenation(tuple(p.items[i] for i in order)) for order in orders]
            )
        elif isinstance(p, Exclusion):
            self.emit(EXCL_IN)
            self.compile(p.pattern)
            self.emit(EXCL_OUT)
        elif isinstance(p, Quantified):
            self._quantified(p)
        elif isinstance(p, Negation):
            from dfs_cer.errors import UnsupportedFeatureError

            raise UnsupportedFeatureError(
                f"negation {to_text(p)} is a CER construct",
                clause="PATTERN",
                hint="add ALL MATCHES (or pass selection=) to evaluate it with the CER engine",
                code="unsupported",
            )
        else:  # pragma: no cover
            raise TypeError(type(p).__name__)

    def _alternatives(self, items: list[RowPattern]) -> None:
        jumps = []
        for item in items[:-1]:
            split = self.emit(SPLIT)
            self.code[split][1] = len(self.code)
            self.compile(item)
            jumps.append(self.emit(JUMP))
            self.code[split][2] = len(self.code)
        self.compile(items[-1])
        for j in jumps:
            self.code[j][1] = len(self.code)

    def _split(self, greedy: bool, body: int, exit_: int, at: int) -> None:
        self.code[at][1], self.code[at][2] = (body, exit_) if greedy else (exit_, body)

    def _quantified(self, q: Quantified) -> None:
        if q.max is None:
            # loops as Trino compiles them: `{0,}` is SPLIT(body, exit) body SPLIT(body, exit) with
            # two distinct splits; `{n,}` repeats the body n times and loops back to the last copy.
            # The VM drops a thread that reaches an instruction twice in one closure, so an empty
            # iteration past the minimum ends the loop, while a new iteration of an enclosing loop
            # can still enter this one through its first split
            first = -1
            if q.min == 0:
                first = self.emit(SPLIT)
            start = len(self.code)
            for _ in range(max(q.min, 1)):
                start = len(self.code)
                self.compile(q.pattern)
            back = self.emit(SPLIT)
            self._split(q.greedy, start, len(self.code), back)
            if first >= 0:
                self._split(q.greedy, start, len(self.code), first)
            return
        for _ in range(q.min):
            self.compile(q.pattern)
        splits = []
        for _ in range(q.max - q.min):
            split = self.emit(SPLIT)
            splits.append(split)
            self.compile(q.pattern)
        end = len(self.code)
        for split in splits:
            self._split(q.greedy, split + 1, end, split)


def compile_pattern(pattern: RowPattern, labels: tuple[str, ...]) -> Program:
    """Compile ``pattern``; ``labels`` gives each variable its id (its index)."""
    builder = _Builder({name: i for i, name in enumerate(labels)})
    builder.compile(pattern)
    builder.emit(DONE)
    code = np.array(builder.code, dtype=np.int32).reshape(-1, 3)
    return Program(code[:, 0].copy(), code[:, 1].copy(), code[:, 2].copy(), labels)
