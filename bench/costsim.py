"""Cloud cost projection: a per-strategy model calibrated on measured 1-6 storage node runs,
projected to 10, 100 and 1,000 storage nodes and 1B-10B events.

Command:  .venv/bin/python bench/costsim.py [--runs bench/results/run-net-1gbit-nodes-3m.json,...]
              [--transfer inter-az|egress] [--node-gbit 1] [--cn-gbit 10]
              [--instance-hour 0.384] ...
          (the runs are `bench/run.py --net --sections nodes --node-counts 1,2,3,4,5,6` at two or
          more event counts; prices are parameters, their defaults below with their date)
Hardware: none (pure arithmetic over the recorded runs); about a second.
Output:   bench/results/costsim.json, bench/results/costsim.md (calibration error and the
          projection table) and bench/results/fig_costsim.png.

The model, per strategy (fitted by non-negative least squares on every measured point):
  bytes to the storage nodes   = a0 * N + a1 * N * E + a2 * E   (requests; filters broadcast to
                                                                  every node; per-event filters)
  bytes to the compute node    = c0 * N + c1 * E                 (per-node replies; events pulled)
  events pulled                = e1 * E
  open (node scan, in parallel) = o0 + o1 * E / P                 P: nodes running at once
  filter round trips            = f0 + f1 * N + f2 * E / P + transfer of the filters
  pull                          = p0 + p1 * N + p2 * bytes_to_cn + transfer of the events
  match (compute node)          = m1 * events pulled
N storage nodes, E events. In the calibration runs every node shares this machine's cores
(P = min(N, cores)) and each node has its own rate-limited link (bench/net.sh); in the projection
each node has its own machine (P = N) and its own link, and the compute node's link carries every
byte: transfer = max(bytes / cn_rate, bytes / N / node_rate).
Cost per query = bytes across the network x $/GB + (N + 1) instances x latency x $/hour
+ S3 GETs of the cold load (range reads of the shard files) amortised over --queries-per-load.

--calibrate scale.json[,...] instead fits bench/scale.py's runs (3 to 96 nodes; see
bench/scalefit.py) and projects bytes and seconds per query of dfs, push_down and push_pull
(--scale-workload, --scale-layout, --scale-compression pick the runs; output costsim-scale.*).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
STRATEGIES = ("push_down", "push_pull", "dfs")
COLORS = {"push_down": "#c44e52", "push_pull": "#dd8452", "dfs": "#4c72b0"}


@dataclass(frozen=True)
class Prices:
    """AWS us-east-1 list prices, 2026-11 (parameters: pass your own)."""

    date: str = "2026-11"
    #: per GB moved: inter-AZ is $0.01 out + $0.01 in; internet egress $0.09
    inter_az_per_gb: float = 0.02
    egress_per_gb: float = 0.09
    s3_get_per_1000: float = 0.0004
    #: m6i.2xlarge on demand (8 vCPU, 32 GiB), storage nodes and the compute node alike
    instance_hour: float = 0.384
    instance_memory_gb: float = 32.0


@dataclass(frozen=True)
class Cloud:
    node_gbit: float = 1.0  # each storage node's link (the paper's 1 Gbit/s)
    cn_gbit: float = 10.0  # the compute node's link: every byte crosses it
    transfer: str = "inter-az"
    queries_per_load: int = 100  # queries served per cold load of the shards from S3
    range_bytes: int = 8 << 20  # one S3 GET per 8 MiB range of a shard file
    parquet_bytes_per_event: float = 12.0  # the synthetic log's shard files
    node_bytes_per_event: float = (
        206.0  # measured: storage nodes' peak beyond the bare processes, 10M events
    )
    node_startup_gb: float = 0.29


def nnls(columns: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Least squares with coefficients >= 0: drop the most negative column and
    refit until none is."""
    active = list(range(len(columns)))
    coef = np.zeros(len(columns))
    while active:
        a = np.stack([columns[i] for i in active], axis=1)
        sol, *_ = np.linalg.lstsq(a, y, rcond=None)
        if (sol >= 0).all():
            coef[active] = sol
            return coef
        active.pop(int(np.argmin(sol)))
    return coef


@dataclass
class Point:
    nodes: int
    events: int
    s: dict[str, Any]  # bench/run.py's summary of one strategy


def transfer_seconds(nbytes: float, nodes: int, node_gbit: float, cn_gbit: float | None) -> float:
    per_node = nbytes / max(nodes, 1) * 8 / (node_gbit * 1e9)
    return max(per_node, nbytes * 8 / (cn_gbit * 1e9)) if cn_gbit else per_node


