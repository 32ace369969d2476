"""One schema for the rows several storage nodes serve.

Nodes serving one log may describe it with schemas that differ without differing in any value:
a column nullable on one node and not on another (shard sets written separately, a node written
from an input without NULLs), or text as ``string`` on one and ``large_string`` on another.
Those unify (nullable wins, the large type wins) and the nodes' rows concatenate under the
unified schema. Any other difference (``int32`` against ``int64``, ``float`` against
``double``, another time unit or zone, another column) changes what a condition computes on a
node (overflow, rounding, the time unit of the intervals the nodes exchange), so it is refused
with one message naming the column, the two types and the two nodes, whatever the strategy.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from dfs_cer.errors import StorageError

#: types that hold the same values and compute the same results: the second wins
SAME_VALUES = {
    (pa.string(), pa.large_string()): pa.large_string(),
    (pa.binary(), pa.large_binary()): pa.large_binary(),
}

FIX = "shard every node's data with one schema (dfs-cer shard writes one for all nodes)"


def _type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if a.equals(b):
        return a
    return SAME_VALUES.get((a, b)) or SAME_VALUES.get((b, a))


def unify(schemas: Sequence[pa.Schema], nodes: Sequence[str]) -> pa.Schema:
    """The schema of ``schemas``' rows together (``nodes[i]`` names who serves ``schemas[i]``):
    nullable where any is, the large text type where any has it; else a
    :class:`~dfs_cer.errors.StorageError` naming the column, its two types and the two nodes."""
    first = schemas[0]
    fields = list(first)
    for other, node in zip(schemas[1:], nodes[1:], strict=True):
        if other.names != first.names:
            extra = [n for n in other.names if n not in first.names]
            missing = [n for n in first.names if n not in other.names]
            what = "; ".join(
                [f"columns {', '.join(missing)} only on {nodes[0]}"] * bool(missing)
                + [f"columns {', '.join(extra)} only on {node}"] * bool(extra)
            )
            raise StorageError(
                f"storage nodes {nodes[0]} and {node} serve different columns "
                f"({what or f'in another order: {first.names} vs {other.names}'}); {FIX}"
            )
        differ = [
            f"{a.name}: {a.type} vs {b.type}"
            for a, b in zip(fields, other, strict=True)
            if _type(a.type, b.type) is None
        ]
        if differ:
            raise StorageError(
                f"storage nodes {nodes[0]} and {node} serve different schemas "
                f"({'; '.join(differ[:3])}): the values, or what conditions compute on them, "
                f"differ; {FIX}"
            )
        for i, b in enumerate(other):
            a = fields[i]
            kind = _type(a.type, b.type)
            assert kind is not None
            if not kind.equals(a.type) or (b.nullable and not a.nullable):
                fields[i] = a.with_type(kind).with_nullable(a.nullable or b.nullable)
    return pa.schema(fields, metadata=first.metadata)


def aligned(tables: Sequence[pa.Table], nodes: Sequence[str]) -> list[pa.Table]:
    """``tables`` (``nodes[i]`` serves ``tables[i]``, same columns) each cast to their
    :func:`unify`'d schema."""
    if all(t.schema.equals(tables[0].schema) for t in tables[1:]):
        return list(tables)
    schema = unify([t.schema for t in tables], nodes)
    return [t if t.schema.equals(schema) else t.cast(schema) for t in tables]


def concat(tables: Sequence[pa.Table], nodes: Sequence[str]) -> pa.Table:
    """``tables`` (``nodes[i]`` serves ``tables[i]``) as one table of their :func:`unify`'d
    schema."""
    return pa.concat_tables(aligned(tables, nodes)) if tables else pa.table({})
