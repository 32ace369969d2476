"""Message framing: compressed blobs round-trip, and malformed compression is a ProtocolError."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfs_cer.errors import ProtocolError
from dfs_cer.filters import IntervalSet
from dfs_cer.transport.dictionary import DICTIONARY_ID
from dfs_cer.transport.messages import MAGIC, MAGIC_Z, MAX_HEADER, decode, encode
from dfs_cer.transport.protocol import VERSION


def test_filters_travel_compressed_and_round_trip() -> None:
    starts = np.cumsum(np.random.default_rng(1).integers(1000, 100_000, 5000))
    blob = IntervalSet(starts, starts + 500).to_bytes()
    small = b"x" * 10
    message = encode({"action": "verify"}, [blob, small])
    assert len(message) < 0.6 * len(blob), (
        len(message),
        len(blob),
    )  # sorted interval bounds compress well
    header, blobs = decode(message)
    assert header["action"] == "verify" and "z" not in header and header["blobs"][1] == 10
    assert blobs == [blob, small]


@settings(max_examples=100)
@given(st.lists(st.binary(max_size=2000), max_size=4))
def test_any_blobs_round_trip(blobs: list[bytes]) -> None:
    assert decode(encode({"k": 1}, blobs))[1] == blobs


def _frame(header: dict[str, object], body: bytes) -> bytes:
    text = json.dumps({"v": VERSION, **header}).encode()
    return MAGIC + len(text).to_bytes(4, "little") + text + body


@pytest.mark.parametrize("z", [{"0": 10**12}, {"5": 10}, {"0": -1}, [1], {"0": 50}])
def test_malformed_compression_is_refused(z: object) -> None:
    body = b"\x28\xb5\x2f\xfd" + b"garbage-not-zstd"
    with pytest.raises(ProtocolError, match="malformed message"):
        decode(_frame({"blobs": [len(body)], "z": z}, body))


@pytest.mark.parametrize("version", [None, 1, VERSION + 1, "2"])
def test_another_protocol_version_is_refused_clearly(version: object) -> None:
    header = {"blobs": []} if version is None else {"blobs": [], "v": version}
    text = json.dumps(header).encode()
    with pytest.raises(
        ProtocolError, match=f"protocol version {version}, this side speaks version {VERSION}"
    ):
        decode(MAGIC + len(text).to_bytes(4, "little") + text)


def test_typed_requests_round_trip_and_refuse_bad_fields() -> None:
    from dfs_cer.transport import protocol as p

    # the request types share no base class: each has header() and a parse() classmethod
    requests: list[Any] = [
        p.Reserve("q-1", 12.5),
        p.Release("q-1"),
        p.Close("q-1"),
        p.Intervals("q-1", "A", "head", 60),
        p.Wjf("q-1", (p.Build("B", "a2", 60, 1, "wjf", 4096, 3),), "swf"),
        p.Verify("q-1", "C", "tail", 60, (p.Probe("a2", -1, 1, "keyset"),), "intervals", True),
        p.PushPull("q-1", "B", ("A",)),
        p.Upload("q-1", "A"),
    ]
    for r in requests:
        header = decode(encode(r.header()))[0]
        assert type(r).parse(header) == r
    bad: list[tuple[Any, dict[str, Any], str]] = [
        (
            p.Intervals,
            {"query_id": "q", "variable": "A", "role": "first", "window": 1},
            "role must be one of",
        ),
        (
            p.Intervals,
            {"query_id": "q", "variable": "A", "role": "head", "window": True},
            "'window' is missing",
        ),
        (
            p.Verify,
            {
                "query_id": "q",
                "variable": "C",
                "role": "tail",
                "window": 1,
                "probes": [{"column": "a"}],
            },
            "'direction' is missing",
        ),
        (
            p.PushPull,
            {"query_id": "q", "variable": "B", "processed": [{}]},
            "processed must list variable names",
        ),
        (
            p.Wjf,
            {
                "query_id": "q",
                "builds": [
                    {"variable": "B", "column": "x", "window": 1, "kind": 1, "format": "bloom"}
                ],
            },
            "format must be one of wjf, keyset",
        ),
        (
            p.Reserve,
            {"query_id": "q", "arrival": float("nan")},
            "arrival must be a positive number",
        ),
        (p.Close, {"query_id": "../x"}, "query_id must be 1 to 64"),
    ]
    for cls, header, message in bad:
        with pytest.raises(ProtocolError, match=re.escape(message)):
            cls.parse(header)


@settings(max_examples=60)
@given(st.text(max_size=3000), st.lists(st.binary(max_size=600), max_size=3))
def test_large_headers_travel_compressed_and_round_trip(sql: str, blobs: list[bytes]) -> None:
    message = encode({"sql": sql, "query_id": "q"}, blobs)
    header, back = decode(message)
    assert header == {"sql": sql, "query_id": "q", **({"blobs": header["blobs"]} if blobs else {})}
    assert back == blobs


def test_a_query_text_header_shrinks_and_a_bomb_is_refused() -> None:
    sql = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B C) " * 8
    message = encode({"sql": sql})
    assert message[:4] == MAGIC_Z and len(message) < 0.5 * len(sql)
    for raw, z, ident, why in [
        (MAX_HEADER + 1, b"x", DICTIONARY_ID, "once decompressed exceeds the limit"),
        (100, b"garbage-not-zstd", DICTIONARY_ID, "malformed message"),
        (len(sql), message[13:], (DICTIONARY_ID + 1) % 256, "run the same dfs-cer release"),
    ]:
        forged = (
            MAGIC_Z + len(z).to_bytes(4, "little") + raw.to_bytes(4, "little") + bytes([ident]) + z
        )
        with pytest.raises(ProtocolError, match=why):
            decode(forged)
    with pytest.raises(ProtocolError, match="exceeds the limit of 100"):
        decode(message, header_limit=100)


SQL_OF_A_USER = (
    "SELECT * FROM flights MATCH_RECOGNIZE (PARTITION BY tailnum ORDER BY dep_ts MEASURES "
    "A.origin AS from_airport, LAST(B.dest) AS to_airport, count(B.*) AS legs ONE ROW PER "
    "MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) WITHIN INTERVAL '1' DAY DEFINE A AS "
    "A.dep_delay > 60, B AS B.dep_delay > A.dep_delay)"
)


@pytest.mark.parametrize(
    ("header", "most"),
    [
        ({"query_id": "2cf11e42cc2a45ba", "sql": SQL_OF_A_USER, "lease_seconds": 300.0}, 0.45),
        ({"rows": 2825, "variables": {"A": {"count": 1831}, "B": {"count": 228}},
          "min_ts": 2041927911707, "max_ts": 2042127839492, "total_rows": 100000,
          "schema_digest": "2a0786f253febf24", "time_column": "ts"}, 0.6),
        ({"query_id": "2cf11e42cc2a45ba", "kind": "pull", "tis": "slices",
          "compression": "zstd"}, 0.6),
    ],
)  # fmt: skip
def test_the_protocol_dictionary_shrinks_the_headers_every_query_sends(
    header: dict[str, object], most: float
) -> None:
    plain = len(json.dumps({**header, "v": 3}, separators=(",", ":"))) + 8
    message = encode(header)
    assert message[:4] == MAGIC_Z and len(message) <= most * plain, (len(message), plain)
    assert decode(message)[0] == header
