"""parse(): the query model, golden JSON, round trips."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from dfs_cer import parse
from dfs_cer.pattern.ir import Concatenation, Exclusion, Label, Quantified
from dfs_cer.query.expr import (
    Aggregate,
    BinaryOp,
    Classifier,
    Column,
    Literal,
    MatchNumber,
    Navigation,
    NavKind,
    Semantics,
    Star,
)
from dfs_cer.query.model import (
    AfterMatchSkip,
    RowsPerMatch,
    SkipTo,
    SortItem,
    Window,
    WindowUnit,
)
from dfs_cer.query.root import Query
from tests.fixtures.queries import CORPUS, FULL, Q1

GOLDEN = Path(__file__).parent / "golden"


def test_q1_model() -> None:
    q = parse(Q1)
    mr = q.recognize
    assert q.table == "CRIMES"
    assert mr.order_by == (SortItem("date"),)
    assert mr.rows_per_match is RowsPerMatch.ALL_ROWS_SHOW_EMPTY
    assert mr.after_match_skip == AfterMatchSkip(SkipTo.NEXT_ROW)
    assert mr.window == Window("30", WindowUnit.MINUTE)
    n_star = Exclusion(Quantified(Label("N"), 0, None))
    assert mr.pattern == Concatenation((Label("R"), n_star, Label("B"), n_star, Label("M")))
    m = mr.definition("M")
    assert m is not None
    assert m.condition == BinaryOp(
        "AND",
        BinaryOp("=", Column("primary_type", "M"), Literal("MOTOR VEHICLE THEFT")),
        BinaryOp("=", Column("district", "M"), Column("district", "B")),
    )


def test_full_clause() -> None:
    q = parse(FULL)
    mr = q.recognize
    assert q.alias == "m"
    assert mr.partition_by == ("sym",)
    assert mr.order_by == (SortItem("ts", nulls_first=False), SortItem("seq", descending=True))
    assert mr.rows_per_match is RowsPerMatch.ALL_ROWS_OMIT_EMPTY
    assert mr.after_match_skip == AfterMatchSkip(SkipTo.FIRST, "B")
    assert mr.window == Window("1.5", WindowUnit.HOUR)
    assert [s.name for s in mr.subsets] == ["U", "V"]
    measures = {m.name: m.expr for m in mr.measures}
    assert measures["drop_"] == BinaryOp(
        "-",
        Navigation(NavKind.LAST, Column("price", "B"), 1, Semantics.FINAL),
        Navigation(NavKind.FIRST, Column("price", "A"), 0, Semantics.RUNNING),
    )
    assert measures["n"] == MatchNumber()
    assert measures["c"] == Classifier("U")
    assert measures["cnt"] == Aggregate("count", (Star("U"),))
    assert measures["total"] == Aggregate("count", (Star(None),))
    assert measures["av"] == Aggregate("avg", (Column("price", "B"),), semantics=Semantics.FINAL)
    assert measures["pp"] == Navigation(
        NavKind.PREV, Navigation(NavKind.LAST, Column("price", "B"), 1), 2
    )
    assert measures["nx"] == Navigation(NavKind.NEXT, Column("price", "A"), 1)
    assert measures["cls"] == Classifier()
    assert q.outer.select == ("m.sym", "m.n")
    assert q.outer.where == "m.n > 1"
    assert q.outer.order_by == ("m.sym DESC",)
    assert q.outer.limit == 10


@pytest.mark.parametrize(
    ("clause", "skip"),
    [
        ("AFTER MATCH SKIP PAST LAST ROW", AfterMatchSkip(SkipTo.PAST_LAST_ROW)),
        ("AFTER MATCH SKIP TO NEXT ROW", AfterMatchSkip(SkipTo.NEXT_ROW)),
        ("AFTER MATCH SKIP TO FIRST B", AfterMatchSkip(SkipTo.FIRST, "B")),
        ("AFTER MATCH SKIP TO LAST B", AfterMatchSkip(SkipTo.LAST, "B")),
        ("AFTER MATCH SKIP TO B", AfterMatchSkip(SkipTo.LAST, "B")),
        ("", AfterMatchSkip(SkipTo.PAST_LAST_ROW)),
    ],
)
def test_after_match_skip(clause: str, skip: AfterMatchSkip) -> None:
    q = parse(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {clause} PATTERN (A B) DEFINE A AS A.x > 0)"
    )
    assert q.recognize.after_match_skip == skip


@pytest.mark.parametrize(
    ("clause", "rows", "all_matches"),
    [
        ("ONE ROW PER MATCH", RowsPerMatch.ONE_ROW, False),
        ("ALL ROWS PER MATCH", RowsPerMatch.ALL_ROWS_SHOW_EMPTY, False),
        ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", RowsPerMatch.ALL_ROWS_SHOW_EMPTY, False),
        ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", RowsPerMatch.ALL_ROWS_OMIT_EMPTY, False),
        ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", RowsPerMatch.ALL_ROWS_WITH_UNMATCHED, False),
        ("ALL MATCHES", RowsPerMatch.ONE_ROW, True),
        ("ONE ROW PER MATCH ALL MATCHES", RowsPerMatch.ONE_ROW, True),
        ("", RowsPerMatch.ONE_ROW, False),
    ],
)
def test_rows_per_match(clause: str, rows: RowsPerMatch, all_matches: bool) -> None:
    q = parse(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts {clause} PATTERN (A B) DEFINE A AS A.x > 0)"
    )
    assert q.recognize.rows_per_match is rows
    assert q.recognize.all_matches is all_matches


@pytest.mark.parametrize(
    ("within", "window"),
    [
        ("WITHIN INTERVAL '30' MINUTE", Window("30", WindowUnit.MINUTE)),
        ("WITHIN '30' MINUTE", Window("30", WindowUnit.MINUTE)),
        ("WITHIN '30' MINUTES", Window("30", WindowUnit.MINUTE)),
        ("WITHIN INTERVAL '3' SECOND", Window("3", WindowUnit.SECOND)),
        ("WITHIN INTERVAL '0.5' SECOND", Window("0.5", WindowUnit.SECOND)),
        ("WITHIN '250' MILLISECOND", Window("250", WindowUnit.MILLISECOND)),
        ("WITHIN INTERVAL '2 HOUR'", Window("2", WindowUnit.HOUR)),
        ("WITHIN 1800", Window("1800", None)),
        ("WITHIN 30 MINUTE", Window("30", WindowUnit.MINUTE)),
        ("", None),
    ],
)
def test_within(within: str, window: Window | None) -> None:
    q = parse(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) {within} DEFINE A AS A.x > 0)"
    )
    assert q.recognize.window == window


def test_case_and_quoting() -> None:
    q = parse(
        'select * from "My Table" match_recognize (order by "Time" pattern (a "b") '
        'define a as a."Price" > 1, "b" as "b".price < a.price) as "M"'
    )
    assert q.table == "My Table"
    assert q.alias == "M"
    assert q.recognize.order_by[0].column == "Time"
    assert [d.variable for d in q.recognize.definitions] == ["A", "b"]
    assert q.recognize.definitions[0].condition == BinaryOp(">", Column("Price", "A"), Literal(1))
    assert parse(q.to_sql()) == q


def test_table_alias_before_match_recognize_is_accepted() -> None:
    q = parse(
        "SELECT * FROM db.events e MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS A.x > 0) m"
    )
    assert q.table == "db.events"
    assert q.alias == "m"


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_round_trips(name: str) -> None:
    q = parse(CORPUS[name])
    assert parse(q.to_sql()) == q, q.to_sql()
    assert Query.from_json(q.to_json()) == q
    assert pickle.loads(pickle.dumps(q)) == q
    assert hash(q) == hash(pickle.loads(pickle.dumps(q)))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_golden_json(name: str) -> None:
    """The model's JSON is a contract with storage nodes and executors: changes are deliberate.

    Regenerate with DFS_CER_REGEN_GOLDEN=1 after an intended model change, and review the diff.
    """
    path = GOLDEN / f"{name}.json"
    got = json.loads(parse(CORPUS[name]).to_json())
    if os.environ.get("DFS_CER_REGEN_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert path.exists(), f"missing golden file {path}; create it with DFS_CER_REGEN_GOLDEN=1"
    assert got == json.loads(path.read_text())
    assert Query.from_json(path.read_text()) == parse(CORPUS[name])
