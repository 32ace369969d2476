"""Situations and Allen-relation patterns (issue 11): TPStream's fixtures T1-T8 (spec notes
B8), the 13 relations against their definitions, and the same matches as a MATCH_RECOGNIZE
encoding (situations by ``X+`` runs, relations by a join) on generated data."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.errors import DfsCerError
from dfs_cer.situations import match_situations, parse_situations
from dfs_cer.situations.allen import (
    INVERSE,
    PAPER_FINISHES,
    RELATIONS,
    SELECTIVITY,
    holds,
    search_range,
)
from dfs_cer.situations.derive import derive
from dfs_cer.situations.match import join_order

CAR = [
    (0, 0, 60),
    (1, 9, 65),
    (2, 9, 72),
    (3, 9, 75),
    (4, 2, 80),
    (5, 0, 82),
    (6, -10, 78),
    (7, -10, 71),
    (8, -10, 68),
    (9, 0, 60),
    (10, 0, 60),
]
LISTING1 = """SELECT * FROM cars SITUATIONS (PARTITION BY car ORDER BY t
  DEFINE A AS accel > 8 {a}, B AS speed > 70 {b}, C AS accel < -9 {c}
  PATTERN A meets B; A overlaps B; A starts B; A during B
      AND C during B; B finished_by C; B overlaps C; B meets C
      AND A before C
  WITHIN 300
  MEASURES FIRST(B.car) AS id, avg(B.speed) AS avg_speed)"""


def car() -> pa.Table:
    return pa.table(
        {
            "car": [7] * len(CAR),
            "t": [r[0] for r in CAR],
            "accel": [r[1] for r in CAR],
            "speed": [r[2] for r in CAR],
        }
    )


def test_t1_derivation_is_the_longest_run_half_open() -> None:
    speed = np.array([60, 71, 72, 73, 74, 75, 76, 77, 78, 65])
    ts = np.arange(1, 11)
    s = derive(speed > 70, np.zeros(10, np.int64), ts, 4, 30)
    assert list(zip(s.ts, s.te, strict=True)) == [(2, 10)]  # not [2,3), [2,4), ...
    assert len(derive(speed > 70, np.zeros(10, np.int64), ts, 9, None)) == 0  # 8 < AT LEAST 9
    # a run reaching the end of the data has no closing row: its end is unknown, it is dropped
    assert len(derive(np.array([False, True, True]), np.zeros(3, np.int64), np.arange(3))) == 0
    # a run at the first row starts there; partitions never share a run
    got = derive(
        np.array([True, True, False, True, True, False]), np.array([0, 0, 0, 1, 1, 1]), np.arange(6)
    )
    assert list(zip(got.part, got.ts, got.te, strict=True)) == [(0, 0, 2), (1, 3, 5)]


Interval = tuple[int, int]
Relation = Callable[[Interval, Interval], bool]

DEFINITIONS: dict[
    str, Relation
] = {  # Table 1 of the paper (standard names; finishes is standard Allen's)
    "before": lambda a, b: a[1] < b[0],
    "meets": lambda a, b: a[1] == b[0],
    "overlaps": lambda a, b: a[0] < b[0] < a[1] < b[1],
    "starts": lambda a, b: a[0] == b[0] < a[1] < b[1],
    "during": lambda a, b: b[0] < a[0] < a[1] < b[1],
    "finishes": lambda a, b: b[0] < a[0] < a[1] == b[1],
    "equals": lambda a, b: a[0] == b[0] < a[1] == b[1],
}


def _inverse(f: Relation) -> Relation:
    return lambda a, b: f(b, a)


for _name in list(DEFINITIONS):
    if INVERSE[_name] != _name:
        DEFINITIONS[INVERSE[_name]] = _inverse(DEFINITIONS[_name])


@given(
    st.tuples(st.integers(0, 6), st.integers(1, 4)), st.tuples(st.integers(0, 6), st.integers(1, 4))
)
def test_t2_thirteen_relations_partition_every_pair(a: tuple[int, int], b: tuple[int, int]) -> None:
    a_iv, b_iv = (a[0], a[0] + a[1]), (b[0], b[0] + b[1])
    arr = [np.array([x]) for x in (*a_iv, *b_iv)]
    held = [r for r in RELATIONS if holds(r, *arr)[0]]
    assert len(held) == 1  # jointly exhaustive, pairwise disjoint
    assert DEFINITIONS[held[0]](a_iv, b_iv)
    assert holds(INVERSE[held[0]], arr[2], arr[3], arr[0], arr[1])[0]


def test_t2_the_papers_finishes() -> None:
    """TPStream's "A finishes B" is A.ts < B.ts < A.te = B.te: standard finished_by."""
    a, b = (np.array([1]), np.array([9])), (np.array([4]), np.array([9]))
    assert holds(PAPER_FINISHES, *a, *b)[0] and not holds("finishes", *a, *b)[0]
    assert holds("finishes", *b, *a)[0]  # standard: B finishes A
    sql = LISTING1.format(a="", b="", c="").replace("B finished_by C", "B finishes C")
    paper = match_situations(car(), LISTING1.format(a="", b="", c=""))
    assert match_situations(car(), sql).num_rows == paper.num_rows == 1  # B overlaps C decides here


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=8),
    st.tuples(st.integers(0, 30), st.integers(1, 8)),
    st.sampled_from(RELATIONS),
)
def test_search_ranges_find_exactly_the_related_situations(
    gaps: list[tuple[int, int]], a: tuple[int, int], relation: str
) -> None:
    """The binary-search ranges of every relation select exactly the Bs the definition accepts
    (Bs disjoint and sorted, as one symbol's situations are)."""
    bs, be, t = [], [], 0
    for gap, length in gaps:
        t += gap
        bs.append(t)
        t += length
        be.append(t)
    b_ts, b_te = np.array(bs), np.array(be)
    values = np.unique(np.concatenate([b_ts, b_te, [a[0], a[0] + a[1]]]))
    stride = values.size + 2

    def key(x: np.ndarray) -> np.ndarray:
        return np.searchsorted(values, x) + 1

    first, last = search_range(
        relation,
        np.array([0]),
        key(np.array([a[0]])),
        key(np.array([a[0] + a[1]])),
        key(b_ts),
        key(b_te),
        stride,
    )
    found = list(range(int(first[0]), int(last[0])))
    want = [
        i
        for i in range(len(bs))
        if holds(
            relation, np.array([a[0]]), np.array([a[0] + a[1]]), b_ts[i : i + 1], b_te[i : i + 1]
        )[0]
    ]
    assert found == want


