"""pycer (the CORE engine): skip-till-any-match. Needs Python 3.13 (cp313 wheel only).

CEQL filters are unary, so C.a2 = B.a2 is applied to the engine's output (exact under
any-match). ``WITHIN n [ts]`` is exclusive, hence W + 1. One query per PyOfflineServer: several
queries on one server interleave their text output.
"""

import re
import time

import pycer
from common import W, args, read_events, write_result


def run(events):
    types = sorted({e["type"] for e in events} | {"T_01", "T_02", "T_03"})
    decl = (
        "CREATE STREAM S {"
        + ", ".join(f"EVENT {t} {{ a1:int, a2:string, ts:int }}" for t in types)
        + "}"
    )
    query = (
        "SELECT * FROM S WHERE (T_01 as A; T_02 as B; T_03 as C) "
        "FILTER A[a1 <= 200] AND B[a1 <= 200] AND C[a1 <= 200] "
        f"WITHIN {W + 1} [ts] CONSUME BY NONE"
    )
    srv = pycer.PyOfflineServer()
    tid = {e.name: e.id for e in srv.declare_stream(decl).events_info}
    srv.add_query(query)
    srv.send_events(
        [
            pycer.PyEvent(
                tid[e["type"]],
                [
                    pycer.PyIntValue(e["a1"]),
                    pycer.PyStringValue(e["a2"]),
                    pycer.PyIntValue(e["ts"]),
                ],
            )
            for e in events
        ]
    )
    triples = []
    for line in srv.get_output().splitlines():
        attrs = [a.split() for a in re.findall(r"attributes: \[([^\]]*)\]", line)]
        if len(attrs) == 3 and attrs[1][1] == attrs[2][1]:
            triples.append(tuple(int(a[2]) for a in attrs))
    return triples


if __name__ == "__main__":
    events_path, out_path, _ = args()
    events = read_events(events_path)
    start = time.perf_counter()
    triples = run(events)
    write_result(out_path, "pycer", "skip_till_any_match", triples, time.perf_counter() - start)
