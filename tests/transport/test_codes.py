"""Errors cross the wire by code: every error class a storage node raises has its own code, and a
node's error reaches the client as the same class it always raised (NodeRefusedError), with the
node's class name and message and the error's code; one retry helper decides on codes only."""

from __future__ import annotations

import pickle
import time

import pytest

from dfs_cer.errors import (
    SNAPSHOT_BUSY,
    AdmissionError,
    CacheMissError,
    ConfigError,
    DfsCerError,
    FilterFormatError,
    MatchError,
    MatchLimitError,
    ProtocolError,
    QueryError,
    StorageError,
    UnknownQueryError,
    WorkCancelledError,
    WorkMemoryError,
)
from dfs_cer.io.shard import ShardError
from dfs_cer.io.tables import TableError
from dfs_cer.transport.client import NodeRefusedError, StorageClient
from dfs_cer.transport.retry import retry_on
from storage_node.server import StorageNode
from tests.fixtures.tokens import TOKEN

#: every error class a storage node may raise, each with its own code
WIRE_ERRORS: tuple[type[DfsCerError], ...] = (
    DfsCerError,
    ConfigError,
    QueryError,
    FilterFormatError,
    StorageError,
    ProtocolError,
    MatchError,
    MatchLimitError,
    WorkCancelledError,
    WorkMemoryError,
    AdmissionError,
    UnknownQueryError,
    CacheMissError,
    ShardError,
    TableError,
)


def test_every_wire_error_class_has_its_own_code() -> None:
    codes = [cls.code for cls in WIRE_ERRORS]
    assert len(set(codes)) == len(codes)
    assert SNAPSHOT_BUSY not in codes and NodeRefusedError.code not in codes
    # the codes the compute node has always acted on keep their values
    assert (
        UnknownQueryError.code,
        AdmissionError.code,
        CacheMissError.code,
        WorkMemoryError.code,
    ) == ("unknown-query", "admission", "cache-miss", "work-memory")


def refused(node: StorageNode, exc: Exception) -> NodeRefusedError:
    """What the client raises when the node's ``health`` handler raises ``exc``."""

    def fail(header: object, blobs: object) -> None:
        raise exc

    saved = node.routes.handlers["health"]
    node.routes.handlers["health"] = fail
    client = StorageClient(f"127.0.0.1:{node.port}", TOKEN, timeout=10.0)
    try:
        with pytest.raises(NodeRefusedError) as info:
            client.action("health")
        return info.value
    finally:
        node.routes.handlers["health"] = saved
        client.close()


@pytest.mark.parametrize("cls", WIRE_ERRORS, ids=lambda c: c.__name__)
def test_a_node_error_reaches_the_client_with_its_class_message_and_code(
    node: StorageNode, cls: type[DfsCerError]
) -> None:
    got = refused(node, cls("the reason, with its value 42"))
    assert got.code == cls.code
    assert f"refused health: {cls.__name__}: the reason, with its value 42" in str(got), str(got)


def test_codes_of_instances_travel_too(node: StorageNode) -> None:
    got = refused(node, QueryError("input filter refused", code="input-filter"))
    assert got.code == "input-filter" and "QueryError: input filter refused" in str(got)
    got = refused(
        node,
        StorageError(
            "this storage node serves running queries on another snapshot", code=SNAPSHOT_BUSY
        ),
    )
    assert got.code == SNAPSHOT_BUSY and "StorageError: this storage node serves" in str(got)


def test_an_unexpected_error_is_an_internal_error_without_a_code(node: StorageNode) -> None:
    got = refused(node, ValueError("boom"))
    assert got.code == NodeRefusedError.code and "storage node error: ValueError: boom" in str(got)


def test_the_node_refuses_an_unknown_action_as_before(node: StorageNode) -> None:
    client = StorageClient(f"127.0.0.1:{node.port}", TOKEN, timeout=10.0)
    try:
        with pytest.raises(
            NodeRefusedError,
            match="ProtocolError: unknown action 'nope'; actions: reserve, release, "
            "open, intervals, summaries, wjf, verify, collect, push_pull, close, "
            "health, stats, files, situations, schema",
        ) as info:
            client.action("nope")
        assert info.value.code == ProtocolError.code
        with pytest.raises(NodeRefusedError, match="unknown action 'upload'"):
            client.action("upload")  # a DoPut, not an action
    finally:
        client.close()


def test_retry_on_tries_again_only_on_its_codes_within_the_deadline() -> None:
    tries = []

    def busy_twice() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise NodeRefusedError("busy", SNAPSHOT_BUSY)
        return "done"

    assert retry_on((SNAPSHOT_BUSY,), busy_twice, lambda: time.monotonic() + 30) == "done"
    assert len(tries) == 3

    def other() -> str:
        tries.append(1)
        raise NodeRefusedError("refused", AdmissionError.code)

    tries.clear()
    with pytest.raises(NodeRefusedError, match="refused"):
        retry_on((SNAPSHOT_BUSY,), other, lambda: time.monotonic() + 30)
    assert len(tries) == 1

    def always_busy() -> str:
        tries.append(1)
        raise NodeRefusedError("busy", SNAPSHOT_BUSY)

    tries.clear()
    with pytest.raises(NodeRefusedError, match="busy"):  # no deadline known: not tried again
        retry_on((SNAPSHOT_BUSY,), always_busy, lambda: None)
    assert len(tries) == 1
    tries.clear()
    began = time.monotonic()
    with pytest.raises(
        NodeRefusedError, match="busy"
    ):  # tried until the next try would pass the deadline
        retry_on((SNAPSHOT_BUSY,), always_busy, lambda: began + 0.5)
    assert len(tries) > 1 and time.monotonic() - began < 1.5


@pytest.mark.parametrize(
    "exc",
    [
        StorageError("busy", code=SNAPSHOT_BUSY),
        NodeRefusedError("lost", "cache-miss"),
        NodeRefusedError("refused"),
    ],
    ids=str,
)
def test_codes_survive_pickling(
    exc: DfsCerError,
) -> None:  # errors cross to and from Spark executors
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc) and back.code == exc.code
