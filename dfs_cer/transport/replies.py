"""The storage nodes' replies to control actions, one frozen type per action, parsed once at the
edge (:meth:`dfs_cer.transport.client.StorageClient.call`).

A reply type lists the fields the compute node reads: a field without a default is required,
one with a default is optional and takes it when the node leaves it out (or sends null). A
missing or ill-typed field is a :class:`~dfs_cer.errors.ProtocolError` naming the action and
the field; fields the compute node does not read are ignored (a newer node may add some).
:data:`REPLIES` maps each action's name to its reply type.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

from dfs_cer.errors import ProtocolError


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply header: parse it with :meth:`parse`, write it back with :meth:`to_wire`."""

    #: the action this type answers
    ACTION: ClassVar[str] = ""

    @classmethod
    def parse(cls, header: Mapping[str, Any], action: str | None = None) -> Self:
        """The reply read from a decoded header; ``action`` names it in errors (default: the
        type's)."""
        what = action or cls.ACTION
        if not isinstance(header, Mapping):
            raise ProtocolError(f"reply to {what}: expected an object, got {type(header).__name__}")
        values: dict[str, Any] = {}
        for f, hint in _fields(cls):
            value = header.get(f.name)
            if value is None:
                if f.default is not MISSING or f.default_factory is not MISSING:
                    continue  # optional: the type's default
                if not _allows_none(hint):
                    raise ProtocolError(f"reply to {what}: field {f.name!r} is missing")
            values[f.name] = _check(value, hint, what, f.name)
        return cls(**values)

    def to_wire(self) -> dict[str, Any]:
        """The header this reply parses from (lists for tuples, objects for nested replies)."""
        return {f.name: _wire(getattr(self, f.name)) for f, _ in _fields(type(self))}

    @classmethod
    def lean(cls, header: Mapping[str, Any]) -> dict[str, Any]:
        """``header`` without the fields at this type's defaults, which :meth:`parse` fills
        back in: what a node sends. A default matches by type too (``0`` for a ``0.0`` default
        is sent)."""
        defaults = _defaults(cls)
        return {
            k: v
            for k, v in header.items()
            if not (k in defaults and type(v) is type(defaults[k]) and v == defaults[k])
        }


_HINTS: dict[type, list[tuple[dataclasses.Field[Any], Any]]] = {}


def _fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    out = _HINTS.get(cls)
    if out is None:
        hints = get_type_hints(cls)
        out = _HINTS[cls] = [(f, hints[f.name]) for f in dataclasses.fields(cls)]
    return out


def _defaults(cls: type) -> dict[str, Any]:
    """Each optional field's default as it travels (lists for tuples)."""
    out = {}
    for f, _ in _fields(cls):
        if f.default is not MISSING:
            out[f.name] = _wire(f.default)
        elif f.default_factory is not MISSING:
            out[f.name] = _wire(f.default_factory())
    return out


def _allows_none(hint: Any) -> bool:
    union = get_origin(hint) in (Union, types.UnionType)
    return hint is Any or (union and type(None) in get_args(hint))


def _check(value: Any, hint: Any, action: str, name: str) -> Any:
    """``value`` as a ``hint`` (tuples for lists, nested replies parsed), else ProtocolError."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in get_args(hint):
            return None
        for option in get_args(hint):
            if option is not type(None):
                try:
                    return _check(value, option, action, name)
                except ProtocolError:
                    continue
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    elif hint is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        item = get_args(hint)[0]
        if isinstance(value, list | tuple):
            return tuple(_check(v, item, action, name) for v in value)
    elif origin in (dict, Mapping):
        item = get_args(hint)[1]
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            return {k: _check(v, item, action, f"{name}.{k}") for k, v in value.items()}
    elif isinstance(hint, type) and issubclass(hint, Reply) and isinstance(value, Mapping):
        return hint.parse(value, action)
    got = type(value).__name__
    raise ProtocolError(f"reply to {action}: field {name!r} is of the wrong type (got {got})")


def _wire(value: Any) -> Any:
    if isinstance(value, Reply):
        return value.to_wire()
    if isinstance(value, tuple):
        return [_wire(v) for v in value]
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- lifecycle


@dataclass(frozen=True, slots=True)
class ReserveReply(Reply):
    """Room granted (or not); with it, a served table's current snapshot and its commit time."""

    ACTION: ClassVar[str] = "reserve"
    granted: bool
    snapshot: int | None = None
    snapshot_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ReleaseReply(Reply):
    ACTION: ClassVar[str] = "release"
    released: bool


