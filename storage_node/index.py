"""Value indexes over a shard set's rows by time: ``open`` reads only the rows a query can use.

Each variable of the paper's queries (and most real ones) names an event type: ``A.type =
'T_12' AND ...``. A value index maps each value of such a column to the positions of its rows in
the node's rows sorted by time (ascending, so a value's rows stay in time order). When every
variable's independent condition has an equality (or IN) on one indexed column, the rows a
query can label are inside the union of those values' rows; ``open`` then evaluates the
query's filter over that union instead of every row. The filter still runs, so the rows kept
are exactly those of a full scan, in the same order.

Indexes are built on first use per column (one pass: dictionary-encode, stable sort) and
dropped with the node's cached rows when files are appended. They cost 4 bytes per row and
indexed column (int32 positions; int64 beyond 2**31 rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:  # the query model loads with the first query, not with the node
    from dfs_cer.query.expr import Expr

#: a column is indexed only when it has at most this share of distinct values (an event type,
#: a category; not a measurement)
MAX_DISTINCT_SHARE = 0.05

#: up to this many values an index is built a value at a time (a pass per value over 2-byte
#: codes); more take one stable sort of every row
FEW_VALUES = 64


@dataclass(frozen=True, slots=True)
class ValueIndex:
    """Row positions by value: ``positions[starts[k]:starts[k + 1]]`` hold value ``k``'s rows."""

    values: dict[object, int]
    starts: np.ndarray
    positions: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.starts.nbytes + self.positions.nbytes)

    def codes(self, values: list[object]) -> list[int]:
        """The codes of ``values`` present in the column, each once (``IN ('a', 'a')``)."""
        return list(dict.fromkeys(k for k in (self.values.get(v) for v in values) if k is not None))

    def rows(self, values: list[object]) -> np.ndarray:
        """Sorted positions of the rows holding any of ``values``."""
        parts = [self.positions[self.starts[k] : self.starts[k + 1]] for k in self.codes(values)]
        if not parts:
            return np.zeros(0, np.int64)
        return (
            parts[0].astype(np.int64)
            if len(parts) == 1
            else np.sort(np.concatenate(parts)).astype(np.int64)
        )


def indexable(dtype: pa.DataType, column: pa.ChunkedArray, sample: int = 65_536) -> bool:
    """Worth an index built ahead of queries: a string (or dictionary-encoded string) column
    whose first ``sample`` rows have few distinct values, such as an event type (free text and
    ids are left out; integer columns are indexed on first use, as they are more often
    measurements than categories)."""
    if _kind(dtype) is not str:
        return False
    head = column.slice(0, sample)
    return len(head) > 0 and pc.count_distinct(head).as_py() <= max(
        1.0, MAX_DISTINCT_SHARE * len(head)
    )


def build(column: pa.ChunkedArray | pa.Array) -> ValueIndex | None:
    """The value index of ``column`` (None when it has too many distinct values to pay)."""
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = (
            encoded.combine_chunks()
            if encoded.num_chunks
            else pa.array([], column.type).dictionary_encode()
        )
    dictionary = encoded.dictionary
    n = len(encoded)
    if n == 0 or len(dictionary) > max(1, MAX_DISTINCT_SHARE * n):
        return None
    # the narrowest codes (a node building its indexes at start-up peaks here): 2 bytes per row
    # up to 65,535 values, which numpy's stable sort orders in one radix pass
    indices = encoded.indices
    del encoded
    codes = np.asarray(indices.fill_null(len(dictionary)).to_numpy(zero_copy_only=False))
    del indices
    codes = codes.astype(np.uint16 if len(dictionary) < 2**16 - 1 else np.int64)
    counts = np.bincount(codes, minlength=len(dictionary) + 1)[: len(dictionary)]
    starts = np.zeros(len(dictionary) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    dtype = np.int32 if n < 2**31 else np.int64
    if len(dictionary) <= FEW_VALUES:  # value by value: no 8-byte order over every row
        positions = np.empty(int(starts[-1]), dtype)
        for k in range(len(dictionary)):
            positions[starts[k] : starts[k + 1]] = np.flatnonzero(codes == k)
    else:
        order = np.argsort(codes, kind="stable")  # each value's rows stay in time order
        positions = order[: starts[-1]].astype(dtype)
    del codes
    return ValueIndex({v: k for k, v in enumerate(dictionary.to_pylist())}, starts, positions)


def _kind(dtype: pa.DataType) -> type | None:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return str
    if pa.types.is_integer(dtype):
        return int
    return None


def equality(condition: Expr | None, schema: pa.Schema) -> tuple[str, list[object]] | None:
    """``(column, values)`` of a conjunct of ``condition`` that says ``column = value`` or
    ``column IN (values)`` for a string or integer column and literals of its kind, converted
    exactly to the storage nodes' filter (so a full scan's filter implies it); else None."""
    from dfs_cer.query.arrow_filter import to_arrow_filter
    from dfs_cer.query.expr import BinaryOp, Column, InList, Literal, conjuncts

    if condition is None:
        return None
    for c in conjuncts(condition):
        found: tuple[str, list[object]] | None = None
        if isinstance(c, BinaryOp) and c.op == "=":
            for col, lit in ((c.left, c.right), (c.right, c.left)):
                if isinstance(col, Column) and isinstance(lit, Literal):
                    found = (col.name, [lit.value])
        elif (
            isinstance(c, InList)
            and not c.negated
            and isinstance(c.operand, Column)
            and all(isinstance(i, Literal) for i in c.items)
        ):
            found = (c.operand.name, [i.value for i in c.items if isinstance(i, Literal)])
        if found is None or found[0] not in schema.names:
            continue
        kind = _kind(schema.field(found[0]).type)
        if kind is None or not all(type(v) is kind for v in found[1]):
            continue
        if to_arrow_filter(c, schema) is None:
            continue
        return found
    return None


#: a range on an integer column: (low, high), both inclusive, None for unbounded
Range = tuple[int | None, int | None]


@dataclass(frozen=True, slots=True)
class SortedProjection:
    """For each value of an indexed column, its rows' positions ordered by an integer column's
    value (rows where that column is NULL left out: no range holds for them)."""

    keys: np.ndarray
    positions: np.ndarray
    starts: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.positions.nbytes + self.starts.nbytes)

    def rows(self, codes: list[int], bounds: Range) -> np.ndarray:
        """Sorted positions of the rows of the values ``codes`` whose key lies inside ``bounds``."""
        low, high = bounds
        parts = []
        for k in codes:
            a, b = int(self.starts[k]), int(self.starts[k + 1])
            keys = self.keys[a:b]
            lo = a if low is None else a + int(np.searchsorted(keys, low, "left"))
            hi = b if high is None else a + int(np.searchsorted(keys, high, "right"))
            if hi > lo:
                parts.append(self.positions[lo:hi])
        if not parts:
            return np.zeros(0, np.int64)
        return np.sort(np.concatenate(parts)).astype(np.int64)


