"""Each option set is defined once (dfs_cer.options); settings, the CLI and the modules that
check a value agree with it, and the version has one literal (pyproject.toml)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import get_args, get_type_hints

import click
import pytest

import dfs_cer
from dfs_cer import options
from dfs_cer.cli.main import cli
from dfs_cer.config import MatcherConfig, QueryConfig, StrategyConfig
from dfs_cer.strategies import STRATEGIES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("config", "field", "values"),
    [
        (QueryConfig, "integer_time_unit", options.TIME_UNITS),
        (StrategyConfig, "default", options.STRATEGIES),
        (StrategyConfig, "cost_model", options.COST_MODELS),
        (StrategyConfig, "transfer_compression", options.COMPRESSIONS),
        (MatcherConfig, "on_limit", options.ON_LIMIT),
        (MatcherConfig, "kleene", options.KLEENE),
    ],
)
def test_settings_take_the_option_sets(config: type, field: str, values: tuple[str, ...]) -> None:
    assert get_args(get_type_hints(config)[field]) == values


def _choices(command: str, option: str) -> tuple[str, ...]:
    group = cli.commands[command]
    param = next(p for p in group.params if p.name == option)
    assert isinstance(param.type, click.Choice)
    return tuple(param.type.choices)


def test_cli_offers_the_option_sets() -> None:
    assert _choices("query", "strategy") == options.STRATEGIES
    assert _choices("query", "cost_model") == options.COST_MODELS
    assert _choices("query", "kleene") == options.KLEENE
    assert set(_choices("query", "selection")) < set(options.SELECTIONS)


def test_every_strategy_has_a_pull() -> None:
    assert tuple(STRATEGIES) == options.STRATEGIES


def test_version_is_pyproject_s() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert dfs_cer.__version__ == project["version"]