def test_t3_figure_3_overlaps_by_two_searches() -> None:
    """A1 overlaps B: starts in (A1.ts, A1.te) give {B1},
    ends in (A1.te, inf) {B1, B2}; both: {B1}."""
    b_ts, b_te = np.array([4, 9]), np.array([8, 12])
    values = np.unique(np.concatenate([b_ts, b_te, [2, 6]]))

    def key(x: np.ndarray) -> np.ndarray:
        return np.searchsorted(values, x) + 1

    assert list(np.flatnonzero((b_ts > 2) & (b_ts < 6))) == [0]
    assert list(np.flatnonzero(b_te > 6)) == [0, 1]
    first, last = search_range(
        "overlaps",
        np.array([0]),
        key(np.array([2])),
        key(np.array([6])),
        key(b_ts),
        key(b_te),
        values.size + 2,
    )
    assert (int(first[0]), int(last[0])) == (0, 1)


def test_t4_detection_times_and_prefix_groups() -> None:
    from dfs_cer.situations.allen import DETECTION, PREFIX_GROUPS

    assert {
        r: DETECTION[r]
        for r in (
            "before",
            "meets",
            "starts",
            "equals",
            "started_by",
            "overlaps",
            "finished_by",
            "contains",
        )
    } == {
        "before": "B.ts",
        "meets": "B.ts",
        "starts": "A.te",
        "equals": "A.te",
        "started_by": "B.te",
        "overlaps": "A.te",
        "finished_by": "A.te",
        "contains": "B.te",
    }
    assert frozenset({"before", "meets"}) in PREFIX_GROUPS and set().union(*PREFIX_GROUPS) <= set(
        RELATIONS
    )


