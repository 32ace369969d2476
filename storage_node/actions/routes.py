"""The protocol table resolved on a node: one object per family of actions, and every entry of
:data:`dfs_cer.transport.actions.PROTOCOL` bound to its family's handler (a missing handler
fails here, when the node starts, not on a call)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from dfs_cer.transport.actions import PROTOCOL, PULLS
from storage_node.actions.base import Node
from storage_node.actions.filters import FilterActions
from storage_node.actions.lifecycle import LifecycleActions
from storage_node.actions.pulls import PullActions
from storage_node.actions.push_pull import PushPullActions
from storage_node.actions.situations import SituationActions
from storage_node.actions.tables import TableActions


class Routes:
    """``families``: family name -> object (``server``: the object the node gives, e.g. its
    Flight server for ``health`` and ``stats``); ``handlers``: call name -> bound handler;
    ``pulls``: the family that routes every DoGet ticket by its kind."""

    def __init__(self, node: Node, server: object) -> None:
        self.node = node
        kinds: dict[str, Callable[..., pa.Table]] = {}
        self.pulls = PullActions(node, kinds)
        self.families: dict[str, object] = {
            "server": server,
            "lifecycle": LifecycleActions(node),
            "filters": FilterActions(node),
            "pulls": self.pulls,
            "push_pull": PushPullActions(node),
            "situations": SituationActions(node),
            "tables": TableActions(node),
        }
        self.handlers: dict[str, Callable[..., Any]] = {
            a.name: getattr(self.families[a.family], a.handler) for a in PROTOCOL
        }
        kinds.update({name: self.handlers[name] for name in PULLS})
