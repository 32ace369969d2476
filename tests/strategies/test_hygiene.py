"""Event hygiene (issue 10): duplicates, a deterministic order, late files — LimeCEP's
20-event stream (spec notes A8, L1/L8) stored shuffled and with duplicates on storage nodes."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster
from tests.fixtures.limecep import ARRIVALS, late_batch, replay, sql, stream, summary_of

pytestmark = pytest.mark.flight


def matches(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


# (pattern, LimeCEP's selection, its maximal matches, STAM all matches): LimeCEP's counts for the
# 20-event stream; A+ B+ C's 6 maximal matches are skip-till-any-match's (a Kleene first
# variable has no "next" event to skip to)
CASES = [
    ("A B C", "skip_till_next_match", 8, 15),
    ("A B+ C", "skip_till_next_match", 8, 28),
    ("A+ B+ C", "skip_till_any_match", 6, 61),
]


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pa.Table, LocalCluster]]:
    """The stream shuffled, 15 events repeated (some twice), sharded randomly over 3 nodes in
    batches of 7 rows, so duplicates sit on different nodes and shards are interleaved."""
    rng = np.random.default_rng(10)
    duplicates = rng.choice(20, 15)
    duplicates = np.concatenate([duplicates, duplicates[:5]])
    table = stream(duplicates=duplicates)
    table = table.take(pa.array(rng.permutation(table.num_rows)))
    root = tmp_path_factory.mktemp("messy")
    pq.write_table(table, root / "events.parquet")
    shard(str(root / "events.parquet"), 3, str(root / "nodes"), batch_rows=7, name="t")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(3)]) as cluster:
        yield table, cluster


@pytest.mark.parametrize(("pattern", "selection", "maximal", "stam"), CASES)
def test_limecep_counts_whatever_the_order_and_duplicates(
    pattern: str, selection: str, maximal: int, stam: int
) -> None:
    clean = stream()
    rng = np.random.default_rng(3)
    for _ in range(3):
        dup = rng.choice(20, rng.integers(1, 20))
        messy = stream(duplicates=dup)
        messy = messy.take(pa.array(rng.permutation(messy.num_rows)))
        for sel, kleene, count in (
            (selection, "maximal", maximal),
            ("skip_till_any_match", "all", stam),
        ):
            want = match_recognize(clean, sql(pattern), selection=sel, kleene=kleene)
            got = match_recognize(messy, sql(pattern), selection=sel, kleene=kleene)
            assert want.num_rows == count and matches(got) == matches(
                want
            )  # precision and recall 100%
            kept = match_recognize(messy, sql(pattern), selection=sel, kleene=kleene, dedup=False)
            assert kept.num_rows > count  # without deduplication duplicates make false matches


@pytest.mark.parametrize(("pattern", "selection", "maximal", "stam"), CASES)
@pytest.mark.parametrize("strategy", ["pull_all", "push_down", "dfs"])
def test_limecep_counts_from_storage_nodes(
    messy: tuple[pa.Table, LocalCluster],
    strategy: str,
    pattern: str,
    selection: str,
    maximal: int,
    stam: int,
) -> None:
    """Duplicates on different nodes are dropped by the compute node while it merges what the
    nodes sent; every strategy gives the clean stream's matches."""
    _, cluster = messy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pull(
            strategy, sql(pattern), cluster.endpoints, cluster.token, cost_model="always_on"
        )
    stam_matches = match_pulled(result)
    assert matches(stam_matches) == matches(match_recognize(stream(), sql(pattern)))
    assert stam_matches.num_rows == stam
    if strategy == "pull_all":  # STNM needs every event of a type (it takes the next one)
        assert match_pulled(result, selection=selection, kleene="maximal").num_rows == maximal


def test_sql_semantics_from_storage_nodes_match_the_clean_stream(
    messy: tuple[pa.Table, LocalCluster],
) -> None:
    _, cluster = messy
    query = sql("A B+ C", all_matches=False)
    want = matches(match_recognize(stream(), query))
    for strategy in ("pull_all", "push_down", "push_pull", "dfs"):
        result = pull(strategy, query, cluster.endpoints, cluster.token, cost_model="always_on")
        assert matches(match_pulled(result)) == want, strategy


