"""bench/spark_scale.py runs end to end on a small log (the recorded figures come from 10M/50M)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import spark_scale


def test_spark_scale_small(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    assert (
        spark_scale.main(
            [
                "--events",
                "300000",
                "--cores",
                "1",
                "--sources",
                "data",
                "--work",
                str(tmp_path),
                "--json",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    (run,) = json.loads(out.read_text())["results"]
    assert run["mode"] == "time" and run["chunks"] >= 2 and run["matches"] > 1000
    assert run["driver_rows"] <= 4 * run["chunks"] and run["driver_peak_rss_mb"] > 0
    assert (tmp_path / "fig_spark_scale.png").stat().st_size > 0
