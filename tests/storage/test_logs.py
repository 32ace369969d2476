"""Node-side logging: quiet by default, the query id on every line, a call's error logged once
at the level its kind deserves."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pyarrow.flight as flight
import pytest

from dfs_cer.errors import CacheMissError
from dfs_cer.logs import DEFAULT_LEVEL, configure, current_query_id, query_scope, set_query_id
from storage_node.logs import logged_call


@pytest.fixture
def debug_logs() -> Iterator[None]:
    configure("DEBUG")
    yield
    configure(DEFAULT_LEVEL)


def test_quiet_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    configure()
    logging.getLogger("storage_node.test").info("not shown")
    logging.getLogger("storage_node.test").warning("shown")
    err = capsys.readouterr().err
    assert "not shown" not in err and "WARNING storage_node.test [query -] shown" in err


def test_every_line_names_its_query(capsys: pytest.CaptureFixture[str], debug_logs: None) -> None:
    logger = logging.getLogger("storage_node.test")
    with query_scope():
        logger.debug("before the request is read")
        set_query_id("q-7")
        logger.info("after")
        assert current_query_id() == "q-7"
    assert current_query_id() == "-"
    lines = capsys.readouterr().err.splitlines()
    assert "[query -] before the request is read" in lines[0]
    assert "INFO storage_node.test [query q-7] after" in lines[1]


def test_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="log level must be one of DEBUG"):
        configure("LOUD")


class _Node:
    @logged_call("action")
    def do_action(self, context: Any, action: Any) -> str:
        set_query_id("q-1")
        if action.type == "routine":
            raise flight.FlightServerError("CacheMissError: gone") from CacheMissError("gone")
        if action.type == "bug":
            try:
                raise KeyError("x")
            except KeyError as exc:
                raise flight.FlightInternalError("storage node error: KeyError: 'x'") from exc
        if action.type == "bad":
            raise flight.FlightServerError("QueryValidationError: no such column")
        return "ok"


@pytest.mark.parametrize(
    ("kind", "level", "traceback"),
    [
        ("routine", "INFO", False),
        ("bad", "WARNING", False),
        ("bug", "ERROR", True),
    ],
)
def test_a_failed_call_is_logged_once(
    capsys: pytest.CaptureFixture[str], debug_logs: None, kind: str, level: str, traceback: bool
) -> None:
    with pytest.raises(flight.FlightError):
        _Node().do_action(None, SimpleNamespace(type=kind))
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if "failed" in line]
    assert len(failed) == 1 and f"{level} storage_node.calls [query q-1] {kind} failed" in failed[0]
    assert ("Traceback" in err) is traceback


def test_a_call_logs_start_and_end_at_debug(
    capsys: pytest.CaptureFixture[str], debug_logs: None
) -> None:
    assert _Node().do_action(None, SimpleNamespace(type="health")) == "ok"
    lines = capsys.readouterr().err.splitlines()
    assert "[query -] health from ?" in lines[0]
    assert "[query q-1] health done in" in lines[1]
    assert current_query_id() == "-"
