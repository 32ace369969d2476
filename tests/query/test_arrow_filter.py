"""Independent conditions as pyarrow dataset filters: never fewer rows than the condition keeps."""

from __future__ import annotations

from decimal import Decimal
from typing import cast

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import analyze, parse
from dfs_cer.match.arrow_eval import evaluate_mask
from dfs_cer.query.arrow_filter import is_fully_pushable, to_arrow_filter, union_filter
from dfs_cer.query.expr import Column

TABLE = pa.table(
    {
        "ts": list(range(8)),
        "x": [1, 2, 3, None, 5, 6, 7, 8],
        "s": ["ab", "abc", None, "x", "X", "b", "ab%", "zz"],
        "f": [0.5, 1.5, 2.5, 3.5, None, 5.5, 6.5, 7.5],
    }
)


def rows(condition: str) -> list[int]:
    a = analyze(
        parse(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS {condition})")
    )
    f = to_arrow_filter(a.variable("A").independent, TABLE.schema)  # storage nodes pass the schema
    table = ds.dataset(TABLE).to_table(filter=f) if f is not None else TABLE
    return table.column("ts").to_pylist()


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("A.x > 5", [5, 6, 7]),
        ("A.x = 3 OR A.s = 'b'", [2, 5]),
        ("NOT A.x > 5", [0, 1, 2, 4]),
        ("A.x BETWEEN 2 AND 5", [1, 2, 4]),
        ("A.x NOT BETWEEN 2 AND 5", [0, 5, 6, 7]),
        ("A.x IN (1, 7)", [0, 6]),
        ("A.x NOT IN (1, 7)", [1, 2, 4, 5, 7]),
        ("A.s IS NULL", [2]),
        ("A.x IS NOT NULL AND A.f IS NOT NULL", [0, 1, 2, 5, 6, 7]),
        ("A.s LIKE 'ab%'", [0, 1, 6]),
        ("A.s LIKE 'a_'", [0]),
        ("A.s NOT LIKE 'ab%'", [3, 4, 5, 7]),
        ("lower(A.s) = 'x'", [3, 4]),
        ("A.x + 1 > 2 * A.f", [0]),
        ("-A.x < -6", [6, 7]),
        ("A.s || 'q' = 'abq'", [0]),
        ("CAST(A.x AS DOUBLE) > 6.5", [6, 7]),
        ("x > 5", [5, 6, 7]),
        (
            "A.x > 5 AND A.x % 2 = 0",
            [5, 7],
        ),  # % is not pushed: the filter keeps more rows (a superset)
    ],
)
def test_filter_rows(condition: str, expected: list[int]) -> None:
    got = rows(condition)
    if "%" in condition and "LIKE" not in condition:
        assert set(expected) <= set(got)
    else:
        assert got == expected


def test_pushability() -> None:
    a = analyze(
        parse(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) "
            "DEFINE A AS A.x > 1 AND A.x % 2 = 0, B AS B.x > 1)"
        )
    )
    assert not is_fully_pushable(a.variable("A").independent)
    assert is_fully_pushable(a.variable("B").independent)
    assert is_fully_pushable(None)


def test_union_filter() -> None:
    a = analyze(
        parse(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A N*? B) "
            "DEFINE A AS A.x = 1, B AS B.s = 'b')"
        )
    )
    f = union_filter([v.independent for v in a.variables if not v.any_row])
    assert f is not None
    assert ds.dataset(TABLE).to_table(filter=f).column("ts").to_pylist() == [0, 5]
    # an unconstrained variable means every row may be needed
    assert union_filter([v.independent for v in a.variables]) is None


ops = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])


