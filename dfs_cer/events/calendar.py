"""Calendar windows (``WITHIN INTERVAL '3' MONTH``): the last instant a match starting at a given
time may reach, by calendar arithmetic as SQL adds a month interval to a timestamp: the same day
of the month ``n`` months on (the month's last day when it has fewer days: January 31 plus one
month is February 28 or 29), the same time of day. Computed in UTC on the stored instants.

Everything else that needs a window (storage nodes' interval sets, filters, time chunks) uses the
longest span the window can have (31 days a month, 366 a year), so their time ranges stay a
superset of the exact ones; the matchers apply the exact end per start row."""

from __future__ import annotations

import numpy as np

#: numpy's name of each time unit a time column's integers can be in
_NUMPY_UNIT = {"s": "s", "ms": "ms", "us": "us", "ns": "ns", "days": "D"}
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400 * 10**6, "ns": 86_400 * 10**9, "D": 1}


def add_months(values: np.ndarray, unit: str, months: int) -> np.ndarray:
    """``values`` (int64 instants in ``unit``: s, ms, us, ns or days since the epoch) plus
    ``months`` calendar months; saturates at the int64 range (instants past year 2262 in ns)."""
    if unit not in _NUMPY_UNIT:
        raise ValueError(f"no calendar arithmetic on times in {unit!r}")
    code = _NUMPY_UNIT[unit]
    per_day = _PER_DAY[code]
    t = np.asarray(values, np.int64)
    # the day and the time into it in integers: a day's first instant may lie below int64 (the
    # day holding int64's least instants), which datetime64 arithmetic would wrap
    days = np.floor_divide(t, per_day)
    into_day = np.mod(t, per_day)
    day = days.astype("datetime64[D]")
    month = day.astype("datetime64[M]")
    day_of_month = (day - month.astype("datetime64[D]")).astype(np.int64)  # 0-based
    target = month + np.timedelta64(months, "M")
    length = (
        (target + np.timedelta64(1, "M")).astype("datetime64[D]") - target.astype("datetime64[D]")
    ).astype(np.int64)
    end_day = target.astype("datetime64[D]") + np.minimum(day_of_month, length - 1).astype(
        "timedelta64[D]"
    )
    days = end_day.astype(np.int64)
    top, bottom = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    # days * per_day + into_day within int64, without computing it: below the top ...
    safe = days <= (top - into_day) // per_day
    # ... and at or above the bottom (q * per_day + r is int64's least value)
    q, r = bottom // per_day, bottom - (bottom // per_day) * per_day
    low = (days < q) | ((days == q) & (into_day < r))
    out = np.full(days.shape, top, np.int64)
    out[low] = bottom
    fine = safe & ~low
    out[fine] = days[fine] * per_day + into_day[fine]
    return out
