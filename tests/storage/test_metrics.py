"""A storage node's Prometheus endpoint (``--metrics-port``): what it served, per action, its
admissions, memory and errors by code, scraped over HTTP as Prometheus does."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dfs_cer.errors import DfsCerError
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from storage_node.launcher import LocalCluster
from tests.fixtures.tables import random_events

pytestmark = pytest.mark.flight

SQL = (
    "SELECT * FROM events MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts PATTERN (A N*? B) "
    "WITHIN INTERVAL '5' MINUTE DEFINE A AS type = 'A', B AS type = 'B')"
)


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_metrics_count_queries_bytes_per_action_and_errors_by_code(tmp_path: Path) -> None:
    pq.write_table(random_events(seed=3, n=600), tmp_path / "events.parquet")
    shard(str(tmp_path / "events.parquet"), 2, str(tmp_path / "nodes"))
    dirs = [str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]
    with LocalCluster(dirs, metrics=True) as cluster:
        at_rest = scrape(cluster.metrics_urls[0])
        assert at_rest[("dfs_cer_node_queries_open", ())] == 0
        assert at_rest[("dfs_cer_node_queries_admitted_total", ())] == 0
        assert at_rest[("dfs_cer_node_memory_budget_bytes", ())] > 0

        result = pull("dfs", SQL, cluster.endpoints, cluster.token)
        with pytest.raises(DfsCerError, match="column typo does not exist"):
            pull("dfs", SQL.replace("type = 'B'", "typo = 'B'"), cluster.endpoints, cluster.token)

        after = scrape(cluster.metrics_urls[0])
        assert after[("dfs_cer_node_queries_admitted_total", ())] >= 1
        assert after[("dfs_cer_node_queries_open", ())] == 0  # closed
        opened = after[("dfs_cer_node_calls_total", (("action", "open"),))]
        assert opened >= 1  # a refused call counts under errors
        sent = sum(
            value
            for (name, labels), value in after.items()
            if name == "dfs_cer_node_bytes_out_total"
        )
        assert sent > 0 and after[("dfs_cer_node_bytes_in_total", (("action", "open"),))] > 0
        assert after[("dfs_cer_node_errors_total", (("code", "unknown-column"),))] == 1
        # the final pull's rows left the nodes as Flight streams: counted under "pull"
        assert result.trace.events_received > 0
        pulled = sum(
            scrape(url).get(("dfs_cer_node_bytes_out_total", (("action", "pull"),)), 0)
            for url in cluster.metrics_urls
        )
        assert pulled > 0
