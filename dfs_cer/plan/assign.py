"""Which storage node serves which data file of a table served in place (pure logic).

An assignment is decided once, from the table's files when it is first served, and kept: every
query, and every later snapshot, sees the same split. ``time`` cuts the files, ordered by their
first event time, into one contiguous time range per node with about equal rows (a node then
holds whole stretches of time, which keeps a match's rows together); a file added later goes to
the node whose range holds its first time. ``hash`` places each file by a hash of its path. A
file without time statistics is always placed by hash.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MODES = ("time", "hash")


@dataclass(frozen=True)
class FileStats:
    path: str
    rows: int
    min_ts: int | None
    max_ts: int | None


@dataclass
class Assignment:
    mode: str
    nodes: int
    #: time mode: the first time of nodes 1..n-1 (a file whose first time is >= bounds[k-1] and
    #: < bounds[k] goes to node k)
    bounds: list[int] = field(default_factory=list)
    #: the files seen when the assignment was written, and their node
    files: dict[str, int] = field(default_factory=dict)

    def node_of(self, f: FileStats) -> int:
        known = self.files.get(f.path)
        if known is not None:
            return known
        if self.mode == "time" and f.min_ts is not None:
            return bisect.bisect_right(self.bounds, f.min_ts)
        return hashed(f.path, self.nodes)

    def share(self, files: Sequence[FileStats], node: int) -> list[FileStats]:
        return [f for f in files if self.node_of(f) == node]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "nodes": self.nodes,
            "bounds": list(self.bounds),
            "files": dict(self.files),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Assignment:
        mode, nodes = raw["mode"], raw["nodes"]
        bounds, files = raw.get("bounds", []), raw.get("files", {})
        if (
            mode not in MODES
            or type(nodes) is not int
            or nodes < 1
            or not isinstance(bounds, list)
            or not all(type(b) is int for b in bounds)
            or not isinstance(files, dict)
            or not all(
                isinstance(k, str) and type(v) is int and 0 <= v < nodes for k, v in files.items()
            )
        ):
            raise ValueError("not an assignment (mode, nodes, bounds, files)")
        return cls(mode, nodes, list(bounds), dict(files))


def hashed(path: str, nodes: int) -> int:
    return zlib.crc32(path.encode()) % nodes


def assign(files: Sequence[FileStats], nodes: int, mode: str = "time") -> Assignment:
    """The assignment of ``files`` to ``nodes`` nodes."""
    if mode not in MODES:
        raise ValueError(f"assignment mode {mode!r}; use one of {', '.join(MODES)}")
    if mode == "hash":
        return Assignment("hash", nodes, [], {f.path: hashed(f.path, nodes) for f in files})
    timed = sorted((f for f in files if f.min_ts is not None), key=lambda f: (f.min_ts, f.path))
    total = sum(max(f.rows, 1) for f in timed)
    bounds: list[int] = []
    placed: dict[str, int] = {}
    seen = 0
    for f in timed:
        # the node this file's middle row falls in, by cumulative rows; never backwards
        want = min(nodes - 1, (seen + max(f.rows, 1) // 2) * nodes // max(total, 1))
        while len(bounds) < want:
            assert f.min_ts is not None
            bounds.append(f.min_ts)
        placed[f.path] = len(bounds)
        seen += max(f.rows, 1)
    while len(bounds) < nodes - 1:  # fewer files than nodes: the last nodes get later files
        bounds.append(bounds[-1] + 1 if bounds else (timed[-1].max_ts or 0) + 1 if timed else 0)
    for f in files:
        if f.min_ts is None:
            placed[f.path] = hashed(f.path, nodes)
    return Assignment("time", nodes, bounds, placed)
