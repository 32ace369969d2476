"""PREV/NEXT under pruning: every strategy pulls halo rows (or runs node-side) and still returns
exactly the local engine's result over the whole log, on random queries with physical offsets
1-3 and nested navigation, skip and contiguous patterns, ties on time, partitions that begin
inside intervals, NULLs, 1-4 nodes and random/time/type partitioning."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

LAYOUTS = [("random", 1), ("time", 2), ("type", 3), ("random", 4)]


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def events(seed: int = 5, n: int = 1800) -> pa.Table:
    rng = np.random.default_rng(seed)
    gaps = rng.choice([0, 0, 1, 2, 5, 40], n)  # many ties on time; some gaps longer than windows
    x = rng.integers(0, 20, n).astype(float)
    x[rng.random(n) < 0.05] = np.nan
    return pa.table(
        {
            "k": pa.array(
                rng.choice(["a", "b", "c", "d", "e", "f"], n, p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.1])
            ),
            "type": pa.array(rng.choice(["A", "B", "C", "N"], n, p=[0.15, 0.2, 0.15, 0.5])),
            "x": pa.array(x, mask=np.isnan(x)),
            "y": pa.array(rng.integers(0, 5, n)),
            "ts": pa.array(np.cumsum(gaps).astype(np.int64)),
        }
    )


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[tuple[str, int], LocalCluster]]:
    root = tmp_path_factory.mktemp("navigation")
    pq.write_table(events(), root / "events.parquet")
    out: dict[tuple[str, int], LocalCluster] = {}
    try:
        for how, nodes in LAYOUTS:
            to = root / f"{how}-{nodes}"
            shard(
                str(root / "events.parquet"),
                nodes,
                str(to),
                partitioning=how,
                type_column="k",
                batch_rows=500,
                name="t",
            )
            out[(how, nodes)] = LocalCluster(
                [str(to / f"node-{i:02d}") for i in range(nodes)]
            ).start()
        yield out
    finally:
        for c in out.values():
            c.stop()
            c.tmp.cleanup()


NAVIGATION = [
    "{v}.x < PREV({v}.x, {o})",
    "{v}.x >= NEXT({v}.x, {o})",
    "PREV({v}.y, {o}) = {v}.y",
    "{v}.x > PREV(LAST({p}.x), {o})",
    "NEXT(FIRST({p}.y), {o}) IS NOT NULL",
    "coalesce(PREV({v}.x, {o}), -1) <> {v}.x",
    "PREV(CLASSIFIER(), {o}) IS NOT NULL",
]


@st.composite
def navigation_queries(draw: st.DrawFn) -> str:
    k = draw(st.integers(2, 4))
    names = ["A", "B", "C", "D"][:k]
    style = draw(st.sampled_from(["skip", "contiguous", "kleene"]))
    defines = []
    for i, name in enumerate(names):
        parts = []
        if i == 0 or draw(st.integers(0, 2)):
            parts.append(f"{name}.type = '{draw(st.sampled_from('ABC'))}'")
        if i and draw(st.integers(0, 3)):
            nav = draw(st.sampled_from(NAVIGATION))
            if "CLASSIFIER" in nav and style == "skip":
                nav = NAVIGATION[0]  # a skip pattern must not observe the rows it skips by label
            parts.append(nav.format(v=name, p=names[i - 1], o=draw(st.integers(1, 3))))
        if not parts:
            parts.append(f"{name}.y <> {draw(st.integers(0, 4))}")
        defines.append(f"{name} AS {' AND '.join(parts)}")
    rows_per_match = draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    skip = draw(
        st.sampled_from(["SKIP PAST LAST ROW", "SKIP TO NEXT ROW", "SKIP TO LAST " + names[-1]])
    )
    if style == "skip":
        inner = " ".join(
            n
            if i == 0
            else f"{{- N{i}* -}} {n}"
            if rows_per_match.startswith("ALL")
            else f"N{i}*? {n}"
            for i, n in enumerate(names)
        )
    elif style == "kleene":
        inner = " ".join(f"{n}+" if i == 1 else n for i, n in enumerate(names))
    else:
        inner = " ".join(names)
    measures = (
        f"FIRST({names[0]}.ts) AS t0, LAST({names[-1]}.ts) AS t1, PREV({names[0]}.x, "
        f"{draw(st.integers(1, 3))}) AS before_x, NEXT({names[-1]}.y) AS after_y, "
        "MATCH_NUMBER() AS mn"
    )
    partition = draw(st.sampled_from(["PARTITION BY k ", ""]))
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE ({partition}ORDER BY ts MEASURES {measures} "
        f"{rows_per_match} AFTER MATCH {skip} PATTERN ({inner}) WITHIN "
        f"{draw(st.sampled_from(['4', '12', '30']))} DEFINE {', '.join(defines)})"
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    navigation_queries(),
    st.sampled_from(LAYOUTS),
    st.sampled_from(["adaptive", "always_on"]),
    st.sampled_from(["auto", "on", "off"]),
)
def test_every_strategy_is_exact_with_navigation(
    clusters: dict[tuple[str, int], LocalCluster],
    sql: str,
    layout: tuple[str, int],
    model: str,
    node_matching: str,
) -> None:
    cluster = clusters[layout]
    expected = rows(match_recognize(events(), sql))
    for name in STRATEGIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pull(
                name,
                sql,
                cluster.endpoints,
                cluster.token,
                cost_model=model,
                node_matching=node_matching,
            )
        assert rows(match_pulled(result)) == expected, (name, sql, layout, result.trace.to_dict())
        fallback = result.trace.fallback or ""
        assert "PREV/NEXT" not in fallback, fallback


RALLY_THEN_DROP = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, B.ts AS b "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN 30 "
    "DEFINE A AS A.x >= PREV(A.x) + 12, B AS B.x <= PREV(B.x, 2) - 12)"
)


@pytest.mark.parametrize(
    ("layout", "checked"),
    [
        (("type", 3), "partitions"),
        (("time", 2), "time"),
        (("random", 1), "partitions"),
        (("random", 4), None),
    ],
)
def test_nodes_check_prev_next_conditions_where_neighbours_are_local(
    clusters: dict[tuple[str, int], LocalCluster], layout: tuple[str, int], checked: str | None
) -> None:
    """Conditions with only PREV/NEXT become selective candidates where a node holds whole
    partitions or time windows; on random shards DFS says why it cannot prune."""
    cluster = clusters[layout]
    expected = rows(match_recognize(events(), RALLY_THEN_DROP))
    for name in ("dfs", "push_down", "naive_dfs"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = pull(
                name, RALLY_THEN_DROP, cluster.endpoints, cluster.token, node_matching="off"
            )
        assert rows(match_pulled(result)) == expected, (name, layout)
        trace = result.trace
        if checked:
            assert f"PREV/NEXT conditions checked on the storage nodes ({checked})" in (
                trace.navigation or ""
            )
            assert trace.fallback is None, trace.fallback
            if name != "push_down":  # the intervals prune the candidates and their halo rows
                assert trace.events_received < 0.5 * events().num_rows, (name, trace.to_dict())
        else:
            assert (trace.fallback or "").startswith("pull_all ("), trace.fallback
            assert trace.events_received == events().num_rows  # never the rows twice


def test_pull_halo_refuses_per_point_reach_beyond_the_request(
    clusters: dict[tuple[str, int], LocalCluster],
) -> None:
    from dfs_cer.transport.client import NodeRefusedError, StorageClient
    from dfs_cer.transport.protocol import POINT_AFTER, POINT_BEFORE, POINT_TIME, Halo

    cluster = clusters[("random", 1)]
    client = StorageClient(cluster.endpoints[0], cluster.token)
    client.action("open", {"query_id": "q-halo-bounds", "sql": RALLY_THEN_DROP})
    try:
        points = pa.table({"k": ["a"], POINT_TIME: [10], POINT_BEFORE: [3], POINT_AFTER: [0]})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, points.schema) as writer:
            writer.write_table(points)
        request = Halo("q-halo-bounds", "pull_halo", 2, 0, (), True).header()
        with pytest.raises(NodeRefusedError, match=r"__before/__after must lie in 0\.\.halo"):
            client.pull(request, [sink.getvalue().to_pybytes()])
        ok = Halo("q-halo-bounds", "pull_halo", 3, 0, (), True).header()
        near = client.pull(ok, [sink.getvalue().to_pybytes()])
        assert 0 < near.num_rows <= 3 + 3  # the tie group at 10 and three rows before it
    finally:
        client.action("close", {"query_id": "q-halo-bounds"})
