"""Compiled Bloom filter loops of the window-wise join filter (numba).

Probe positions by double hashing of one 64-bit hash H (Kirsch & Mitzenmacher):
``pos_i = (h1 + i * h2) mod bits`` with ``h1 = H & 0xFFFFFFFF`` and ``h2 = H >> 32`` (reference §5),
``h2`` forced odd so the probes never collapse onto one bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def insert(words: np.ndarray, hashes: np.ndarray, valid: np.ndarray, k: np.int64) -> None:
    bits = np.uint64(words.shape[0] * 64)
    for i in range(hashes.shape[0]):
        if not valid[i]:
            continue
        h = hashes[i]
        h1 = h & np.uint64(0xFFFFFFFF)
        h2 = (h >> np.uint64(32)) | np.uint64(1)
        for j in range(k):
            pos = (h1 + np.uint64(j) * h2) % bits
            words[pos >> np.uint64(6)] |= np.uint64(1) << (pos & np.uint64(63))


@njit(cache=True)
def probe(words: np.ndarray, hashes: np.ndarray, k: np.int64, out: np.ndarray) -> None:
    """``out[i] |= all k bits of hashes[i] are set``."""
    bits = np.uint64(words.shape[0] * 64)
    for i in range(hashes.shape[0]):
        if out[i]:
            continue
        h = hashes[i]
        h1 = h & np.uint64(0xFFFFFFFF)
        h2 = (h >> np.uint64(32)) | np.uint64(1)
        hit = True
        for j in range(k):
            pos = (h1 + np.uint64(j) * h2) % bits
            if (words[pos >> np.uint64(6)] >> (pos & np.uint64(63))) & np.uint64(1) == 0:
                hit = False
                break
        out[i] = hit
