"""Allen's 13 interval relations on half-open intervals ``[ts, te)`` and, for each, the ranges
of the other interval's start and end that satisfy it (binary searches on sorted arrays).

``A r B`` for intervals ``a = [a.ts, a.te)`` and ``b``. Names are the standard ones; TPStream's
paper defines "A finishes B" as ``A.ts < B.ts < A.te = B.te``, which is standard
``finished_by`` (``PAPER_FINISHES``).
"""

from __future__ import annotations

import numpy as np

RELATIONS = (
    "before",
    "after",
    "meets",
    "met_by",
    "overlaps",
    "overlapped_by",
    "starts",
    "started_by",
    "during",
    "contains",
    "finishes",
    "finished_by",
    "equals",
)
INVERSE = {
    "before": "after",
    "after": "before",
    "meets": "met_by",
    "met_by": "meets",
    "overlaps": "overlapped_by",
    "overlapped_by": "overlaps",
    "starts": "started_by",
    "started_by": "starts",
    "during": "contains",
    "contains": "during",
    "finishes": "finished_by",
    "finished_by": "finishes",
    "equals": "equals",
}
PAPER_FINISHES = "finished_by"
#: TPStream's initial selectivity estimates (Table 3; an inverse has its relation's value)
SELECTIVITY = {
    "before": 0.445,
    "during": 0.03,
    "overlaps": 0.01,
    "starts": 0.0049,
    "finishes": 0.0049,
    "meets": 0.0049,
    "equals": 0.0006,
}
SELECTIVITY.update({INVERSE[k]: v for k, v in list(SELECTIVITY.items())})

NEG, POS = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def holds(
    relation: str, a_ts: np.ndarray, a_te: np.ndarray, b_ts: np.ndarray, b_te: np.ndarray
) -> np.ndarray:
    """``A relation B`` element-wise (the definitions of Allen's relations with ``ts < te``)."""
    r = relation
    if r == "before":
        return a_te < b_ts
    if r == "after":
        return b_te < a_ts
    if r == "meets":
        return a_te == b_ts
    if r == "met_by":
        return b_te == a_ts
    if r == "overlaps":
        return (a_ts < b_ts) & (b_ts < a_te) & (a_te < b_te)
    if r == "overlapped_by":
        return (b_ts < a_ts) & (a_ts < b_te) & (b_te < a_te)
    if r == "starts":
        return (a_ts == b_ts) & (a_te < b_te)
    if r == "started_by":
        return (a_ts == b_ts) & (b_te < a_te)
    if r == "during":
        return (b_ts < a_ts) & (a_te < b_te)
    if r == "contains":
        return (a_ts < b_ts) & (b_te < a_te)
    if r == "finishes":
        return (b_ts < a_ts) & (a_te == b_te)
    if r == "finished_by":
        return (a_ts < b_ts) & (a_te == b_te)
    if r == "equals":
        return (a_ts == b_ts) & (a_te == b_te)
    raise ValueError(f"unknown relation {relation!r}")


# For A = [s, e): the range of B.ts and of B.te as (lo, lo_closed, hi, hi_closed), where lo/hi
# are "s", "e" or None (unbounded). B.ts < B.te holds for every situation, so only the bounds
# the definition states are needed; the exact predicate is checked afterwards anyway.
RANGES: dict[
    str, tuple[tuple[str | None, bool, str | None, bool], tuple[str | None, bool, str | None, bool]]
] = {
    "before": (("e", False, None, False), (None, False, None, False)),
    "after": ((None, False, None, False), (None, False, "s", False)),
    "meets": (("e", True, "e", True), (None, False, None, False)),
    "met_by": ((None, False, None, False), ("s", True, "s", True)),
    "overlaps": (("s", False, "e", False), ("e", False, None, False)),
    "overlapped_by": ((None, False, "s", False), ("s", False, "e", False)),
    "starts": (("s", True, "s", True), ("e", False, None, False)),
    "started_by": (("s", True, "s", True), ("s", False, "e", False)),
    "during": ((None, False, "s", False), ("e", False, None, False)),
    "contains": (("s", False, "e", False), ("s", False, "e", False)),
    "finishes": ((None, False, "s", False), ("e", True, "e", True)),
    "finished_by": (("s", False, "e", False), ("e", True, "e", True)),
    "equals": (("s", True, "s", True), ("e", True, "e", True)),
}


