"""Measurement helpers for bench/run.py: the network namespaces of bench/net.sh, wire bytes from
the veth counters, storage node peak memory, and latency split by phase."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE = Path("/run/dfs-cer-net.json")

#: trace round → phase (paper Table II): scanning and selecting candidates on the storage nodes,
#: filtering round trips, pulling events; matching is timed separately
PHASES = {
    "open": "open",
    "intervals": "filter",
    "summaries": "filter",
    "wjf": "filter",
    "verify": "filter",
    "push_pull": "filter",
    "upload": "filter",
    "skip": "filter",
}


@dataclass
class NetConfig:
    nodes: int
    rate: str
    delay: str
    qdisc: str
    delay_applied: bool
    hosts: list[str]
    namespaces: list[str]
    devices: list[str]

    @classmethod
    def load(cls, path: Path = STATE) -> NetConfig:
        if not path.is_file():
            raise SystemExit(f"error: {path} not found; run sudo bench/net.sh up --nodes 6 first")
        doc = json.loads(path.read_text())
        if not doc.get("nodes"):
            raise SystemExit(
                "error: bench/net.sh reports no namespaces; run sudo bench/net.sh up --nodes 6"
            )
        return cls(**doc)


def wire_bytes(devices: list[str]) -> int:
    """Bytes through the compute node's ends of the veth pairs (both directions,
    headers included)."""
    total = 0
    for d in devices:
        stats = Path("/sys/class/net") / d / "statistics"
        total += int((stats / "rx_bytes").read_text()) + int((stats / "tx_bytes").read_text())
    return total


def sn_peak_memory(cluster: Any) -> int:
    """Sum over the storage node processes of their peak resident memory (VmHWM), bytes."""
    total = 0
    for proc in cluster.procs:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024
    return total


def phases(trace: Any) -> dict[str, float]:
    out = {"open": 0.0, "filter": 0.0, "pull": 0.0}
    for r in trace.rounds:
        phase = "pull" if r.action.startswith("pull") else PHASES.get(r.action)
        if phase:
            out[phase] += r.seconds
    return out
