"""A node's own time on a call, told in its reply, so the compute node can split a round into the
node's work and the wire (with the waiting): an action's reply header carries ``node_us``, a
pull's stream its schema metadata (``dfs_cer.node_us``), in whole microseconds. A value a node
leaves out or gets wrong is not read (it is only reported, never acted on)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

#: the reply header field
NODE_US = "node_us"
#: the pull stream's schema metadata key
STREAM_KEY = b"dfs_cer.node_us"
#: the most a node may claim (a day): anything else is not a time this call took
_MOST_US = 86_400 * 10**6


def stamp_header(header: Any, seconds: float) -> None:
    """Add the node's ``seconds`` on the call to an action's reply ``header`` (a dict)."""
    if isinstance(header, dict):
        header[NODE_US] = max(0, round(seconds * 1e6))


def stamp_stream(table: pa.Table, seconds: float) -> pa.Table:
    """``table`` (a pull's reply) with the node's ``seconds`` on the call in its metadata."""
    meta = dict(table.schema.metadata or {})
    meta[STREAM_KEY] = str(max(0, round(seconds * 1e6))).encode()
    return table.replace_schema_metadata(meta)


def node_seconds(value: object) -> float | None:
    """The seconds a reply's ``node_us`` says, None unless it is a whole number of microseconds
    in [0, a day]."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MOST_US:
        return None
    return value / 1e6


def timed_stream(table: pa.Table) -> tuple[pa.Table, float | None]:
    """A pull's reply without its time stamp, and the node's seconds it said (None: none)."""
    meta = table.schema.metadata
    if not meta or STREAM_KEY not in meta:
        return table, None
    raw = meta[STREAM_KEY]
    rest = {k: v for k, v in meta.items() if k != STREAM_KEY}
    value = int(raw) if raw.isdigit() and len(raw) <= 12 else None
    return table.replace_schema_metadata(rest or None), node_seconds(value)
