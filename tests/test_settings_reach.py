"""Every ``query.*``, ``strategy.*`` and ``matcher.*`` setting reaches every front door the same
way: ``dfs-cer query`` (one query, several, a whole statement, a saved run, SITUATIONS) with
``--config`` files and ``DFS_CER__*`` variables, and the Python API with a ``Config``. A setting
whose effect shows in the answer is checked by the answer; the others (timeouts, compression,
cost model, ...) by the value reaching the session or request that uses it. Spark's doors are in
``tests/spark/test_settings.py``; the values are checked in one place, however a Config is built.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dfs_cer import match_recognize
from dfs_cer.cli.main import cli
from dfs_cer.config import (
    DEFAULT_CONFIG,
    Config,
    MatcherConfig,
    QueryConfig,
    StrategyConfig,
    load_config,
)
from dfs_cer.errors import ConfigError, DfsCerError
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies import pull
from dfs_cer.strategies.base import Session
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from dfs_cer.strategies.statements import pull_statement
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

#: three identical rows (A), two rows alike but for ``v`` (K), a pair two time units apart (C, D),
#: and a Kleene+ run (E F F G)
TABLE = pa.table(
    {
        "ts": pa.array([1, 1, 1, 5, 5, 100, 103, 200, 201, 202, 203], pa.int64()),
        "type": ["A", "A", "A", "K", "K", "C", "D", "E", "F", "F", "G"],
        "v": pa.array([1, 1, 1, 2, 3, 0, 0, 0, 0, 0, 0], pa.int64()),
        "id": pa.array([1, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8], pa.int64()),
    }
)


def clause(body: str, outer: str = "SELECT * FROM t") -> str:
    return f"{outer} MATCH_RECOGNIZE (ORDER BY ts {body})"


DUPLICATES = clause("MEASURES A.ts AS a ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.type = 'A'")
KEYED = clause("MEASURES K.v AS v ONE ROW PER MATCH PATTERN (K) DEFINE K AS K.type = 'K'")
UNIT = clause(
    "MEASURES C.ts AS c PATTERN (C D) WITHIN INTERVAL '2' SECOND "
    "DEFINE C AS C.type = 'C', D AS D.type = 'D'"
)
KLEENE = clause(
    "MEASURES E.ts AS e, count(F.*) AS n ALL MATCHES PATTERN (E F+ G) WITHIN 100 "
    "DEFINE E AS E.type = 'E', F AS F.type = 'F', G AS G.type = 'G'"
)
SITUATIONS = (
    "SELECT * FROM t SITUATIONS (ORDER BY ts DEFINE A AS type = 'A', B AS type = 'K' "
    "PATTERN (A meets B) WITHIN 100 MEASURES count(A.v) AS n)"
)

#: setting -> (its values, the query, the answer without them, the answer with them): a number
#: of rows, or words of the error
OUTCOMES: dict[str, tuple[dict[str, dict[str, Any]], str, object, object]] = {
    "query.dedup": ({"query": {"dedup": False}}, DUPLICATES, 1, 3),
    "query.event_key": ({"query": {"event_key": ["id"]}}, KEYED, 2, 1),
    "query.integer_time_unit": ({"query": {"integer_time_unit": "ms"}}, UNIT, 0, 1),
    "matcher.kleene": ({"matcher": {"kleene": "maximal"}}, KLEENE, 3, 1),
    "matcher.max_matches": ({"matcher": {"max_matches": 2}}, KLEENE, 3, "max_matches=2"),
    "matcher.on_limit": (
        {"matcher": {"max_matches": 2, "on_limit": "truncate"}},
        KLEENE,
        3,
        2,
    ),
    "matcher.max_steps": ({"matcher": {"max_steps": 1}}, KLEENE, 3, "matcher.max_steps = 1"),
}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("settings")
    pq.write_table(TABLE, root / "t.parquet")
    shard(str(root / "t.parquet"), 1, str(root / "nodes"), partitioning="time", time_column="ts")
    with LocalCluster([str(root / "nodes" / "node-00")]) as cluster:
        yield cluster


def env_of(values: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The settings as DFS_CER__SECTION__KEY variables."""
    return {
        f"DFS_CER__{section.upper()}__{key.upper()}": ",".join(map(str, value))
        if isinstance(value, list)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
        for section, keys in values.items()
        for key, value in keys.items()
    }


