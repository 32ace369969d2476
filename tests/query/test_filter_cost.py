"""A pushed input filter's cost: LIKE patterns bounded in size before they are pushed, and
estimated over a node's rows (pattern size x characters)."""

from __future__ import annotations

import pytest

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.filter_cost import MAX_LIKE_CHARS, check_like_size, filter_cost
from dfs_cer.query.input_filter import INPUT_FILTER, parse_input_filter


def like_filter(ors: int) -> str:
    """``ors`` ORed LIKEs of 256-character patterns (``'%a' || '%_' x 127``)."""
    return " OR ".join(f"s LIKE '%{chr(ord('a') + i % 26)}" + "%_" * 127 + "'" for i in range(ors))


def test_a_costly_like_is_not_pushed_by_the_compute_node() -> None:
    with pytest.raises(
        QueryValidationError,
        match=f"LIKE patterns of .* characters in all are not pushed.*at most {MAX_LIKE_CHARS}",
    ) as info:
        check_like_size(parse_input_filter(like_filter(5)))
    assert info.value.code == INPUT_FILTER
    check_like_size(parse_input_filter(like_filter(4)))  # 1,024 characters: pushed
    assert (
        filter_cost(parse_input_filter("s LIKE 'a%' OR s = 'x'"), lambda c: (1000, 10)) == 2 * 1000
    )
