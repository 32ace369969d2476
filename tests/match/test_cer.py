"""CER engine: the fixtures of the matching-semantics notes and LimeCEP, the paper's Q1, and
differential tests against brute-force enumeration under every evaluation order."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.errors import MatchLimitError, UnsupportedFeatureError
from tests.fixtures.queries import ALL_MATCHES

V1 = [("e1", 0, 10), ("e2", 2, 9), ("e3", 5, 12), ("e4", 8, 14), ("e5", 11, 11)]
V2 = [*V1, ("e6", 20, 13), ("e7", 33, 12.5), ("e8", 35, 8)]


def stock(rows: Sequence[tuple[str, int, float]]) -> pa.Table:
    return pa.table(
        {
            "company": ["x"] * len(rows),
            "id": [r[0] for r in rows],
            "t": [r[1] for r in rows],
            "price": [float(r[2]) for r in rows],
        }
    )


def v_query(window: int) -> str:
    return ALL_MATCHES.replace(
        "MEASURES A.t AS at, LAST(B.t) AS bt, C.t AS ct",
        "MEASURES A.id AS a, FIRST(B.id) AS b0, LAST(B.id) AS b1, count(B.*) AS nb, C.id AS c",
    ).replace("WITHIN 30", f"WITHIN {window}")


def test_v1_seven_matches() -> None:
    out = match_recognize(stock(V1), v_query(30))
    got = sorted((r["a"], r["b0"], r["b1"], r["nb"], r["c"]) for r in out.to_pylist())
    assert got == sorted(
        [
            ("e1", "e3", "e3", 1, "e5"),
            ("e1", "e4", "e4", 1, "e5"),
            ("e1", "e3", "e4", 2, "e5"),
            ("e2", "e3", "e3", 1, "e5"),
            ("e2", "e4", "e4", 1, "e5"),
            ("e2", "e3", "e4", 2, "e5"),
            ("e3", "e4", "e4", 1, "e5"),
        ]
    )


def test_v2_window_is_inclusive() -> None:
    assert match_recognize(stock(V2), v_query(30), count_only=True)["matches"].to_pylist() == [18]
    assert match_recognize(stock(V2), v_query(29), count_only=True)["matches"].to_pylist() == [15]


def typed(events: str) -> pa.Table:
    names = events.split()
    return pa.table(
        {"ts": [int(e[1:]) for e in names], "type": [e[0].upper() for e in names], "id": names}
    )


def count(table: pa.Table, pattern: str, window: int = 1000, **options: object) -> int:
    defs = ", ".join(f"{v} AS {v}.type = '{v}'" for v in "ABCD" if v in pattern)
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN ({pattern}) WITHIN "
        f"{window} DEFINE {defs})"
    )
    return int(match_recognize(table, sql, count_only=True, **options)["matches"][0].as_py())


def test_k1_power_set() -> None:
    assert count(typed("a1 b2 b3 b4 c5"), "A B+ C") == 7


def test_example_1_1() -> None:
    assert count(typed("a1 a2 b3 b4 c5"), "A B C") == 4


LIMECEP = typed("b1 b2 a3 a4 a5 a6 a7 b8 a9 c10 b11 b12 a13 b14 a15 b16 a17 a18 c19 c20")


@pytest.mark.parametrize(
    ("pattern", "selection", "kleene", "expected"),
    [
        ("A B+ C", "skip_till_next_match", "maximal", 8),
        ("A B+ C", "skip_till_any_match", "maximal", 10),
        ("A B+ C", "skip_till_next_match", "all", 12),
        ("A B+ C", "skip_till_any_match", "all", 28),
        ("A B C", "skip_till_next_match", "all", 8),
        ("A B C", "skip_till_any_match", "all", 15),
        ("A+ B+ C", "skip_till_any_match", "maximal", 6),
        ("A+ B+ C", "skip_till_any_match", "all", 61),
    ],
)
def test_limecep_stream(pattern: str, selection: str, kleene: str, expected: int) -> None:
    assert count(LIMECEP, pattern, 10, selection=selection, kleene=kleene) == expected


def test_limecep_maximal_matches() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES FIRST(A.id) AS a0, LAST(A.id) AS a1, FIRST(B.id) AS b0, "
        "LAST(B.id) AS b1, C.id AS c ALL MATCHES PATTERN (A+ B+ C) "
        "WITHIN 10 DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C')"
    )
    got = {tuple(r.values()) for r in match_recognize(LIMECEP, sql, kleene="maximal").to_pylist()}
    assert got == {
        ("a3", "a7", "b8", "b8", "c10"),
        ("a9", "a9", "b11", "b16", "c19"),
        ("a9", "a13", "b14", "b16", "c19"),
        ("a9", "a15", "b16", "b16", "c19"),
        ("a13", "a13", "b14", "b16", "c20"),
        ("a13", "a15", "b16", "b16", "c20"),
    }


def test_negation_n1() -> None:
    t = pa.table(
        {
            "ts": [1, 2, 3, 4, 5, 6],
            "type": list("ABACCD"),
            "x": [0, 1, 0, 1, 2, 0],
            "id": ["a1", "b1", "a2", "c1", "c2", "d1"],
        }
    )
    out = match_recognize(
        t,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, C.id AS c, D.id AS d "
        "ALL MATCHES PATTERN (A ~B C D) WITHIN 100 DEFINE A AS type = 'A', "
        "B AS type = 'B' AND B.x = C.x, C AS type = 'C', D AS type = 'D')",
    )
    assert sorted(tuple(r.values()) for r in out.to_pylist()) == [
        ("a1", "c2", "d1"),
        ("a2", "c1", "d1"),
        ("a2", "c2", "d1"),
    ]


def test_conjunction_c1() -> None:
    t = typed("a1 b2 c4 a8 b9")
    assert count(t, "PERMUTE(A, B, C)", 5) == 2  # {a1,b2,c4}, {a8,b9,c4} (span exactly 5)
    assert count(t, "PERMUTE(A, B, C)", 4) == 1  # span < 5


def test_burst_does_no_join_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 A's then 100 B's and no C: the rarest variable (C) has no candidate, so no pair is
    ever formed."""
    t = typed(" ".join([f"a{i}" for i in range(100)] + [f"b{i}" for i in range(100, 200)]))
    from dfs_cer.match.cer import context, join, kernels

    calls: list[int] = []

    def spy(lo_row: np.ndarray, *args: Any) -> tuple[np.ndarray, np.ndarray]:
        calls.append(len(lo_row))
        return kernels.expand_ranges(lo_row, *args)

    for module in (context, join):  # where the band join's pairs are counted
        monkeypatch.setattr(module, "expand_ranges", spy)
    assert count(t, "A B C", 1000) == 0
    assert sum(calls) == 0


