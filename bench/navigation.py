"""The navigation workload of bench/strategies.py (``--workload navigation``): queries with
PREV/NEXT, three parts.

(a) random shards, the default skip-pattern workload (``A N1*? B N2*? C N3*? D``) with PREV/NEXT
    (offsets 1-2) on most later variables: bytes of every strategy against pull_all (target:
    DFS <= 0.05x);
(b) shards type-partitioned by the query's PARTITION BY key (``sym``, 3,000 keys with a random-walk
    ``price``), contiguous V-shapes ``PATTERN (A B+ C+)``, ``B.price < PREV(B.price)``,
    ``C.price > PREV(C.price)``: DFS (node-side matching when the cost model picks it) against
    pull_all and against the bytes of the result rows (targets: <= 0.1x and <= 2x);
(c) random shards, contiguous patterns whose first variable has a condition: bytes against the
    share of rows the exact intervals (every start's window) cover (no target: those rows are all
    needed) and the halo rows received;
(d) conditions with only PREV/NEXT: over the stock ticks (``PARTITION BY sym``,
    ``A.price >= PREV(A.price, 3) + 3``: up-ticks, later down-ticks) partitioned by the key, by
    time and at random; over the synthetic log (no PARTITION BY, ``A.a1 >= PREV(A.a1) + 950``, a
    jump, then a fall) by time and at random. Where the storage nodes hold the neighbours they
    check the conditions themselves; on random shards they cannot (DFS says why and pulls
    everything). Node-side matching is off, to measure the pull.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dfs_cer import analyze, match_recognize, parse
from dfs_cer.datasets import synthetic_events
from dfs_cer.datasets.stocks import stock_events
from dfs_cer.datasets.synthetic import variable_types
from dfs_cer.filters import IntervalSet
from dfs_cer.io.shard import shard
from dfs_cer.query.arrow_filter import to_arrow_filter
from dfs_cer.strategies import pull
from dfs_cer.strategies.matching import match_pulled
from storage_node.launcher import LocalCluster


def skip_queries(count: int, seed: int = 11) -> list[str]:
    """The default skip-pattern workload with PREV/NEXT on most later variables."""
    rng = np.random.default_rng(seed)
    names = ["A", "B", "C", "D"]
    out = []
    for _ in range(count):
        kinds = variable_types(rng, len(names))
        defines = []
        for j, name in enumerate(names):
            cond = f"{name}.type = 'T_{kinds[j]:02d}' AND {name}.a1 <= 200"
            if j and rng.random() < 0.75:
                offset = int(rng.integers(1, 3))
                cond += (
                    f" AND {name}.a1 < PREV({name}.a1, {offset})"
                    if rng.random() < 0.5
                    else f" AND NEXT({name}.a1, {offset}) >= {name}.a1"
                )
            defines.append(f"{name} AS {cond}")
        pattern = " ".join(n if i == 0 else f"N{i}*? {n}" for i, n in enumerate(names))
        measures = ", ".join(f"{n}.ts AS {n.lower()}_ts" for n in names)
        out.append(
            f"SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures} ONE "
            f"ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) WITHIN "
            f"INTERVAL '3' MINUTE DEFINE {', '.join(defines)})"
        )
    return out


def v_queries(count: int, seed: int = 5) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        minutes = int(rng.choice([30, 60, 120]))
        out.append(
            "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
            "MEASURES A.ts AS start_ts, LAST(B.price) AS bottom, "
            "LAST(C.ts) AS end_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST "
            f"ROW PATTERN (A B+ C+) WITHIN INTERVAL '{minutes}' MINUTE "
            "DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"
        )
    return out


def contiguous_queries(count: int, seed: int = 13) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        kind = int(rng.integers(1, 12))
        out.append(
            "SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, "
            "LAST(C.ts) AS c_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN "
            f"(A B+ C) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.type = 'T_{kind:02d}' AND "
            "A.a1 <= 100, B AS B.a1 < PREV(B.a1), C AS C.a1 > PREV(C.a1, 2))"
        )
    return out


def rally_queries(count: int, seed: int = 17) -> list[str]:
    """Runs of up-ticks followed (within hours) by runs of down-ticks: conditions with PREV only."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        up, down = int(rng.integers(3, 5)), int(rng.integers(3, 5))
        hours = int(rng.choice([1, 2, 4]))
        out.append(
            "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES "
            "A.ts AS top_ts, B.ts AS drop_ts, B.price AS drop_price ONE ROW PER MATCH "
            f"AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN INTERVAL '{hours}' "
            f"HOUR DEFINE A AS A.price >= PREV(A.price, {up}) + {up}, B AS B.price <= "
            f"PREV(B.price, {down}) - {down})"
        )
    return out


