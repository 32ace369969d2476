"""Compressed transfers: pulled rows travel as one Arrow IPC stream with zstd / lz4 buffer
compression and dictionary-encoded strings; every strategy returns the same rows as an
uncompressed transfer, and the traces count the (smaller) bytes that crossed the network."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.config import StrategyConfig
from dfs_cer.errors import ProtocolError
from dfs_cer.io.shard import shard
from dfs_cer.transport.envelope import (
    COLUMN,
    COLUMN_PRIMED,
    COLUMN_WHOLE,
    open_sealed,
    primer,
    primer_digest,
    seal,
)
from storage_node.launcher import LocalCluster


def events(n: int = 20_000) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table(
        {
            "type": pa.array(rng.choice([f"T_{i:02d}" for i in range(20)], n)),
            "a1": pa.array(rng.integers(0, 1000, n)),
            "ts": pa.array(np.cumsum(rng.integers(0, 3, n))),
            "note": pa.array([f"n{i}" for i in range(n)]),
        }
    )


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.none(), st.sampled_from(["a", "b", "é", ""]), st.text(max_size=5)),
        max_size=300,
    ),
    compression=st.sampled_from(["zstd", "lz4", "none"]),
)
def test_a_sealed_table_opens_to_the_same_rows(values: list[str | None], compression: str) -> None:
    table = pa.table(
        {
            "s": pa.array(values, pa.string()),
            "i": pa.array(range(len(values)), pa.int64()),
            "l": pa.array(values, pa.large_string()),
        }
    ).replace_schema_metadata({"k": "v"})
    sealed = seal(table, compression)
    # zstd: small streams may travel compressed whole (when that is smaller)
    assert sealed.column_names in ([COLUMN], [COLUMN_WHOLE] if compression == "zstd" else [])
    rows, size = open_sealed(sealed, 1 << 30)
    assert rows.equals(table) and rows.schema.metadata == table.schema.metadata
    assert size == sum(len(b) for b in sealed.column(0).to_pylist())


def test_a_large_stream_never_travels_whole() -> None:
    table = pa.table({"i": pa.array(np.zeros(300_000, np.int64))})  # 2.4 MB, compresses to little
    sealed = seal(table, "zstd")
    assert sealed.column_names == [COLUMN]
    assert open_sealed(sealed, 1 << 30)[0].equals(table)


def test_a_few_rows_travel_compressed_whole_and_a_bad_length_is_refused() -> None:
    table = events().slice(0, 3)
    sealed = seal(table, "zstd")
    assert sealed.column_names == [COLUMN_WHOLE]
    rows, size = open_sealed(sealed, 1 << 30)
    per_buffer = pa.ipc.IpcWriteOptions(compression="zstd")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=per_buffer) as writer:
        writer.write_table(table)
    assert rows.equals(table) and size < 0.6 * sink.getvalue().size
    blob = sealed.column(0)[0].as_py()
    forged = (10**12).to_bytes(8, "little") + blob[8:]
    with pytest.raises(ProtocolError, match="declares a stream"):
        open_sealed(pa.table({COLUMN_WHOLE: pa.array([forged], pa.large_binary())}), 1 << 30)
    with pytest.raises(ProtocolError, match="does not decode"):
        bad = blob[:8] + b"garbage"
        open_sealed(pa.table({COLUMN_WHOLE: pa.array([bad], pa.large_binary())}), 1 << 30)


@pytest.mark.parametrize("n", [0, 1, 3, 40])
def test_a_few_rows_primed_with_their_schema_cost_a_fraction_and_a_wrong_primer_fails(
    n: int,
) -> None:
    table = events().slice(0, n)
    primed = primer(table.schema)
    sealed = seal(table, "zstd", primer_digest(primed))
    assert sealed.column_names == [COLUMN_PRIMED]
    rows, size = open_sealed(sealed, 1 << 30, primed)
    assert rows.equals(table)
    unprimed = open_sealed(seal(table, "zstd"), 1 << 30)[1]
    assert size < (0.5 if n <= 3 else 0.9) * unprimed, (size, unprimed)
    # a node with another schema does not prime (the digests differ) ...
    other = primer(pa.schema([("x", pa.int8())]))
    assert seal(table, "zstd", primer_digest(other)).column_names == [COLUMN_WHOLE]
    # ... and a reply read with another primer, or none, fails rather than misreads
    with pytest.raises(ProtocolError, match="does not decode"):
        open_sealed(sealed, 1 << 30, other)
    with pytest.raises(ProtocolError, match="did not name"):
        open_sealed(sealed, 1 << 30)


def test_compression_shrinks_repetitive_rows_and_bad_replies_are_refused() -> None:
    table = events()
    sizes = {c: open_sealed(seal(table, c), 1 << 30)[1] for c in ("zstd", "lz4", "none")}
    assert sizes["zstd"] < sizes["lz4"] < sizes["none"] and sizes["zstd"] < 0.5 * table.nbytes, (
        sizes
    )
    with pytest.raises(ProtocolError, match="compression must be one of"):
        seal(table, "gzip")
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        open_sealed(seal(table, "zstd"), 100)
    with pytest.raises(ProtocolError, match="does not decode"):
        open_sealed(pa.table({COLUMN: pa.array([b"garbage"], pa.large_binary())}), 1 << 30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("compression")
    pq.write_table(events(), root / "t.parquet")
    shard(str(root / "t.parquet"), 2, str(root / "nodes"), batch_rows=4000)
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as c:
        yield c


SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ONE ROW PER "
    "MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN 30 DEFINE A AS A.type = "
    "'T_03' AND A.a1 < 300, B AS B.type = 'T_07' AND B.a1 > A.a1)"
)


@pytest.mark.flight
@pytest.mark.parametrize("strategy", ["pull_all", "push_down", "push_pull", "dfs"])
def test_every_strategy_returns_the_same_rows_compressed(
    cluster: LocalCluster, strategy: str
) -> None:
    from dfs_cer.strategies import pull

    runs = {}
    for compression in ("none", "zstd", "lz4"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs[compression] = pull(
                strategy,
                SQL,
                cluster.endpoints,
                cluster.token,
                config=StrategyConfig(transfer_compression=compression),
            )
    plain = runs["none"].events
    for compression in ("zstd", "lz4"):
        assert runs[compression].events.equals(plain), compression
        assert runs[compression].events.schema == plain.schema
    assert runs["zstd"].trace.bytes_to_cn < runs["none"].trace.bytes_to_cn
    if strategy == "pull_all":  # every row: the codecs show their ratio
        assert runs["zstd"].trace.bytes_to_cn < 0.6 * runs["none"].trace.bytes_to_cn


@pytest.mark.flight
def test_a_node_refuses_an_unknown_codec(cluster: LocalCluster) -> None:
    from dfs_cer.transport.client import NodeRefusedError, StorageClient

    client = StorageClient(cluster.endpoints[0], cluster.token, compression="gzip")
    try:
        with pytest.raises(NodeRefusedError, match="compression must be one of"):
            client.pull({"kind": "pull_all"})
    finally:
        client.close()


@pytest.mark.flight
def test_a_nodes_small_pull_travels_primed_with_the_schema_open_sent(cluster: LocalCluster) -> None:
    from dfs_cer.strategies.base import Session, Trace
    from dfs_cer.strategies.request import PullRequest
    from dfs_cer.strategies.steps import open_query

    sql = SQL.replace("'T_03' AND A.a1 < 300", "'T_03' AND A.a1 < 20").replace(
        "B.a1 > A.a1", "B.a1 < 20"
    )
    session = Session.connect(cluster.endpoints, cluster.token, Trace("push_down"))
    try:
        _, _, schema = open_query(session, PullRequest.of("push_down", sql, cluster.endpoints, ""))
        assert all(c.primer == primer(schema) for c in session.clients)
        rows = session.clients[0].pull({"query_id": session.query_id, "kind": "pull_pushdown"})
        primed = session.clients[0].transfers[-1].bytes_to_cn
        session.clients[0].primer = None
        again = session.clients[0].pull({"query_id": session.query_id, "kind": "pull_pushdown"})
        plain = session.clients[0].transfers[-1].bytes_to_cn
        assert rows.equals(again) and 0 < rows.num_rows < 200
        assert primed < plain - 150, (primed, plain)
    finally:
        session.close()
        session.close_connections()