def search_range(
    relation: str,
    a_part: np.ndarray,
    a_s: np.ndarray,
    a_e: np.ndarray,
    b_ts_key: np.ndarray,
    b_te_key: np.ndarray,
    stride: int,
) -> tuple[np.ndarray, np.ndarray]:
    """For each A, the index range ``[first, last)`` of Bs meeting the relation's bounds.

    Times are ranks (1 .. stride - 2) and every B is keyed ``partition * stride + rank``, so
    one sorted array holds all partitions: ``b_ts_key`` and ``b_te_key`` are sorted together
    (disjoint situations of one symbol ordered by start have ordered ends). Unbounded ends are
    the partition's rank 0 and stride - 1. Four binary searches per relation, as TPStream's
    findMatches, for every A at once."""
    base = a_part.astype(np.int64) * stride
    first = np.searchsorted(b_ts_key, base, side="left")
    last = np.searchsorted(b_ts_key, base + stride - 1, side="right")
    for arr, (lo, lo_c, hi, hi_c) in zip((b_ts_key, b_te_key), RANGES[relation], strict=True):
        if lo is not None:
            v = base + (a_s if lo == "s" else a_e)
            first = np.maximum(first, np.searchsorted(arr, v, side="left" if lo_c else "right"))
        if hi is not None:
            v = base + (a_s if hi == "s" else a_e)
            last = np.minimum(last, np.searchsorted(arr, v, side="right" if hi_c else "left"))
    return first, np.maximum(last, first)


# Detection time (TPStream Table 2): the earliest endpoint at which ``A r B`` is certain, from
# A's side; ``max`` over a pattern's constraints gives when a match is certain (``t_d(P)``).
DETECTION = {
    "before": "B.ts",
    "meets": "B.ts",
    "starts": "A.te",
    "equals": "A.te",
    "started_by": "B.te",
    "overlaps": "A.te",
    "finished_by": "A.te",
    "contains": "B.te",
    "after": "A.ts",
    "met_by": "A.ts",
    "overlapped_by": "B.te",
    "during": "A.te",
    "finishes": "A.te",
}
#: relations that cannot be told apart before the later start (TPStream's prefix groups)
PREFIX_GROUPS = (
    frozenset({"before", "meets"}),
    frozenset({"starts", "equals", "started_by"}),
    frozenset({"overlaps", "finished_by", "contains"}),
)


def detection_endpoints(relation: str, a: str, b: str) -> str:
    """The endpoint (``"A.ts"`` style, with the symbols' names) at which ``a relation b`` becomes
    certain (TPStream's t_d)."""
    side, end = DETECTION[relation].split(".")
    return f"{a if side == 'A' else b}.{end}"


def detection_time(
    relations: dict[tuple[str, str], str],
    bounds: dict[str, tuple[int, int]],
    min_duration: dict[str, int] | None = None,
) -> int:
    """When a match is certain: the latest detection endpoint over its constraints (each with the
    relation that holds), and no earlier than ``ts + d_min`` of a situation with a minimum
    duration (it is not a situation before then). ``bounds``: symbol -> (ts, te)."""
    t = max(bounds[s][0] for s in bounds)
    for (a, b), rel in relations.items():
        sym, end = detection_endpoints(rel, a, b).split(".")
        t = max(t, bounds[sym][0 if end == "ts" else 1])
    for sym, d in (min_duration or {}).items():
        t = max(t, bounds[sym][0] + d)
    return t
