"""Which running aggregate threads may be dominated on: an analysis of the condition code.

The row-pattern VM keeps every running aggregate the conditions read per thread, and keys
threads and failed states on their values (:func:`dfs_cer.match.rowpattern.vm.run`). Exact
keys stop attempts from re-walking states an earlier one failed from, but a sum or a max takes
many values. When every condition reads one statistic of one aggregate (its count, sum, min or
max) *monotonically*, a better value does all a worse one can:

- ``C AS C.v > max(A.v) + 100`` is harder the larger the max: a state that failed with max m
  fails with any max >= m, and of two threads at one instruction and row the preferred one with
  the smaller max leaves the other nothing to find (direction -1: smaller is better);
- ``C AS sum(B.x) > 1000``: a state that failed with sum s fails with any smaller sum (1).

The later values of the statistic follow monotonically from the current one whatever rows
come (``max(m, x)``, ``s + x``, ``n + 1``), so the order holds for the whole future. The VM
then leaves the value out of the keys and compares it (Trino's thread equivalence and memoised
failures, with an order where they have equality).

Monotone, over the postfix code of every condition that reads the statistic:

- the aggregate read as that statistic rises with it (``sum`` and ``avg`` with the sum, the
  count keyed exactly; ``min``, ``max`` and ``count`` with themselves); its other statistics
  are keyed exactly (a count is a candidate only when nothing else of the aggregate is read:
  whether the others are NULL follows from it);
- ``+`` and ``-`` with an operand that does not read it keep the direction (the subtrahend's
  flips), unary minus flips it; ``<``, ``<=``, ``>``, ``>=`` against a side that does not read
  it are monotone (``=`` and ``<>`` are not); AND and OR keep it, NOT flips it (three-valued
  logic is monotone in FALSE < NULL < TRUE); IS NULL reads only whether it has rows (keyed);
- anything else on the way (``*``, ``/``, ``%``, CASE, COALESCE, functions) keeps the
  aggregate keyed exactly. So does a statistic two conditions read in opposite directions.

In machine numbers: at most one ``+``/``-`` lies between the aggregate and its comparison, and
its other operand is one column or constant. Integers: the aggregate's largest magnitude over
the table (the sum of magnitudes for a sum) plus that operand's stays below 2**62, so nothing
wraps around. Doubles: the aggregated column's values are finite with magnitudes summing below
1e300, so every value the aggregate takes is finite; IEEE addition and comparison are monotone
on finite operands, and one more addition either stays monotone (rounding, overflow to an
infinity) or gives every value the same result (an infinite or NaN operand).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfs_cer.match.rowpattern.conditions import (
    C_ADD,
    C_AGG,
    C_AND,
    C_CASE,
    C_CLS,
    C_CMP,
    C_COALESCE,
    C_COL,
    C_CONST,
    C_FUNC,
    C_ISNULL,
    C_MNUM,
    C_NEG,
    C_NOT,
    C_OR,
    C_SUB,
    K_FLOAT,
    K_INT,
    Conditions,
)

#: no statistic to dominate on
NONE = (-1, 0, 0)
#: (statistic) -> the aggregate functions (0 count, 1 sum, 2 avg, 3 min, 4 max) that rise with it
_RISES = {0: (0,), 1: (1, 2), 2: (3,), 3: (4,)}
_INT_LIMIT = 2.0**62
_FLOAT_LIMIT = 1e300


@dataclass(frozen=True)
class _Value:
    """What the analysis knows of one stack entry: how it moves with the statistic (0: it does
    not read it, 1 / -1: it rises / falls, None: neither), the additions between it and the
    aggregate, and (for an operand) whether it is one column or constant and its magnitude's
    bound as an integer (0 for a double)."""

    sign: int | None
    adds: int = 0
    simple: bool = False
    bound: float = 0.0


def _combine(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    if a == 0 or a == b:
        return b
    return a if b == 0 else None


def _flip(a: int | None) -> int | None:
    return None if a is None else -a


def dominance(c: Conditions) -> np.ndarray:
    """(aggregate, statistic, direction) for the VM, or (-1, 0, 0): the first statistic of a
    running aggregate (rows of ``c.accumulators``: slot, kind, name, statistics read) that every
    condition reads monotonically, within the bounds above."""
    code, code_start, const_i, const_kind = c.code, c.code_start, c.const_i, c.const_kind
    icols, inull, fcols, fnull = c.icols, c.inull, c.fcols, c.fnull
    for a, (slot, kind, _name, stats) in enumerate(c.accumulators.tolist()):
        for stat in range(4):
            if not stats & (1 << stat) or (stat == 0 and stats != 1):
                continue
            found = _direction(code, code_start, a, stat, const_i, const_kind, icols, inull)
            if found is None:
                continue
            direction, extra = found
            if direction != 0 and _bounded(kind, slot, stat, extra, icols, inull, fcols, fnull):
                return np.array([a, stat, direction], np.int64)
    return np.array(NONE, np.int64)


def _direction(
    code: np.ndarray,
    code_start: np.ndarray,
    a: int,
    stat: int,
    const_i: np.ndarray,
    const_kind: np.ndarray,
    icols: np.ndarray,
    inull: np.ndarray,
) -> tuple[int, float] | None:
    """How every condition moves with statistic ``stat`` of aggregate ``a`` (0: none reads it)
    and the largest integer operand added to it, or None when some condition is not monotone
    in it."""
    direction: int | None = 0
    extra = 0.0
    for v in range(code_start.shape[0] - 1):
        stack: list[_Value] = []
        for pc in range(int(code_start[v]), int(code_start[v + 1])):
            op = int(code[pc, 0])
            if op == C_CONST:
                c = int(code[pc, 1])
                bound = float(abs(int(const_i[c]))) if const_kind[c] == K_INT else 0.0
                stack.append(_Value(0, simple=True, bound=bound))
            elif op == C_COL:
                bound = 0.0
                if code[pc, 2] == K_INT:
                    values = icols[int(code[pc, 1])][~inull[int(code[pc, 1])]]
                    bound = float(np.abs(values.astype(np.float64)).max()) if values.size else 0.0
                stack.append(_Value(0, simple=True, bound=bound))
            elif op == C_AGG:
                rises = int(code[pc, 5]) == a and int(code[pc, 4]) in _RISES[stat]
                stack.append(_Value(1 if rises else 0))
            elif op in (C_ADD, C_SUB):
                y, x = stack.pop(), stack.pop()
                ys = y.sign if op == C_ADD else _flip(y.sign)
                if x.sign is None or ys is None or (x.sign != 0 and ys != 0):
                    stack.append(_Value(None))
                elif x.sign == 0 and ys == 0:
                    stack.append(_Value(0))
                else:
                    dep, other = (x, y) if x.sign != 0 else (y, x)
                    if dep.adds >= 1 or not other.simple:
                        stack.append(_Value(None))
                    else:
                        extra = max(extra, other.bound)
                        stack.append(_Value(x.sign or ys, adds=1))
            elif op == C_NEG:
                x = stack.pop()
                stack.append(_Value(_flip(x.sign), x.adds))
            elif op == C_NOT:
                stack.append(_Value(_flip(stack.pop().sign)))
            elif op in (C_AND, C_OR):
                y, x = stack.pop(), stack.pop()
                stack.append(_Value(_combine(x.sign, y.sign)))
            elif op == C_CMP:
                y, x = stack.pop(), stack.pop()
                s = _combine(x.sign, _flip(y.sign))
                cmp = int(code[pc, 1])  # = <> < <= > >=
                if s is not None and s != 0 and cmp in (0, 1):
                    s = None
                stack.append(_Value(None if s is None else -s if cmp in (2, 3) else s))
            elif op == C_ISNULL:  # reads whether the aggregate has rows: keyed exactly
                stack.append(_Value(None if stack.pop().sign is None else 0))
            else:  # * / % CASE COALESCE functions CLASSIFIER MATCH_NUMBER: not monotone here
                if op == C_COALESCE:
                    taken = int(code[pc, 1])
                elif op == C_CASE:
                    taken = 2 * int(code[pc, 1]) + 1
                elif op == C_FUNC:
                    taken = 1
                elif op in (C_CLS, C_MNUM):
                    taken = 0
                else:  # * / %
                    taken = 2
                args = [stack.pop() for _ in range(taken)]
                stack.append(_Value(0 if all(x.sign == 0 for x in args) else None))
        if stack:
            direction = _combine(direction, stack[-1].sign)
        if direction is None:
            return None
    return (direction or 0), extra


def _bounded(
    kind: int,
    slot: int,
    stat: int,
    extra: float,
    icols: np.ndarray,
    inull: np.ndarray,
    fcols: np.ndarray,
    fnull: np.ndarray,
) -> bool:
    """Whether every value the statistic takes, plus the integer operand added to it, stays in
    the range where machine arithmetic is monotone (see the module's notes)."""
    if stat == 0 or kind < 0:  # a count: at most the rows
        return extra < _INT_LIMIT
    if kind == K_INT:
        values = icols[slot][~inull[slot]].astype(np.float64)
        magnitude = np.abs(values)
        most = float(magnitude.sum() if stat == 1 else magnitude.max()) if values.size else 0.0
        return most + extra < _INT_LIMIT
    assert kind == K_FLOAT
    values = fcols[slot][~fnull[slot]]
    if not np.isfinite(values).all():
        return False
    return stat != 1 or float(np.abs(values).sum()) < _FLOAT_LIMIT
