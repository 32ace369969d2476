"""The engines' parts driven on their own: the row-pattern VM over label strings (its state
positional, as the engine calls it) and the CER engine's shared context."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import parse
from dfs_cer.match.cer.context import Context
from dfs_cer.match.cer.pattern import Item
from dfs_cer.match.rowpattern import vm
from dfs_cer.match.rowpattern.compiler import compile_pattern
from dfs_cer.match.rowpattern.conditions import compile_conditions, shifted
from dfs_cer.match.rowpattern.dominance import dominance
from dfs_cer.match.rowpattern.engine import match_starts, pattern_labels
from dfs_cer.work import Work


def vm_run(
    text: str, pattern: str, skip_mode: int = vm.SKIP_PAST_LAST, max_matches: int = 1000
) -> tuple[int, list[tuple[int, int]], str]:
    """Run the VM over one partition whose row i is labelled ``text[i]`` (label X matches rows
    written X): status, matches (start, exclusive end) and the labels of their rows."""
    variables = sorted({c for c in pattern if c.isupper()})
    define = ", ".join(f"{v} AS lab = '{v}'" for v in variables)
    mr = parse(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES 1 AS one ONE ROW PER MATCH "
        f"PATTERN ({pattern}) DEFINE {define})"
    ).recognize
    n = len(text)
    table = pa.table({"ts": np.arange(n, dtype=np.int64), "lab": list(text)})
    labels = pattern_labels(mr.pattern)
    program = compile_pattern(mr.pattern, labels)
    c = compile_conditions(mr, labels, table, np.zeros(n, np.int64), np.full(n, n, np.int64), None)
    bounds = np.array([0, n], np.int64)
    # no idle-row skipping: no label is free (next_true is then never read)
    free = np.zeros(len(labels), bool)
    next_true = np.full((len(labels), n + 1), n, np.int64)
    out = vm.run(
        program.op.astype(np.int64),
        program.a.astype(np.int64),
        program.b.astype(np.int64),
        c.masks,
        c.dependent,
        c.code,
        c.code_start,
        c.const_i,
        c.const_f,
        c.const_kind,
        c.icols,
        c.inull,
        c.fcols,
        c.fnull,
        c.members,
        c.relevant,
        c.deep_navigation,
        c.accumulators,
        dominance(c),
        np.zeros(n, np.int64),
        np.zeros(n, np.int64),
        -1,
        bounds,
        np.array([[0, n]], np.int64),
        skip_mode,
        -1,
        max_matches,
        match_starts(mr.pattern, labels, c.masks, n, bounds),
        free,
        next_true,
        np.zeros(vm.STOP_SIZE, np.int64),
        False,
        False,
    )
    status, m_start, m_end, _, _, _, r_label, _, _ = out
    return (
        status,
        list(zip(m_start.tolist(), m_end.tolist(), strict=True)),
        "".join(labels[v] for v in r_label.tolist()),
    )


@pytest.mark.parametrize(
    ("text", "pattern", "spans", "rows"),
    [
        ("ABBBCD", "A B+ C", [(0, 5)], "ABBBC"),
        ("ABBBCD", "A B+? C", [(0, 5)], "ABBBC"),
        ("ABCABC", "A B C", [(0, 3), (3, 6)], "ABCABC"),
        ("AAAB", "(A | A A)* B", [(0, 4)], "AAAB"),
        ("AAAA", "(A+)+ $", [(0, 4)], "AAAA"),
        ("AAAA", "(A+)+ B", [], ""),
    ],
)
def test_vm_over_label_strings(
    text: str, pattern: str, spans: list[tuple[int, int]], rows: str
) -> None:
    status, matches, labels = vm_run(text, pattern)
    assert status == vm.OK and matches == spans and labels == rows


def test_vm_status_codes() -> None:
    assert vm_run("ABAB", "A B", max_matches=1)[0] == vm.LIMIT_REACHED
    assert vm_run("ABAB", "A B", skip_mode=vm.SKIP_NEXT_ROW)[1] == [(0, 2), (2, 4)]


def test_cer_context_charges_the_partial_matches_it_holds() -> None:
    work = Work("q")
    ctx = Context(
        pa.table({}),
        np.zeros(0, np.int64),
        np.zeros(1, np.int64),
        np.zeros(0, np.int64),
        [Item("A", False), Item("B", True)],
        None,
        1,
        False,
        work,
    )
    assert ctx.kleene == {"B"} and ctx.index == {"A": 0, "B": 1} and not ctx.negated
    ctx.hold(1000)
    assert work.charged == 1000
    ctx.hold(400)  # in place of what was held
    assert work.charged == 400
    ctx.hold(0)
    assert work.charged == 0


def test_first_of_a_single_event_is_no_condition_over_a_kleene_set() -> None:
    """``B.v > FIRST(A.v)`` (A one event) filters B's events one by one; ``B.v > PREV(B.v)`` and
    ``B.v > FIRST(B.v)`` relate B's events (a condition over the set)."""
    from dfs_cer.match.cer.kleene import KleeneSets
    from dfs_cer.query.expr import conjuncts

    def parse_expression(text: str) -> Any:
        sql = (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ALL MATCHES "
            f"PATTERN (A B+ C) DEFINE B AS {text})"
        )
        d = parse(sql).recognize.definition("B")
        assert d is not None
        return conjuncts(d.condition)[0]

    ctx = Context(
        pa.table({}),
        np.zeros(0, np.int64),
        np.zeros(1, np.int64),
        np.zeros(0, np.int64),
        [Item("A", False), Item("B", True), Item("C", False)],
        None,
        1,
        False,
        None,
    )
    sets = KleeneSets(ctx, "skip_till_any_match", "all")
    single = [parse_expression(x) for x in ("B.v > FIRST(A.v) + 1", "B.v < LAST(A.v)")]
    over_set = [parse_expression(x) for x in ("B.v > PREV(B.v)", "B.v > FIRST(B.v)")]
    assert sets.set_conditions({"B": single}) == []
    assert [p for _, p in sets.set_conditions({"B": over_set})] == over_set


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=30),
    st.lists(st.integers(1, 6), min_size=1, max_size=8),
    st.integers(-8, 8),
    st.sampled_from([pa.int64(), pa.int8(), pa.float64(), pa.string()]),
)
def test_a_column_shifted_within_partitions_is_the_row_offset_rows_away(
    ints: list[int | None], sizes: list[int], offset: int, kind: pa.DataType
) -> None:
    """PREV/NEXT columns: NULL where the row offset rows away leaves the partition or is NULL,
    for numbers (moved in numpy) and other types alike; int64 values stay exact."""
    n = len(ints)
    values: list[object] = list(ints)
    if pa.types.is_int8(kind):
        values = [None if v is None else v % 100 for v in ints]
    elif pa.types.is_floating(kind):
        values = [None if v is None else float(v % 1000) / 8 for v in ints]
    elif pa.types.is_string(kind):
        values = [None if v is None else str(v) for v in ints]
    bounds = np.minimum(np.cumsum([0, *sizes]), n)
    bounds[-1] = n
    part = np.searchsorted(bounds, np.arange(n), side="right") - 1
    start, end = bounds[part], bounds[part + 1]
    got = shifted(pa.array(values, kind), offset, start, end)
    want = [values[i + offset] if start[i] <= i + offset < end[i] else None for i in range(n)]
    assert got.type == kind and got.to_pylist() == want
