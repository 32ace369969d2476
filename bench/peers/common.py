"""Shared by the peer adapters (runs inside each peer's own virtual environment: stdlib only).

Protocol: ``python <peer>.py events.csv result.json [skip]``; the CSV has columns
type,a1,a2,ts (ts in ms, increasing); the result JSON holds the engine's match triples
(A.ts, B.ts, C.ts), the match count and the seconds spent in the engine.

The query, in each peer's own language: A is type T_01 with a1 <= 200, B is T_02 with
a1 <= 200, C is T_03 with a1 <= 200 and C.a2 = B.a2, span from A to C at most 180000 ms
(inclusive).
"""

import csv
import json
import sys

W = 180_000


def read_events(path):
    with open(path, newline="") as fh:
        return [
            {"type": r["type"], "a1": int(r["a1"]), "a2": r["a2"], "ts": int(r["ts"])}
            for r in csv.DictReader(fh)
        ]


def write_result(path, name, semantics, triples, seconds):
    with open(path, "w") as fh:
        json.dump(
            {
                "engine": name,
                "semantics": semantics,
                "matches": len(triples),
                "seconds": seconds,
                "triples": sorted(list(t) for t in triples),
            },
            fh,
        )


def args():
    return sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "SKIP TO NEXT ROW")
