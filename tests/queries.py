"""Queries shared by the front-end tests."""

Q1 = """SELECT * FROM CRIMES MATCH_RECOGNIZE (
  ORDER BY date
  ALL ROWS PER MATCH
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN (R {-N*-} B {-N*-} M) WITHIN '30'
        MINUTE
  DEFINE
    R AS R.primary_type = 'ROBBERY',
    B AS B.primary_type = 'BATTERY',
    M AS M.primary_type = 'MOTOR VEHICLE THEFT' AND M.district = B.district)"""

#: every clause of SQL:2016 row pattern recognition, plus the extensions
FULL = """SELECT m.sym, m.n FROM ticks MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts NULLS LAST, seq DESC
  MEASURES FINAL LAST(B.price, 1) - RUNNING FIRST(A.price) AS drop_, MATCH_NUMBER() AS n,
     CLASSIFIER(U) AS c, count(U.*) AS cnt, count(*) AS total, FINAL avg(B.price) AS av,
     PREV(LAST(B.price, 1), 2) AS pp, NEXT(A.price) AS nx, sym AS s2, CLASSIFIER() AS cls
  ALL ROWS PER MATCH OMIT EMPTY MATCHES
  AFTER MATCH SKIP TO FIRST B
  PATTERN (^ A B+? C{2,} (D | E)* PERMUTE(X, Y) {- Z?? -} F{,3} G{2} H{1,4}? $)
  WITHIN INTERVAL '1.5' HOUR
  SUBSET U = (A, B), V = (C, D, E)
  DEFINE B AS B.price < PREV(B.price) AND NOT (B.x IN (1, 2)) AND B.y IS NOT NULL
              AND B.z BETWEEN -1 AND 2.5,
         C AS C.s LIKE 'a%' OR CASE WHEN C.x > 1 THEN TRUE ELSE FALSE END,
         D AS lower(D.s) = 'x' AND D.v + 1 * 2 - (3 - 4) = 0 AND avg(V.v) > 0 AND count(*) < 10,
         E AS E.ts - FIRST(A.ts) <= INTERVAL '10' MINUTE AND CLASSIFIER() = 'E'
) AS m WHERE m.n > 1 ORDER BY m.sym DESC LIMIT 10"""

#: the reference workloads' query shape (CRIMES, skip-till-next via N*?)
CRIMES_REFERENCE = """SELECT * FROM CRIMES MATCH_RECOGNIZE(
  ORDER BY eventTime
  MEASURES A.id AS AID, B.id AS BID, C.id AS CID
  ONE ROW PER MATCH
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN (A N1*? B N2*? C) WITHIN INTERVAL '30' MINUTE
  DEFINE
    A AS A.type = 'ROBBERY' AND A.beat >= 1000 AND A.beat <= 1600,
    B AS B.type = 'BATTERY',
    C AS C.type = 'MOTOR_VEHICLE_THEFT' AND C.district = B.district
       AND C.latitude <= B.latitude + 0.1 AND C.latitude >= B.latitude - 0.1
)"""

CLUSTER_REFERENCE = """SELECT * FROM CLUSTER MATCH_RECOGNIZE(
  PARTITION BY JOBID ORDER BY eventTime
  MEASURES A.index AS aindex
  ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW
  PATTERN (A N1*? B N2*? C) WITHIN INTERVAL '3' SECOND
  DEFINE A AS A.type = 'TP0' AND A.CPU <= 0.1,
         B AS B.type = 'TP1' AND B.JOBID = A.JOBID AND B.index < 5 AND B.DISK >= 0.5 * A.DISK,
         C AS C.type IN ('TP4', 'TP5') AND C.JOBID = B.JOBID
)"""

ALL_MATCHES = """SELECT * FROM stock MATCH_RECOGNIZE (
  PARTITION BY company ORDER BY t
  MEASURES A.t AS at, LAST(B.t) AS bt, C.t AS ct
  ALL MATCHES
  PATTERN (A B+ C) WITHIN 30
  DEFINE A AS A.price < B.price, B AS B.price < NEXT(B.price), C AS C.price < FIRST(B.price)
)"""

CORPUS = {
    "q1": Q1,
    "full": FULL,
    "crimes_reference": CRIMES_REFERENCE,
    "cluster_reference": CLUSTER_REFERENCE,
    "all_matches": ALL_MATCHES,
}
