"""``--log-level`` on the ``dfs-cer`` root group and on ``storage-node serve``: quiet by default,
the output on stdout unchanged by it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from dfs_cer.cli.main import cli
from dfs_cer.logs import DEFAULT_LEVEL, configure
from storage_node.server import main as serve_main

SQL = "SELECT * FROM e MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS A.x > 1)"


@pytest.fixture(autouse=True)
def quiet_again() -> Iterator[None]:
    yield
    configure(DEFAULT_LEVEL)


def test_default_is_warning_and_the_output_does_not_change() -> None:
    quiet = CliRunner().invoke(cli, ["format", SQL])
    assert quiet.exit_code == 0 and logging.getLogger("dfs_cer").level == logging.WARNING
    loud = CliRunner().invoke(cli, ["--log-level", "debug", "format", SQL])
    assert loud.exit_code == 0 and loud.stdout == quiet.stdout
    assert logging.getLogger("storage_node").level == logging.DEBUG


def test_an_unknown_level_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["--log-level", "loud", "format", SQL])
    assert result.exit_code == 2 and "'loud' is not one of" in result.output


def test_storage_node_serve_takes_a_level(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        serve_main(["--help"])
    assert exit_.value.code == 0 and "--log-level" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        serve_main(["--data", "x", "--token-file", "t", "--log-level", "loud"])
    assert exit_.value.code == 2 and "invalid choice: 'LOUD'" in capsys.readouterr().err