BASE = 1731628800


def test_q1_all_matches_on_table1() -> None:
    from tests.fixtures.tables import TABLE1

    out = match_recognize(
        TABLE1,
        """SELECT * FROM crimes MATCH_RECOGNIZE (ORDER BY date
        MEASURES R.id AS r, B.id AS b, M.id AS m ALL MATCHES
        PATTERN (R B M) WITHIN INTERVAL '30' MINUTE
        DEFINE R AS R.primary_type = 'ROBBERY', B AS B.primary_type = 'BATTERY',
               M AS M.primary_type = 'MOTOR VEHICLE THEFT' AND M.district = B.district)""",
    )
    assert out.to_pylist() == [{"r": "e1", "b": "e2", "m": "e5"}]


def test_output_is_bounded() -> None:
    t = typed(" ".join(["a1"] + [f"b{i}" for i in range(2, 30)] + ["c30"]))
    assert count(t, "A B+ C", 100) == 2**28 - 1  # counted exactly...
    with pytest.raises(MatchLimitError, match="max_matches=1000"):
        match_recognize(
            t,
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN (A B+ C) WITHIN 100 "
            "DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C')",
            max_matches=1000,
        )
    out = match_recognize(
        t,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN (A B+ C) WITHIN 100 "
        "DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C')",
        max_matches=1000,
        on_limit="truncate",
    )
    assert out.num_rows == 1000


def test_unsupported_shapes_fail_clearly() -> None:
    with pytest.raises(UnsupportedFeatureError, match="sequences of variables, Kleene"):
        count(typed("a1 b2"), "A B{2} C")
    with pytest.raises(UnsupportedFeatureError, match=r"not \(A \| B\)\+"):
        count(typed("a1 b2"), "(A | B)+ C")
    with pytest.raises(UnsupportedFeatureError, match="negation ~B is a CER construct"):
        match_recognize(
            typed("a1 b2"),
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A ~B C) DEFINE A AS type = 'A')",
        )


