"""Attacks on a storage node's bounds (used by bench/chaos.py --attacks and
tests/storage/test_bounded.py).

Each attack makes one node work hard for one query; the figures say whether the node stayed
bounded: the call's outcome and seconds, how long past the query's deadline (or its close) the
node kept working, the node's CPU seconds in the ``settle`` seconds after the call ended, its
peak RSS during the attack, other queries' ``reserve`` latency during it, and the latency of
the next query once it is over.

  push_pull     push-pull's node filter over ``A N*? B N*? C N*? D`` without WITHIN: every
                combination of the uploaded A, B, C events with the node's D candidates
  node_matches  node-side matching of ``ALL MATCHES (A B)`` without WITHIN (up to max_matches)
  node_vm       node-side matching of ``A+ B+ C`` where C never holds and reads the row before
                B's last (``LAST(B.ts, 1)``): the row-pattern VM's cubic work over one
                partition, which no thread pruning cuts (it keeps every split of the rows
                apart; hours at a few thousand rows)
  like          an input filter of ``s LIKE '%a%_%_...'`` (256 characters) ORed many times over
                long strings, sent straight to the node (the compute node does not push it)
  like_node     four such LIKEs (1,024 pattern characters: the compute node pushes them) over
                strings too long for the node's storage.filter_cost_limit
  abandoned     the push_pull attack with a long lease, given up by its compute node after a
                second (the call times out) and closed, as a compute node does
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.transport.client import StorageClient

ATTACKS = ("push_pull", "node_matches", "node_vm", "like", "like_node", "abandoned")
SKIP4 = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ONE ROW PER MATCH "
    "AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B N*? C N*? D) "
    "DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C', D AS type = 'D')"
)
ALL2 = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ALL MATCHES PATTERN (A B) "
    "DEFINE A AS type = 'A', B AS type = 'B')"
)
CUBIC = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS c ONE ROW PER MATCH "
    "PATTERN (A+ B+ C) DEFINE C AS C.ts < LAST(B.ts, 1))"
)
#: the next query after an attack: small, with a window
SMALL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a ALL MATCHES PATTERN (A B) "
    "WITHIN INTERVAL '1' SECOND DEFINE A AS type = 'A', B AS type = 'B')"
)


def attack_table(n: int, text: int = 120) -> pa.Table:
    """``4 n`` events one millisecond apart, types A, B, C, D in turn, and a string ``s`` of
    ``text`` letters a (a LIKE ``'%a' || '%_' x 127`` never matches shorter strings)."""
    return pa.table(
        {
            "ts": pa.array(np.arange(4 * n, dtype=np.int64), pa.timestamp("ms")),
            "type": pa.array(np.array(["A", "B", "C", "D"])[np.arange(4 * n) % 4]),
            "s": pa.array(["a" * text] * (4 * n)),
        }
    )


def like_filter(ors: int) -> str:
    """``ors`` LIKEs of 256-character patterns, ORed (each under the 256-character limit)."""
    return " OR ".join(f"s LIKE '%{chr(ord('a') + i % 26)}" + "%_" * 127 + "'" for i in range(ors))


@dataclass
class Outcome:
    attack: str
    error: str
    call_seconds: float
    #: seconds the node's call ran past the query's deadline (or its close); 0 when before
    past_deadline_seconds: float
    cpu_after_seconds: float
    rss_peak_mb: float
    reserve_ms_max: float
    reserve_ms_median: float
    next_query_ms: float
    #: what the node held once the attack's query was closed (queries + bytes + reservations)
    held_after: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cpu(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _rss(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_info().rss) / 2**20


def run_attack(
    endpoint: str,
    token: str,
    pid: int,
    attack: str,
    *,
    lease: float = 2.0,
    settle: float = 2.0,
    like_ors: int = 180,
) -> Outcome:
    """Run ``attack`` against the node at ``endpoint`` (process ``pid``) and measure it."""
    client = StorageClient(endpoint, token, timeout=1.0 if attack == "abandoned" else 120.0)
    setup = StorageClient(endpoint, token, timeout=120.0)
    qid = uuid.uuid4().hex
    deadline = [time.monotonic() + lease]
    try:
        if attack in ("push_pull", "abandoned"):
            setup.action(
                "open",
                {
                    "query_id": qid,
                    "sql": SKIP4,
                    "lease_seconds": 120.0 if attack == "abandoned" else lease,
                },
            )
            deadline[0] = time.monotonic() + lease
            for v in "ABC":
                got = setup.pull({"query_id": qid, "kind": "pull_variable", "variable": v})
                setup.upload(
                    {"query_id": qid, "variable": v}, got.drop_columns([got.column_names[-1]])
                )

            def call() -> None:
                client.action(
                    "push_pull", {"query_id": qid, "variable": "D", "processed": list("ABC")}
                )
        elif attack in ("node_matches", "node_vm"):
            setup.action(
                "open",
                {
                    "query_id": qid,
                    "sql": ALL2 if attack == "node_matches" else CUBIC,
                    "lease_seconds": lease,
                },
            )
            deadline[0] = time.monotonic() + lease

            def call() -> None:
                client.pull(
                    {
                        "query_id": qid,
                        "kind": "pull_matches",
                        "event_key": [],
                        "dedup": False,
                        "max_matches": 10_000_000,
                        "on_limit": "error",
                        "max_steps": 10**15,
                    }
                )
        elif attack in ("like", "like_node"):
            ors = like_ors if attack == "like" else 4

            def call() -> None:
                client.action(
                    "open",
                    {
                        "query_id": qid,
                        "sql": SKIP4,
                        "lease_seconds": lease,
                        "input_filter": like_filter(ors),
                    },
                )
        else:
            raise ValueError(f"unknown attack {attack!r}; attacks: {', '.join(ATTACKS)}")
        outcome: dict[str, Any] = {"error": ""}

        def run() -> None:
            began = time.monotonic()
            try:
                call()
            except Exception as exc:  # the outcome is what is measured
                outcome["error"] = f"{type(exc).__name__}: {exc}"
            outcome["seconds"] = time.monotonic() - began
            outcome["ended"] = time.monotonic()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        latencies, rss = [], _rss(pid)
        other = StorageClient(endpoint, token, timeout=120.0)
        while thread.is_alive():
            asked = time.monotonic()
            probe = uuid.uuid4().hex
            other.action("reserve", {"query_id": probe, "arrival": time.time()})
            latencies.append(time.monotonic() - asked)
            other.action("close", {"query_id": probe})
            rss = max(rss, _rss(pid))
            time.sleep(0.05)
        thread.join()
        if (
            attack == "abandoned"
        ):  # the compute node gave up: it closes the query, as the closer does
            gave_up = time.monotonic()
            setup.action("close", {"query_id": qid})
            # the node's call ends when its work stops: the node is idle again
            while not _idle(pid) and time.monotonic() < gave_up + 60.0:
                pass
            outcome["ended"] = time.monotonic() - 0.3  # the idle window
            deadline[0] = gave_up
        before = _cpu(pid)
        time.sleep(settle)
        cpu_after = _cpu(pid) - before
        setup.action("close", {"query_id": qid})
        asked = time.monotonic()
        small = uuid.uuid4().hex
        setup.action("open", {"query_id": small, "sql": SMALL, "lease_seconds": 30.0})
        setup.action("close", {"query_id": small})
        next_ms = (time.monotonic() - asked) * 1e3
        stats = setup.action("stats")[0]
        other.close()
        return Outcome(
            attack,
            outcome["error"][:300],
            round(outcome["seconds"], 3),
            round(max(0.0, outcome["ended"] - deadline[0]), 3),
            round(cpu_after, 3),
            round(rss, 1),
            round(max(latencies, default=0.0) * 1e3, 1),
            round(statistics.median(latencies) * 1e3 if latencies else 0.0, 1),
            round(next_ms, 1),
            int(stats["queries"]) + int(stats["held_bytes"]) + int(stats["reservations"]),
        )
    finally:
        client.close()
        setup.close()


def _idle(pid: int, within: float = 0.3) -> bool:
    """The node used under a tenth of the CPU over ``within`` seconds."""
    before = _cpu(pid)
    time.sleep(within)
    return _cpu(pid) - before < 0.1 * within