@dataclass(frozen=True, slots=True)
class VariableCounts(Reply):
    """One variable's candidates on a node: how many, and (when ``open`` asked for
    ``variable_bounds``) their first and last time."""

    ACTION: ClassVar[str] = "open"
    count: int
    min_ts: int | None = None
    max_ts: int | None = None


@dataclass(frozen=True, slots=True)
class Layout(Reply):
    """What a node says of its shard set's place among the nodes of the log (``dfs-cer shard``'s
    manifest; a table's share for a table served in place): the compute node checks that the
    nodes of a query make one shard set before it relies on what a node says it holds whole."""

    ACTION: ClassVar[str] = "open"
    #: the node's index among its shard set's nodes, and their count
    node: int | None = None
    nodes: int | None = None
    #: how rows were placed (random, time, type; table-time, table-hash)
    partitioning: str = "random"
    #: the column rows were placed by (type partitioning)
    key: str | None = None
    #: the shard set's identity (None: written before shard sets had one)
    shard_set: str | None = None


@dataclass(frozen=True, slots=True)
class OpenReply(Reply):
    """What a node scanned for one query: rows and per-variable candidates (selectivities for
    the variable order and the cost model), time bounds, what identifies the data, and what the
    node can do itself (navigation, matching whole partitions). Blob 0, when asked for, is the
    shard set's Arrow schema."""

    ACTION: ClassVar[str] = "open"
    #: the node had no room for the query now (an ``open`` with an arrival): it holds nothing of
    #: it and keeps its place in line; the compute node releases the others and asks again
    refused: bool = False
    #: rows the node scanned for the query (those passing some variable's independent condition)
    rows: int = 0
    variables: dict[str, VariableCounts] = field(default_factory=dict)
    min_ts: int | float | None = None
    max_ts: int | float | None = None
    #: every row of the node's shard set
    total_rows: int | None = None
    held_bytes: int | None = None
    #: the shard set's own event key (``dfs-cer shard --event-key``)
    event_key: tuple[str, ...] = ()
    row_bytes: float = 0.0
    schema_digest: str | None = None
    data_digest: str | None = None
    #: the node holds every row of each PARTITION BY group it holds any row of
    local_partitions: bool = False
    #: the node's calibrated matching seconds per row, per engine
    beta: dict[str, float] = field(default_factory=dict)
    time_column: str | None = None
    #: the table snapshot served (tables in place; None: a shard set) and, when the compute node
    #: pinned none, its commit time (the compute node pins the latest when nodes differ)
    snapshot: int | None = None
    snapshot_ms: int | None = None
    #: how the node checks PREV/NEXT conditions itself (None: it does not)
    navigation_on_node: str | None = None
    match_cpu_budget: float = 0.0
    #: the most rows the node serves on either side of a halo request
    halo_limit: int | None = None
    #: the node holds every copy of each event it holds one of
    copies_whole: bool = False
    #: the log's name (None: a shard set written before logs had names)
    table: str | None = None
    #: the node's shard set's place among the nodes of the log (None: a node that does not say)
    layout: Layout | None = None


@dataclass(frozen=True, slots=True)
class GroupOpenReply(Reply):
    """``open`` of several queries over one scan (``group`` in the request): each query's
    :class:`OpenReply`, in the order asked."""

    ACTION: ClassVar[str] = "open"
    group: tuple[OpenReply, ...]
    shared_conditions: int = 0
    conditions: int = 0


@dataclass(frozen=True, slots=True)
class CloseReply(Reply):
    ACTION: ClassVar[str] = "close"
    #: the node held state for the query
    closed: bool


# ---------------------------------------------------------------- the filter round trips


@dataclass(frozen=True, slots=True)
class IntervalsReply(Reply):
    """Blob 0: the variable's Eq. 1 interval set."""

    ACTION: ClassVar[str] = "intervals"
    intervals: int


@dataclass(frozen=True, slots=True)
class SummariesReply(Reply):
    """Naive-DFS: an interval set per variable, then an Arrow stream per (variable, column) pair,
    all in the blobs. (The node's ``blobs`` count is replaced on the wire by the framing's list
    of blob sizes, :mod:`dfs_cer.transport.messages`: the header carries nothing else.)"""

    ACTION: ClassVar[str] = "summaries"


