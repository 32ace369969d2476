"""MATCH_NUMBER() over a split input: stand-in rows for empty matches the relation shows no row
of count in the renumbering (dfs_cer.match.numbering)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dfs_cer import analyze, parse
from dfs_cer.match.numbering import EMPTY, renumber, stands_in, with_stand_ins
from dfs_cer.query import Analysis

SCHEMA = pa.schema([("ts", pa.int64()), ("v", pa.int64()), ("g", pa.string())])


def _analysis(rows: str, measure: str = "MATCH_NUMBER() AS mn") -> Analysis:
    return analyze(
        parse(
            f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY g ORDER BY ts MEASURES {measure} "
            f"{rows} PATTERN (A* B?) DEFINE A AS A.v < 5, B AS B.v > 7)"
        ),
        SCHEMA,
    )


@pytest.mark.parametrize(
    ("rows", "measure", "expected"),
    [
        ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "MATCH_NUMBER() AS mn", True),
        ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "MATCH_NUMBER() AS mn", True),
        ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", "MATCH_NUMBER() AS mn", False),
        ("ONE ROW PER MATCH", "MATCH_NUMBER() AS mn", False),
        ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "COUNT(*) AS n", False),
    ],
)
def test_stand_ins_only_where_an_empty_match_has_no_row_but_a_number(
    rows: str, measure: str, expected: bool
) -> None:
    assert stands_in(_analysis(rows, measure)) is expected


def test_a_stand_in_takes_its_number_and_goes() -> None:
    analysis = _analysis("ALL ROWS PER MATCH OMIT EMPTY MATCHES")
    # two matches of partition "x" (times 0 and 2) and one of "y"; chunks numbered them 1, 1, 1
    relation = pa.table(
        {
            "g": pa.array(["x", "x", "y"]),
            "ts": pa.array([0, 2, 1], pa.int64()),
            "mn": pa.array([1, 1, 1], pa.int64()),
            "start": pa.array([0, 2, 1], pa.int64()),
            "rank": pa.array([0, 0, 0], pa.int64()),
        }
    )
    # an empty match of "x" at time 1 (rank 3 among that time's rows): the relation has no row
    heads = pa.table({"ts": pa.array([1], pa.int64()), "v": [6], "g": ["x"]})
    marked = with_stand_ins(
        relation, analysis, heads, np.array([1]), np.array([3]), ("start", "rank")
    )
    assert marked.schema.names == [*relation.schema.names, EMPTY]
    assert marked.slice(3).to_pylist() == [
        {"g": "x", "ts": None, "mn": None, "start": 1, "rank": 3, EMPTY: True}
    ]
    assert marked.column(EMPTY).to_pylist() == [False, False, False, True]
    numbered = renumber(marked, analysis, "start", "rank")
    kept = numbered.filter(pc.invert(numbered.column(EMPTY)))
    assert kept.select(["g", "ts", "mn"]).to_pylist() == [
        {"g": "x", "ts": 0, "mn": 1},
        {"g": "x", "ts": 2, "mn": 3},
        {"g": "y", "ts": 1, "mn": 1},
    ]


def test_no_empty_match_adds_only_the_column() -> None:
    analysis = _analysis("ALL ROWS PER MATCH WITH UNMATCHED ROWS")
    relation = pa.table({"g": ["x"], "start": pa.array([0], pa.int64()), "rank": [None]})
    marked = with_stand_ins(
        relation,
        analysis,
        pa.table({"ts": pa.array([], pa.int64()), "v": pa.array([], pa.int64()), "g": []}),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        ("start", "rank"),
    )
    assert marked.to_pylist() == [{"g": "x", "start": 0, "rank": None, EMPTY: False}]
