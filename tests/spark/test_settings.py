"""Settings reach Spark's doors as they reach the others (``tests/test_settings_reach.py``):
``recognize`` with a ``Config`` (storage nodes, and parquet matched on the executors), the
``dfs_cer`` data source (a ``config`` file, settings as options by their dotted names, the
driver's environment), and ``dfs-cer query --engine spark``. Executors never read their own
settings: the driver's travel with the query."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dfs_cer.config import DEFAULT_CONFIG
from dfs_cer.errors import DfsCerError
from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster
from tests.test_settings_reach import OUTCOMES, TABLE, toml_of

pytestmark = [pytest.mark.spark, pytest.mark.flight]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from dfs_cer.spark import local_session

    yield local_session(2)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    root = tmp_path_factory.mktemp("spark-settings")
    pq.write_table(TABLE, root / "t.parquet")
    shard(str(root / "t.parquet"), 1, str(root / "nodes"))
    with LocalCluster([str(root / "nodes" / "node-00")]) as cluster:
        yield cluster, root / "t.parquet"


def _answer(run: Any) -> object:
    try:
        return run().count()
    except DfsCerError as exc:
        return str(exc)
    except Exception as exc:  # an executor's error, as Spark raises it
        return str(exc)


def _check(got: object, want: object) -> None:
    if isinstance(want, str):
        assert isinstance(got, str) and want in got, got
    else:
        assert got == want


@pytest.mark.parametrize("where", ["endpoints", "data"])
@pytest.mark.parametrize("setting", list(OUTCOMES))
def test_recognize_takes_a_config(
    spark: Any, served: tuple[LocalCluster, Path], setting: str, where: str
) -> None:
    """``data``: matched on the executors (driver_threshold 0), the settings with the query."""
    from dfs_cer.spark import recognize

    cluster, path = served
    values, sql, before, after = OUTCOMES[setting]
    place: dict[str, Any] = (
        {"endpoints": cluster.endpoints, "token": cluster.token}
        if where == "endpoints"
        else {"data": str(path), "driver_threshold": 0, "tasks": 2}
    )
    for config, want in ((DEFAULT_CONFIG, before), (DEFAULT_CONFIG.with_values(values), after)):
        _check(_answer(lambda c=config: recognize(spark, sql, config=c, **place).matches), want)


def test_truncation_matches_in_one_run(spark: Any, served: tuple[LocalCluster, Path]) -> None:
    """The first max_matches matches are those of one run over every row: one chunk."""
    from dfs_cer.spark import recognize

    values, sql, _, after = OUTCOMES["matcher.on_limit"]
    run = recognize(
        spark, sql, data=str(served[1]), driver_threshold=0, tasks=2,
        config=DEFAULT_CONFIG.with_values(values),
    )  # fmt: skip
    assert run.matches.count() == after
    assert run.split is not None and run.split.mode == "single"
    assert "on_limit = truncate" in (run.split.reason or "")


def test_the_driver_environment_reaches_the_executors(
    spark: Any, served: tuple[LocalCluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dfs_cer.spark import recognize

    _, sql, _, after = OUTCOMES["query.dedup"]
    monkeypatch.setenv("DFS_CER__QUERY__DEDUP", "false")
    monkeypatch.setenv("DFS_CER__STRATEGY__DEFAULT", "push_down")
    run = recognize(spark, sql, data=str(served[1]), driver_threshold=0, tasks=2)
    assert run.matches.count() == after
    cluster = served[0]
    run = recognize(spark, sql, endpoints=cluster.endpoints, token=cluster.token)
    assert run.matches.count() == after and run.trace is not None
    assert run.trace.strategy == "push_down"


def _source(spark: Any, served: tuple[LocalCluster, Path], sql: str, where: str) -> Any:
    cluster, path = served
    reader = spark.read.format("dfs_cer").option("query", sql)
    if where == "data":
        return reader.option("data", str(path))
    return reader.option("endpoints", ",".join(cluster.endpoints)).option("token", cluster.token)


@pytest.mark.parametrize(
    ("setting", "where", "how"),
    [
        ("query.dedup", "endpoints", "options"),
        ("query.dedup", "data", "file"),
        ("query.event_key", "endpoints", "options"),
        ("matcher.kleene", "endpoints", "file"),
        ("matcher.kleene", "data", "options"),
        ("matcher.on_limit", "data", "options"),
    ],
)
def test_the_data_source_takes_settings_as_options_and_files(
    spark: Any,
    served: tuple[LocalCluster, Path],
    tmp_path: Path,
    setting: str,
    where: str,
    how: str,
) -> None:
    """By their dotted names (``.option("query.dedup", "false")``) or in a TOML file
    (``.option("config", path)``); the answer without them is the other tests' (the defaults)."""
    values, sql, _, after = OUTCOMES[setting]
    reader = _source(spark, served, sql, where)
    if how == "file":
        (tmp_path / "site.toml").write_text(toml_of(values))
        reader = reader.option("config", str(tmp_path / "site.toml"))
    else:
        for section, keys in values.items():
            for key, value in keys.items():
                text = ",".join(value) if isinstance(value, list) else json.dumps(value).strip('"')
                reader = reader.option(f"{section}.{key}", text)
    assert reader.load().count() == after


def test_the_data_source_refuses_a_bad_setting(
    spark: Any, served: tuple[LocalCluster, Path]
) -> None:
    _, sql, _, _ = OUTCOMES["query.dedup"]
    with pytest.raises(Exception, match=r"conf key matcher\.max_steps must be positive, got 0"):
        _source(spark, served, sql, "data").option("matcher.max_steps", "0").load().count()


def test_the_command_line_s_spark_engine(spark: Any, served: tuple[LocalCluster, Path]) -> None:
    from dfs_cer.cli.main import cli

    cluster, _ = served
    values, sql, _, after = OUTCOMES["matcher.kleene"]
    path = served[1].parent / "kleene.toml"
    path.write_text(toml_of(values))
    result = CliRunner().invoke(
        cli,
        [
            "--config",
            str(path),
            "query",
            "--engine",
            "spark",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(cluster.token_file),
            "--format",
            "json",
            sql,
        ],
        env={"DFS_CER__QUERY__DEDUP": "false"},
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["matches"]) == after
    _, dup_sql, _, dup_after = OUTCOMES["query.dedup"]
    result = CliRunner().invoke(
        cli,
        [
            "query",
            "--engine",
            "spark",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(cluster.token_file),
            "--format",
            "json",
            dup_sql,
        ],
        env={"DFS_CER__QUERY__DEDUP": "false"},
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["matches"]) == dup_after
