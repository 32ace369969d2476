"""An executor's request for its time slice of a deferred final pull.

The pull's interval set is known on the compute node as exact closed intervals (``cover``: an
SWF's covered time, or the intervals themselves). Each executor's request carries only the part
of them inside its slice, as exact ``intervals`` or (DFS's slice runs) the runs inside it,
whichever takes the fewest wire bytes (zstd), the pull's own blob included: a request never carries
more than the undivided pull's, and a slice with no time inside the intervals is not requested
at all.
Pulls of every row or every candidate carry no interval set."""

from __future__ import annotations

from typing import Any

import numpy as np

from dfs_cer.filters import IntervalSet
from dfs_cer.filters.points import SliceRuns
from dfs_cer.transport.messages import encode

#: the final pulls whose request carries an interval set (blob 0)
WITH_INTERVALS = ("pull", "pull_range")


def slice_request(
    kind: str,
    header: dict[str, Any],
    blobs: list[bytes],
    cover: IntervalSet | None,
    lo: int,
    hi: int,
) -> tuple[dict[str, Any], list[bytes]] | None:
    """The header and blobs of the request for the inclusive time slice ``[lo, hi]`` (without
    the slice itself), or None when no time of the slice lies inside the interval set."""
    if kind not in WITH_INTERVALS:
        return dict(header), []
    if cover is None:  # an interval set the compute node cannot cut: the whole of it
        return dict(header), list(blobs)
    part = cover.clip(lo, hi)
    if part.is_empty:
        return None
    options: list[tuple[dict[str, Any], list[bytes]]] = [
        ({**header, "tis": "intervals"}, [part.to_bytes()])
    ]
    if blobs:
        options.append((dict(header), list(blobs[:1])))
        if header.get("tis") == "slices":  # DFS's slice runs, cut to the slices of [lo, hi]
            runs = SliceRuns.from_bytes(blobs[0])
            first, last = (np.array([lo, hi], np.int64) - runs.base) // runs.quantum
            mine = runs.runs.intersection(IntervalSet([first], [last]))
            options.append((dict(header), [SliceRuns(runs.base, runs.quantum, mine).to_bytes()]))
    return min(options, key=lambda o: len(encode({}, o[1])))  # as they travel
