"""bench/pathological.py: every family runs, pruned ones finish and the unprunable one ends with
the step budget's error."""

from __future__ import annotations

import json
from pathlib import Path

from bench.pathological import FAMILIES, main


def test_every_family_finishes_or_meets_the_budget(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    figures = main(["--rows", "300,1200", "--max-steps", "400000", "--json", str(out)])
    got = {(r["family"], r["rows"]): r["outcome"] for r in figures["runs"]}
    assert set(got) == {(f, n) for f in FAMILIES for n in (300, 1200)}
    # pruned: linear work, far below 400,000 steps even at 1,200 rows (running aggregates and
    # navigation included)
    for family in set(FAMILIES) - {"nav_offset"}:
        assert got[(family, 1200)] == "ok", family
    assert got[("nav_offset", 1200)] == "budget"  # every split kept apart: cubic work, stopped
    assert json.loads(out.read_text())["max_steps"] == 400_000
