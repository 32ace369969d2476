"""MATCH_NUMBER() over a split input (see :mod:`dfs_cer.plan.chunks`): each time chunk numbers
its own matches from 1; after the merge a match's number is its place among its partition's
matches, in the order of their first rows. An empty match the relation shows no row of (ALL ROWS
PER MATCH OMIT EMPTY MATCHES, WITH UNMATCHED ROWS) still has a number: a chunk adds a stand-in row
for it (:data:`EMPTY`), counted by the renumbering and dropped after it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.plan.chunks import renumbered
from dfs_cer.query import Analysis
from dfs_cer.query.model import RowsPerMatch

#: True on a row that only stands in for an empty match (see :func:`with_stand_ins`)
EMPTY = "__dfs_cer_empty"


def hashable(value: Any) -> Any:
    """A PARTITION BY value as a dictionary key (list and struct values become tuples)."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, hashable(v)) for k, v in value.items())
    return value


def renumber(
    relation: pa.Table, analysis: Analysis, start_column: str, rank_column: str
) -> pa.Table:
    """MATCH_NUMBER() measures numbered over the whole partition: each chunk numbered its own
    matches from 1; a match's number is its place among the partition's matches ordered by
    their first row (``start_column``: its time, ``rank_column``: its rank among the rows of that
    time, NULL on unmatched rows). The Spark split does the same with a window
    (:func:`dfs_cer.spark.distributed.renumber_frame`)."""
    names = renumbered(analysis)
    if not names or relation.num_rows == 0:
        return relation
    mr = analysis.query.recognize
    index: dict[
        tuple[Any, ...], int
    ] = {}  # (the reference's output rows; the Spark split uses a window)
    part = (
        np.array(
            [
                index.setdefault(tuple(hashable(v) for v in r.values()), len(index))
                for r in relation.select(list(mr.partition_by)).to_pylist()
            ],
            np.int64,
        )
        if mr.partition_by
        else np.zeros(relation.num_rows, np.int64)
    )
    start = np.asarray(relation.column(start_column).to_numpy(zero_copy_only=False), np.int64)
    matched = np.asarray(
        relation.column(rank_column).is_valid().to_numpy(zero_copy_only=False), bool
    )
    rank = np.asarray(
        relation.column(rank_column).fill_null(0).to_numpy(zero_copy_only=False), np.int64
    )
    keys = np.stack([~matched, part, start, rank]).astype(np.int64)
    unique, which = np.unique(keys, axis=1, return_inverse=True)
    first_of_part = np.r_[
        True, (unique[0, 1:] != unique[0, :-1]) | (unique[1, 1:] != unique[1, :-1])
    ]
    within = np.arange(unique.shape[1]) - np.maximum.accumulate(
        np.where(first_of_part, np.arange(unique.shape[1]), 0)
    )
    number = (within + 1)[np.asarray(which).ravel()]
    for name in names:  # (an unmatched row keeps its NULL)
        column = relation.column(name)
        numbered = pc.if_else(
            pa.array(matched), pa.array(number, pa.int64()).cast(column.type), column
        )
        relation = relation.set_column(relation.column_names.index(name), name, numbered)
    return relation


def stands_in(analysis: Analysis) -> bool:
    """Do a split run's empty matches need stand-in rows? Where MATCH_NUMBER() is renumbered and
    the relation shows no row of an empty match, though the match has a number."""
    mode = analysis.query.recognize.rows_per_match
    hidden = (RowsPerMatch.ALL_ROWS_OMIT_EMPTY, RowsPerMatch.ALL_ROWS_WITH_UNMATCHED)
    return mode in hidden and bool(renumbered(analysis))


def with_stand_ins(
    relation: pa.Table,
    analysis: Analysis,
    heads: pa.Table,
    start: np.ndarray,
    rank: np.ndarray,
    columns: tuple[str, str],
) -> pa.Table:
    """``relation`` (with its start and rank ``columns``, see :func:`renumber`) with the
    :data:`EMPTY` column (False), and a stand-in row (True) for each empty match the relation shows
    no row of: its first row is in ``heads``, its time in ``start``, its rank in ``rank``; it has
    its partition's values and NULL in every other column."""
    n = heads.num_rows
    marked = relation.append_column(EMPTY, pa.array(np.zeros(relation.num_rows, bool)))
    if not n:
        return marked
    partition_by = set(analysis.query.recognize.partition_by)
    values = {
        columns[0]: pa.array(np.asarray(start, np.int64)),
        columns[1]: pa.array(np.asarray(rank, np.int64)),
        EMPTY: pa.array(np.ones(n, bool)),
    }
    arrays = [
        values[f.name]
        if f.name in values
        else heads.column(f.name).combine_chunks().cast(f.type)
        if f.name in partition_by
        else pa.nulls(n, f.type)
        for f in marked.schema
    ]
    return pa.concat_tables([marked, pa.Table.from_arrays(arrays, schema=marked.schema)])