def test_distinct_events_at_one_timestamp_both_survive() -> None:
    """Two events of one type at the same time are two events (LimeCEP's TreeSet keyed on time
    collapsed them); exact copies are one."""
    t = pa.table(
        {
            "id": ["a1", "a1x", "b2", "b2", "c3"],
            "type": ["A", "A", "B", "B", "C"],
            "ts": [1, 1, 2, 2, 3],
        }
    )
    q = sql("A B C")
    got = match_recognize(t, q)
    assert sorted(got.column("first_a").to_pylist()) == [
        "a1",
        "a1x",
    ]  # b2's copy is gone: 2 matches, not 4
    assert match_recognize(t, q, dedup=False).num_rows == 4
    # with an event key: same time and key = same event, whatever the other columns say
    keyed = t.set_column(0, "id", pa.array(["a1", "a1", "b2", "b2", "c3"])).append_column(
        "payload", pa.array([1, 2, 3, 3, 4])
    )
    assert match_recognize(keyed, q, event_key=["id"]).num_rows == 1
    assert match_recognize(keyed, q).num_rows == 2  # whole-row identity: the two a1 rows differ


def test_ties_are_matched_in_event_key_order() -> None:
    """Rows tied on time are ordered by the event key, then the other columns; the same
    whatever order they arrive in."""
    t = pa.table({"ts": [5, 5, 5], "k": [3, 1, 2], "v": ["x", "z", "y"]})
    q = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.k) AS a, LAST(B.k) AS b "
        "ONE ROW PER MATCH PATTERN (A B) DEFINE A AS true, B AS true)"
    )
    by_key = match_recognize(t, q, event_key=["k"]).to_pylist()
    assert by_key == [{"a": 1, "b": 2}]
    by_v = match_recognize(t, q, event_key=["v"]).to_pylist()  # x (k 3), y (k 2), z (k 1)
    assert by_v == [{"a": 3, "b": 2}]
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert (
            match_recognize(t.take(pa.array(rng.permutation(3))), q, event_key=["k"]).to_pylist()
            == by_key
        )


def test_shard_dedup_drops_duplicates_of_the_input(tmp_path: Path) -> None:
    from dfs_cer.io.files import filesystem_for
    from dfs_cer.io.shard import read_manifest

    table = stream(duplicates=np.array([0, 0, 5, 19]))
    pq.write_table(table, tmp_path / "in.parquet")
    manifests = shard(str(tmp_path / "in.parquet"), 2, str(tmp_path / "out"), dedup=True)
    assert sum(m.rows for m in manifests) == 20 and manifests[0].duplicates_dropped == 4
    assert (
        read_manifest(filesystem_for(str(tmp_path / "out" / "node-01")))["duplicates_dropped"] == 4
    )
    # an event key: same time and id = same event even when another column differs
    keyed = pa.table({"id": ["e1", "e1", "e2"], "ts": [1, 1, 1], "v": [1, 2, 3]})
    pq.write_table(keyed, tmp_path / "keyed.parquet")
    kept = shard(
        str(tmp_path / "keyed.parquet"), 1, str(tmp_path / "k"), event_key=("id",), dedup=True
    )
    assert kept[0].rows == 2
    files = sorted((tmp_path / "k" / "node-00").glob("*.parquet"))
    rows = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("id").to_pylist()
    assert rows == [
        {"id": "e1", "ts": 1, "v": 1},
        {"id": "e2", "ts": 1, "v": 3},
    ]  # the first in column order


# ------------------------------------------------------------------ late files (L2)


