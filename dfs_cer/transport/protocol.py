"""The compute node / storage node control protocol, defined once for both sides.

Every message carries :data:`VERSION` in its framing (:mod:`dfs_cer.transport.messages`); a
node and a client of different versions refuse each other's messages with a clear error
instead of misreading them. The query lifecycle (``reserve``, ``release``, ``open``, ``close``)
travels as the frozen request types below, built by the client and parsed, with every field
checked, by the node; columns the node adds to pulled tables and the error codes it attaches
to Flight errors are named here only.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from dfs_cer.errors import ProtocolError

#: bumped whenever a message changes shape
VERSION = 2

# ---------------------------------------------------------------- wire column names
#: ``pull_variable``: the node's row number of each pulled row (push-pull uploads refer to it)
ROW_ID = "__dfs_cer_row_id"
#: ``pull_group``: bit mask of the group's queries that asked for each row
MEMBERS = "__dfs_cer_members"
#: ``pull_times``: index of the requested interval each row falls in
SEGMENT = "__dfs_cer_interval"

# ---------------------------------------------------------------- error codes (Flight extra_info)
#: the node holds no state for the query (restarted, expired or closed): re-open once
UNKNOWN_QUERY = "unknown-query"
#: the node's memory budget is held by other queries
ADMISSION = "admission"
#: ``verify`` asked for the interval set cached by the preceding ``wjf``, which the node lost
#: (it restarted and the query was re-opened): send the set again
CACHE_MISS = "cache-miss"

#: seconds a node keeps an opened query's state past the compute node's deadline for it
#: (the lease the client sends with ``open``): a query whose close never arrives holds nothing
#: beyond it
LEASE_GRACE_SECONDS = 10.0

QUERY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def query_id(value: object, action: str) -> str:
    if not (isinstance(value, str) and QUERY_ID.fullmatch(value)):
        raise ProtocolError(f"action {action}: query_id must be 1 to 64 letters, digits, '-' or '_', "
                            f"got {str(value)[:80]!r}")
    return value


def _seconds(value: object, name: str, action: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ProtocolError(f"action {action}: {name} must be a positive number of seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Reserve:
    """Ask for room for a query about to open; ``arrival`` (the client's wall clock, seconds)
    orders the waiting queries on every node alike."""

    query_id: str
    arrival: float

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Reserve:
        return cls(query_id(header.get("query_id"), "reserve"), _seconds(header.get("arrival"), "arrival", "reserve"))


@dataclass(frozen=True, slots=True)
class Release:
    """Give back a reservation the query will not use now (it keeps its place in line)."""

    query_id: str

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Release:
        return cls(query_id(header.get("query_id"), "release"))


@dataclass(frozen=True, slots=True)
class Close:
    """Drop everything the node holds for the query (best effort, idempotent)."""

    query_id: str

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Close:
        return cls(query_id(header.get("query_id"), "close"))


def lease(header: dict[str, Any]) -> float | None:
    """``open``'s lease: the compute node's seconds left for the query (None: none sent)."""
    value = header.get("lease_seconds")
    return None if value is None else _seconds(value, "lease_seconds", "open")
