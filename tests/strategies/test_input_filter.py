"""Row-local filters of a clause's input on the storage nodes: random conditions over data with
NULLs give exactly the embedded engine's answer (which computes the subquery itself), with
PREV/NEXT reading across the rows the condition drops; NaN columns and forms outside the
pushed subset fall back, named in the trace."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies.statements import merged_trace, pull_statement
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight


def log(n: int = 900, nan: bool = False) -> pa.Table:
    """Events with NULLs (and, with ``nan``, NaN in ``f``, a time-zoned ``z`` and a list ``l``)."""
    rng = np.random.default_rng(11)
    x = rng.integers(0, 10, n).astype(object)
    x[rng.random(n) < 0.1] = None
    f = np.round(rng.random(n) * 10, 1)
    if nan:
        f[rng.random(n) < 0.05] = np.nan
    s = rng.choice(["p", "q", "Pq", "a\nb", "r%"], n).astype(object)
    s[rng.random(n) < 0.1] = None
    ts = np.cumsum(rng.integers(1, 3, n))
    out = pa.table(
        {
            "g": pa.array(rng.choice(["u", "v"], n)),
            "x": pa.array(list(x), pa.int64()),
            "f": pa.array(f),
            "s": pa.array(list(s), pa.string()),
            "ts": pa.array(ts),
        }
    )
    if nan:
        out = out.append_column(
            "z", pa.array(ts * 1_000_000_000, pa.timestamp("ns", tz="UTC"))
        ).append_column("l", pa.array([[1] * int(v % 3) for v in ts], pa.list_(pa.int64())))
    return out


CLAUSE = (
    "MATCH_RECOGNIZE (PARTITION BY g ORDER BY ts MEASURES A.ts AS a_ts, LAST(B.ts) AS b_ts, "
    "count(B.*) AS nb ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) WITHIN 12 "
    "DEFINE A AS A.x >= 6, B AS B.x < PREV(B.x) OR B.s = 'p')"
)


def cluster_of(tmp: pytest.TempPathFactory, table: pa.Table, name: str) -> Iterator[LocalCluster]:
    root = tmp.mktemp(name)
    pq.write_table(table, root / "t.parquet")
    shard(str(root / "t.parquet"), 2, str(root / "nodes"), batch_rows=200)
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as c:
        yield c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from cluster_of(tmp_path_factory, log(), "filters")


@pytest.fixture(scope="module")
def nan_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from cluster_of(tmp_path_factory, log(nan=True), "nan")


OPS = ["=", "<>", "<", "<=", ">", ">="]
atoms = st.one_of(
    st.builds(lambda op, v: f"x {op} {v}", st.sampled_from(OPS), st.integers(-1, 10)),
    st.builds(
        lambda op, v: f"f {op} {v}",
        st.sampled_from(OPS),
        st.sampled_from(["2.5", "7", "-1", "10.0"]),
    ),
    st.builds(
        lambda op, v: f"s {op} '{v}'", st.sampled_from(OPS), st.sampled_from(["p", "q", "Pq", "r%"])
    ),
    st.sampled_from(
        [
            "x IS NULL",
            "s IS NOT NULL",
            "x IN (1, 2, 3)",
            "x NOT IN (4, 5)",
            "f BETWEEN 2 AND 6",
            "f NOT BETWEEN 1.5 AND 8.5",
            "s LIKE 'P%'",
            "s LIKE 'a%b'",
            "s NOT LIKE '_%'",
            "length(s) = 2",
            "length(s) <> x",
            "x BETWEEN f AND 8",
            "ts >= 400",
            "g = 'u'",
            "x > -3",
            "f <= x",
            "x IN (1, 4)",
            "NOT (s = 'p') IS NULL",
            "s IN ('p', 'r%')",
            "s NOT IN ('q')",
        ]
    ),
)
conditions = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) OR ({b})", inner, inner),
        st.builds(lambda a: f"NOT ({a})", inner),
    ),
    max_leaves=4,
)


@settings(max_examples=40, deadline=None)
@given(condition=conditions, strategy=st.sampled_from(["dfs", "push_down", "push_pull"]))
@example(
    condition="NOT ((x IS NULL) AND (x NOT IN (4, 5)))", strategy="dfs"
)  # [NOT] IN of NULL is NULL
@example(condition="NOT (s IN ('p', 'q'))", strategy="push_down")
@example(condition="NOT ((s IS NULL) AND (s NOT IN ('q')))", strategy="push_pull")
def test_random_input_filters_equal_the_embedded_engine(
    cluster: LocalCluster, condition: str, strategy: str
) -> None:
    sql = f"SELECT * FROM (SELECT * FROM t WHERE {condition}) {CLAUSE} ORDER BY g, a_ts"
    statement = parse_statement(sql)
    assert statement.parts[0].pushed is not None, condition
    expected = match_recognize(log(), sql)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement(strategy, statement, cluster.endpoints, cluster.token)
    assert got.table.to_pylist() == expected.to_pylist(), condition
    trace = merged_trace(got.traces, strategy)
    assert trace.input_filter is not None and "outside a MATCH_RECOGNIZE" not in (
        trace.fallback or ""
    )


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("f > 5", "column f holds NaN"),
        ("z >= TIMESTAMP '1970-01-01 00:05:00'", "of type timestamp[ns, tz=UTC]"),
        ("length(l) > 1", "column l is of type list"),
    ],
)
def test_what_a_node_cannot_filter_exactly_is_filtered_on_the_compute_node(
    nan_cluster: LocalCluster, condition: str, reason: str
) -> None:
    """The embedded engine orders NaN above every number, Arrow's kernels never match it; time
    zones and lists compare differently: such a condition falls back to reading the table whole,
    and the trace says why."""
    sql = f"SELECT * FROM (SELECT * FROM t WHERE {condition}) {CLAUSE} ORDER BY g, a_ts"
    statement = parse_statement(sql)
    assert statement.parts[0].pushed is not None
    expected = match_recognize(log(nan=True), sql)
    assert expected.num_rows > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement("dfs", statement, nan_cluster.endpoints, nan_cluster.token)
    assert got.table.to_pylist() == expected.to_pylist()
    trace = merged_trace(got.traces, "dfs")
    assert reason in (trace.fallback or ""), trace.fallback


def test_a_column_holding_nan_leaves_other_conditions_pushed(nan_cluster: LocalCluster) -> None:
    # a condition on NaN-free columns of the same data is still pushed
    sql = f"SELECT * FROM (SELECT * FROM t WHERE x > 2) {CLAUSE} ORDER BY g, a_ts"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pull_statement("dfs", parse_statement(sql), nan_cluster.endpoints, nan_cluster.token)
    assert got.table.to_pylist() == match_recognize(log(nan=True), sql).to_pylist()
    assert merged_trace(got.traces, "dfs").input_filter == "x > 2"


def test_the_cli_shows_the_pushed_condition(
    cluster: LocalCluster, tmp_path: pytest.TempPathFactory
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    token = Path(str(tmp_path)) / "token"
    token.write_text(cluster.token)
    exe = str(Path(sys.executable).parent / "dfs-cer")
    sql = (
        f"SELECT count(*) AS n FROM (SELECT * FROM t AS e WHERE e.x > 2 AND s IS NOT NULL) {CLAUSE}"
    )
    out = subprocess.run(
        [
            exe,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(token),
            "--explain-analyze",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "input filter on the storage nodes: x > 2 AND NOT s IS NULL" in out.stdout, out.stdout
    assert str(match_recognize(log(), sql).column("n")[0].as_py()) in out.stdout
