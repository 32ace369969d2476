"""The nodes of a query make one shard set, or the conflict is named (dfs_cer.plan.layout)."""

from __future__ import annotations

import pytest

from dfs_cer.plan.layout import conflict
from dfs_cer.transport.replies import Layout

NODES = ["node a", "node b"]


def claim(node: int, nodes: int = 2, how: str = "type", key: str | None = "k", set_: str = "s1"):
    return Layout(node, nodes, how, key, set_)


@pytest.mark.parametrize(
    ("claims", "said"),
    [
        ([claim(0), claim(1)], None),
        ([None, None], None),  # nodes from before layouts were reported: nothing to check
        ([claim(0, 1, set_="s1"), claim(0, 1, set_="s2")], "2 shard sets written separately"),
        ([claim(0, 1, set_=None), claim(0, 1, set_=None)], "node a is node 0 of 1"),  # type: ignore[arg-type]
        ([claim(0), claim(0)], "node a and node b both say they are node 0 of 2"),
        ([claim(0), claim(1, how="random", key=None)], "sharded by type of k, node b by random"),
        ([claim(0), None], "node b does not say which node"),
    ],
)
def test_conflicting_claims_are_named(claims: list[Layout | None], said: str | None) -> None:
    got = conflict(claims, NODES)
    assert (got is None) if said is None else (got is not None and said in got), got
