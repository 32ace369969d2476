"""CRIMES-shaped events: the schema, type mix and geography of Chicago's crime log.

The real file (City of Chicago, "Crimes - 2001 to Present") has about 8.1M rows, roughly 1,000
a day. This generator keeps its shape so the paper's CRIMES queries behave as they do on the
real data: ``primary_type`` drawn from the real type mix (THEFT and BATTERY common, ROBBERY and
MOTOR VEHICLE THEFT a few percent), 22 police districts of different sizes with beats numbered
``district * 100 + k``, coordinates scattered around each district's centre, and Poisson arrivals
(``mean_gap_s`` seconds apart on average) so a 30-minute window holds a couple of dozen events.
Type strings keep the real file's spaces (``'MOTOR VEHICLE THEFT'``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

#: primary types and their approximate share of the real log (2001 to present)
TYPE_MIX: dict[str, float] = {
    "THEFT": 21.1,
    "BATTERY": 18.3,
    "CRIMINAL DAMAGE": 11.4,
    "NARCOTICS": 9.3,
    "ASSAULT": 6.5,
    "OTHER OFFENSE": 6.2,
    "BURGLARY": 5.4,
    "MOTOR VEHICLE THEFT": 4.7,
    "DECEPTIVE PRACTICE": 4.3,
    "ROBBERY": 3.8,
    "CRIMINAL TRESPASS": 2.8,
    "WEAPONS VIOLATION": 1.3,
    "PROSTITUTION": 0.9,
    "PUBLIC PEACE VIOLATION": 0.7,
    "OFFENSE INVOLVING CHILDREN": 0.7,
    "CRIM SEXUAL ASSAULT": 0.4,
    "SEX OFFENSE": 0.4,
    "INTERFERENCE WITH PUBLIC OFFICER": 0.2,
    "GAMBLING": 0.2,
    "LIQUOR LAW VIOLATION": 0.2,
    "ARSON": 0.2,
    "HOMICIDE": 0.15,
    "KIDNAPPING": 0.1,
    "STALKING": 0.05,
    "INTIMIDATION": 0.05,
}

#: FBI codes per type (one representative code each)
FBI_CODE = {
    "THEFT": "06",
    "BATTERY": "08B",
    "CRIMINAL DAMAGE": "14",
    "NARCOTICS": "18",
    "ASSAULT": "08A",
    "OTHER OFFENSE": "26",
    "BURGLARY": "05",
    "MOTOR VEHICLE THEFT": "07",
    "DECEPTIVE PRACTICE": "11",
    "ROBBERY": "03",
    "HOMICIDE": "01A",
    "ARSON": "09",
}

#: police districts (31 is tiny) and their relative sizes
DISTRICTS = np.array(
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 22, 24, 25]
)
_DISTRICT_WEIGHT = np.array(
    [
        4.2,
        4.6,
        5.0,
        5.6,
        4.3,
        5.9,
        5.7,
        6.7,
        4.9,
        4.6,
        7.2,
        4.9,
        3.9,
        4.7,
        3.4,
        2.9,
        4.6,
        4.5,
        1.8,
        3.2,
        3.1,
        5.8,
    ]
)
_LAT = (41.65, 42.02)
_LON = (-87.84, -87.53)

#: 2001-01-01T00:00:00Z
START_SECONDS = 978_307_200

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("case_number", pa.string()),
        ("date", pa.timestamp("s")),
        ("primary_type", pa.string()),
        ("iucr", pa.string()),
        ("beat", pa.int32()),
        ("district", pa.int32()),
        ("fbi_code", pa.string()),
        ("latitude", pa.float64()),
        ("longitude", pa.float64()),
    ]
)


def _district_centres() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2001)
    return rng.uniform(*_LAT, DISTRICTS.size), rng.uniform(*_LON, DISTRICTS.size)


def crimes_batches(
    n: int, *, seed: int = 7, mean_gap_s: float = 90.0, batch: int = 1_000_000
) -> Iterator[pa.RecordBatch]:
    """``n`` CRIMES-shaped events in time order, ``batch`` rows at a time
    (streamable to parquet)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.default_rng(seed)
    types = np.array(list(TYPE_MIX))
    type_p = np.array(list(TYPE_MIX.values()))
    type_p /= type_p.sum()
    iucr = np.array([f"{(i * 37) % 9000 + 100:04d}" for i in range(types.size)])
    fbi = np.array([FBI_CODE.get(t, "26") for t in types])
    district_p = _DISTRICT_WEIGHT / _DISTRICT_WEIGHT.sum()
    lat_c, lon_c = _district_centres()
    clock = float(START_SECONDS)
    for lo in range(0, n, batch):
        k = min(batch, n - lo)
        seconds = clock + np.cumsum(rng.exponential(mean_gap_s, k))
        clock = float(seconds[-1]) if k else clock
        t = rng.choice(types.size, k, p=type_p)
        d = rng.choice(DISTRICTS.size, k, p=district_p)
        ids = np.arange(lo, lo + k, dtype=np.int64) + 10_000_000
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(ids),
                pa.array(np.char.add("JA", (ids % 1_000_000).astype(str))),
                pa.array(seconds.astype(np.int64), pa.timestamp("s")),
                pa.array(types[t]),
                pa.array(iucr[t]),
                pa.array((DISTRICTS[d] * 100 + rng.integers(11, 36, k)).astype(np.int32)),
                pa.array(DISTRICTS[d].astype(np.int32)),
                pa.array(fbi[t]),
                pa.array(np.round(lat_c[d] + rng.normal(0, 0.02, k), 6)),
                pa.array(np.round(lon_c[d] + rng.normal(0, 0.02, k), 6)),
            ],
            schema=SCHEMA,
        )


