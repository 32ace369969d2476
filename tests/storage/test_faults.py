"""Faults end cleanly: a storage node killed (SIGKILL) or hung (SIGSTOP) before any round of any
strategy fails the query with an error naming the round and the node, within the deadlines, and
leaves no state on any node; a node restarted mid-query is re-opened once; a close that fails
keeps a complete result with a warning; a hung node's calls that complete after the query gave
up keep nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.config import StrategyConfig
from dfs_cer.errors import DfsCerError
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.base import Session
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.transport.client import StorageClient
from storage_node.launcher import LocalCluster
from tests.fixtures.faults import CALL, FAST, NOTHING, WARM, before_round, held
from tests.fixtures.queries import Q1
from tests.fixtures.tables import TABLE1

pytestmark = pytest.mark.flight


def rows(table: Any) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("faults")
    pq.write_table(TABLE1, root / "crimes.parquet")
    shard(
        str(root / "crimes.parquet"),
        3,
        str(root / "nodes"),
        time_column="date",
        type_column="primary_type",
    )
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)], env=WARM) as c:
        yield c


def clean(cluster: LocalCluster, nodes: range | list[int], within: float = 6.0) -> bool:
    """Every node in ``nodes`` holds nothing, at once or within ``within`` seconds (a node that
    was hung gets its close from the compute node's background closer once it answers)."""
    give_up = time.monotonic() + within
    while held(cluster, nodes) != [NOTHING] * len(nodes):
        if time.monotonic() > give_up:
            return False
        time.sleep(0.2)
    return True


def rounds_of(cluster: LocalCluster, strategy: str) -> list[str]:
    result = pull(
        strategy, Q1, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST
    )
    assert rows(match_pulled(result)) == rows(match_recognize(TABLE1, Q1))
    return [r.action for r in result.trace.rounds]


@pytest.mark.parametrize("fault", ["kill", "stop"])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_a_node_failing_before_any_round(cluster: LocalCluster, strategy: str, fault: str) -> None:
    names = rounds_of(cluster, strategy)
    victim = 1
    port = cluster.endpoints[victim].rsplit(":", 1)[1]
    for k, name in enumerate(names, 1):
        with pytest.MonkeyPatch.context() as mp:
            before_round(
                mp, k, lambda: cluster.kill(victim) if fault == "kill" else cluster.pause(victim)
            )
            began = time.monotonic()
            try:
                with pytest.raises(DfsCerError) as info:
                    pull(
                        strategy,
                        Q1,
                        cluster.endpoints,
                        cluster.token,
                        cost_model="always_on",
                        config=FAST,
                    )
                took = time.monotonic() - began  # the query's own time, not the restart's
            finally:
                if fault == "kill":
                    cluster.restart(victim)
                else:
                    cluster.resume(victim)
        message = str(info.value)
        assert f"round {k} ({name})" in message and f":{port}" in message, message
        assert ("did not answer" in message) == (fault == "stop"), message
        # a hung node is given up after the per-call timeout (once, no second wait),
        # a dead one at once
        assert took < CALL + FAST.close_timeout_seconds + 3, (k, name, took)
        assert clean(cluster, range(3)), (strategy, k, name, held(cluster, range(3)))
    # and the nodes serve the next query exactly
    assert rounds_of(cluster, strategy) == names


@pytest.mark.parametrize("strategy", ["dfs", "push_pull", "pull_all"])
def test_a_node_restarted_before_any_round_is_reopened_once(
    cluster: LocalCluster, strategy: str
) -> None:
    """Whatever round a node restarts before, the query re-opens it there once (uploads and the
    cached interval set sent again) and returns exactly the matches."""
    names = rounds_of(cluster, strategy)
    for k in range(1, len(names) + 1):
        with pytest.MonkeyPatch.context() as mp:
            before_round(mp, k, lambda: cluster.restart(1))
            result = pull(
                strategy, Q1, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST
            )
        assert rows(match_pulled(result)) == rows(match_recognize(TABLE1, Q1)), (k, names[k - 1])
        assert clean(cluster, range(3), within=0)


def test_a_node_restarted_twice_fails_clearly(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = rounds_of(cluster, "dfs_paper")  # the paper's rounds: enough of them to restart twice
    assert len(names) >= 4
    restarts = iter([3, 4])
    target = [next(restarts)]
    original = Session.all
    seen = [0]

    def all_(self: Session, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == target[0]:
            cluster.restart(1)
            target[0] = next(restarts, -1)
        return original(self, name, fn, *args, **kwargs)

    monkeypatch.setattr(Session, "all", all_)
    with pytest.raises(DfsCerError, match=r"round 4 .*lost the query"):
        pull("dfs_paper", Q1, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST)
    assert clean(cluster, range(3), within=0)


def test_a_failing_close_keeps_the_complete_result(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Session.close

    def close(self: Session) -> list[str]:
        cluster.pause(2)
        try:
            return original(self)
        finally:
            cluster.resume(2)

    monkeypatch.setattr(Session, "close", close)
    result = pull("dfs", Q1, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST)
    assert rows(match_pulled(result)) == rows(match_recognize(TABLE1, Q1))
    port = cluster.endpoints[2].rsplit(":", 1)[1]
    assert len(result.trace.warnings) == 1 and f":{port}" in result.trace.warnings[0]
    assert result.trace.to_dict()["warnings"] == result.trace.warnings
    assert clean(cluster, range(3))


def test_the_real_error_is_reported_not_close(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round fails on one node and close fails on another: the round's error is raised."""
    names = rounds_of(cluster, "dfs")
    k = names.index("open") + 2

    def fault() -> None:
        cluster.kill(1)
        cluster.pause(2)

    before_round(monkeypatch, k, fault)
    try:
        with pytest.raises(DfsCerError) as info:
            pull("dfs", Q1, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST)
    finally:
        cluster.resume(2)
        cluster.restart(1)
    assert f"round {k} ({names[k - 1]})" in str(info.value) and "close" not in str(info.value)
    assert clean(cluster, range(3))


def test_whole_query_timeout(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """``timeout`` bounds the query even when every call stays under the per-call timeout."""
    config = StrategyConfig(
        call_timeout_seconds=30, query_timeout_seconds=300, close_timeout_seconds=0.5
    )
    before_round(monkeypatch, 3, lambda: cluster.pause(0))
    began = time.monotonic()
    try:
        with pytest.raises(
            DfsCerError, match=r"round 3 .*storage node .* (did not answer|deadline)"
        ):
            pull(
                "dfs",
                Q1,
                cluster.endpoints,
                cluster.token,
                cost_model="always_on",
                config=config,
                timeout=1.5,
            )
    finally:
        cluster.resume(0)
    assert time.monotonic() - began < 1.5 + 0.5 + 3
    assert clean(cluster, range(3))


def test_ten_concurrent_queries_with_room_for_one_all_complete(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """All-or-none, first-come reservations: with each node's budget about one query, ten queries
    at once complete one after another (none holds one node while waiting for another)."""
    from concurrent.futures import ThreadPoolExecutor

    from dfs_cer.datasets import synthetic_events

    root = tmp_path_factory.mktemp("admission")
    events = synthetic_events(30_000, seed=4)
    pq.write_table(events, root / "e.parquet")
    shard(str(root / "e.parquet"), 3, str(root / "nodes"), name="t")
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts "
        "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN INTERVAL "
        "'20' SECOND DEFINE A AS A.type = 'T_03', B AS B.type = 'T_07' AND B.a1 > A.a1)"
    )
    expected = rows(match_recognize(events, sql))
    dirs = [str(root / "nodes" / f"node-{i:02d}") for i in range(3)]
    with LocalCluster(dirs) as probe:  # one query's reservation on a node
        c = StorageClient(probe.endpoints[0], probe.token)
        c.action("reserve", {"query_id": "probe", "arrival": time.time()})
        one = c.action("stats")[0]["held_bytes"]
        c.close()
    config = StrategyConfig(admission_wait_seconds=60, query_timeout_seconds=120)
    with LocalCluster(dirs, memory_budget=str(int(one * 1.5))) as cluster:
        with ThreadPoolExecutor(10) as pool:
            results = list(
                pool.map(
                    lambda s: pull(s, sql, cluster.endpoints, cluster.token, config=config),
                    ["dfs", "push_down", "pull_all", "naive_dfs", "push_pull"] * 2,
                )
            )
        assert [rows(match_pulled(r)) for r in results] == [expected] * 10
        assert clean(cluster, range(3), within=0)


def test_a_node_restarted_onto_other_data_fails_the_query(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Same rows, times and manifest, other values: the re-open sees another content digest and the
    query fails instead of mixing the two snapshots."""
    import shutil

    original = cluster.data_dirs[1]
    other = tmp_path / "node-01"
    shutil.copytree(original, other)
    for f in sorted(other.glob("*.parquet")):
        t = pq.read_table(f)
        i = t.schema.get_field_index("id")
        pq.write_table(
            t.set_column(i, "id", pa.array([f"x{v}" for v in t.column(i).to_pylist()])), f
        )
    names = rounds_of(cluster, "dfs")
    k = names.index("collect") + 1

    def swap() -> None:
        cluster.data_dirs[1] = str(other)
        cluster.restart(1)

    try:
        with pytest.MonkeyPatch.context() as mp:
            before_round(mp, k, swap)
            with pytest.raises(DfsCerError, match="restarted serving other data"):
                pull(
                    "dfs", Q1, cluster.endpoints, cluster.token, cost_model="always_on", config=FAST
                )
    finally:
        cluster.data_dirs[1] = original
        cluster.restart(1)
    assert clean(cluster, range(3))
