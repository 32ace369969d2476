"""Message framing for Flight actions and tickets: a JSON header plus binary blobs.

``b"DFSM" | u32 header length | header (UTF-8 JSON) | blob 0 | blob 1 | ...``; the header's
``"blobs"`` lists the blob lengths. Filters travel as blobs in their own framed formats.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from dfs_cer.errors import ProtocolError

MAGIC = b"DFSM"
_LEN = struct.Struct("<I")
MAX_HEADER = 16 * 1024 * 1024


def encode(header: dict[str, Any], blobs: list[bytes] | None = None) -> bytes:
    blobs = blobs or []
    head = dict(header)
    head["blobs"] = [len(b) for b in blobs]
    text = json.dumps(head, separators=(",", ":")).encode()
    return MAGIC + _LEN.pack(len(text)) + text + b"".join(blobs)


def decode(buf: bytes | memoryview) -> tuple[dict[str, Any], list[bytes]]:
    """Parse a message; raises ProtocolError (never anything else) on malformed input."""
    data = bytes(buf)
    if len(data) < 8 or data[:4] != MAGIC:
        raise ProtocolError("malformed message: missing DFSM header (is the client a dfs-cer compute node?)")
    (n,) = _LEN.unpack_from(data, 4)
    if n > MAX_HEADER or 8 + n > len(data):
        raise ProtocolError(f"malformed message: header length {n} does not fit a {len(data)}-byte message")
    try:
        header = json.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"malformed message: header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed message: header is not a JSON object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ProtocolError("malformed message: 'blobs' must list blob sizes")
    if 8 + n + sum(sizes) != len(data):
        raise ProtocolError(f"malformed message: blob sizes {sizes} do not add up to the message length")
    blobs, pos = [], 8 + n
    for size in sizes:
        blobs.append(data[pos : pos + size])
        pos += size
    return header, blobs


def field(header: dict[str, Any], name: str, kind: type | tuple[type, ...], action: str) -> Any:
    """A required header field of the given type, or ProtocolError naming it."""
    if name not in header:
        raise ProtocolError(f"action {action}: missing field {name!r}")
    value = header[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"action {action}: field {name!r} has the wrong type ({type(value).__name__})")
    return value
