"""A query's FROM names the nodes' log, case-insensitively; anything else is refused with a
suggestion (dfs_cer.query.names)."""

from __future__ import annotations

import pytest

from dfs_cer.errors import QueryValidationError, StorageError
from dfs_cer.io.tables import log_name, parse_table
from dfs_cer.query.names import check_table, name_problem, one_log


def test_the_log_is_named_by_its_input() -> None:
    assert log_name("data/ticks.parquet") == "ticks"
    assert log_name("s3://bucket/trips.2024-01.csv") == "trips"
    assert log_name("/data/storms/") == "storms"
    assert parse_table("iceberg://local/logs.events").log_name == "events"
    assert parse_table("hive:s3://bucket/events?date=date").log_name == "events"


def test_from_names_the_log() -> None:
    check_table("Storms", "storms")
    check_table("anything", None)  # a shard set written before logs had names
    with pytest.raises(QueryValidationError, match="did you mean storms or names"):
        check_table("namess", "storms", ["names"])
    with pytest.raises(QueryValidationError, match='did you mean "my log"') as refused:
        check_table("hurricanes", "my log")
    assert refused.value.code == "unknown-table"


def test_nodes_serve_one_log() -> None:
    assert one_log(["t", None, "T"], ["a", "b", "c"]) == "t"
    with pytest.raises(StorageError, match="different logs: t \\(a\\) and u \\(b\\)"):
        one_log(["t", "u"], ["a", "b"])


@pytest.mark.parametrize("name", ["", " ", "a.b", "x" * 200, "a\nb"])
def test_a_name_that_cannot_name_a_log(name: str) -> None:
    assert name_problem(name) is not None
