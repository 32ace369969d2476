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
    t = np.asarray(values, np.int64).astype(f"datetime64[{code}]")
    day = t.astype("datetime64[D]")
    month = day.astype("datetime64[M]")
    into_day = (t - day.astype(f"datetime64[{code}]")).astype(np.int64)  # time of day
    day_of_month = (day - month.astype("datetime64[D]")).astype(np.int64)  # 0-based
    target = month + np.timedelta64(months, "M")
    length = (
        (target + np.timedelta64(1, "M")).astype("datetime64[D]") - target.astype("datetime64[D]")
    ).astype(np.int64)
    end_day = target.astype("datetime64[D]") + np.minimum(day_of_month, length - 1).astype(
        "timedelta64[D]"
    )
    per_day = _PER_DAY[code]
    days = end_day.astype(np.int64)
    limit = np.iinfo(np.int64).max
    safe = days <= (limit - into_day) // per_day  # no overflow in days * per_day + into_day
    out = np.full(days.shape, limit, np.int64)
    out[safe] = days[safe] * per_day + into_day[safe]
    return out
