"""What a pushed input filter costs a storage node, bounded before it is pushed and again on
the node.

A LIKE pattern runs as a regular expression whose matching takes, per row, time in the order of
the pattern's size times the row's length (``'%a' || '%_' x 127`` over 2,000-character strings
is about a millisecond a row in Arrow's kernel; ORed 180 times, a quarter of a second). The
compute node pushes a condition only while its LIKE patterns hold at most
:data:`MAX_LIKE_CHARS` characters in all (else the input is computed on the compute node, named
in the trace); the node, which knows its rows' lengths, refuses (code ``input-filter``: the
compute node falls back the same way) a condition whose estimate :func:`filter_cost` exceeds
``storage.filter_cost_limit``.
"""

from __future__ import annotations

from collections.abc import Callable

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.expr import Column, Expr, Like, Literal, walk
from dfs_cer.query.input_filter import INPUT_FILTER

#: the most LIKE pattern characters (all LIKEs of one condition together) pushed to storage nodes
MAX_LIKE_CHARS = 1024


def like_chars(condition: Expr) -> int:
    """Characters of the literal LIKE patterns of ``condition``, all together."""
    return sum(
        len(n.pattern.value)
        for n in walk(condition)
        if isinstance(n, Like)
        and isinstance(n.pattern, Literal)
        and isinstance(n.pattern.value, str)
    )


def check_like_size(condition: Expr) -> None:
    """Refuse (code ``input-filter``) a condition whose LIKE patterns hold more than
    :data:`MAX_LIKE_CHARS` characters in all: the compute node does not push it, a node does
    not evaluate it."""
    chars = like_chars(condition)
    if chars > MAX_LIKE_CHARS:  # a node's CPU per row grows with the patterns' size
        raise QueryValidationError(
            f"LIKE patterns of {chars} characters in all are not pushed to storage nodes "
            f"(at most {MAX_LIKE_CHARS})",
            clause="input filter",
            code=INPUT_FILTER,
            hint="the input is computed on the compute node instead",
        )


def filter_cost(condition: Expr, lengths: Callable[[str], tuple[int, int]]) -> int:
    """Estimated character steps of evaluating ``condition``'s LIKEs over a node's rows: for each
    LIKE, its pattern's size (a pattern column: its longest value) times the operand's
    characters over all rows. ``lengths(column)`` is ``(characters over all rows, longest
    value)`` of a string column."""
    cost = 0
    for n in walk(condition):
        if not isinstance(n, Like) or not isinstance(n.operand, Column):
            continue
        if isinstance(n.pattern, Literal):
            size = len(n.pattern.value) if isinstance(n.pattern.value, str) else 0
        elif isinstance(n.pattern, Column):
            size = lengths(n.pattern.name)[1]
        else:
            continue
        cost += max(size, 1) * lengths(n.operand.name)[0]
    return cost
