"""Calendar windows: ``WITHIN INTERVAL 'n' MONTH | YEAR`` ends a match at its first row's time
plus n calendar months (January 31 plus a month is February's last day), in the local engine and
through storage nodes under every strategy (their time ranges use the longest span, 31 days a
month: a superset)."""

from __future__ import annotations

import calendar
import datetime as dt
import warnings
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer import match_recognize
from dfs_cer.errors import DfsCerError
from dfs_cer.events.calendar import add_months
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

EPOCH = dt.datetime(1970, 1, 1)


def plus_months(t: dt.datetime, months: int) -> dt.datetime:
    """SQL's timestamp + INTERVAL 'months' MONTH, written with the calendar module."""
    index = t.year * 12 + t.month - 1 + months
    year, month = divmod(index, 12)
    day = min(t.day, calendar.monthrange(year, month + 1)[1])
    return t.replace(year=year, month=month + 1, day=day)


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.integers(-40, 40),
    st.sampled_from(["s", "ms", "us"]),
)
def test_months_are_added_as_sql_adds_a_month_interval(
    t: dt.datetime, months: int, unit: str
) -> None:
    step = {"s": 10**6, "ms": 1000, "us": 1}[unit]  # microseconds per unit
    t = t.replace(microsecond=t.microsecond // step * step)
    value = (t - EPOCH) // dt.timedelta(microseconds=step)
    got = int(add_months(np.array([value], np.int64), unit, months)[0])
    want = (plus_months(t, months) - EPOCH) // dt.timedelta(microseconds=step)
    assert got == want


def test_days_and_the_edges_of_the_int64_range() -> None:
    jan31 = (dt.date(2024, 1, 31) - dt.date(1970, 1, 1)).days
    assert add_months(np.array([jan31]), "days", 1)[0] == jan31 + 29  # 2024-02-29
    near_end = np.array([np.iinfo(np.int64).max - 10], np.int64)
    assert add_months(near_end, "ns", 1)[0] == np.iinfo(np.int64).max  # saturates
    # the day holding int64's least instants starts below it: its time of day was computed
    # from a wrapped start (a month on from there was 292 million years on, a match found)
    least = np.iinfo(np.int64).min
    for unit in ("s", "ms", "us", "ns"):
        at = np.array([least, least + 1, least + 10**7], np.int64)
        on = add_months(at, unit, 1)
        assert (
            (on - at) // (86_400 * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]) <= 31
        ).all()
        assert (on > at).all()
        assert (add_months(at[:2], unit, -1) == least).all()  # saturates at the bottom


def events(seed: int, n: int = 600) -> pa.Table:
    """Events over two years in three partitions, a few a week in each."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2023-01-01T00:00:00", "ms").astype(np.int64)
    ts = np.sort(start + rng.integers(0, 730 * 86_400_000, n))
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("ms")),
            "type": rng.choice(["A", "B", "N"], n),
            "k": rng.integers(0, 3, n),
        }
    )


SQL = (
    "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a_ts, "
    "LAST(X.ts) AS x_ts, count(*) AS n ONE ROW PER MATCH PATTERN (A X+) WITHIN INTERVAL "
    "'{n}' {unit} DEFINE A AS type = 'A', X AS TRUE)"
)


def reference(table: pa.Table, months: int) -> list[tuple[int, dt.datetime, dt.datetime, int]]:
    """``A X+`` (X any row) under SKIP PAST LAST ROW, by hand: from each A not inside an earlier
    match, every row up to its time plus ``months`` calendar months."""
    out = []
    for k in sorted(set(table.column("k").to_pylist())):
        rows = [r for r in table.to_pylist() if r["k"] == k]
        i = 0
        while i < len(rows):
            end = plus_months(rows[i]["ts"], months)
            last = i
            while last + 1 < len(rows) and rows[last + 1]["ts"] <= end:
                last += 1
            if rows[i]["type"] != "A" or last == i:
                i += 1
                continue
            out.append((k, rows[i]["ts"], rows[last]["ts"], last - i + 1))
            i = last + 1
    return sorted(out)


def got_rows(table: pa.Table) -> list[tuple[int, dt.datetime, dt.datetime, int]]:
    return sorted((r["k"], r["a_ts"], r["x_ts"], r["n"]) for r in table.to_pylist())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_local_engine_ends_a_match_a_calendar_month_on(seed: int) -> None:
    table = events(seed)
    monthly = got_rows(match_recognize(table, SQL.format(n=1, unit="MONTH")))
    assert monthly == reference(table, 1)
    yearly = got_rows(match_recognize(table, SQL.format(n=1, unit="YEAR")))
    assert yearly == got_rows(match_recognize(table, SQL.format(n=12, unit="MONTH")))
    assert yearly == reference(table, 12)
    # the data tells a calendar month from any number of days (else this would prove nothing)
    for days in (28, 29, 30, 31):
        assert got_rows(match_recognize(table, SQL.format(n=days, unit="DAY"))) != monthly


def test_a_calendar_window_is_refused_under_a_cer_selection() -> None:
    with pytest.raises(DfsCerError, match="give the window in days"):
        match_recognize(events(1), SQL.format(n=1, unit="MONTH"), selection="skip_till_any_match")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, pa.Table]]:
    root = tmp_path_factory.mktemp("calendar")
    table = events(7, 600)
    pq.write_table(table, root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), batch_rows=150)
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as c:
        yield c, table


@pytest.mark.flight
def test_every_strategy_returns_the_local_engine_s_matches(
    cluster: tuple[LocalCluster, pa.Table],
) -> None:
    nodes, table = cluster
    for n, unit in ((1, "MONTH"), (2, "MONTH"), (1, "YEAR")):
        sql = SQL.format(n=n, unit=unit)
        want = got_rows(match_recognize(table, sql))
        assert want == reference(table, n * (12 if unit == "YEAR" else 1))
        for strategy in STRATEGIES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = match_pulled(pull(strategy, sql, nodes.endpoints, nodes.token))
            assert got_rows(got) == want, (strategy, n, unit)


@pytest.mark.flight
def test_push_pull_filters_under_a_calendar_window(cluster: tuple[LocalCluster, pa.Table]) -> None:
    """push_pull's node-side filter runs the CER engine, which takes no calendar window: it
    filters with the window's longest span in days (it refused the query before, where every
    other strategy answered)."""
    nodes, table = cluster
    sql = (
        "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a_ts, "
        "B.ts AS x_ts, B.k AS n ONE ROW PER MATCH PATTERN (A N*? B) WITHIN INTERVAL '1' "
        "MONTH DEFINE A AS type = 'A', B AS type = 'B')"
    )
    want = got_rows(match_recognize(table, sql))
    assert want
    result = pull("push_pull", sql, nodes.endpoints, nodes.token, cost_model="always_on")
    assert result.trace.fallback is None
    assert got_rows(match_pulled(result)) == want