class Model:
    """One strategy's fitted coefficients and its predictions."""

    def __init__(self, points: list[Point], cores: int, node_gbit: float) -> None:
        n = np.array([p.nodes for p in points], float)
        e = np.array([p.events for p in points], float)
        par = np.minimum(n, cores)
        ones = np.ones_like(n)
        col = lambda key: np.array([float(p.s[key]) for p in points])  # noqa: E731
        phase = lambda key: np.array([float(p.s["phases"].get(key, 0.0)) for p in points])  # noqa: E731
        bsn, bcn = col("bytes_to_sn"), col("bytes_to_cn")
        t_sn = np.array(
            [transfer_seconds(b, int(k), node_gbit, None) for b, k in zip(bsn, n, strict=True)]
        )
        t_cn = np.array(
            [transfer_seconds(b, int(k), node_gbit, None) for b, k in zip(bcn, n, strict=True)]
        )
        self.coef = {
            "bytes_to_sn": nnls([n, n * e, e], bsn),
            "bytes_to_cn": nnls([n, e], bcn),
            "events": nnls([e], col("events")),
            "open": nnls([ones, e / par], phase("open")),
            "filter": nnls([ones, n, e / par], np.maximum(phase("filter") - t_sn, 0.0)),
            "pull": nnls([ones, n, bcn], np.maximum(phase("pull") - t_cn, 0.0)),
            "match": nnls([col("events")], phase("match")),
        }
        self.rounds = float(np.mean(col("rounds")))

    def predict(
        self, nodes: int, events: float, parallel: float, node_gbit: float, cn_gbit: float | None
    ) -> dict[str, float]:
        c, n, e = self.coef, float(nodes), float(events)
        bsn = float(c["bytes_to_sn"] @ [n, n * e, e])
        bcn = float(c["bytes_to_cn"] @ [n, e])
        ev = float(c["events"][0] * e)
        out = {
            "bytes_to_sn": bsn,
            "bytes_to_cn": bcn,
            "bytes": bsn + bcn,
            "events_pulled": ev,
            "open": float(c["open"] @ [1.0, e / parallel]),
            "filter": float(c["filter"] @ [1.0, n, e / parallel])
            + transfer_seconds(bsn, nodes, node_gbit, cn_gbit),
            "pull": float(c["pull"] @ [1.0, n, bcn])
            + transfer_seconds(bcn, nodes, node_gbit, cn_gbit),
            "match": float(c["match"][0] * ev),
        }
        out["latency"] = out["open"] + out["filter"] + out["pull"] + out["match"]
        return out


def load_points(paths: list[Path]) -> tuple[dict[str, list[Point]], list[str]]:
    points: dict[str, list[Point]] = {s: [] for s in STRATEGIES}
    sources = []
    for path in paths:
        run = json.loads(path.read_text())
        if "nodes" not in run:
            raise SystemExit(
                f"error: {path} has no nodes section; run bench/run.py --sections nodes"
            )
        sources.append(
            f"{path.name} ({run['events']:,} events, {run.get('mode')}, {run.get('started')})"
        )
        for n, per in run["nodes"].items():
            for s in STRATEGIES:
                points[s].append(Point(int(n), int(run["events"]), per[s]))
    return points, sources


def calibration_error(
    points: dict[str, list[Point]], cores: int, node_gbit: float, holdout: int | None = None
) -> dict[str, dict[str, Any]]:
    """Mean and worst relative error of latency and bytes; with ``holdout``, fitted only on the
    points with fewer nodes and checked on those with ``holdout`` nodes or more."""
    out = {}
    for s, pts in points.items():
        train = [p for p in pts if holdout is None or p.nodes < holdout]
        test = [p for p in pts if holdout is None or p.nodes >= holdout]
        model = Model(train, cores, node_gbit)
        lat, byt, pairs = [], [], []
        for p in test:
            got = model.predict(p.nodes, p.events, min(p.nodes, cores), node_gbit, None)
            lat.append(abs(got["latency"] - p.s["latency"]) / p.s["latency"])
            byt.append(abs(got["bytes"] - p.s["bytes"]) / p.s["bytes"])
            pairs.append(
                {
                    "nodes": p.nodes,
                    "events": p.events,
                    "latency": p.s["latency"],
                    "latency_predicted": got["latency"],
                    "bytes": p.s["bytes"],
                    "bytes_predicted": got["bytes"],
                }
            )
        out[s] = {
            "latency_mean": float(np.mean(lat)),
            "latency_max": float(np.max(lat)),
            "bytes_mean": float(np.mean(byt)),
            "bytes_max": float(np.max(byt)),
            "points": pairs,
        }
    return out


