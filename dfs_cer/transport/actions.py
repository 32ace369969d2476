"""The protocol table: every call a compute node makes on a storage node, once.

Each :class:`Action` names the call, how it travels (a Flight DoAction, a DoGet ticket ``kind``
or a DoPut), its request and reply types, whether it runs outside an opened query, whether it
takes blobs, whether an executor may take a time slice of it, and the handler the node routes
it to: a ``family`` (one object per family on the node) and the ``handler`` method of it. The
node resolves the handlers once and dispatches through them; the tuples that named these facts
before (the node's action list, its lifecycle actions and stateless pulls, the sliceable final
pulls) are derived here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from dfs_cer.transport.protocol import (
    Close,
    Collect,
    Halo,
    Intervals,
    NodeMatch,
    PushPull,
    Release,
    Reserve,
    Upload,
    Verify,
    Wjf,
)
from dfs_cer.transport.replies import REPLIES

#: how a call travels: a Flight DoAction (framed reply), a DoGet ticket (an Arrow stream) or a DoPut
Call = Literal["action", "get", "put"]


@dataclass(frozen=True, slots=True)
class Action:
    """One call of the protocol (see the module docstring)."""

    name: str
    call: Call
    #: the node's object that serves it (``server``: the Flight server itself)
    family: str
    #: the method of ``family`` the node routes it to
    handler: str
    #: the frozen request type whose ``parse`` checks the header (None: checked by the handler)
    request: type | None = None
    #: the reply type, parsed once where the client decodes the reply (None: an Arrow stream,
    #: for a pull); filled from :data:`dfs_cer.transport.replies.REPLIES`
    reply: type | None = None
    #: runs outside an opened query: the node does not ask for a query it holds
    lifecycle: bool = False
    #: the request may carry blobs
    blobs: bool = True
    #: a final pull an executor may take a time slice of (``slice``: [lo, hi])
    sliceable: bool = False
    #: the node decodes and checks the request body (``health`` and ``stats`` ignore theirs)
    decoded: bool = True
    #: the client re-opens a query the node lost (it restarted) and calls again
    reopens: bool = True


def _lifecycle(name: str, family: str, request: type | None = None, reopens: bool = True) -> Action:
    return Action(
        name, "action", family, name, request, lifecycle=True, blobs=False, reopens=reopens
    )


def _filter(name: str, family: str, request: type | None = None) -> Action:
    return Action(name, "action", family, name, request)


def _pull(
    name: str,
    family: str,
    handler: str,
    request: type | None = None,
    *,
    lifecycle: bool = False,
    sliceable: bool = False,
) -> Action:
    return Action(name, "get", family, handler, request, lifecycle=lifecycle, sliceable=sliceable)


#: every call, DoActions in the order the node lists them (reply types added below)
_CALLS: tuple[Action, ...] = (
    _lifecycle("reserve", "lifecycle", Reserve),
    _lifecycle("release", "lifecycle", Release),
    _lifecycle("open", "lifecycle", reopens=False),
    _filter("intervals", "filters", Intervals),
    _filter("summaries", "filters"),
    _filter("wjf", "filters", Wjf),
    _filter("verify", "filters", Verify),
    _filter("collect", "filters", Collect),
    _filter("push_pull", "push_pull", PushPull),
    _lifecycle("close", "lifecycle", Close, reopens=False),
    Action("health", "action", "server", "health", lifecycle=True, blobs=False, decoded=False),
    Action("stats", "action", "server", "stats", lifecycle=True, blobs=False, decoded=False),
    _lifecycle("files", "tables"),
    _lifecycle("situations", "situations"),
    _lifecycle("schema", "tables"),
    # DoGet tickets, by ``kind``; the final pulls first, in the order errors list them
    _pull("pull", "pulls", "pull_final", sliceable=True),
    _pull("pull_range", "pulls", "pull_range", sliceable=True),
    _pull("pull_all", "pulls", "pull_all", lifecycle=True, sliceable=True),
    _pull("pull_pushdown", "pulls", "pull_pushdown", sliceable=True),
    _pull("pull_variable", "push_pull", "pull_variable"),
    _pull("pull_matches", "pulls", "pull_matches", NodeMatch),
    _pull("pull_halo", "pulls", "pull_halo", Halo),
    _pull("pull_times", "situations", "pull_times", lifecycle=True),
    _pull("pull_group", "pulls", "pull_group", lifecycle=True),
    Action("upload", "put", "push_pull", "upload", Upload, blobs=False),
)
#: every call with its reply type
PROTOCOL: tuple[Action, ...] = tuple(
    replace(a, reply=REPLIES.get(a.name)) if a.call == "action" else a for a in _CALLS
)

#: the DoActions by name
ACTIONS: dict[str, Action] = {a.name: a for a in PROTOCOL if a.call == "action"}
#: the DoGet kinds by name
PULLS: dict[str, Action] = {a.name: a for a in PROTOCOL if a.call == "get"}
#: pulls that need no opened query (the node checks no query id for them)
STATELESS_PULLS: tuple[str, ...] = tuple(a.name for a in PULLS.values() if a.lifecycle)
#: pulls that end a strategy (the data it matches): a group of queries shares them, and an
#: executor may take a time slice of each
FINAL_PULLS: tuple[str, ...] = tuple(a.name for a in PROTOCOL if a.sliceable)
