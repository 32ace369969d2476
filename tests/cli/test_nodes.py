"""Your own log to a first query: a CSV sharded, storage nodes started in the background with
``dfs-cer storage-node up``, ``dfs-cer query`` with no flags, ``down`` leaving no process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow.csv as pcsv
import pytest

from dfs_cer import match_recognize
from dfs_cer.datasets.stocks import stock_events

pytestmark = pytest.mark.flight

EXE = Path(sys.executable).parent / "dfs-cer"
QUERY = (
    "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES "
    "FIRST(A.price) AS p0, LAST(B.price) AS p1, count(B.*) AS nb ONE ROW PER MATCH "
    "PATTERN (A B+) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.volume >= 300, B AS B.price > "
    "PREV(B.price))"
)


def dfs_cer(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, cwd=cwd, timeout=180, env=os.environ
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_csv_log_to_a_first_query_with_nodes_in_the_background(tmp_path: Path) -> None:
    table = stock_events(6_000, keys=50, seed=3)
    pcsv.write_csv(table, tmp_path / "ticks.csv")
    shard = dfs_cer(tmp_path, "shard", "--input", "ticks.csv", "--nodes", "3", "--to", "shards")
    assert shard.returncode == 0, shard.stderr
    first = min(table.column("ts").to_pylist())
    assert f"first time = '{first:%Y-%m-%d %H:%M:%S.%f}" in shard.stdout  # times, not integers

    up = dfs_cer(tmp_path, "--output", "json", "storage-node", "up", "--shards", "shards")
    assert up.returncode == 0, up.stderr
    assert "starting storage node 3 of 3" in up.stderr
    nodes = json.loads((tmp_path / ".dfs-cer/nodes/nodes.json").read_text())
    try:
        assert json.loads(up.stdout)["endpoints"] == ",".join(nodes["endpoints"])
        token = Path(nodes["token_file"])
        assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(token.read_text().strip()) == 32
        assert all(alive(pid) for pid in nodes["pids"])

        again = dfs_cer(tmp_path, "storage-node", "up", "--shards", "shards")
        assert again.returncode == 1 and "storage-node down first" in again.stderr

        # no --endpoints, no --token-file: the nodes file; from another directory with --nodes-dir
        out = dfs_cer(tmp_path, "query", "--format", "json", "--limit", "100000", QUERY)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)["matches"]
        want = match_recognize(table, QUERY).to_pylist()
        key = lambda r: (r["sym"], r["p0"], r["p1"], r["nb"])  # noqa: E731
        assert len(want) > 20 and sorted(map(key, got)) == sorted(map(key, want))
        elsewhere = dfs_cer(
            tmp_path / "shards",
            "query",
            "--nodes-dir",
            str(tmp_path / ".dfs-cer/nodes"),
            "--format",
            "json",
            "--limit",
            "100000",
            QUERY,
        )
        assert elsewhere.returncode == 0, elsewhere.stderr
        assert json.loads(elsewhere.stdout)["matches"] == got

        # a misspelled column and an unquoted value: one line, exit 2, before any query round
        typo = dfs_cer(tmp_path, "query", QUERY.replace("B.price > PREV", "B.prise > PREV"))
        assert typo.returncode == 2
        assert typo.stderr == (
            "error: column prise does not exist (in DEFINE B); did you mean price?\n"
        )
        unquoted = dfs_cer(
            tmp_path, "query", QUERY.replace("DEFINE A AS", "DEFINE A AS sym = S0001 AND")
        )
        assert unquoted.returncode == 2
        assert unquoted.stderr.startswith("error: column S0001 does not exist (in DEFINE A); ")
        assert unquoted.stderr.endswith(" (a text value is quoted: 'S0001')\n")
        # a fallback says so on stderr, with the reason and what avoids it
        unbounded = dfs_cer(tmp_path, "query", QUERY.replace("WITHIN INTERVAL '1' MINUTE", ""))
        assert unbounded.returncode == 0, unbounded.stderr
        assert unbounded.stderr == (
            "note: dfs fell back to pull_all: no WITHIN window: a match can span any time range; "
            "to avoid it, add WITHIN INTERVAL 'n' <unit> after PATTERN to bound a match in time\n"
        )
        # A (volume >= 300) is everywhere in time: DFS pulls every row at once, and says why
        assert out.stderr.startswith(
            "note: dfs fell back to pull_all: the interval set would cover ~100% of the nodes' "
            "time: A, the rarest variable, has "
        ), out.stderr
        assert out.stderr.endswith(
            "; to avoid it, narrow the rarest variable's condition or shorten WITHIN, so its "
            "candidates leave gaps in time\n"
        ), out.stderr

        # a saved run's match times read as times, in the time column's type
        saved = dfs_cer(tmp_path, "query", "--save-run", "--format", "json", QUERY)
        assert saved.returncode == 0, saved.stderr
        first_match = json.loads(saved.stdout)["matches"][0]
        assert str(first_match["__match_start"]).startswith(str(first.year))
        assert first_match["__match_start"] <= first_match["__match_end"]

        status = dfs_cer(tmp_path, "--output", "json", "storage-node", "status")
        assert status.returncode == 0 and status.stdout.count('"running": "yes"') == 3
    finally:
        down = dfs_cer(tmp_path, "storage-node", "down")
    assert down.returncode == 0, down.stderr
    assert "stopped 3 of 3 storage nodes" in down.stdout
    give_up = time.monotonic() + 10
    while any(alive(pid) for pid in nodes["pids"]) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in nodes["pids"])
    assert not (tmp_path / ".dfs-cer/nodes/nodes.json").exists()
    assert token.exists()  # kept for the next up

    gone = dfs_cer(tmp_path, "query", QUERY)
    assert gone.returncode == 2
    assert gone.stderr.startswith("error: no storage nodes to ask: give --endpoints and")
    assert "dfs-cer storage-node up --shards DIR" in gone.stderr


def test_up_refuses_what_it_cannot_start(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    cases = {
        ("--shards", "missing"): "--shards missing is not a directory",
        ("--shards", "empty"): "holds no shard set",
        (): "give --shards DIR (the output of dfs-cer shard) or --table REF",
    }
    for args, message in cases.items():
        out = dfs_cer(tmp_path, "storage-node", "up", *args)
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr
    table = stock_events(500, keys=20, seed=1)
    pcsv.write_csv(table, tmp_path / "t.csv")
    assert (
        dfs_cer(tmp_path, "shard", "--input", "t.csv", "--nodes", "2", "--to", "s").returncode == 0
    )
    out = dfs_cer(tmp_path, "storage-node", "up", "--shards", "s", "--nodes", "3")
    assert (
        out.returncode == 2 and "holds 2 shard sets, one per node, but --nodes is 3" in out.stderr
    )


def test_a_node_without_its_token_fails_before_loading_rows(tmp_path: Path) -> None:
    out = dfs_cer(
        tmp_path, "storage-node", "serve", "--data", "nowhere", "--port", "0", "--token-file", "tok"
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: cannot read the token file tok (No such file or directory): make one with "
        "dfs-cer storage-node token tok"
    )
    made = dfs_cer(tmp_path, "storage-node", "token", "tok")
    assert made.returncode == 0 and made.stdout.strip() == "wrote a new token in tok"
    before = (tmp_path / "tok").read_text()
    assert (
        dfs_cer(tmp_path, "storage-node", "token", "tok").stdout.strip() == "kept the token in tok"
    )
    assert (tmp_path / "tok").read_text() == before


def test_a_storage_node_directory_in_the_working_directory_does_not_shadow_the_node(
    tmp_path: Path,
) -> None:
    """Nodes start as ``python -P -m storage_node.server``: a ``storage_node`` directory where
    the user stands (an old copy, say) is not what runs."""
    fake = tmp_path / "storage_node"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "server.py").write_text("raise SystemExit('the copy in the working directory ran')\n")
    pcsv.write_csv(stock_events(300, keys=5, seed=2), tmp_path / "t.csv")
    assert (
        dfs_cer(tmp_path, "shard", "--input", "t.csv", "--nodes", "1", "--to", "s").returncode == 0
    )
    up = dfs_cer(tmp_path, "storage-node", "up", "--shards", "s", "--metrics")
    try:
        assert up.returncode == 0, up.stderr
        # --metrics: each node's Prometheus endpoint, listed by status
        status = json.loads(dfs_cer(tmp_path, "--output", "json", "storage-node", "status").stdout)
        url = status["rows"][0]["metrics"]
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert b"dfs_cer_node_queries_open 0.0" in reply.read()
    finally:
        assert dfs_cer(tmp_path, "storage-node", "down").returncode == 0


def test_a_token_file_open_to_others_is_made_0600_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing token file readable by others is made 0600, said on stderr; one of another
    user is refused, naming its mode and the fix."""
    from dfs_cer.errors import StorageError
    from storage_node.daemons import write_token

    token = tmp_path / "tok"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    token.chmod(0o644)
    out = dfs_cer(tmp_path, "storage-node", "token", "tok")
    assert out.returncode == 0 and out.stdout.strip() == "kept the token in tok"
    assert out.stderr == "note: the token file tok was readable by others: made it 0600\n"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert token.read_text() == "0123456789abcdef0123456789abcdef\n"
    again = dfs_cer(tmp_path, "storage-node", "token", "tok")
    assert again.returncode == 0 and again.stderr == ""
    token.chmod(0o640)
    monkeypatch.setattr(os, "getuid", lambda: token.stat().st_uid + 1)
    with pytest.raises(StorageError, match=r"tok has mode 0640 .* run chmod 600 .*tok"):
        write_token(token)
    assert stat.S_IMODE(token.stat().st_mode) == 0o640


