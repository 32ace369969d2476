"""bench/costsim.py --calibrate: a per-strategy bytes and seconds model fitted on bench/scale.py's
measured node counts, its error on held-out node counts, and a projection to many nodes and
billions of events.

Per strategy, per query (N storage nodes, C candidate events: rows passing some variable's own
condition, which grow with the events E as C = (C/E) x E), from the bytes per action:
  fixed bytes (the actions in FIXED: open, reserve) = f0 * N            (one reply per node)
  the other actions' bytes (filters, uploads, pulls) = v1 * N * C + v2 * C (+ v0 * N)
                  (per node and candidate: filters sent to every node; per candidate: events
                   pulled; v0, a per-node part that does not grow with the events, is fitted only
                   when the runs cover 2+ event counts: at one event count nothing separates it
                   from v1, so the projection gives both readings, every per-node byte growing
                   with the candidates ("bytes", the conservative one) and none of them
                   ("bytes_low": v0 * N + v2 * C))
  seconds (loopback)  = t0 + t1 * N + t2 * C / P   P: nodes working at once (the calibration's
                                                    cores; the cloud's N)
Fitted by non-negative least squares. The projected seconds add the link transfer time (costsim's
transfer_seconds: every byte crosses the compute node's link, each node's share its own);
loopback latency on a few shared cores is CPU-bound, so seconds are the weaker projection.
Error: fit on every node count but the largest and check on the largest (e.g. fit 3/12/48, check
96), and leave-one-out over the node counts (fit on the others, check the one left out).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.costsim import nnls, transfer_seconds

STRATEGIES = ("push_down", "push_pull", "dfs")
#: actions whose bytes are one fixed-size exchange per node, whatever the events
FIXED = ("open", "reserve")


@dataclass
class ScalePoint:
    nodes: int
    events: int
    candidates: float
    fixed: float  # bytes of the FIXED actions
    variable: float  # bytes of every other action
    seconds: float

    @property
    def bytes(self) -> float:
        return self.fixed + self.variable


def load(
    paths: list[Path], workload: str, layout: str, codec: str
) -> tuple[dict[str, list[ScalePoint]], list[str]]:
    """bench/scale.py --json outputs: the points of one workload, layout and codec."""
    points: dict[str, list[ScalePoint]] = {s: [] for s in STRATEGIES}
    sources = []
    for path in paths:
        doc = json.loads(path.read_text())
        if "points" not in doc or "lower_bound" not in doc:
            raise SystemExit(f"error: {path} is not bench/scale.py --json output (no points)")
        sources.append(f"{path.name} ({doc['events']:,} events, {doc['date']})")
        cands = doc["lower_bound"].get(workload, {}).get("candidates")
        for p in doc["points"]:
            if (p["workload"], p["layout"], p["compression"]) != (workload, layout, codec):
                continue
            if p["strategy"] in points and cands is not None:
                fixed = sum(float(b) for a, b in p["bytes_by_action"].items() if a in FIXED)
                points[p["strategy"]].append(
                    ScalePoint(
                        int(p["nodes"]),
                        int(doc["events"]),
                        float(cands),
                        fixed,
                        float(p["bytes"]) - fixed,
                        float(p["latency_s"]),
                    )
                )
    missing = [s for s, v in points.items() if len({p.nodes for p in v}) < 2]
    if missing:
        raise SystemExit(
            f"error: {', '.join(missing)} measured at fewer than 2 node counts for workload "
            f"{workload!r}, layout {layout!r}, codec {codec!r} in {', '.join(map(str, paths))}; "
            "run bench/scale.py --json with that workload, layout and codec at 2+ node counts"
        )
    return points, sources


class ScaleModel:
    def __init__(self, points: list[ScalePoint], cores: int, low: bool = False) -> None:
        """``low``: at one event count, the reading where the per-node bytes of the filter rounds
        do not grow with the candidates."""
        self.cores = cores
        self.by_events = len({p.events for p in points}) > 1
        self.low = low and not self.by_events
        n = np.array([p.nodes for p in points], float)
        c = np.array([p.candidates for p in points], float)
        par = np.minimum(n, cores)
        self.per_event = float(np.mean([p.candidates / p.events for p in points]))
        self.coef = {
            "fixed": nnls([n], np.array([p.fixed for p in points])),
            "variable": nnls(self.columns(n, c), np.array([p.variable for p in points])),
            "seconds": nnls([np.ones_like(n), n, c / par], np.array([p.seconds for p in points])),
        }

    def columns(self, n: np.ndarray, c: np.ndarray) -> list[np.ndarray]:
        if self.low:
            return [n, c]
        return [n * c, c, n] if self.by_events else [n * c, c]

    def predict(
        self, nodes: int, candidates: float, parallel: float, gbit: tuple[float, float] | None
    ) -> dict[str, float]:
        n, c = np.array([float(nodes)]), np.array([float(candidates)])
        k = self.coef
        fixed = float(k["fixed"][0] * nodes)
        variable = float(np.stack(self.columns(n, c), axis=1)[0] @ k["variable"])
        seconds = float(k["seconds"] @ [1.0, nodes, candidates / parallel])
        if gbit is not None:
            seconds += transfer_seconds(fixed + variable, nodes, gbit[0], gbit[1])
        return {
            "bytes_fixed": fixed,
            "bytes_variable": variable,
            "bytes": fixed + variable,
            "seconds": seconds,
        }


def errors(train: list[ScalePoint], test: list[ScalePoint], cores: int) -> list[dict[str, Any]]:
    """The model fitted on ``train``, checked on ``test``: relative errors."""
    model = ScaleModel(train, cores)
    out = []
    for p in test:
        got = model.predict(p.nodes, p.candidates, min(p.nodes, cores), None)
        out.append(
            {
                "nodes": p.nodes,
                "events": p.events,
                "bytes": p.bytes,
                "bytes_predicted": got["bytes"],
                "bytes_error": abs(got["bytes"] - p.bytes) / max(p.bytes, 1.0),
                "seconds": p.seconds,
                "seconds_predicted": got["seconds"],
                "seconds_error": abs(got["seconds"] - p.seconds) / max(p.seconds, 1e-9),
            }
        )
    return out


def summary(checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "bytes_mean": float(np.mean([c["bytes_error"] for c in checks])),
        "bytes_max": float(np.max([c["bytes_error"] for c in checks])),
        "seconds_mean": float(np.mean([c["seconds_error"] for c in checks])),
        "seconds_max": float(np.max([c["seconds_error"] for c in checks])),
        "points": checks,
    }


def calibrate(
    paths: list[Path],
    *,
    workload: str,
    layout: str,
    codec: str,
    cores: int,
    node_counts: list[int],
    event_counts: list[int],
    gbit: tuple[float, float],
) -> dict[str, Any]:
    points, sources = load(paths, workload, layout, codec)
    out: dict[str, Any] = {
        "sources": sources,
        "workload": workload,
        "layout": layout,
        "compression": codec,
        "calibration_cores": cores,
        "node_gbit": gbit[0],
        "cn_gbit": gbit[1],
        "holdout": {},
        "leave_one_out": {},
        "coefficients": {},
        "projection": [],
    }
    for s, pts in points.items():
        counts = sorted({p.nodes for p in pts})
        top = counts[-1]
        out["holdout"][s] = {
            "fit_on": counts[:-1],
            "checked_on": top,
            **summary(
                errors([p for p in pts if p.nodes < top], [p for p in pts if p.nodes == top], cores)
            ),
        }
        if len(counts) > 2:
            loo = []
            for k in counts:
                loo += errors(
                    [p for p in pts if p.nodes != k], [p for p in pts if p.nodes == k], cores
                )
            out["leave_one_out"][s] = summary(loo)
        model, low = ScaleModel(pts, cores), ScaleModel(pts, cores, low=True)
        out["coefficients"][s] = {k: v.tolist() for k, v in model.coef.items()}
        out["coefficients"][s]["candidates_per_event"] = model.per_event
        for e in event_counts:
            for n in node_counts:
                got = model.predict(n, model.per_event * e, n, gbit)
                got["bytes_low"] = low.predict(n, low.per_event * e, n, gbit)["bytes"]
                out["projection"].append({"strategy": s, "nodes": n, "events": e, **got})
    return out


def markdown(f: dict[str, Any]) -> str:
    lines = [
        f"Calibrated on {'; '.join(f['sources'])}: workload {f['workload']}, layout "
        f"{f['layout']}, pulled events {f['compression']}.",
        "",
        "| strategy | fit on nodes | checked on | bytes error | seconds error | "
        "leave-one-out bytes error, mean / worst | seconds, mean / worst |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for s, h in f["holdout"].items():
        loo = f["leave_one_out"].get(s)
        tail = (
            f"{loo['bytes_mean']:.0%} / {loo['bytes_max']:.0%} | "
            f"{loo['seconds_mean']:.0%} / {loo['seconds_max']:.0%}"
            if loo
            else "- | -"
        )
        lines.append(
            f"| {s} | {', '.join(map(str, h['fit_on']))} | {h['checked_on']} | "
            f"{h['bytes_max']:.0%} | {h['seconds_max']:.0%} | {tail} |"
        )
    lines += [
        "",
        f"Projection ({f['node_gbit']:g} Gbit/s per storage node, {f['cn_gbit']:g} Gbit/s "
        "compute node; MB, per-node bytes fixed: the reading where the filter rounds' per-node "
        "bytes do not grow with the events, the same as MB when the runs cover 2+ event counts):",
        "",
        "| events | storage nodes | strategy | MB per query | MB, per-node bytes fixed | "
        "seconds per query |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for r in sorted(
        f["projection"], key=lambda r: (r["events"], r["nodes"], STRATEGIES.index(r["strategy"]))
    ):
        lines.append(
            f"| {r['events'] / 1e9:g}B | {r['nodes']:,} | {r['strategy']} | "
            f"{r['bytes'] / 1e6:,.2f} | {r['bytes_low'] / 1e6:,.2f} | {r['seconds']:,.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> None:
    """costsim --calibrate: fit, check, project; writes costsim-scale.{json,md} under --out."""
    paths = [Path(p) for p in args.calibrate.split(",") if p]
    for p in paths:
        if not p.exists():
            raise SystemExit(f"error: {p} does not exist; record it with bench/scale.py --json")
    figures = calibrate(
        paths,
        workload=args.scale_workload,
        layout=args.scale_layout,
        codec=args.scale_compression,
        cores=args.calibration_cores,
        node_counts=[int(n) for n in args.node_counts.split(",")],
        event_counts=[int(float(e)) for e in args.event_counts.split(",")],
        gbit=(args.node_gbit, args.cn_gbit),
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "costsim-scale.json").write_text(json.dumps(figures, indent=2))
    text = markdown(figures)
    (out / "costsim-scale.md").write_text(text)
    sys.stdout.write(text)
