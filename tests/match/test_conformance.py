"""Conformance with the standard as Trino implements it: each case's data and expected rows come
from a case of Trino's TestRowPatternMatching (written there in window form; here one row per
match, in match order)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dfs_cer import match_recognize
from dfs_cer.errors import MatchError

EMPTY = (None, None)


@pytest.mark.parametrize(("pattern", "expected"), [
    ("()* | B", [EMPTY] * 4),  # an alternative that matches empty is preferred like any other
    ("()+ | B", [EMPTY] * 4),
    ("(){5,} | B", [EMPTY] * 4),  # empty iterations up to the minimum
    ("B | ()*", [EMPTY, (80, "B"), (80, "B"), EMPTY]),
    ("(B ()*)*", [EMPTY, (80, "B"), EMPTY]),  # rows 2-3 in one match: the loop goes on after a non-empty iteration
    ("(B ()*)*?", [EMPTY] * 4),
])
def test_empty_cycles(pattern: str, expected: list[tuple[object, object]]) -> None:
    t = pa.table({"id": [1, 2, 3, 4], "value": [70, 80, 80, 70]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES RUNNING LAST(value) AS val, CLASSIFIER() AS label "
           f"ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) "
           "DEFINE B AS B.value >= NEXT(B.value))")
    assert [(r["val"], r["label"]) for r in match_recognize(t, sql).to_pylist()] == expected


SKIP_QUERY = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS s, RUNNING LAST(value) AS val, "
              "CLASSIFIER() AS label ONE ROW PER MATCH AFTER MATCH {skip} PATTERN (A B+ C+ D?) SUBSET U = (C, D) "
              "DEFINE B AS B.value < PREV(B.value), C AS C.value > PREV(C.value), D AS false)")
SKIP_DATA = pa.table({"id": [1, 2, 3, 4, 5, 6], "value": [90, 80, 70, 80, 70, 100]})


@pytest.mark.parametrize("skip", ["SKIP TO FIRST C", "SKIP TO LAST B", "SKIP TO B", "SKIP TO U"])
def test_after_match_skip_to_a_label(skip: str) -> None:
    rows = match_recognize(SKIP_DATA, SKIP_QUERY.format(skip=skip)).to_pylist()
    assert [(r["s"], r["val"], r["label"]) for r in rows] == [(1, 80, "C"), (4, 100, "C")]


@pytest.mark.parametrize(("skip", "message"), [
    ("SKIP TO A", "would skip to the first row of the match"),  # Trino: cannot skip to first row of match
    ("SKIP TO D", "found no row labelled D in the match"),  # Trino: pattern variable is not present in match
])
def test_after_match_skip_errors(skip: str, message: str) -> None:
    with pytest.raises(MatchError, match=message):
        match_recognize(SKIP_DATA, SKIP_QUERY.format(skip=skip))


@pytest.mark.parametrize(("pattern", "expected"), [
    ("(A* | B)?", [(0, None), (0, None)]),  # bounded: the iteration's first alternative matches empty
    ("(A* | B){0,2}", [(0, None), (0, None)]),
    # a loop's first iteration takes the empty alternative; the way back into the loop is cut
    # (its start was visited at this row) and the exit, reached before the B alternative, wins
    ("(A* | B)*", [(0, None), (0, None)]),
    ("(A* | B)+", [(0, None), (0, None)]),
    ("(B | A*)*", [(2, "B")]),  # B first: iterations consume rows
])
def test_empty_iterations_of_bounded_and_looping_quantifiers(pattern: str, expected: list[tuple[int, object]]) -> None:
    """Trino compiles {n,m} and ? by unrolling (an empty iteration is an iteration like any other)
    and a loop as its body then a split back to the body's start; its matcher drops a thread that
    reaches an instruction twice at one row. Expected rows follow that program by hand."""
    t = pa.table({"id": [1, 2], "v": [5, 5]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS c, CLASSIFIER() AS l ONE ROW PER MATCH "
           f"AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) DEFINE A AS A.v > 9, B AS B.v < 9)")
    assert [(r["c"], r["l"]) for r in match_recognize(t, sql).to_pylist()] == expected
