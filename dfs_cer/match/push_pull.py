"""Push-pull's storage-side filter (Purtzel et al., the paper's baseline): keep a variable's
events that take part in some match of the pattern projected on the processed variables and
that variable, evaluated over the uploaded events and the local candidates."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from dfs_cer.config import QueryConfig
from dfs_cer.match.cer import pattern_items, run_cer
from dfs_cer.pattern.ir import Concatenation, Label, Quantified, RowPattern
from dfs_cer.query import Query, analyze
from dfs_cer.query.expr import (
    Aggregate,
    BinaryOp,
    Classifier,
    Column,
    Expr,
    Literal,
    and_all,
    conjuncts,
    walk,
)
from dfs_cer.query.model import Definition

MARK = "__dfs_cer_var"
ROW = "__dfs_cer_row"


def _refs(e: Expr, owner: str) -> set[str]:
    return {n.variable or owner for n in walk(e) if isinstance(n, Column)}


def _projectable(e: Expr, owner: str, keep_vars: set[str]) -> bool:
    """Can this conjunct be evaluated on the projection? Running aggregates and labels depend on
    the rows between the variables, which the projection does not have: they are dropped."""
    if any(isinstance(n, Aggregate | Classifier) for n in walk(e)):
        return False
    return _refs(e, owner) <= keep_vars


def filter_by_projection(query: Query, variable: str, local: pa.Table, uploads: dict[str, pa.Table]) -> np.ndarray:
    """Boolean mask over ``local`` (the variable's candidates): True where the event completes a
    projected match. Conditions on variables outside the projection are dropped (the filter may
    keep too much, never too little), and so are running aggregates and CLASSIFIER()."""
    mr = query.recognize
    keep_vars = set(uploads) | {variable}
    first = analyze(query, local.schema)
    items, unordered = pattern_items(mr.pattern, {v.name for v in first.variables if v.any_row})
    kept = [i for i in items if i.name in keep_vars and not i.negated]
    if unordered or any(i.kleene for i in kept if i.name == variable):
        return np.ones(local.num_rows, bool)  # keep everything: sound, only less selective
    elements: list[RowPattern] = [Quantified(Label(i.name), 1, None) if i.kleene else Label(i.name) for i in kept]
    pattern: RowPattern = Concatenation(tuple(elements)) if len(elements) > 1 else elements[0]
    definitions = []
    for name in [i.name for i in kept]:
        d = mr.definition(name)
        parts = [] if d is None else [c for c in conjuncts(d.condition) if _projectable(c, name, keep_vars)]
        parts.append(BinaryOp("=", Column(MARK, name), Literal(name)))
        cond = and_all(parts)
        assert cond is not None
        definitions.append(Definition(name, cond))
    from dfs_cer.query.model import Measure

    projected = dataclasses.replace(query, recognize=dataclasses.replace(
        mr, pattern=pattern, definitions=tuple(definitions), measures=(Measure(Column(ROW, variable), "r"),),
        all_matches=True, subsets=()))
    tables = [local.append_column(MARK, pa.array([variable] * local.num_rows, pa.string()))
              .append_column(ROW, pa.array(np.arange(local.num_rows, dtype=np.int64)))]
    for name, t in uploads.items():
        tables.append(t.append_column(MARK, pa.array([name] * t.num_rows, pa.string()))
                      .append_column(ROW, pa.array(np.full(t.num_rows, -1, np.int64))))
    combined = pa.concat_tables(tables, promote_options="permissive")
    analysis = analyze(projected, combined.schema, QueryConfig(dedup=False))  # a superset filter: keep all
    # SQL semantics orders tied rows by row (here: by storage node, unknown to this node), so
    # consecutive variables may share a timestamp; skip-till-any-match never chains them
    result = run_cer(combined, analysis, time_order="strict" if mr.all_matches else "relaxed").table
    mask = np.zeros(local.num_rows, bool)
    if result.num_rows:
        hits = np.asarray(result.column("r").to_numpy(zero_copy_only=False), np.int64)
        mask[hits[hits >= 0]] = True
    return mask
