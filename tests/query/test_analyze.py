"""analyze(): condition classification, roles, window binding, what pruning is exact."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from dfs_cer import analyze, parse
from dfs_cer.config import QueryConfig
from dfs_cer.query.analyze import Equality, Role
from dfs_cer.query.expr import BinaryOp, Column, Literal, to_sql
from dfs_cer.serde import from_json, to_json
from tests.fixtures.queries import ALL_MATCHES, CLUSTER_REFERENCE, CRIMES_REFERENCE, Q1


def mr(body: str) -> str:
    return f"SELECT * FROM t MATCH_RECOGNIZE ({body})"


def test_q1_classified_as_the_paper_says() -> None:
    """Listing 1: R, B, M type conditions independent;
    M.district = B.district an equality; N skippable."""
    a = analyze(parse(Q1))
    r, n, b, m = (a.variable(x) for x in "RNBM")
    assert r.independent == BinaryOp("=", Column("primary_type", "R"), Literal("ROBBERY"))
    assert b.independent == BinaryOp("=", Column("primary_type", "B"), Literal("BATTERY"))
    assert m.independent == BinaryOp(
        "=", Column("primary_type", "M"), Literal("MOTOR VEHICLE THEFT")
    )
    assert m.equalities == (Equality("M", "district", "B", "district", "M"),)
    assert a.equalities == m.equalities
    assert not (r.residuals or b.residuals or m.residuals)
    assert (r.role, n.role, b.role, m.role) == (Role.HEAD, Role.ANY_ROW, Role.MIDDLE, Role.TAIL)
    assert n.any_row and not n.filterable
    assert a.skippable and a.skip_reason is None
    assert a.interval_pruning
    assert a.precedes("B", "M") is True and a.precedes("M", "B") is False
    assert (a.prev_reach, a.next_reach) == (0, 0)
    assert from_json(to_json(a)) == a


def test_reference_workloads() -> None:
    a = analyze(parse(CRIMES_REFERENCE))
    assert a.skippable  # N1*? / N2*? between the variables
    c = a.variable("C")
    assert c.equalities == (Equality("C", "district", "B", "district", "C"),)
    assert [to_sql(r) for r in c.residuals] == [
        "C.latitude <= B.latitude + 0.1",
        "C.latitude >= B.latitude - 0.1",
    ]
    assert (
        to_sql(a.variable("A").independent)  # type: ignore[arg-type]
        == "A.type = 'ROBBERY' AND A.beat >= 1000 AND A.beat <= 1600"
    )

    a = analyze(parse(CLUSTER_REFERENCE))
    b = a.variable("B")
    assert b.equalities == (Equality("B", "JOBID", "A", "JOBID", "B"),)
    assert [to_sql(r) for r in b.residuals] == ["B.DISK >= 0.5 * A.DISK"]
    assert to_sql(b.independent) == "B.type = 'TP1' AND B.index < 5"  # type: ignore[arg-type]
    assert to_sql(a.variable("C").independent) == "C.type IN ('TP4', 'TP5')"  # type: ignore[arg-type]


def test_all_matches_with_navigation() -> None:
    a = analyze(parse(ALL_MATCHES))
    assert a.variable("A").independent is None
    assert a.variable("B").role is Role.MIDDLE
    # under ALL MATCHES NEXT/PREV read the next/previous selected event: nothing outside is read
    assert (a.prev_reach, a.next_reach) == (0, 0)


@pytest.mark.parametrize(
    ("body", "skippable", "reason"),
    [
        ("ORDER BY ts PATTERN (A {- N* -} B) DEFINE A AS A.x = 1, B AS B.x = 2", True, None),
        ("ORDER BY ts PATTERN (A N*? B) DEFINE A AS A.x = 1, B AS B.x = 2", True, None),
        ("ORDER BY ts PATTERN (A N* B) DEFINE A AS A.x = 1, B AS B.x = 2", True, None),
        # under ALL MATCHES undefined B+ and C take every combination of rows: none may be dropped
        (
            "ORDER BY ts ALL MATCHES PATTERN (A B+ C) DEFINE A AS A.x = 1",
            False,
            "B in B+ takes rows of its own",
        ),
        (
            "ORDER BY ts ALL MATCHES PATTERN (A N+? B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "N in N+?",
        ),
        (
            "ORDER BY ts ALL MATCHES PATTERN (A N* B C+) "
            "DEFINE A AS A.x = 1, B AS B.x = 2, C AS C.x = 3",
            True,
            None,
        ),
        (
            "ORDER BY ts PATTERN (A B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "B follow(s) another variable",
        ),
        ("ORDER BY ts PATTERN (A) DEFINE A AS A.x = 1", False, "the pattern is contiguous"),
        (
            "ORDER BY ts PATTERN (A N*? B C) DEFINE A AS A.x = 1, B AS B.x = 2, C AS C.x = 3",
            False,
            "follow(s) another variable",
        ),
        (
            "ORDER BY ts PATTERN (A N*? B+ N*? C) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "consecutive rows",
        ),
        (
            "ORDER BY ts PATTERN (N* A N* B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "leading or trailing",
        ),
        (
            "ORDER BY ts ALL ROWS PER MATCH PATTERN (A N* B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "ALL ROWS PER MATCH outputs the rows N absorbs",
        ),
        (
            "ORDER BY ts ALL ROWS PER MATCH PATTERN (A {- N* -} B) "
            "DEFINE A AS A.x = 1, B AS B.x = 2",
            True,
            None,
        ),
        (
            "ORDER BY ts MEASURES count(N.*) AS c "
            "PATTERN (A N* B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "N is referenced",
        ),
        (
            "ORDER BY ts MEASURES count(*) AS c PATTERN (A N* B) DEFINE A AS A.x = 1",
            False,
            "aggregate over all rows",
        ),
        # PREV/NEXT read rows between variables: they are pulled as halo rows,
        # the pattern still skips
        ("ORDER BY ts PATTERN (A N*? B) DEFINE A AS A.x = 1, B AS B.x > PREV(B.x)", True, None),
        (
            "ORDER BY ts AFTER MATCH SKIP TO LAST N "
            "PATTERN (A N* B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "N is referenced",
        ),
        (
            "ORDER BY ts PATTERN (A N B) DEFINE A AS A.x = 1, B AS B.x = 2",
            False,
            "consecutive rows",
        ),
        (
            "ORDER BY ts PATTERN (A N* (B | C)) DEFINE A AS A.x = 1, B AS B.x = 2, C AS C.x = 3",
            True,
            None,
        ),
    ],
)
def test_skippable(body: str, skippable: bool, reason: str | None) -> None:
    a = analyze(parse(mr(body)))
    assert a.skippable is skippable
    if reason is not None:
        assert reason in (a.skip_reason or ""), a.skip_reason


@pytest.mark.parametrize(
    ("body", "pruning", "reason"),
    [
        ("ORDER BY ts PATTERN (A B) WITHIN 10 DEFINE A AS A.x = 1", True, None),
        ("ORDER BY ts PATTERN (A B) DEFINE A AS A.x = 1", False, "no WITHIN window"),
        ("ORDER BY ts PATTERN (^ A B) WITHIN 10 DEFINE A AS A.x = 1", False, "anchors"),
        (
            "ORDER BY ts ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B) WITHIN 10 "
            "DEFINE A AS A.x = 1",
            False,
            "WITH UNMATCHED ROWS",
        ),
        ("ORDER BY ts PATTERN (A*) WITHIN 10 DEFINE A AS A.x = 1", False, "can match empty"),
        (
            "ORDER BY ts PATTERN (A? B) WITHIN 10 DEFINE A AS A.x = 1",
            False,
            "no variable with a condition",
        ),
        (
            "ORDER BY ts PATTERN (A B+ C+) WITHIN 10 "
            "DEFINE B AS B.x < PREV(B.x), C AS C.x > PREV(C.x)",
            False,
            "no variable in every match has a condition the storage nodes can check alone",
        ),
    ],
)
def test_interval_pruning(body: str, pruning: bool, reason: str | None) -> None:
    a = analyze(parse(mr(body)))
    assert a.interval_pruning is pruning
    if reason is not None:
        assert reason in (a.pruning_reason or "")


@pytest.mark.parametrize(
    ("pattern", "roles"),
    [
        ("A B C", {"A": Role.HEAD, "B": Role.MIDDLE, "C": Role.TAIL}),
        ("A+ B", {"A": Role.HEAD, "B": Role.TAIL}),
        ("A B? C", {"A": Role.HEAD, "B": Role.OPTIONAL, "C": Role.TAIL}),
        ("(A | B) C", {"A": Role.OPTIONAL, "B": Role.OPTIONAL, "C": Role.TAIL}),
        ("PERMUTE(A, B) C", {"A": Role.MIDDLE, "B": Role.MIDDLE, "C": Role.TAIL}),
        ("A{3}", {"A": Role.HEAD}),
    ],
)
def test_roles(pattern: str, roles: dict[str, Role]) -> None:
    defines = ", ".join(f"{v} AS {v}.x = {i}" for i, v in enumerate(roles))
    a = analyze(parse(mr(f"ORDER BY ts PATTERN ({pattern}) WITHIN 5 DEFINE {defines}")))
    assert {v.name: v.role for v in a.variables} == roles


def test_conditions_split_into_independent_equality_residual() -> None:
    a = analyze(
        parse(
            mr(
                "ORDER BY ts PATTERN (A B C) WITHIN 5 DEFINE A AS x > 1 AND A.y = A.z AND "
                "TRUE, B AS B.k = A.k AND A.j = C.j AND B.v > A.v AND B.w = PREV(B.w) AND "
                "B.s IN ('a', 'b'), C AS k = B.k + 1 OR C.z = 1"
            )
        )
    )
    av, bv, cv = (a.variable(x) for x in "ABC")
    assert to_sql(av.independent) == "x > 1 AND A.y = A.z"  # type: ignore[arg-type]
    assert to_sql(bv.independent) == "B.s IN ('a', 'b')"  # type: ignore[arg-type]
    assert bv.equalities == (Equality("B", "k", "A", "k", "B"), Equality("A", "j", "C", "j", "B"))
    assert [to_sql(r) for r in bv.residuals] == ["B.v > A.v", "B.w = PREV(B.w)"]
    assert cv.independent is None and [to_sql(r) for r in cv.residuals] == [
        "k = B.k + 1 OR C.z = 1"
    ]


def test_equality_with_unqualified_column_is_oriented() -> None:
    a = analyze(parse(mr("ORDER BY ts PATTERN (A B) DEFINE B AS A.k = k")))
    assert a.variable("B").equalities == (Equality("B", "k", "A", "k", "B"),)


def test_variable_without_define_is_any_row() -> None:
    a = analyze(parse(mr("ORDER BY ts PATTERN (A B) DEFINE A AS A.x = 1")))
    assert a.variable("B").role is Role.ANY_ROW and not a.variable("B").defined


@pytest.mark.parametrize(
    ("dtype", "window", "units", "unit"),
    [
        (pa.timestamp("s"), "WITHIN '30' MINUTE", 1800, "s"),
        (pa.timestamp("ms"), "WITHIN '30' MINUTE", 1_800_000, "ms"),
        (pa.timestamp("us", tz="UTC"), "WITHIN INTERVAL '3' SECOND", 3_000_000, "us"),
        (pa.timestamp("ns"), "WITHIN INTERVAL '1.5' SECOND", 1_500_000_000, "ns"),
        (pa.timestamp("s"), "WITHIN INTERVAL '0.5' SECOND", 0, "s"),
        (pa.date32(), "WITHIN INTERVAL '3' DAY", 3, "days"),
        (pa.int64(), "WITHIN '5' MINUTE", 300, "s"),
        (pa.int64(), "WITHIN 300", 300, "raw"),
        (pa.float64(), "WITHIN 2.5", 2, "raw"),
    ],
)
def test_window_in_order_column_units(
    dtype: pa.DataType, window: str, units: int, unit: str
) -> None:
    schema = pa.schema([("ts", dtype), ("x", pa.int64())])
    a = analyze(parse(mr(f"ORDER BY ts PATTERN (A B) {window} DEFINE A AS A.x = 1")), schema)
    assert (a.window_units, a.window_unit) == (units, unit)
    assert a.bound


def test_integer_time_unit_from_config() -> None:
    schema = pa.schema([("ts", pa.int64()), ("x", pa.int64())])
    q = parse(mr("ORDER BY ts PATTERN (A B) WITHIN '5' MINUTE DEFINE A AS A.x = 1"))
    assert analyze(q, schema, QueryConfig(integer_time_unit="ms")).window_units == 300_000


def test_columns_resolve_case_insensitively() -> None:
    schema = pa.schema([("TS", pa.timestamp("s")), ("Price", pa.float64())])
    a = analyze(
        parse(mr("ORDER BY ts PATTERN (A) WITHIN '1' MINUTE DEFINE A AS A.price > 1")), schema
    )
    assert a.window_units == 60


def test_without_schema_the_window_is_not_bound() -> None:
    a = analyze(parse(Q1))
    assert a.window_units is None and not a.bound


@pytest.mark.parametrize(
    ("body", "constrained"),
    [
        # B's DEFINE reads the last A before B: the first A; the second A is free
        ("PATTERN (A N*? B N*? A) DEFINE A AS A.t = 1, B AS B.k = A.k", {"B": True, "A": False}),
        ("PATTERN (A N*? B) DEFINE A AS A.t = 1, B AS B.k = A.k", {"B": True, "A": True}),
        ("PATTERN (A+ B) DEFINE A AS A.t = 1, B AS B.k = A.k", {"B": True, "A": False}),
        ("ALL MATCHES PATTERN (A+ B) DEFINE A AS A.t = 1, B AS B.k = A.k", {"B": True, "A": True}),
    ],
)
def test_which_side_an_equality_constrains(body: str, constrained: dict[str, bool]) -> None:
    a = analyze(parse(mr(f"ORDER BY ts {body}")))
    (e,) = a.equalities
    assert {v: a.constrains(e, v) for v in constrained} == constrained


def test_column_names_bind_to_the_data_once() -> None:
    schema = pa.schema([("ts", pa.int64()), ("type", pa.string()), ("Val", pa.int64())])
    a = analyze(
        parse(
            mr(
                "PARTITION BY TYPE ORDER BY TS MEASURES A.VAL AS v PATTERN (A N*? B) "
                "DEFINE A AS A.TYPE = 'A', B AS B.val > A.Val"
            )
        ),
        schema,
    )
    text = " ".join(a.query.to_sql().split())
    assert (
        "PARTITION BY type ORDER BY ts MEASURES A.Val AS v" in text and "B AS B.Val > A.Val" in text
    )
    independent = a.variable("A").independent
    assert independent is not None and to_sql(independent) == "A.type = 'A'"
    assert a.order_column == "ts"
    from dfs_cer.errors import QueryValidationError

    ambiguous = pa.schema([("ts", pa.int64()), ("xx", pa.int64()), ("XX", pa.int64())])
    with pytest.raises(QueryValidationError, match="ambiguous"):
        analyze(parse(mr("ORDER BY ts PATTERN (A) DEFINE A AS A.Xx > 0")), ambiguous)


def test_an_optional_definer_constrains_nothing_else() -> None:
    a = analyze(
        parse(
            mr(
                "ORDER BY ts ALL MATCHES PATTERN (A (B | C) D) DEFINE A AS A.t = 1, B AS "
                "B.k = A.k, C AS C.t = 2, D AS D.t = 3"
            )
        )
    )
    (e,) = a.equalities
    assert a.constrains(e, "B") and not a.constrains(e, "A")


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("B.i = A.s", "cannot compare B.i (number) with A.s (string)"),
        ("B.b = 1", "cannot compare B.b (boolean) with 1 (number)"),
        ("B.z = A.t", "cannot compare B.z (timestamptz) with A.t (timestamp)"),
        ("B.l = A.l", "(nested)"),
    ],
)
def test_comparisons_of_incompatible_types_are_one_clear_error(
    condition: str, message: str
) -> None:
    from dfs_cer.errors import QueryValidationError

    schema = pa.schema(
        [
            ("ts", pa.int64()),
            ("i", pa.int64()),
            ("s", pa.string()),
            ("b", pa.bool_()),
            ("t", pa.timestamp("ms")),
            ("z", pa.timestamp("us", tz="UTC")),
            ("l", pa.list_(pa.int64())),
        ]
    )
    q = parse(mr(f"ORDER BY ts PATTERN (A B) DEFINE A AS A.i > 0, B AS {condition}"))
    with pytest.raises(QueryValidationError, match=re.escape(message)):
        analyze(q, schema)
    # dates compare with timestamps (as midnight), times of every unit with each other
    ok = pa.schema(
        [
            ("ts", pa.int64()),
            ("d", pa.date32()),
            ("t", pa.timestamp("ms")),
            ("u", pa.timestamp("ns")),
        ]
    )
    analyze(
        parse(
            mr("ORDER BY ts PATTERN (A B) DEFINE A AS A.d IS NULL, B AS B.t = A.d AND B.u > A.t")
        ),
        ok,
    )


def test_navigation_reach_sums_nested_offsets() -> None:
    a = analyze(
        parse(
            mr(
                "ORDER BY ts MEASURES PREV(A.x, 2) AS p PATTERN (A B) WITHIN 10 "
                "DEFINE A AS A.x = 1, B AS B.x > PREV(LAST(A.x), 3) AND NEXT(FIRST(B.x), 2) > 0"
            )
        )
    )
    assert (a.prev_reach, a.next_reach) == (3, 2)
