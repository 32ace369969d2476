"""Value indexes: ``open`` finds a query's rows through per-value row lists instead of a full
scan, and keeps exactly the rows, candidates and row ids a full scan keeps, for every predicate
class, with PREV/NEXT (halo rows) and after late files are appended."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dfs_cer.config import StorageConfig
from dfs_cer.io.shard import shard
from storage_node.actions.base import Node
from storage_node.actions.lifecycle import LifecycleActions
from storage_node.index import build
from storage_node.state import StateRegistry
from storage_node.store import ShardStore


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])), min_size=0, max_size=400
    )
)
def test_an_index_lists_each_values_rows_in_order(values: list[str | None]) -> None:
    column = pa.chunked_array(
        [
            pa.array(values[: len(values) // 2], pa.string()),
            pa.array(values[len(values) // 2 :], pa.string()),
        ]
    )
    index = build(column)
    if index is None:  # too many distinct values for the rows (or none): no index
        assert (
            len(values) == 0
            or len(set(values) - {None}) > 0.05 * len(values)
            or not set(values) - {None}
        )
        return
    arr = np.array(values, dtype=object)
    for v in ("a", "b", "c", "z"):
        assert index.rows([v]).tolist() == np.flatnonzero(arr == v).tolist()
    assert index.rows(["a", "c"]).tolist() == np.flatnonzero((arr == "a") | (arr == "c")).tolist()


def events(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    s = rng.choice(["ab", "ba", "c", "a"], n).astype(object)
    s[rng.random(n) < 0.1] = None
    return pa.table(
        {
            "type": pa.array(rng.choice([f"T{i}" for i in range(6)], n)),
            "k": pa.array(rng.integers(0, 4, n)),
            "x": pa.array(rng.integers(0, 100, n)),
            "s": pa.array(list(s), pa.string()),
            "ts": pa.array(rng.integers(0, n // 2, n)),
        }
    )


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("index")
    pq.write_table(events(3000, 1), root / "e.parquet")
    shard(str(root / "e.parquet"), 2, str(root / "nodes"), batch_rows=700, name="t")
    return root


def opened(actions: LifecycleActions, sql: str) -> Any:
    qid = uuid.uuid4().hex
    actions.open(
        {"query_id": qid, "sql": sql, "integer_time_unit": "s", "schema": False, "dedup": True}, []
    )
    state = actions.node.registry.get(qid)
    actions.node.registry.close(qid)
    return state


def nodes(root: Path) -> tuple[LifecycleActions, LifecycleActions]:
    """The same shard set served with value indexes (its rows cached) and without (no cache)."""
    directory = str(root / "nodes" / "node-00")
    with_index = LifecycleActions(Node(ShardStore(directory), StateRegistry(1 << 30, 600, 5)))
    scanning = LifecycleActions(
        Node(ShardStore(directory, StorageConfig(cache_bytes=0)), StateRegistry(1 << 30, 600, 5))
    )
    return with_index, scanning


EQUALITIES = st.one_of(
    st.builds(lambda t: f"type = 'T{t}'", st.integers(0, 6)),
    st.builds(lambda a, b: f"type IN ('T{a}', 'T{b}')", st.integers(0, 6), st.integers(0, 6)),
    st.builds(lambda k: f"k = {k}", st.integers(0, 4)),
)
EXTRAS = st.sampled_from(
    [
        "",
        " AND x < 40",
        " AND s IS NULL",
        " AND s LIKE 'a%'",
        " AND x BETWEEN 10 AND 60",
        " OR x = 7",
        " AND NOT (x > 90)",
        " AND s IN ('ab', 'c')",
    ]
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    conditions=st.lists(st.tuples(EQUALITIES, EXTRAS), min_size=1, max_size=3), prev=st.booleans()
)
@example(
    conditions=[("type IN ('T0', 'T0')", "")], prev=False
)  # a value named twice: its rows once
@example(
    conditions=[("type = 'T1'", " AND x < 40"), ("type IN ('T1', 'T2')", "")], prev=False
)  # shared rows
def test_indexed_opens_keep_exactly_what_a_full_scan_keeps(
    shards: Path, conditions: list[tuple[str, str]], prev: bool
) -> None:
    names = "ABC"[: len(conditions)]
    define = ", ".join(
        f"{v} AS {v}.{eq}{extra}".replace(" x", f" {v}.x")
        .replace(" s ", f" {v}.s ")
        .replace("(x", f"({v}.x")
        for v, (eq, extra) in zip(names, conditions, strict=True)
    )
    if prev:
        define = (
            define.replace(
                f"{names[-1]} AS ", f"{names[-1]} AS {names[-1]}.x >= PREV({names[-1]}.x) AND (", 1
            )
            + ")"
        )
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {names[0]}.ts AS a ALL MATCHES "
        f"PATTERN ({' '.join(names)}) WITHIN 50 DEFINE {define})"
    )
    with_index, scanning = nodes(shards)
    opened(with_index, sql)  # the first open loads the cache; later ones use the indexes
    got, expected = opened(with_index, sql), opened(scanning, sql)
    if not any("OR" in extra for _, extra in conditions):  # an equality in every condition: indexed
        assert with_index.node.store.index_bytes() > 0
    assert scanning.node.store.index_bytes() == 0
    assert got.table.equals(expected.table), sql
    assert got.candidates.keys() == expected.candidates.keys()
    for v in got.candidates:
        assert got.candidates[v].tolist() == expected.candidates[v].tolist(), (sql, v)
    assert (got.row_ids is None) == (expected.row_ids is None)
    if got.row_ids is not None:
        assert got.row_ids.tolist() == expected.row_ids.tolist()


def test_indexes_are_used_and_rebuilt_after_late_files(shards: Path, tmp_path: Path) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ALL MATCHES "
        "PATTERN (A B) WITHIN 20 DEFINE A AS A.type = 'T1' AND A.x < 50, B AS B.type IN "
        "('T2', 'T3') AND B.k = A.k)"
    )
    root = tmp_path / "late"
    pq.write_table(events(2000, 2), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 1, str(root / "nodes"), batch_rows=500, name="t")
    with_index, scanning = nodes(root)
    opened(with_index, sql)
    first = opened(with_index, sql)
    assert with_index.node.store.index_bytes() > 0  # the type column's index
    assert first.table.equals(opened(scanning, sql).table)
    late = events(500, 3)
    late = late.set_column(
        late.schema.get_field_index("ts"), "ts", pa.array(np.arange(500, dtype=np.int64) + 900)
    )
    pq.write_table(late, tmp_path / "late.parquet")
    shard(str(tmp_path / "late.parquet"), 1, str(root / "nodes"), batch_rows=500, append=True)
    opened(with_index, sql)  # picks the late file up (and reloads the cache)
    again = opened(with_index, sql)
    expected = opened(scanning, sql)
    assert again.table.num_rows > first.table.num_rows
    assert again.table.equals(expected.table)
    for v in again.candidates:
        assert again.candidates[v].tolist() == expected.candidates[v].tolist()


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(-5, 5))),
        min_size=60,
        max_size=300,
    ),
    low=st.one_of(st.none(), st.integers(-6, 6)),
    high=st.one_of(st.none(), st.integers(-6, 6)),
    chosen=st.sets(st.sampled_from(["a", "b", "c", "z"])),
)
def test_a_sorted_projection_lists_a_values_rows_inside_a_range(
    rows: list[tuple[str, int | None]], low: int | None, high: int | None, chosen: set[str]
) -> None:
    from storage_node.index import project

    index = build(pa.array([r[0] for r in rows]))
    assert index is not None
    projection = project(index, pa.chunked_array([pa.array([r[1] for r in rows], pa.int64())]))
    got = projection.rows(index.codes([c for c in sorted(chosen)]), (low, high)).tolist()
    expected = [
        i
        for i, (v, x) in enumerate(rows)
        if v in chosen
        and x is not None
        and (low is None or x >= low)
        and (high is None or x <= high)
    ]
    assert got == expected


def test_int_ranges_are_read_from_conditions() -> None:
    from dfs_cer.query import analyze, parse
    from storage_node.index import int_range

    schema = pa.schema(
        [("type", pa.string()), ("a1", pa.int32()), ("f", pa.float64()), ("ts", pa.int64())]
    )

    def bounds(define: str) -> object:
        sql = (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a PATTERN (A) "
            f"DEFINE A AS {define})"
        )
        return int_range(analyze(parse(sql), schema).variables[0].independent, schema, "type")

    assert bounds("A.type = 'x' AND A.a1 <= 200") == ("a1", (None, 200))
    assert bounds("A.type = 'x' AND 200 > A.a1") == ("a1", (None, 199))
    assert bounds("A.type = 'x' AND A.a1 BETWEEN 3 AND 9") == ("a1", (3, 9))
    assert bounds("A.type = 'x' AND A.a1 > 99999999999999999999") == ("a1", (1, 0))
    assert (
        bounds("A.type = 'x' AND A.f <= 2") is None
    )  # floats: NaN and rounding stay with the filter
    assert bounds("A.type = 'x' AND A.a1 <= 2.5") is None
    assert bounds("A.type = 'x' AND (A.a1 <= 2 OR A.a1 > 9)") is None


def test_preload_indexes_the_category_columns_only(shards: Path) -> None:
    store = ShardStore(str(shards / "nodes" / "node-00"))
    assert store.preload() == [
        "type",
        "s",
    ]  # string columns: not k (indexed on first use) nor the time column
    assert store.cache_stats()["cached_bytes"] > 0
    assert (
        ShardStore(str(shards / "nodes" / "node-00"), StorageConfig(cache_bytes=0)).preload() == []
    )


def test_preload_keeps_one_copy_of_the_rows(shards: Path) -> None:
    store = ShardStore(str(shards / "nodes" / "node-00"))
    store.preload()
    assert store.sorted_rows() is store.cached  # the rows by time are the cache itself
