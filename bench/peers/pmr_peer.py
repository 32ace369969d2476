"""pandas-match-recognize: SQL:2016 MATCH_RECOGNIZE on pandas. It has no WITHIN, so the window
goes into DEFINE (with FIRST(A.ts): a bare A.ts there returns nothing); the gap variables stay
undefined (defining them gives wrong matches). Quadratic: keep inputs small."""

import time

import pandas as pd
from common import W, args, read_events, write_result
from pandas_match_recognize import match_recognize


def run(events, skip):
    df = pd.DataFrame(events, columns=["type", "a1", "a2", "ts"])
    sql = f"""SELECT a_ts, b_ts, c_ts FROM events MATCH_RECOGNIZE (
        ORDER BY ts
        MEASURES A.ts AS a_ts, B.ts AS b_ts, C.ts AS c_ts
        ONE ROW PER MATCH
        AFTER MATCH {skip}
        PATTERN (A X*? B Y*? C)
        DEFINE A AS A.type = 'T_01' AND A.a1 <= 200,
               B AS B.type = 'T_02' AND B.a1 <= 200 AND B.ts - FIRST(A.ts) <= {W},
               C AS C.type = 'T_03' AND C.a1 <= 200 AND C.a2 = B.a2
                    AND C.ts - FIRST(A.ts) <= {W})"""
    res = match_recognize(sql, df)
    return [tuple(int(v) for v in r) for r in res[["a_ts", "b_ts", "c_ts"]].itertuples(index=False)]


if __name__ == "__main__":
    events_path, out_path, skip = args()
    events = read_events(events_path)
    start = time.perf_counter()
    triples = run(events, skip)
    write_result(
        out_path,
        "pandas-match-recognize",
        f"MATCH_RECOGNIZE {skip}",
        triples,
        time.perf_counter() - start,
    )