# ------------------------------------------------------------------ differential test


def brute_force(
    rows: list[dict[str, Any]],
    items: list[tuple[str, bool]],
    window: int,
    conds: dict[str, list[tuple[str, str, int]]],
) -> set[tuple[tuple[int, ...], ...]]:
    """Every STAM match by enumeration: items (name, kleene); conds[name] = [(op, other, const)]
    meaning name.v op other.v (other '' = the constant) for every selected event."""
    n = len(rows)
    cands = {name: [i for i in range(n) if rows[i]["type"] == name] for name, _ in items}
    options = []
    for name, kleene in items:
        c = cands[name]
        if kleene:
            options.append([s for k in range(1, len(c) + 1) for s in itertools.combinations(c, k)])
        else:
            options.append([(i,) for i in c])
    ops = {"<": lambda a, b: a < b, "=": lambda a, b: a == b, ">": lambda a, b: a > b}
    out = set()
    for combo in itertools.product(*options):
        times = [[rows[i]["ts"] for i in s] for s in combo]
        if any(times[k][0] <= times[k - 1][-1] for k in range(1, len(combo))):
            continue
        if any(t[j] <= t[j - 1] for t in times for j in range(1, len(t))):
            continue
        if max(max(t) for t in times) - min(min(t) for t in times) > window:
            continue
        binding = {name: s for (name, _), s in zip(items, combo, strict=True)}
        ok = True
        for name, cs in conds.items():
            for op, other, const in cs:
                for i in binding[name]:
                    rhs = [const] if other == "" else [rows[j]["v"] for j in binding[other]]
                    if not all(ops[op](rows[i]["v"], r) for r in rhs):
                        ok = False
        if ok:
            out.add(tuple(combo))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 3), st.integers(0, 3)), max_size=10),
    st.sampled_from(
        [
            [("A", False), ("B", False), ("C", False)],
            [("A", False), ("B", True), ("C", False)],
            [("A", True), ("C", False)],
            [("B", False), ("A", False)],
        ]
    ),
    st.integers(1, 8),
    st.lists(
        st.tuples(
            st.sampled_from("ABC"),
            st.sampled_from(["<", "=", ">"]),
            st.sampled_from(["", "A", "B", "C"]),
            st.integers(0, 3),
        ),
        max_size=2,
    ),
)
def test_matches_brute_force(
    events: list[tuple[str, int, int]],
    items: list[tuple[str, bool]],
    window: int,
    raw_conds: list[tuple[str, str, str, int]],
) -> None:
    rows = [{"ts": i + gap, "type": ord(k) - 64, "v": v} for i, (k, gap, v) in enumerate(events)]
    t = 0
    for r in rows:  # strictly increasing times with gaps
        t += 1 + (r["ts"] % 2)
        r["ts"] = t
    rows_str = [{**r, "type": chr(64 + r["type"])} for r in rows]
    names = [n for n, _ in items]
    conds: dict[str, list[tuple[str, str, int]]] = {}
    for owner, op, other, const in raw_conds:
        if owner not in names or (other and (other not in names or other == owner)):
            continue
        kleene_other = dict(items).get(other, False) if other else False
        if (
            dict(items)[owner] and other
        ):  # keep conditions between a Kleene set and others one-sided
            continue
        if kleene_other:
            continue
        conds.setdefault(owner, []).append((op, other, const))
    defines = []
    for name, _ in items:
        parts = [f"{name}.type = '{name}'"]
        for op, other, const in conds.get(name, []):
            parts.append(f"{name}.v {op} " + (f"{other}.v" if other else str(const)))
        defines.append(f"{name} AS " + " AND ".join(parts))
    pattern = " ".join(n + ("+" if k else "") for n, k in items)
    measures = ", ".join(
        f"FIRST({n}.id) AS {n}0, LAST({n}.id) AS {n}1, count({n}.*) AS {n}n" for n in names
    )
    table = pa.table(
        {
            "ts": [r["ts"] for r in rows_str],
            "type": [r["type"] for r in rows_str],
            "v": [r["v"] for r in rows_str],
            "id": list(range(len(rows_str))),
        },
        schema=pa.schema(
            [("ts", pa.int64()), ("type", pa.string()), ("v", pa.int64()), ("id", pa.int64())]
        ),
    )
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures} ALL MATCHES "
        f"PATTERN ({pattern}) WITHIN {window} DEFINE {', '.join(defines)})"
    )
    expected = brute_force(rows_str, items, window, conds)
    got_count = match_recognize(table, sql, count_only=True)["matches"][0].as_py()
    assert got_count == len(expected), sql
    out = match_recognize(table, sql).to_pylist()
    summary = sorted(tuple((r[f"{n}0"], r[f"{n}1"], r[f"{n}n"]) for n in names) for r in out)
    want = sorted(tuple((s[0], s[-1], len(s)) for s in combo) for combo in expected)
    assert summary == want, sql


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ABCD"), st.integers(0, 2), st.integers(0, 3)), max_size=25)
)
def test_every_evaluation_order_gives_the_same_matches(events: list[tuple[str, int, int]]) -> None:
    """Lazy evaluation is an optimisation (Kolchinsky & Schuster, Theorem 1): every join order
    of the single-event variables yields the same set."""
    from dfs_cer import analyze, parse
    from dfs_cer.match.cer.engine import run_cer

    ts, t = [], 0
    for _, gap, _ in events:
        t += gap
        ts.append(t)
    table = pa.table(
        {
            "ts": ts,
            "type": [e[0] for e in events],
            "v": [e[2] for e in events],
            "id": list(range(len(events))),
        },
        schema=pa.schema(
            [("ts", pa.int64()), ("type", pa.string()), ("v", pa.int64()), ("id", pa.int64())]
        ),
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b, C.id "
        "AS c, D.id AS d ALL MATCHES PATTERN (A B C D) WITHIN 6 DEFINE A AS type = 'A', B "
        "AS type = 'B' AND B.v >= A.v, C AS type = 'C', D AS type = 'D' AND D.v = B.v)"
    )
    analysis = analyze(parse(sql), table.schema)
    results = set()
    for order in itertools.permutations("ABCD"):
        out = run_cer(table, analysis, join_order=order).table
        results.add(tuple(sorted(tuple(r.values()) for r in out.to_pylist())))
    assert len(results) == 1


