"""Window-wise join filter: no false negatives against the exact join set, sizing, key kinds,
FPR within 1.5x of Eq. 6, merges across storage nodes."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfs_cer.filters import JoinSet, KeyKind, WindowJoinFilter, join_kind
from dfs_cer.filters.sizing import bloom_parameters, per_lookup_fpr, wjf_fpr_eq6

BASE = 1731628800


def T(h: int, m: int) -> int:
    return BASE + h * 3600 + m * 60


def test_table1_b_and_m() -> None:
    """Q1: WJF over B = {(19, e2), (7, e7), (14, e9)}; M's e3 fails, e5 passes, e10 fails."""
    f = WindowJoinFilter.with_estimates(3, 1800, KeyKind.INT)
    f.add(np.array([19, 7, 14]), [T(18, 50), T(20, 43), T(21, 50)])
    got = f.might_contain(np.array([14, 19, 8]), [T(18, 50), T(19, 0), T(22, 0)], direction=-1)
    assert got.tolist() == [False, True, False]


def test_sizing() -> None:
    eps = per_lookup_fpr(0.02, probes=2)
    assert eps == pytest.approx(0.01005, abs=1e-5)
    bits, k = bloom_parameters(100_000, eps)
    assert k == 7 and bits % 64 == 0
    assert bits / 100_000 == pytest.approx(9.6, abs=0.1)  # ~ 1.44 log2(1/eps) bits per key
    assert wjf_fpr_eq6(bits, k, 100_000) <= 0.02 * 1.01
    with pytest.raises(ValueError, match="invalid fpr"):
        bloom_parameters(10, 1.5)


def test_key_kinds() -> None:
    assert join_kind(pa.int32(), pa.int64()) == KeyKind.INT
    assert join_kind(pa.int64(), pa.float64()) == KeyKind.FLOAT
    assert (
        join_kind(pa.int64(), pa.float32()) == KeyKind.REAL
    )  # SQL compares REAL with an exact number as REAL
    assert join_kind(pa.float64(), pa.float32()) == KeyKind.FLOAT
    assert join_kind(pa.string(), pa.large_string()) == KeyKind.STRING
    assert join_kind(pa.timestamp("ms"), pa.timestamp("ms")) == KeyKind.INT
    with pytest.raises(TypeError, match="cannot compare"):
        join_kind(pa.string(), pa.int64())


def test_int_equals_float_and_nulls_never_match() -> None:
    f = WindowJoinFilter.with_estimates(10, 100, KeyKind.FLOAT)
    f.add(pa.array([19, None, 0], pa.int64()), [5, 5, 5])
    got = f.might_contain(
        pa.array([19.0, None, -0.0, float("nan")], pa.float64()), [6, 6, 6, 6], direction=0
    )
    assert got.tolist() == [True, False, True, False]


def test_directions() -> None:
    f = WindowJoinFilter.with_estimates(10, 100, KeyKind.INT)
    f.add(np.array([1]), [150])  # window 1
    values = np.array([1, 1, 1])
    ts = [50, 150, 250]  # windows 0, 1, 2
    assert f.might_contain(values, ts, -1).tolist() == [False, True, True]  # W and W-1
    assert f.might_contain(values, ts, +1).tolist() == [True, True, False]  # W and W+1
    assert f.might_contain(values, ts, 0).tolist() == [True, True, True]


def test_merge_requires_same_parameters() -> None:
    a = WindowJoinFilter.with_estimates(100, 10, KeyKind.INT)
    b = WindowJoinFilter.with_estimates(200, 10, KeyKind.INT)
    with pytest.raises(ValueError, match="different parameters"):
        a.merge(b)


keys = st.one_of(
    st.tuples(
        st.just(KeyKind.INT), st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=60)
    ),
    st.tuples(
        st.just(KeyKind.FLOAT),
        st.lists(st.one_of(st.none(), st.integers(-20, 20).map(lambda x: x / 2)), max_size=60),
    ),
    st.tuples(
        st.just(KeyKind.STRING),
        st.lists(
            st.one_of(st.none(), st.sampled_from(["a", "b", "ROBBERY", "é", ""])), max_size=60
        ),
    ),
)


def _array(kind: KeyKind, values: list[object]) -> pa.Array:
    return pa.array(
        values,
        {KeyKind.INT: pa.int64(), KeyKind.FLOAT: pa.float64(), KeyKind.STRING: pa.string()}[kind],
    )


