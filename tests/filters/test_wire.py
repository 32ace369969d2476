"""Wire formats: golden binaries (never regenerated silently), round trips, and random
corruptions that must raise FilterFormatError (never crash, never yield a wrong filter)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfs_cer.errors import FilterFormatError
from dfs_cer.filters import (
    IntervalSet,
    KeyKind,
    RefreshTags,
    ShrinkingWindowFilter,
    WindowJoinFilter,
)

GOLDEN = Path(__file__).parent / "golden" / "v1"
BASE = 1731628800
TABLE1 = [BASE + 18 * 3600 + 45 * 60, BASE + 20 * 3600 + 15 * 60, BASE + 21 * 3600 + 43 * 60]


def golden_objects() -> dict[str, bytes]:
    swf = ShrinkingWindowFilter.from_intervals(TABLE1, [t + 1800 for t in TABLE1], 1800)
    refresh = ShrinkingWindowFilter.from_bytes(swf.to_bytes()).refresh([BASE + 19 * 3600], "tail")
    wjf = WindowJoinFilter.with_estimates(3, 1800, KeyKind.INT)
    wjf.add(
        np.array([19, 7, 14]),
        [BASE + 18 * 3600 + 50 * 60, BASE + 20 * 3600 + 43 * 60, BASE + 21 * 3600 + 50 * 60],
    )
    wjf_str = WindowJoinFilter.with_estimates(2, 60, KeyKind.STRING, seed=9)
    wjf_str.add(np.array(["ATTR3_12_PADDING", "ROBBERY"]), [0, 120])
    return {
        "swf_table1.bin": swf.to_bytes(),
        "refresh_table1.bin": refresh.to_bytes(),
        "wjf_table1.bin": wjf.to_bytes(),
        "wjf_strings.bin": wjf_str.to_bytes(),
        "intervals.bin": IntervalSet([1, 10, 40], [5, 20, 41]).to_bytes(),
    }


DECODERS: dict[str, Callable[[bytes], object]] = {
    "swf": ShrinkingWindowFilter.from_bytes,
    "refresh": RefreshTags.from_bytes,
    "wjf": WindowJoinFilter.from_bytes,
    "intervals": IntervalSet.from_bytes,
}


def decoder(name: str) -> Callable[[bytes], object]:
    return DECODERS[name.split(".")[0].split("_")[0]]


@pytest.mark.parametrize("name", sorted(golden_objects()))
def test_golden(name: str) -> None:
    """Encodings are a contract between nodes of different versions; change them deliberately
    (new version byte), and regenerate with DFS_CER_REGEN_GOLDEN=1 only with that change."""
    data = golden_objects()[name]
    path = GOLDEN / name
    if os.environ.get("DFS_CER_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    assert path.read_bytes() == data
    decoder(name)(path.read_bytes())


def test_golden_decodes_to_working_filters() -> None:
    swf = ShrinkingWindowFilter.from_bytes((GOLDEN / "swf_table1.bin").read_bytes())
    assert (swf.buckets, swf.entry_count, swf.slice_count) == (2, 6, 63)
    tags = RefreshTags.from_bytes((GOLDEN / "refresh_table1.bin").read_bytes())
    assert tags.tags[:2].tolist() == [0xFFFFF, 0x00001]
    wjf = WindowJoinFilter.from_bytes((GOLDEN / "wjf_table1.bin").read_bytes())
    assert (wjf.bits, wjf.hashes) == (64, 7)
    assert wjf.might_contain(np.array([19]), [BASE + 19 * 3600], -1).tolist() == [True]
    strings = WindowJoinFilter.from_bytes((GOLDEN / "wjf_strings.bin").read_bytes())
    assert strings.might_contain(
        np.array(["ROBBERY", "ATTR3_12_PADDING"]), [150, 30], -1
    ).tolist() == [True, True]
    assert IntervalSet.from_bytes((GOLDEN / "intervals.bin").read_bytes()).starts.tolist() == [
        1,
        10,
        40,
    ]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:10], "truncated"),
        (lambda b: b"XXXX" + b[4:], "not a"),
        (lambda b: b[:4] + bytes([2]) + b[5:], "format version 2 is not supported"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "checksum mismatch"),
        (lambda b: b[:20] + bytes([b[20] ^ 0x40]) + b[21:], "checksum mismatch"),
    ],
)
@pytest.mark.parametrize("name", sorted(golden_objects()))
def test_targeted_corruption(name: str, mutate: Callable[[bytes], bytes], message: str) -> None:
    with pytest.raises(FilterFormatError, match=message):
        decoder(name)(mutate(golden_objects()[name]))


def test_reserved_flags_and_bad_headers_are_rejected() -> None:
    import struct
    import zlib

    data = bytearray(golden_objects()["swf_table1.bin"])
    data[5] = 0x80  # a reserved flag bit, with a valid checksum
    body = bytes(data[:-4])
    with pytest.raises(FilterFormatError, match="reserved flag bits"):
        ShrinkingWindowFilter.from_bytes(body + struct.pack("<I", zlib.crc32(body)))
    data = bytearray(golden_objects()["swf_table1.bin"])
    data[6:10] = struct.pack("<I", 3)  # 3 buckets: not a power of two
    body = bytes(data[:-4])
    with pytest.raises(FilterFormatError, match="bucket count 3"):
        ShrinkingWindowFilter.from_bytes(body + struct.pack("<I", zlib.crc32(body)))


@given(
    st.sampled_from(sorted(golden_objects())),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_random_corruption_never_crashes(
    name: str, flips: list[tuple[int, int]], cut: int | None
) -> None:
    original = golden_objects()[name]
    data = bytearray(original)
    for pos, value in flips:
        data[pos % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    try:
        decoded = decoder(name)(bytes(data))
    except FilterFormatError:
        return
    # accepted only if nothing changed
    assert bytes(data) == original, decoded
