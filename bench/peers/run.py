"""Peers side by side: pycer, bobocep, PyFlink and pandas-match-recognize, each in its own
virtual environment (they pin conflicting versions), on the same events as dfs-cer, with the
results checked against dfs-cer's engine under the peer's semantics.

Command:  .venv/bin/python bench/peers/run.py [--json] [--only pycer,bobocep] [--scale 1.0]
Runtime:  first run about 3 minutes of installs (PyFlink is about 800 MB), then 2-5 minutes.
Output:   per peer: events, matches, seconds, events/s, and dfs-cer's events/s on the same events;
          ``--json`` prints ``<peer>_rows_per_s`` keys (merged into bench/engines.py --json).

Sizes per peer (the slower ones get fewer events, as the issue allows): pycer 1M, bobocep 200k,
PyFlink 20k, pandas-match-recognize 1k (it is quadratic: 2k events took 5 minutes here).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENVS = ROOT / "bench" / ".peers"
sys.path.insert(0, str(ROOT))

PEERS = {
    # name: (python minor version, pip requirement, script, events, our engine, skip)
    "pycer": ("3.13", ["pycer==0.1.6"], "pycer_peer.py", 1_000_000, "cer_any", None),
    "bobocep": ("3.12", ["bobocep==1.2.2"], "bobocep_peer.py", 200_000, "cer_next", None),
    "pyflink": (
        "3.12",
        ["--prefer-binary", "apache-flink==2.3.0"],
        "flink_peer.py",
        20_000,
        "sql",
        "SKIP TO NEXT ROW",
    ),
    "pandas_match_recognize": (
        "3.12",
        ["pandas-match-recognize==0.2.5"],
        "pmr_peer.py",
        1_000,
        "sql",
        "SKIP TO NEXT ROW",
    ),
}

CER = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b, C.ts AS c "
    "ALL MATCHES PATTERN (A B C) WITHIN INTERVAL '3' MINUTE DEFINE A AS A.type = 'T_01' AND "
    "A.a1 <= 200, B AS B.type = 'T_02' AND B.a1 <= 200, C AS C.type = 'T_03' AND C.a1 <= "
    "200 AND C.a2 = B.a2)"
)
SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, B.ts AS b, C.ts AS c "
    "ONE ROW PER MATCH AFTER MATCH {skip} PATTERN (A X*? B Y*? C) WITHIN INTERVAL '3' "
    "MINUTE DEFINE A AS A.type = 'T_01' AND A.a1 <= 200, B AS B.type = 'T_02' AND B.a1 <= "
    "200, C AS C.type = 'T_03' AND C.a1 <= 200 AND C.a2 = B.a2)"
)


def find_python(minor: str) -> str | None:
    for pattern in (
        f"/root/.pyenv/versions/{minor}.*/bin/python",
        f"/usr/bin/python{minor}",
        f"/usr/local/bin/python{minor}",
    ):
        found = sorted(glob.glob(pattern))
        if found:
            return found[-1]
    return None


def ensure_venv(name: str, minor: str, requirements: list[str]) -> Path | None:
    venv = VENVS / name
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists() and stamp.read_text() == " ".join(requirements):
        return python
    base = find_python(minor)
    if base is None:
        print(f"  {name}: Python {minor} not found, skipped", file=sys.stderr)
        return None
    print(f"  {name}: creating {venv} (Python {minor}) ...", file=sys.stderr, flush=True)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    stamp.write_text(" ".join(requirements))
    return python


def events_csv(table: object, path: Path) -> None:
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    rows = table.select(["type", "a1", "a2", "ts"])
    ts = rows.column("ts").cast(pa.int64()).to_pylist()
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["type", "a1", "a2", "ts"])
        w.writerows(
            zip(
                rows.column("type").to_pylist(),
                rows.column("a1").to_pylist(),
                rows.column("a2").to_pylist(),
                ts,
                strict=True,
            )
        )


def ours(table: object, mode: str, skip: str | None) -> tuple[list[list[int]], float]:
    import pyarrow as pa

    from dfs_cer import analyze, parse
    from dfs_cer.match.cer.engine import run_cer
    from dfs_cer.match.rowpattern.engine import run_row_pattern

    assert isinstance(table, pa.Table)
    sql = CER if mode.startswith("cer") else SQL.format(skip=skip)
    analysis = analyze(parse(sql), table.schema)

    def go() -> object:
        if mode == "cer_any":
            return run_cer(table, analysis)
        if mode == "cer_next":
            return run_cer(table, analysis, selection="skip_till_next_match")
        return run_row_pattern(table, analysis)

    go()
    start = time.perf_counter()
    out = go()
    seconds = time.perf_counter() - start
    rel = out.table  # type: ignore[attr-defined]
    ms = [
        c.cast(pa.int64()).to_pylist() for c in (rel.column("a"), rel.column("b"), rel.column("c"))
    ]
    return sorted([list(t) for t in zip(*ms, strict=True)]), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated peers")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every peer's event count"
    )
    parser.add_argument("--timeout", type=int, default=900)
    args = parser.parse_args()
    from dfs_cer.datasets import synthetic_events

    chosen = [p for p in PEERS if not args.only or p in args.only.split(",")]
    largest = max(int(PEERS[p][3] * args.scale) for p in chosen)
    events = synthetic_events(largest).sort_by("ts")
    figures: dict[str, object] = {}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            minor, reqs, script, n, mode, skip = PEERS[name]
            n = int(n * args.scale)
            python = ensure_venv(name, minor, reqs)
            if python is None:
                continue
            table = events.slice(0, n)
            data = Path(tmp) / f"{name}.csv"
            events_csv(table, data)
            result = Path(tmp) / f"{name}.json"
            env = {**os.environ, "PYTHONPATH": str(HERE)}
            cmd = [str(python), str(HERE / script), str(data), str(result)] + (
                [skip] if skip else []
            )
            proc = subprocess.run(
                cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=args.timeout
            )
            if proc.returncode != 0 or not result.exists():
                print(f"  {name}: failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            peer = json.loads(result.read_text())
            mine, my_seconds = ours(table, mode, skip)
            equal_count = peer["matches"] == len(mine)
            equal_rows = sorted(peer["triples"]) == mine
            figures[f"{name}_rows_per_s"] = n / peer["seconds"]
            figures[f"{name}_events"] = n
            figures[f"{name}_matches"] = peer["matches"]
            figures[f"{name}_results_equal"] = equal_rows
            figures[f"{name}_dfs_cer_rows_per_s"] = n / my_seconds
            lines.append(
                f"| {name} ({peer['semantics']}) | {n:,} | {peer['matches']} | "
                f"{peer['seconds']:.2f} s | {n / peer['seconds']:,.0f} | "
                f"{n / my_seconds:,.0f} | "
                f"{'yes' if equal_rows else ('count only' if equal_count else 'NO')} |"
            )
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        "| peer (semantics) | events | matches | peer time | peer events/s | dfs-cer "
        "events/s | same matches |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
