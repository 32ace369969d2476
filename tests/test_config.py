from __future__ import annotations

import dataclasses
import pickle
import tomllib
from pathlib import Path

import pytest

from dfs_cer.config import DEFAULT_CONFIG, Config, load_config, parse_size
from dfs_cer.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_default_toml_equals_builtin_defaults() -> None:
    from_file = load_config((ROOT / "conf" / "default.toml",), env={})
    assert from_file == DEFAULT_CONFIG == Config()
    # every key in the file is documented there and known to the code
    raw = tomllib.loads((ROOT / "conf" / "default.toml").read_text())
    assert set(raw) == set(DEFAULT_CONFIG.to_dict())
    for section, values in DEFAULT_CONFIG.to_dict().items():
        assert set(raw[section]) == set(values), section


def test_environment_overrides() -> None:
    config = load_config(
        env={
            "DFS_CER__STORAGE__MEMORY_BUDGET": "1GiB",
            "DFS_CER__STORAGE__PORT": "9000",
            "DFS_CER__MATCHER__ON_LIMIT": "truncate",
            "DFS_CER__QUERY__INTEGER_TIME_UNIT": "ms",
            "UNRELATED": "x",
        }
    )
    assert config.storage.memory_budget == 1024**3
    assert config.storage.port == 9000
    assert config.matcher.on_limit == "truncate"
    assert config.query.integer_time_unit == "ms"


def test_file_then_environment(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        '[storage]\nport = 7000\nmemory-budget = "512MB"\n[strategy]\ndefault = "push_down"\n'
    )
    config = load_config((path,), env={"DFS_CER__STORAGE__PORT": "7001"})
    assert config.storage.port == 7001
    assert config.storage.memory_budget == 512 * 1000**2
    assert config.strategy.default == "push_down"
    config = load_config(env={"DFS_CER_CONFIG": str(path)})
    assert config.storage.port == 7000


def test_frozen_and_picklable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_CONFIG.storage.port = 1  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(DEFAULT_CONFIG)) == DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DFS_CER__STORAGE__PORT": "abc"}, "conf key storage.port must be an integer, got 'abc'"),
        (
            {"DFS_CER__STORAGE__PORT": "70000"},
            "conf key storage.port must be in 1..65535, got 70000",
        ),
        (
            {"DFS_CER__STORAGE__MEMORY_BUDGET": "lots"},
            "conf key storage.memory_budget must be a size such as 2GiB",
        ),
        (
            {"DFS_CER__STRATEGY__DEFAULT": "fastest"},
            "conf key strategy.default must be one of pull_all, push_down",
        ),
        (
            {"DFS_CER__STRATEGY__CALL_TIMEOUT_SECONDS": "0"},
            "strategy.call_timeout_seconds must be a positive number of seconds, at most",
        ),
        (
            {"DFS_CER__STRATEGY__QUERY_TIMEOUT_SECONDS": "inf"},
            "query_timeout_seconds must be a positive number of seconds",
        ),
        (
            {"DFS_CER__MATCHER__ON_LIMIT": "ignore"},
            "conf key matcher.on_limit must be one of error, truncate",
        ),
        ({"DFS_CER__STRATEGY__COST_MODEL": "magic"}, "must be one of adaptive, always_on"),
        ({"DFS_CER__NOPE__X": "1"}, "unknown config section [nope]"),
        ({"DFS_CER__STORAGE__NOPE": "1"}, "unknown conf key storage.nope"),
        ({"DFS_CER__STORAGE": "1"}, "must look like DFS_CER__SECTION__KEY"),
        ({"DFS_CER__MATCHER__MAX_MATCHES": "0"}, "conf key matcher.max_matches must be positive"),
        (
            {"DFS_CER__STRATEGY__HALO_LIMIT": "10001"},
            "conf key strategy.halo_limit must be in 0..10000",
        ),
        ({"DFS_CER__STORAGE__HALO_LIMIT": "-1"}, "conf key storage.halo_limit must be in 0..10000"),
        ({"DFS_CER__STORAGE__PORT": "1.5"}, "conf key storage.port must be an integer, got '1.5'"),
    ],
)
def test_bad_values_name_key_and_value(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env=env)
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config((tmp_path / "missing.toml",), env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[storage\nport = 1")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config((bad,), env={})
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("storage = 3")
    with pytest.raises(ConfigError, match=r"config section \[storage\] .* must be a table"):
        load_config((wrong,), env={})


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2GiB", 2 * 1024**3),
        ("512 MB", 512 * 10**6),
        ("1048576", 1048576),
        (4096, 4096),
        ("1.5KiB", 1536),
    ],
)
def test_parse_size(text: str | int, size: int) -> None:
    assert parse_size(text) == size


def test_every_setting_is_read_by_the_code() -> None:
    """No dead settings: each key is read (as ``.key``) somewhere outside dfs_cer/config.py."""
    sources = [
        p
        for d in ("dfs_cer", "storage_node", "spark_jobs")
        for p in (ROOT / d).rglob("*.py")
        if p.name != "config.py"
    ]
    text = "\n".join(p.read_text() for p in sources)
    unread = [
        f"{section}.{key}"
        for section, values in DEFAULT_CONFIG.to_dict().items()
        for key in values
        if f".{key}" not in text
    ]
    assert unread == []