def project(
    points: dict[str, list[Point]],
    cores: int,
    calib_gbit: float,
    cloud: Cloud,
    prices: Prices,
    node_counts: list[int],
    event_counts: list[int],
) -> list[dict[str, Any]]:
    per_gb = prices.inter_az_per_gb if cloud.transfer == "inter-az" else prices.egress_per_gb
    rows = []
    for s, pts in points.items():
        model = Model(pts, cores, calib_gbit)
        for e in event_counts:
            for n in node_counts:
                got = model.predict(n, e, n, cloud.node_gbit, cloud.cn_gbit)
                gets = (
                    e * cloud.parquet_bytes_per_event / cloud.range_bytes + n
                )  # at least one per node
                cost_transfer = got["bytes"] / 1e9 * per_gb
                cost_instances = (n + 1) * got["latency"] / 3600 * prices.instance_hour
                cost_gets = gets / 1000 * prices.s3_get_per_1000 / cloud.queries_per_load
                node_gb = cloud.node_startup_gb + e / n * cloud.node_bytes_per_event / 1e9
                rows.append(
                    {
                        "strategy": s,
                        "nodes": n,
                        "events": e,
                        **got,
                        "cost_transfer": cost_transfer,
                        "cost_instances": cost_instances,
                        "cost_gets": cost_gets,
                        "cost": cost_transfer + cost_instances + cost_gets,
                        "node_memory_gb": node_gb,
                        "fits_memory": node_gb <= prices.instance_memory_gb,
                    }
                )
    return rows