@given(ops, st.integers(-2, 10), ops, st.integers(-2, 10), st.sampled_from(["AND", "OR"]))
def test_filter_agrees_with_python(op1: str, v1: int, op2: str, v2: int, conj: str) -> None:
    cmp = {
        "=": int.__eq__,
        "<>": int.__ne__,
        "<": int.__lt__,
        "<=": int.__le__,
        ">": int.__gt__,
        ">=": int.__ge__,
    }
    expected = []
    for ts, x in zip(TABLE.column("ts").to_pylist(), TABLE.column("x").to_pylist(), strict=True):
        if x is None:
            continue
        a, b = cmp[op1](x, v1), cmp[op2](x, v2)
        if (a and b) if conj == "AND" else (a or b):
            expected.append(ts)
    assert rows(f"A.x {op1} {v1} {conj} A.x {op2} {v2}") == expected


# numbers the pushed filter must compare exactly as the engines do (SQL's rules,
# dfs_cer.query.numeric)
NUMBERS = pa.table(
    {
        "ts": list(range(6)),
        "u": pa.array([0, 1, 2**63, 2**64 - 1, None, 5], pa.uint64()),
        "i": pa.array([2**53 + 1, -1, 2**63 - 1, 0, 3, None], pa.int64()),
        "d": pa.array(
            [Decimal("1.5"), Decimal(10**20), None, Decimal("-2.25"), Decimal(0), Decimal(1)],
            pa.decimal128(30, 3),
        ),
        "f": pa.array([float(2**53), float("nan"), -0.0, 1.5, None, 2.0]),
    }
)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(["u", "i", "d", "f"]),
    st.sampled_from(["=", "<>", "<", ">=", "IN"]),
    st.sampled_from(
        [
            "0",
            "1",
            "1.5",
            "-1",
            "9007199254740992",
            "9223372036854775808",
            "100000000000000000000",
            "-0.0",
        ]
    ),
)
def test_numeric_filters_keep_exactly_the_engines_rows(column: str, op: str, literal: str) -> None:
    cond = f"A.{column} IN ({literal}, 5)" if op == "IN" else f"A.{column} {op} {literal}"
    a = analyze(
        parse(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS {cond})"),
        NUMBERS.schema,
    )
    condition = a.variable("A").independent
    f = to_arrow_filter(condition, NUMBERS.schema)
    pushed = (
        (ds.dataset(NUMBERS).to_table(filter=f) if f is not None else NUMBERS)
        .column("ts")
        .to_pylist()
    )
    assert condition is not None
    mask = evaluate_mask(
        condition, lambda c: NUMBERS.column(cast(Column, c).name).combine_chunks(), NUMBERS.num_rows
    )
    engine = NUMBERS.filter(mask).column("ts").to_pylist()
    assert set(engine) <= set(pushed), cond
    if is_fully_pushable(condition, NUMBERS.schema):
        assert pushed == engine, cond


def test_string_functions_on_dictionaries_and_casts_round_as_sql() -> None:
    t = pa.table(
        {
            "ts": [1, 2, 3, 4],
            "type": pa.array(["Ab", "B", "ab", "c"]).dictionary_encode(),
            "f": [1.5, 2.5, -2.5, 0.4],
        }
    )
    for condition, expected in [
        ("A.type LIKE 'A%'", [1]),
        ("lower(A.type) = 'ab'", [1, 3]),
        ("A.type || 'x' = 'Bx'", [2]),
        ("CAST(A.f AS INT) = 2", [1, 2]),
        ("CAST(A.f AS INT) = -2", [3]),
    ]:  # half to even, as DuckDB
        a = analyze(
            parse(
                f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS {condition})"
            ),
            t.schema,
        )
        cond = a.variable("A").independent
        f = to_arrow_filter(cond, t.schema)
        assert (
            f is not None and ds.dataset(t).to_table(filter=f).column("ts").to_pylist() == expected
        ), condition
        assert cond is not None
        mask = evaluate_mask(
            cond, lambda c: t.column(cast(Column, c).name).combine_chunks(), t.num_rows
        )
        assert t.filter(mask).column("ts").to_pylist() == expected, condition
