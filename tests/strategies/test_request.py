"""A pull is a value: PullRequest is immutable, refining it returns a new request, and building
one checks what ``pull`` checks, in the same order."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

import pytest

from dfs_cer.config import StrategyConfig, load_config
from dfs_cer.errors import ConfigError, DfsCerError
from dfs_cer.query import parse
from dfs_cer.strategies.options import PullOptions
from dfs_cer.strategies.pull import STRATEGIES, pull
from dfs_cer.strategies.request import PullRequest

SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL MATCHES PATTERN (A B) WITHIN INTERVAL '1' "
    "MINUTE DEFINE A AS A.x > 1, B AS B.x < 0)"
)


def request() -> PullRequest:
    return PullRequest.of(
        "dfs",
        SQL,
        ["127.0.0.1:1", "127.0.0.1:2"],
        "secret-token",
        integer_time_unit="ms",
        event_key=["id"],
        time_ranges=[(1, 2)],
        passes=3,
    )


def test_of_builds_what_pull_is_asked() -> None:
    r = request()
    assert (
        r.strategy == "dfs"
        and r.query == parse(SQL)
        and r.endpoints == ("127.0.0.1:1", "127.0.0.1:2")
    )
    assert r.integer_time_unit == "ms" and r.event_key == ("id",) and r.time_ranges == ((1, 2),)
    # the settings in force: the file and environment's (the defaults here), the arguments winning
    assert r.config == load_config() and r.settings == StrategyConfig()
    assert (
        r.options == PullOptions(passes=3, calibration_file=r.config.strategy.calibration_file)
        and r.dedup == r.config.query.dedup
    )
    assert "secret-token" not in repr(r)


def test_a_request_is_immutable() -> None:
    r = request()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.strategy = "pull_all"  # type: ignore[misc]
    hash(r.query)  # the query is a frozen value too


def test_refining_returns_a_new_request() -> None:
    r = request()
    other = parse(SQL.replace("'1' MINUTE", "'2' MINUTE"))
    refined = (
        r.with_options(target_fpr=0.1).with_query(other).with_time_ranges(None).with_snapshot(7)
    )
    assert refined is not r and r == request()  # the original is unchanged
    assert refined.options == replace(r.options, target_fpr=0.1) and refined.query == other
    assert refined.time_ranges is None and refined.snapshot == 7
    assert r.update(strategy="pull_all", defer=True).strategy == "pull_all" and r.strategy == "dfs"
    with pytest.raises(ConfigError, match="unknown pull request field bogus"):
        r.update(bogus=1)
    with pytest.raises(ConfigError, match="unknown pull option"):
        r.with_options(passess=2)
    with pytest.raises(ConfigError, match="passes must be 1 to 16"):
        r.with_options(passes=0)


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        (("nope", "not sql"), {"timeout": -1}, "strategy must be one of"),
        (("dfs", "not sql"), {"timeout": -1, "passes": 0}, "passes must be 1 to 16"),
        (("dfs", "not sql"), {"timeout": -1}, "query timeout must be a positive"),
        (
            ("dfs", "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x > 1)"),
            {},
            "ORDER BY",
        ),
    ],
)
def test_of_and_pull_check_in_the_same_order(
    args: tuple[str, str], options: dict[str, Any], message: str
) -> None:
    for build in (PullRequest.of, pull):
        with pytest.raises(DfsCerError, match=message):
            build(*args, ["127.0.0.1:1"], "t", **options)


def test_every_strategy_takes_a_request() -> None:
    import inspect

    for name, strategy in STRATEGIES.items():
        assert list(inspect.signature(strategy).parameters)[:2] == ["session", "request"], name