def project(index: ValueIndex, column: pa.ChunkedArray | pa.Array) -> SortedProjection:
    """``index``'s rows ordered, per value, by ``column`` (an integer column)."""
    values = column.to_numpy(zero_copy_only=False) if column.null_count == 0 else None
    valid = None
    if values is None:
        valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), bool)
        values = np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False))
    positions = index.positions.astype(np.int64)
    codes = np.repeat(np.arange(index.starts.size - 1), np.diff(index.starts))
    keys = np.asarray(values, np.int64)[positions]
    if valid is not None:
        keep = valid[positions]
        positions, codes, keys = positions[keep], codes[keep], keys[keep]
    order = np.lexsort((keys, codes))
    counts = np.bincount(codes, minlength=index.starts.size - 1)
    starts = np.zeros(index.starts.size, np.int64)
    np.cumsum(counts, out=starts[1:])
    return SortedProjection(keys[order], positions[order].astype(index.positions.dtype), starts)


_INT64 = (-(2**63), 2**63 - 1)


def int_range(condition: Expr | None, schema: pa.Schema, skip: str) -> tuple[str, Range] | None:
    """``(column, (low, high))`` of a conjunct of ``condition`` bounding an integer column
    other than ``skip`` by integer literals (``x <= 200``, ``x BETWEEN 1 AND 9``), converted
    exactly to the nodes' filter; else None."""
    from dfs_cer.query.arrow_filter import to_arrow_filter
    from dfs_cer.query.expr import Between, BinaryOp, Column, Literal, conjuncts

    if condition is None:
        return None
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    for c in conjuncts(condition):
        found: tuple[str, Range] | None = None
        if isinstance(c, BinaryOp) and c.op in flip:
            col, lit, op = c.left, c.right, c.op
            if isinstance(lit, Column) and isinstance(col, Literal):
                col, lit, op = lit, col, flip[op]
            if isinstance(col, Column) and isinstance(lit, Literal) and type(lit.value) is int:
                v = lit.value
                found = (
                    col.name,
                    {"<": (None, v - 1), "<=": (None, v), ">": (v + 1, None), ">=": (v, None)}[op],
                )
        elif (
            isinstance(c, Between)
            and not c.negated
            and isinstance(c.operand, Column)
            and isinstance(c.low, Literal)
            and isinstance(c.high, Literal)
            and type(c.low.value) is int
            and type(c.high.value) is int
        ):
            found = (c.operand.name, (c.low.value, c.high.value))
        if found is None or found[0] == skip or found[0] not in schema.names:
            continue
        dtype = schema.field(found[0]).type
        if not pa.types.is_integer(dtype) or to_arrow_filter(c, schema) is None:
            continue
        low, high = found[1]
        if (low is not None and low > _INT64[1]) or (high is not None and high < _INT64[0]):
            return found[0], (1, 0)  # nothing can hold
        low = None if low is None or low < _INT64[0] else low
        high = None if high is None or high > _INT64[1] else high
        return found[0], (low, high)
    return None