@given(keys, keys, st.integers(1, 1000), st.integers(1, 4), st.sampled_from([-1, 0, 1]), st.data())
def test_never_a_false_negative(
    build: tuple[KeyKind, list[object]],
    probe: tuple[KeyKind, list[object]],
    window: int,
    n_sn: int,
    direction: int,
    data: st.DataObject,
) -> None:
    kind = build[0]
    build_values = build[1]
    probe_values = probe[1] if probe[0] == kind else build_values
    span = window * 5
    ts_build = np.array(
        data.draw(
            st.lists(
                st.integers(-span, span), min_size=len(build_values), max_size=len(build_values)
            )
        ),
        np.int64,
    )
    ts_probe = np.array(
        data.draw(
            st.lists(
                st.integers(-span, span), min_size=len(probe_values), max_size=len(probe_values)
            )
        ),
        np.int64,
    )
    exact = JoinSet(window, kind)
    exact.add(_array(kind, build_values), ts_build)
    # each SN builds a filter over its share; the CN ORs them; the result travels as bytes
    share = np.arange(len(build_values)) % n_sn
    parts = []
    for sn in range(n_sn):
        f = WindowJoinFilter.with_estimates(max(1, len(build_values)), window, kind, seed=7)
        mine = share == sn
        f.add(
            _array(kind, [v for v, m in zip(build_values, mine, strict=True) if m]), ts_build[mine]
        )
        parts.append(WindowJoinFilter.from_bytes(f.to_bytes()))
    merged = WindowJoinFilter.from_bytes(WindowJoinFilter.union(parts).to_bytes())
    truth = exact.contains(_array(kind, probe_values), ts_probe, direction)
    got = merged.might_contain(_array(kind, probe_values), ts_probe, direction)
    assert got[truth].all()
    # ground truth agrees with a brute-force join
    windows_b = np.floor_divide(ts_build, window)
    for i, (v, t) in enumerate(zip(probe_values, ts_probe, strict=True)):
        wp = t // window
        ok = {wp, wp + direction} if direction else {wp - 1, wp, wp + 1}
        brute = v is not None and any(
            bv is not None and bv == v and wb in ok
            for bv, wb in zip(build_values, windows_b, strict=True)
        )
        assert truth[i] == brute


@pytest.mark.parametrize("bits_per_key", [5, 7.5, 10])
@pytest.mark.parametrize("kind", [KeyKind.INT, KeyKind.STRING])
def test_fpr_within_1_5x_of_eq6(bits_per_key: float, kind: KeyKind) -> None:
    """Statistical: empirical FPR over two probed windows <= 1.5x Eq. 6 (n_p = 10^4)."""
    rng = np.random.default_rng(1)
    n = 10_000
    bits = int(64 * math.ceil(n * bits_per_key / 64))
    hashes = max(1, round(bits / n * math.log(2)))
    f = WindowJoinFilter(bits, hashes, 10, kind, seed=3)
    values = rng.integers(0, 10**9, n)
    ts = rng.integers(0, 10**6, n) * 10
    build = values.astype(str) if kind == KeyKind.STRING else values
    f.add(pa.array(build), ts)
    # probes: values never inserted, at windows far from the inserted ones' neighbours too
    probe = rng.integers(10**9, 2 * 10**9, 200_000)
    probe_values = probe.astype(str) if kind == KeyKind.STRING else probe
    ts_probe = rng.integers(0, 10**6, probe.size) * 10
    measured = f.might_contain(pa.array(probe_values), ts_probe, direction=-1).mean()
    theory = wjf_fpr_eq6(bits, hashes, n)
    assert measured <= 1.5 * theory, (measured, theory)
    assert measured >= theory / 3  # and the filter is not accidentally far emptier than Eq. 6 says


def test_bit_positions_are_uniform() -> None:
    """Chi-square over 64 equal slices of the bit array after 20k integer keys."""
    f = WindowJoinFilter(64 * 1024, 1, 100, KeyKind.INT)
    rng = np.random.default_rng(5)
    f.add(rng.integers(0, 50, 20_000), rng.integers(0, 10**7, 20_000))
    bits = np.unpackbits(f.words.view(np.uint8))
    counts = bits.reshape(64, -1).sum(axis=1)
    expected = counts.mean()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 110  # 63 degrees of freedom: p ~ 1e-4
