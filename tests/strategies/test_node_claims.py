"""What storage nodes say of their data, checked before anything relies on it: the log's name
(a query naming another table is refused before any round) and their place among the nodes of
the log (shard sets written separately and served together: what each node says it holds
whole, its PARTITION BY groups and its neighbours for PREV/NEXT, is checked against the other
nodes, and every strategy answers as the local engine does)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.errors import QueryValidationError
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from dfs_cer.strategies.situations import pull_situations
from dfs_cer.strategies.statements import check_against_nodes, pull_statement
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.replies import StatsReply
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

#: one log, written as two shard sets (one per "day"); a match spans the two
DAY1 = pa.table({"ts": [1, 2, 3, 4, 5], "k": ["x", "y", "x", "y", "x"], "v": [0, 0, 0, 3, 1]})
DAY2 = pa.table({"ts": [6, 7, 8, 9, 10], "k": ["x", "y", "x", "y", "x"], "v": [2, 4, 0, 0, 0]})
LOG = pa.concat_tables([DAY1, DAY2])

#: every node matching its own rows loses the match (5, 6) of partition x
MATCH = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, B.ts AS b "
    "ONE ROW PER MATCH PATTERN (A B) WITHIN 10 DEFINE A AS A.v = 1, B AS B.v = 2)"
)
#: the first rows of day 2 read their PREV on the other node: a node checking PREV over its own
#: rows drops both candidates of B, (5, 6) of x and (4, 7) of y
NAVIGATING = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, B.ts AS b "
    "ONE ROW PER MATCH PATTERN (A B) WITHIN 10 DEFINE A AS A.v > 0, "
    "B AS B.v > 1 AND B.v > PREV(B.v))"
)


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def write_days(root: Path, nodes: int = 1, **options: object) -> list[Path]:
    """Each day sharded on its own (``dfs-cer shard`` twice), as ``t.parquet``: the log ``t``."""
    root.mkdir(exist_ok=True)
    out = []
    for day, table in (("day1", DAY1), ("day2", DAY2)):
        (root / day).mkdir()
        pq.write_table(table, root / day / "t.parquet")
        shard(str(root / day / "t.parquet"), nodes, str(root / day / "shards"), **options)  # type: ignore[arg-type]
        out.append(root / day / "shards")
    return out


class Served:
    """One storage node process per shard set directory; each test queries some of them."""

    def __init__(self, root: Path) -> None:
        #: two --nodes 1 shard sets, each "node 0 of 1"
        self.ones = [s / "node-00" for s in write_days(root / "ones")]
        #: the nodes holding partition x of two 2-node sets placed by k: the same index twice
        halves = write_days(root / "halves", nodes=2, partitioning="type", type_column="k")
        self.halves = [
            s / f"node-{i:02d}"
            for s in halves
            for i in range(2)
            if "x" in json.loads((s / f"node-{i:02d}" / "manifest.json").read_text())["type_counts"]
        ]
        #: a shard set written before logs had names
        old = root / "old"
        shutil.copytree(self.ones[0], old)
        manifest = json.loads((old / "manifest.json").read_text())
        for key in ("name", "shard_set"):
            manifest.pop(key, None)
        (old / "manifest.json").write_text(json.dumps(manifest))
        self.old = [old]
        dirs = [*self.ones, *self.halves, *self.old]
        self.cluster = LocalCluster([str(d) for d in dirs]).start()
        self.endpoint = dict(zip(dirs, self.cluster.endpoints, strict=True))

    def endpoints(self, dirs: list[Path]) -> list[str]:
        return [self.endpoint[d] for d in dirs]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("layouts")
    out = Served(root)
    yield out
    out.cluster.stop()
    out.cluster.tmp.cleanup()


@pytest.mark.parametrize("sql", [MATCH, NAVIGATING], ids=["match", "navigation"])
@pytest.mark.parametrize("node_matching", ["off", "auto", "on"])
def test_separately_written_sets_answer_as_one_log(
    served: Served, sql: str, node_matching: str
) -> None:
    """Two --nodes 1 shard sets: neither node holds whole PARTITION BY groups of the log."""
    expected = rows(match_recognize(LOG, sql))
    assert expected == ([("x", 5, 6)] if sql == MATCH else [("x", 5, 6), ("y", 4, 7)])
    endpoints, token = served.endpoints(served.ones), served.cluster.token
    for name in STRATEGIES:
        result = pull(name, sql, endpoints, token, node_matching=node_matching)
        assert rows(match_pulled(result)) == expected, (name, result.trace.to_dict())
        notes = " ".join(result.trace.notes)
        assert "the nodes serve 2 shard sets written separately" in notes, name


def test_nodes_of_one_count_from_different_sets_open_again(served: Served) -> None:
    """Node 0 of each of two 2-node sets: the count matches the query's, so each node checks
    PREV/NEXT over its own rows at open; the compute node finds two shard sets and opens again
    with the nodes relying on nothing."""
    index = {json.loads((p / "manifest.json").read_text())["node"] for p in served.halves}
    assert len(served.halves) == 2 and len(index) == 1  # the same index, from two shard sets
    rows_served = pa.concat_tables(
        pq.read_table(f) for p in served.halves for f in sorted(p.glob("*.parquet"))
    )
    expected = rows(match_recognize(rows_served, NAVIGATING))
    assert ("x", 5, 6) in expected
    endpoints, token = served.endpoints(served.halves), served.cluster.token
    for name in ("pull_all", "push_down", "dfs"):
        result = pull(name, NAVIGATING, endpoints, token)
        assert rows(match_pulled(result)) == expected, (name, result.trace.to_dict())
        assert "2 shard sets written separately" in " ".join(result.trace.notes)
    opens = [r for r in result.trace.rounds if r.action == "open"]
    assert len(opens) == 2 and "opened again" in str(opens[0].note)


def admitted(endpoints: list[str], token: str) -> list[int]:
    """Queries each node has granted room since it started."""
    out = []
    for e in endpoints:
        client = StorageClient(e, token)
        try:
            out.append(client.call(StatsReply)[0].admitted)
        finally:
            client.close()
    return out


def test_a_table_that_is_not_the_log_is_refused_before_any_round(
    served: Served, tmp_path: Path
) -> None:
    """``FROM hurricanes`` over nodes serving the log ``t``: refused with a suggestion by every
    way in (the command line, a pull, a statement's check, a group), no query opened on a node;
    names compare case-insensitively."""
    endpoints, token = served.endpoints(served.ones), served.cluster.token
    before = admitted(endpoints, token)
    wrong = MATCH.replace("FROM t", "FROM hurricanes")
    for name in ("pull_all", "dfs"):
        with pytest.raises(QueryValidationError, match="did you mean t\\?") as refused:
            pull(name, wrong, endpoints, token)
        assert "table hurricanes does not exist" in str(refused.value)
    with pytest.raises(QueryValidationError, match="table hurricanes does not exist"):
        check_against_nodes([wrong], endpoints, token)
    (tmp_path / "token").write_text(token)
    cli = subprocess.run(
        [
            *(sys.executable, "-m", "dfs_cer.cli.main", "query"),
            *("--endpoints", ",".join(endpoints), "--token-file", str(tmp_path / "token"), wrong),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2 and "did you mean t?" in cli.stderr, cli.stderr
    assert "Traceback" not in cli.stderr
    situations = (
        "SELECT * FROM hurricanes SITUATIONS (ORDER BY ts DEFINE A AS v > 0, B AS v < 1 "
        "PATTERN A before B)"
    )
    for name in ("dfs", "pull_all"):
        with pytest.raises(QueryValidationError, match="did you mean t\\?"):
            pull_situations(situations, endpoints, token, strategy=name)
    joined = f"{MATCH} AS r JOIN ({wrong}) AS q USING (k)"  # two clauses, one over the log
    with pytest.raises(QueryValidationError, match="table hurricanes does not exist"):
        pull_statement("dfs", parse_statement(joined), endpoints, token)
    assert admitted(endpoints, token) == before  # nothing opened on any node
    with pytest.raises(QueryValidationError, match="did you mean t\\?"):
        pull_many("dfs", [MATCH, wrong], endpoints, token)
    upper = pull("dfs", MATCH.replace("FROM t", 'FROM "T"'), endpoints, token)
    assert rows(match_pulled(upper)) == [("x", 5, 6)]


def test_a_shard_set_written_without_a_name_answers_with_a_note(served: Served) -> None:
    result = pull(
        "dfs",
        MATCH.replace("FROM t", "FROM anything"),
        served.endpoints(served.old),
        served.cluster.token,
    )
    assert rows(match_pulled(result)) == rows(match_recognize(DAY1, MATCH))
    assert any("written without a log name" in n for n in result.trace.notes), result.trace.notes