@pytest.mark.parametrize(("m", "expected"), [(10, 2036), (20, 2_097_130), (40, 2_199_023_255_510)])
def test_blow_up_counted_exactly(m: int, expected: int) -> None:
    """The notes' blow-up fixture (Query 1 of the recomputation paper): the lowest event, a
    strictly rising run of m prices, then one dip. The "next" DAG counts the matches of the
    single trigger exactly (2^(m+1) - m - 2) without enumerating them."""
    rows = (
        [("low", 0, 0.9)]
        + [(f"e{i}", i + 1, float(i + 1)) for i in range(m)]
        + [("dip", m + 1, 0.5)]
    )
    got = match_recognize(stock(rows), v_query(10**6), count_only=True)["matches"][0].as_py()
    assert got == expected == 2 ** (m + 1) - m - 2


def test_strict_contiguity() -> None:
    t = typed("a1 b2 c3 a4 x5 b6 c7 a8 b9 c10")
    assert count(t, "A B C", 100, selection="strict_contiguity") == 2  # a1 b2 c3 and a8 b9 c10
    assert count(t, "A B C", 100, selection="skip_till_next_match") == 3
    with pytest.raises(UnsupportedFeatureError, match="single-event variables"):
        count(t, "A B+ C", 100, selection="strict_contiguity")


def test_counts_past_int64_stay_exact() -> None:
    t = typed(" ".join(["a1"] + [f"b{i}" for i in range(2, 70)] + ["c70"]))
    n = match_recognize(
        t,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN (A B+ C) WITHIN 100 "
        "DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C')",
        count_only=True,
    )
    assert int(n["matches"][0].as_py()) == 2**68 - 1


def test_relaxed_time_order_lets_tied_events_chain() -> None:
    from dfs_cer.match.cer.engine import run_cer
    from dfs_cer.query import analyze, parse

    table = pa.table({"type": ["A", "B", "C", "C"], "ts": pa.array([1, 2, 2, 3], pa.int64())})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES B.ts AS b, C.ts AS c ALL MATCHES "
        "PATTERN (A B C) WITHIN 10 DEFINE A AS A.type = 'A', B AS B.type = 'B', C AS C.type = 'C')"
    )
    analysis = analyze(parse(sql), table.schema)
    assert run_cer(table, analysis).table.to_pylist() == [{"b": 2, "c": 3}]
    relaxed = run_cer(table, analysis, time_order="relaxed").table.to_pylist()
    assert sorted(relaxed, key=lambda r: r["c"]) == [{"b": 2, "c": 2}, {"b": 2, "c": 3}]
    with pytest.raises(UnsupportedFeatureError, match="time_order"):
        run_cer(table, analysis, time_order="loose")