def test_t7_selectivities_and_join_order() -> None:
    from dfs_cer.situations.model import Constraint

    assert abs(sum(SELECTIVITY.values()) - 1.0) < 1e-9
    q3 = (
        Constraint("A", "B", ("before",)),
        Constraint("A", "C", ("before",)),
        Constraint("B", "C", ("before",)),
    )
    assert join_order({"A": 5, "B": 5, "C": 5}, q3) == [
        "A",
        "B",
        "C",
    ]  # equal counts: a stable tie-break
    assert join_order({"A": 9, "B": 50, "C": 1}, q3)[0] == "C"  # the rarest symbol first
    chain = (Constraint("A", "B", ("meets",)), Constraint("B", "C", ("meets",)))
    assert join_order({"A": 1, "B": 100, "C": 2}, chain) == ["A", "B", "C"]  # never a cross product


def test_t8_the_car_example() -> None:
    got = match_situations(car(), LISTING1.format(a="", b="", c=""))
    row = got.to_pylist()[0]
    assert got.num_rows == 1
    assert (
        row["A_start"],
        row["A_end"],
        row["B_start"],
        row["B_end"],
        row["C_start"],
        row["C_end"],
    ) == (1, 4, 2, 8, 6, 9)
    assert row["id"] == 7 and abs(row["avg_speed"] - 76.3333) < 1e-3
    durations = LISTING1.format(a="AT LEAST 5", b="BETWEEN 4 AND 30", c="AT LEAST 3")
    assert match_situations(car(), durations).num_rows == 0  # A lasts 3 < AT LEAST 5


def test_durations_with_units_outer_query_and_errors() -> None:
    t = car().set_column(1, "t", pa.array([r[0] * 1000 for r in CAR], pa.timestamp("ms")))
    sql = LISTING1.format(a="AT LEAST INTERVAL '3' SECOND", b="AT MOST INTERVAL '6' SECOND", c="")
    sql = sql.replace("WITHIN 300", "WITHIN INTERVAL '5' MINUTE")
    got = match_situations(t, sql.replace("SELECT *", "SELECT id, B_end"))
    assert got.to_pylist() == [{"id": 7, "B_end": pa.scalar(8000, pa.timestamp("ms")).as_py()}]
    with pytest.raises(DfsCerError, match="unknown relation"):
        parse_situations(
            "SELECT * FROM t SITUATIONS (ORDER BY t DEFINE A AS x > 1, B AS x < 0 PATTERN A near B)"
        )
    with pytest.raises(DfsCerError, match="different pairs"):
        parse_situations(
            "SELECT * FROM t SITUATIONS (ORDER BY t DEFINE A AS x > 1, B AS x < 0, C AS y > 0 "
            "PATTERN A before B OR A before C)"
        )
    with pytest.raises(DfsCerError, match="does not define"):
        parse_situations(
            "SELECT * FROM t SITUATIONS (ORDER BY t DEFINE A AS x > 1 PATTERN A before Z)"
        )


# ---------------------------------------------------------------- versus a MATCH_RECOGNIZE encoding


