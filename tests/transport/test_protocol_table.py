"""The protocol table (dfs_cer/transport/actions.py) is complete and consistent: every call once,
every handler on the node's families, every request type parsing its own header."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from dfs_cer.transport.actions import ACTIONS, FINAL_PULLS, PROTOCOL, PULLS, STATELESS_PULLS
from dfs_cer.transport.protocol import (
    Build,
    Close,
    Collect,
    Gather,
    Halo,
    Intervals,
    NodeMatch,
    Probe,
    PushPull,
    Release,
    Reserve,
    Upload,
    Verify,
    Wjf,
)
from storage_node.actions.base import Node
from storage_node.actions.routes import Routes

#: one request of each type, with every optional field away from its default
SAMPLES: dict[type, Any] = {
    Reserve: Reserve("q1", 1_700_000_000.5),
    Release: Release("q1"),
    Close: Close("q1"),
    Intervals: Intervals("q1", "A", "head", 180),
    Wjf: Wjf(
        "q1",
        (Build("A", "a2", 180, 1, "wjf", 4096, 3, 7), Build("B", "a1", 60, 2, "keyset")),
        "intervals",
    ),
    Verify: Verify(
        "q1",
        "B",
        "tail",
        180,
        (Probe("a2", -1, 1), Probe("a1", 0, 2, "keyset")),
        "intervals",
        cached_swf=True,
    ),
    Collect: Collect("q1", -7, 250, (Gather("A", (("a2", 3), ("a1", 1))), Gather("B")), 12, True),
    PushPull: PushPull("q1", "C", ("A", "B"), 1000, 10**6),
    Upload: Upload("q1", "A"),
    Halo: Halo("q1", "pull_halo", 2, 3, ("id",), True, skip_shipped=True),
    NodeMatch: NodeMatch("q1", ("id",), False, 1000, "truncate", 10**9, 2.5),
}


def test_every_call_is_named_once() -> None:
    names = [a.name for a in PROTOCOL]
    assert len(names) == len(set(names))
    assert {a.call for a in PROTOCOL} == {"action", "get", "put"}


def test_the_node_lists_its_actions_in_the_order_it_always_did() -> None:
    assert tuple(ACTIONS) == (
        "reserve",
        "release",
        "open",
        "intervals",
        "summaries",
        "wjf",
        "verify",
        "collect",
        "push_pull",
        "close",
        "health",
        "stats",
        "files",
        "situations",
        "schema",
    )


def test_derived_sets() -> None:
    # the final pulls a group shares are exactly those an executor may slice, in the order errors
    # list them
    assert (
        FINAL_PULLS
        == tuple(a.name for a in PROTOCOL if a.sliceable)
        == ("pull", "pull_range", "pull_all", "pull_pushdown")
    )
    assert all(PULLS[k].call == "get" for k in FINAL_PULLS)
    assert set(STATELESS_PULLS) == {"pull_all", "pull_times", "pull_group"}
    assert {n for n, a in ACTIONS.items() if a.lifecycle} == {
        "reserve",
        "release",
        "open",
        "close",
        "situations",
        "files",
        "schema",
        "health",
        "stats",
    }
    # lifecycle actions take no blobs; health and stats ignore their body
    assert not any(a.blobs for a in ACTIONS.values() if a.lifecycle)
    assert {n for n, a in ACTIONS.items() if not a.decoded} == {"health", "stats"}
    # the client re-opens a lost query and calls again for every action but open and close
    assert {n for n, a in ACTIONS.items() if not a.reopens} == {"open", "close"}
    # every control action names its reply type; pulls reply an Arrow stream
    assert all(a.reply for a in ACTIONS.values()) and not any(a.reply for a in PULLS.values())


def test_every_handler_exists_on_the_nodes_families() -> None:
    server = SimpleNamespace(health=lambda h, b: ({}, []), stats=lambda h, b: ({}, []))
    routes = Routes(cast(Node, SimpleNamespace()), server)
    assert set(routes.handlers) == {a.name for a in PROTOCOL}
    for a in PROTOCOL:
        assert callable(routes.handlers[a.name]), a
        assert routes.families[a.family] is getattr(routes.handlers[a.name], "__self__", server), a
    assert routes.pulls.kinds.keys() == PULLS.keys()


def test_a_missing_handler_fails_when_the_node_starts() -> None:
    with pytest.raises(AttributeError, match="health"):
        Routes(cast(Node, SimpleNamespace()), SimpleNamespace(stats=None))


@pytest.mark.parametrize(
    "request_type", sorted({a.request for a in PROTOCOL if a.request}, key=str)
)
def test_every_request_type_parses_its_own_header(request_type: type) -> None:
    sample = SAMPLES[request_type]
    assert request_type.parse(sample.header()) == sample  # type: ignore[attr-defined]


def test_samples_cover_every_request_type() -> None:
    assert {a.request for a in PROTOCOL if a.request} <= SAMPLES.keys()


def test_every_control_action_has_its_reply_type_in_the_table() -> None:
    from dfs_cer.transport.actions import ACTIONS
    from dfs_cer.transport.replies import REPLIES

    assert {name: a.reply for name, a in ACTIONS.items()} == REPLIES


def test_node_side_matching_takes_the_time_budget_or_its_default() -> None:
    """``pull_matches`` carries ``matcher.max_seconds``; a request without it (a compute node of
    an earlier version) gets the default, and a budget out of range is refused."""
    from dfs_cer.transport.protocol import MATCH_SECONDS, ProtocolError

    header = NodeMatch("q1", (), True, 10, "error", 1000, 0.5).header()
    assert NodeMatch.parse(header).max_seconds == 0.5
    del header["max_seconds"]
    assert NodeMatch.parse(header).max_seconds == MATCH_SECONDS
    for bad in (0, -1.0, True, "10", 1e9):
        with pytest.raises(ProtocolError, match="max_seconds"):
            NodeMatch.parse({**header, "max_seconds": bad})