@dataclass(frozen=True, slots=True)
class WjfReply(Reply):
    """One blob per requested build: the join filter (or exact key set)."""

    ACTION: ClassVar[str] = "wjf"
    filters: int


@dataclass(frozen=True, slots=True)
class CollectReply(Reply):
    """Blob 0: the candidate points of the variables asked for
    (:func:`~dfs_cer.filters.points.pack_points`)."""

    ACTION: ClassVar[str] = "collect"


@dataclass(frozen=True, slots=True)
class VerifyReply(Reply):
    """Blob 0: the refresh tags (SWF) or the surviving intervals (interval arrays)."""

    ACTION: ClassVar[str] = "verify"
    before: int
    survivors: int


@dataclass(frozen=True, slots=True)
class PushPullReply(Reply):
    ACTION: ClassVar[str] = "push_pull"
    before: int
    survivors: int
    #: why the node kept every candidate (its work did not fit its memory); None: it filtered
    unfiltered: str | None = None


@dataclass(frozen=True, slots=True)
class SituationsReply(Reply):
    """Situation fragments (blobs: fragments, blocks, schema) or why the node cannot derive them."""

    ACTION: ClassVar[str] = "situations"
    derived: bool
    reason: str | None = None
    fragments: int | None = None
    blocks: int | None = None
    rows: int | None = None
    #: the node's shard set's place among the nodes of the log (when it derived fragments)
    layout: Layout | None = None


# ---------------------------------------------------------------- the node itself


@dataclass(frozen=True, slots=True)
class HealthReply(Reply):
    ACTION: ClassVar[str] = "health"
    status: str
    rows: int | None = None
    uptime_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FilesReply(Reply):
    """The shard set's files (with time bounds and ``--append`` batch tags), as in its manifest."""

    ACTION: ClassVar[str] = "files"
    files: tuple[dict[str, Any], ...]
    time_column: str | None = None
    snapshot: int | None = None


@dataclass(frozen=True, slots=True)
class SchemaReply(Reply):
    """Blob 0: the shard set's exact Arrow schema."""

    ACTION: ClassVar[str] = "schema"
    digest: str
    #: the log's name (None: a shard set written before logs had names)
    table: str | None = None


@dataclass(frozen=True, slots=True)
class StatsReply(Reply):
    """The node's admission, work and cache counters."""

    ACTION: ClassVar[str] = "stats"
    queries: int
    held_bytes: int
    budget_bytes: int
    reservations: int
    waiting: int
    evicted: int
    refused: int
    work_bytes: int
    work_peak_bytes: int
    stopped: int
    per_query_bytes: tuple[int, ...]
    calls: int
    bytes_in: int
    bytes_out: int
    cached_bytes: int = 0
    cache_hits: int = 0
    index_bytes: int = 0
    #: rows executors' time-slice pulls looked at (the rows of their time ranges)
    slice_rows: int = 0
    #: tables served in place: files and bytes read from the object store
    files_read: int | None = None
    bytes_read: int | None = None
    #: the node process's resident memory (None where it cannot tell)
    resident_bytes: int | None = None
    #: the heavy modules it has loaded (none at rest: they load with the first query)
    heavy_modules: tuple[str, ...] = ()
    #: queries granted room since the node started
    admitted: int = 0


#: each control action's reply type (``open`` of a group replies :class:`GroupOpenReply`)
REPLIES: dict[str, type[Reply]] = {
    t.ACTION: t
    for t in (
        ReserveReply,
        ReleaseReply,
        OpenReply,
        CloseReply,
        IntervalsReply,
        SummariesReply,
        WjfReply,
        VerifyReply,
        CollectReply,
        PushPullReply,
        SituationsReply,
        HealthReply,
        FilesReply,
        SchemaReply,
        StatsReply,
    )
}


def parse_reply(action: str, header: Mapping[str, Any]) -> Reply:
    """The reply to ``action`` read from its decoded header."""
    kind = REPLIES.get(action)
    if kind is None:
        raise ProtocolError(f"no reply type for action {action!r}; actions: {', '.join(REPLIES)}")
    if kind is OpenReply and isinstance(header, Mapping) and "group" in header:
        kind = GroupOpenReply
    return kind.parse(header, action)
