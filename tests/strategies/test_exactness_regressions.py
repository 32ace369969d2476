"""Regressions from the differential run: each minimal reproduction, through real storage nodes,
for every strategy (and cost model where the bug needed one), against the local engine."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.csv as pv
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


class Served:
    """A table sharded over storage node processes."""

    def __init__(
        self, root: Path, table: pa.Table, nodes: int = 1, partitioning: str = "random"
    ) -> None:
        self.table = table
        pq.write_table(table, root / "events.parquet")
        shard(
            str(root / "events.parquet"),
            nodes,
            str(root / "nodes"),
            partitioning=partitioning,
            name="t",
        )
        self.cluster = LocalCluster(
            [str(root / "nodes" / f"node-{i:02d}") for i in range(nodes)]
        ).start()

    def results(
        self, sql: str, model: str = "adaptive", strategies: list[str] | None = None
    ) -> dict[str, tuple[list[tuple[object, ...]], str | None]]:
        out = {}
        for name in strategies or list(STRATEGIES):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = pull(
                    name, sql, self.cluster.endpoints, self.cluster.token, cost_model=model
                )
            out[name] = (rows(match_pulled(result)), result.trace.fallback)
        return out

    def close(self) -> None:
        self.cluster.stop()
        self.cluster.tmp.cleanup()


class Serve(Protocol):
    """The ``serve`` fixture: serves ``table`` over ``nodes`` storage nodes."""

    def __call__(self, table: pa.Table, nodes: int = 1, partitioning: str = "random") -> Served: ...


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    started: list[Served] = []

    class Tracked(Served):
        def __init__(self, table: pa.Table, nodes: int = 1, partitioning: str = "random") -> None:
            root = tmp_path / f"set-{len(started)}"
            root.mkdir()
            super().__init__(root, table, nodes, partitioning)
            started.append(self)

    yield Tracked
    for s in started:
        s.close()


def assert_all_equal(
    served: Served, sql: str, expected: Sequence[tuple[object, ...]], model: str = "adaptive"
) -> None:
    assert rows(match_recognize(served.table, sql)) == expected
    for name, (got, fallback) in served.results(sql, model).items():
        assert got == expected, (name, fallback)


@pytest.mark.parametrize("pattern", ["A N+? B", "A N+ B"])
def test_all_matches_with_an_undefined_variable_taking_rows(serve: Serve, pattern: str) -> None:
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ALL MATCHES "
        f"PATTERN ({pattern}) WITHIN 10 DEFINE A AS A.type = 'A', B AS B.type = 'B')"
    )
    assert_all_equal(serve(pa.table({"ts": [1, 2, 3], "type": ["A", "X", "B"]})), sql, [(1, 3)])
    rng = np.random.default_rng(0)
    big = pa.table(
        {"ts": np.arange(3000), "type": rng.choice(["A", "B", "X"], 3000, p=[0.2, 0.2, 0.6])}
    )
    served = serve(big, nodes=3)
    expected = rows(match_recognize(big, sql))
    assert len(expected) > 500
    for name, (got, _) in served.results(sql).items():
        assert got == expected, name


@pytest.mark.parametrize("model", ["always_on", "naive"])
def test_join_filter_leaves_an_unconstrained_repeated_variable_alone(
    serve: Serve, model: str
) -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a1, B.ts AS "
        "b, LAST(A.ts) AS a2 ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A "
        "N*? B N*? A) WITHIN 10 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.k = A.k)"
    )
    served = serve(pa.table({"ts": [1, 2, 3], "type": ["A", "B", "A"], "k": [1, 1, 2]}))
    assert_all_equal(served, sql, [(1, 2, 3)], model)


def test_equality_on_big_integers_follows_sql(serve: Serve) -> None:
    t = pa.table(
        {
            "ts": [1, 2, 3],
            "type": ["A", "B", "C"],
            "i": pa.array([2**53 + 1, 5, 2**53 + 1], pa.int64()),
            "f": pa.array([float(2**53), 1.0, 3.0]),
            "u": pa.array([2**63, 2**63, 2**63 + 5], pa.uint64()),
            "d": pa.array(
                [Decimal(10**20), Decimal(10**20), Decimal(10**20 + 1)], pa.decimal128(30, 2)
            ),
        }
    )
    served = serve(t)

    def sql(cond: str) -> str:
        return (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b "
            "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN 10 "
            f"DEFINE A AS A.type IN ('A', 'B'), B AS B.type IN ('B', 'C') AND {cond})"
        )

    # int64 2**53+1 = double 2**53 in SQL (the integer becomes a double);
    # uint64 2**63 = 2**63 exactly
    for cond, expected in [
        ("B.i = A.f", [(1, 3)]),
        ("B.u = A.u", [(1, 2)]),
        ("B.u = A.i", []),
        ("B.d = A.d", [(1, 2)]),
        ("B.d > A.d", [(1, 3), (2, 3)]),
        ("B.u > 9223372036854775807", [(1, 2), (2, 3)]),
    ]:
        for model in ("always_on", "adaptive"):
            assert_all_equal(served, sql(cond), expected, model)


def test_column_names_in_another_case_bind_on_storage_nodes(serve: Serve) -> None:
    served = serve(
        pa.table({"ts": [1, 2, 3, 4], "type": ["A", "X", "B", "A"], "Val": [1, 2, 3, 4]}), nodes=2
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY TS MEASURES A.TS AS a, B.ts AS b ONE ROW "
        "PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN 10 DEFINE A AS "
        "A.TYPE = 'A', B AS B.Type = 'B' AND B.VAL > A.val)"
    )
    assert_all_equal(served, sql, [(1, 3)])


def test_empty_storage_nodes_with_every_column_type(serve: Serve) -> None:
    t = pa.table(
        {
            "ts": pa.array([1000, 2000], pa.timestamp("ms", tz="UTC")),
            "type": ["A", "B"],
            "d": pa.array([Decimal(1), Decimal(2)], pa.decimal128(30, 2)),
            "l": pa.array([[1], [2]]),
            "s": pa.array(["x", "y"]).dictionary_encode(),
            "n": pa.array([1, 2], pa.timestamp("s")),
        }
    )
    served = serve(t, nodes=3)  # two rows over three nodes: one node holds none
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.d AS a, B.d AS b ONE ROW "
        "PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN INTERVAL '10' "
        "SECOND DEFINE A AS A.type = 'A', B AS B.type = 'B')"
    )
    assert_all_equal(served, sql, [(Decimal("1.00"), Decimal("2.00"))])


@pytest.mark.parametrize(
    "pattern", ["A {- N* -} (B | C)", "A N*? (B | C) N*? D", "A {- N* -} (B | B)", "A N*? B N*? A"]
)
def test_push_pull_runs_every_skippable_pattern(serve: Serve, pattern: str) -> None:
    rng = np.random.default_rng(3)
    t = pa.table(
        {
            "ts": np.cumsum(rng.integers(1, 5, 300)),
            "type": rng.choice(list("ABCDN"), 300),
            "k": rng.integers(0, 3, 300),
        }
    )
    served = serve(t, nodes=3)
    defines = ", ".join(
        f"{v} AS {v}.type = '{v}'" + (" AND B.k = A.k" if v == "B" else "")
        for v in "ABCD"
        if v in pattern
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a, "
        "LAST(A.ts) AS la ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN "
        f"({pattern}) WITHIN 12 DEFINE {defines})"
    )
    expected = rows(match_recognize(t, sql))
    assert expected
    got, fallback = served.results(sql, "always_on", ["push_pull"])["push_pull"]
    assert fallback is None and got == expected


def test_a_csv_log_with_second_timestamps_is_served(tmp_path: Path) -> None:
    csv = tmp_path / "ticks.csv"
    csv.write_text(
        "ts,symbol,price\n2026-01-05 09:30:03,AAA,10\n2026-01-05 09:30:04,BBB,11\n"
        "2026-01-05 09:30:07,AAA,12\n2026-01-05 09:30:09,CCC,9\n"
    )
    exe = str(Path(sys.executable).parent / "dfs-cer")
    out = subprocess.run(
        [
            exe,
            "shard",
            "--input",
            str(csv),
            "--nodes",
            "3",
            "--to",
            str(tmp_path / "shards"),
            "--partitioning",
            "type",
            "--type-column",
            "symbol",
            "--time-column",
            "ts",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    sql = (
        "SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES A.price AS a, B.price AS "
        "b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN INTERVAL "
        "'5' SECOND DEFINE A AS A.symbol = 'AAA', B AS B.price > A.price)"
    )
    expected = rows(match_recognize(pv.read_csv(csv), sql))
    assert expected == [(10, 11)]
    with LocalCluster([str(tmp_path / "shards" / f"node-{i:02d}") for i in range(3)]) as cluster:
        for name in STRATEGIES:
            assert (
                rows(match_pulled(pull(name, sql, cluster.endpoints, cluster.token))) == expected
            ), name


def test_cancelled_flights_of_a_csv_are_null_on_every_strategy(tmp_path: Path) -> None:
    """An empty CSV field is NULL, in a column read as text too (one 'abc' made the column text and
    its empty fields '', so IS NULL found none of the 12)."""
    csv = tmp_path / "flights.csv"
    csv.write_text(
        "ts,origin,dep_time\n"
        + "".join(
            f"{i * 60},{'ORD' if i % 3 else 'JFK'},"
            f"{'' if i % 10 == 4 else 'abc' if i == 7 else 600 + i}\n"
            for i in range(120)
        )
    )
    shard(str(csv), 3, str(tmp_path / "shards"), column_types={"dep_time": pa.string()})
    sql = (
        "SELECT * FROM flights MATCH_RECOGNIZE (ORDER BY ts MEASURES C.ts AS at ONE ROW PER MATCH "
        "PATTERN (C) DEFINE C AS C.dep_time IS NULL)"
    )
    expected = [(i * 60,) for i in range(120) if i % 10 == 4]
    assert len(expected) == 12
    with LocalCluster([str(tmp_path / "shards" / f"node-{i:02d}") for i in range(3)]) as cluster:
        for name in STRATEGIES:
            assert (
                sorted(rows(match_pulled(pull(name, sql, cluster.endpoints, cluster.token))))
                == expected
            ), name


def test_time_columns_of_different_units_join_as_instants(serve: Serve) -> None:
    """Join filters hash times as instants: a timestamp[us] equals a timestamp[ms] (and a date
    its midnight) whatever the units."""
    t = pa.table(
        {
            "ts": [1, 2, 3, 4],
            "type": ["A", "B", "A", "B"],
            "k_ms": pa.array([1000, None, 5000, None], pa.timestamp("ms")),
            "k_us": pa.array([None, 1_000_000, None, 5_000_000], pa.timestamp("us")),
            "d": pa.array([0, None, 1, None], pa.date32()),
            "m": pa.array([None, 0, None, 86_400_000], pa.timestamp("ms")),
        }
    )
    served = serve(t, nodes=2)
    for cond in ("B.k_us = A.k_ms", "B.m = A.d"):
        for head in ("ALL MATCHES", "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW"):
            pattern = "A B" if head == "ALL MATCHES" else "A N*? B"
            sql = (
                "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS "
                f"b {head} PATTERN ({pattern}) WITHIN 3 DEFINE A AS A.type = 'A', B AS "
                f"B.type = 'B' AND {cond})"
            )
            assert_all_equal(served, sql, [(1, 2), (3, 4)], "always_on")


def test_push_pull_keeps_rows_a_condition_on_a_later_variable_accepts(serve: Serve) -> None:
    """SQL reads a variable not matched yet as NULL: A's condition ``B.v IS NULL`` holds for every
    A row, so push-pull's projection (which binds B) must not evaluate it."""
    served = serve(
        pa.table({"ts": [1, 2, 3, 4], "type": ["A", "B", "A", "B"], "v": [1, 7, 2, 8]}), nodes=2
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b ONE "
        "ROW PER MATCH PATTERN (A N*? B) WITHIN 3 DEFINE A AS A.type = 'A' AND B.v IS "
        "NULL, B AS B.type = 'B')"
    )
    assert_all_equal(served, sql, [(1, 2), (3, 4)], "always_on")