def crimes_events(n: int, **options: float | int) -> pa.Table:
    """``n`` CRIMES-shaped events as one table (see :func:`crimes_batches`)."""
    return pa.Table.from_batches(list(crimes_batches(n, **options)), schema=SCHEMA)  # type: ignore[arg-type]


_Q1_MEASURES = (
    "R.id AS robbery, B.id AS battery, M.id AS theft, M.district AS district, M.date AS theft_date"
)


def _q1(
    *,
    r: str = "",
    b: str = "",
    m: str = "",
    pattern: str = "R {- N* -} B {- N* -} M",
    head: str = "ONE ROW PER MATCH\n  AFTER MATCH SKIP TO NEXT ROW",
) -> str:
    """Q1's text with extra conditions on R, B and M (each starting with `` AND``)."""
    return f"""SELECT * FROM crimes MATCH_RECOGNIZE (
  ORDER BY date
  MEASURES {_Q1_MEASURES}
  {head}
  PATTERN ({pattern}) WITHIN '30' MINUTE
  DEFINE
    R AS R.primary_type = 'ROBBERY'{r},
    B AS B.primary_type = 'BATTERY'{b},
    M AS M.primary_type = 'MOTOR VEHICLE THEFT' AND M.district = B.district{m}
)"""


#: the paper's Listing 1 (Q1): robbery, then battery, then a motor vehicle theft in the battery's
#: district, within 30 minutes, other crimes in between skipped
Q1 = _q1()

#: Q1 and variants in the style of the reference workload (crimes_query.txt)
QUERIES: dict[str, str] = {
    "Q1": Q1,
    "Q1, districts 1-10": _q1(r=" AND R.district BETWEEN 1 AND 10"),
    "Q1, one district, nearby": _q1(
        b=" AND B.district = R.district",
        m="\n       AND M.latitude BETWEEN B.latitude - 0.01 AND B.latitude + 0.01",
    ),
    "Q1, ALL MATCHES": _q1(b=" AND B.beat = R.beat", pattern="R B M", head="ALL MATCHES"),
}


def crimes_queries(count: int = 20, *, seed: int = 11, window_minutes: int = 30) -> list[str]:
    """The CRIMES workload of the reference (crimes_query.txt): robbery, battery, motor vehicle
    theft within 30 minutes, each query adding one range condition, one equality or one
    proximity condition."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        extra = {"A": "", "B": "", "C": ""}
        kind = rng.integers(0, 3)
        if kind == 0:
            v = "ABC"[int(rng.integers(0, 3))]
            which = int(rng.integers(0, 3))
            if which == 0:
                lo = int(rng.integers(1, 16))
                extra[v] = f" AND {v}.district BETWEEN {lo} AND {lo + 9}"
            elif which == 1:
                lo = int(rng.integers(1, 20)) * 100
                extra[v] = f" AND {v}.beat BETWEEN {lo} AND {lo + 600}"
            else:
                west = round(float(rng.uniform(-87.84, -87.65)), 4)
                extra[v] = f" AND {v}.longitude BETWEEN {west} AND {round(west + 0.12, 4)}"
        elif kind == 1:
            left, right = [("B", "A"), ("C", "B")][int(rng.integers(0, 2))]
            col = "beat" if rng.random() < 0.5 else "district"
            extra[left] = f" AND {left}.{col} = {right}.{col}"
        else:
            col = "latitude" if rng.random() < 0.5 else "longitude"
            extra["C"] = (
                f" AND C.district = B.district AND C.{col} BETWEEN B.{col} - 0.1 AND B.{col} + 0.1"
            )
        out.append(
            "SELECT * FROM crimes MATCH_RECOGNIZE (ORDER BY date "
            "MEASURES A.id AS robbery, B.id AS battery, C.id AS theft, C.date AS theft_date "
            "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            f"PATTERN (A N1*? B N2*? C) WITHIN INTERVAL '{window_minutes}' MINUTE DEFINE "
            f"A AS A.primary_type = 'ROBBERY'{extra['A']}, "
            f"B AS B.primary_type = 'BATTERY'{extra['B']}, "
            f"C AS C.primary_type = 'MOTOR VEHICLE THEFT'{extra['C']})"
        )
    return out
