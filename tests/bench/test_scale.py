"""bench/scale.py at smoke scale: every figure the scale runs report is there, each strategy
returned exactly the local engine's matches (DFS the same rows as push-down), and the bytes per
storage node add up to the trace's totals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import scale

POINT_KEYS = {
    "workload",
    "layout",
    "nodes",
    "compression",
    "strategy",
    "bytes",
    "bytes_to_sn",
    "bytes_to_cn",
    "bytes_by_action",
    "node_bytes_mean",
    "node_bytes_max",
    "node_bytes_sum",
    "rounds",
    "events",
    "pull_s",
    "latency_s",
    "matches",
    "exact",
    "per_query_bytes",
}


def test_scale_smoke_json_is_complete_and_exact(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--events", "20000", "--nodes", "2,3", "--queries", "2", "--layouts", "time"]
    figures = scale.main([*argv, "--json"])
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(figures))
    for key in ("events", "nodes", "compression", "lower_bound", "points", "ratios", "growth"):
        assert key in figures
    assert figures["nodes"] == [2, 3] and figures["compression"] == ["zstd", "none"]
    points = figures["points"]
    # 2 workloads x 2 node counts x 2 codecs x 3 strategies
    assert len(points) == 24 and all(set(p) >= POINT_KEYS for p in points)
    at = {(p["workload"], p["nodes"], p["compression"], p["strategy"]): p for p in points}
    matched = 0
    for (w, n, c, s), p in at.items():
        assert p["exact"], (w, n, c, s)
        assert p["matches"] == at[(w, n, c, "push_down")]["matches"]
        matched += p["matches"] > 0
        assert p["node_bytes_sum"] == p["bytes"] > 0  # every node's transfers, nothing else
        assert p["node_bytes_mean"] <= p["node_bytes_max"] <= p["bytes"]
        assert sum(p["bytes_by_action"].values()) == pytest.approx(p["bytes"])
        assert p["rounds"] >= 1 and p["latency_s"] >= p["pull_s"] > 0
    assert matched, "some query matched (exactness was checked on real rows)"
    assert figures["exact"] is True
    # the product's codec is compressed: push-down's pulled rows take fewer bytes under zstd
    assert (
        at[("navigation", 3, "zstd", "push_down")]["bytes"]
        < (at[("navigation", 3, "none", "push_down")]["bytes"])
    )
    for r in figures["ratios"]:
        assert r["dfs_over_push_down"] > 0 and r["dfs_over_push_pull"] > 0
    assert {(g["strategy"], g["from_nodes"], g["to_nodes"]) for g in figures["growth"]} == {
        (s, 2, 3) for s in ("push_down", "push_pull", "dfs")
    }
    assert figures["lower_bound"]["navigation"]["matches"] > 0
    assert "| workload | layout | nodes |" in scale.markdown(figures)


def test_scale_names_a_bad_option() -> None:
    with pytest.raises(SystemExit, match="--layouts 'hash'"):
        scale.main(["--layouts", "hash"])


def test_strategies_reports_zstd_first_and_uncompressed_beside_it() -> None:
    """bench/strategies.py's default: every figure under zstd (the product's codec), each
    strategy's bytes uncompressed (the paper's comparison) beside them, the old keys kept."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "bench/strategies.py", "--events", "20000", "--queries", "1",
         "--strategies", "dfs", "--json"],
        capture_output=True, text=True, cwd=root, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    f = json.loads(out.stdout)
    assert f["compression"] == "zstd" and f["codecs"] == ["zstd", "none"]
    for s in ("push_down", "push_pull", "dfs", "lower_bound"):
        assert f[f"mean_{s}_bytes"] == f[f"mean_{s}_bytes_zstd"] or s == "lower_bound"
        assert f"mean_{s}_bytes_none" in f
    assert f["mean_push_down_bytes_zstd"] < f["mean_push_down_bytes_none"]
    for key in ("dfs_over_pushdown_bytes", "dfs_over_pushpull_bytes", "dfs_over_lower_bound_bytes"):
        assert f[f"{key}_zstd"] > 0 and f[f"{key}_none"] > 0 and key in f
    assert f["dfs_over_pushdown_bytes"] == f["dfs_over_pushdown_bytes_zstd"]
