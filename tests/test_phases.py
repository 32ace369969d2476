"""A query's time by phase: the split of a trace's rounds, the process's age, the kernel clock
and the node's own time as replies carry it."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
from numba import njit

from dfs_cer.phases import KernelClock, line, process_age, split
from dfs_cer.transport.timing import (
    NODE_US,
    node_seconds,
    stamp_header,
    stamp_stream,
    timed_stream,
)

ROUNDS = [
    {"action": "open", "seconds": 0.05, "node_seconds": 0.04, "cn_seconds": 0.001},
    {"action": "collect", "seconds": 0.02, "node_seconds": 0.015, "cn_seconds": 0.003},
    {"action": "skip", "seconds": 0.0},  # a round the cost model skipped
    {"action": "pull", "seconds": 0.03, "node_seconds": 0.01, "cn_seconds": 0.2},
]


def test_split_puts_every_second_in_one_phase() -> None:
    got = split(ROUNDS, 0.1, wall=1.0, startup=0.2, planning=0.3, kernels=0.15)
    assert got["rounds"] == pytest.approx(0.074)
    assert got["rounds nodes"] == pytest.approx(0.055)
    assert got["rounds wire"] == pytest.approx(0.015)
    assert got["pull"] == pytest.approx(0.23) and got["pull CN"] == pytest.approx(0.2)
    whole = sum(got[k] for k in ("start-up", "planning", "rounds", "pull", "matching", "other"))
    assert whole == pytest.approx(1.0) and got["wall"] == 1.0
    text = line(got)
    assert text.startswith("time (ms): start-up 200, planning 300, rounds 74 (CN 4, nodes 55,")
    assert text.endswith("= 1,000; kernels loaded in 150 of it")
    # a node that said nothing: its time is the wire's
    bare = split([{"action": "pull_all", "seconds": 0.5}], None, wall=0.4)
    assert bare["pull wire"] == 0.5 and bare["other"] == 0.0 and "start-up" not in bare


def test_process_age_and_kernel_clock() -> None:
    age = process_age()
    assert age is not None and 0 < age < 24 * 3600
    clock = KernelClock.start()
    assert KernelClock.start() is clock
    before = clock.seconds

    @njit
    def twice(x: np.ndarray) -> np.ndarray:
        return x * 2

    began = time.perf_counter()
    twice(np.arange(3))
    assert 0 < clock.seconds - before <= time.perf_counter() - began


def test_node_time_travels_in_headers_and_stream_metadata() -> None:
    header: dict[str, object] = {"ok": True}
    stamp_header(header, 0.0123456)
    assert header[NODE_US] == 12346 and node_seconds(header[NODE_US]) == 0.012346
    for bad in (None, -1, 1.5, True, "7", 10**20):  # a node's wrong claim is not read
        assert node_seconds(bad) is None
    table = pa.table({"a": [1, 2]}).replace_schema_metadata({b"keep": b"1"})
    rows, seconds = timed_stream(stamp_stream(table, 0.5))
    assert seconds == 0.5 and rows.schema.metadata == {b"keep": b"1"} and rows.equals(table)
    assert timed_stream(table) == (table, None)
    odd = table.replace_schema_metadata({b"dfs_cer.node_us": b"-5"})
    assert timed_stream(odd)[1] is None
