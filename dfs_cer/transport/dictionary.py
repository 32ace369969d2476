"""The protocol's zstd dictionary for message headers.

A header is a few hundred bytes of JSON (open's query text, a node's counts, a ticket): too
little for zstd to learn anything from on its own, so both sides prime it with the same raw
text of what headers say (the protocol's field names and a ``MATCH_RECOGNIZE`` query's
keywords). Later text is cheaper to point at, so the most frequent fields come last.

The dictionary is part of the wire format: changing a byte of it changes :data:`DICTIONARY_ID`,
which every compressed header carries, and a side with another dictionary refuses the message
instead of misreading it.
"""

from __future__ import annotations

import hashlib
from functools import cache

import zstandard

_SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (\n  PARTITION BY id\n  ORDER BY ts\n"
    "  MEASURES FIRST(A.ts) AS first_ts, LAST(B.ts) AS last_ts, count(*) AS n, "
    "MATCH_NUMBER() AS match, CLASSIFIER() AS label\n"
    "  ONE ROW PER MATCH\n  ALL ROWS PER MATCH\n  ALL MATCHES\n"
    "  AFTER MATCH SKIP TO NEXT ROW\n  AFTER MATCH SKIP TO LAST \n"
    "  AFTER MATCH SKIP PAST LAST ROW\n  SUBSET U = (A, B)\n"
    "  PATTERN (A B+ C* D?) WITHIN INTERVAL '10' SECOND\n"
    "  PATTERN (A B C D) WITHIN INTERVAL '3' MINUTE\n"
    "  DEFINE A AS A.type = 'login' AND A.value > PREV(A.value) OR NEXT(A.value) IS NULL,\n"
    "    B AS B.type = 'error' AND B.value <= 200 AND B.user = A.user AND B.price < AVG(B.price),\n"
    "    C AS C.type IN ('buy', 'sell') AND C.price >= 100.0 AND C.id = A.id,\n"
    "    D AS D.type <> 'logout' AND D.value < 10 AND D.user = C.user\n)"
)
_FIELDS = (
    '{"refused":true,"local_partitions":true,"copies_whole":true,"navigation_on_node":"'
    '","match_cpu_budget":0.0,"halo_limit":,"beta":{"row_pattern":,"cer":},"snapshot":'
    ',"snapshot_ms":,"event_key":[],"held_bytes":,"total_rows":,"released":true,'
    '"granted":true,"intervals":,"filters":,"closed":true}'
    '{"query_id":"","kind":"pull","tis":"slices","compression":"zstd","blobs":[],"v":3}'
    '{"query_id":"","base":,"q":,"vars":[["A",[["user",3]]],["B",[]]],"bits":8,"runs":true}'
    '{"rows":,"variables":{"A":{"count":},"B":{"count":},"C":{"count":},"D":{"count":}},'
    '"min_ts":,"max_ts":,"total_rows":,"held_bytes":,"row_bytes":,"schema_digest":"",'
    '"data_digest":"","time_column":"ts","blobs":[]}'
    '{"query_id":"","sql":"'
)
_TAIL = '","schema":false,"arrival":,"lease_seconds":300.0,"v":3}{"z":{"0":},"blobs":[],"v":3}'

#: the dictionary's raw content
CONTENT = (_FIELDS + _SQL.replace("\n", "\\n") + _TAIL).encode()
#: what a compressed header names its dictionary by (the content's digest, one byte)
DICTIONARY_ID = hashlib.sha256(CONTENT).digest()[0]


@cache
def _dictionary() -> zstandard.ZstdCompressionDict:
    d = zstandard.ZstdCompressionDict(CONTENT, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    d.precompute_compress(level=19)
    return d


def compress(text: bytes) -> bytes:
    """``text`` as a bare zstd frame (no size, checksum or dictionary id: the framing has them)."""
    z = zstandard.ZstdCompressor(
        level=19,
        dict_data=_dictionary(),
        write_content_size=False,
        write_checksum=False,
        write_dict_id=False,
    )
    return z.compress(text)


def decompress(data: bytes, size: int) -> bytes:
    """The ``size`` bytes of :func:`compress`'s frame; raises ``zstandard.ZstdError`` or
    ``ValueError`` when it is not one."""
    out = zstandard.ZstdDecompressor(dict_data=_dictionary()).decompress(data, max_output_size=size)
    if len(out) != size:
        raise ValueError(f"inflates to {len(out)} bytes, {size} declared")
    return out


__all__ = ["CONTENT", "DICTIONARY_ID", "compress", "decompress"]
