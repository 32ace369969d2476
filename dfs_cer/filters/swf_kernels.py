"""Compiled loops of the shrinking window filter (numba).

Table layout: ``m`` buckets × 4 slots, one ``uint32`` per slot: fingerprint in bits 31..20,
slice tag in bits 19..0 (bit j = the j-th twentieth of the window). A slot is empty iff its tag
is 0. ``keys`` (int64, same shape, -1 when empty) keeps each slot's window id on the compute
node so the table can grow and shrink; it never travels.

Hashing follows the reference code bit for bit for seed 0 (QuickHash):
``h = W * 0x9E3779B185EBCA87 + 0x165667B19E3779F9 (mod 2^64)``, ``fp = h >> 52``,
``b1 = (h >> 32) & (m - 1)``, ``b2 = (b1 ^ ((fp + 1) * 0xC4CEB9FE1A85EC53)) & (m - 1)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

SLOTS = 4
SLICES = 20
FULL_TAG = (1 << SLICES) - 1
INT64_MAX = np.int64(np.iinfo(np.int64).max)
INT64_MIN = np.int64(np.iinfo(np.int64).min)
_MUL = np.uint64(0x9E3779B185EBCA87)
_ADD = np.uint64(0x165667B19E3779F9)
_ALT = np.uint64(0xC4CEB9FE1A85EC53)


@njit(cache=True, inline="always")
def window_hash(window: np.int64, seed: np.uint64) -> np.uint64:
    return (np.uint64(window) ^ seed) * _MUL + _ADD


@njit(cache=True, inline="always")
def alt_bucket(bucket: np.uint64, fp: np.uint64, mask: np.uint64) -> np.uint64:
    return (bucket ^ ((fp + np.uint64(1)) * _ALT)) & mask


@njit(cache=True, inline="always")
def slice_of(ts: np.int64, window: np.int64, w: np.int64) -> np.int64:
    """The slice of ``ts`` in its window: ``floor(SLICES * r / w)`` for ``r = ts - window * w``
    (``0 <= r < w``), without overflow for windows of any width."""
    r = ts - window * w
    if w <= INT64_MAX // SLICES:
        return (r * SLICES) // w
    j = np.int64(0)
    for k in range(1, SLICES):  # r reaches slice k at ceil(k * w / SLICES)
        if slice_start(np.int64(k), w) <= r:
            j = np.int64(k)
    return j


@njit(cache=True, inline="always")
def slice_start(k: np.int64, w: np.int64) -> np.int64:
    """``ceil(k * w / SLICES)``: where slice ``k`` (0..SLICES) of a window of ``w`` starts."""
    return k * (w // SLICES) + (k * (w % SLICES) + SLICES - 1) // SLICES


@njit(cache=True, inline="always")
def _shifted(t: np.int64, d: np.int64) -> np.int64:
    """``t + d``, saturating at int64's ends (no time lies beyond them)."""
    if d >= 0:
        return t + d if t <= INT64_MAX - d else INT64_MAX
    return t + d if t >= INT64_MIN - d else INT64_MIN


@njit(cache=True, inline="always")
def left_mask(j: np.int64) -> np.uint32:
    return np.uint32((FULL_TAG << j) & FULL_TAG)


@njit(cache=True, inline="always")
def right_mask(j: np.int64) -> np.uint32:
    return np.uint32((1 << (j + 1)) - 1)


@njit(cache=True)
def expand_intervals(
    starts: np.ndarray, ends: np.ndarray, w: np.int64
) -> tuple[np.ndarray, np.ndarray]:
    """Closed intervals -> (window id, slice mask) per covered window, rounding outward."""
    total = 0
    for i in range(starts.shape[0]):
        if ends[i] >= starts[i]:
            total += ends[i] // w - starts[i] // w + 1
    windows = np.empty(total, np.int64)
    tags = np.empty(total, np.uint32)
    k = 0
    for i in range(starts.shape[0]):
        s, e = starts[i], ends[i]
        if e < s:
            continue
        ws, we = s // w, e // w
        for win in range(ws, we + 1):
            tag = np.uint32(FULL_TAG)
            if win == ws:
                tag &= left_mask(slice_of(s, ws, w))
            if win == we:
                tag &= right_mask(slice_of(e, we, w))
            windows[k] = win
            tags[k] = tag
            k += 1
    return windows, tags


@njit(cache=True)
def _xorshift(state: np.ndarray) -> np.uint64:
    x = state[0]
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    state[0] = x
    return x


@njit(cache=True)
def _try_place(
    table: np.ndarray, keys: np.ndarray, bucket: np.uint64, key: np.int64, entry: np.uint32
) -> bool:
    base = np.int64(bucket) * SLOTS
    for s in range(SLOTS):
        if keys[base + s] == key:
            table[base + s] |= entry
            return True
    for s in range(SLOTS):
        if table[base + s] & np.uint32(FULL_TAG) == 0:
            table[base + s] = entry
            keys[base + s] = key
            return True
    return False


