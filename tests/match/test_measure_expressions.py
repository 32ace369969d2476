"""MEASURES with expression aggregates, FILTER, DISTINCT and navigation over expressions against
a brute force in Python: the engine's ALL ROWS PER MATCH output gives each row's match and label;
the brute force recomputes every measure from those rows (RUNNING: the rows so far; FINAL: the
whole match) and the input."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize

# (SQL, variable or None, argument at a row (x, y, label) -> value or None, filter, aggregate,
# distinct)
AGGREGATES: list[tuple[str, str | None, Any, Any, str, bool]] = [
    (
        "sum(B.x * 2 + B.y)",
        "B",
        lambda x, y, lab: None if x is None else x * 2 + y,
        None,
        "sum",
        False,
    ),
    (
        "sum(CASE WHEN CLASSIFIER() = 'A' THEN x END)",
        None,
        lambda x, y, lab: x if lab == "A" else None,
        None,
        "sum",
        False,
    ),
    (
        "count(*) FILTER (WHERE x > 1)",
        None,
        lambda x, y, lab: 1,
        lambda x, y, lab: x is not None and x > 1,
        "count",
        False,
    ),
    (
        "max(U.y) FILTER (WHERE U.x IS NULL OR U.x < 3)",
        "U",
        lambda x, y, lab: y,
        lambda x, y, lab: x is None or x < 3,
        "max",
        False,
    ),
    ("count(DISTINCT x)", None, lambda x, y, lab: x, None, "count", True),
    ("sum(DISTINCT B.y)", "B", lambda x, y, lab: y, None, "sum", True),
    ("array_agg(DISTINCT CLASSIFIER())", None, lambda x, y, lab: lab, None, "array_agg", True),
    ("array_agg(x)", None, lambda x, y, lab: x, None, "array_agg", False),
    ("count_if(B.y = 1)", "B", lambda x, y, lab: y == 1, None, "count_if", False),
    ("min_by(y, x)", None, lambda x, y, lab: (y, x), None, "min_by", False),
    ("max_by(CLASSIFIER(), x)", None, lambda x, y, lab: (lab, x), None, "max_by", False),
    (
        "bool_or(U.x > 2)",
        "U",
        lambda x, y, lab: None if x is None else x > 2,
        None,
        "bool_or",
        False,
    ),
    ("any_value(x)", None, lambda x, y, lab: x, None, "any_value", False),
    (
        "string_agg(CAST(y AS VARCHAR), '')",
        None,
        lambda x, y, lab: str(y),
        None,
        "string_agg",
        False,
    ),
    ("var_pop(x)", None, lambda x, y, lab: x, None, "var_pop", False),
    (
        "avg(x) FILTER (WHERE CLASSIFIER() <> 'B')",
        None,
        lambda x, y, lab: x,
        lambda x, y, lab: lab != "B",
        "avg",
        False,
    ),
]


def _aggregate(kind: str, values: list[Any]) -> Any:
    present = [v for v in values if v is not None] if kind != "array_agg" else values
    if kind in ("count", "count_if"):
        return sum(1 for v in present if v is True) if kind == "count_if" else len(present)
    if kind in ("min_by", "max_by"):
        keyed = [(v, k) for v, k in values if k is not None]
        if not keyed:
            return None
        best = min(k for _, k in keyed) if kind == "min_by" else max(k for _, k in keyed)
        return next(v for v, k in keyed if k == best)
    if not present:
        return None
    aggregates: dict[str, Callable[[list[Any]], Any]] = {
        "sum": sum,
        "max": max,
        "array_agg": list,
        "bool_or": any,
        "any_value": lambda v: v[0],
        "string_agg": "".join,
        "var_pop": statistics.pvariance,
        "avg": lambda v: sum(v) / len(v),
    }
    return aggregates[kind](present)


@settings(max_examples=int(os.environ.get("DFS_CER_EXAMPLES", 150)), deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.integers(0, 4), st.none()), st.integers(0, 2)),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from(range(len(AGGREGATES))),
    st.sampled_from(["RUNNING", "FINAL"]),
    st.sampled_from(["A B+ C*", "A+ B C?", "(A | B)+ C?", "A B* C+"]),
    st.sampled_from(
        [
            "PREV(coalesce(B.x, -1))",
            "FIRST(CASE WHEN U.y > 0 THEN U.x END)",
            "NEXT(coalesce(x, 9), 2)",
        ]
    ),
)
def test_measures_match_the_brute_force(
    data: list[tuple[int | None, int]], which: int, semantics: str, pattern: str, navigation: str
) -> None:
    sql_agg, variable, arg, test, kind, distinct = AGGREGATES[which]
    table = pa.table(
        {
            "ts": list(range(len(data))),
            "x": pa.array([x for x, _ in data], pa.int64()),
            "y": [y for _, y in data],
        }
    )
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS lab, "
        f"MATCH_NUMBER() AS mn, {semantics} {sql_agg} AS agg, {navigation} AS nav ALL ROWS "
        "PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) SUBSET U = (A, C) "
        "DEFINE A AS A.y <> 1 OR A.x IS NULL, B AS B.x IS NULL OR B.x >= A.x, C AS C.y = 1)"
    ).replace("{pattern}", pattern)
    out = match_recognize(table, sql).to_pylist()
    members = {"U": {"A", "C"}, "B": {"B"}, None: {"A", "B", "C"}}[variable]
    by_match: dict[int, list[dict[str, Any]]] = {}
    for r in out:
        by_match.setdefault(r["mn"], []).append(r)
    for rows in by_match.values():
        for i, r in enumerate(rows):
            seen = rows if semantics == "FINAL" else rows[: i + 1]
            chosen = [
                s
                for s in seen
                if s["lab"] in members and (test is None or test(s["x"], s["y"], s["lab"]) is True)
            ]
            values = [arg(s["x"], s["y"], s["lab"]) for s in chosen]
            if distinct:
                values = (
                    list(dict.fromkeys(values))
                    if kind == "array_agg"
                    else list(dict.fromkeys(v for v in values if v is not None))
                )
            expected = _aggregate(kind, values)
            if kind in ("var_pop", "avg") and expected is not None:
                assert r["agg"] is not None and abs(r["agg"] - expected) < 1e-9, (sql, data, r)
            else:
                assert r["agg"] == expected, (sql, data, r)
            assert r["nav"] == _navigation(navigation, rows, i, data), (sql, data, r)


def _navigation(
    nav: str, rows: list[dict[str, Any]], i: int, data: list[tuple[int | None, int]]
) -> Any:
    """The navigated expression at its row (NULL where there is no such row)."""
    seen = rows[: i + 1]
    if nav.startswith("PREV"):
        bs = [s for s in seen if s["lab"] == "B"]
        if not bs or bs[-1]["ts"] == 0:
            return None
        x = data[bs[-1]["ts"] - 1][0]
        return -1 if x is None else x
    if nav.startswith("FIRST"):
        us = [s for s in seen if s["lab"] in ("A", "C")]
        if not us:
            return None
        return us[0]["x"] if us[0]["y"] > 0 else None
    target = rows[i]["ts"] + 2
    if target >= len(data):
        return None
    x = data[target][0]
    return 9 if x is None else x