def spike_queries(count: int, seed: int = 19) -> list[str]:
    """A jump of a1 up, later a fall (no PARTITION BY): conditions with PREV only."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        jump, fall = int(rng.choice([900, 950])), int(rng.choice([900, 950]))
        out.append(
            "SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS up_ts, "
            "B.ts AS down_ts ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A "
            f"N*? B) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.a1 >= PREV(A.a1) + {jump}, B "
            f"AS B.a1 <= PREV(B.a1, 2) - {fall})"
        )
    return out


def _run(cluster: LocalCluster, sql: str, strategy: str, **options: Any) -> dict[str, Any]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pull(strategy, sql, cluster.endpoints, cluster.token, **options)
        out = match_pulled(result, outer=False)
    t = result.trace
    return {
        "bytes": t.bytes_to_cn + t.bytes_to_sn,
        "events": t.events_received,
        "halo": t.halo_rows,
        "seconds": time.perf_counter() - start,
        "rows": out.num_rows,
        "result_bytes": out.nbytes,
        "path": t.navigation or "",
        "fallback": t.fallback or "",
    }


def _mean(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.mean(float(r[key]) for r in runs) if runs else 0.0


def run(events: int, queries: int, nodes: int, cost_model: str, say: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {"events": events, "queries": queries, "nodes": nodes}
    with tempfile.TemporaryDirectory(prefix="dfs-cer-navigation-") as tmp:
        root = Path(tmp)
        synthetic = synthetic_events(events)
        pq.write_table(synthetic, root / "synthetic.parquet")
        shard(str(root / "synthetic.parquet"), nodes, str(root / "random"))
        ticks = stock_events(events)
        pq.write_table(ticks, root / "ticks.parquet")
        shard(
            str(root / "ticks.parquet"),
            nodes,
            str(root / "bykey"),
            partitioning="type",
            type_column="sym",
        )
        shard(str(root / "ticks.parquet"), nodes, str(root / "bytime"), partitioning="time")
        shard(str(root / "ticks.parquet"), nodes, str(root / "ticks-random"))
        shard(
            str(root / "synthetic.parquet"),
            nodes,
            str(root / "synthetic-bytime"),
            partitioning="time",
        )
        dirs = [str(root / "random" / f"node-{i:02d}") for i in range(nodes)]
        with LocalCluster(dirs) as cluster:
            part: dict[str, list[dict[str, Any]]] = {
                s: [] for s in ("pull_all", "push_down", "push_pull", "dfs")
            }
            for i, sql in enumerate(skip_queries(queries)):
                for s in part:
                    part[s].append(_run(cluster, sql, s, cost_model=cost_model))
                say(f"  (a) skip patterns with PREV/NEXT: query {i + 1}/{queries}")
            figures["a"] = {
                s: {k: _mean(v, k) for k in ("bytes", "events", "halo", "seconds", "rows")}
                for s, v in part.items()
            }
            figures["a"]["dfs_over_pull_all_bytes"] = (
                figures["a"]["dfs"]["bytes"] / figures["a"]["pull_all"]["bytes"]
            )
            part = {"pull_all": [], "dfs": []}
            covered = []
            for i, sql in enumerate(contiguous_queries(queries)):
                for s in part:
                    part[s].append(_run(cluster, sql, s, cost_model=cost_model))
                covered.append(_interval_share(synthetic, sql))
                say(f"  (c) contiguous patterns on random shards: query {i + 1}/{queries}")
            figures["c"] = {
                s: {k: _mean(v, k) for k in ("bytes", "events", "halo", "seconds", "rows")}
                for s, v in part.items()
            }
            figures["c"]["dfs_over_pull_all_bytes"] = (
                figures["c"]["dfs"]["bytes"] / figures["c"]["pull_all"]["bytes"]
            )
            figures["c"]["interval_row_share"] = statistics.mean(covered)
        dirs = [str(root / "bykey" / f"node-{i:02d}") for i in range(nodes)]
        with LocalCluster(dirs) as cluster:
            runs: dict[str, list[dict[str, Any]]] = {
                "pull_all": [],
                "dfs": [],
                "dfs (node matching off)": [],
            }
            for i, sql in enumerate(v_queries(queries)):
                runs["pull_all"].append(_run(cluster, sql, "pull_all", cost_model=cost_model))
                runs["dfs"].append(_run(cluster, sql, "dfs", cost_model=cost_model))
                runs["dfs (node matching off)"].append(
                    _run(cluster, sql, "dfs", cost_model=cost_model, node_matching="off")
                )
                say(f"  (b) V-shapes over key-partitioned shards: query {i + 1}/{queries}")
            figures["b"] = {
                s: {
                    k: _mean(v, k)
                    for k in ("bytes", "events", "halo", "seconds", "rows", "result_bytes")
                }
                for s, v in runs.items()
            }
            figures["b"]["dfs_path"] = sorted({r["path"] for r in runs["dfs"]})
            figures["b"]["dfs_over_pull_all_bytes"] = (
                figures["b"]["dfs"]["bytes"] / figures["b"]["pull_all"]["bytes"]
            )
            figures["b"]["dfs_over_result_bytes"] = figures["b"]["dfs"]["bytes"] / max(
                1.0, figures["b"]["dfs"]["result_bytes"]
            )
            expected = match_recognize(
                ticks, v_queries(1)[0]
            )  # one query checked against the local engine
            figures["b"]["checked_rows"] = expected.num_rows
        figures["d"] = {}
        for layout, folder, make in (
            ("ticks by key", "bykey", rally_queries),
            ("ticks by time", "bytime", rally_queries),
            ("ticks random", "ticks-random", rally_queries),
            ("synthetic by time", "synthetic-bytime", spike_queries),
            ("synthetic random", "random", spike_queries),
        ):
            dirs = [str(root / folder / f"node-{i:02d}") for i in range(nodes)]
            with LocalCluster(dirs) as cluster:
                runs = {"pull_all": [], "dfs": []}
                for i, sql in enumerate(make(queries)):
                    for s in runs:
                        runs[s].append(
                            _run(cluster, sql, s, cost_model=cost_model, node_matching="off")
                        )
                    say(f"  (d) PREV-only conditions, shards {layout}: query {i + 1}/{queries}")
                row: dict[str, Any] = {
                    s: {k: _mean(v, k) for k in ("bytes", "events", "halo", "seconds", "rows")}
                    for s, v in runs.items()
                }
                row["dfs_over_pull_all_bytes"] = row["dfs"]["bytes"] / row["pull_all"]["bytes"]
                row["dfs_path"] = sorted({r["path"] for r in runs["dfs"]})
                row["dfs_fallback"] = sorted({r["fallback"] for r in runs["dfs"]})
                figures["d"][layout] = row
        figures["d"]["checked_rows"] = (
            match_recognize(ticks, rally_queries(1)[0]).num_rows
            + match_recognize(synthetic, spike_queries(1)[0]).num_rows
        )
    return figures


def _interval_share(events: pa.Table, sql: str) -> float:
    """Share of all rows inside the exact intervals: [t, t + window] of every A candidate."""
    import pyarrow.dataset as ds

    analysis = analyze(parse(sql), events.schema)
    first = analysis.variable("A")
    expr = to_arrow_filter(first.independent, events.schema)
    ts = (
        ds.dataset(events)
        .to_table(filter=expr, columns=["ts"])
        .column("ts")
        .cast(pa.int64())
        .to_numpy()
    )
    assert analysis.window_units is not None
    spans = IntervalSet.around(ts, 0, analysis.window_units)
    return float(spans.contains(events.column("ts").cast(pa.int64()).to_numpy()).mean())


def report(f: dict[str, Any]) -> None:
    print(
        f"{f['events']:,} events per data set, {f['nodes']} storage nodes, {f['queries']} "
        "queries per part"
    )
    for key, title in (
        ("a", "(a) skip patterns with PREV/NEXT, random shards"),
        ("b", "(b) V-shapes, shards partitioned by the PARTITION BY key"),
        ("c", "(c) contiguous patterns, random shards"),
    ):
        part = f[key]
        print(
            f"\n{title}\n| strategy | mean bytes (both ways) | events received | halo rows "
            "| result rows | seconds |\n|---|---:|---:|---:|---:|---:|"
        )
        for s, v in part.items():
            if isinstance(v, dict):
                print(
                    f"| {s} | {v['bytes']:,.0f} | {v['events']:,.0f} | {v['halo']:,.0f} | "
                    f"{v['rows']:,.1f} | {v['seconds']:.3f} |"
                )
        print(f"DFS / pull_all bytes: {part['dfs_over_pull_all_bytes']:.4f}")
    print(
        "\n(d) conditions with only PREV (up-ticks, then down-ticks), node-side matching "
        "off\n| shards | pull_all bytes | DFS bytes | DFS / pull_all | DFS events | halo "
        "rows | result rows | DFS seconds | DFS path "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    for layout, row in f["d"].items():
        if isinstance(row, dict):
            d = row["dfs"]
            path = "; ".join(row["dfs_path"]) + (
                "; fallback " + "; ".join(x for x in row["dfs_fallback"] if x)
                if any(row["dfs_fallback"])
                else ""
            )
            print(
                f"| {layout} | {row['pull_all']['bytes']:,.0f} | {d['bytes']:,.0f} | "
                f"{row['dfs_over_pull_all_bytes']:.4f} | {d['events']:,.0f} | "
                f"{d['halo']:,.0f} | {d['rows']:,.1f} | {d['seconds']:.3f} | {path} |"
            )
    print(
        f"(a) target <= 0.05; (b) targets <= 0.1 and DFS / result-row bytes "
        f"{f['b']['dfs_over_result_bytes']:.2f} <= 2 (path: {', '.join(f['b']['dfs_path'])}); "
        f"(c) rows inside the exact intervals: {f['c']['interval_row_share']:.4f} of all rows"
    )


if __name__ == "__main__":
    print("run it through bench/strategies.py --workload navigation", file=sys.stderr)
