from __future__ import annotations

import pytest

from dfs_cer.pattern.parser import parse_pattern
from dfs_cer.pattern.properties import (
    first_labels,
    has_anchor,
    last_labels,
    mandatory_labels,
    max_rows,
    nullable,
    top_level_positions,
)


@pytest.mark.parametrize(
    ("text", "is_nullable", "first", "last", "mandatory"),
    [
        ("R {- N* -} B {- N* -} M", False, {"R"}, {"M"}, {"R", "B", "M"}),
        ("A B+ C", False, {"A"}, {"C"}, {"A", "B", "C"}),
        ("A* B", False, {"A", "B"}, {"B"}, {"B"}),
        ("A (B | C) D?", False, {"A"}, {"B", "C", "D"}, {"A"}),
        ("A*", True, {"A"}, {"A"}, set()),
        ("()", True, set(), set(), set()),
        ("PERMUTE(A, B)", False, {"A", "B"}, {"A", "B"}, {"A", "B"}),
        ("(A | A B) C", False, {"A"}, {"C"}, {"A", "C"}),
        ("^ A $", False, {"A"}, {"A"}, {"A"}),
        ("A{0,3} B{2}", False, {"A", "B"}, {"B"}, {"B"}),
    ],
)
def test_properties(
    text: str, is_nullable: bool, first: set[str], last: set[str], mandatory: set[str]
) -> None:
    p = parse_pattern(text)
    assert nullable(p) is is_nullable
    assert first_labels(p) == first
    assert last_labels(p) == last
    assert mandatory_labels(p) == mandatory


def test_positions_and_anchors() -> None:
    p = parse_pattern("A (B C) {- N* -} (D | A)")
    assert top_level_positions(p) == {"A": (0, 4), "B": (1,), "C": (2,), "N": (3,), "D": (4,)}
    assert not has_anchor(p)
    assert has_anchor(parse_pattern("A $"))


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("A B+ A", {"A": 2, "B": None}),
        ("A (B | C) D", {"A": 1, "B": 1, "C": 1, "D": 1}),
        ("A N*? B N*? A", {"A": 2, "N": None, "B": 1}),
        ("(A B){3}", {"A": 3, "B": 3}),
        ("A{0,2} (A | B)", {"A": 3, "B": 1}),
        ("PERMUTE(A, B) A?", {"A": 2, "B": 1}),
        ("A ~B C", {"A": 1, "B": 0, "C": 1}),
    ],
)
def test_max_rows(text: str, rows: dict[str, int | None]) -> None:
    assert max_rows(parse_pattern(text)) == rows
