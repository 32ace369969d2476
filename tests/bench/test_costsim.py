"""The cloud cost projection: its fit recovers a known model, and the script runs on the
recorded node runs, stating its error and writing the table and plots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import costsim  # noqa: E402


def summary(n: int, e: int) -> dict[str, object]:
    """A strategy whose bytes and phases follow the model exactly (2 cores, 1 Gbit/s links)."""
    bsn, bcn = 100.0 * n + 1e-4 * n * e, 50.0 * n + 0.02 * e
    events = 1e-3 * e
    par = min(n, 2)
    phases = {
        "open": 0.01 + 2e-8 * e / par,
        "filter": 0.02 + 0.003 * n + costsim.transfer_seconds(bsn, n, 1.0, None),
        "pull": 0.001 + 1e-9 * bcn + costsim.transfer_seconds(bcn, n, 1.0, None),
        "match": 1e-6 * events,
    }
    return {
        "bytes_to_sn": bsn,
        "bytes_to_cn": bcn,
        "bytes": bsn + bcn,
        "events": events,
        "rounds": 5,
        "phases": phases,
        "latency": sum(phases.values()),
    }


def test_the_fit_recovers_a_model_it_can_express() -> None:
    points = [
        costsim.Point(n, e, summary(n, e)) for n in (1, 2, 3, 4, 6) for e in (3_000_000, 10_000_000)
    ]
    model = costsim.Model(points, cores=2, node_gbit=1.0)
    assert np.allclose(model.coef["bytes_to_sn"], [100.0, 1e-4, 0.0], rtol=1e-6, atol=1e-9)
    assert np.allclose(model.coef["open"], [0.01, 2e-8], rtol=1e-6)
    for p in points:
        got = model.predict(p.nodes, p.events, min(p.nodes, 2), 1.0, None)
        assert (
            abs(got["latency"] - p.s["latency"]) < 1e-9 and abs(got["bytes"] - p.s["bytes"]) < 1e-3
        )
    # more nodes on their own machines: the scan shrinks with them, the broadcast grows
    small, big = (model.predict(n, 1e9, n, 1.0, 10.0) for n in (10, 1000))
    assert big["open"] < small["open"] and big["bytes_to_sn"] > 50 * small["bytes_to_sn"]


def test_nnls_keeps_coefficients_non_negative() -> None:
    x = np.arange(1.0, 9.0)
    coef = costsim.nnls([x, np.ones_like(x)], 2 * x - 3)  # the best fit has a negative intercept
    assert (coef >= 0).all() and coef[1] == 0


def test_the_script_projects_the_recorded_runs(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "bench/costsim.py",
            "--node-counts",
            "10,100",
            "--event-counts",
            "1000000000",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads((tmp_path / "costsim.json").read_text())
    assert {r["strategy"] for r in figures["projection"]} == {"push_down", "push_pull", "dfs"}
    assert all(r["cost"] > 0 and r["latency"] > 0 for r in figures["projection"])
    assert all(0 <= figures["holdout_error"][s]["latency_mean"] < 1 for s in costsim.STRATEGIES)
    assert (tmp_path / "fig_costsim.png").stat().st_size > 0 and (
        tmp_path / "fig_costsim_fit.png"
    ).exists()
    assert "$ per query" in out.stdout


def scale_json(path: Path, events: int, codec: str = "zstd") -> Path:
    """bench/scale.py --json's shape, bytes and seconds following scalefit's model exactly."""
    cands = 2e-3 * events
    points = []
    for s, k in (("push_down", 3.0), ("push_pull", 2.0), ("dfs", 1.0)):
        for n in (3, 12, 48, 96):
            actions = {"open": 700.0 * n, "wjf": 1e-3 * k * n * cands, "pull": k * 5.0 * cands}
            points.append(
                {"workload": "default", "layout": "random", "compression": codec,
                 "strategy": s, "nodes": n, "bytes_by_action": actions,
                 "bytes": sum(actions.values()), "latency_s": 0.05 + 0.002 * n + 1e-6 * cands / 2}
            )  # fmt: skip
    doc = {
        "events": events,
        "date": "2026-11-26",
        "lower_bound": {"default": {"candidates": cands}},
        "points": points,
    }
    path.write_text(json.dumps(doc))
    return path


def test_calibrate_fits_scale_runs_and_checks_held_out_node_counts(tmp_path: Path) -> None:
    runs = [scale_json(tmp_path / f"scale-{e}.json", e) for e in (200_000, 1_000_000)]
    out = subprocess.run(
        [
            sys.executable,
            "bench/costsim.py",
            "--calibrate",
            ",".join(map(str, runs)),
            "--node-counts",
            "10,100,1000",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads((tmp_path / "costsim-scale.json").read_text())
    for s in ("push_down", "push_pull", "dfs"):
        held = figures["holdout"][s]
        assert held["fit_on"] == [3, 12, 48] and held["checked_on"] == 96
        assert held["bytes_max"] < 1e-6 and held["seconds_max"] < 1e-6  # the model it can express
        assert figures["leave_one_out"][s]["bytes_max"] < 1e-6
    rows = {(r["strategy"], r["nodes"], r["events"]): r for r in figures["projection"]}
    assert len(rows) == 3 * 3 * 2  # 10 / 100 / 1,000 nodes, 1B and 10B events
    # dfs's broadcast terms are the smallest here; the projection keeps the fitted order
    assert rows[("dfs", 1000, 10**10)]["bytes"] < rows[("push_down", 1000, 10**10)]["bytes"]
    big, small = rows[("dfs", 1000, 10**10)], rows[("dfs", 10, 10**10)]
    # the filters' bytes per node and candidate, at 2e-3 candidates per event
    assert big["bytes_variable"] == pytest.approx(1e-3 * 1000 * 2e7 + 5.0 * 2e7)
    assert big["bytes_variable"] > small["bytes_variable"] and big["seconds"] > 0
    assert big["bytes_low"] == big["bytes"]  # two event counts: one reading
    assert big["bytes_fixed"] == pytest.approx(700.0 * 1000)  # one open reply per node
    assert "| strategy | fit on nodes | checked on |" in out.stdout


def test_calibrate_names_what_is_missing(tmp_path: Path) -> None:
    run = scale_json(tmp_path / "scale.json", 200_000, codec="none")
    out = subprocess.run(
        [sys.executable, "bench/costsim.py", "--calibrate", str(run), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode != 0 and "codec 'zstd'" in out.stderr
