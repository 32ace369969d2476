"""Sizing and theory as pure functions (paper §V).

- :func:`swf_buckets`: buckets for ``n`` windows at the cuckoo load limit (reference §3.2).
- :func:`swf_fpr_theorem1`: Theorem 1, the initial SWF's false-positive rate.
- :func:`per_lookup_fpr`: the per-window ε that gives ε* over ``probes`` windows.
- :func:`bloom_parameters`: bits and hash count for ``n`` keys at ε.
- :func:`wjf_fpr_eq6`: Eq. 6, the WJF false-positive rate for a given size.
"""

from __future__ import annotations

import math

#: cuckoo hashing with 4 entries per bucket fills to about 95.5% (Fan et al.), reference LOAD_FACTOR
SWF_MAX_LOAD = 0.955


def next_pow2(x: int) -> int:
    """Smallest power of two >= max(x, 1)."""
    return 1 << max(0, (max(1, x) - 1).bit_length())


def swf_buckets(n_windows: int, entries_per_bucket: int = 4, load: float = SWF_MAX_LOAD) -> int:
    """Buckets for ``n_windows`` distinct windows: ``nextPow2(ceil(n / load / d))``.

    Examples from the reference: 1 -> 1, 6 -> 2, 16 -> 8, 100 -> 32, 1000 -> 512.
    """
    if n_windows < 0:
        raise ValueError(f"invalid window count: {n_windows}")
    return next_pow2(math.ceil(n_windows / load / entries_per_bucket))


def swf_fpr_theorem1(
    rate: float,
    window: float,
    *,
    head_or_tail: bool = True,
    entries_per_bucket: int = 4,
    load: float = 0.8,
    fingerprint_bits: int = 12,
    slice_bits: int = 20,
) -> float:
    """Theorem 1: upper bound of the initial SWF's FPR for events of rate λ and window w."""
    kappa = math.exp(-rate * window)
    d, a, lf, lt = entries_per_bucket, load, fingerprint_bits, slice_bits
    collide = 2 * d * a / 2**lf
    if kappa >= 1.0:
        return 0.0
    if head_or_tail:
        return (
            kappa**2
            * collide
            * (lt * (1 - kappa) - kappa * math.log(kappa))
            / (lt * (1 - kappa**2))
            + kappa * math.log(1 / kappa) / lt
        )
    return (
        kappa**3 * collide * (lt * (1 - kappa) - kappa**2 * math.log(kappa)) / (lt * (1 - kappa**3))
        + kappa**2 * math.log(1 / kappa) / lt
    )


def per_lookup_fpr(target: float, probes: int = 2) -> float:
    """ε per window such that ``probes`` independent lookups give ``target`` overall.

    1 - (1 - ε)^probes = ε*  ->  ε = 1 - (1 - ε*)^(1/probes); ε* = 0.02 gives ε ≈ 0.0101.
    """
    if not 0 < target < 1 or probes < 1:
        raise ValueError(f"invalid target fpr {target} or probe count {probes}")
    return 1 - (1 - target) ** (1 / probes)


def bloom_parameters(n: int, fpr: float) -> tuple[int, int]:
    """``(bits, hashes)`` for ``n`` keys at false-positive rate ``fpr``; bits rounded up to 64."""
    if not 0 < fpr < 1:
        raise ValueError(f"invalid fpr: {fpr}")
    n = max(1, n)
    hashes = max(1, math.ceil(math.log2(1 / fpr)))
    bits = math.ceil(n * math.log(1 / fpr) / math.log(2) ** 2)
    return 64 * max(1, math.ceil(bits / 64)), hashes


def bloom_fpr(bits: int, hashes: int, n: int) -> float:
    """Classic Bloom filter FPR ``(1 - (1 - 1/m)^(kn))^k`` for one lookup."""
    p = 1 - (1 - 1 / bits) ** (hashes * n)
    return float(p**hashes)


def wjf_fpr_eq6(bits: int, hashes: int, n: int, probes: int = 2) -> float:
    """Eq. 6 generalised: probability that at least one of ``probes`` window
    lookups is a false hit."""
    single = bloom_fpr(bits, hashes, n)
    return 1 - (1 - single) ** probes


def bits_per_item_minimum(fpr: float) -> float:
    """Information-theoretic minimum bits per item, log2(1/ε)."""
    return math.log2(1 / fpr)