def encoded(sql: str, table: pa.Table) -> list[tuple[object, ...]]:
    """The MATCH_RECOGNIZE encoding's matches (dfs_cer.situations.encoding)."""
    from dfs_cer.situations.encoding import encoded_matches

    return sorted(
        tuple(r.values()) for r in encoded_matches(table, parse_situations(sql)).to_pylist()
    )


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.lists(
        st.tuples(
            st.sampled_from(["A", "B", "C"]), st.sampled_from(RELATIONS), st.sampled_from(RELATIONS)
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([15, 40, 200]),
    st.booleans(),
)
def test_same_matches_as_the_match_recognize_encoding(
    seed: int, raw: list[tuple[str, str, str]], window: int, durations: bool
) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    smooth = np.convolve(rng.normal(0, 1, n + 4), np.ones(5) / 5, "valid")[:n]
    table = pa.table(
        {
            "k": rng.integers(0, 3, n),
            "t": np.cumsum(rng.integers(1, 4, n)),
            "x": smooth.round(2),
            "y": rng.integers(0, 5, n),
        }
    )
    defines = {"A": "x > 0.2", "B": "x > -0.1 AND y > 0", "C": "x < -0.3 OR y = 0"}
    pairs = {"A": ("A", "B"), "B": ("B", "C"), "C": ("A", "C")}
    constraints: list[tuple[str, list[str], str]] = []
    for which, r1, r2 in raw:
        a, b = pairs[which]
        if any((a, b) == (x, y) for x, _, y in constraints):
            continue
        constraints.append((a, sorted({r1, r2}), b))
    used = sorted({n for a, _, b in constraints for n in (a, b)})
    defines = {n: defines[n] for n in used}
    bounds = {"A": (2, 20)} if durations and "A" in used else {}
    pattern = " AND ".join(
        "(" + " OR ".join(f"{a} {r} {b}" for r in rels) + ")" for a, rels, b in constraints
    )
    dur = {n: f" BETWEEN {bounds[n][0]} AND {bounds[n][1]}" if n in bounds else "" for n in used}
    sql = (
        "SELECT * FROM t SITUATIONS (PARTITION BY k ORDER BY t DEFINE "
        + ", ".join(f"{n} AS {c}{dur[n]}" for n, c in defines.items())
        + f" PATTERN {pattern} WITHIN {window})"
    )
    got = match_situations(table, sql)
    mine = sorted(tuple(r.values()) for r in got.to_pylist())
    assert mine == encoded(sql, table), sql


def test_every_pair_of_relations_on_generated_data() -> None:
    """All 13 relations (and their pairs) agree with the encoding on one generated log."""
    rng = np.random.default_rng(4)
    n = 600
    smooth = np.convolve(rng.normal(0, 1, n + 4), np.ones(5) / 5, "valid")[:n]  # runs of a few rows
    table = pa.table(
        {
            "k": np.zeros(n, np.int64),
            "t": np.cumsum(rng.integers(1, 3, n)),
            "x": smooth.round(2),
            "y": rng.integers(0, 5, n),
        }
    )
    defines = {"A": "x > 0.2", "B": "x > -0.1 AND y > 0"}  # related runs: B often around A
    found: dict[tuple[str, ...], int] = {}
    for r1, r2 in itertools.combinations_with_replacement(RELATIONS, 2):
        rels = sorted({r1, r2})
        sql = (
            f"SELECT * FROM t SITUATIONS (PARTITION BY k ORDER BY t DEFINE A AS {defines['A']}, "
            f"B AS {defines['B']} PATTERN {' ; '.join(f'A {r} B' for r in rels)} WITHIN 60)"
        )
        mine = sorted(tuple(r.values()) for r in match_situations(table, sql).to_pylist())
        assert mine == encoded(sql, table), rels
        found[tuple(rels)] = len(mine)
    assert all(found[(r,)] for r in RELATIONS)  # every relation occurs in the data


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([1, 3, 7, 40]), st.integers(1, 4))
def test_block_fragments_stitch_to_the_whole_derivation(seed: int, block: int, nodes: int) -> None:
    """Runs derived per time block (on whichever node holds it) and stitched on the compute node
    equal the derivation over all rows, durations included."""
    from dfs_cer.events.order import sort_and_partition
    from dfs_cer.situations.fragments import block_fragments, stitch

    rng = np.random.default_rng(seed)
    n = 120
    t = pa.table(
        {
            "k": rng.integers(0, 3, n),
            "t": np.cumsum(rng.integers(0, 3, n)),
            "x": rng.integers(0, 4, n),
        }
    )
    rows, bounds, _ = sort_and_partition(t, ("k",), [("t", False)], None, (), True)
    ts = np.asarray(rows.column("t").to_numpy(), np.int64)
    part = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    masks = {
        "A": np.asarray(rows.column("x").to_numpy()) > 0,
        "B": np.asarray(rows.column("x").to_numpy()) == 3,
    }
    owner = (ts // block) % nodes  # time blocks spread over nodes
    frags, blocks = [], []
    for node in range(nodes):
        keep = owner == node
        f, b = block_fragments(
            rows.filter(pa.array(keep)),
            ["k"],
            ts[keep],
            block,
            {k: v[keep] for k, v in masks.items()},
        )
        frags.append(f)
        blocks.append(b)
    values, got = stitch(
        pa.concat_tables([f for f in frags if f.num_columns]),
        pa.concat_tables(blocks),
        ["k"],
        ["A", "B"],
        {"B": (2, None)},
    )
    keys = values.column("k").to_pylist()
    for name, lo in (("A", None), ("B", 2)):
        want = derive(masks[name], part, ts, lo, None)
        want_rows = sorted(
            (int(rows.column("k")[int(want.first[i])].as_py()), int(want.ts[i]), int(want.te[i]))
            for i in range(len(want))
        )
        got_rows = sorted(
            (keys[int(got[name].part[i])], int(got[name].ts[i]), int(got[name].te[i]))
            for i in range(len(got[name]))
        )
        assert got_rows == want_rows


@pytest.mark.flight
@pytest.mark.parametrize("partitioning", ["time", "random"])
def test_from_storage_nodes_equals_local(
    partitioning: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Nodes over time-partitioned shards derive block fragments (the compute node stitches
    them and pulls only the matched situations' rows for MEASURES); other layouts fall back to
    pulling every row. Both give the local result."""
    import pyarrow.parquet as pq

    from dfs_cer.io.shard import shard
    from dfs_cer.strategies.situations import pull_situations
    from storage_node.launcher import LocalCluster

    rng = np.random.default_rng(9)
    n = 20_000
    smooth = np.convolve(rng.normal(0, 1, n + 9), np.ones(10) / 10, "valid")[:n]
    ts = (np.cumsum(rng.integers(1, 60, n)) * 1000).astype(np.int64)
    table = pa.table(
        {
            "car": rng.integers(0, 4, n),
            "ts": pa.array(ts, pa.timestamp("ms")),
            "x": smooth.round(2),
            "speed": rng.integers(40, 120, n),
        }
    )
    root = tmp_path_factory.mktemp("situations")
    pq.write_table(table, root / "cars.parquet")
    shard(
        str(root / "cars.parquet"),
        3,
        str(root / "nodes"),
        partitioning=partitioning,
        batch_rows=5000,
    )
    sql = (
        "SELECT * FROM cars SITUATIONS (PARTITION BY car ORDER BY ts DEFINE A AS x > 0.3 AT "
        "LEAST INTERVAL '2' MINUTE, B AS x > 0 AND speed > 50 PATTERN A during B; A starts "
        "B; A overlaps B AND B before C, C AS x < -0.2 WITHIN INTERVAL '3' HOUR MEASURES "
        "avg(B.speed) AS avg_speed, count(A.*) AS a_rows, LAST(C.speed) AS c_last)"
    )
    sql = (
        "SELECT * FROM cars SITUATIONS (PARTITION BY car ORDER BY ts DEFINE A AS x > 0.3 AT "
        "LEAST INTERVAL '2' MINUTE, B AS x > 0 AND speed > 50, C AS x < -0.2 PATTERN (A "
        "during B; A starts B; A overlaps B) AND B before C WITHIN INTERVAL '3' HOUR "
        "MEASURES avg(B.speed) AS avg_speed, count(A.*) AS a_rows, LAST(C.speed) AS c_last)"
    )
    local = match_situations(table, sql)
    assert local.num_rows > 10
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as cluster:
        dfs = pull_situations(sql, cluster.endpoints, cluster.token, strategy="dfs")
        everything = pull_situations(sql, cluster.endpoints, cluster.token, strategy="pull_all")
    assert dfs.relation.to_pylist() == everything.relation.to_pylist() == local.to_pylist()
    if partitioning == "time":
        assert dfs.trace.fallback is None
        # only the rows of the matched situations (their closing rows included) moved
        cars = np.asarray(table.column("car").to_numpy())
        times = np.asarray(table.column("ts").cast(pa.int64()).to_numpy())
        inside = np.zeros(n, bool)
        for r in local.to_pylist():
            for sym in "ABC":
                lo = int(pa.scalar(r[f"{sym}_start"], pa.timestamp("ms")).cast(pa.int64()).as_py())
                hi = int(pa.scalar(r[f"{sym}_end"], pa.timestamp("ms")).cast(pa.int64()).as_py())
                inside |= (cars == r["car"]) & (times >= lo) & (times <= hi)
        pulled = [r for r in dfs.trace.rounds if r.action == "pull_times"]
        assert pulled and pulled[0].events == int(inside.sum()) < n
    else:
        assert dfs.trace.fallback is not None and "partitioned by random" in dfs.trace.fallback


@pytest.mark.flight
def test_cli_situation_query(tmp_path_factory: pytest.TempPathFactory) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    import pyarrow.parquet as pq

    from dfs_cer.datasets.situational import situation_events
    from dfs_cer.io.shard import shard
    from storage_node.launcher import LocalCluster

    root = tmp_path_factory.mktemp("cli-situations")
    events = situation_events(30_000, 3)
    pq.write_table(events, root / "e.parquet")
    shard(str(root / "e.parquet"), 2, str(root / "nodes"), partitioning="time", name="s")
    sql = (
        "SELECT key, A_start, avg_v FROM s SITUATIONS (PARTITION BY key ORDER BY ts DEFINE "
        "A AS a, B AS b PATTERN A during B; A starts B WITHIN INTERVAL '10' MINUTE MEASURES "
        "avg(A.v) AS avg_v) ORDER BY key, A_start LIMIT 5"
    )
    exe = str(Path(sys.executable).parent / "dfs-cer")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        out = subprocess.run(
            [
                exe,
                "query",
                "--endpoints",
                ",".join(cluster.endpoints),
                "--token-file",
                str(cluster.token_file),
                "--format",
                "json",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    want = match_situations(events, sql)
    assert [r["avg_v"] for r in doc["matches"]] == want.column("avg_v").to_pylist() and len(
        doc["matches"]
    ) == 5
    assert [r["action"] for r in doc["trace"]["rounds"]] == ["situations", "pull_times"]


def test_t5_t6_t8_detection_times() -> None:
    """When a streaming engine could report a match (TPStream §5.3): Figure 4's triggers, the
    minimum-duration deferral, and the car example's t_d = 8 (its last end is 9)."""
    from dfs_cer.situations.allen import detection_endpoints, detection_time

    # Figure 4: A before B, A before C, A before D, (D during C OR C finishes D OR C meets D)
    assert detection_endpoints("before", "A", "B") == "B.ts"
    assert detection_endpoints("meets", "C", "D") == "D.ts"  # D triggers at its start ...
    assert detection_endpoints("during", "D", "C") == "D.te"  # ... and at its end
    assert detection_endpoints(PAPER_FINISHES, "C", "D") == "C.te"  # = D.te: both end together
    # configuration 2: B and D still open when the match is certain
    bounds = {"A": (0, 2), "B": (5, 100), "C": (3, 6), "D": (6, 90)}
    assert (
        detection_time(
            {("A", "B"): "before", ("A", "C"): "before", ("A", "D"): "before", ("C", "D"): "meets"},
            bounds,
        )
        == 6
        < 90
    )
    # T6: A during B, B with AT LEAST 10: not before B.ts + 10, though A ends at 4
    assert detection_time({("A", "B"): "during"}, {"A": (2, 4), "B": (1, 30)}) == 4
    assert detection_time({("A", "B"): "during"}, {"A": (2, 4), "B": (1, 30)}, {"B": 10}) == 11
    # T8: max(A.te = 4, B.te = 8, C.ts = 6) = 8
    car_bounds = {"A": (1, 4), "B": (2, 8), "C": (6, 9)}
    assert (
        detection_time(
            {("A", "B"): "overlaps", ("B", "C"): "overlaps", ("A", "C"): "before"}, car_bounds
        )
        == 8
    )


def test_integer_measures_fractional_bounds_and_between() -> None:
    """Integer aggregates stay exact beyond 2**53; a fractional minimum duration rounds up; a
    trailing BETWEEN is a duration only after a whole predicate."""
    big = pa.table(
        {
            "t": [0, 1, 2, 3, 4],
            "x": [2**53 + 1, 2**52 + 1, 2**52 + 2, 0, 0],
            "a": [0, 1, 1, 0, 0],
            "b": [1, 1, 1, 1, 0],
        }
    )
    sql = (
        "SELECT * FROM t SITUATIONS (ORDER BY t DEFINE A AS a = 1, B AS b = 1 PATTERN A during B "
        "MEASURES sum(A.x) AS s, max(B.x) AS mx, avg(A.x) AS av)"
    )
    row = match_situations(big, sql).to_pylist()[0]
    assert row["s"] == 2**53 + 3 and row["mx"] == 2**53 + 1
    t = pa.table(
        {"t": list(range(9)), "a": [1, 1, 0, 1, 1, 1, 0, 0, 0], "b": [0, 0, 0, 0, 0, 0, 0, 1, 0]}
    )
    got = match_situations(
        t,
        "SELECT * FROM t SITUATIONS (ORDER BY t DEFINE A AS a = 1 AT LEAST 2.5, "
        "B AS b = 1 PATTERN A before B)",
    )
    assert got.column("A_start").to_pylist() == [3]  # [0, 2) lasts 2 < 2.5
    q = parse_situations(
        "SELECT * FROM t SITUATIONS (ORDER BY t DEFINE A AS x > 0 "
        "AND speed BETWEEN 60 AND 80, B AS speed > 70 BETWEEN 4 AND 30, "
        "C AS (c) BETWEEN 1 AND 2 PATTERN A before B AND B before C)"
    )
    a, b, c = q.situations
    assert a.min_duration is None and b.min_duration is not None and c.max_duration is not None


@pytest.mark.flight
def test_storage_nodes_without_partition_by_and_with_folded_column_names(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from dfs_cer.io.shard import shard
    from dfs_cer.strategies.situations import pull_situations
    from storage_node.launcher import LocalCluster

    rng = np.random.default_rng(2)
    n = 4000
    table = pa.table(
        {
            "ts": np.cumsum(rng.integers(1, 20, n)),
            "u": rng.integers(0, 2, n),
            "V": rng.normal(0, 1, n),
        }
    )
    table = table.set_column(
        1, "u", pa.array(np.where(rng.random(n) < 0.1, None, table.column("u").to_numpy()))
    )
    pq.write_table(table, tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 2, str(tmp_path / "nodes"), partitioning="time", name="t")
    sql = (
        "SELECT * FROM t SITUATIONS (ORDER BY ts DEFINE A AS u IS NULL OR u = 1, B AS v > 0 "
        "PATTERN A overlaps B; A contains B WITHIN 300 MEASURES avg(B.v) AS bv, count(A.*) AS na)"
    )
    want = match_situations(table, sql)
    assert want.num_rows > 5
    with LocalCluster([str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        got = pull_situations(sql, cluster.endpoints, cluster.token, strategy="dfs")
    assert got.trace.fallback is None and got.relation.to_pylist() == want.to_pylist()