# ------------------------------------------------------------ alternation and PERMUTE in a sequence


def _slots_brute_force(
    rows: list[dict[str, Any]],
    slots: list[list[str]],
    window: int,
    conds: dict[str, int],
    permute: bool,
) -> set[tuple[tuple[int, str], ...]]:
    """Every skip-till-any-match combination of ``slots`` (each slot: alternatives, one event);
    an event is labelled by the first alternative whose condition holds (``type`` equal and
    ``v >= conds[name]``); with ``permute`` the middle slots may take their events in any order."""

    def holds(name: str, i: int) -> bool:
        return rows[i]["type"] == name[0] and rows[i]["v"] >= conds.get(name, 0)

    def label(slot: list[str], i: int) -> str | None:
        return next((name for name in slot if holds(name, i)), None)

    n = len(rows)
    out = set()
    for combo in itertools.permutations(range(n), len(slots)):
        times = [rows[i]["ts"] for i in combo]
        if max(times) - min(times) > window:
            continue
        orders = (
            itertools.permutations(range(len(slots))) if permute else [tuple(range(len(slots)))]
        )
        for order in orders:
            if permute and (order[0] != 0 or order[-1] != len(slots) - 1):
                continue
            # the event at position k of the time sequence takes slot order[k]
            if any(times[k] >= times[k + 1] for k in range(len(slots) - 1)):
                continue
            labels = [label(slots[order[k]], i) for k, i in enumerate(combo)]
            if all(lb is not None for lb in labels):
                named = cast(list[str], labels)
                out.add(tuple(sorted(zip(combo, named, strict=True), key=lambda x: x[1])))
    return out


SLOTS = {
    "A (B1 | B2) D": [["A"], ["B1", "B2"], ["D"]],
    "A (B1 | C) D": [["A"], ["B1", "C"], ["D"]],
    "(A | C) D": [["A", "C"], ["D"]],
    "A PERMUTE(B, C) D": [["A"], ["B"], ["C"], ["D"]],
    "A {- N* -} (B1 | B2) D": [["A"], ["B1", "B2"], ["D"]],
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ABCD"), st.integers(0, 3)), max_size=9),
    st.sampled_from(list(SLOTS)),
    st.integers(2, 8),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_alternation_and_permute_match_brute_force(
    events: list[tuple[str, int]], pattern: str, window: int, c1: int, c2: int
) -> None:
    """ALL MATCHES over alternations of single variables (SASE's OR: one event, labelled by the
    first alternative whose condition holds, as SQL prefers) and PERMUTE inside a sequence."""
    rows = [{"ts": 2 * i, "type": k, "v": v} for i, (k, v) in enumerate(events)]
    conds = {"B1": c1, "B2": c2, "C": c2, "A": 0, "D": 0, "B": c1}
    slots = SLOTS[pattern]
    names = sorted({n for s in slots for n in s})
    table = pa.table(
        {
            "ts": [r["ts"] for r in rows],
            "type": [r["type"] for r in rows],
            "v": [r["v"] for r in rows],
            "id": list(range(len(rows))),
        },
        schema=pa.schema(
            [("ts", pa.int64()), ("type", pa.string()), ("v", pa.int64()), ("id", pa.int64())]
        ),
    )
    defines = ", ".join(f"{n} AS {n}.type = '{n[0]}' AND {n}.v >= {conds[n]}" for n in names)
    measures = ", ".join(f"{n}.id AS id_{n.lower()}" for n in names)
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures}, MATCH_NUMBER() "
        f"AS mn ALL MATCHES PATTERN ({pattern}) WITHIN {window} DEFINE {defines})"
    )
    want = _slots_brute_force(rows, slots, window, conds, "PERMUTE" in pattern)
    out = match_recognize(table, sql).to_pylist()
    got = {
        tuple(
            sorted(
                ((r[f"id_{n.lower()}"], n) for n in names if r[f"id_{n.lower()}"] is not None),
                key=lambda x: x[1],
            )
        )
        for r in out
    }
    assert len(out) == len(got), "a match was produced twice"
    assert got == want, sql
    assert [r["mn"] for r in out] == list(range(1, len(out) + 1))
    assert match_recognize(table, sql, count_only=True)["matches"][0].as_py() == len(want)