def toml_of(values: dict[str, dict[str, Any]]) -> str:
    return "".join(
        f"[{section}]\n" + "".join(f"{key} = {json.dumps(v)}\n" for key, v in keys.items())
        for section, keys in values.items()
    )


def cli_json(
    nodes: LocalCluster, args: list[str], env: dict[str, str], config: Path | None = None
) -> Any:
    """``dfs-cer query --format json`` against the nodes: the JSON, or the error line."""
    head = ["--config", str(config)] if config is not None else []
    result = CliRunner().invoke(
        cli,
        [
            *head,
            "query",
            "--endpoints",
            ",".join(nodes.endpoints),
            "--token-file",
            str(nodes.token_file),
            "--format",
            "json",
            *args,
        ],
        env=env,
    )
    if result.exit_code != 0:
        assert result.stderr.startswith("error: "), result.output
        return result.stderr
    return json.loads(result.stdout)


def answer(run: Callable[[], Any]) -> object:
    """Rows of the answer, or the error's text."""
    try:
        out = run()
    except DfsCerError as exc:
        return str(exc)
    return out if isinstance(out, int | str) else out.num_rows


# each front door: (nodes, query, settings as nested values, a scratch directory) -> answer
Door = Callable[[LocalCluster, str, dict[str, dict[str, Any]], Path], object]


