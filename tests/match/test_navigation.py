"""PREV/NEXT conditions checked where the rows live: over whole partitions the node's mask is
exactly the engine's; over time windows it keeps every row the engine accepts (rows near a run
of windows' edge stay undecided)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import analyze, match_recognize, parse
from dfs_cer.match.rowpattern.navigation import candidate_reach, navigation_masks
from dfs_cer.query import Analysis
from dfs_cer.query.arrow_filter import to_arrow_filter

CONDITIONS = [
    "x < PREV(x, {o})",
    "NEXT(x, {o}) >= x",
    "PREV(y, {o}) = y",
    "coalesce(PREV(x, {o}), -1) <> x",
    "x > PREV(x) AND NEXT(x, {o}) > x",
    "y = 1 AND PREV(x, {o}) IS NULL",
]


def log(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, n).astype(float)
    x[rng.random(n) < 0.1] = np.nan
    return pa.table(
        {
            "id": pa.array(np.arange(n)),
            "k": pa.array(rng.choice(["a", "b", "c"], n)),
            "x": pa.array(x, mask=np.isnan(x)),
            "y": pa.array(rng.integers(0, 3, n)),
            "ts": pa.array(np.cumsum(rng.choice([0, 0, 1, 3, 25], n)).astype(np.int64)),
        }
    )


def node_rows(part: pa.Table, analysis: Analysis, mode: str, window: int = 0) -> set[int]:
    """Ids of B's candidates on a node: its independent conjuncts and the navigation mask."""
    mask = navigation_masks(part, analysis, ("id",), True, mode, window)["B"]
    expr = to_arrow_filter(analysis.variable("B").independent, part.schema)
    ids = part.column("id").to_numpy()[mask]
    if expr is not None:
        ids = np.intersect1d(ids, part.filter(expr).column("id").to_numpy())
    return set(ids.tolist())


def engine_rows(table: pa.Table, sql: str) -> set[int]:
    """Rows the engine labels B when B alone is the pattern: exactly those passing B's condition."""
    return set(match_recognize(table, sql).column("rid").to_pylist())


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from(CONDITIONS),
    st.integers(1, 3),
    st.booleans(),
    st.integers(2, 4),
    st.sampled_from([5, 20]),
)
def test_node_masks_keep_exactly_or_at_least_the_engines_rows(
    seed: int, condition: str, offset: int, partitioned: bool, nodes: int, window: int
) -> None:
    table = log(seed, 300)
    partition = "PARTITION BY k " if partitioned else ""
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE ({partition}ORDER BY ts MEASURES B.id AS rid ONE "
        f"ROW PER MATCH PATTERN (B) DEFINE B AS {condition.format(o=offset)})"
    )
    truth = engine_rows(table, sql)
    analysis = analyze(parse(sql), table.schema, navigation_on_nodes=True)
    assert analysis.variable("B").navigating
    if partitioned:  # shards by k: every node holds whole partitions, decided exactly
        kept: set[int] = set()
        for k in ("a", "b", "c"):
            kept |= node_rows(table.filter(pc.equal(table.column("k"), k)), analysis, "partitions")
        assert kept == truth
    else:
        assert node_rows(table, analysis, "partitions") == truth
    # time windows dealt to nodes: a superset on every node, exact away from the runs' edges
    owner = (np.asarray(table.column("ts")) // window * 7919) % nodes
    kept = set()
    for node in range(nodes):
        kept |= node_rows(table.filter(pa.array(owner == node)), analysis, "time", window)
    assert truth <= kept


def test_time_windows_decide_rows_inside_a_run_of_windows() -> None:
    table = pa.table(
        {"id": list(range(8)), "x": [5, 4, 3, 2, 1, 0, 9, 9], "ts": [0, 1, 2, 3, 4, 5, 6, 7]}
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES B.id AS rid ONE ROW PER "
        "MATCH PATTERN (B) DEFINE B AS x > PREV(x))"
    )
    analysis = analyze(parse(sql), table.schema, navigation_on_nodes=True)
    mask = navigation_masks(table, analysis, ("id",), True, "time", 100)["B"]
    # row 0 is the run's first row (its PREV may be on another node); rows 1-5 fall; 6 rises; 7 ties
    assert mask.tolist() == [True, False, False, False, False, False, True, False]


def test_candidate_reach_follows_each_variables_condition_and_direction() -> None:
    q = parse(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH "
        "PATTERN (A N*? B N*? C) WITHIN 10 DEFINE A AS A.type = 'a', "
        "B AS B.type = 'b' AND B.x < PREV(B.x, 2), C AS C.type = 'c' AND NEXT(C.x) > C.x)"
    )
    analysis = analyze(q)
    assert analysis.variable_reach == (("B", 2, 0), ("C", 0, 1))
    events = pa.table({"type": ["a", "b", "c", "z"], "x": [1, 2, 3, 4], "ts": [1, 2, 3, 4]})
    before, after = candidate_reach(events, analysis)
    assert before.tolist() == [0, 2, 0, 0] and after.tolist() == [0, 0, 1, 0]