def test_late_files_replay_ends_with_the_in_order_results(tmp_path: Path) -> None:
    """LimeCEP's L2 replay: the stream arrives in five late batches (``shard --append``); each
    ``--since-run`` re-run recomputes only the ranges the new files affect and lists the
    corrections; the last run equals the in-order result (L1), and re-runs are idempotent."""
    from dfs_cer.strategies.incremental import run_and_save

    query = sql("A B+ C")
    opts = {"selection": "skip_till_next_match", "kleene": "maximal", "cost_model": "always_on"}
    runs = tmp_path / "runs"
    pq.write_table(late_batch(ARRIVALS[0]), tmp_path / "batch-0.parquet")
    shard(str(tmp_path / "batch-0.parquet"), 2, str(tmp_path / "nodes"), name="t")
    with LocalCluster([str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        run = run_and_save(
            query, cluster.endpoints, cluster.token, strategy="dfs", runs_dir=runs, **opts
        )
        assert run.matches.num_rows == 0  # c10 and c20 arrived, b8 did not: no match yet

        def deliver(i: int, batch: pa.Table) -> None:
            pq.write_table(batch, tmp_path / f"batch-{i}.parquet")
            shard(str(tmp_path / f"batch-{i}.parquet"), 2, str(tmp_path / "nodes"), append=True)

        run, changes = replay(cluster, runs, run, deliver)
        assert changes == [{"new": 5}, {"new": 2}, {"invalidated": 2, "new": 3}, {"updated": 1}]
        final = match_recognize(stream(), query, selection="skip_till_next_match", kleene="maximal")
        assert summary_of(run.matches) == summary_of(final) and run.matches.num_rows == 8
        assert run.changes is not None
        updated = run.changes.to_pylist()[0]
        assert (updated["first_a"], updated["n_b"], updated["last_c"]) == (
            "a9",
            4,
            "c19",
        )  # b12 joined
        assert updated["previous_match_id"] is not None
        # idempotent: nothing new, or the same late file delivered again (duplicates)
        again = run_and_save(
            "", cluster.endpoints, cluster.token, runs_dir=runs, since_run=run.record.run_id
        )
        assert again.changes is not None and again.changes.num_rows == 0
        shard(str(tmp_path / "batch-4.parquet"), 2, str(tmp_path / "nodes"), append=True)
        redelivered = run_and_save(
            "", cluster.endpoints, cluster.token, runs_dir=runs, since_run=again.record.run_id
        )
        assert redelivered.changes is not None and redelivered.changes.num_rows == 0
        assert summary_of(redelivered.matches) == summary_of(final)
        assert redelivered.record.recomputed == [
            [2, 22]
        ]  # b12's file: matches starting in [12 - 10, 12 + 10]


def test_a_late_event_that_a_later_match_negates_invalidates_it(tmp_path: Path) -> None:
    """A leading negation looks back from a match's last row: a late B at t = 5 kills the match
    (A at 6, C at 8) that starts after it, so the re-run recomputes starts up to a window after
    the late file, not only before it."""
    from dfs_cer.strategies.incremental import run_and_save

    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, C.id AS c ALL MATCHES "
        "PATTERN (~B A C) WITHIN 4 DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C')"
    )
    runs = tmp_path / "runs"
    pq.write_table(late_batch(["n1", "n3", "a6", "c8", "n12"]), tmp_path / "day1.parquet")
    shard(str(tmp_path / "day1.parquet"), 2, str(tmp_path / "nodes"), name="t")
    with LocalCluster([str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        run = run_and_save(query, cluster.endpoints, cluster.token, strategy="dfs", runs_dir=runs)
        assert run.matches.select(["a", "c"]).to_pylist() == [{"a": "a6", "c": "c8"}]
        pq.write_table(late_batch(["b5"]), tmp_path / "late.parquet")
        shard(str(tmp_path / "late.parquet"), 2, str(tmp_path / "nodes"), append=True)
        again = run_and_save(
            "", cluster.endpoints, cluster.token, runs_dir=runs, since_run=run.record.run_id
        )
        assert again.record.mode == "incremental" and again.record.recomputed == [[1, 9]]
        assert again.matches.num_rows == 0
        assert again.changes is not None
        assert again.changes.column("change").to_pylist() == ["invalidated"]


def test_sql_skip_past_last_row_recomputes_everything(tmp_path: Path) -> None:
    from dfs_cer.strategies.incremental import run_and_save

    query = sql("A B+ C", all_matches=False).replace("SKIP TO NEXT ROW", "SKIP PAST LAST ROW")
    pq.write_table(late_batch(ARRIVALS[0] + ARRIVALS[1]), tmp_path / "a.parquet")
    pq.write_table(late_batch(ARRIVALS[2]), tmp_path / "b.parquet")
    shard(str(tmp_path / "a.parquet"), 1, str(tmp_path / "nodes"), name="t")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")]) as cluster:
        first = run_and_save(query, cluster.endpoints, cluster.token, runs_dir=tmp_path / "runs")
        shard(str(tmp_path / "b.parquet"), 1, str(tmp_path / "nodes"), append=True)
        second = run_and_save(
            "",
            cluster.endpoints,
            cluster.token,
            runs_dir=tmp_path / "runs",
            since_run=first.record.run_id,
        )
    assert second.record.mode == "full" and "SKIP PAST LAST ROW" in (second.record.note or "")
    everything = late_batch(ARRIVALS[0] + ARRIVALS[1] + ARRIVALS[2])
    assert summary_of(second.matches) == summary_of(match_recognize(everything, query))


def test_cli_save_run_and_since_run(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "dfs-cer")
    ids = [
        "b1",
        "b2",
        "b11",
        "a3",
        "c10",
        "a4",
        "a6",
        "c20",
        "a5",
        "a18",
        "a7",
        "a17",
        "a9",
        "a13",
        "b14",
        "b16",
        "a15",
        "c19",
    ]
    pq.write_table(late_batch(ids), tmp_path / "day1.parquet")
    pq.write_table(late_batch(["b8", "b12"]), tmp_path / "late.parquet")
    shard(str(tmp_path / "day1.parquet"), 2, str(tmp_path / "shards"), event_key=("id",), name="t")
    with LocalCluster([str(tmp_path / "shards" / f"node-{i:02d}") for i in range(2)]) as cluster:
        base = [
            exe,
            "query",
            "--endpoints",
            ",".join(cluster.endpoints),
            "--token-file",
            str(cluster.token_file),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--format",
            "json",
        ]
        first = subprocess.run(
            [
                *base,
                "--selection",
                "skip_till_next_match",
                "--kleene",
                "maximal",
                "--save-run",
                sql("A B+ C"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert first.returncode == 0, first.stderr
        run = json.loads(first.stdout)
        assert len(run["matches"]) == 3 and run["mode"] == "full"
        append = subprocess.run(
            [
                exe,
                "shard",
                "--input",
                str(tmp_path / "late.parquet"),
                "--nodes",
                "2",
                "--to",
                str(tmp_path / "shards"),
                "--event-key",
                "id",
                "--append",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert append.returncode == 0, append.stderr
        second = subprocess.run(
            [*base, "--since-run", run["run_id"]], capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 0, second.stderr
        rerun = json.loads(second.stdout)
        kinds = [c["change"] for c in rerun["changes"]]
        assert sorted(kinds) == ["new"] * 5 + ["updated"] and len(rerun["matches"]) == 8
        assert rerun["parent"] == run["run_id"] and rerun["recomputed"] == [[-2, 22]]
        missing = subprocess.run(
            [*base, "--since-run", "nope"], capture_output=True, text=True, timeout=120
        )
        assert missing.returncode == 2 and "no saved run 'nope'" in missing.stderr
        wrong = subprocess.run(
            [
                exe,
                "shard",
                "--input",
                str(tmp_path / "late.parquet"),
                "--nodes",
                "3",
                "--to",
                str(tmp_path / "shards"),
                "--append",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert wrong.returncode == 2 and "--append" in wrong.stderr


def test_reruns_keep_the_saved_runs_semantics_and_recompute_anchored_patterns(
    tmp_path: Path,
) -> None:
    """A re-run uses the saved run's time unit, event key and dedup (not the defaults), and
    patterns anchored to the partition (^, $) are recomputed in full: a time range would cut
    the partition's first and last rows."""
    from dfs_cer.strategies.incremental import run_and_save

    ms = pa.table(
        {
            "id": ["a1", "b3", "c6", "c20"],
            "type": ["A", "B", "C", "C"],
            "ts": [1000, 3000, 6000, 20000],
        }
    )
    late = pa.table({"id": ["b5"], "type": ["B"], "ts": [5000]})
    pq.write_table(ms, tmp_path / "a.parquet")
    pq.write_table(late, tmp_path / "b.parquet")
    shard(str(tmp_path / "a.parquet"), 1, str(tmp_path / "nodes"), name="t")
    query = sql("A B C").replace("WITHIN 10", "WITHIN INTERVAL '10' SECOND")
    anchored = sql("A B", all_matches=False).replace("PATTERN (A B)", "PATTERN (^ A B)")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")]) as cluster:
        first = run_and_save(
            query,
            cluster.endpoints,
            cluster.token,
            runs_dir=tmp_path / "runs",
            integer_time_unit="ms",
        )
        anchor = run_and_save(
            anchored, cluster.endpoints, cluster.token, runs_dir=tmp_path / "runs"
        )
        shard(str(tmp_path / "b.parquet"), 1, str(tmp_path / "nodes"), append=True)
        again = run_and_save(
            "",
            cluster.endpoints,
            cluster.token,
            runs_dir=tmp_path / "runs",
            since_run=first.record.run_id,
        )
        anchor_again = run_and_save(
            "",
            cluster.endpoints,
            cluster.token,
            runs_dir=tmp_path / "runs",
            since_run=anchor.record.run_id,
        )
    # in milliseconds the window is 10,000: a1 b3 c6 and a1 b5 c6 (c20 is too late for a1)
    assert sorted(again.matches.column("first_b").to_pylist()) == ["b3", "b5"]
    assert again.record.mode == "incremental" and again.changes is not None
    assert again.changes.column("change").to_pylist() == ["new"]
    assert anchor_again.record.mode == "full" and "anchor" in (anchor_again.record.note or "")


@pytest.mark.parametrize("all_matches", [True, False])
def test_copies_with_different_payloads_are_resolved_before_any_filter(
    tmp_path: Path, all_matches: bool
) -> None:
    """With an event key, two copies of one event may differ in other columns; the compute node
    keeps the first in column order. Storage nodes resolve copies the same way before conditions
    filter rows (and sharding puts copies on one node), so a strategy that pulls only candidates
    cannot see the other copy: every strategy agrees with matching the whole log."""
    table = pa.table(
        {"id": ["x", "e1", "e1"], "type": ["A", "B", "B"], "ts": [0, 5, 5], "v": [0, 1, 9]}
    )
    pq.write_table(table, tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 2, str(tmp_path / "nodes"), event_key=("id",), name="t")
    head = "ALL MATCHES" if all_matches else "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW"
    pattern = "A B" if all_matches else "A N*? B"
    q = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a, B.id AS b, B.v "
        f"AS bv {head} PATTERN ({pattern}) WITHIN 10 DEFINE A AS A.type = 'A', B AS B.type "
        "= 'B' AND B.v > 5)"
    )
    want = matches(match_recognize(table, q, event_key=["id"]))
    assert want == []  # the kept copy of e1 has v = 1
    with LocalCluster([str(tmp_path / "nodes" / f"node-{i:02d}") for i in range(2)]) as cluster:
        for strategy in ("pull_all", "push_down", "push_pull", "dfs"):
            result = pull(strategy, q, cluster.endpoints, cluster.token, cost_model="always_on")
            assert matches(match_pulled(result)) == want, strategy


def test_files_appended_while_a_query_runs_make_its_pulls_refuse(tmp_path: Path) -> None:
    """A query opened before files were appended must not pull rows its open never saw."""
    from dfs_cer.errors import StorageError
    from dfs_cer.transport.client import StorageClient

    pq.write_table(late_batch(ARRIVALS[0]), tmp_path / "a.parquet")
    pq.write_table(late_batch(ARRIVALS[1]), tmp_path / "b.parquet")
    shard(str(tmp_path / "a.parquet"), 1, str(tmp_path / "nodes"), name="t")
    with LocalCluster([str(tmp_path / "nodes" / "node-00")]) as cluster:
        client = StorageClient(cluster.endpoints[0], cluster.token)
        try:
            client.action("open", {"query_id": "q1", "sql": sql("A B C")})
            assert client.pull({"query_id": "q1", "kind": "pull_all"}).num_rows == len(ARRIVALS[0])
            shard(str(tmp_path / "b.parquet"), 1, str(tmp_path / "nodes"), append=True)
            client.action("files", {})  # the node picks the new file up
            with pytest.raises(
                StorageError,
                match=r"appended to the shard set \(or another snapshot of the table was "
                r"loaded\) while query q1 ran",
            ):
                client.pull({"query_id": "q1", "kind": "pull_all"})
            client.action("open", {"query_id": "q2", "sql": sql("A B C")})
            assert (
                client.pull({"query_id": "q2", "kind": "pull_all"}).num_rows == len(ARRIVALS[0]) + 1
            )
        finally:
            client.close()


def test_a_misspelled_pull_option_is_an_error() -> None:
    from dfs_cer.errors import ConfigError
    from dfs_cer.strategies.options import PullOptions

    with pytest.raises(
        ConfigError, match="unknown pull option costmodel; the options are cost_model"
    ):
        PullOptions.parse({"costmodel": "naive"})
    with pytest.raises(ConfigError, match="cost_model must be one of adaptive"):
        PullOptions.parse({"cost_model": "cheapest"})
    assert PullOptions.parse({"cost_model": "naive", "passes": 1}).passes == 1


def test_match_pulled_takes_named_options_only() -> None:
    import inspect

    from dfs_cer.strategies.matching import match_pulled

    params = inspect.signature(match_pulled).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    assert {"selection", "kleene", "max_matches", "on_limit"} <= set(params)


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), 1e300])
def test_the_query_timeout_must_be_positive_and_finite(timeout: float) -> None:
    from dfs_cer.errors import ConfigError
    from dfs_cer.strategies import pull

    with pytest.raises(ConfigError, match="positive number of seconds, at most"):
        pull(
            "dfs",
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
            "ALL MATCHES PATTERN (A) DEFINE A AS A.v > 0)",
            ["127.0.0.1:1"],
            "token",
            timeout=timeout,
        )
