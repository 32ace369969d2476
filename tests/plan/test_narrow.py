"""The compute node's pairwise checks on collected points never lose a match: the rows each node
would send for its own surviving slices give exactly the matches of every row, for CER and
SQL patterns, equalities with NULLs and mixed types, Kleene and optional variables, ties, and
1-5 nodes. And they shrink: on a pattern with an equality the survivors are few."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dfs_cer.filters.keys import KeyKind
from dfs_cer.filters.points import Points, value_hashes
from dfs_cer.local import match_recognize
from dfs_cer.plan.narrow import Grid, Narrow
from dfs_cer.query import Analysis, analyze, parse
from dfs_cer.query.arrow_filter import to_arrow_filter

QUERIES = [
    # CER, an equality between the first two variables
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b, C.id AS c "
    "ALL MATCHES PATTERN (A B C) WITHIN {w} DEFINE A AS A.kind = 'A', "
    "B AS B.kind = 'B' AND B.k = A.k, C AS C.kind = 'C')",
    # Kleene and an equality between the last and the first, float against int
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, LAST(B.id) AS b, "
    "C.id AS c ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B+ N*? C) "
    "WITHIN {w} DEFINE A AS A.kind = 'A', B AS B.kind = 'B', "
    "C AS C.kind = 'C' AND C.f = A.k)",
    # an optional variable and an alternation
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(id) AS first, "
    "LAST(id) AS last, COUNT(*) AS n ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A N*? D? N*? (B | C) N*? C) WITHIN {w} DEFINE A AS A.kind = 'A', "
    "D AS D.kind = 'D', B AS B.kind = 'B' AND B.k = A.k, C AS C.kind = 'C')",
    # two equalities between the same pair, CER
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b "
    "ALL MATCHES PATTERN (A B) WITHIN {w} DEFINE A AS A.kind = 'A', "
    "B AS B.kind = 'B' AND B.k = A.k AND B.f = A.f)",
]


def events(rows: list[tuple[int, str, int | None, float | None]]) -> pa.Table:
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])
    return pa.table(
        {
            "id": pa.array(order, pa.int64()),
            "ts": pa.array([rows[i][0] for i in order], pa.int64()),
            "kind": pa.array([rows[i][1] for i in order], pa.string()),
            "k": pa.array([rows[i][2] for i in order], pa.int64()),
            "f": pa.array([rows[i][3] for i in order], pa.float64()),
        }
    )


def candidates(table: pa.Table, analysis: Analysis) -> dict[str, np.ndarray]:
    """Each variable's rows by its independent condition (what a node's open finds)."""
    rows = np.arange(table.num_rows)
    indexed = ds.dataset(table.append_column("__i", pa.array(rows)))
    out = {}
    for v in analysis.variables:
        if v.any_row:
            continue
        expr = to_arrow_filter(v.independent, table.schema)
        out[v.name] = (
            rows
            if expr is None
            else np.sort(indexed.to_table(filter=expr, columns=["__i"]).column(0).to_numpy())
        )
    return out


def pulled_rows(table: pa.Table, sql: str, nodes: np.ndarray, window: int) -> np.ndarray:
    """What DFS's final pull brings: each node's candidates inside its surviving slices (every
    row inside the intervals when rows between the variables cannot be skipped)."""
    analysis = analyze(parse(sql), table.schema)
    cands = candidates(table, analysis)
    ts = table.column("ts").to_numpy()
    grid = Grid.of(int(ts.min()) if ts.size else 0, window)
    narrow = Narrow(analysis, grid, table.schema)
    for name, rows in cands.items():
        for i in range(int(nodes.max()) + 1 if nodes.size else 1):
            mine = rows[nodes[rows] == i]
            hashes = [
                value_hashes(table.column(c).take(pa.array(mine, pa.int64())), KeyKind(kind), 5)
                for c, kind in narrow.hashed_columns(name)
            ]
            stacked = np.vstack(hashes) if hashes else None
            narrow.add(name, i, Points(grid.slices(ts[mine]), stacked))
    narrow.prune()
    runs = narrow.runs()
    narrow.keep_inside(runs)
    if not analysis.skippable:  # every row inside the intervals (a contiguous pattern)
        return np.flatnonzero(runs.contains(grid.slices(ts)))
    union = np.unique(np.concatenate([np.empty(0, np.int64), *cands.values()]))
    keep = np.zeros(table.num_rows, bool)
    for i in range(int(nodes.max()) + 1 if nodes.size else 1):
        mine = union[nodes[union] == i]
        keep[mine[narrow.node_runs(i, runs).contains(grid.slices(ts[mine]))]] = True
    return np.flatnonzero(keep)


def matches(table: pa.Table, sql: str) -> list[tuple[object, ...]]:
    out = match_recognize(table, sql)
    return sorted(tuple(r.values()) for r in out.to_pylist())


row_st = st.tuples(
    st.integers(0, 60),
    st.sampled_from("ABCDx"),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.0, 2.5])),
)


@settings(max_examples=120, deadline=None)
# the partner lies before (A, then B) or after (C, after B): the checks look on the right side
@example([(0, "A", 1, None), (5, "B", 1, None), (6, "C", None, None)], 0, 1, 10, 0)
@example([(0, "A", 1, 1.0), (3, "B", None, None), (9, "C", None, 1.0)], 1, 2, 10, 5)
@given(
    st.lists(row_st, max_size=40),
    st.integers(0, len(QUERIES) - 1),
    st.integers(1, 5),
    st.integers(1, 25),
    st.integers(0, 2**32 - 1),
)
def test_pruned_points_keep_every_match(
    rows: list[tuple[int, str, int | None, float | None]],
    which: int,
    n_nodes: int,
    window: int,
    seed: int,
) -> None:
    table = events(rows)
    sql = QUERIES[which].format(w=window)
    nodes = np.random.default_rng(seed).integers(0, n_nodes, table.num_rows)
    kept = pulled_rows(table, sql, nodes, window)
    assert matches(table.take(pa.array(kept, pa.int64())), sql) == matches(table, sql)


def test_an_equality_leaves_few_survivors() -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    table = events(
        [
            (int(t), str(k), int(v), 0.0)
            for t, k, v in zip(
                np.sort(rng.integers(0, 200_000, n)),
                rng.choice(list("ABCx"), n, p=[0.05, 0.05, 0.05, 0.85]),
                rng.integers(0, 50, n),
                strict=True,
            )
        ]
    )
    sql = QUERIES[0].format(w=20)
    nodes = rng.integers(0, 4, n)
    kept = pulled_rows(table, sql, nodes, 20)
    cands = int(pc.sum(pc.is_in(table.column("kind"), pa.array(["A", "B", "C"]))).as_py())
    assert matches(table.take(pa.array(kept)), sql) == matches(table, sql)
    assert kept.size < 0.05 * cands, (kept.size, cands)


@pytest.mark.parametrize("window", [1, 7, 16, 17, 100, 10**9])
def test_grid_reach_covers_the_window(window: int) -> None:
    grid = Grid.of(-5, window)
    t = np.arange(-5, -5 + 3 * window + 40, max(1, window // 7))
    s = grid.slices(t)
    for a, sa in zip(t, s, strict=True):
        close = np.abs(t - a) <= window
        assert (np.abs(s[close] - sa) <= grid.reach).all()
