"""Three storage node processes on loopback over local shards, driven through every action."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize, parse
from dfs_cer.datasets import synthetic_events
from dfs_cer.errors import StorageError
from dfs_cer.io.shard import shard
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.messages import encode
from storage_node.launcher import LocalCluster
from tests.fixtures.round_trip import QUERY, dual_filtering_round_trip

pytestmark = pytest.mark.flight


@pytest.fixture(scope="module")
def events() -> pa.Table:
    return synthetic_events(60_000, seed=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, events: pa.Table) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("shards")
    pq.write_table(events, root / "events.parquet")
    shard(str(root / "events.parquet"), 3, str(root / "nodes"), batch_rows=20_000, name="t")
    dirs = [str(root / "nodes" / f"node-{i:02d}") for i in range(3)]
    # a 2-second TTL: the nodes load their query handlers before ready, not on the first open
    env = {"DFS_CER__STORAGE__STATE_TTL_SECONDS": "2", "DFS_CER__STORAGE__WARM_UP": "true"}
    with LocalCluster(dirs, env=env) as c:
        yield c


def clients(cluster: LocalCluster) -> list[StorageClient]:
    return [StorageClient(e, cluster.token) for e in cluster.endpoints]


def test_health_and_auth(cluster: LocalCluster) -> None:
    for c in clients(cluster):
        header, _ = c.action("health")
        assert header["status"] == "ok" and header["rows"] == 20_000
    bad = StorageClient(cluster.endpoints[0], "x" * 32)
    with pytest.raises(StorageError, match="token"):
        bad.action("health")


def test_dual_filtering_round_trips_pull_exactly_what_matches_need(
    cluster: LocalCluster, events: pa.Table
) -> None:
    dual_filtering_round_trip(clients(cluster), events)


def test_bad_requests_get_clear_errors_and_the_node_keeps_serving(cluster: LocalCluster) -> None:
    c = clients(cluster)[0]
    cases = [
        ("nope", encode({}), "unknown action 'nope'"),
        ("open", b"garbage", "malformed message"),
        ("open", encode({"query_id": "x"}), "missing field 'query'"),
        ("open", encode({"query_id": "x", "query": "{}"}), "not a valid query"),
        (
            "intervals",
            encode({"query_id": "never-opened", "variable": "A", "role": "head", "window": 1}),
            "unknown query id 'never-opened'",
        ),
        ("verify", encode({"query_id": 5}), "query_id must be 1 to 64 letters"),
        (
            "summaries",
            encode({"query_id": "never-opened", "window": 1, "variables": [], "pairs": []}),
            "unknown query id 'never-opened'",
        ),
    ]
    options = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {cluster.token}".encode())]
    )
    raw = flight.FlightClient(cluster.endpoints[0])
    for name, body, message in cases:
        with pytest.raises(flight.FlightError, match=message):
            list(raw.do_action(flight.Action(name, body), options=options))
    assert c.action("health")[0]["status"] == "ok"


def test_random_bytes_fuzzing(cluster: LocalCluster) -> None:
    rng = np.random.default_rng(0)
    options = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {cluster.token}".encode())]
    )
    raw = flight.FlightClient(cluster.endpoints[1])
    for i in range(120):
        name = ["open", "intervals", "wjf", "verify", "close"][i % 5]
        body = rng.integers(0, 256, int(rng.integers(0, 300))).astype(np.uint8).tobytes()
        if i % 3 == 0:  # well-framed messages with random contents
            body = encode(
                {
                    "query_id": "f",
                    "variable": "A",
                    "role": "head",
                    "window": 3,
                    "builds": [{}],
                    "probes": [{}],
                },
                [body],
            )
        # either a clean answer or a Flight error, never a crash
        try:
            list(raw.do_action(flight.Action(name, body), options=options))
        except flight.FlightError as exc:
            assert not isinstance(exc, flight.FlightUnavailableError)
        with contextlib.suppress(flight.FlightError):
            raw.do_get(flight.Ticket(body), options=options).read_all()
    assert StorageClient(cluster.endpoints[1], cluster.token).action("health")[0]["status"] == "ok"


def test_concurrent_queries_are_isolated(cluster: LocalCluster) -> None:
    qa = parse(QUERY)
    qb = parse(QUERY.replace("'T_01'", "'T_04'"))
    results: dict[str, int] = {}

    def run(qid: str, q: object) -> None:
        c = StorageClient(cluster.endpoints[2], cluster.token)
        c.action("open", {"query_id": qid, "query": q.to_json()})  # type: ignore[attr-defined]
        results[qid] = c.pull({"query_id": qid, "kind": "pull_pushdown"}).num_rows
        c.action("close", {"query_id": qid})

    threads = [
        threading.Thread(target=run, args=(f"{k}-{i}", q))
        for i in range(3)
        for k, q in (("a", qa), ("b", qb))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({v for k, v in results.items() if k.startswith("a")}) == 1
    assert len({v for k, v in results.items() if k.startswith("b")}) == 1
    assert results["a-0"] != results["b-0"]


def test_ttl_eviction_frees_memory(cluster: LocalCluster) -> None:
    c = StorageClient(cluster.endpoints[0], cluster.token)
    c.action("open", {"query_id": "abandoned", "query": parse(QUERY).to_json()})
    before = c.action("stats")[0]
    assert before["queries"] >= 1 and before["per_query_bytes"][0] > 0
    time.sleep(2.5)
    c.action("health")
    c.action("close", {"query_id": "unrelated"})  # any framed call sweeps expired state
    stats = c.action("stats")[0]
    assert stats["queries"] == before["queries"] - 1 and stats["evicted"] >= 1


def test_schema_mismatch_is_refused_at_start_up(tmp_path: Path, events: pa.Table) -> None:
    pq.write_table(events.slice(0, 1000), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), name="t")
    node = tmp_path / "nodes" / "node-00"
    bad = events.slice(0, 10).drop(["a3"])
    pq.write_table(bad, node / "part-00000.parquet")
    with (
        pytest.raises(StorageError, match="does not match the manifest schema"),
        LocalCluster([str(node)]),
    ):
        pass


def test_memory_budget_refuses_instead_of_dying(tmp_path: Path, events: pa.Table) -> None:
    pq.write_table(events, tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), name="t")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], memory_budget="64KiB") as small:
        c = StorageClient(small.endpoints[0], small.token)
        with pytest.raises(StorageError, match="memory budget"):
            c.action("open", {"query_id": "big", "query": parse(QUERY).to_json()})
        assert c.action("health")[0]["status"] == "ok"


def test_push_pull_rounds(cluster: LocalCluster, events: pa.Table) -> None:
    """Push-pull (the paper's baseline): pull A's events, upload them, let the nodes keep only the
    B events that complete (A, B), pull those, upload, then C; the pulled events are exact."""
    nodes = clients(cluster)
    qjson = parse(QUERY).to_json()
    pushdown = sum(c.action("open", {"query_id": "pp", "query": qjson})[0]["rows"] for c in nodes)

    def pull_variable(var: str) -> pa.Table:
        tables = [
            c.pull({"query_id": "pp", "kind": "pull_variable", "variable": var}) for c in nodes
        ]
        return pa.concat_tables(tables).drop(["__dfs_cer_row_id"])

    pulled = {"A": pull_variable("A")}
    processed: list[str] = ["A"]
    for var in ("B", "C"):
        for c in nodes:
            for p in processed:
                if p == processed[-1]:
                    c.upload({"query_id": "pp", "variable": p}, pulled[p])
            c.action("push_pull", {"query_id": "pp", "variable": var, "processed": processed})
        pulled[var] = pull_variable(var)
        processed.append(var)
    union = pa.concat_tables(list(pulled.values()))
    expected = match_recognize(events, QUERY).sort_by("a")
    assert match_recognize(union, QUERY).sort_by("a").equals(expected)
    assert union.num_rows < pushdown
    for c in nodes:
        c.action("close", {"query_id": "pp"})


def _self_signed(tmp: Path) -> tuple[str, str]:
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(tmp / "cert.pem"), str(tmp / "key.pem")


def test_tls_and_message_cap(tmp_path: Path, events: pa.Table) -> None:
    pq.write_table(events.slice(0, 2000), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), name="t")
    cert, key = _self_signed(tmp_path)
    env = {"DFS_CER__STORAGE__MAX_MESSAGE_BYTES": "4096"}
    with LocalCluster([str(tmp_path / "nodes" / "node-00")], tls=(cert, key), env=env) as secure:
        assert secure.endpoints[0].startswith("grpc+tls://")
        c = StorageClient(secure.endpoints[0], secure.token, tls_root_certs=Path(cert).read_bytes())
        assert c.action("health")[0]["rows"] == 2000
        with pytest.raises(StorageError, match="exceeds the storage node's limit of 4096"):
            text = np.random.default_rng(0).bytes(10_000).hex()  # does not compress under it
            c.action("open", {"query_id": "x", "query": text})
        # a header compressed under the cap is bounded once inflated too
        with pytest.raises(StorageError, match="once decompressed exceeds the limit of 4096"):
            c.action("open", {"query_id": "x", "query": "y" * 5000})
        assert c.action("health")[0]["status"] == "ok"


def test_shard_cache_serves_later_scans_from_memory(tmp_path: Path, events: pa.Table) -> None:
    pq.write_table(events, tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), name="t")
    node = [str(tmp_path / "nodes" / "node-00")]
    replies = {}
    for cache in ("1GiB", "0"):
        with LocalCluster(node, env={"DFS_CER__STORAGE__CACHE_BYTES": cache}) as one:
            c = StorageClient(one.endpoints[0], one.token)
            opened = [
                c.action("open", {"query_id": f"q{i}", "query": parse(QUERY).to_json()})[0]
                for i in range(3)
            ]
            assert opened[0]["variables"] == opened[2]["variables"]
            pulled = c.pull({"query_id": "q2", "kind": "pull_pushdown"})
            stats = c.action("stats")[0]
            replies[cache] = (opened[0]["variables"], pulled)
        if cache == "0":
            assert stats["cached_bytes"] == 0 and stats["cache_hits"] == 0
        else:
            # later opens read the cached rows (through the value index of the type column)
            assert (
                stats["cached_bytes"] > 0 and stats["cache_hits"] >= 2 and stats["index_bytes"] > 0
            )
    assert replies["1GiB"][0] == replies["0"][0] and replies["1GiB"][1].equals(replies["0"][1])


def test_nodes_load_and_index_their_rows_before_reporting_ready(
    tmp_path: Path, events: pa.Table
) -> None:
    """storage.preload: the rows are cached and the event-type column indexed before the first
    query (which then pays for neither); with preload off, the first query loads them."""
    pq.write_table(events, tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(tmp_path / "nodes"), name="t")
    node = [str(tmp_path / "nodes" / "node-00")]
    for preload in ("true", "false"):
        with LocalCluster(node, env={"DFS_CER__STORAGE__PRELOAD": preload}) as one:
            stats = StorageClient(one.endpoints[0], one.token).action("stats")[0]
        if preload == "true":
            assert stats["cached_bytes"] > 0 and stats["index_bytes"] > 0
        else:
            assert stats["cached_bytes"] == 0 and stats["index_bytes"] == 0
