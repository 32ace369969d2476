"""Measurement helpers for the benchmarks: the network namespaces of bench/net.sh, wire bytes from
the veth counters, storage node peak memory, latency split by phase, bytes per storage node (each
client's transfers), and the exact result and lower bound of a query (bench/strategies.py,
bench/scale.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer import analyze, match_recognize, parse
from dfs_cer.filters import IntervalSet
from dfs_cer.query.arrow_filter import union_filter
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.envelope import seal

STATE = Path("/run/dfs-cer-net.json")

#: trace round → phase (paper Table II): scanning and selecting candidates on the storage nodes,
#: filtering round trips, pulling events; matching is timed separately
PHASES = {
    "open": "open",
    "intervals": "filter",
    "summaries": "filter",
    "wjf": "filter",
    "verify": "filter",
    "collect": "filter",
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
    """Seconds per phase (``open``, ``filter`` round trips, ``pull``) and, across every round,
    the compute node's work before each (``cn``), the slowest node's own time (``nodes``) and
    the rest of each round trip (``wire``: transfer and waiting)."""
    out = {"open": 0.0, "filter": 0.0, "pull": 0.0, "cn": 0.0, "nodes": 0.0, "wire": 0.0}
    for r in trace.rounds:
        phase = "pull" if r.action.startswith("pull") else PHASES.get(r.action)
        if phase:
            out[phase] += r.seconds
        out["cn"] += r.cn_seconds or 0.0
        out["nodes"] += r.node_seconds or 0.0
        out["wire"] += r.seconds - (r.node_seconds or 0.0)
    return out


@dataclass
class Exact:
    """A query's exact answer on the whole log (the local engine) and its lower bound: the
    candidate events (rows passing some variable's own condition) inside the union of the exact
    match intervals, and their bytes (in-memory, and as each codec's pull stream would carry
    them)."""

    matches: int
    candidates: int
    lb_events: int
    lb_bytes: float
    lb_stream_bytes: dict[str, int]


def exact(events: pa.Table, sql: str, codecs: tuple[str, ...] = ()) -> Exact:
    import pyarrow.dataset as ds

    analysis = analyze(parse(sql), events.schema)
    out = match_recognize(events, sql)  # the local engine: the rows every strategy must give
    filt = union_filter([v.independent for v in analysis.variables if not v.any_row])
    cands = ds.dataset(events).to_table(filter=filt) if filt is not None else events
    if out.num_rows == 0:
        return Exact(0, cands.num_rows, 0, 0.0, dict.fromkeys(codecs, 0))
    ts_cols = [c for c in out.column_names if c.endswith("_ts")]
    times = np.stack([out.column(c).cast(pa.int64()).to_numpy() for c in ts_cols])
    spans = IntervalSet(times.min(axis=0), times.max(axis=0))
    inside = spans.contains(cands.column("ts").cast(pa.int64()).to_numpy())
    n = int(inside.sum())
    rows = cands.filter(pa.array(inside))
    streams = {
        c: sum(len(b) for b in seal(rows, c).column(0).to_pylist()) if n else 0 for c in codecs
    }
    return Exact(
        out.num_rows,
        cands.num_rows,
        n,
        n * cands.nbytes / max(1, cands.num_rows),
        streams,
    )


def lower_bound(events: pa.Table, sql: str) -> tuple[int, float]:
    """Candidate events inside the union of the exact match intervals, and their payload bytes."""
    got = exact(events, sql)
    return got.lb_events, got.lb_bytes


@contextmanager
def recording_clients() -> Iterator[list[StorageClient]]:
    """Every StorageClient made inside the block (the compute node opens one per storage node
    and query), so that bytes can be counted per node from their ``transfers``."""
    made: list[StorageClient] = []
    original = StorageClient.__post_init__

    def post_init(self: StorageClient) -> None:
        original(self)
        made.append(self)

    StorageClient.__post_init__ = post_init  # type: ignore[method-assign]
    try:
        yield made
    finally:
        StorageClient.__post_init__ = original  # type: ignore[method-assign]


def node_bytes(clients: list[StorageClient], endpoints: list[str]) -> list[int]:
    """Bytes (both directions) each storage node exchanged with the compute node, in the order of
    ``endpoints``; the closing calls, which the trace does not count either, left out."""
    out = dict.fromkeys(endpoints, 0)
    for c in clients:
        if c.endpoint in out:
            out[c.endpoint] += sum(
                t.bytes_to_sn + t.bytes_to_cn for t in c.transfers if t.action != "close"
            )
    return list(out.values())