def test_alternation_preference_and_normalised_forms() -> None:
    t = typed("a1 b2 c3 b4 d5 c6")
    assert count(t, "A B{1} D", 10) == count(t, "A B D", 10) == count(t, "A (B) D", 10) == 2
    assert count(t, "A B{1,1}? D", 10) == 2
    assert count(t, "A (B | C) D", 10) == 3
    assert count(t, "A PERMUTE(B, C) D", 10) == 2  # b2 c3 and c3 b4
    # one event, one label: an event both alternatives accept is labelled by the first
    both = match_recognize(
        t,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS c, X.id AS x, "
        "Y.id AS y ALL MATCHES PATTERN (A (X | Y)) WITHIN 10 DEFINE A AS type = 'A', "
        "X AS type IN ('B', 'C'), Y AS type = 'B')",
    ).to_pylist()
    assert [(r["c"], r["x"], r["y"]) for r in both] == [
        ("X", "b2", None),
        ("X", "c3", None),
        ("X", "b4", None),
        ("X", "c6", None),
    ]


def test_alternation_guard_sees_the_taking_variable_unmatched() -> None:
    """SQL tries B first, where C (not matched yet) is NULL:
    ``B.v = C.v`` fails and C takes the row."""
    t = pa.table({"ts": [1, 2], "type": ["A", "B"], "v": [1, 5]})
    out = match_recognize(
        t,
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS c ALL MATCHES "
        "PATTERN (A (B | C)) WITHIN 5 DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v = C.v, "
        "C AS C.type IN ('B', 'C'))",
    )
    assert out.to_pylist() == [{"c": "C"}]


def test_subsets_negations_and_classifier_under_all_matches() -> None:
    t = pa.table({"ts": [1, 2, 3], "type": ["A", "B", "C"], "g": ["x", "x", "x"]})

    def run(body: str, subset: str = "") -> list[dict[str, object]]:
        pattern = body[body.index("PATTERN") :]
        defines = ", ".join(
            f"{v} AS type = '{v}'" for v in "ABCD" if v in pattern.replace("PATTERN", "")
        )
        return match_recognize(
            t, f"SELECT * FROM t MATCH_RECOGNIZE ({body} WITHIN 5 {subset} DEFINE {defines})"
        ).to_pylist()

    # U's last row, first row and size among the members the match has
    assert run(
        "ORDER BY ts MEASURES LAST(U.ts) AS u, FIRST(U.ts) AS fu, count(U.*) AS n ALL MATCHES "
        "PATTERN (A (B | C))",
        "SUBSET U = (A, B)",
    ) == [{"u": 2, "fu": 1, "n": 2}, {"u": 1, "fu": 1, "n": 1}]
    # a negated variable at either end labels no row: partitions, numbering and CLASSIFIER skip it
    assert run(
        "PARTITION BY g ORDER BY ts MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c ALL MATCHES "
        "PATTERN (~D A C)"
    ) == [{"g": "x", "mn": 1, "c": "C"}]
    assert run(
        "ORDER BY ts MEASURES CLASSIFIER() AS c, D.ts AS d ALL MATCHES PATTERN (A C ~D)"
    ) == [{"c": "C", "d": None}]
    # a conjunction's last row is the latest in time, not the last item written
    assert run("ORDER BY ts MEASURES CLASSIFIER() AS c ALL MATCHES PATTERN (PERMUTE(A, C, B))") == [
        {"c": "C"}
    ]


def test_string_options_are_checked_where_a_matcher_starts() -> None:
    from dfs_cer import analyze, parse
    from dfs_cer.errors import ConfigError
    from dfs_cer.match.cer.engine import run_cer
    from dfs_cer.match.rowpattern.engine import run_row_pattern

    table = pa.table({"ts": [1, 2], "type": ["a", "b"]})
    analysis = analyze(
        parse(
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN (A B) "
            "DEFINE A AS A.type = 'a', B AS B.type = 'b')"
        ),
        table.schema,
    )
    with pytest.raises(ConfigError, match="kleene must be one of all, maximal, got 'maximum'"):
        run_cer(table, analysis, kleene="maximum")
    with pytest.raises(ConfigError, match="on_limit must be one of error, truncate"):
        run_cer(table, analysis, on_limit="ignore")
    with pytest.raises(ConfigError, match="on_limit must be one of error, truncate"):
        run_row_pattern(table, analysis, on_limit="drop")


