"""Ctrl-C (SIGINT) while a query runs: the command stops at once, closes the query on every
storage node, says ``interrupted`` and exits 130; the Python API raises KeyboardInterrupt. Never
a crash: the signal used to wait for the matcher's step budget, then crash the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.io.shard import shard
from storage_node.launcher import LocalCluster
from tests.fixtures.faults import NOTHING, held
from tests.fixtures.signals import interrupt, start

pytestmark = pytest.mark.flight

EXE = Path(sys.executable).parent / "dfs-cer"
#: C reads the row before B's last: no thread pruning applies (a running sum no longer does:
#: the matcher keeps the smallest), the matcher runs until its budgets (steps and seconds,
#: raised out of reach below) on each partition of 2,000 rows
SLOW = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES count(*) AS c "
    "PATTERN (A+ B+ C) DEFINE B AS v >= 0, C AS v > LAST(B.v, 1) + 100)"
)
ENV = {
    **os.environ,
    "DFS_CER__MATCHER__MAX_STEPS": str(10**15),
    "DFS_CER__MATCHER__MAX_SECONDS": "3600",
}


def events(rows: int) -> pa.Table:
    i = np.arange(rows, dtype=np.int64)
    return pa.table({"k": i % 2, "ts": i, "v": i % 7})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    """Two storage nodes, one PARTITION BY group each (so they may match it themselves)."""
    root = tmp_path_factory.mktemp("interrupt")
    pq.write_table(events(4_000), root / "t.parquet")
    shard(str(root / "t.parquet"), 2, str(root / "nodes"), partitioning="type", type_column="k")
    with LocalCluster([str(root / "nodes" / f"node-{i:02d}") for i in range(2)]) as c:
        (root / "token").write_text(c.token)
        yield c, root / "token"


def query(cluster: tuple[LocalCluster, Path], *more: str) -> subprocess.Popen[str]:
    c, token = cluster
    args = [str(EXE), "query", "--endpoints", ",".join(c.endpoints), "--token-file", str(token)]
    return start([*args, *more, SLOW], ENV)


def nothing_held(c: LocalCluster) -> bool:
    for _ in range(50):  # the nodes confirmed close before the command exited; allow a little
        if held(c, [0, 1]) == [NOTHING, NOTHING]:
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_while_matching_exits_130_and_nodes_hold_nothing(
    cluster: tuple[LocalCluster, Path],
) -> None:
    code, err = interrupt(query(cluster, "--strategy", "pull_all"), ready="matching: ")
    assert code == 130, err
    assert err.rstrip().endswith("interrupted"), err
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert nothing_held(cluster[0])


def test_ctrl_c_during_a_round_closes_the_query_on_every_node(
    cluster: tuple[LocalCluster, Path],
) -> None:
    """The nodes match (node-side matching): the command waits in a round while they work; the
    close it sends on Ctrl-C stops that work."""
    c, _ = cluster
    proc = query(cluster, "--strategy", "dfs", "--node-matching", "on")
    for _ in range(300):  # until the nodes hold the query
        if all(h["queries"] for h in held(c, [0, 1])) or proc.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(0.5)  # into the round
    code, err = interrupt(proc)
    assert code == 130, err
    assert "Traceback" not in err and err.rstrip().endswith("interrupted"), err
    assert nothing_held(c)


def test_ctrl_c_in_match_recognize_raises_keyboard_interrupt() -> None:
    """The Python API: KeyboardInterrupt while the matcher runs, and the next call works."""
    script = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from dfs_cer import match_recognize\n"
        "from dfs_cer.match.progress import listening\n"
        "i = np.arange(4000)\n"
        "t = pa.table({'k': i % 2, 'ts': i, 'v': i % 7})\n"
        "with listening(lambda p: print('matching', file=sys.stderr, flush=True)):\n"
        "    try:\n"
        f"        match_recognize(t, {SLOW!r})\n"
        "    except KeyboardInterrupt:\n"
        "        print('KeyboardInterrupt', file=sys.stderr)\n"
        f"print(match_recognize(t.slice(0, 50), {SLOW!r}).num_rows, file=sys.stderr)\n"
    )
    code, err = interrupt(start([sys.executable, "-c", script], ENV), ready="matching")
    assert code == 0, err
    assert err.splitlines()[-2:] == ["KeyboardInterrupt", "0"], err
