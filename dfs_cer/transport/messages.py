"""Message framing for Flight actions and tickets: a JSON header plus binary blobs.

``b"DFSM" | u32 header length | header (UTF-8 JSON) | blob 0 | blob 1 | ...``; the header's
``"blobs"`` lists the blob lengths (left out when there are none) and ``"v"`` the protocol
version (:mod:`.protocol`). Filters travel as blobs in their own framed formats.

A header travels zstd-compressed with the protocol's dictionary (:mod:`.dictionary`: the
fields' names and a query's keywords) when that is smaller, which it is for all but the
shortest: ``b"DFSZ" | u32 length | u32 inflated length | u8 dictionary id | header | blobs``,
its inflated length bounded before it is inflated (open's 550-byte query header travels in
about 160 bytes, a node's counts in about 120).

Blobs of 256 bytes or more are zstd-compressed (level 1) when that makes them smaller; the
header's ``"z"`` maps the index of each compressed blob to its original length. Cuckoo tables,
Bloom filters and interval sets are far from random (empty slots, sparse bits, sorted
timestamps): they shrink to 33-45% of their size, for ~1 ms of CPU per megabyte.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import zstandard

from dfs_cer.errors import ProtocolError
from dfs_cer.transport import dictionary
from dfs_cer.transport.protocol import VERSION

MAGIC = b"DFSM"
#: a message whose header is zstd-compressed with the protocol's dictionary:
#: ``DFSZ | u32 length | u32 inflated length | u8 dictionary id | ...``
MAGIC_Z = b"DFSZ"
#: headers from this size on are compressed when that makes them smaller
HEADER_COMPRESS_MIN = 24
_LEN = struct.Struct("<I")
MAX_HEADER = 16 * 1024 * 1024
MAX_BLOB = 1024**3  # a decompressed blob larger than this is refused (a decompression bomb)
COMPRESS_MIN = 256
_CODEC = pa.Codec("zstd", compression_level=1)


def encode(header: dict[str, Any], blobs: list[bytes] | None = None) -> bytes:
    head = dict(header)
    packed: list[bytes] = []
    originals: dict[str, int] = {}
    for i, b in enumerate(blobs or []):
        if len(b) >= COMPRESS_MIN:
            z = _CODEC.compress(b, asbytes=True)
            if len(z) < len(b):
                originals[str(i)] = len(b)
                b = z
        packed.append(bytes(b))
    blobs = packed
    if originals:
        head["z"] = originals
    if blobs:  # no blobs: no list (the receiver reads none)
        head["blobs"] = [len(b) for b in blobs]
    head["v"] = VERSION
    text = json.dumps(head, separators=(",", ":")).encode()
    if len(text) >= HEADER_COMPRESS_MIN:  # zstd with the protocol's dictionary when smaller
        z = dictionary.compress(text)
        if len(z) + _LEN.size + 1 < len(text):
            framing = _LEN.pack(len(z)) + _LEN.pack(len(text)) + bytes([dictionary.DICTIONARY_ID])
            return MAGIC_Z + framing + z + b"".join(blobs)
    return MAGIC + _LEN.pack(len(text)) + text + b"".join(blobs)


def decode(
    buf: bytes | memoryview,
    limit: int = MAX_BLOB,
    check: Callable[[dict[str, Any]], None] | None = None,
    header_limit: int = MAX_HEADER,
) -> tuple[dict[str, Any], list[bytes]]:
    """Parse a message; raises ProtocolError (never anything else) on malformed input.

    ``limit`` bounds the bytes the compressed blobs declare they inflate to (all together),
    checked before any is inflated, as ``header_limit`` bounds a compressed header's; ``check``
    sees the header first (a storage node refuses an
    unknown query there), so a small message cannot make the receiver allocate a large buffer
    for nothing (a decompression bomb)."""
    data = bytes(buf)
    if len(data) < 8 or data[:4] not in (MAGIC, MAGIC_Z):
        raise ProtocolError(
            "malformed message: missing DFSM header (is the client a dfs-cer compute node?)"
        )
    (n,) = _LEN.unpack_from(data, 4)
    if n > MAX_HEADER or 8 + n > len(data):
        raise ProtocolError(
            f"malformed message: header length {n} does not fit a {len(data)}-byte message"
        )
    text, start = data[8 : 8 + n], 8
    if data[:4] == MAGIC_Z:  # a compressed header: its size is checked before it is inflated
        if len(data) < 13:
            raise ProtocolError("malformed message: a compressed header without its size")
        (raw,) = _LEN.unpack_from(data, 8)
        if raw > min(MAX_HEADER, header_limit):
            raise ProtocolError(
                f"message header of {raw} bytes once decompressed exceeds the limit of "
                f"{min(MAX_HEADER, header_limit)}"
            )
        if 13 + n > len(data):
            raise ProtocolError(f"malformed message: a compressed header of {raw} bytes")
        if data[12] != dictionary.DICTIONARY_ID:
            raise ProtocolError(
                f"message header compressed with dictionary {data[12]}, this side has "
                f"{dictionary.DICTIONARY_ID}: run the same dfs-cer release on the compute node "
                "and the storage nodes"
            )
        try:
            text = dictionary.decompress(data[13 : 13 + n], raw)
        except (zstandard.ZstdError, ValueError) as exc:
            raise ProtocolError(
                f"malformed message: the header does not decompress ({exc})"
            ) from None
        start = 13
    n_end = start + n
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed message: header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed message: header is not a JSON object")
    version = header.pop("v", None)
    if version != VERSION:
        raise ProtocolError(
            f"message of protocol version {version}, this side speaks version {VERSION}: run the "
            "same dfs-cer release on the compute node and the storage nodes"
        )
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ProtocolError("malformed message: 'blobs' must list blob sizes")
    if n_end + sum(sizes) != len(data):
        raise ProtocolError(
            f"malformed message: blob sizes {sizes} do not add up to the message length"
        )
    blobs, pos = [], n_end
    for size in sizes:
        blobs.append(data[pos : pos + size])
        pos += size
    compressed = header.pop("z", {})
    if not isinstance(compressed, dict):
        raise ProtocolError("malformed message: 'z' must map blob indexes to sizes")
    for key, size in compressed.items():
        if not (
            isinstance(key, str)
            and key.isdigit()
            and int(key) < len(blobs)
            and isinstance(size, int)
            and 0 <= size <= MAX_BLOB
        ):
            raise ProtocolError(f"malformed message: bad compressed blob entry {key!r}: {size!r}")
    inflated = sum(compressed.values()) + sum(
        len(b) for i, b in enumerate(blobs) if str(i) not in compressed
    )
    if inflated > limit:
        raise ProtocolError(
            f"message declares {inflated} bytes once decompressed, more than the limit of {limit}"
        )
    if check is not None:
        check(header)
    for key, size in compressed.items():
        try:
            blobs[int(key)] = _CODEC.decompress(
                blobs[int(key)], decompressed_size=size, asbytes=True
            )
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise ProtocolError(
                f"malformed message: blob {key} does not decompress ({exc})"
            ) from None
    return header, blobs


def field(header: dict[str, Any], name: str, kind: type | tuple[type, ...], action: str) -> Any:
    """A required header field of the given type, or ProtocolError naming it."""
    if name not in header:
        raise ProtocolError(f"action {action}: missing field {name!r}")
    value = header[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(
            f"action {action}: field {name!r} has the wrong type ({type(value).__name__})"
        )
    return value
