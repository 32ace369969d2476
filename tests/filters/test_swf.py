"""Shrinking window filter: reference vectors, the paper's Table I, growth, compaction and the
no-false-negative property against exact interval sets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfs_cer.filters import IntervalSet, RefreshTags, ShrinkingWindowFilter, eq1_offsets
from dfs_cer.filters import swf_kernels as k
from dfs_cer.filters.sizing import swf_buckets

BASE = 1731628800


def T(h: int, m: int) -> int:
    return BASE + h * 3600 + m * 60


# paper Table I: e1..e10
TS = [
    T(18, 45),
    T(18, 50),
    T(18, 50),
    T(18, 53),
    T(19, 0),
    T(20, 15),
    T(20, 43),
    T(21, 43),
    T(21, 50),
    T(22, 0),
]
W = 1800


def test_quickhash_vectors() -> None:
    assert k.window_hash(np.int64(0), np.uint64(0)) == 0x165667B19E3779F9
    h = k.window_hash(np.int64(962037), np.uint64(0))
    assert h == 0xA66028FC341F882C
    assert h >> np.uint64(52) == 2662


@pytest.mark.parametrize(
    ("offset", "left", "right"),
    [
        (0, 0xFFFFF, 0x1),
        (89, 0xFFFFF, 0x1),
        (90, 0xFFFFE, 0x3),
        (900, 0xFFC00, 0x7FF),
        (1799, 0x80000, 0xFFFFF),
    ],
)
def test_slice_masks(offset: int, left: int, right: int) -> None:
    j = k.slice_of(np.int64(offset), np.int64(0), np.int64(1800))
    assert k.left_mask(j) == left and k.right_mask(j) == right


@pytest.mark.parametrize(
    ("n", "m"), [(0, 1), (1, 1), (6, 2), (16, 8), (100, 32), (1000, 512), (123456, 32768)]
)
def test_bucket_sizing(n: int, m: int) -> None:
    assert swf_buckets(n) == m


def test_table1_round_trips() -> None:
    """Paper Table I / Q1: R intervals -> SWF (bit-exact with the reference),
    M refresh -> [e1, e1 + 990)."""
    r_ts = [TS[0], TS[5], TS[7]]
    swf = ShrinkingWindowFilter.from_intervals(r_ts, [t + W for t in r_ts], W)
    # reference bytes: 280007ff89dffc00 0000000002b007ff 3f2fff00647ffc00 00000000dd5001ff
    # (slot0 = low half)
    assert swf.table.tolist() == [
        0x89DFFC00,
        0x280007FF,
        0x02B007FF,
        0,
        0x647FFC00,
        0x3F2FFF00,
        0xDD5001FF,
        0,
    ]
    assert (swf.buckets, swf.entry_count, swf.slice_count) == (2, 6, 63)
    assert swf.contains(TS).all()
    sn = ShrinkingWindowFilter.from_bytes(swf.to_bytes())
    tags = sn.refresh([TS[4]], "tail")  # only e5 passes the WJF
    assert tags.tags[:2].tolist() == [0xFFFFF, 0x00001]
    swf.apply_refresh([RefreshTags.from_bytes(tags.to_bytes())])
    assert (swf.entry_count, swf.slice_count) == (2, 11)
    assert swf.contains(TS).tolist() == [True] * 5 + [False] * 5
    starts, ends = swf.covered_intervals()
    assert starts.tolist() == [TS[0]] and ends.tolist() == [TS[0] + 989]  # closed


def test_compaction_reference_example() -> None:
    """60 intervals in a table for 200 keys; 10 middle refreshes; compaction to 8 buckets."""
    w = 100
    swf = ShrinkingWindowFilter(w, swf_buckets(200))
    starts = np.array([1000 + 350 * i for i in range(60)])
    swf.insert_intervals(starts, starts + 100)
    assert (swf.buckets, swf.entry_count, swf.slice_count) == (64, 120, 1260)
    tags = swf.refresh(np.array([1050 + 350 * i for i in range(0, 60, 6)]), "middle")
    swf.apply_refresh([tags], min_buckets=8)
    assert (swf.buckets, swf.entry_count, swf.slice_count) == (8, 20, 210)


def test_compaction_has_a_floor_and_empty_is_valid() -> None:
    swf = ShrinkingWindowFilter.from_intervals(
        np.arange(0, 10**6, 1000), np.arange(0, 10**6, 1000) + 50, 100
    )
    assert swf.buckets > 16
    swf.apply_refresh([swf.refresh([], "head")])
    assert swf.is_empty and swf.entry_count == 0 and swf.covered_length == 0
    assert swf.buckets == 16  # floor, never zero buckets
    assert not swf.contains(np.arange(0, 10**6, 77)).any()
    assert ShrinkingWindowFilter.from_bytes(swf.to_bytes()).is_empty


def test_full_table_grows_instead_of_dropping() -> None:
    swf = ShrinkingWindowFilter(10, 1)
    starts = np.arange(0, 200_000, 10)  # 20 000 windows into a 1-bucket table
    swf.insert_intervals(starts, starts + 4)
    assert swf.grow_count > 0
    assert swf.entry_count == starts.size
    assert swf.contains(starts).all() and swf.contains(starts + 4).all()


def test_received_filter_is_read_only() -> None:
    sn = ShrinkingWindowFilter.from_bytes(
        ShrinkingWindowFilter.from_intervals([0], [10], 5).to_bytes()
    )
    with pytest.raises(ValueError, match="received over the wire"):
        sn.insert_intervals([0], [1])


def test_stale_refresh_is_rejected() -> None:
    swf = ShrinkingWindowFilter.from_intervals([0, 500], [100, 600], 100)
    old = swf.refresh([50], "middle")
    swf.apply_refresh([swf.refresh([50, 550], "middle")])
    swf.insert_intervals([5000], [5100])
    with pytest.raises(ValueError, match="do not belong to this filter"):
        swf.apply_refresh([old])


def test_eq1_offsets() -> None:
    assert eq1_offsets("head", 30) == (0, 30)
    assert eq1_offsets("tail", 30) == (-30, 0)
    assert eq1_offsets("middle", 30) == (-30, 30)
    with pytest.raises(ValueError, match="role must be head, tail or middle"):
        eq1_offsets("first", 30)


def test_negative_timestamps_use_floor_windows() -> None:
    swf = ShrinkingWindowFilter.from_intervals([-250], [-150], 100)
    assert swf.contains([-250, -200, -150]).all()
    assert not swf.contains([-100, 0, 150, 250]).any()


# ------------------------------------------------------------------------------ property tests

roles = st.sampled_from(["head", "tail", "middle"])


@st.composite
def scenario(
    draw: st.DrawFn,
) -> tuple[int, np.ndarray, list[tuple[str, list[np.ndarray]]], np.ndarray]:
    w = draw(st.integers(1, 500))
    span = draw(st.integers(w, 60 * w))
    first = np.array(draw(st.lists(st.integers(-span, span), min_size=0, max_size=40)), np.int64)
    rounds = []
    for _ in range(draw(st.integers(0, 3))):
        role = draw(roles)
        n_sn = draw(st.integers(1, 4))
        per_sn = [
            np.array(draw(st.lists(st.integers(-span, span), max_size=25)), np.int64)
            for _ in range(n_sn)
        ]
        rounds.append((role, per_sn))
    probes = np.array(
        draw(st.lists(st.integers(-2 * span, 2 * span), min_size=1, max_size=200)), np.int64
    )
    return w, first, rounds, probes


@given(scenario(), roles, st.integers(0, 2**64 - 1))
def test_never_a_false_negative(
    case: tuple[int, np.ndarray, list[tuple[str, list[np.ndarray]]], np.ndarray],
    first_role: str,
    seed: int,
) -> None:
    """Against the exact interval set, through build, wire transfer, refresh on several SNs,
    merges and compactions: every timestamp in the exact set stays in the SWF."""
    w, first, rounds, probes = case
    lo, hi = eq1_offsets(first_role, w)
    exact = IntervalSet.around(first, lo, hi)
    swf = ShrinkingWindowFilter.from_intervals(exact.starts, exact.ends, w, seed=seed)
    inside = exact.contains(probes)
    assert swf.contains(probes)[inside].all()
    assert swf.contains(first + lo).all() and swf.contains(first + hi).all()
    for role, per_sn in rounds:
        lo, hi = eq1_offsets(role, w)
        sent = ShrinkingWindowFilter.from_bytes(swf.to_bytes())
        # SNs refresh only from events that pass phase 1 (timestamp in the current SWF)
        tags = [
            RefreshTags.from_bytes(sent.refresh(ts[sent.contains(ts)], role).to_bytes())
            for ts in per_sn
        ]
        survivors = np.concatenate([ts[swf.contains(ts)] for ts in per_sn])
        exact = exact.intersection(IntervalSet.around(survivors, lo, hi))
        swf.apply_refresh(tags, min_buckets=1)
        inside = exact.contains(probes)
        assert swf.contains(probes)[inside].all()
        assert swf.contains(exact.starts).all() and swf.contains(exact.ends).all()
    # the covered length bounds the exact one from above (slices of w/20 >= 1 unit leave no gaps
    # between the integer points they cover)
    if w >= 20:
        assert swf.covered_length >= exact.total_length() - len(exact)


def test_table1_final_pull_is_exactly_e1_e2_e5() -> None:
    """Q1 on Table I with the paper's plan (R first, B skipped, M joined on B.district): the rows
    a storage node ships are the cached candidate rows inside the final SWF."""
    from dfs_cer.filters import KeyKind, WindowJoinFilter

    district = [10, 19, 14, 6, 19, 15, 7, 24, 14, 8]
    candidates = {"R": [0, 5, 7], "B": [1, 6, 8], "M": [2, 4, 9]}  # e4 (ASSAULT) is never cached
    ts = np.array(TS)
    r = ts[candidates["R"]]
    swf = ShrinkingWindowFilter.from_intervals(r, r + W, W)
    wjf = WindowJoinFilter.with_estimates(3, W, KeyKind.INT)
    wjf.add(np.array([district[i] for i in candidates["B"]]), ts[candidates["B"]])
    m = np.array(candidates["M"])
    keep = swf.contains(ts[m]) & wjf.might_contain(
        np.array([district[i] for i in m]), ts[m], direction=-1
    )
    candidates["M"] = m[keep].tolist()
    assert candidates["M"] == [4]
    swf.apply_refresh([swf.refresh(ts[m[keep]], "tail")])
    rows = sorted({i for rows in candidates.values() for i in rows})
    pulled = [f"e{i + 1}" for i in rows if swf.contains([TS[i]])[0]]
    assert pulled == ["e1", "e2", "e5"]


@pytest.mark.parametrize("rate", [0.002, 0.02])
def test_fpr_within_theorem1(rate: float) -> None:
    """Statistical: the initial SWF's FPR is at most 1.5x Theorem 1 (w = 100, head variable)."""
    from dfs_cer.filters.sizing import swf_fpr_theorem1

    rng = np.random.default_rng(11)
    span = 3_000_000
    exact = IntervalSet.around(np.sort(rng.integers(0, span, rng.poisson(rate * span))), 0, 100)
    swf = ShrinkingWindowFilter.from_intervals(exact.starts, exact.ends, 100)
    probes = rng.integers(0, span, 500_000)
    measured = (swf.contains(probes) & ~exact.contains(probes)).mean()
    assert measured <= 1.5 * swf_fpr_theorem1(rate, 100, load=swf.load_factor)


@pytest.mark.parametrize("window", [3, 7, 10**6, 2**62 + 1, 2**63 - 2**43])
def test_covered_intervals_hold_int64_s_least_times(window: int) -> None:
    """The window holding int64's least time starts below it when the window does not divide
    it (``floor(MIN / w) * w < MIN``); its slices were placed from a wrapped start, at the top
    of int64, so the times there were no longer covered (dfs_paper lost matches near 1677 under
    ``WITHIN INTERVAL '106751' DAY``)."""
    lo, hi = -(2**63), 2**63 - 1
    swf = ShrinkingWindowFilter.from_intervals(
        np.array([lo, -5, hi - 10]), np.array([lo + 2, 5, hi]), window
    )
    ts = np.array([lo, lo + 1, lo + 2, -5, 0, 5, hi - 10, hi])
    assert swf.contains(ts).all()
    starts, ends = swf.covered_intervals()
    assert IntervalSet(starts, ends).contains(ts).all()