@settings(max_examples=120, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from("pq"), st.sampled_from("ABCN"), st.integers(0, 5)),
        min_size=1,
        max_size=60,
    ),
    window=st.sampled_from([None, 3, 8]),
    three=st.booleans(),
)
def test_skip_till_next_match_equals_a_greedy_reference(
    rows: list[tuple[str, str, int]], window: int | None, three: bool
) -> None:
    """Per start event, each later variable takes the first qualifying event after the previous
    one (same partition, inside the window): the batch evaluation equals this per-start loop."""
    ts = list(
        range(0, 2 * len(rows), 2)
    )  # distinct times: the first qualifying event is unambiguous
    table = pa.table(
        {
            "k": [r[0] for r in rows],
            "type": [r[1] for r in rows],
            "x": [r[2] for r in rows],
            "ts": ts,
        }
    )
    pattern = "A B C" if three else "A B"
    define = "A AS A.type = 'A', B AS B.type = 'B' AND B.x >= A.x" + (
        ", C AS C.type = 'C' AND C.x = B.x AND C.x + A.x > 1" if three else ""
    )
    within = f" WITHIN {window}" if window is not None else ""
    measures = "A.ts AS a, B.ts AS b" + (", C.ts AS c" if three else "")
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {measures} "
        f"ALL MATCHES PATTERN ({pattern}){within} DEFINE {define})"
    )
    got = sorted(
        tuple(r[c] for c in ("k", "a", "b", "c") if c in r)
        for r in match_recognize(table, sql, selection="skip_till_next_match").to_pylist()
    )

    def holds(
        var: str, e: dict[str, tuple[str, str, int, int]], row: tuple[str, str, int, int]
    ) -> bool:
        if row[1] != var:
            return False
        if var == "B":
            return row[2] >= e["A"][2]
        if var == "C":
            return row[2] == e["B"][2] and row[2] + e["A"][2] > 1
        return True

    events = [(k, ty, x, t) for (k, ty, x), t in zip(rows, ts, strict=True)]
    expected = []
    for start in events:
        if start[1] != "A":
            continue
        chosen = {"A": start}
        for var in ("B", "C") if three else ("B",):
            last = max(v[3] for v in chosen.values())
            nxt = next(
                (
                    e
                    for e in events
                    if e[0] == start[0]
                    and e[3] > last
                    and (window is None or e[3] - start[3] <= window)
                    and holds(var, chosen, e)
                ),
                None,
            )
            if nxt is None:
                break
            chosen[var] = nxt
        else:
            expected.append((start[0], *(chosen[v][3] for v in ("A", "B", "C") if v in chosen)))
    assert got == sorted(expected)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=14), st.sampled_from(["FIRST", "LAST"]))
def test_first_or_last_of_a_single_event_filters_a_kleene_set_event_by_event(
    values: list[int], nav: str
) -> None:
    """``B.v > FIRST(A.v)`` with A a single event is ``B.v > A.v``: each B event is kept or not
    on its own (not a condition over the set, whose every subset would be tried)."""
    t = pa.table({"ts": list(range(len(values))), "v": values})
    head = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, FIRST(B.ts) AS b0, "
        "LAST(B.ts) AS b1, count(B.*) AS nb, C.ts AS c ALL MATCHES PATTERN (A B+ C) DEFINE "
    )
    navigated = match_recognize(t, head + f"B AS B.v > {nav}(A.v), C AS C.v < {nav}(A.v))")
    plain = match_recognize(t, head + "B AS B.v > A.v, C AS C.v < A.v)")
    assert sorted(map(str, navigated.to_pylist())) == sorted(map(str, plain.to_pylist()))