def test_a_kept_token_too_short_for_a_node_is_refused(tmp_path: Path) -> None:
    """``token`` said it kept a 7-character token, which every node then refused at start."""
    (tmp_path / "t1").write_text("secret7\n")
    out = dfs_cer(tmp_path, "storage-node", "token", "t1")
    assert out.returncode == 2, out
    assert "the token in t1 is too short (7 characters): a node needs at least 16" in out.stderr
    assert "Traceback" not in out.stderr


def running_in(root: Path) -> list[int]:
    """Storage node processes whose command line names a path under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            named = b"storage_node.server" in cmdline and str(root).encode() in cmdline
            if named and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def gone(root: Path) -> bool:
    give_up = time.monotonic() + 15
    while running_in(root) and time.monotonic() < give_up:
        time.sleep(0.05)
    return not running_in(root)


def test_up_is_alone_on_its_directory_and_down_stops_all_it_started(tmp_path: Path) -> None:
    """An up while another holds the directory is refused at once, naming the other's pid; of two
    ups at once one starts the nodes; the token reused is made 0600; down stops every process,
    and a lock left by a process that ended blocks nothing."""
    from storage_node.daemons import lock_dir

    pcsv.write_csv(stock_events(400, keys=5, seed=4), tmp_path / "t.csv")
    assert (
        dfs_cer(tmp_path, "shard", "--input", "t.csv", "--nodes", "2", "--to", "s").returncode == 0
    )
    root = tmp_path / ".dfs-cer/nodes"
    with lock_dir(root, "up"):
        held = dfs_cer(tmp_path, "storage-node", "up", "--shards", "s")
    assert held.returncode == 1 and held.stderr == (
        f"error: another dfs-cer storage-node up (pid {os.getpid()}) is using {root}: wait for it "
        "to finish, or use another --dir\n"
    )
    assert not running_in(tmp_path) and not (root / "started.json").exists()
    (root / "token").write_text("0123456789abcdef0123456789abcdef\n")
    (root / "token").chmod(0o644)
    ups = [
        subprocess.Popen(
            [str(EXE), "storage-node", "up", "--shards", "s"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        done = [p.communicate(timeout=180) for p in ups]
        codes = sorted(p.returncode for p in ups)
        assert codes == [0, 1], done
        refused = next(err for (_, err), p in zip(done, ups, strict=True) if p.returncode)
        assert "another dfs-cer storage-node up (pid " in refused or "down first" in refused
        assert any("note: the token file" in err for _, err in done)
        assert stat.S_IMODE((root / "token").stat().st_mode) == 0o600
        assert len(running_in(tmp_path)) == 2
    finally:
        down = dfs_cer(tmp_path, "storage-node", "down")
    assert down.returncode == 0 and "stopped 2 of 2 storage nodes" in down.stdout, down
    assert gone(tmp_path)
    again = dfs_cer(tmp_path, "storage-node", "down")  # the lock file stays: nothing holds it
    assert again.returncode == 0 and again.stdout.startswith("no storage nodes")


def test_down_stops_the_nodes_of_an_up_that_died_halfway(tmp_path: Path) -> None:
    """An up killed while its nodes start leaves a record of them: down stops every one."""
    pcsv.write_csv(stock_events(400, keys=5, seed=5), tmp_path / "t.csv")
    assert (
        dfs_cer(tmp_path, "shard", "--input", "t.csv", "--nodes", "2", "--to", "s").returncode == 0
    )
    root = tmp_path / ".dfs-cer/nodes"
    up = subprocess.Popen(
        [str(EXE), "storage-node", "up", "--shards", "s"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = root / "started.json"
    try:
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up and not (
            record.exists() and len(json.loads(record.read_text())) == 2
        ):
            time.sleep(0.002)
        assert record.exists()  # both nodes started, neither ready yet: the up is under way
        up.kill()
        up.wait()
        assert not (root / "nodes.json").exists() and len(running_in(tmp_path)) == 2
    finally:
        down = dfs_cer(tmp_path, "storage-node", "down")
    assert down.returncode == 0, down.stderr
    assert "stopped 2 of 2 storage nodes" in down.stdout, down.stdout
    assert gone(tmp_path)
