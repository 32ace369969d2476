from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfs_cer.errors import QuerySyntaxError, QueryValidationError
from dfs_cer.pattern.ir import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    EmptyPattern,
    Exclusion,
    Label,
    Permutation,
    Quantified,
    RowPattern,
    to_text,
)
from dfs_cer.pattern.parser import parse_pattern
from dfs_cer.serde import from_json, to_json

A, B, C, N = Label("A"), Label("B"), Label("C"), Label("N")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A", A),
        ("a", A),
        ('"a"', Label("a")),
        ("A B C", Concatenation((A, B, C))),
        ("A | B | C", Alternation((A, B, C))),
        ("A B | C", Alternation((Concatenation((A, B)), C))),
        ("A*", Quantified(A, 0, None)),
        ("A+", Quantified(A, 1, None)),
        ("A?", Quantified(A, 0, 1)),
        ("A*?", Quantified(A, 0, None, greedy=False)),
        ("A+?", Quantified(A, 1, None, greedy=False)),
        ("A??", Quantified(A, 0, 1, greedy=False)),
        ("A{3}", Quantified(A, 3, 3)),
        ("A{3}?", Quantified(A, 3, 3, greedy=False)),
        ("A{2,}", Quantified(A, 2, None)),
        ("A{,4}", Quantified(A, 0, 4)),
        ("A{2,4}?", Quantified(A, 2, 4, greedy=False)),
        ("(A B)+", Quantified(Concatenation((A, B)), 1, None)),
        (
            "(A+)+ $",
            Concatenation(
                (Quantified(Quantified(A, 1, None), 1, None), Anchor(AnchorKind.PARTITION_END))
            ),
        ),
        ("^ A", Concatenation((Anchor(AnchorKind.PARTITION_START), A))),
        ("R {- N* -} B", Concatenation((Label("R"), Exclusion(Quantified(N, 0, None)), B))),
        ("R {-N*-} B", Concatenation((Label("R"), Exclusion(Quantified(N, 0, None)), B))),
        ("PERMUTE(A, B C)", Permutation((A, Concatenation((B, C))))),
        ("permute (A,B)", Permutation((A, B))),
        ("()", EmptyPattern()),
        ("", EmptyPattern()),
        ("A () B", Concatenation((A, EmptyPattern(), B))),
        ("A N1*? B", Concatenation((A, Quantified(Label("N1"), 0, None, greedy=False), B))),
        ("(A|AA)*B", Concatenation((Quantified(Alternation((A, Label("AA"))), 0, None), B))),
    ],
)
def test_parse(text: str, expected: RowPattern) -> None:
    assert parse_pattern(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A **", "unexpected quantifier '*' after a quantifier"),
        ("A {3,1}", "upper bound below its lower bound"),
        ("A {}", "empty quantifier"),
        ("(A", "expected ')'"),
        ("A )", "unexpected ')'"),
        ("A -", "unexpected '-'"),
        ("A |", "expected a pattern element"),
        ("| A", "expected a pattern element"),
        ("A # B", "unexpected character '#'"),
        ('"A', "unterminated quoted variable name"),
        ('""', "empty quoted variable name"),
        ("{- A", "expected '-}'"),
        ("PERMUTE(A,)", "expected a pattern element"),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(
        QuerySyntaxError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("*", r"\*")
        .replace("|", r"\|")
        .replace("{", r"\{")
        .replace("}", r"\}"),
    ) as info:
        parse_pattern(text)
    assert info.value.clause == "PATTERN"


@pytest.mark.parametrize("text", ["A {0}", "A {0,0}", "A {,0}", "A B{0} C"])
def test_a_zero_upper_bound_is_refused(text: str) -> None:
    # ISO/IEC 19075-5 (and Trino): a quantifier's upper bound must be at least 1
    with pytest.raises(QueryValidationError, match="upper bound 0") as info:
        parse_pattern(text)
    assert info.value.clause == "PATTERN" and info.value.code == "bad-quantifier"


def test_error_position_is_mapped() -> None:
    from dfs_cer.errors import SourcePosition

    with pytest.raises(QuerySyntaxError) as info:
        parse_pattern("A B #", lambda off: SourcePosition(3, 10 + off))
    assert info.value.position == SourcePosition(3, 14)


names = st.sampled_from(["A", "B", "C", "UP", "N1", "x y", "lower"])


def _label(name: str) -> Label:
    return Label(name)


leaf = st.one_of(
    names.map(_label),
    st.just(EmptyPattern()),
    st.sampled_from([Anchor(AnchorKind.PARTITION_START), Anchor(AnchorKind.PARTITION_END)]),
)


def _quantify(draw_inner: RowPattern, lo: int, span: int | None, greedy: bool) -> RowPattern:
    if isinstance(draw_inner, Anchor):
        return draw_inner
    return Quantified(draw_inner, lo, None if span is None else lo + span, greedy)


patterns = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=4).map(lambda xs: Concatenation(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alternation(tuple(xs))),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: Permutation(tuple(xs))),
        inner.map(Exclusion),
        st.builds(
            _quantify,
            inner,
            st.integers(0, 3),
            st.one_of(st.none(), st.integers(0, 3)),
            st.booleans(),
        ).filter(lambda q: not (isinstance(q, Quantified) and q.max == 0)),
    ),
    max_leaves=12,
)


@given(patterns)
def test_print_parse_round_trip(pattern: RowPattern) -> None:
    text = to_text(pattern)
    assert parse_pattern(text) == pattern, text
    assert from_json(to_json(pattern)) == pattern
    assert pickle.loads(pickle.dumps(pattern)) == pattern
    hash(pattern)
