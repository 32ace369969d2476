"""Load the filters' compiled kernels at start-up, before a node reports ready: the first query
then runs at full speed, and the node's memory at rest already includes the JIT runtime (so a
strategy's memory cost is what it holds per query, not which kernels it happened to load first)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer.filters import IntervalSet, KeyKind, ShrinkingWindowFilter, WindowJoinFilter
from dfs_cer.filters.keyset import WindowKeySet
from dfs_cer.filters.swf import RefreshTags


def warm_up() -> None:
    ts = np.arange(0, 4000, 40, dtype=np.int64)
    # the CER engine's joins (push-pull, node-side matching): a compile is not interruptible
    from dfs_cer.match.cer.kernels import expand

    expand(ts[:3], ts[:3] + 1, ts[:3], ts[:3], ts, ts)
    swf = ShrinkingWindowFilter.from_intervals(ts[:10], ts[:10] + 100, 100)
    swf.insert_intervals(ts[10:20], ts[10:20] + 100)
    swf.contains(ts)
    for role in ("head", "tail", "middle"):
        tags = swf.refresh(ts, role)
    swf.apply_refresh([RefreshTags.from_bytes(tags.to_bytes())])
    ShrinkingWindowFilter.from_bytes(swf.to_bytes()).contains(ts)
    IntervalSet.around(ts, 0, 100).contains(ts)
    for kind, values in (
        (KeyKind.INT, pa.array(np.arange(ts.size))),
        (KeyKind.STRING, pa.array(["a", "b"] * 50)),
        (KeyKind.FLOAT, pa.array(np.arange(ts.size, dtype=np.float64))),
    ):
        wjf = WindowJoinFilter.with_estimates(ts.size, 100, kind)
        wjf.add(values, ts)
        WindowJoinFilter.from_bytes(wjf.to_bytes()).might_contain(values, ts, 1)
        keys = WindowKeySet(100, kind)
        keys.add(values, ts)
        keys.might_contain(values, ts, -1)
