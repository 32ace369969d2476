"""SQL's numeric comparison rules, checked against DuckDB (a SQL engine) for every pair of types:
exact numbers compare exactly, anything next to a double compares as doubles; and the same
answers from the pyarrow evaluator, the row-pattern VM's programs and join filter keys."""

from __future__ import annotations

import decimal
import itertools
from typing import cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.filters.keys import hash_keys, join_kind, normalize
from dfs_cer.match.arrow_eval import evaluate
from dfs_cer.query.expr import BinaryOp, Column
from dfs_cer.query.numeric import comparable

TYPES = {
    "int8": pa.int8(), "int32": pa.int32(), "int64": pa.int64(), "uint8": pa.uint8(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(), "float32": pa.float32(), "float64": pa.float64(),
    "dec_9_2": pa.decimal128(9, 2),
    "dec_30_3": pa.decimal128(30, 3), "dec_38_0": pa.decimal128(38, 0),
}  # fmt: skip
# values near the places where conversions lose information
INTERESTING = [
    0,
    1,
    -1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    2**63,
    2**64 - 1,
    10**20 + 1,
    decimal.Decimal("1.5"),
    decimal.Decimal("0.1"),
    decimal.Decimal("-2.25"),
    0.5,
    -0.0,
    1e300,
]


def _fits(value: object, dtype: pa.DataType) -> bool:
    try:
        pa.array([value], dtype)
    except (pa.ArrowInvalid, OverflowError, TypeError, decimal.InvalidOperation):
        return False
    if pa.types.is_integer(dtype) or pa.types.is_decimal(dtype):  # no silent rounding
        return decimal.Decimal(str(pa.array([value], dtype)[0].as_py())) == decimal.Decimal(
            str(value)
        )
    return True


def _pairs() -> list[tuple[str, str, object, object]]:
    out = []
    for (ta, a), (tb, b) in itertools.product(itertools.product(TYPES, INTERESTING), repeat=2):
        if _fits(a, TYPES[ta]) and _fits(b, TYPES[tb]):
            out.append((ta, tb, a, b))
    return out


PAIRS = _pairs()


def _duckdb_compare(ta: str, tb: str, a: object, b: object) -> tuple[bool, bool]:
    con = duckdb.connect()
    con.register("t", pa.table({"a": pa.array([a], TYPES[ta]), "b": pa.array([b], TYPES[tb])}))
    row = con.execute("SELECT a = b, a < b FROM t").fetchone()
    assert row is not None
    return bool(row[0]), bool(row[1])


@pytest.mark.parametrize("ta", list(TYPES))
def test_pyarrow_comparisons_follow_sql_for_every_pair_of_types(ta: str) -> None:
    con = duckdb.connect()
    for tb in TYPES:
        pairs = [(a, b) for x, y, a, b in PAIRS if x == ta and y == tb]
        t = pa.table(
            {
                "a": pa.array([a for a, _ in pairs], TYPES[ta]),
                "b": pa.array([b for _, b in pairs], TYPES[tb]),
            }
        )
        con.register("t", t)
        want = con.execute("SELECT a = b, a < b FROM t").fetchall()
        left, right = comparable(t.column("a").combine_chunks(), t.column("b").combine_chunks())
        got = list(
            zip(pc.equal(left, right).to_pylist(), pc.less(left, right).to_pylist(), strict=True)
        )
        bad = [(p, w, g) for p, w, g in zip(pairs, want, got, strict=True) if tuple(w) != g]
        assert not bad, (ta, tb, bad[:5])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PAIRS))
def test_equal_values_hash_alike_in_join_filters(pair: tuple[str, str, object, object]) -> None:
    """A join filter may answer "maybe" wrongly, never "no" for an equal pair: numerically equal
    keys of any two types give the same hash."""
    ta, tb, a, b = pair
    kind = join_kind(TYPES[ta], TYPES[tb])
    va, ok_a = normalize(pa.array([a], TYPES[ta]), kind)
    vb, ok_b = normalize(pa.array([b], TYPES[tb]), kind)
    if _duckdb_compare(ta, tb, a, b)[0]:
        windows = np.zeros(1, np.int64)
        assert ok_a[0] and ok_b[0]
        assert hash_keys(va, kind, windows, 7)[0] == hash_keys(vb, kind, windows, 7)[0], (
            ta,
            tb,
            a,
            b,
        )


