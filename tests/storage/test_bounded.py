"""A storage node is bounded by the query that runs on it: push-pull matching, node-side
matching and input filters stop at the query's deadline, when it is closed, or when their
memory would pass the node's budget; other queries' control calls answer meanwhile; the next
query works; a LIKE whose cost is too high is not pushed (compute node) or refused (node)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.attacks import ALL2, SKIP4, attack_table, like_filter, run_attack
from dfs_cer import match_recognize
from dfs_cer.errors import MatchBudgetError, WorkCancelledError, WorkMemoryError
from dfs_cer.io.shard import shard
from dfs_cer.match.cer import join as cer_join
from dfs_cer.match.cer.engine import run_cer
from dfs_cer.match.push_pull import filter_by_projection
from dfs_cer.query import analyze, parse
from dfs_cer.query.input_filter import INPUT_FILTER
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.transport.client import NodeRefusedError, StorageClient
from dfs_cer.work import Work
from storage_node.launcher import LocalCluster
from storage_node.state import StateRegistry

#: rows per type: push-pull's 4-variable projection has n^4/24 combinations (10^9 at 400)
N = 400


# ------------------------------------------------------------------ the mechanism, in process


def test_an_opened_query_keeps_the_room_it_was_admitted_with() -> None:
    """An open query's state may be smaller than its reservation: the rest stays promised to it
    (its pulls copy rows next), so a later query is not admitted into it; the promise is taken
    as the query charges its copies, and given back at close. (Ten queries at once with room
    for one failed now and then: one admitted into the room the first query's pull needed.)"""
    import numpy as np

    from storage_node.state import QueryState

    registry = StateRegistry(1500, 600, 1)
    assert registry.try_reserve("a", 1000, arrival=1.0)
    registry.take_reservation("a")
    empty = pa.table({"x": pa.array([], pa.int64())})
    registry.put(QueryState("a", None, empty, np.zeros(0, np.int64), {}, reserved=1000))
    assert registry.held == 0  # its state holds nothing yet
    assert not registry.try_reserve("b", 1000, arrival=2.0)  # the 1000 are a's
    call = registry.work("a", "").call()
    call.charge(900)  # a's pull: from its promise
    assert registry.held == 900 and not registry.try_reserve("b", 1000, arrival=2.0)
    call.settle()
    registry.close("a")
    assert registry.try_reserve("b", 1000, arrival=2.0)


def test_registry_charges_work_to_the_budget_and_close_cancels_it() -> None:
    registry = StateRegistry(1000, 600, 1)
    call = registry.work("q", " on the storage node serving /d").call()
    call.charge(600)
    assert registry.held == 600
    with pytest.raises(
        WorkMemoryError,
        match=r"query q on the storage node serving /d needs 500 more bytes.*"
        r"storage.memory_budget, --memory-budget",
    ):
        call.charge(500)
    call.settle()
    assert registry.held == 0 and registry.stats()["work_peak_bytes"] == 600
    registry.close("q")
    with pytest.raises(WorkCancelledError, match="closed"):
        call.check()
    # a work asked for after the close (a call still in flight) is cancelled at once
    with pytest.raises(WorkCancelledError):
        registry.work("q", "").call().check()


def test_one_query_s_work_is_capped_by_storage_query_work_bytes() -> None:
    registry = StateRegistry(10_000, 600, 1, query_work=1000)
    first, second = registry.work("q", "").call(), registry.work("q", "").call()
    first.charge(600)
    with pytest.raises(
        WorkMemoryError, match=r"needs 1,100 bytes .* storage\.query_work_bytes=1,000"
    ):
        second.charge(500)
    registry.work("other", "").call().charge(900)  # another query has its own share
    first.settle()
    second.charge(900)


def test_bounded_cer_runs_return_exactly_the_unbounded_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunked joins (tiny chunks here) under a work give the same matches, in the same order."""
    table = attack_table(30)
    sql = ALL2.replace("ALL MATCHES PATTERN (A B)", "ALL MATCHES PATTERN (A B C)").replace(
        "B AS type = 'B'", "B AS type = 'B', C AS type = 'C' AND C.ts > A.ts"
    )
    analysis = analyze(parse(sql), table.schema)
    plain = run_cer(table, analysis)
    monkeypatch.setattr(cer_join, "CHUNK_PAIRS", 7)
    bounded = run_cer(table, analysis, work=Work("q", deadline=time.monotonic() + 600))
    assert bounded.table.equals(plain.table) and bounded.matches == plain.matches > 1000


def test_kleene_matches_are_charged_as_they_are_kept() -> None:
    """ALL MATCHES (A B+ C) enumerates every subset of B: the sets kept are charged too."""
    table = attack_table(12)
    sql = ALL2.replace("PATTERN (A B)", "PATTERN (A B+ C)").replace(
        "B AS type = 'B'", "B AS type = 'B', C AS type = 'C'"
    )
    analysis = analyze(parse(sql), table.schema)
    assert run_cer(table, analysis, work=Work("q")).matches > 4096
    with pytest.raises(WorkMemoryError, match="query q"):
        run_cer(table, analysis, work=StateRegistry(2**20, 600, 1).work("q", "").call())


def test_push_pull_filter_stops_at_the_deadline_and_at_the_memory_bound() -> None:
    table = attack_table(150)
    query = parse(SKIP4)
    uploads = {v: table.filter(pa.compute.equal(table.column("type"), v)) for v in "ABC"}
    local = table.filter(pa.compute.equal(table.column("type"), "D"))
    began = time.monotonic()
    with pytest.raises(WorkCancelledError):
        filter_by_projection(query, "D", local, uploads, Work("q", deadline=time.monotonic() + 0.3))
    assert time.monotonic() - began < 5
    registry = StateRegistry(64 * 2**20, 600, 1)
    with pytest.raises(WorkMemoryError, match="query q"):
        filter_by_projection(query, "D", local, uploads, registry.work("q", "").call())


# ------------------------------------------------------------------ real nodes


def rows_sorted(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("bounded")
    pq.write_table(attack_table(N), root / "events.parquet")
    shard(str(root / "events.parquet"), 1, str(root / "nodes"), time_column="ts", name="t")
    env = {
        "DFS_CER__STORAGE__FILTER_COST_LIMIT": "100000000",
        "DFS_CER__STORAGE__WORK_THREADS": "1",
        "DFS_CER__STORAGE__WARM_UP": "true",  # timed attacks: handlers loaded before ready
    }
    with LocalCluster([str(root / "nodes" / "node-00")], memory_budget="1GiB", env=env) as cluster:
        yield cluster


@pytest.mark.flight
@pytest.mark.parametrize("attack", ["push_pull", "node_matches", "abandoned"])
def test_an_attack_stops_and_leaves_the_node_as_it_was(node: LocalCluster, attack: str) -> None:
    """Generous bounds (the machine is loaded): the node stops within seconds of the deadline or
    the close, uses no CPU after, answers reserve meanwhile, and serves the next query."""
    pid = node.procs[0].pid
    out = run_attack(node.endpoints[0], node.token, pid, attack, lease=2.0, settle=1.0)
    print(out)
    if attack == "node_matches":  # (A B) over 400 x 400 events: 80,200 matches, within every bound
        assert out.error == "", out
    elif (
        attack == "push_pull" and out.error == ""
    ):  # its filter reached the memory bound first: every
        assert out.call_seconds < 6.0, (
            out
        )  # candidate kept, an exact success (whichever bound a loaded machine hits)
    else:
        assert (
            "WorkCancelledError" in out.error
            or "WorkMemoryError" in out.error
            or "did not answer" in out.error
        ), out
        assert "WorkMemoryError" in out.error or out.past_deadline_seconds < 4.0, out
    assert out.cpu_after_seconds < 0.5, out
    assert out.reserve_ms_max < 2000, out
    assert out.rss_peak_mb < 2500, out
    assert out.next_query_ms < 5000, out
    assert out.held_after == 0, out


@pytest.mark.flight
def test_node_side_matching_and_push_pull_are_charged_to_the_budget(tmp_path: Path) -> None:
    """ALL MATCHES (A B) without WITHIN over 1,500 x 1,500 events: 1.1 M matches do not fit a
    32 MiB budget: a clear error naming the query, the node and the setting. Push-pull's filter
    over a skip pattern without WITHIN does not fit either: the node keeps every candidate."""
    pq.write_table(attack_table(1500, text=1), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), time_column="ts", name="t")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], memory_budget="32MiB") as cluster:
        client = StorageClient(cluster.endpoints[0], cluster.token, timeout=120)
        qid = uuid.uuid4().hex
        client.action("open", {"query_id": qid, "sql": ALL2, "lease_seconds": 60})
        with pytest.raises(
            Exception,
            match=f"WorkMemoryError: query {qid} on the storage node serving .*"
            "storage.memory_budget",
        ):
            client.pull(
                {
                    "query_id": qid,
                    "kind": "pull_matches",
                    "event_key": [],
                    "dedup": False,
                    "max_matches": 10_000_000,
                    "on_limit": "error",
                    "max_steps": 10**15,
                }
            )
        stats = client.action("stats")[0]
        assert stats["work_bytes"] == 0 and stats["stopped"] >= 1
        client.action("close", {"query_id": qid})
        client.close()
        # push-pull's filter past the budget keeps every candidate: exact, a fallback to
        # push-down named in the trace
        result = pull("push_pull", SKIP4, cluster.endpoints, cluster.token)
        assert (
            match_pulled(result).to_pylist()
            == match_recognize(attack_table(1500, text=1), SKIP4).to_pylist()
        )
        fallback = result.trace.fallback or ""
        assert fallback.startswith("push_down (") and "storage.memory_budget" in fallback
        # node-side matching past the budget: the events are pulled and matched here, exactly
        result = pull("dfs", ALL2, cluster.endpoints, cluster.token, node_matching="on")
        got = match_pulled(result)
        assert got.num_rows == 1500 * 1501 // 2 and rows_sorted(got) == rows_sorted(
            match_recognize(attack_table(1500, text=1), ALL2)
        )
        assert any(
            "node-side matching stopped, events pulled" in (r.note or "")
            for r in result.trace.rounds
        )
        assert (result.trace.fallback or "").startswith("matching on the compute node (")


@pytest.mark.flight
def test_a_costly_input_filter_is_refused_by_the_node(node: LocalCluster) -> None:
    """Sent straight to a node, a LIKE over too many characters is refused with the code the
    compute node falls back on; a cheap one is taken and filters exactly."""
    client = StorageClient(node.endpoints[0], node.token, timeout=60)
    try:
        began = time.monotonic()
        with pytest.raises(NodeRefusedError, match=r"storage\.filter_cost_limit") as info:
            client.action(
                "open", {"query_id": uuid.uuid4().hex, "sql": SKIP4, "input_filter": like_filter(3)}
            )
        assert info.value.code == INPUT_FILTER and time.monotonic() - began < 10
        qid = uuid.uuid4().hex
        header, _ = client.action(
            "open", {"query_id": qid, "sql": SKIP4, "input_filter": "s LIKE 'a%'"}
        )
        assert header["rows"] == 4 * N
        client.action("close", {"query_id": qid})
    finally:
        client.close()


@pytest.mark.flight
def test_close_stops_a_running_push_pull_and_reserve_answers_meanwhile(node: LocalCluster) -> None:
    client = StorageClient(node.endpoints[0], node.token, timeout=120)
    other = StorageClient(node.endpoints[0], node.token, timeout=120)
    qid = uuid.uuid4().hex
    client.action("open", {"query_id": qid, "sql": SKIP4, "lease_seconds": 120})
    for v in "ABC":
        got = client.pull({"query_id": qid, "kind": "pull_variable", "variable": v})
        client.upload({"query_id": qid, "variable": v}, got.drop_columns([got.column_names[-1]]))
    errors: list[str] = []

    def attack() -> None:
        try:
            StorageClient(node.endpoints[0], node.token, timeout=120).action(
                "push_pull", {"query_id": qid, "variable": "D", "processed": list("ABC")}
            )
        except Exception as exc:
            errors.append(str(exc))

    thread = threading.Thread(target=attack)
    thread.start()
    time.sleep(1.0)
    asked = time.monotonic()
    probe = uuid.uuid4().hex
    assert other.action("reserve", {"query_id": probe, "arrival": time.time()})[0]["granted"] in (
        True,
        False,
    )
    assert time.monotonic() - asked < 2.0
    other.action("close", {"query_id": probe})
    closed = time.monotonic()
    other.action("close", {"query_id": qid})
    thread.join(30)
    assert not thread.is_alive() and time.monotonic() - closed < 5.0
    assert errors and ("closed" in errors[0] or "WorkMemoryError" in errors[0]), errors
    client.close()
    other.close()


def test_attack_data_is_what_the_attacks_assume() -> None:
    table = attack_table(3)
    assert table.column("type").to_pylist()[:5] == ["A", "B", "C", "D", "A"]
    got = match_recognize(table, ALL2)
    assert got.num_rows == 6 and np.all(
        np.diff(table.column("ts").cast(pa.int64()).to_numpy()) == 1
    )


@pytest.mark.flight
def test_a_like_the_node_refuses_runs_on_the_compute_node_exactly(node: LocalCluster) -> None:
    """Within the compute node's pattern bound but over too many characters for the node: the
    input is computed on the compute node, exactly, and the trace names the node's limit."""
    import warnings

    from dfs_cer.query.parser import parse_statement
    from dfs_cer.strategies.statements import merged_trace, pull_statement

    clause = (
        "MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, C.ts AS c ALL MATCHES PATTERN (A C) "
        "WITHIN INTERVAL '3' SECOND DEFINE A AS type = 'A', C AS type = 'C')"
    )
    sql = (
        f"SELECT * FROM (SELECT * FROM t WHERE {like_filter(3)} "
        f"OR type <> 'B') {clause} ORDER BY a, c"
    )
    statement = parse_statement(sql)
    assert (
        statement.parts[0].pushed is not None
    )  # 768 pattern characters: the compute node pushes it
    expected = match_recognize(attack_table(N), sql)
    assert expected.num_rows > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement("push_down", statement, node.endpoints, node.token)
    assert got.table.to_pylist() == expected.to_pylist()
    assert "storage.filter_cost_limit" in (merged_trace(got.traces, "push_down").fallback or "")
    # 180 such LIKEs: not pushed at all, computed on the compute node, named in the trace
    sql = (
        f"SELECT * FROM (SELECT * FROM t WHERE {like_filter(180)} "
        f"OR type <> 'B') {clause} ORDER BY a, c"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement("push_down", parse_statement(sql), node.endpoints, node.token)
    assert got.table.to_pylist() == expected.to_pylist()
    assert "characters in all are not pushed" in (
        merged_trace(got.traces, "push_down").fallback or ""
    )


@pytest.mark.flight
def test_many_heavy_calls_wait_for_a_work_slot_while_control_calls_answer(
    node: LocalCluster,
) -> None:
    """Eight push-pull calls at once on a node with one work slot: they take turns (each
    checking its deadline while it waits) and all end by the deadline plus a step; health and
    stats answer meanwhile."""
    client = StorageClient(node.endpoints[0], node.token, timeout=120)
    qid = uuid.uuid4().hex
    client.action("open", {"query_id": qid, "sql": SKIP4, "lease_seconds": 4})
    for v in "ABC":
        got = client.pull({"query_id": qid, "kind": "pull_variable", "variable": v})
        client.upload({"query_id": qid, "variable": v}, got.drop_columns([got.column_names[-1]]))
    deadline = time.monotonic() + 4
    errors: list[str] = []

    def attack() -> None:
        caller = StorageClient(node.endpoints[0], node.token, timeout=120)
        try:
            caller.action("push_pull", {"query_id": qid, "variable": "D", "processed": list("ABC")})
        except Exception as exc:
            errors.append(str(exc))
        finally:
            caller.close()

    threads = [threading.Thread(target=attack) for _ in range(8)]
    for t in threads:
        t.start()
    worst = 0.0
    while any(t.is_alive() for t in threads):
        for name in ("health", "stats"):
            asked = time.monotonic()
            client.action(name)
            worst = max(worst, time.monotonic() - asked)
        time.sleep(0.1)
    assert worst < 2.0 and time.monotonic() < deadline + 6.0, (worst, time.monotonic() - deadline)
    # each call stopped at the deadline, or (past the memory budget) kept every candidate
    assert all("WorkCancelledError" in e for e in errors), errors
    client.action("close", {"query_id": qid})
    assert client.action("stats")[0]["work_bytes"] == 0
    client.close()


#: A+ B+ C where C never holds, over one partition: node-side matching whose VM work grows with
#: the cube of the rows (minutes at 800 rows): C reads the row before B's last, so no two splits
#: of the rows are one thread (with LAST(B.v) the VM prunes them and the work is linear)
CUBIC = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES A.ts AS a ONE ROW "
    "PER MATCH PATTERN (A+ B+ C) DEFINE C AS v > LAST(B.v, 1) + 100)"
)


@pytest.mark.flight
@pytest.mark.parametrize("lease", [2.0, 1e12, None])
def test_node_side_row_pattern_matching_stops_at_the_deadline_or_the_idle_ttl(
    tmp_path: Path, lease: float | None
) -> None:
    """The compiled VM stops at the query's deadline; a lease the client makes huge, or none,
    still ends a call at the node's idle TTL (the state would be dropped then anyway)."""
    n = 800
    pq.write_table(
        pa.table(
            {
                "ts": np.arange(n, dtype=np.int64),
                "v": np.zeros(n, np.int64),
                "p": np.zeros(n, np.int64),
            }
        ),
        tmp_path / "e.parquet",
    )
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), time_column="ts", name="t")
    env = {"DFS_CER__STORAGE__STATE_TTL_SECONDS": "3", "DFS_CER__STORAGE__WARM_UP": "true"}
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], env=env) as cluster:
        client = StorageClient(cluster.endpoints[0], cluster.token, timeout=120)
        qid = uuid.uuid4().hex
        client.action(
            "open",
            {"query_id": qid, "sql": CUBIC, **({} if lease is None else {"lease_seconds": lease})},
        )
        began = time.monotonic()
        with pytest.raises(
            Exception,
            match="WorkCancelledError.*"
            + ("lease_seconds" if lease == 2.0 else r"storage\.state_ttl_seconds"),
        ):
            client.pull(
                {
                    "query_id": qid,
                    "kind": "pull_matches",
                    "event_key": [],
                    "dedup": False,
                    "max_matches": 10_000_000,
                    "on_limit": "error",
                    "max_steps": 10**15,
                }
            )
        assert time.monotonic() - began < 15
        assert client.action("stats")[0]["work_bytes"] == 0
        client.close()


