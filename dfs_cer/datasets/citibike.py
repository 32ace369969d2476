"""CITIBIKE-shaped events: Citi Bike trips (New York), one event per trip start.

The schema is the reference cleaning of the 2023 trip files (reference notes §8): ``type`` is a
letter for the trip's duration bucket (<5, <10, <20, <30, >=30 minutes) times its kind
(classic-member, classic-casual, electric-member, electric-casual), so A..D are rides under five
minutes, E..H five to ten, I..L ten to twenty; station ids are the file's ids times 100; times in
ms. Trips start at ~1 per second; half start at the station where a trip of the last minute ended
(bikes are re-ridden), which is what the workload's ``B.start_station_id = A.end_station_id``
chains look for.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema(
    [
        ("type", pa.string()),
        ("ride_id", pa.int64()),
        ("start_station_id", pa.int32()),
        ("end_station_id", pa.int32()),
        ("start_lat", pa.float64()),
        ("start_lng", pa.float64()),
        ("end_lat", pa.float64()),
        ("end_lng", pa.float64()),
        ("eventtime", pa.timestamp("ms")),
    ]
)

#: 2023-01-01T00:00:00Z in ms
START_MS = 1_672_531_200_000
BUCKETS_MIN = (5, 10, 20, 30)  # upper bounds of the first four duration buckets
KINDS = ("classic-member", "classic-casual", "electric-member", "electric-casual")
TYPES = [chr(ord("A") + i) for i in range(20)]
STATIONS = 2000


def type_letter(duration_s: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """The reference's type letter: duration bucket * 4 + kind index (both arrays)."""
    bucket = np.searchsorted(np.array(BUCKETS_MIN) * 60, duration_s, side="right")
    return np.array(TYPES)[bucket * 4 + kind]


def citibike_batches(
    n: int, *, seed: int = 7, mean_gap_ms: float = 1000.0, batch: int = 1_000_000
) -> Iterator[pa.RecordBatch]:
    """``n`` trips in time order, ``batch`` at a time."""
    rng = np.random.default_rng(seed)
    st_rng = np.random.default_rng(2023)
    lat = np.sort(st_rng.uniform(40.63, 40.88, STATIONS))  # neighbouring ids are nearby stations
    lng = st_rng.uniform(-74.03, -73.88, STATIONS)
    popularity = np.arange(1, STATIONS + 1, dtype=np.float64) ** -0.8
    popularity = st_rng.permutation(popularity / popularity.sum())
    ids = np.sort(st_rng.choice(np.arange(3000, 900000), STATIONS, replace=False)).astype(np.int32)
    clock = float(START_MS)
    for lo in range(0, n, batch):
        k = min(batch, n - lo)
        ms = clock + np.cumsum(rng.exponential(mean_gap_ms, k))
        clock = float(ms[-1])
        start = rng.choice(STATIONS, k, p=popularity)
        # half the trips start where a trip of the last minute or so ended: bikes are re-ridden
        end = np.clip(start + rng.integers(-40, 41, k), 0, STATIONS - 1)
        lag = rng.integers(1, 60, k)
        reuse = (rng.random(k) < 0.5) & (np.arange(k) >= lag)
        start = np.where(reuse, end[np.maximum(np.arange(k) - lag, 0)], start)
        duration = rng.lognormal(np.log(660), 0.7, k)  # median 11 minutes
        kind = rng.choice(4, k, p=[0.55, 0.12, 0.23, 0.10])
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(type_letter(duration, kind)),
                pa.array(rng.integers(-(2**62), 2**62, k, dtype=np.int64)),
                pa.array(ids[start]),
                pa.array(ids[end]),
                pa.array(np.round(lat[start], 6)),
                pa.array(np.round(lng[start], 6)),
                pa.array(np.round(lat[end], 6)),
                pa.array(np.round(lng[end], 6)),
                pa.array(ms.astype(np.int64), pa.timestamp("ms")),
            ],
            schema=SCHEMA,
        )


def citibike_queries(count: int = 20, *, seed: int = 11, window_minutes: int = 5) -> list[str]:
    """The CITIBIKE workload: ``A N1*? B N2*? C`` within 5 minutes, station chains, a shared
    latitude range and C south-west of B."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        a, b, c = (TYPES[int(rng.integers(lo, lo + 4))] for lo in (0, 4, 8))
        lo_lat = round(float(rng.uniform(40.63, 40.78)), 6)
        rng_lat = f"BETWEEN {lo_lat} AND {round(lo_lat + 0.1, 6)}"
        extra = " AND B.start_lat >= A.start_lat" if rng.random() < 0.3 else ""
        out.append(
            "SELECT * FROM citibike MATCH_RECOGNIZE (ORDER BY eventtime MEASURES A.ride_id "
            "AS a_ride, B.ride_id AS b_ride, C.ride_id AS c_ride, C.eventtime AS c_time "
            "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A N1*? B N2*? C) "
            f"WITHIN INTERVAL '{window_minutes}' MINUTE DEFINE A AS A.type = '{a}' AND "
            f"A.start_lat {rng_lat}, B AS B.type = '{b}' AND B.start_lat {rng_lat} AND "
            f"B.start_station_id = A.end_station_id{extra}, C AS C.type = '{c}' AND "
            f"C.start_lat {rng_lat} AND C.start_station_id = B.end_station_id AND "
            "C.start_lat <= B.start_lat AND C.start_lng <= B.start_lng)"
        )
    return out
