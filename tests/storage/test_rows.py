"""Copies of a query's rows on a node (storage_node.rows): charged before they are made, and cut
into chunks no string column overflows. The byte limits are lowered here: the same code holds
a 2 GiB column apart without allocating one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dfs_cer.errors import WorkMemoryError
from dfs_cer.transport import envelope
from storage_node import rows as node_rows
from storage_node.rows import bounded, copy_bytes, keep, sort, take
from storage_node.state import StateRegistry
from storage_node.store import by_time

RNG = np.random.default_rng(7)
N = 600
#: long values of few distinct strings (a dictionary-encoded parquet column, decoded)
WORDS = ["x" * 700, "y" * 300, "", "z" * 1500]
TABLE = pa.table(
    {
        "ts": pa.array(np.sort(RNG.integers(0, 50, N)), pa.int64()),
        "s": pa.array([WORDS[i] for i in RNG.integers(0, len(WORDS), N)]),
        "b": pa.array([bytes(int(k)) for k in RNG.integers(0, 90, N)], pa.large_binary()),
        "d": pa.array(RNG.choice(["p", "q"], N)).dictionary_encode(),
        "v": pa.array(RNG.normal(size=N)),
    }
)
#: the same rows as a scan hands them over: many chunks
CHUNKED = pa.Table.from_batches(TABLE.to_batches(max_chunksize=53))

PICKS = {
    "all": np.arange(N),
    "ascending": np.sort(RNG.choice(N, 250, replace=False)),
    "shuffled": RNG.permutation(N)[:300],
    "repeated": RNG.integers(0, N, 400),
    "none": np.zeros(0, np.int64),
}


@pytest.mark.parametrize("source", ["one chunk", "chunks"])
@pytest.mark.parametrize("pick", list(PICKS))
@pytest.mark.parametrize("limit", [2_000, 30_000, None])
def test_a_take_is_the_rows_in_chunks_of_at_most_the_limit(
    source: str, pick: str, limit: int | None
) -> None:
    table = TABLE if source == "one chunk" else CHUNKED
    rows = PICKS[pick]
    got = take(table, rows, limit=limit)
    assert got.equals(TABLE.take(pa.array(rows, pa.int64())))
    cap = node_rows.CHUNK_BYTES if limit is None else limit
    widest = max(len(w) for w in WORDS) + 90 + 64  # one row may pass the limit alone
    assert all(b.nbytes <= cap + widest for b in got.to_batches())
    if limit == 2_000 and rows.size:
        assert len(got.to_batches()) > 10
    assert abs(copy_bytes(table, rows) - got.nbytes) <= 0.01 * got.nbytes + 8 * len(WORDS) + 64


def test_rows_of_a_string_column_past_2_gib_are_taken_without_overflow() -> None:
    """A string column of 2.07 GiB of characters (one 1 MiB chunk, 2,100 times: 1 MiB of
    memory), as a scan of a large shard set hands it over: rows taken or kept from any of its
    chunks, and the whole column streamed in bounded batches, with no concatenation (Arrow's
    take concatenates first: "offset overflow")."""
    one = pa.array([f"{i:05d}" + "x" * 1019 for i in range(1024)])
    table = pa.table(
        {
            "i": pa.chunked_array([pa.array(np.arange(1024))] * 2100),
            "s": pa.chunked_array([one] * 2100),
        }
    )
    assert table.column("s").nbytes > 2**31
    picked = RNG.integers(0, table.num_rows, 3000)
    got = take(table, picked)
    assert got.column("s").to_pylist() == [f"{r % 1024:05d}" + "x" * 1019 for r in picked]
    assert got.column("i").to_pylist() == [int(r % 1024) for r in picked]
    mask = np.zeros(table.num_rows, bool)
    mask[::997] = True
    assert keep(table, mask).column("i").to_pylist() == [
        int(r % 1024) for r in np.flatnonzero(mask)
    ]
    batches = bounded(table, 3 * 2**20).to_batches()
    assert sum(b.num_rows for b in batches) == table.num_rows
    assert max(b.nbytes for b in batches) <= 3 * 2**20


def test_a_cached_column_too_large_for_one_array_stays_in_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rows a node caches, sorted by time: a string column past one array's limit (20 kB
    here, 2 GiB of characters in a node) is sorted chunk by chunk into bounded chunks (5 kB
    here, 64 MiB in a node)."""
    monkeypatch.setattr(node_rows, "ARRAY_BYTES", 20_000)
    monkeypatch.setattr(node_rows, "CHUNK_BYTES", 5_000)
    shuffled = CHUNKED.take(pa.array(RNG.permutation(N)))
    loaded = by_time(shuffled.to_batches(max_chunksize=40), "ts")
    assert isinstance(loaded, pa.Table) and loaded.column("s").num_chunks > 1
    assert loaded.column("ts").num_chunks == 1 and loaded.column("v").num_chunks == 1
    assert loaded.equals(shuffled.sort_by("ts"))
    assert sort(shuffled, "ts").equals(shuffled.sort_by("ts"))
    # the cache stops loading past its cap: the bytes seen instead of the rows
    parts = TABLE.to_batches(max_chunksize=100)
    assert by_time(parts, "ts", cap=parts[0].nbytes + 1) == parts[0].nbytes + parts[1].nbytes


def test_a_copy_is_charged_before_it_is_made_and_refused_past_the_budget() -> None:
    registry = StateRegistry(copy_bytes(TABLE) + 1000, 600, 1)
    work = registry.work("q", " on the storage node serving /d").call()
    first = take(TABLE, np.arange(N), work)
    assert registry.held == work.charged >= first.nbytes
    before = pa.total_allocated_bytes()
    with pytest.raises(
        WorkMemoryError,
        match=r"query q on the storage node serving /d needs [\d,]+ more bytes for copies of "
        r"its rows .* \(storage\.memory_budget, --memory-budget\): narrow the query",
    ):
        take(TABLE, np.arange(N), work)
    assert pa.total_allocated_bytes() == before  # refused before a byte was allocated
    work.settle()
    assert registry.held == 0 and registry.stats()["work_bytes"] == 0


def test_replies_travel_in_bounded_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply streams in record batches of bounded bytes (no copy); a compressed one too (its
    stream's chunks are slices of the stream), and reads back the same."""
    out = bounded(TABLE, 5_000)
    assert out.equals(TABLE) and max(b.nbytes for b in out.to_batches()) <= 5_000 + 2_000
    monkeypatch.setattr(envelope, "CHUNK", 1_000)
    monkeypatch.setattr(envelope, "BATCH_CHUNKS", 4)
    charged: list[int] = []
    sealed = envelope.seal(out, "none", charge=charged.append)
    assert len(sealed.to_batches()) > 10 and all(b.num_rows <= 4 for b in sealed.to_batches())
    back, size = envelope.open_sealed(sealed, 1 << 30)
    assert back.equals(TABLE) and size - 1000 < sum(charged) <= size  # the schema: not charged