@njit(cache=True)
def put_many(
    table: np.ndarray,
    keys: np.ndarray,
    windows: np.ndarray,
    tags: np.ndarray,
    seed: np.uint64,
    max_kicks: np.int64,
    rng: np.ndarray,
    victim: np.ndarray,
) -> int:
    """Insert (window, tag) pairs; OR into an existing entry of the same window.

    Returns -1 when every pair is placed; otherwise the index of the pair whose insertion ran
    out of kicks, with the entry left homeless in ``victim`` = (window, entry). The caller
    grows the table and reinserts: nothing is dropped.
    """
    m = table.shape[0] // SLOTS
    mask = np.uint64(m - 1)
    for i in range(windows.shape[0]):
        key = windows[i]
        h = window_hash(key, seed)
        fp = h >> np.uint64(52)
        b1 = (h >> np.uint64(32)) & mask
        b2 = alt_bucket(b1, fp, mask)
        entry = np.uint32((fp << np.uint64(SLICES)) | np.uint64(tags[i]))
        # merge with an existing entry of the same window in either bucket
        merged = False
        for b in (b1, b2):
            base = np.int64(b) * SLOTS
            for s in range(SLOTS):
                if keys[base + s] == key:
                    table[base + s] |= entry
                    merged = True
                    break
            if merged:
                break
        if merged:
            continue
        if _try_place(table, keys, b1, key, entry) or _try_place(table, keys, b2, key, entry):
            continue
        # cuckoo kicks: evict a random slot of the current bucket, move it to its alternate
        bucket = b2
        carry_key, carry_entry = key, entry
        placed = False
        for _ in range(max_kicks):
            slot = np.int64(bucket) * SLOTS + np.int64(_xorshift(rng) % np.uint64(SLOTS))
            carry_key, keys[slot] = keys[slot], carry_key
            carry_entry, table[slot] = table[slot], carry_entry
            carry_fp = np.uint64(carry_entry >> np.uint32(SLICES))
            bucket = alt_bucket(bucket, carry_fp, mask)
            if _try_place(table, keys, bucket, carry_key, carry_entry):
                placed = True
                break
        if not placed:
            victim[0] = carry_key
            victim[1] = np.int64(carry_entry)
            return i
    return -1


@njit(cache=True)
def contains(table: np.ndarray, ts: np.ndarray, w: np.int64, seed: np.uint64) -> np.ndarray:
    """True where ``ts`` falls in a covered slice (no false negatives)."""
    m = table.shape[0] // SLOTS
    mask = np.uint64(m - 1)
    out = np.zeros(ts.shape[0], np.bool_)
    for i in range(ts.shape[0]):
        t = ts[i]
        win = t // w
        bit = np.uint32(1) << np.uint32(slice_of(t, win, w))
        h = window_hash(win, seed)
        fp = np.uint32(h >> np.uint64(52))
        b1 = (h >> np.uint64(32)) & mask
        b2 = alt_bucket(b1, np.uint64(fp), mask)
        hit = False
        for b in (b1, b2):
            base = np.int64(b) * SLOTS
            for s in range(SLOTS):
                e = table[base + s]
                if (e >> np.uint32(SLICES)) == fp and (e & bit) != 0:
                    hit = True
            if hit:
                break
        out[i] = hit
    return out


@njit(cache=True)
def _refresh_window(
    table: np.ndarray,
    win: np.int64,
    tag: np.uint32,
    mask: np.uint64,
    seed: np.uint64,
    out: np.ndarray,
) -> None:
    h = window_hash(win, seed)
    fp = np.uint32(h >> np.uint64(52))
    b1 = (h >> np.uint64(32)) & mask
    b2 = alt_bucket(b1, np.uint64(fp), mask)
    for b in (b1, b2):  # when b1 == b2 the second pass ORs the same bits again
        base = np.int64(b) * SLOTS
        for slot in range(SLOTS):
            entry = table[base + slot]
            if (entry >> np.uint32(SLICES)) == fp and (entry & np.uint32(FULL_TAG)) != 0:
                out[base + slot] |= tag


@njit(cache=True)
def refresh(
    table: np.ndarray,
    ts: np.ndarray,
    lo: np.int64,
    hi: np.int64,
    w: np.int64,
    seed: np.uint64,
    out: np.ndarray,
) -> None:
    """OR the slices of intervals ``[t + lo, t + hi]`` into ``out`` for windows already present.

    Only slots whose fingerprint matches get bits, so the new intervals are intersected with
    the previous interval set when the compute node ANDs ``out`` into the slice tags. Every
    slot of the bucket pair with a matching fingerprint is refreshed (not only the first), so
    two windows sharing a fingerprint never lose coverage.

    Masks are first accumulated per window in a 4-way direct-mapped cache: events stored in
    time order touch the same few windows in a row, so most events cost no table access.
    """
    m = table.shape[0] // SLOTS
    mask = np.uint64(m - 1)
    cache_win = np.full(4, np.iinfo(np.int64).min, np.int64)
    cache_tag = np.zeros(4, np.uint32)
    for i in range(ts.shape[0]):
        s, e = _shifted(ts[i], lo), _shifted(ts[i], hi)
        ws, we = s // w, e // w
        for win in range(ws, we + 1):
            tag = np.uint32(FULL_TAG)
            if win == ws:
                tag &= left_mask(slice_of(s, ws, w))
            if win == we:
                tag &= right_mask(slice_of(e, we, w))
            c = win & 3
            if cache_win[c] == win:
                cache_tag[c] |= tag
            else:
                if cache_tag[c] != 0:
                    _refresh_window(table, cache_win[c], cache_tag[c], mask, seed, out)
                cache_win[c] = win
                cache_tag[c] = tag
    for c in range(4):
        if cache_tag[c] != 0:
            _refresh_window(table, cache_win[c], cache_tag[c], mask, seed, out)


@njit(cache=True)
def popcount_tags(table: np.ndarray) -> int:
    total = 0
    for i in range(table.shape[0]):
        v = table[i] & np.uint32(FULL_TAG)
        while v:
            v &= v - np.uint32(1)
            total += 1
    return total
