"""The row-pattern VM's state, grouped (:mod:`dfs_cer.match.vm`).

Inputs: the program (:class:`Instructions`), what the rows say per label (:class:`Labels`), the
dependent conditions (:class:`Predicates`), the columns they read (:class:`Columns`), the units
of work (:class:`Units`) and the run's options (:class:`Options`). Working state of a run: the
thread lists (:class:`Threads`), the path arena (:class:`Arena`), the equivalence table
(:class:`Dedup`), fixed-size scratch arrays (:class:`Scratch`) and the output (:class:`Found`).

Named tuples of arrays: numba passes them to compiled functions field by field, with no cost
over separate arguments; a structure whose arrays grow is rebuilt with the grown ones.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Instructions(NamedTuple):
    """The instruction program (:mod:`dfs_cer.match.program`): opcode and two arguments each."""

    op: np.ndarray
    arg_a: np.ndarray
    arg_b: np.ndarray


class Labels(NamedTuple):
    """What the rows say per label: ``masks[v, i]`` (row i passes label v's row-local
    conditions), ``dependent[v]`` (label v also runs a per-thread condition program),
    ``free[v]`` / ``next_true[v, i]`` (idle-row skipping, see :func:`run`) and ``next_start[i]``
    (the first row >= i where a match can start)."""

    masks: np.ndarray
    dependent: np.ndarray
    free: np.ndarray
    next_true: np.ndarray
    next_start: np.ndarray


class Predicates(NamedTuple):
    """The dependent conditions' programs (:mod:`dfs_cer.match.conditions`): ``code`` rows from
    ``code_start[v]`` to ``code_start[v + 1]`` for label v, their constants, the label members of
    each name (variables, then subsets), the names a thread's equivalence key keeps and whether
    navigation reaches deeper than the first/last row of a name (``deep``: the path decides)."""

    code: np.ndarray
    code_start: np.ndarray
    const_i: np.ndarray
    const_f: np.ndarray
    const_kind: np.ndarray
    members: np.ndarray
    relevant: np.ndarray
    deep: bool


class Columns(NamedTuple):
    """Column values the conditions read (int and float slots with null flags) and row times."""

    icols: np.ndarray
    inull: np.ndarray
    fcols: np.ndarray
    fnull: np.ndarray
    ts: np.ndarray


class Units(NamedTuple):
    """The units of work: rows ``[parts[p], parts[p + 1])``, the rows ``nav_parts[p]`` their
    navigation may read, and whether the rows are cut out of longer partitions."""

    parts: np.ndarray
    nav_parts: np.ndarray
    cut_start: bool
    cut_end: bool


class Options(NamedTuple):
    """``window`` (time units, -1: none), AFTER MATCH SKIP mode and target, and ``max_matches``."""

    window: int
    skip_mode: int
    skip_target: int
    max_matches: int


class Threads(NamedTuple):
    """Two thread lists in preference order: index [cur] is the current list, [nxt] the next
    one; swapping two ints instead of array references keeps reference counting out of the
    inner loop. Per thread: instruction, path node, exclusion depth, the thread of the current
    list it came from, and the first/last row of each variable (only where conditions read
    other variables)."""

    pc: np.ndarray
    node: np.ndarray
    depth: np.ndarray
    src: np.ndarray
    first: np.ndarray
    last: np.ndarray


class Arena(NamedTuple):
    """The path nodes of one match attempt: rows ``lo..row`` labelled ``label`` (``excl``:
    inside ``{- -}``), after node ``parent`` (-1: the path's start)."""

    parent: np.ndarray
    row: np.ndarray
    label: np.ndarray
    excl: np.ndarray
    lo: np.ndarray


class Dedup(NamedTuple):
    """Open-addressing set of the equivalence keys seen in one step (``stamp``: the step)."""

    stamp: np.ndarray
    key: np.ndarray


class Scratch(NamedTuple):
    """Fixed-size working arrays: visit stamps of the instructions (per step, per closure),
    the key being built, the closure stack, the condition evaluation stacks and the history
    of the thread being advanced."""

    visited: np.ndarray
    cvisited: np.ndarray
    key: np.ndarray
    s_pc: np.ndarray
    s_depth: np.ndarray
    si: np.ndarray
    sf: np.ndarray
    sk: np.ndarray
    first_tmp: np.ndarray
    last_tmp: np.ndarray


class Found(NamedTuple):
    """The matches (start, exclusive end, unit) and their rows (match, row, label, excluded)."""

    m_start: np.ndarray
    m_end: np.ndarray
    m_part: np.ndarray
    r_match: np.ndarray
    r_row: np.ndarray
    r_label: np.ndarray
    r_excl: np.ndarray
