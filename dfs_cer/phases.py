"""Where a query's time goes, from the shell to the printed answer: the process's start-up
(interpreter and imports), planning (reading and checking the query, the nodes' schema, the
session), the filtering rounds and the final pull (each split into the compute node's work
before it, the slowest node's own work and the wire with the waiting), matching, and what none
of them holds. Compiled kernels load inside those phases; their time is reported beside them."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from dfs_cer.transport.actions import FINAL_PULLS

#: the rounds that bring the rows matched (a final pull, its halo, node-side matches); the rest
#: filter
PULLS = (*FINAL_PULLS, "pull_halo", "pull_matches", "pull_group")


def process_age() -> float | None:
    """Seconds since this process started (Linux's ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class KernelClock:
    """The seconds this process spent loading or compiling numba kernels since :meth:`start`
    (numba's compiler-lock events, which wrap a cache load as well as a compile; nested ones
    count once)."""

    _started: KernelClock | None = None

    def __init__(self) -> None:
        self.seconds = 0.0
        self._local = threading.local()
        self._lock = threading.Lock()

    @classmethod
    def start(cls) -> KernelClock:
        """The process's clock, started on first use (it imports numba)."""
        if cls._started is None:
            from numba.core import event

            clock = cls()

            class Listener(event.Listener):
                def on_start(self, ev: Any) -> None:
                    clock.enter()

                def on_end(self, ev: Any) -> None:
                    clock.leave()

            event.register("numba:compiler_lock", Listener())
            cls._started = clock
        return cls._started

    def enter(self) -> None:
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.began = time.perf_counter()
        self._local.depth = depth + 1

    def leave(self) -> None:
        self._local.depth = depth = max(0, getattr(self._local, "depth", 1) - 1)
        if depth == 0:
            with self._lock:
                self.seconds += time.perf_counter() - self._local.began


def split(
    rounds: Sequence[Mapping[str, Any]],
    matching_seconds: float | None,
    *,
    wall: float,
    startup: float | None = None,
    planning: float | None = None,
    kernels: float | None = None,
) -> dict[str, float]:
    """A query's phases in seconds from its trace's ``rounds`` (dicts as ``Trace.to_dict``
    writes them) and matching, within ``wall`` (the seconds from the process's start, or from
    the query's, to the answer): ``start-up``, ``planning``, ``rounds`` and ``pull`` (each with
    its ``… CN``, ``… nodes`` and ``… wire`` parts), ``matching``, ``other`` (what no phase
    holds) and ``kernels`` (loading compiled code, inside the other phases)."""
    out: dict[str, float] = {}
    if startup is not None:
        out["start-up"] = startup
    if planning is not None:
        out["planning"] = planning
    for phase, chosen in (
        ("rounds", [r for r in rounds if r["action"] not in PULLS]),
        ("pull", [r for r in rounds if r["action"] in PULLS]),
    ):
        cn = sum(r.get("cn_seconds", 0.0) for r in chosen)
        nodes = sum(r.get("node_seconds", 0.0) for r in chosen)
        trip = sum(r["seconds"] for r in chosen)
        out[phase] = cn + trip
        out[f"{phase} CN"] = cn
        out[f"{phase} nodes"] = nodes
        out[f"{phase} wire"] = trip - nodes
    out["matching"] = matching_seconds or 0.0
    held = sum(v for k, v in out.items() if " " not in k)
    out["other"] = max(0.0, wall - held)
    out["wall"] = wall
    if kernels is not None:
        out["kernels"] = kernels
    return out


def line(phases: Mapping[str, float]) -> str:
    """The phases as one line of milliseconds."""

    def ms(key: str) -> str:
        return f"{phases[key] * 1e3:,.0f}"

    parts = [f"{k} {ms(k)}" for k in ("start-up", "planning") if k in phases]
    for phase in ("rounds", "pull"):
        parts.append(
            f"{phase} {ms(phase)} (CN {ms(phase + ' CN')}, nodes {ms(phase + ' nodes')}, "
            f"wire {ms(phase + ' wire')})"
        )
    parts += [f"matching {ms('matching')}", f"other {ms('other')}"]
    tail = f"; kernels loaded in {ms('kernels')} of it" if "kernels" in phases else ""
    return f"time (ms): {', '.join(parts)} = {ms('wall')}{tail}"
