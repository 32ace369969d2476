"""The round-trip cost model and its calibration."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dfs_cer.errors import ConfigError
from dfs_cer.plan.cost import FIXED, CostInputs, CostModel


def inputs(**changes: float) -> CostInputs:
    base = dict(
        variable="B",
        middle=False,
        count=1000,
        span=1_000_000.0,
        window=100,
        covered=200_000.0,
        event_rate=1.0,
        equalities=0,
        join_keys=0,
        swf_bytes=4096,
        wjf_bytes=0,
        nodes=3,
        event_bytes=64.0,
    )
    base.update(changes)
    return CostInputs(**base)  # type: ignore[arg-type]


def test_fixed_switches() -> None:
    x = inputs()
    assert CostModel("always_on").decide(x).run and not CostModel("always_off").decide(x).run
    # naive: run iff the expected shrink e^{-λw} exceeds 15%
    assert CostModel("naive").decide(x).run == (math.exp(-1000 / 1_000_000 * 100) > 0.15)
    assert not CostModel("naive").decide(inputs(count=100_000)).run  # e^{-10}


def test_adaptive_weighs_benefit_against_harm() -> None:
    model = CostModel("adaptive")
    sparse = model.decide(inputs())  # few events of B: most of the interval set goes away
    assert sparse.run and sparse.benefit_s > sparse.harm_s
    dense = model.decide(inputs(count=200_000))  # B everywhere: nothing shrinks, verification costs
    assert not dense.run and dense.benefit_s < dense.harm_s
    # a slower network makes the same round trip worth more
    slow = CostModel("adaptive", {**FIXED, "rate_bytes_per_s": 1e6}).decide(inputs(count=20_000))
    fast = CostModel("adaptive", {**FIXED, "rate_bytes_per_s": 1e11}).decide(inputs(count=20_000))
    assert slow.benefit_s > fast.benefit_s


def test_calibration_tables_are_interpolated(tmp_path: Path) -> None:
    doc = {
        "tables": {"c_p1": [[1000, 20e-9], [100_000, 10e-9]]},
        "beta": {"cer": 1e-6, "rowpattern": 3e-6},
    }
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    model = CostModel.load("adaptive", str(path), engine="rowpattern")
    assert model.per_event("c_p1", 50_500) == pytest.approx(15e-9)
    assert model.per_event("c_p1", 10) == pytest.approx(20e-9)  # clamped at the ends
    assert model.per_event("c_b", 10) == FIXED["c_b"]  # no table: the reference constant
    assert model.constants["beta"] == 3e-6
    assert CostModel.load("fixed", str(path)).per_event("c_p1", 50_500) == FIXED["c_p1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "unreadable"),
        ('{"tables": {"c_zz": [[1, 1]]}}', "unknown"),
        ('{"tables": {"c_p1": [[0, 1e-9]]}}', "positive sizes"),
    ],
)
def test_bad_calibration_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        CostModel.load("adaptive", str(path))


def test_cost_model_reads_what_calibrate_writes(tmp_path: Path) -> None:
    out = tmp_path / "conf" / "calibration.json"
    exe = str(Path(sys.executable).parent / "dfs-cer")
    run = subprocess.run(
        [exe, "calibrate", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "calibrating" in run.stderr and "beta, cer" in run.stdout
    doc = json.loads(out.read_text())
    assert [n for n, _ in doc["tables"]["c_p1"]] == [1000, 10_000, 100_000]
    model = CostModel.load("adaptive", str(out), engine="cer")
    assert model.constants["beta"] == doc["beta"]["cer"] > 0
    assert all(0 < model.per_event(c, 5000) < 1e-5 for c in ("c_p1", "c_p2", "c_b"))


def test_misestimated_rate_scales_every_estimate() -> None:
    model = CostModel("adaptive").misestimate(10.0)
    assert model.constants["rate_bytes_per_s"] == 10 * FIXED["rate_bytes_per_s"]
    model.probe(1_000_000, 0.01)  # measured 100 MB/s
    assert model.constants["rate_bytes_per_s"] == pytest.approx(1e9)
    with pytest.raises(ConfigError, match="rate_scale must be > 0"):
        CostModel("adaptive").misestimate(0)
