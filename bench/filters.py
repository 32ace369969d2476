"""Filter benchmark: reproduces the paper's Fig. 9 (theoretical vs empirical FPR) and measures
throughput of the shrinking window filter and the window-wise join filter.

Command:  .venv/bin/python bench/filters.py [--json] [--quick]
Hardware: one core of whatever runs it (numba kernels are single-threaded).
Runtime:  about 1 minute (--quick: about 15 s).
Output:   tables of FPR against theory (Theorem 1, Eq. 6) and of operations per second with bits
          per item next to log2(1/eps); plots in bench/results/filters_fpr.png. With --json,
          one JSON object with swf_lookup_per_s, swf_insert_per_s, swf_refresh_per_s,
          wjf_build_int_per_s, wjf_probe_int_per_s, wjf_build_str_per_s, wjf_probe_str_per_s,
          swf_fpr_over_theory_max, wjf_fpr_over_theory_max.

Targets: SWF lookups >= 20 M/s, interval inserts >= 5 M/s, refresh >= 10 M/s; WJF build
>= 5 M keys/s and probe >= 10 M keys/s for integers, >= 1 M/s for strings; every FPR within 1.5x
of theory or below it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa

from dfs_cer.filters import IntervalSet, KeyKind, ShrinkingWindowFilter, WindowJoinFilter
from dfs_cer.filters.sizing import (
    bits_per_item_minimum,
    per_lookup_fpr,
    swf_fpr_theorem1,
    wjf_fpr_eq6,
)

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 1_000_000


def best_of(fn: Callable[[], object], reps: int = 5) -> float:
    fn()  # warm up (numba compiles or loads its cache)
    best = math.inf
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def swf_fpr_sweep(quick: bool) -> list[dict[str, float]]:
    """Fig. 9a: d=4, lf=12, lt=20, w=100, head variable, lambda 0.001..0.04;
    truth from an interval array."""
    rng = np.random.default_rng(42)
    w = 100
    span = 5_000_000 if quick else 20_000_000
    rows = []
    for lam in (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.04):
        ts = np.sort(rng.integers(0, span, rng.poisson(lam * span)))
        exact = IntervalSet.around(ts, 0, w)
        swf = ShrinkingWindowFilter.from_intervals(exact.starts, exact.ends, w)
        probes = rng.integers(0, span, 1_000_000 if quick else 4_000_000)
        false_pos = swf.contains(probes) & ~exact.contains(probes)
        theory = swf_fpr_theorem1(lam, w, load=swf.load_factor)
        rows.append(
            {
                "lambda": lam,
                "load": swf.load_factor,
                "empirical": float(false_pos.mean()),
                "theory": theory,
                "ratio": float(false_pos.mean()) / theory,
            }
        )
    return rows


def wjf_fpr_sweep(quick: bool) -> list[dict[str, float]]:
    """Fig. 9b: n_p = 1e5 pairs, m_b from 5e5 to 1e6 bits, two probed windows;
    truth from a hash set."""
    rng = np.random.default_rng(7)
    n = 100_000
    rows = []
    for bits in (500_032, 600_000, 700_032, 800_000, 900_032, 1_000_000):
        bits = 64 * math.ceil(bits / 64)
        k = max(1, round(bits / n * math.log(2)))
        f = WindowJoinFilter(bits, k, 100, KeyKind.INT)
        f.add(rng.integers(0, 2**40, n), rng.integers(0, 10**7, n) * 100)
        probes = rng.integers(2**41, 2**42, 500_000 if quick else 2_000_000)  # never inserted
        measured = float(
            f.might_contain(probes, rng.integers(0, 10**7, probes.size) * 100, -1).mean()
        )
        theory = wjf_fpr_eq6(bits, k, n)
        rows.append(
            {
                "bits": bits,
                "k": k,
                "empirical": measured,
                "theory": theory,
                "ratio": measured / theory,
            }
        )
    return rows


def speed() -> dict[str, float]:
    """The synthetic workload's regime: 1 event/s in ms, a 3-minute window, variables with about
    3% of the events each (type share x 20% attribute selectivity); 1M events per variable."""
    rng = np.random.default_rng(0)
    w = 180_000
    rate = 0.03 / 1000  # candidate events per ms
    span = int(BATCH / rate)
    first = np.sort(rng.integers(0, span, BATCH))  # the first processed variable (head)
    second = np.sort(rng.integers(0, span, BATCH))  # a later variable, stored in time order
    uniform = rng.integers(0, span, BATCH)
    out: dict[str, float] = {}
    exact = IntervalSet.around(first, 0, w)
    swf = ShrinkingWindowFilter.from_intervals(exact.starts, exact.ends, w)
    out["swf_buckets"] = swf.buckets
    out["swf_lookup_per_s"] = BATCH / best_of(lambda: swf.contains(uniform))
    out["swf_lookup_sorted_per_s"] = BATCH / best_of(lambda: swf.contains(second))

    def insert() -> None:
        fresh = ShrinkingWindowFilter(w, swf.buckets)
        fresh.insert_intervals(first, first + w)

    out["swf_insert_per_s"] = BATCH / best_of(insert)
    out["swf_refresh_per_s"] = BATCH / best_of(lambda: swf.refresh(second, "middle"))
    out["swf_refresh_unsorted_per_s"] = BATCH / best_of(lambda: swf.refresh(uniform, "middle"))
    out["swf_bytes_per_window"] = len(swf.to_bytes()) / max(1, swf.entry_count)

    values = rng.integers(0, 50, BATCH)
    f = WindowJoinFilter.with_estimates(BATCH, w, KeyKind.INT)
    out["wjf_build_int_per_s"] = BATCH / best_of(lambda: f.add(values, first))
    out["wjf_probe_int_per_s"] = BATCH / best_of(lambda: f.might_contain(values, second, -1))
    strings = pa.array(np.array([f"ATTR3_{i:02d}_PADDING" for i in range(50)])[values])
    fs = WindowJoinFilter.with_estimates(BATCH, w, KeyKind.STRING)
    out["wjf_build_str_per_s"] = BATCH / best_of(lambda: fs.add(strings, first), reps=2)
    out["wjf_probe_str_per_s"] = BATCH / best_of(
        lambda: fs.might_contain(strings, second, -1), reps=2
    )
    eps = per_lookup_fpr(0.02)
    out["wjf_bits_per_item"] = f.bits / BATCH
    out["wjf_bits_per_item_minimum"] = bits_per_item_minimum(eps)
    return out


def plot(swf_rows: list[dict[str, float]], wjf_rows: list[dict[str, float]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    lam = [r["lambda"] for r in swf_rows]
    a.plot(lam, [r["theory"] for r in swf_rows], "o-", label="Theorem 1")
    a.plot(lam, [r["empirical"] for r in swf_rows], "s--", label="empirical")
    a.set(
        title="(a) initial SWF, w = 100, d = 4, lf = 12, lt = 20",
        xlabel="λ (events per time unit)",
        ylabel="false-positive rate",
    )
    a.legend()
    bits = [r["bits"] / 1e5 for r in wjf_rows]
    b.semilogy(bits, [r["theory"] for r in wjf_rows], "o-", label="Eq. 6")
    b.semilogy(bits, [r["empirical"] for r in wjf_rows], "s--", label="empirical")
    b.set(
        title="(b) WJF, n_p = 10^5, two probed windows",
        xlabel="m_b (×10^5 bits)",
        ylabel="false-positive rate",
    )
    b.legend()
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "filters_fpr.png"
    fig.savefig(path, dpi=110)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="smaller FPR sweeps")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    swf_rows, wjf_rows = swf_fpr_sweep(args.quick), wjf_fpr_sweep(args.quick)
    figures = speed()
    figures["swf_fpr_over_theory_max"] = max(r["ratio"] for r in swf_rows)
    figures["wjf_fpr_over_theory_max"] = max(r["ratio"] for r in wjf_rows)
    path = None if args.no_plot else plot(swf_rows, wjf_rows)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print("SWF FPR (Fig. 9a): d=4, lf=12, lt=20, w=100, head variable")
    print("| λ | load | empirical | Theorem 1 | ratio |\n|---:|---:|---:|---:|---:|")
    for r in swf_rows:
        print(
            f"| {r['lambda']} | {r['load']:.2f} | {r['empirical']:.5f} | {r['theory']:.5f} "
            f"| {r['ratio']:.2f} |"
        )
    print("\nWJF FPR (Fig. 9b): n_p = 1e5, two probed windows")
    print("| m_b | k | empirical | Eq. 6 | ratio |\n|---:|---:|---:|---:|---:|")
    for r in wjf_rows:
        print(
            f"| {r['bits']} | {r['k']} | {r['empirical']:.5f} | {r['theory']:.5f} | "
            f"{r['ratio']:.2f} |"
        )
    print(
        f"\nThroughput, one core, batches of {BATCH:,} (3-minute window, 1M events of each "
        f"variable at 3% of 1 event/s; SWF with {figures['swf_buckets']:,} buckets)"
    )
    print("| operation | M/s | target |\n|---|---:|---:|")
    for key, target in (
        ("swf_lookup_per_s", 20),
        ("swf_lookup_sorted_per_s", 20),
        ("swf_insert_per_s", 5),
        ("swf_refresh_per_s", 10),
        ("swf_refresh_unsorted_per_s", 10),
        ("wjf_build_int_per_s", 5),
        ("wjf_probe_int_per_s", 10),
        ("wjf_build_str_per_s", 1),
        ("wjf_probe_str_per_s", 1),
    ):
        print(f"| {key} | {figures[key] / 1e6:.1f} | >= {target} |")
    print(
        f"\nWJF bits per item: {figures['wjf_bits_per_item']:.2f} (minimum log2(1/ε) = "
        f"{figures['wjf_bits_per_item_minimum']:.2f} at ε = {per_lookup_fpr(0.02):.4f})"
    )
    print(f"SWF bytes per stored window on the wire: {figures['swf_bytes_per_window']:.2f}")
    if path:
        print(f"plot: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")


if __name__ == "__main__":
    main()
