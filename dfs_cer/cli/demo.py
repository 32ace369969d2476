"""``make demo``: the main job on the embedded default.

Until the storage nodes and matchers land, the demo parses and explains the paper's query Q1
(Listing 1) and two variants against a CRIMES-shaped schema, showing what dual filtering may
prune for each.
"""

from __future__ import annotations

import pyarrow as pa

from dfs_cer.cli.output import Output
from dfs_cer.config import Config
from dfs_cer.query import analyze, parse
from dfs_cer.query.explain import explain_dict, explain_lines

CRIMES_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("primary_type", pa.string()),
    ("district", pa.int32()),
    ("beat", pa.int32()),
    ("latitude", pa.float64()),
    ("longitude", pa.float64()),
    ("date", pa.timestamp("s")),
])

#: the paper's Listing 1 (Q1)
Q1 = """SELECT * FROM crimes MATCH_RECOGNIZE (
  ORDER BY date
  ALL ROWS PER MATCH
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN (R {- N* -} B {- N* -} M) WITHIN '30' MINUTE
  DEFINE
    R AS R.primary_type = 'ROBBERY',
    B AS B.primary_type = 'BATTERY',
    M AS M.primary_type = 'MOTOR VEHICLE THEFT' AND M.district = B.district
)"""

DEMO_QUERIES = {
    "Q1 (paper Listing 1)": Q1,
    "Q1, strict contiguity with PREV": """SELECT * FROM crimes MATCH_RECOGNIZE (
  ORDER BY date
  MEASURES R.id AS robbery, LAST(M.id) AS theft
  ONE ROW PER MATCH
  PATTERN (R B M+) WITHIN INTERVAL '1' HOUR
  DEFINE
    R AS R.primary_type = 'ROBBERY',
    B AS B.primary_type = 'BATTERY' AND B.district = R.district,
    M AS M.primary_type = 'MOTOR VEHICLE THEFT' AND M.beat > PREV(M.beat)
)""",
    "Q1, skip-till-any-match (ALL MATCHES)": """SELECT * FROM crimes MATCH_RECOGNIZE (
  ORDER BY date
  MEASURES R.id AS robbery, B.id AS battery, M.id AS theft
  ALL MATCHES
  PATTERN (R B M) WITHIN '30' MINUTE
  DEFINE
    R AS R.primary_type = 'ROBBERY' AND R.district BETWEEN 1 AND 10,
    B AS B.primary_type = 'BATTERY',
    M AS M.primary_type = 'MOTOR VEHICLE THEFT' AND M.district = B.district
       AND M.latitude <= B.latitude + 0.1
)""",
}


def run_demo(output: Output, config: Config) -> None:
    for title, sql in DEMO_QUERIES.items():
        output.message(f"=== {title} ===")
        output.message(sql)
        analysis = analyze(parse(sql), CRIMES_SCHEMA, config.query)
        output.explain(explain_dict(analysis), explain_lines(analysis))
        output.message("")