def _money(x: float) -> str:
    return f"${x:.2g}" if x < 0.01 else f"${x:,.3f}"


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        "Calibrated on: " + "; ".join(figures["sources"]) + ".",
        "",
        "| strategy | latency error, mean / worst (all points) | bytes "
        f"error, mean / worst | latency error, fit on < {figures['holdout']} "
        "nodes, checked on the rest | bytes error, same |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in STRATEGIES:
        a, h = figures["error"][s], figures["holdout_error"][s]
        lines.append(
            f"| {s} | {a['latency_mean']:.0%} / {a['latency_max']:.0%} | {a['bytes_mean']:.0%} / "
            f"{a['bytes_max']:.0%} | {h['latency_mean']:.0%} / {h['latency_max']:.0%} | "
            f"{h['bytes_mean']:.0%} / {h['bytes_max']:.0%} |"
        )
    lines += [
        "",
        "| events | storage nodes | strategy | latency s | GB moved | $ transfer | $ instances | "
        "$ S3 GETs | $ per query | node memory GB |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(
        figures["projection"],
        key=lambda r: (r["events"], r["nodes"], STRATEGIES.index(r["strategy"])),
    ):
        mem = f"{r['node_memory_gb']:.1f}" + ("" if r["fits_memory"] else " (over)")
        lines.append(
            f"| {r['events'] / 1e9:g}B | {r['nodes']:,} | {r['strategy']} | "
            f"{r['latency']:.2f} | {r['bytes'] / 1e9:.3f} | {_money(r['cost_transfer'])} | "
            f"{_money(r['cost_instances'])} | {_money(r['cost_gets'])} | "
            f"{_money(r['cost'])} | {mem} |"
        )
    return "\n".join(lines) + "\n"


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = figures["projection"]
    events = sorted({r["events"] for r in rows})
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for s in STRATEGIES:
        for e, style in zip(events, ("-", "--", ":"), strict=False):
            pts = sorted(
                (r for r in rows if r["strategy"] == s and r["events"] == e),
                key=lambda r: r["nodes"],
            )
            xs = [r["nodes"] for r in pts]
            label = f"{s}, {e / 1e9:g}B events"
            axes[0].plot(
                xs, [r["latency"] for r in pts], style, marker="o", color=COLORS[s], label=label
            )
            axes[1].plot(
                xs, [r["bytes"] / 1e9 for r in pts], style, marker="o", color=COLORS[s], label=label
            )
            axes[2].plot(
                xs, [r["cost"] for r in pts], style, marker="o", color=COLORS[s], label=label
            )
    for ax, ylabel in zip(
        axes, ("seconds per query", "GB moved per query", "$ per query"), strict=True
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("storage nodes")
        ax.set_ylabel(ylabel)
    axes[2].legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(
        f"projection ({figures['cloud']['transfer']} transfer, "
        f"{figures['cloud']['node_gbit']:g} Gbit/s node links, "
        f"{figures['cloud']['cn_gbit']:g} Gbit/s compute node, prices of "
        f"{figures['prices']['date']})"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    # the calibration check: each measured 1-6 node point against the model fitted on the
    # points with fewer nodes than the holdout (hollow: the held-out points)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    for s in STRATEGIES:
        fitted = figures["error"][s]["points"]
        held = figures["holdout_error"][s]["points"]
        for ax, key, scale in ((axes[0], "latency", 1.0), (axes[1], "bytes", 1e6)):
            ax.scatter(
                [q[key] / scale for q in fitted],
                [q[key + "_predicted"] / scale for q in fitted],
                color=COLORS[s],
                s=14,
                label=f"{s} (fit on all)",
            )
            ax.scatter(
                [q[key] / scale for q in held],
                [q[key + "_predicted"] / scale for q in held],
                facecolors="none",
                edgecolors=COLORS[s],
                s=40,
                label=f"{s} (held out)",
            )
    for ax, label in ((axes[0], "seconds per query"), (axes[1], "MB per query")):
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], color="#999999", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
    axes[1].legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("calibration: predicted against measured (1-6 storage nodes)")
    fig.tight_layout()
    fig.savefig(path.with_name(path.stem + "_fit.png"), dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        default=",".join(str(RESULTS / f"run-net-1gbit-nodes-{m}.json") for m in ("3m", "10m")),
    )
    parser.add_argument(
        "--calibration-cores", type=int, default=2, help="cores the calibration runs shared"
    )
    parser.add_argument(
        "--calibration-gbit", type=float, default=1.0, help="bench/net.sh's per-node rate"
    )
    parser.add_argument(
        "--holdout", type=int, default=5, help="check the fit on runs with this many nodes or more"
    )
    parser.add_argument("--node-counts", default="10,100,1000")
    parser.add_argument("--event-counts", default="1000000000,10000000000")
    for f in Cloud.__dataclass_fields__.values():
        parser.add_argument(
            "--" + f.name.replace("_", "-"), type=type(f.default), default=f.default
        )
    for f in Prices.__dataclass_fields__.values():
        parser.add_argument(
            "--" + f.name.replace("_", "-"), type=type(f.default), default=f.default
        )
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--calibrate", default="", help="bench/scale.py --json outputs")
    parser.add_argument("--scale-workload", default="default")
    parser.add_argument("--scale-layout", default="random")
    parser.add_argument("--scale-compression", default="zstd")
    args = parser.parse_args()
    if args.calibrate:  # bench/scale.py's runs instead of bench/run.py's
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from bench.scalefit import main as scale_main

        scale_main(args)
        return
    if args.transfer not in ("inter-az", "egress"):
        raise SystemExit("error: --transfer must be inter-az or egress")
    cloud = Cloud(**{k: getattr(args, k) for k in Cloud.__dataclass_fields__})
    prices = Prices(**{k: getattr(args, k) for k in Prices.__dataclass_fields__})
    paths = [Path(p) for p in args.runs.split(",") if p]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise SystemExit(
            f"error: {missing[0]} does not exist; record it with bench/run.py --net "
            "--sections nodes --node-counts 1,2,3,4,5,6 --json --out DIR (see RESULTS.md)"
        )
    points, sources = load_points(paths)
    figures = {
        "sources": sources,
        "holdout": args.holdout,
        "cloud": asdict(cloud),
        "prices": asdict(prices),
        "error": calibration_error(points, args.calibration_cores, args.calibration_gbit),
        "holdout_error": calibration_error(
            points, args.calibration_cores, args.calibration_gbit, args.holdout
        ),
        "coefficients": {
            s: {
                k: v.tolist()
                for k, v in Model(p, args.calibration_cores, args.calibration_gbit).coef.items()
            }
            for s, p in points.items()
        },
        "projection": project(
            points,
            args.calibration_cores,
            args.calibration_gbit,
            cloud,
            prices,
            [int(n) for n in args.node_counts.split(",")],
            [int(float(e)) for e in args.event_counts.split(",")],
        ),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "costsim.json").write_text(json.dumps(figures, indent=2))
    text = markdown(figures)
    (out / "costsim.md").write_text(text)
    plot(figures, out / "fig_costsim.png")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
