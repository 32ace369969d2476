"""Compiled bit loops of the candidate points' encoding (numba): Golomb-Rice codes for the
steps between sorted slice ids (and, optionally, fixed-width values after them), in one
little-endian bitstream.

A step ``s`` with parameter ``k`` is ``s >> k`` zeros, a one, then the low ``k`` bits of ``s``;
a step whose quotient reaches :data:`ESCAPE` is written as :data:`ESCAPE` zeros and its 64 raw
bits (a gap of years between two candidates costs 88 bits, not millions).
"""

from __future__ import annotations

import numpy as np
from numba import njit

ESCAPE = 24


@njit(cache=True)
def encoded_bits(steps: np.ndarray, k: np.int64) -> np.int64:
    total = np.int64(0)
    for i in range(steps.shape[0]):
        q = np.int64(steps[i] >> np.uint64(k))
        total += ESCAPE + 64 if q >= ESCAPE else q + 1 + k
    return total


@njit(cache=True)
def encode(
    steps: np.ndarray, k: np.int64, hashes: np.ndarray, width: np.int64, out: np.ndarray
) -> None:
    """Write the steps, then every hash (column by column) ``width`` bits each, into ``out``
    (zeroed bytes, long enough)."""
    pos = np.int64(0)
    for i in range(steps.shape[0]):
        s = steps[i]
        q = np.int64(s >> np.uint64(k))
        if q >= ESCAPE:
            pos += ESCAPE
            for b in range(64):
                if (s >> np.uint64(b)) & np.uint64(1):
                    out[pos >> 3] |= np.uint8(1 << (pos & 7))
                pos += 1
            continue
        pos += q
        out[pos >> 3] |= np.uint8(1 << (pos & 7))
        pos += 1
        for b in range(k):
            if (s >> np.uint64(b)) & np.uint64(1):
                out[pos >> 3] |= np.uint8(1 << (pos & 7))
            pos += 1
    for c in range(hashes.shape[0]):
        for i in range(hashes.shape[1]):
            h = np.int64(hashes[c, i])
            for b in range(width):
                if (h >> b) & 1:
                    out[pos >> 3] |= np.uint8(1 << (pos & 7))
                pos += 1


@njit(cache=True)
def decode(
    buf: np.ndarray, n: np.int64, k: np.int64, columns: np.int64, width: np.int64, points: np.int64
) -> tuple[np.ndarray, np.ndarray, np.int64]:
    """The ``n`` steps and the hashes of ``points`` points back, and the bits read; -1 bits when
    ``buf`` ends first."""
    steps = np.zeros(n, np.uint64)
    hashes = np.zeros((columns, points), np.uint16)
    limit = np.int64(buf.shape[0]) * 8
    pos = np.int64(0)
    for i in range(n):
        q = np.int64(0)
        while True:
            if pos >= limit:
                return steps, hashes, np.int64(-1)
            if (buf[pos >> 3] >> (pos & 7)) & 1:
                break
            q += 1
            pos += 1
            if q == ESCAPE:
                break
        if q == ESCAPE:
            if pos + 64 > limit:
                return steps, hashes, np.int64(-1)
            v = np.uint64(0)
            for b in range(64):
                if (buf[pos >> 3] >> (pos & 7)) & 1:
                    v |= np.uint64(1) << np.uint64(b)
                pos += 1
            steps[i] = v
            continue
        pos += 1  # the terminating one
        if pos + k > limit:
            return steps, hashes, np.int64(-1)
        r = np.uint64(0)
        for b in range(k):
            if (buf[pos >> 3] >> (pos & 7)) & 1:
                r |= np.uint64(1) << np.uint64(b)
            pos += 1
        steps[i] = (np.uint64(q) << np.uint64(k)) | r
    if pos + columns * points * width > limit:
        return steps, hashes, np.int64(-1)
    for c in range(columns):
        for i in range(points):
            h = 0
            for b in range(width):
                if (buf[pos >> 3] >> (pos & 7)) & 1:
                    h |= 1 << b
                pos += 1
            hashes[c, i] = h
    return steps, hashes, pos
