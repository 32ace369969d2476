"""Several queries together (issue 10): one scan per storage node, one shared final pull, the
same matches as running each query alone."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from storage_node.launcher import LocalCluster
from tests.fixtures.tables import random_events, rows

pytestmark = pytest.mark.flight

QUERIES = [
    # two queries share B's condition; the third is contiguous (reads every row); the fourth CER
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a, FIRST(B.ts) AS "
    "b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN INTERVAL '2' "
    "MINUTE DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.v = A.v)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(C.ts) AS c, FIRST(B.ts) AS "
    "b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (C N*? B) WITHIN INTERVAL '3' "
    "MINUTE DEFINE C AS C.type = 'C' AND C.w > 50, B AS B.type = 'B' AND B.v = C.v)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a, count(*) AS n "
    "ONE ROW PER MATCH PATTERN (A D) WITHIN INTERVAL '5' MINUTE DEFINE A AS A.type = 'A', D "
    "AS D.type = 'D')",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, C.ts AS c, D.ts AS d "
    "ALL MATCHES PATTERN (A C D) WITHIN INTERVAL '3' MINUTE DEFINE A AS A.type = 'A', C AS "
    "C.type = 'C', D AS D.type = 'D')",
    # a variant of the first: same A and window, so its first round trip (A's intervals) is shared
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS a, FIRST(B.ts) AS "
    "b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B) WITHIN INTERVAL '2' "
    "MINUTE DEFINE A AS A.type = 'A', B AS B.type = 'B' AND B.w > 20)",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("multi")
    pq.write_table(random_events(seed=5, n=3000), root / "events.parquet")
    shard(str(root / "events.parquet"), 3, str(root / "nodes"), batch_rows=700, name="t")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as c:
        yield c


@pytest.mark.parametrize("strategy", ["dfs", "push_down", "push_pull", "pull_all"])
def test_queries_together_match_each_alone(cluster: LocalCluster, strategy: str) -> None:
    events = random_events(seed=5, n=3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = pull_many(
            strategy, QUERIES, cluster.endpoints, cluster.token, cost_model="always_on"
        )
        alone = [
            pull(strategy, q, cluster.endpoints, cluster.token, cost_model="always_on")
            for q in QUERIES
        ]
    for q, together, single in zip(QUERIES, group.results, alone, strict=True):
        want = rows(match_recognize(events, q))
        assert rows(match_pulled(together)) == want == rows(match_pulled(single)), q
    # one admission and one open round for the group; the final pulls share one round (each row
    # sent once)
    assert [r.action for r in group.trace.rounds][:2] == ["reserve", "open"]
    if strategy != "push_pull":  # push-pull's last step pulls a variable, not a final pull
        assert [r.action for r in group.trace.rounds][2:] == ["pull_group"]
        shared_events = group.trace.rounds[2].events
        assert shared_events <= sum(r.events.num_rows for r in group.results)
    if strategy == "dfs":
        assert (
            sum(r.action == "intervals (shared)" for res in group.results for r in res.trace.rounds)
            == 1
        )
    if strategy == "pull_all":  # the same rows for every query: sent once instead of five times
        assert group.bytes_to_cn < 0.5 * sum(r.trace.bytes_to_cn for r in alone)


def test_a_failing_query_fails_the_group_with_its_error(cluster: LocalCluster) -> None:
    from dfs_cer.errors import DfsCerError

    bad = QUERIES[0].replace("B.v = A.v", "B.nope = A.v")
    with pytest.raises(DfsCerError):
        pull_many("dfs", [QUERIES[1], bad], cluster.endpoints, cluster.token)


def test_cli_runs_several_queries_together(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "dfs-cer")
    base = [
        exe,
        "query",
        "--endpoints",
        ",".join(cluster.endpoints),
        "--token-file",
        str(cluster.token_file),
    ]
    out = subprocess.run(
        [*base, "--format", "json", QUERIES[0], QUERIES[3]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    events = random_events(seed=5, n=3000)
    for q, got in zip([QUERIES[0], QUERIES[3]], doc["queries"], strict=True):
        assert len(got["matches"]) == match_recognize(events, q).num_rows
    assert [r["action"] for r in doc["group"]["rounds"][:2]] == ["reserve", "open"]
    script = tmp_path_factory.mktemp("sql") / "queries.sql"
    script.write_text(";\n".join(QUERIES) + ";\n")
    text = subprocess.run(
        [*base, "--file", str(script)], capture_output=True, text=True, timeout=120
    )
    assert text.returncode == 0, text.stderr
    assert "5 queries together (dfs): one scan per storage node" in text.stdout
    assert text.stdout.count("query ") >= 5


def test_skip_patterns_share_a_filtered_scan(cluster: LocalCluster) -> None:
    """Without a contiguous pattern in the group, the nodes keep only rows some query's variable
    may take (the union of the queries' filters), and every query still gets its matches."""
    events = random_events(seed=5, n=3000)
    chosen = [QUERIES[0], QUERIES[1], QUERIES[3], QUERIES[4]]
    group = pull_many("dfs", chosen, cluster.endpoints, cluster.token, cost_model="always_on")
    for q, result in zip(chosen, group.results, strict=True):
        assert rows(match_pulled(result)) == rows(match_recognize(events, q))


def test_pull_all_groups_read_every_row_without_a_contiguous_pattern(cluster: LocalCluster) -> None:
    events = random_events(seed=5, n=3000)
    chosen = [
        QUERIES[0],
        QUERIES[3],
    ]  # both skip rows: the group would otherwise scan only candidates
    group = pull_many("pull_all", chosen, cluster.endpoints, cluster.token)
    for q, result in zip(chosen, group.results, strict=True):
        assert result.events.num_rows == events.num_rows
        assert rows(match_pulled(result)) == rows(match_recognize(events, q))
