"""Front-end throughput: parse + analyze of the paper-style queries.

Command:  .venv/bin/python bench/frontend.py [--seconds 2] [--json]
Hardware: whatever runs it (figures in bench/RESULTS.md name the machine).
Runtime:  about 2 s per query shape.
Output:   queries per second for parse() and for parse() + analyze(), per query shape.

A query is parsed once per job, so this is not a hot path; the figure guards against the front
end becoming a visible share of a short query's latency (it should stay well under 1 ms).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dfs_cer import analyze, parse
from tests.fixtures.queries import CORPUS


def rate(fn: object, seconds: float) -> float:
    assert callable(fn)
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {}
    for name, sql in CORPUS.items():
        results[name] = {
            "parse_per_s": rate(lambda sql=sql: parse(sql), args.seconds),
            "parse_analyze_per_s": rate(lambda sql=sql: analyze(parse(sql)), args.seconds),
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}"
    )
    print(f"{'query':<20} {'parse/s':>10} {'parse+analyze/s':>16} {'ms each':>8}")
    for name, r in results.items():
        print(
            f"{name:<20} {r['parse_per_s']:>10.0f} {r['parse_analyze_per_s']:>16.0f} "
            f"{1000 / r['parse_analyze_per_s']:>8.2f}"
        )


if __name__ == "__main__":
    main()
