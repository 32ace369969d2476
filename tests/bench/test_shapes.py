"""bench/shapes.py: DuckDB's MATCH_RECOGNIZE shapes run, and each finds the matches its data
implies."""

from __future__ import annotations

from bench.shapes import SHAPES, main


def test_every_shape_runs_and_finds_its_matches() -> None:
    runs = {r["shape"]: r for r in main(["--scale", "0.01"])["runs"]}
    assert set(runs) == set(SHAPES)
    # v = i % 5: one (0, 1) pair every 5 rows, in one partition or in partitions of 100
    assert runs["scan"]["rows_out"] == runs["scan"]["rows"] // 5
    assert runs["partitions"]["rows_out"] == runs["partitions"]["rows"] // 5
    assert all(
        r["seconds"] > 0 and r["duckdb_16_cores"] < r["trino_16_cores"] for r in runs.values()
    )
