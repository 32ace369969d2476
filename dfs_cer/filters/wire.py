"""One canonical framing for every serialized filter.

``magic (4 bytes) | version (u8) | flags (u8) | header (little-endian struct) | payload | crc32``

The CRC covers everything before it, so a truncated or corrupted buffer is rejected with
:class:`~dfs_cer.errors.FilterFormatError` instead of becoming a silently wrong filter.
"""

from __future__ import annotations

import struct
import zlib

from dfs_cer.errors import FilterFormatError

FORMAT_VERSION = 1
_PREFIX = struct.Struct("<4sBB")
_CRC = struct.Struct("<I")


def pack(
    magic: bytes,
    header: struct.Struct,
    values: tuple[int | float, ...],
    payload: bytes | memoryview,
    flags: int = 0,
) -> bytes:
    """Frame ``payload`` with the common prefix, the structure's header and a CRC."""
    body = _PREFIX.pack(magic, FORMAT_VERSION, flags) + header.pack(*values) + bytes(payload)
    return body + _CRC.pack(zlib.crc32(body))


def unpack(
    buf: bytes | bytearray | memoryview,
    magic: bytes,
    header: struct.Struct,
    what: str,
    allowed_flags: int = 0,
) -> tuple[int, tuple[int | float, ...], memoryview]:
    """Check framing and return ``(flags, header values, payload)``.

    Raises:
        FilterFormatError: naming what is wrong (length, magic, version, flags, checksum).
    """
    view = memoryview(bytes(buf)) if not isinstance(buf, bytes) else memoryview(buf)
    minimum = _PREFIX.size + header.size + _CRC.size
    if len(view) < minimum:
        raise FilterFormatError(
            f"{what} buffer is truncated: {len(view)} bytes, a valid one has at least {minimum}"
        )
    got_magic, version, flags = _PREFIX.unpack_from(view, 0)
    if got_magic != magic:
        raise FilterFormatError(
            f"not a {what} buffer: magic {bytes(got_magic)!r}, expected {magic!r}"
        )
    if version != FORMAT_VERSION:
        raise FilterFormatError(
            f"{what} format version {version} is not supported; this dfs-cer reads version "
            f"{FORMAT_VERSION} (upgrade the node that wrote it or this one)"
        )
    (crc,) = _CRC.unpack_from(view, len(view) - _CRC.size)
    if zlib.crc32(view[: len(view) - _CRC.size]) != crc:
        raise FilterFormatError(f"{what} buffer is corrupted: checksum mismatch")
    if flags & ~allowed_flags:
        raise FilterFormatError(
            f"{what} buffer sets reserved flag bits {flags & ~allowed_flags:#04x}"
        )
    values = header.unpack_from(view, _PREFIX.size)
    payload = view[_PREFIX.size + header.size : len(view) - _CRC.size]
    return flags, values, payload


def expect(condition: bool, what: str, message: str) -> None:
    """Raise FilterFormatError for an invalid header field."""
    if not condition:
        raise FilterFormatError(f"{what} buffer is invalid: {message}")