def cli_env(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    out = cli_json(nodes, [sql], env_of(values))
    return out if isinstance(out, str) else len(out["matches"])


def cli_file(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    (tmp / "site.toml").write_text(toml_of(values))
    out = cli_json(nodes, [sql], {}, tmp / "site.toml")
    return out if isinstance(out, str) else len(out["matches"])


def cli_many(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    out = cli_json(nodes, [sql, DUPLICATES], env_of(values))
    return out if isinstance(out, str) else len(out["queries"][0]["matches"])


def cli_statement(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    """The clause over a CTE of the nodes' table: its rows pulled whole and matched here."""
    wrapped = sql.replace(
        "SELECT * FROM t MATCH", "WITH x AS (SELECT * FROM t) SELECT * FROM x MATCH"
    )
    out = cli_json(nodes, [wrapped], env_of(values))
    return out if isinstance(out, str) else len(out["matches"])


def cli_saved(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    out = cli_json(nodes, ["--save-run", "--runs-dir", str(tmp / "runs"), sql], env_of(values))
    return out if isinstance(out, str) else len(out["matches"])


def python_local(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    return answer(lambda: match_recognize(TABLE, sql, config=DEFAULT_CONFIG.with_values(values)))


def python_pull(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    config = DEFAULT_CONFIG.with_values(values)
    return answer(
        lambda: match_pulled(pull("dfs", sql, nodes.endpoints, nodes.token, config=config))
    )


def python_many(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    config = DEFAULT_CONFIG.with_values(values)
    return answer(
        lambda: match_pulled(
            pull_many(
                "dfs", [sql, DUPLICATES], nodes.endpoints, nodes.token, config=config
            ).results[0]
        )
    )


def python_statement(nodes: LocalCluster, sql: str, values: dict[str, Any], tmp: Path) -> object:
    config = DEFAULT_CONFIG.with_values(values)
    wrapped = sql.replace(
        "SELECT * FROM t MATCH", "WITH x AS (SELECT * FROM t) SELECT * FROM x MATCH"
    )
    return answer(
        lambda: (
            pull_statement(
                "dfs", parse_statement(wrapped), nodes.endpoints, nodes.token, config=config
            ).table
        )
    )


DOORS: dict[str, Door] = {
    "cli (DFS_CER__*)": cli_env,
    "cli (--config)": cli_file,
    "cli, several queries": cli_many,
    "cli, a statement": cli_statement,
    "cli --save-run": cli_saved,
    "match_recognize": python_local,
    "pull + match_pulled": python_pull,
    "pull_many": python_many,
    "pull_statement": python_statement,
}


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("setting", list(OUTCOMES))
def test_a_setting_changes_the_answer_at_every_door(
    nodes: LocalCluster, tmp_path: Path, setting: str, door: str
) -> None:
    values, sql, before, after = OUTCOMES[setting]
    run = DOORS[door]
    assert run(nodes, sql, {}, tmp_path) == before
    got = run(nodes, sql, values, tmp_path)
    if isinstance(after, str):
        assert isinstance(got, str) and after in got, got
    else:
        assert got == after


@pytest.mark.parametrize("door", ["cli", "pull_situations", "match_situations"])
def test_dedup_reaches_situation_queries(nodes: LocalCluster, door: str) -> None:
    """Nodes derive situations from rows without copies: with dedup off every row is pulled."""
    from dfs_cer import match_situations
    from dfs_cer.strategies.situations import pull_situations

    def n(dedup: bool) -> tuple[int, str | None]:
        if door == "match_situations":
            config = load_config(env={} if dedup else {"DFS_CER__QUERY__DEDUP": "false"})
            out = match_situations(TABLE, SITUATIONS, config=config)
            return out.column("n")[0].as_py(), None if dedup else "query.dedup is off"
        if door == "cli":
            out = cli_json(nodes, [SITUATIONS], {} if dedup else {"DFS_CER__QUERY__DEDUP": "false"})
            return out["matches"][0]["n"], out["trace"]["fallback"]
        config = DEFAULT_CONFIG.with_values({"query": {"dedup": dedup}})
        result = pull_situations(SITUATIONS, nodes.endpoints, nodes.token, config=config)
        return result.relation.column("n")[0].as_py(), result.trace.fallback

    assert n(True) == (1, None)
    count, fallback = n(False)
    assert count == 3 and "query.dedup is off" in (fallback or "")


#: setting -> (its value, what reads it where it is used: a session, its first client, or the
#: request the strategy was given)
USED: dict[str, tuple[object, Callable[[Any, Any], object]]] = {
    "strategy.call_timeout_seconds": (7.0, lambda s, r: s.call_timeout),
    "strategy.query_timeout_seconds": (
        250.0,
        lambda s, r: 250.0 if 240 < s.deadline - s.connected_at <= 250 else s.deadline,
    ),
    "strategy.close_timeout_seconds": (1.5, lambda s, r: s.close_timeout),
    "strategy.admission_wait_seconds": (12.0, lambda s, r: s.admission_wait),
    "strategy.transfer_compression": ("lz4", lambda s, r: s.clients[0].compression),
    "strategy.halo_limit": (17, lambda s, r: s.halo_limit),
    "strategy.cost_model": ("always_on", lambda s, r: r.options.cost_model),
    "strategy.calibration_file": ("elsewhere.json", lambda s, r: r.options.calibration_file),
    "strategy.default": ("push_down", lambda s, r: r.strategy),
}


class Spy:
    """Every session connected, and every (session, request) a strategy runs with."""

    def __init__(self) -> None:
        self.sessions: list[Session] = []
        self.runs: list[tuple[Session, Any]] = []


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    import importlib

    pull_module = importlib.import_module("dfs_cer.strategies.pull")

    out = Spy()
    init = Session.__init__

    def connected(self: Session, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.connected_at = time.monotonic()  # type: ignore[attr-defined]
        # close shortens the clients' timeouts: the one each call got, as connected
        self.call_timeout = self.clients[0].timeout  # type: ignore[attr-defined]
        out.sessions.append(self)

    monkeypatch.setattr(Session, "__init__", connected)
    for name, strategy in list(pull_module.STRATEGIES.items()):

        def run(session: Session, request: Any, strategy: Any = strategy) -> Any:
            out.runs.append((session, request))
            return strategy(session, request)

        monkeypatch.setitem(pull_module.STRATEGIES, name, run)
    return out


def _pull_door(door: str, nodes: LocalCluster, values: dict[str, dict[str, Any]]) -> None:
    config, env = DEFAULT_CONFIG.with_values(values), env_of(values)
    if door == "cli":
        out = cli_json(nodes, [DUPLICATES], env)
        assert not isinstance(out, str), out
    elif door == "cli, several queries":
        out = cli_json(nodes, [DUPLICATES, KEYED], env)
        assert not isinstance(out, str), out
    elif door == "pull":
        pull("dfs", DUPLICATES, nodes.endpoints, nodes.token, config=config)
    else:
        pull_many("dfs", [DUPLICATES, KEYED], nodes.endpoints, nodes.token, config=config)


PULL_DOORS = ["cli", "cli, several queries", "pull", "pull_many"]


@pytest.mark.parametrize(
    ("setting", "door"),
    [
        (setting, door)
        for setting in USED
        for door in PULL_DOORS
        # the Python API names its strategy: strategy.default is the command line's
        if setting != "strategy.default" or door.startswith("cli")
    ],
)
def test_a_setting_reaches_the_place_it_is_used(
    nodes: LocalCluster, spy: Spy, setting: str, door: str
) -> None:
    value, read = USED[setting]
    section, key = setting.split(".")
    _pull_door(door, nodes, {section: {key: value}})
    assert spy.runs and all(read(s, r) == value for s, r in spy.runs), [
        read(s, r) for s, r in spy.runs
    ]


def test_limits_reach_situation_queries(nodes: LocalCluster, spy: Spy) -> None:
    from dfs_cer.strategies.situations import pull_situations

    values = {"strategy": {"call_timeout_seconds": 7, "close_timeout_seconds": 1.5}}
    pull_situations(
        SITUATIONS, nodes.endpoints, nodes.token, config=DEFAULT_CONFIG.with_values(values)
    )
    cli_json(nodes, [SITUATIONS], env_of(values))
    assert [(s.call_timeout, s.close_timeout) for s in spy.sessions] == [(7.0, 1.5)] * 2  # type: ignore[attr-defined]


def test_the_outer_dialect_reaches_the_embedded_engine(
    nodes: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dfs_cer.local as local

    dialects: list[str] = []
    real = local.outer_sql

    def spy(query: Any, dialect: str) -> str | None:
        dialects.append(dialect)
        return real(query, dialect)

    monkeypatch.setattr(local, "outer_sql", spy)
    config = DEFAULT_CONFIG.with_values({"query": {"outer_dialect": "postgres"}})
    match_recognize(TABLE, DUPLICATES, config=config)
    match_pulled(pull("dfs", DUPLICATES, nodes.endpoints, nodes.token, config=config))
    assert not isinstance(
        cli_json(nodes, [DUPLICATES], {"DFS_CER__QUERY__OUTER_DIALECT": "postgres"}), str
    )
    assert dialects == ["postgres"] * 3


def test_the_outer_memory_limit_reaches_the_embedded_engine(
    nodes: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQL around the clause is computed within ``query.outer_memory_limit``, at each door."""
    import dfs_cer.outer as outer

    limits: list[int] = []
    real = outer.OuterEngine.__init__

    def spy(self: Any, config: Config, *args: Any, **kwargs: Any) -> None:
        limits.append(config.query.outer_memory_limit)
        real(self, config, *args, **kwargs)

    monkeypatch.setattr(outer.OuterEngine, "__init__", spy)
    values = {"query": {"outer_memory_limit": "64MiB"}}
    config = DEFAULT_CONFIG.with_values(values)
    ordered = DUPLICATES + " ORDER BY a"  # an outer query to compute
    match_recognize(TABLE, ordered, config=config)
    match_pulled(pull("dfs", ordered, nodes.endpoints, nodes.token, config=config))
    wrapped = ordered.replace(
        "SELECT * FROM t MATCH", "WITH x AS (SELECT * FROM t) SELECT * FROM x MATCH"
    )
    pull_statement("dfs", parse_statement(wrapped), nodes.endpoints, nodes.token, config=config)
    for sql in (ordered, wrapped, SITUATIONS):
        assert not isinstance(cli_json(nodes, [sql], env_of(values)), str)
    assert limits and set(limits) == {64 * 1024**2}, limits


def test_explicit_arguments_win_over_the_settings(nodes: LocalCluster) -> None:
    config = DEFAULT_CONFIG.with_values({"query": {"dedup": False}, "matcher": {"max_matches": 1}})
    result = pull(
        "dfs",
        DUPLICATES,
        nodes.endpoints,
        nodes.token,
        config=config,
        dedup=True,
        node_matching="off",
    )
    assert match_pulled(result, max_matches=5).num_rows == 1
    assert (
        match_recognize(TABLE, DUPLICATES, config=config, dedup=True, max_matches=5).num_rows == 1
    )
    out = cli_json(
        nodes, ["--strategy", "pull_all", DUPLICATES], {"DFS_CER__STRATEGY__DEFAULT": "dfs"}
    )
    assert out["trace"]["strategy"] == "pull_all"


def test_calibrate_reads_its_sample_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dfs_cer.calibrate

    asked: list[int] = []

    def calibrate(sizes: Any, sample_events: int, progress: Any) -> dict[str, Any]:
        asked.append(sample_events)
        return {"tables": {}, "beta": {}}

    monkeypatch.setattr(dfs_cer.calibrate, "calibrate", calibrate)
    out = tmp_path / "c.json"
    result = CliRunner().invoke(
        cli,
        ["calibrate", "--quick", "--out", str(out)],
        env={"DFS_CER__STRATEGY__BETA_SAMPLE_EVENTS": "77"},
    )
    assert result.exit_code == 0, result.output
    assert asked == [77]


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: MatcherConfig(max_steps=0), "conf key matcher.max_steps must be positive, got 0;"),
        (lambda: MatcherConfig(max_matches=-1), "conf key matcher.max_matches must be positive"),
        (
            lambda: MatcherConfig(max_seconds=float("inf")),
            "conf key matcher.max_seconds must be a positive, finite number",
        ),
        (
            lambda: load_config(env={"DFS_CER__MATCHER__MAX_SECONDS": "0"}),
            "conf key matcher.max_seconds must be a positive, finite number",
        ),
        (lambda: MatcherConfig(kleene="most"), "conf key matcher.kleene must be one of all"),  # type: ignore[arg-type]
        (lambda: MatcherConfig(max_steps=2.5), "conf key matcher.max_steps must be an integer"),  # type: ignore[arg-type]
        (
            lambda: StrategyConfig(call_timeout_seconds=0),
            "strategy.call_timeout_seconds must be a positive number of seconds, at most",
        ),
        (
            # past threading's TIMEOUT_MAX the outer query's deadline timer failed in its thread
            lambda: load_config(env={"DFS_CER__STRATEGY__QUERY_TIMEOUT_SECONDS": "1e300"}),
            "strategy.query_timeout_seconds must be a positive number of seconds, at most "
            "10,000,000 (about 116 days), got 1e+300",
        ),
        (
            lambda: StrategyConfig(halo_limit=10_001),
            "conf key strategy.halo_limit must be in 0..10000",
        ),
        (
            lambda: StrategyConfig(beta_sample_events=0),
            "strategy.beta_sample_events must be positive",
        ),
        (
            lambda: QueryConfig(integer_time_unit="h"),  # type: ignore[arg-type]
            "conf key query.integer_time_unit must be one of",
        ),
        (lambda: QueryConfig(outer_dialect="nosql"), "conf key query.outer_dialect must be a SQL"),
        (lambda: QueryConfig(dedup="perhaps"), "conf key query.dedup must be true or false"),  # type: ignore[arg-type]
        (lambda: Config(matcher=QueryConfig()), "config section matcher must be a MatcherConfig"),  # type: ignore[arg-type]
        (
            lambda: dataclasses_replace(MatcherConfig(), max_steps=0),
            "conf key matcher.max_steps must be positive",
        ),
        (
            lambda: DEFAULT_CONFIG.with_values({"matcher": {"max_step": 5}}),
            "unknown conf key matcher.max_step in the arguments",
        ),
        (
            lambda: match_recognize(TABLE, DUPLICATES, max_matches=0),
            "conf key matcher.max_matches must be positive",
        ),
        (
            lambda: load_config(env={"DFS_CER__MATCHER__MAX_STEPS": "0"}),
            "conf key matcher.max_steps must be positive, got 0;",
        ),
    ],
)
def test_values_are_checked_however_a_config_is_built(
    build: Callable[[], object], words: str
) -> None:
    """One check, whatever the way in: a constructor, a copy, a file or the environment, an
    argument; the message names the key, the value and what to do."""
    with pytest.raises(ConfigError) as info:
        build()
    assert words in str(info.value)


def test_python_values_are_normalised_as_the_loader_does() -> None:
    config = Config(
        query=QueryConfig(event_key=["a", " b"], dedup=False),  # type: ignore[arg-type]
        strategy=StrategyConfig(call_timeout_seconds=5),
    )
    assert config.query.event_key == ("a", "b") and config.strategy.call_timeout_seconds == 5.0
    assert config == load_config(
        env={
            "DFS_CER__QUERY__EVENT_KEY": "a,b",
            "DFS_CER__QUERY__DEDUP": "false",
            "DFS_CER__STRATEGY__CALL_TIMEOUT_SECONDS": "5",
        }
    )


def dataclasses_replace(value: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(value, **changes)
