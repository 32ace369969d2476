"""The paper's synthetic event data and query workload (reference-implementation-notes §8).

Events: ``type`` Zipf(1.2) over T_00..T_19 (T_00 ≈ 35%), ``a1`` uniform on [0, 1000], ``a2``
Zipf(0.255) over 50 values (8 chars), ``a3`` Zipf(0.7) over 50 values (16 chars), ``ts`` in ms
with exponential(1 s) gaps (Poisson arrivals at 1/s) from 2041927911 s; each batch is shuffled
so storage order is not time order.

Queries: η variables of random types (no two consecutive alike), each with ``a1 <= 200``; each
later variable, with probability 1.5/(η-1), also ``a2`` or ``a3`` equal to the previous one's.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

START_SECONDS = 2041927911


def _zipf(s: float, n: int) -> np.ndarray:
    p = np.arange(1, n + 1, dtype=np.float64) ** -s
    return p / p.sum()


#: inter-arrival distributions, all with a mean of one second (reference notes §8)
INTERARRIVALS = ("poisson", "uniform", "gaussian", "rayleigh")


def _gaps(rng: np.random.Generator, n: int, interarrival: str) -> np.ndarray:
    if interarrival == "poisson":
        return rng.exponential(1.0, n)
    if interarrival == "uniform":
        return rng.uniform(0.0, 2.0, n)
    if interarrival == "gaussian":
        return np.clip(rng.normal(1.0, 1 / 3, n), 0.0, None)
    if interarrival == "rayleigh":
        return rng.rayleigh(1.0 / np.sqrt(np.pi / 2), n)  # mean sigma*sqrt(pi/2) = 1
    raise ValueError(
        f"interarrival must be one of {', '.join(INTERARRIVALS)}, got {interarrival!r}"
    )


def synthetic_events(
    n: int,
    *,
    seed: int = 7,
    batch: int = 1_000_000,
    shuffle: bool = True,
    start: int = 0,
    interarrival: str = "poisson",
) -> pa.Table:
    """``n`` synthetic events (``start`` offsets the event index, so batches can be generated
    separately and concatenated)."""
    rng = np.random.default_rng([seed, start])
    types = np.array([f"T_{i:02d}" for i in range(20)])
    a2_values = np.array([f"ATTR2_{i:02d}" for i in range(50)])
    a3_values = np.array([f"ATTR3_{i:02d}_PADDING" for i in range(50)])
    gaps = _gaps(rng, n, interarrival)
    seconds = START_SECONDS + np.cumsum(gaps) + start  # about 1 s per event before this chunk
    ts = (seconds * 1000).astype(np.int64)
    order = np.arange(n)
    if shuffle:
        for lo in range(0, n, batch):
            rng.shuffle(order[lo : lo + batch])
    t = rng.choice(20, n, p=_zipf(1.2, 20))
    return pa.table(
        {
            "type": pa.array(types[t][order]),
            "a1": pa.array(rng.integers(0, 1001, n)[order].astype(np.int32)),
            "a2": pa.array(a2_values[rng.choice(50, n, p=_zipf(0.255, 50))][order]),
            "a3": pa.array(a3_values[rng.choice(50, n, p=_zipf(0.7, 50))][order]),
            "ts": pa.array(ts[order], pa.timestamp("ms")),
        }
    )


def synthetic_batches(
    n: int,
    *,
    seed: int = 7,
    batch: int = 1_000_000,
    shuffle: bool = True,
    interarrival: str = "poisson",
) -> Iterator[pa.Table]:
    """``n`` synthetic events in batches of ``batch`` (each shuffled), for streaming to parquet."""
    for lo in range(0, n, batch):
        yield synthetic_events(
            min(batch, n - lo),
            seed=seed,
            batch=batch,
            shuffle=shuffle,
            start=lo,
            interarrival=interarrival,
        )


def variable_types(rng: np.random.Generator, count: int) -> list[int]:
    """Random event types (0..19) for ``count`` pattern variables, no two consecutive alike."""
    kinds: list[int] = []
    for _ in range(count):
        choice = int(rng.integers(0, 20))
        while kinds and choice == kinds[-1]:
            choice = int(rng.integers(0, 20))
        kinds.append(choice)
    return kinds


def synthetic_queries(
    count: int = 20,
    *,
    variables: int = 4,
    window_minutes: float = 3,
    selectivity: int = 200,
    seed: int = 11,
    cer: bool = True,
) -> list[str]:
    """The synthetic workload: ``count`` queries over ``variables`` variables.

    With ``cer`` the pattern is ``A B C ...`` under ``ALL MATCHES`` (skip-till-any-match, as the
    paper's engines run it); otherwise ``A N1*? B N2*? C ...`` under SQL semantics with
    ``AFTER MATCH SKIP TO NEXT ROW`` (the reference workload files).
    """
    rng = np.random.default_rng(seed)
    names = [chr(ord("A") + i) for i in range(variables)]
    out = []
    for _ in range(count):
        kinds = variable_types(rng, len(names))
        defines = []
        for j, name in enumerate(names):
            cond = f"{name}.type = 'T_{kinds[j]:02d}' AND {name}.a1 <= {selectivity}"
            if j and rng.random() < 1.5 / max(1, variables - 1):
                attr = "a2" if rng.random() < 0.5 else "a3"
                cond += f" AND {name}.{attr} = {names[j - 1]}.{attr}"
            defines.append(f"{name} AS {cond}")
        if cer:
            pattern = " ".join(names)
            head = (
                "MEASURES " + ", ".join(f"{n}.ts AS {n.lower()}_ts" for n in names) + " ALL MATCHES"
            )
        else:
            pattern = " ".join(n if i == 0 else f"N{i}*? {n}" for i, n in enumerate(names))
            head = (
                "MEASURES "
                + ", ".join(f"{n}.ts AS {n.lower()}_ts" for n in names)
                + " ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW"
            )
        out.append(
            f"SELECT * FROM synthetic MATCH_RECOGNIZE (ORDER BY ts {head} PATTERN ({pattern}) "
            f"WITHIN INTERVAL '{window_minutes}' MINUTE DEFINE {', '.join(defines)})"
        )
    return out