def _events(ta: str, tb: str, a: list[object], b: list[object]) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(range(len(a) + len(b))),
            "type": pa.array(["A"] * len(a) + ["B"] * len(b)),
            "x": pa.array(a + [None] * len(b), TYPES[ta]),
            "y": pa.array([None] * len(a) + b, TYPES[tb]),
        }
    )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(list(TYPES)),
    st.sampled_from(list(TYPES)),
    st.sampled_from(["=", "<", ">=", "<>"]),
    st.data(),
)
def test_cross_variable_comparisons_are_exact_in_both_engines(
    ta: str, tb: str, op: str, data: st.DataObject
) -> None:
    """``B.y <op> A.x`` compares a row against an earlier row: the row-pattern VM's programs
    (rank codes for uint64 above 2**63 and wide decimals) and the CER engine agree with DuckDB."""
    fit_a = [v for v in INTERESTING if _fits(v, TYPES[ta])]
    fit_b = [v for v in INTERESTING if _fits(v, TYPES[tb])]
    a = data.draw(st.lists(st.sampled_from(fit_a), min_size=1, max_size=4))
    b = data.draw(st.lists(st.sampled_from(fit_b), min_size=1, max_size=4))
    t = _events(ta, tb, a, b)
    con = duckdb.connect()
    con.register("t", t)
    want = sorted(
        con.execute(
            f"SELECT p.ts, q.ts FROM t p, t q WHERE p.type = 'A' AND q.type = 'B' AND q.y {op} p.x"
        ).fetchall()
    )
    body = (
        f"ORDER BY ts MEASURES A.ts AS a, B.ts AS b {{}} PATTERN (A N*? B) "
        f"DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.y {op} A.x)"
    )
    sql = "SELECT * FROM t MATCH_RECOGNIZE (" + body.format(
        "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW"
    )
    cer = "SELECT * FROM t MATCH_RECOGNIZE (" + body.format("ALL MATCHES")
    assert sorted((r["a"], r["b"]) for r in match_recognize(t, cer).to_pylist()) == want
    # SQL semantics: each A row starts one attempt and takes its first B
    first: dict[object, object] = {}
    for pa_ts, qb_ts in want:
        first.setdefault(pa_ts, qb_ts)
    assert sorted((r["a"], r["b"]) for r in match_recognize(t, sql).to_pylist()) == sorted(
        first.items()
    )


def test_pyarrow_evaluator_uses_the_rules() -> None:
    t = pa.table({"i": pa.array([2**53 + 1], pa.int64()), "f": pa.array([float(2**53)])})
    out = evaluate(
        BinaryOp("=", Column("i"), Column("f")),
        lambda c: t.column(cast(Column, c).name).combine_chunks(),
        1,
    )
    assert out[0].as_py() is True


WIDE = [
    decimal.Decimal("100000000000000000001.5"),
    decimal.Decimal("100000000000000000001.0"),
    decimal.Decimal("0.1"),
]


@pytest.mark.parametrize(
    ("column", "values", "dtype", "literal"),
    [
        ("d", WIDE, pa.decimal128(38, 10), "100000000000000000001.5"),
        ("i", [2**53, 2**53 + 1, 2], pa.int64(), "9007199254740993.0"),
        ("f", [0.1, 0.30000000000000004, 2.5], pa.float64(), "0.1"),
        (
            "d",
            [decimal.Decimal("0.1"), decimal.Decimal("0.2"), decimal.Decimal("1")],
            pa.decimal128(10, 2),
            "0.10",
        ),
        ("i", [2, 3, 5], pa.int64(), "2.5e0"),
        ("i", [2, 3, 5], pa.int64(), "3.0"),
    ],
)
def test_literals_with_a_point_are_exact_decimals_as_in_sql(
    column: str, values: list[object], dtype: pa.DataType, literal: str
) -> None:
    t = pa.table({"ts": [1, 2, 3], column: pa.array(values, dtype)})
    con = duckdb.connect()
    con.register("t", t)
    want = sorted(
        r[0] for r in con.execute(f"SELECT ts FROM t WHERE {column} = {literal}").fetchall()
    )
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ALL MATCHES PATTERN (A) "
        f"DEFINE A AS A.{column} = {literal})"
    )
    assert sorted(r["a"] for r in match_recognize(t, sql).to_pylist()) == want


