"""CLUSTER-shaped events: task events of a Google compute cluster (the 2011 trace).

Each job submits tasks; each task goes SUBMIT (TP0) → SCHEDULE (TP1) → FINISH (TP4), KILL (TP5)
or FAIL (TP3), seconds apart, with its CPU, RAM and disk requests. Timestamps in µs. About 57
events per second overall, so a 3-second window holds ~170 events across all jobs; the workload
partitions by job.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema(
    [
        ("type", pa.string()),
        ("jobid", pa.int64()),
        ("index", pa.int32()),
        ("scheduling", pa.string()),
        ("priority", pa.int32()),
        ("cpu", pa.float32()),
        ("ram", pa.float32()),
        ("disk", pa.float32()),
        ("eventtime", pa.timestamp("us")),
    ]
)

#: 2011-05-01T19:00:00Z in µs (the trace's epoch offset is arbitrary)
START_US = 1_304_276_400_000_000
_END_TYPES = np.array(["TP4", "TP5", "TP3"])


def cluster_batches(
    n: int, *, seed: int = 7, events_per_s: float = 57.0, batch: int = 1_000_000
) -> Iterator[pa.RecordBatch]:
    """About ``n`` task events (exactly ``n``), in time order, ``batch`` at a time."""
    rng = np.random.default_rng(seed)
    clock_us = float(START_US)
    next_job = 6_000_000_000
    produced = 0
    while produced < n:
        # tasks: 3 events each; jobs of 1..40 tasks (geometric)
        tasks = max(1, min(batch, n - produced) // 3 + 1)
        sizes = np.minimum(rng.geometric(0.15, tasks), 40)
        job_of_task = np.repeat(np.arange(sizes.size), sizes)[:tasks]
        jobs = job_of_task.max() + 1
        job_start = clock_us + np.cumsum(
            rng.exponential(3e6 / events_per_s * sizes[:jobs].mean(), jobs)
        )
        index = np.concatenate([np.arange(s) for s in sizes])[:tasks].astype(np.int32)
        submit = job_start[job_of_task] + rng.exponential(2e5, tasks)
        schedule = submit + rng.exponential(8e5, tasks)
        end = schedule + rng.exponential(1.5e6, tasks)
        cpu = rng.beta(2, 20, tasks).astype(np.float32)
        ram = rng.beta(2, 25, tasks).astype(np.float32)
        disk = rng.beta(1, 200, tasks).astype(np.float32)
        job_priority = rng.integers(0, 12, jobs)[job_of_task].astype(np.int32)
        job_sched = rng.integers(0, 4, jobs)[job_of_task].astype(str)
        end_type = _END_TYPES[rng.choice(3, tasks, p=[0.7, 0.25, 0.05])]
        t = np.concatenate([submit, schedule, end]).astype(np.int64)
        order = np.argsort(t, kind="stable")
        take = min(order.size, n - produced)
        order = order[:take]
        rep = np.tile(np.arange(tasks), 3)[order]
        types = np.concatenate([np.full(tasks, "TP0"), np.full(tasks, "TP1"), end_type])[order]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(types),
                pa.array(next_job + job_of_task[rep].astype(np.int64)),
                pa.array(index[rep]),
                pa.array(job_sched[rep]),
                pa.array(job_priority[rep]),
                pa.array(cpu[rep]),
                pa.array(ram[rep]),
                pa.array(disk[rep]),
                pa.array(t[order], pa.timestamp("us")),
            ],
            schema=SCHEMA,
        )
        produced += take
        next_job += int(jobs)
        clock_us = float(t[order].max())  # the next batch starts after this one: time order holds


def cluster_queries(count: int = 20, *, seed: int = 11, window_seconds: int = 3) -> list[str]:
    """The CLUSTER workload: per job, SUBMIT → SCHEDULE (task index < 5) → FINISH or KILL
    within 3 seconds, with CPU/RAM thresholds; some queries add ``B.disk >= 0.5 * A.disk``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        cpu = round(float(rng.uniform(0.05, 0.2)), 3)
        ram = round(float(rng.uniform(0.05, 0.2)), 3)
        end = "TP4" if rng.random() < 0.5 else "TP5"
        disk = " AND B.disk >= 0.5 * A.disk" if rng.random() < 69 / 170 else ""
        limits = "{v}.cpu <= " + str(cpu) + " AND {v}.ram <= " + str(ram)
        out.append(
            "SELECT * FROM cluster MATCH_RECOGNIZE (PARTITION BY jobid ORDER BY eventtime "
            "MEASURES A.index AS a_index, B.index AS b_index, C.index AS c_index, "
            "C.eventtime AS c_time ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN "
            f"(A N1*? B N2*? C) WITHIN INTERVAL '{window_seconds}' SECOND DEFINE A AS "
            f"A.type = 'TP0' AND {limits.format(v='A')}, B AS B.type = 'TP1' AND "
            f"{limits.format(v='B')} AND B.jobid = A.jobid AND B.index < 5{disk}, C AS "
            f"C.type = '{end}' AND {limits.format(v='C')} AND C.jobid = B.jobid)"
        )
    return out
