"""Do the nodes of a query make one shard set? What a node says it holds whole (every row of its
PARTITION BY groups, whole time windows, every copy of an event) holds only among the nodes of
its own shard set, all of them: two shard sets written separately (``dfs-cer shard --nodes 1``
once per day) each say "node 0 of 1", and served together neither holds whole groups.

The compute node checks the nodes' claims against each other (:func:`conflict`) before it
relies on any: distinct indices covering ``0..count-1``, one count (the query's nodes), one
placement and its column, one shard set. When they do not hold, nothing the layout promises is
used: the query runs as over randomly placed rows (exact; the trace says why). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from dfs_cer.transport.replies import Layout


def conflict(claims: Sequence[Layout | None], where: Sequence[str]) -> str | None:
    """Why the claims of the nodes ``where`` (in order) cannot all hold together; None when
    they can (or when no node makes any: nodes from before layouts were reported)."""
    if all(c is None for c in claims):
        return None
    n = len(claims)
    missing = [w for c, w in zip(claims, where, strict=True) if c is None or c.node is None]
    if missing:
        return f"{missing[0]} does not say which node of its shard set it is"
    said = [(c, w) for c, w in zip(claims, where, strict=True) if c is not None]
    sets = sorted({c.shard_set for c, _ in said if c.shard_set is not None})
    if len(sets) > 1:
        first = {s: next(w for c, w in said if c.shard_set == s) for s in sets}
        return (
            f"the nodes serve {len(sets)} shard sets written separately ({first[sets[0]]} one, "
            f"{first[sets[1]]} another)"
        )
    for c, w in said:
        if c.nodes != n:
            return f"{w} is node {c.node} of {c.nodes} of its shard set, the query has {n} nodes"
    seen: dict[int | None, str] = {}
    for c, w in said:
        if c.node in seen:
            return f"{seen[c.node]} and {w} both say they are node {c.node} of {c.nodes}"
        seen[c.node] = w
    first_claim, first_node = said[0]
    for c, w in said[1:]:
        if (c.partitioning, c.key) != (first_claim.partitioning, first_claim.key):
            return f"{first_node} was sharded {_how(first_claim)}, {w} {_how(c)}: not one shard set"
    return None


def _how(c: Layout) -> str:
    return f"by {c.partitioning}" + (f" of {c.key}" if c.key else "")


def note(reason: str) -> str:
    """The trace's note of a query whose nodes' claims conflict."""
    return (
        f"the storage nodes' layout is not relied on: {reason}; PARTITION BY groups, time "
        "windows and copies of an event are not taken as whole on a node (shard the log as one "
        "set, or add late data with dfs-cer shard --append, to have them used)"
    )