@pytest.mark.flight
def test_node_side_matching_past_the_step_budget_ends_the_query_with_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compute node's ``matcher.max_steps`` travels with ``pull_matches``: a pathological
    pattern (no thread pruning applies to the row before B's last) stops on the node with one
    error naming the partition, its rows, the pattern and the setting; the strategy falls back to
    matching the pulled events here (named in the trace), which ends with the error every
    strategy gives, and the node holds nothing after."""
    n = 600
    pq.write_table(
        pa.table(
            {
                "ts": np.arange(n, dtype=np.int64),
                "v": np.zeros(n, np.int64),
                "p": np.full(n, 7, np.int64),
            }
        ),
        tmp_path / "e.parquet",
    )
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), time_column="ts", name="t")
    monkeypatch.setenv("DFS_CER__MATCHER__MAX_STEPS", "200000")
    env = {"DFS_CER__STORAGE__WARM_UP": "true"}  # the VM compiled before the first call
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], env=env) as cluster:
        began = time.monotonic()
        result = pull("dfs", CUBIC, cluster.endpoints, cluster.token, node_matching="on")
        assert time.monotonic() - began < 60
        stopped = result.trace.fallback or ""
        assert stopped.startswith("matching on the compute node (node-side matching hit a bound: ")
        with pytest.raises(MatchBudgetError) as info:
            match_pulled(result)
        with pytest.raises(MatchBudgetError) as every:  # the error every strategy ends with
            match_pulled(pull("pull_all", CUBIC, cluster.endpoints, cluster.token))
        assert str(info.value) == str(every.value)
        for text in (str(info.value), stopped):
            for part in ("p = 7", "600 rows", "PATTERN (A+ B+ C)", "DFS_CER__MATCHER__MAX_STEPS"):
                assert part in text, (part, text)
        client = StorageClient(cluster.endpoints[0], cluster.token, timeout=30)
        assert client.action("stats")[0]["work_bytes"] == 0
        client.close()


@pytest.mark.flight
def test_a_pull_past_the_budget_is_refused_before_it_is_copied(tmp_path: Path) -> None:
    """Long strings of few distinct values (dictionary-encoded on disk: the files' size says
    2 % of their decoded size): a query admitted under the budget whose pull would copy more
    than the budget has free is refused, naming the budget and the way out; the node gives back
    every byte, and a narrower query works."""
    n = 3000
    words = [c * 4000 for c in "abcde"]
    table = pa.table(
        {
            "ts": pa.array(np.arange(n), pa.int64()),
            "type": pa.array(["A", "B", "C"] * (n // 3)),
            "s": pa.array([words[i % 5] for i in range(n)]),
        }
    )
    pq.write_table(table, tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), time_column="ts", name="t")
    every = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS A.ts >= 0)"
    )
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], memory_budget="20MiB") as cluster:
        client = StorageClient(cluster.endpoints[0], cluster.token, timeout=120)
        qid = uuid.uuid4().hex
        client.action("open", {"query_id": qid, "sql": every, "lease_seconds": 60})
        held = client.action("stats")[0]["held_bytes"]
        assert 12_000_000 < held < 13_000_000  # the query's rows, decoded
        with pytest.raises(
            NodeRefusedError,
            match=f"WorkMemoryError: query {qid} on the storage node serving .* needs "
            r"[\d,]+ more bytes for copies of its rows .* memory budget of 20,971,520 .*"
            r"narrow the query .* or raise the budget",
        ):
            client.pull({"query_id": qid, "kind": "pull_pushdown"})
        stats = client.action("stats")[0]
        assert stats["held_bytes"] == held and stats["work_bytes"] == 0
        client.action("close", {"query_id": qid})
        assert client.action("stats")[0]["held_bytes"] == 0
        narrow = every.replace("A.ts >= 0", "A.type = 'A'")
        client.action("open", {"query_id": qid + "n", "sql": narrow, "lease_seconds": 60})
        got = client.pull({"query_id": qid + "n", "kind": "pull_pushdown"})
        assert got.num_rows == n // 3 and got.column("s").to_pylist()[:2] == words[:4:3]
        client.action("close", {"query_id": qid + "n"})
        stats = client.action("stats")[0]
        assert stats["held_bytes"] == 0 and stats["work_bytes"] == 0
        client.close()
