"""One outcome per query, whatever the strategy: storage nodes whose schemas differ only in
nullability or text width answer as one log, a real type difference is one clear error, and a
strategy whose node-side work hits a bound falls back (named in the trace) instead of failing."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.cli.main import fallback_note
from dfs_cer.errors import MatchLimitError, StorageError
from dfs_cer.io.shard import decode_schema, encode_schema, schema_fields, shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster

pytestmark = pytest.mark.flight

#: C is rare and last; the pattern projected on (C, A) has many more matches than the query
SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b, C.ts AS c, "
    "B.type AS bt ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N*? B N*? C) "
    "WITHIN 200 DEFINE A AS A.type = 'A', B AS B.type = 'B', C AS C.type = 'C' AND "
    "C.x = A.x + B.x)"
)


def events() -> pa.Table:
    rng = np.random.default_rng(1)
    types = np.array(["A"] * 48 + ["B"] * 48 + ["X"])
    rng.shuffle(types)
    return pa.table(
        {
            "ts": np.arange(100),
            "type": np.concatenate([types, ["C"] * 3]),
            "x": rng.integers(0, 10, 100),
        }
    )


def retyped(node: Path, fields: dict[str, pa.Field]) -> None:
    """Rewrite a node's shard files and manifest with ``fields`` (as a shard set written
    separately would have them)."""
    manifest = json.loads((node / "manifest.json").read_text())
    schema = decode_schema(manifest["arrow_schema"])
    schema = pa.schema([fields.get(f.name, f) for f in schema])
    for f in manifest["files"]:
        pq.write_table(pq.read_table(node / f["path"]).cast(schema), node / f["path"])
    manifest.update(arrow_schema=encode_schema(schema), schema=schema_fields(schema))
    (node / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """:func:`events` over two nodes, then a third: the second node's rows again. Node 1 has
    ``x`` NOT NULL and ``type`` as large_string (node 0: nullable, string); node 2 has ``x`` as
    int32. Nodes 0 and 1 serve the log; nodes 0 and 2 serve it with a real type difference."""
    root = tmp_path_factory.mktemp("one-outcome")
    pq.write_table(events(), root / "events.parquet")
    shard(str(root / "events.parquet"), 2, str(root / "nodes"), name="t")
    shutil.copytree(root / "nodes" / "node-01", root / "int32")
    retyped(
        root / "nodes" / "node-01",
        {
            "x": pa.field("x", pa.int64(), nullable=False),
            "type": pa.field("type", pa.large_string()),
        },
    )
    retyped(root / "int32", {"x": pa.field("x", pa.int32())})
    dirs = [str(root / "nodes" / "node-00"), str(root / "nodes" / "node-01"), str(root / "int32")]
    cluster = LocalCluster(dirs).start()
    yield cluster
    cluster.stop()
    cluster.tmp.cleanup()


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def run(endpoints: list[str], token: str, name: str) -> tuple[pa.Table, str | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pull(name, SQL, endpoints, token)
    return match_pulled(result), result.trace.fallback


def test_nodes_differing_only_in_nullability_or_text_width_answer_as_one_log(
    nodes: LocalCluster,
) -> None:
    expected = rows(match_recognize(events(), SQL))
    assert rows(run(nodes.endpoints[:2], nodes.token, "pull_all")[0]) == expected
    assert len(expected) > 5
    for name in STRATEGIES:
        assert rows(run(nodes.endpoints[:2], nodes.token, name)[0]) == expected, name


def test_a_type_difference_between_nodes_is_one_clear_error_from_every_strategy(
    nodes: LocalCluster,
) -> None:
    endpoints = [nodes.endpoints[0], nodes.endpoints[2]]
    errors = set()
    for name in STRATEGIES:
        with pytest.raises(StorageError) as info:
            run(endpoints, nodes.token, name)
        errors.add(str(info.value))
    assert len(errors) == 1
    text = errors.pop()
    for part in ("different schemas (x: int64 vs int32)", *endpoints, "one schema"):
        assert part in text, (part, text)


def test_push_pull_past_its_partial_match_bound_falls_back_to_push_down(
    nodes: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nodes' matching of the pattern projected on (C, A) passes max_matches (72 matches on
    a node) where the query has 11: push-pull keeps every candidate from A on, answers exactly
    and says so; a limit the query's own matches pass is the same error from every strategy."""
    endpoints = nodes.endpoints[:2]
    monkeypatch.setenv("DFS_CER__MATCHER__MAX_MATCHES", "40")
    expected = rows(run(endpoints, nodes.token, "pull_all")[0])
    got, fallback = run(endpoints, nodes.token, "push_pull")
    assert rows(got) == expected
    assert fallback is not None and fallback.startswith("push_down (from A on: storage node ")
    assert "max_matches=40" in fallback
    note = fallback_note("push_pull", fallback)
    assert note.startswith("push_pull fell back to push_down: from A on") and "raise" in note
    monkeypatch.setenv("DFS_CER__MATCHER__MAX_MATCHES", "5")
    limits = set()
    for name in STRATEGIES:
        with pytest.raises(MatchLimitError) as info:
            run(endpoints, nodes.token, name)
        limits.add(str(info.value))
    assert limits == {"the query produced more than max_matches=5 matches"}


def test_pull_all_s_note_says_it_reads_every_row() -> None:
    """pull_all has nothing to fall back from: its note said 'pull_all fell back to pull_all'."""
    note = fallback_note("pull_all", "pull_all (PARTITION BY an expression)")
    assert note.startswith("pull_all reads every row: PARTITION BY an expression")
    assert fallback_note("dfs", "pull_all (x)").startswith("dfs fell back to pull_all: x")
