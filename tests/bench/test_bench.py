"""The evaluation harness: bench/run.py end to end at smoke scale, and bench/net.sh's
rate-limited namespaces with storage nodes inside them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dfs_cer.datasets import synthetic_events
from dfs_cer.io.shard import shard
from dfs_cer.strategies import pull
from storage_node.launcher import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
NET = {"DFS_NET_PREFIX": "dfstst", "DFS_NET_SUBNET": "10.79"}  # apart from a benchmark's namespaces


def test_run_quick_writes_tables_plots_and_headline(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--quick",
            "--sections",
            "main,memory",
            "--json",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    head = json.loads(out.stdout[out.stdout.index("{") :])
    for key in (
        "transmission_vs_pushdown",
        "transmission_vs_pushpull",
        "latency_vs_best_baseline",
        "sn_memory_vs_pushdown",
    ):
        assert head[key] > 0 and key in head["targets_met"]
    assert head["transmission_vs_pushdown"] < 1  # DFS moves fewer bytes than push-down even at 200k
    # the product's codec first (every figure), the paper's uncompressed bytes beside it
    assert head["mode"] == "loopback-zstd"
    for codec in ("zstd", "none"):
        assert f"transmission_vs_pushdown_{codec}" in head["targets_met"]
    assert head["transmission_vs_pushdown_zstd"] == head["transmission_vs_pushdown"]
    results = json.loads((tmp_path / "run-loopback-zstd.json").read_text())
    assert results["compression"] == ["zstd", "none"]
    dfs = results["main"]["dfs"]["summary"]
    p = dfs["phases"]
    assert set(p) == {"open", "filter", "pull", "match", "cn", "nodes", "wire"}
    # the round trips split into the nodes' own time and the wire's (the CN's comes before)
    assert p["nodes"] + p["wire"] == pytest.approx(p["open"] + p["filter"] + p["pull"], rel=0.05)
    assert all(s["summary"]["matches"] == dfs["matches"] for s in results["main"].values())  # exact
    for s in results["main"].values():  # pushed-down rows shrink under zstd, none are lost
        assert set(s["summary"]["bytes_by_codec"]) == {"zstd", "none"}
    pd = results["main"]["push_down"]["summary"]["bytes_by_codec"]
    assert pd["zstd"] < pd["none"]
    text = (tmp_path / "run-loopback-zstd.md").read_text()
    assert "| strategy | MB (both ways)" in text and "| MB, zstd | vs push-down, zstd |" in text
    for fig in ("fig_transmission", "fig_latency", "fig_memory"):
        assert (tmp_path / f"{fig}-loopback-zstd.png").stat().st_size > 10_000
    bad = subprocess.run(
        [sys.executable, "bench/run.py", "--sections", "main,charts"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode != 0 and "unknown section 'charts'" in bad.stderr


def _net(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "bench" / "net.sh"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **NET},
        timeout=60,
    )


@pytest.fixture
def namespaces() -> Iterator[dict[str, object]]:
    up = _net("up", "--nodes", "2", "--rate", "100mbit")
    assert up.returncode == 0, up.stderr
    try:
        yield json.loads(up.stdout)
    finally:
        assert _net("down").returncode == 0


def test_net_sh_shapes_links_to_storage_nodes_in_namespaces(
    namespaces: dict[str, object], tmp_path: Path
) -> None:
    from bench.harness import NetConfig, wire_bytes

    net = NetConfig.load(Path("/run/dfstst-cer-net.json"))
    assert net.namespaces == ["dfstst-sn0", "dfstst-sn1"] and net.hosts == [
        "10.79.0.2",
        "10.79.1.2",
    ]
    pq.write_table(synthetic_events(60_000), tmp_path / "e.parquet")
    shard(str(tmp_path / "e.parquet"), 2, str(tmp_path / "n"), name="t")
    dirs = [str(tmp_path / "n" / f"node-{i:02d}") for i in range(2)]
    with LocalCluster(dirs, netns=net.namespaces, hosts=net.hosts) as cluster:
        assert cluster.endpoints[0].startswith("grpc+tcp://10.79.0.2:")
        before = wire_bytes(net.devices)
        started = time.perf_counter()
        result = pull(
            "pull_all",
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ALL MATCHES "
            "PATTERN (A B) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.type = 'T_01', "
            "B AS B.type = 'T_02')",
            cluster.endpoints,
            cluster.token,
        )
        seconds = time.perf_counter() - started
        wire = wire_bytes(net.devices) - before
    payload = result.trace.bytes_to_cn + result.trace.bytes_to_sn
    assert payload <= wire <= payload * 1.2  # TCP/IP headers on top of the payload
    assert seconds >= 0.8 * payload / (2 * 100e6 / 8)  # two 100 Mbit/s links cap the transfer
    status = json.loads(_net("status").stdout)
    assert status["nodes"] == 2 and status["rate"] == "100mbit"
    assert _net("up", "--nodes", "0").returncode == 2


def test_chaos_smoke_every_fault_once(tmp_path: Path) -> None:
    """bench/chaos.py: one query per fault kind; nothing wrong, unclear or left behind."""
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [
            sys.executable,
            "bench/chaos.py",
            "--queries",
            "7",
            "--events",
            "6000",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(out.read_text())["summary"]["all"]
    assert summary["queries"] == 7
    assert summary["wrong"] == summary["unclear error"] == summary["leaked"] == 0
    assert summary["worst_seconds_to_error"] <= 10 + 5


def test_navigation_workload_smoke() -> None:
    """bench/strategies.py --workload navigation at a toy size: every part runs and reports."""
    sys.path.insert(0, str(ROOT / "bench"))
    import navigation

    figures = navigation.run(6000, 1, 3, "adaptive", lambda *_: None)
    assert {"a", "b", "c", "d"} <= set(figures)
    assert figures["a"]["dfs"]["rows"] == figures["a"]["pull_all"]["rows"]
    d = figures["d"]
    assert any(
        "checked on the storage nodes (partitions)" in p for p in d["ticks by key"]["dfs_path"]
    )
    assert any(
        "checked on the storage nodes (time)" in p for p in d["synthetic by time"]["dfs_path"]
    )
    assert any("no variable in every match" in f for f in d["ticks random"]["dfs_fallback"])
    for layout in (
        "ticks by key",
        "ticks by time",
        "ticks random",
        "synthetic by time",
        "synthetic random",
    ):
        assert d[layout]["dfs"]["rows"] == d[layout]["pull_all"]["rows"]