def test_a_kleene_run_past_the_step_budget_ends_with_its_error() -> None:
    """A B+ C with no WITHIN and no condition on A or C: every (A, C) pair's B set is evaluated
    in Python. The step budget ends it with the partition, its rows, the pattern and the
    setting instead of running for minutes."""
    from dfs_cer.config import Config, MatcherConfig
    from dfs_cer.errors import MatchBudgetError

    n = 400
    t = pa.table({"k": [0] * n, "ts": list(range(n)), "v": [i % 7 for i in range(n)]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
        "ALL MATCHES PATTERN (A B+ C) DEFINE B AS B.v > FIRST(A.v) + 100)"
    )
    with pytest.raises(MatchBudgetError) as info:
        match_recognize(
            t, sql, count_only=True, config=Config(matcher=MatcherConfig(max_steps=1_000_000))
        )
    for part in ("matcher.max_steps = 1,000,000", "partition k = 0", "PATTERN (A B+ C)"):
        assert part in str(info.value), str(info.value)


#: DEFINE/MEASURES forms the CER engine cannot evaluate, each with what its refusal names
CER_REFUSED = [
    ("A B", "B AS B.x > PREV(B.x)", "B.x AS b", "single-event variable B"),
    ("A B", "B AS B.x > PREV(A.x)", "B.x AS b", "single-event variable A"),
    ("A B+ C+", "B AS B.x > PREV(C.x), C AS C.x > 0", "A.x AS b", "outside its own condition"),
    ("A B+", "B AS B.x > PREV(B.x, 2)", "A.x AS b", "PREV(B.x, 2)"),
    ("A B+ C ~N D", "B AS B.x > N.x, N AS N.x > 0", "A.x AS b", "negated variable"),
    ("A B+ C ~N D", "N AS N.x = B.x", "A.x AS b", "reads Kleene variable B"),
    ("A B+", "B AS B.x > 0", "PREV(B.x) AS b", "MEASURES"),
]


@pytest.mark.parametrize(("pattern", "define", "measures", "named"), CER_REFUSED)
def test_what_the_cer_engine_refuses_does_not_depend_on_the_rows(
    pattern: str, define: str, measures: str, named: str
) -> None:
    """Refused whether or not some variable has candidates (no rows, rows without a candidate,
    rows with matches), the same from the local engine, every strategy (before any round: no
    node is reachable here) and a CER selection over the SQL form of the query."""
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures} ALL MATCHES PATTERN "
        f"({pattern}) WITHIN 10 DEFINE A AS A.x > {{a}}, {define})"
    )
    t = pa.table({"ts": [1, 2, 3, 4, 5, 6], "x": [1, 5, 2, 7, 3, 9]})
    refusals = set()
    for table, a in ((t, 0), (t, 100), (t.slice(0, 0), 0)):
        with pytest.raises(UnsupportedFeatureError) as info:
            match_recognize(table, sql.format(a=a))
        refusals.add(str(info.value))
    sql_form = sql.format(a=0).replace("ALL MATCHES", "ONE ROW PER MATCH")
    if "~" not in pattern:  # (a negation is CER syntax: no SQL form)
        with pytest.raises(UnsupportedFeatureError) as info:
            match_recognize(t.slice(0, 0), sql_form, selection="skip_till_any_match")
        refusals.add(str(info.value))
    from dfs_cer.strategies import STRATEGIES, pull

    for name in STRATEGIES:
        with pytest.raises(UnsupportedFeatureError) as info:
            pull(name, sql.format(a=100), ["grpc+tcp://127.0.0.1:1"], "token")
        refusals.add(str(info.value))
    assert len(refusals) == 1 and named in refusals.pop()


def test_a_condition_over_two_kleene_sets_holds_for_every_pair_of_their_events() -> None:
    """``A.x > B.x + C.x`` with B+ and C+ holds for every selected B event with every selected C
    event (the bare reference's meaning), not against the other set's last event only (which
    also made the answer depend on the process's string hashing)."""
    t = pa.table({"ts": [1, 2, 3, 4, 5, 6], "x": [10, 5, 1, 5, 1, 0]})
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(B.ts) AS b0, LAST(B.ts) AS "
        "b1, FIRST(C.ts) AS c0, LAST(C.ts) AS c1 ALL MATCHES PATTERN (A B+ C+ D) WITHIN 10 DEFINE "
        "A AS A.ts = 1 AND A.x > B.x + C.x, B AS B.ts IN (2, 3), C AS C.ts IN (4, 5), "
        "D AS D.ts = 6)"
    )
    got = sorted(tuple(r.values()) for r in match_recognize(t, sql).to_pylist())
    # every B and C subset but those holding both ts 2 and ts 4 (5 + 5 is not below 10)
    b_sets, c_sets = [(2, 2), (3, 3), (2, 3)], [(4, 4), (5, 5), (4, 5)]
    assert got == sorted(b + c for b in b_sets for c in c_sets if not (b[0] == 2 and c[0] == 4))