@pytest.mark.parametrize(
    ("unit", "interval"),
    [("s", "0.5"), ("s", "1.5"), ("ms", "0.0005"), ("ns", "0.000000004"), ("ns", "0.000000001")],
)
def test_intervals_below_the_time_unit_are_exact_in_both_engines(unit: str, interval: str) -> None:
    """An INTERVAL finer than the times it is added to: the program computes in its unit (in
    seconds, ``INTERVAL '0.5' SECOND`` was 0), the Arrow evaluator with an exact duration (a
    ``timedelta`` was 0 below the microsecond)."""
    per_second = {"s": 1, "ms": 10**3, "ns": 10**9}[unit]
    ticks = [10, 10, 11, 12, 14, 20, 21]  # in the unit: A B A B A B A... pairs 0, 1, 2 apart
    t = pa.table(
        {
            "ts": pa.array([1_735_689_600 * per_second + k for k in ticks], pa.timestamp(unit)),
            "type": ["A", "B", "A", "B", "A", "B", "B"],
        }
    )
    step = decimal.Decimal(interval) * per_second  # the interval in the unit
    for op in ("<", "<=", "=", ">"):
        for head, pattern in (("ALL MATCHES", "A B"), ("ONE ROW PER MATCH", "A B")):
            sql = (
                f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b "
                f"{head} PATTERN ({pattern}) DEFINE A AS A.type = 'A', B AS B.type = 'B' AND "
                f"B.ts {op} A.ts + INTERVAL '{interval}' SECOND)"
            )
            got = match_recognize(t, sql)
            spans = pc.subtract(
                got.column("b").cast(pa.int64()), got.column("a").cast(pa.int64())
            ).to_pylist()
            holds = {"<": step.__gt__, "<=": step.__ge__, "=": step.__eq__, ">": step.__lt__}[op]
            assert all(holds(s) for s in spans), (op, head, spans)
            # every pair the condition accepts is found: A then B, B after A
            pairs = [
                (i, j)
                for i, a in enumerate(ticks)
                for j, b in enumerate(ticks)
                if t["type"][i].as_py() == "A"
                and t["type"][j].as_py() == "B"
                and (j == i + 1 if head != "ALL MATCHES" else b > a)
                and holds(b - a)
            ]
            assert got.num_rows == len(pairs), (op, head, spans, pairs)


def test_decimal_arithmetic_past_38_digits_and_time_units_in_the_vm() -> None:
    t = pa.table(
        {
            "ts": [1, 2],
            "type": ["A", "B"],
            "v": pa.array([decimal.Decimal(1), decimal.Decimal(2)], pa.decimal128(38, 2)),
            "k_ms": pa.array([1000, None], pa.timestamp("ms")),
            "k_us": pa.array([None, 1_500_000], pa.timestamp("us")),
        }
    )
    for cond in ("B.v = A.v + 1", "B.k_us - A.k_ms <= INTERVAL '1' SECOND", "B.k_us > A.k_ms"):
        for head in ("ALL MATCHES", "ONE ROW PER MATCH"):
            sql = (
                f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a {head} "
                f"PATTERN (A B) DEFINE A AS A.type = 'A', B AS B.type = 'B' AND {cond})"
            )
            assert match_recognize(t, sql).to_pylist() == [{"a": 1}], (cond, head)
    big = pa.table({"ts": [1, 2], "x": pa.array([2**62, 2**62], pa.int64())})
    avg = match_recognize(
        big,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES avg(A.x) AS m "
        "PATTERN (A+) DEFINE A AS x > 0)",
    )
    assert avg.column("m").to_pylist() == [float(2**62)]
