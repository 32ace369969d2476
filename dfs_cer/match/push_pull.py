"""Push-pull's storage-side filter (Purtzel et al., the paper's baseline): keep a variable's
events that take part in some match of the pattern projected on the processed variables and
that variable, evaluated over the uploaded events and the local candidates.

The filter keeps a superset of the events a match can use, for every pattern the analysis
lets push-pull run (every skippable pattern): single variables, alternations, PERMUTE, and
variables that occur more than once (``A N*? B N*? A``: each occurrence is matched as a
variable of its own, ``A`` and ``A__2``). Whatever cannot be evaluated on the projection is
dropped, which only keeps more: conditions on variables outside it, running aggregates,
CLASSIFIER(), MATCH_NUMBER() (it counts the query's matches, not the projection's), FIRST/LAST
with an offset (the k-th row of a variable the projection may not hold), references to a
repeated variable (SQL reads its last row so far, which the projection cannot tell), and the
preference order of alternatives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from dfs_cer.config import QueryConfig
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.match.cer.pattern import branches, normalise
from dfs_cer.match.rowpattern.engine import MAX_STEPS
from dfs_cer.options import TIME_UNITS, TimeUnit
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
)
from dfs_cer.pattern.properties import top_level_positions
from dfs_cer.query import Analysis, Query, analyze
from dfs_cer.query.expr import (
    Aggregate,
    BinaryOp,
    Classifier,
    Column,
    Expr,
    Literal,
    MatchNumber,
    Navigation,
    and_all,
    conjuncts,
    transform,
    walk,
)
from dfs_cer.query.model import Definition, MatchRecognize, Measure, Window, WindowUnit
from dfs_cer.work import Work, check

MARK = "__dfs_cer_var"
ROW = "__dfs_cer_row"
#: a second occurrence of variable A is matched as A__2
OCCURRENCE = "__"


def _refs(e: Expr, owner: str) -> set[str]:
    return {n.variable or owner for n in walk(e) if isinstance(n, Column)}


def _occurrences(p: RowPattern, seen: dict[str, int], any_row: set[str]) -> RowPattern:
    """``p`` with the k-th occurrence (k > 1) of each label renamed ``name__k`` (any-row
    variables keep their name: they are skipped, not matched)."""
    if isinstance(p, Label) and p.name not in any_row:
        seen[p.name] = seen.get(p.name, 0) + 1
        return p if seen[p.name] == 1 else Label(f"{p.name}{OCCURRENCE}{seen[p.name]}")
    if isinstance(p, Concatenation | Alternation | Permutation):
        return dataclasses.replace(p, items=tuple(_occurrences(i, seen, any_row) for i in p.items))
    if isinstance(p, Exclusion | Negation | Quantified):
        return dataclasses.replace(p, pattern=_occurrences(p.pattern, seen, any_row))
    assert isinstance(p, EmptyPattern | Anchor | Label), type(p).__name__
    return p


def base_name(name: str) -> str:
    """The variable an occurrence name stands for (``A__2`` -> ``A``)."""
    head, sep, tail = name.rpartition(OCCURRENCE)
    return head if sep and tail.isdigit() else name


def _renamed_self(e: Expr, old: str, new: str) -> Expr:
    return transform(
        e, lambda x: Column(x.name, new) if isinstance(x, Column) and x.variable == old else None
    )


def _projectable(
    e: Expr,
    owner: str,
    keep: set[str],
    repeated: set[str],
    before: Callable[[str, str], bool] | None,
) -> bool:
    """Can this conjunct be evaluated on the projection? ``before(r, owner)``: r's row comes
    before the owner's in every match (None: ALL MATCHES, where conditions see the whole match;
    under SQL's running semantics a later variable still reads NULL, which the projection,
    binding it, cannot reproduce)."""
    if any(isinstance(n, Aggregate | Classifier | MatchNumber) for n in walk(e)):
        return False
    if any(isinstance(n, Navigation) and not n.kind.physical and n.offset for n in walk(e)):
        # FIRST/LAST(x, k) read the k-th row of a variable, which the projection may not hold
        return False
    if before is not None and any(isinstance(n, Navigation) and n.kind.physical for n in walk(e)):
        return (
            False  # SQL's PREV/NEXT read rows next to the row, which the projection does not hold
        )
    refs = _refs(e, owner)
    if any(base_name(r) in repeated and r != owner for r in refs):
        return False
    if before is not None and any(r != owner and not before(r, owner) for r in refs):
        return False
    return {base_name(r) for r in refs} <= keep


def _projected(mr: MatchRecognize, keep: set[str], any_row: set[str]) -> MatchRecognize:
    """The clause with occurrences renamed and only projectable conjuncts, its pattern intact."""
    seen: dict[str, int] = {}
    pattern = _occurrences(normalise(mr.pattern), seen, any_row)
    repeated = {name for name, k in seen.items() if k > 1}
    positions = top_level_positions(pattern)

    def before(r: str, owner: str) -> bool:
        return bool(positions.get(r)) and max(positions[r]) < min(positions.get(owner, (-1,)))

    definitions = []
    for name, k in seen.items():
        d = mr.definition(name)
        for occurrence in range(1, k + 1):
            own = name if occurrence == 1 else f"{name}{OCCURRENCE}{occurrence}"
            if base_name(own) not in keep:
                continue
            parts = (
                [] if d is None else [_renamed_self(c, name, own) for c in conjuncts(d.condition)]
            )
            parts = [
                c
                for c in parts
                if _projectable(c, own, keep, repeated, None if mr.all_matches else before)
            ]
            parts.append(BinaryOp("=", Column(MARK, own), Literal(name)))
            cond = and_all(parts)
            assert cond is not None
            definitions.append(Definition(own, cond))
    return dataclasses.replace(
        mr,
        pattern=pattern,
        definitions=tuple(definitions),
        measures=(),
        subsets=(),
        all_matches=True,
    )


def time_unit(analysis: Analysis) -> TimeUnit:
    """The integer time unit ``analysis`` was bound with, as far as it matters: the window's unit
    for an integer ORDER BY column (a timestamp column's window is in its own unit, whatever this
    says; without a window no unit is read)."""
    unit = analysis.window_unit
    return unit if unit in TIME_UNITS else "s"


def filter_by_projection(
    query: Query,
    variable: str,
    local: pa.Table,
    uploads: dict[str, pa.Table],
    work: Work | None = None,
    max_matches: int = 10_000_000,
    max_steps: int = MAX_STEPS,
    *,
    integer_time_unit: TimeUnit = "s",
) -> np.ndarray:
    """Boolean mask over ``local`` (the variable's candidates): True where the event completes a
    projected match (module docstring: a superset, never too little). ``work`` bounds the
    matching (a storage node's deadline, cancellation and memory; see :mod:`dfs_cer.work`), as
    do ``max_matches`` (projected matches) and ``max_steps``: past one of them the matching
    ends with :class:`~dfs_cer.errors.MatchLimitError` or
    :class:`~dfs_cer.errors.MatchBudgetError` (no mask: a caller keeps every candidate).
    ``integer_time_unit``: the unit of an integer ORDER BY column, as the query was opened with
    (the window in the column's units depends on it)."""
    mr = query.recognize
    if mr.window is not None and mr.window.unit is not None and mr.window.unit.calendar:
        # the CER engine takes no calendar window: its longest span in days (31 a month, 366 a
        # year) admits every match the calendar window does, so the mask stays a superset
        days = mr.window.amount * mr.window.unit.seconds / 86400
        mr = dataclasses.replace(mr, window=Window(str(days), WindowUnit.DAY))
        query = dataclasses.replace(query, recognize=mr)
    keep = set(uploads) | {variable}
    config = QueryConfig(integer_time_unit=integer_time_unit, dedup=False)  # a superset: keep all
    first = analyze(query, local.schema, config)
    any_row = {v.name for v in first.variables if v.any_row}
    projected = _projected(mr, keep, any_row)
    sequences, unordered = branches(projected, any_row, guards=False)
    if unordered:
        return np.ones(local.num_rows, bool)  # a conjunction: sound, only less selective
    tables = [
        local.append_column(MARK, pa.array([variable] * local.num_rows, pa.string())).append_column(
            ROW, pa.array(np.arange(local.num_rows, dtype=np.int64))
        )
    ]
    for name, t in uploads.items():
        tables.append(
            t.append_column(MARK, pa.array([name] * t.num_rows, pa.string())).append_column(
                ROW, pa.array(np.full(t.num_rows, -1, np.int64))
            )
        )
    combined = pa.concat_tables(tables, promote_options="permissive")
    mask = np.zeros(local.num_rows, bool)
    for branch in sequences:
        kept = [i for i in branch.items if base_name(i.name) in keep and not i.negated]
        mine = [i for i in kept if base_name(i.name) == variable]
        if not mine or any(i.kleene for i in mine):
            return np.ones(local.num_rows, bool)  # keep everything: sound, only less selective
        # one occurrence of the variable at a time: its other occurrences may take events of
        # other storage nodes, which this node does not have (leaving them out keeps a superset)
        for own in mine:
            items = [i for i in kept if base_name(i.name) != variable or i is own]
            elements: list[RowPattern] = [
                Quantified(Label(i.name), 1, None) if i.kleene else Label(i.name) for i in items
            ]
            names = {i.name for i in items}
            recognize = dataclasses.replace(
                branch.recognize,
                pattern=Concatenation(tuple(elements)) if len(elements) > 1 else elements[0],
                definitions=tuple(d for d in branch.recognize.definitions if d.variable in names),
                measures=(Measure(Column(ROW, own.name), "r"),),
            )
            one = dataclasses.replace(query, recognize=recognize)
            analysis = analyze(one, combined.schema, config)
            # SQL semantics orders tied rows by row (here: by storage node, unknown to this node),
            # so
            # consecutive variables may share a timestamp; skip-till-any-match never chains them
            check(work)
            result = run_cer(
                combined,
                analysis,
                time_order="strict" if mr.all_matches else "relaxed",
                work=work,
                max_matches=max_matches,
                max_steps=max_steps,
            ).table
            if result.num_rows:
                hits = np.asarray(result.column("r").to_numpy(zero_copy_only=False), np.int64)
                mask[hits[hits >= 0]] = True
    return mask
