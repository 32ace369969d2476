"""Differential fuzzer: every pull strategy (through real storage node processes) against the
local engine over the same events.

A seeded generator draws *worlds* (an event table with random column types, NULLs, big
integers, NaN and -0.0, names in random case; a layout: partitioning, number of storage
nodes, possibly empty ones; optionally late files appended after the first queries) and, per
world, *queries* (pattern shapes: skips, repeated variables, alternation, groups, PERMUTE,
exclusion, ``{n}``, ``+?`` on any-row variables, contiguous patterns, ALL MATCHES with
Kleene+, negation and alternation; conditions with literals, cross-variable equalities of mixed
numeric types, PREV; PREV/NEXT past a lowered halo limit, FIRST/LAST(x, n) and MATCH_NUMBER() in
DEFINE; PARTITION BY, every AFTER MATCH SKIP, ONE/ALL ROWS PER MATCH; conformance
forms: FILTER reading a variable, NULL in DEFINE, MATCH_NUMBER() in a DEFINE aggregate, a column
alias list). Every query
runs through every strategy and cost model drawn, several queries also run together
(``pull_many``), and with late files the saved-run changelog path (``--since-run``) is compared
too. A share of the worlds has an event key with copies (same time and ``id``: other values,
some in the other PARTITION BY group), matched with dedup on or off, some queries over an input
filter that keeps one copy and not the other; every strategy's match ids are compared with the
local engine's. A case passes when the strategy returns exactly the local engine's rows, or both
refuse the query with a DfsCerError. Anything else (a wrong row, a crash, a refusal where the
local engine answers) is a finding, printed with everything needed to reproduce it.

Run by ``tests/differential/test_differential.py`` (quick profile) and ``bench/fuzz.py`` (long).
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
import math
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dfs_cer import match_recognize
from dfs_cer.errors import DfsCerError
from dfs_cer.events.identity import ID_COLUMNS
from dfs_cer.io.shard import shard
from dfs_cer.query.parser import parse_statement
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.strategies.multi import pull_many
from dfs_cer.strategies.statements import pull_statement
from storage_node.launcher import LocalCluster

NUMERIC_TYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "decimal_small",
    "decimal_wide",
    "bool",
    "time_ms",
    "time_us",
    "date",
]
TIME_TYPES = [
    "int64",
    "timestamp_ms",
    "timestamp_us_utc",
    "timestamp_s",
    "timestamp_ns_tz",
    "date32",
]
STRING_TYPES = ["string", "large_string", "dictionary"]
LAYOUTS = ["random", "time", "type"]
COST_MODELS = ["adaptive", "always_on", "naive"]
#: features counted in their own dimension of the report ("strategies once refused")
FAR = "far:"


@dataclass
class World:
    seed: int
    table: pa.Table
    names: dict[str, str]  # logical name (ts, type, v, w, g) -> the column's name in the data
    time_type: str
    value_types: tuple[str, str]
    string_type: str
    partitioning: str
    nodes: int
    late: pa.Table | None  # rows appended as late files after the first queries
    empty_nodes: int = 0  # storage nodes without a row (known once sharded)
    #: the nodes' work bound per query: "default" or "tight" (256 bytes of storage.query_work_bytes:
    #: node-side work past it stops, and push-pull's filter or node-side matching fall back)
    budget: str = "default"
    #: the storage nodes' halo limit (storage.halo_limit): lowered, small worlds reach past it
    halo_limit: int = 10_000
    #: event copies: "none", else "dedup on" / "dedup off" (an ``id`` event key column)
    copies: str = "none"
    copies_across: int = 0  # copies in the other PARTITION BY group
    #: sharded without the event key (round robin: copies of an event on several nodes; the
    #: queries name the key)
    copies_split: bool = False

    @property
    def event_key(self) -> tuple[str, ...]:
        """The shard sets' event key (``dfs-cer shard --event-key``)."""
        return () if self.copies == "none" or self.copies_split else ("id",)

    def options(self) -> dict[str, Any]:
        """The event key and dedup, for the local engine and the strategies alike."""
        return (
            {}
            if self.copies == "none"
            else {"event_key": ["id"], "dedup": self.copies == "dedup on"}
        )

    def describe(self) -> str:
        return (
            f"world seed={self.seed} rows={self.table.num_rows} time={self.time_type} "
            f"v,w={self.value_types} type={self.string_type} "
            f"layout={self.partitioning}x{self.nodes} "
            f"late={0 if self.late is None else self.late.num_rows} budget={self.budget} "
            f"names={self.names} halo_limit={self.halo_limit} copies={self.copies} "
            f"({self.copies_across} across partitions, shards keyed: "
            f"{not self.copies_split})"
        )


@dataclass
class Report:
    cases: int = 0
    agreed_refusals: int = 0
    dimensions: Counter[tuple[str, str]] = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, dimension: str, value: object) -> None:
        self.dimensions[(dimension, str(value))] += 1

    def summary(self) -> str:
        lines = [
            f"{self.cases} comparisons ({self.agreed_refusals} agreed refusals), "
            f"{len(self.findings)} findings, {self.seconds:.0f} s"
        ]
        by_dim: dict[str, list[str]] = {}
        for (dim, value), n in sorted(self.dimensions.items()):
            by_dim.setdefault(dim, []).append(f"{value} {n}")
        lines += [f"  {dim}: {', '.join(values)}" for dim, values in by_dim.items()]
        return "\n".join(lines)


# ------------------------------------------------------------------ data


def _values(rng: np.random.Generator, kind: str, n: int) -> pa.Array:
    small = rng.integers(0, 5, n)
    nulls = rng.random(n) < 0.1
    if kind == "bool":
        return pa.array(small % 2 == 0, pa.bool_(), mask=nulls)
    if kind in ("time_ms", "time_us", "date"):  # times compared across variables in other units
        seconds = 1_767_225_600 + small.astype(np.int64)
        if kind == "date":
            return pa.array((seconds // 86400 + small).astype(np.int32), pa.date32(), mask=nulls)
        scale = 1000 if kind == "time_ms" else 10**6
        return pa.array(seconds * scale, pa.timestamp(kind[-2:]), mask=nulls)
    if kind.startswith("decimal"):
        precision, scale = (12, 2) if kind == "decimal_small" else (30, 3)
        values = [decimal.Decimal(int(x)) / 2 for x in small]
        if kind == "decimal_wide":  # beyond 15 digits: exact comparisons need more than a double
            values = [v + decimal.Decimal(10**20) if rng.random() < 0.3 else v for v in values]
        return pa.array(
            [
                None if m else v.quantize(decimal.Decimal(1).scaleb(-scale))
                for v, m in zip(values, nulls, strict=True)
            ],
            pa.decimal128(precision, scale),
        )
    if kind.startswith("float"):
        values = small.astype(np.float64) / rng.choice([1, 2], n)
        specials = np.array([np.nan, -0.0, 0.0, np.inf, float(2**53)])
        pick = rng.random(n) < 0.15
        values[pick] = rng.choice(specials, int(pick.sum()))
        return pa.array(values, pa.float32() if kind == "float32" else pa.float64(), mask=nulls)
    dtype = getattr(pa, kind)()
    ints = [int(x) for x in small]
    big = {
        "int64": [2**53 + 1, 2**53, -(2**63), 2**63 - 1],
        "uint64": [2**63, 2**64 - 1, 2**53 + 1],
    }.get(kind)
    if big is not None:
        for i in np.nonzero(rng.random(n) < 0.15)[0]:
            ints[int(i)] = big[int(rng.integers(len(big)))]
    return pa.array(ints, dtype, mask=nulls)


def _time(rng: np.random.Generator, kind: str, n: int) -> pa.Array:
    ticks = np.cumsum(rng.choice([0, 1, 1, 2, 3, 5], n)).astype(np.int64)
    if kind == "int64":
        return pa.array(ticks)
    if kind == "date32":
        return pa.array(ticks.astype(np.int32) + 19000, pa.date32())
    unit, tz = {
        "timestamp_ms": ("ms", None),
        "timestamp_us_utc": ("us", "UTC"),
        "timestamp_s": ("s", None),
        "timestamp_ns_tz": ("ns", "Europe/Paris"),
    }[kind]
    scale = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit]
    return pa.array(ticks * scale + 1_767_225_600 * scale, pa.timestamp(unit, tz))


def _case(rng: np.random.Generator, name: str) -> str:
    return str(rng.choice([name, name.upper(), name.capitalize()]))


def draw_world(seed: int) -> World:
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 2, 5, 12, 40, 150, 300], p=[0.03, 0.07, 0.1, 0.1, 0.25, 0.25, 0.2]))
    time_type = str(rng.choice(TIME_TYPES))
    value_types = (str(rng.choice(NUMERIC_TYPES)), str(rng.choice(NUMERIC_TYPES)))
    string_type = str(rng.choice(STRING_TYPES))
    names = {k: _case(rng, k) for k in ("ts", "type", "v", "w", "g")}
    types = rng.choice(["A", "B", "C", "D", "N"], n, p=[0.2, 0.2, 0.15, 0.1, 0.35])
    type_col = pa.array(
        types.tolist(), pa.large_string() if string_type == "large_string" else pa.string()
    )
    if string_type == "dictionary":
        type_col = type_col.dictionary_encode()
    table = pa.table(
        {
            names["ts"]: _time(rng, time_type, n),
            names["type"]: type_col,
            names["v"]: _values(rng, value_types[0], n),
            names["w"]: _values(rng, value_types[1], n),
            names["g"]: pa.array(rng.choice(["x", "y"], n).tolist(), pa.string()),
        }
    )
    order = rng.permutation(n)  # files need not be sorted
    table = table.take(pa.array(order)) if n else table
    late = None
    if n >= 10 and rng.random() < 0.3:
        cut = rng.random(n) < 0.25
        late = table.filter(pa.array(cut))
        table = table.filter(pa.array(~cut))
    partitioning = str(rng.choice(LAYOUTS))
    nodes = int(rng.choice([1, 2, 3, 4, 6], p=[0.2, 0.25, 0.3, 0.15, 0.1]))
    world = World(
        seed, table, names, time_type, value_types, string_type, partitioning, nodes, late
    )
    _add_copies(world)
    return world


def _add_copies(world: World) -> None:
    """For a share of the worlds (own random stream: the others stay as they were), an ``id``
    event key and copies of 30 % of the events: same time and id, ``v`` shuffled among them
    and some of another type (a condition or an input filter may keep one copy and not the
    other; sharding by type puts such copies on two nodes), half of them moved
    to the other PARTITION BY group (there they are events of their own)."""
    rng = np.random.default_rng(world.seed + 7_000_003)
    n = world.table.num_rows
    if n < 5 or rng.random() >= 0.35:
        return
    nm = world.names
    table = world.table.append_column("id", pa.array(np.arange(n, dtype=np.int64)))
    pick = np.nonzero(rng.random(n) < 0.3)[0]
    copies = table.take(pa.array(pick))
    v = copies.schema.get_field_index(nm["v"])
    copies = copies.set_column(
        v, nm["v"], copies.column(v).take(pa.array(rng.permutation(pick.size)))
    )
    retyped = (
        rng.random(pick.size) < 0.3
    )  # a copy delivered with another type (on another node by type)
    t = copies.schema.get_field_index(nm["type"])
    types = np.asarray(copies.column(t).to_pylist(), object)
    types[retyped] = rng.choice(["A", "B", "C", "N"], int(retyped.sum()))
    typed = pa.array(
        types.tolist(),
        copies.schema.field(t).type.value_type
        if pa.types.is_dictionary(copies.schema.field(t).type)
        else copies.schema.field(t).type,
    )
    copies = copies.set_column(
        t,
        nm["type"],
        typed.dictionary_encode() if pa.types.is_dictionary(copies.schema.field(t).type) else typed,
    )
    across = rng.random(pick.size) < 0.5
    g = np.asarray(copies.column(nm["g"]).to_pylist(), object)
    g[across] = np.where(g[across] == "x", "y", "x")
    copies = copies.set_column(
        copies.schema.get_field_index(nm["g"]), nm["g"], pa.array(g.tolist(), pa.string())
    )
    both = pa.concat_tables([table, copies])
    world.table = both.take(pa.array(rng.permutation(both.num_rows)))
    if world.late is not None:
        late_ids = np.arange(n, n + world.late.num_rows, dtype=np.int64)
        world.late = world.late.append_column("id", pa.array(late_ids))
    world.copies = "dedup on" if rng.random() < 0.6 else "dedup off"
    world.copies_across = int(across.sum())
    world.copies_split = bool(rng.random() < 0.35)


def sorted_ids(table: pa.Table) -> list[int | None]:
    """A relation's match ids in order (an unmatched row, WITH UNMATCHED ROWS, has none: first)."""
    ids = table.column(ID_COLUMNS[0]).to_pylist()
    return sorted(ids, key=lambda x: (x is not None, x or 0))


def over_copies(world: World, d: Drawn, rng: np.random.Generator) -> Drawn:
    """A query of a world with copies, often per PARTITION BY group (copies moved to the other
    group are events there), now and then over an input filter on ``v`` (which the copies do
    not share): the local engine filters, then drops copies; so must the nodes."""
    if world.copies == "none":
        return d
    if "partition_by" not in d.features and rng.random() < 0.5:
        d = Drawn(
            d.sql.replace(
                "MATCH_RECOGNIZE (ORDER BY",
                f"MATCH_RECOGNIZE (PARTITION BY {world.names['g']} ORDER BY",
                1,
            ),
            d.shape,
            [*d.features, "partition_by"],
        )
    if rng.random() >= 0.3:
        return d
    kind = world.value_types[0]
    v = world.names["v"]
    condition = f"{v} > {_literal(kind, rng)}" if _family(kind) == "number" else f"{v} IS NOT NULL"
    sql = d.sql.replace(
        "SELECT * FROM events MATCH_RECOGNIZE",
        f"SELECT * FROM (SELECT * FROM events WHERE {condition}) MATCH_RECOGNIZE",
        1,
    )
    return Drawn(sql, d.shape, [*d.features, "input_filter_over_copies"])


# ------------------------------------------------------------------ queries


@dataclass
class Drawn:
    sql: str
    shape: str
    features: list[str]
    #: a form the standard allows that dfs-cer once refused or crashed on (FORMS)
    form: str = "none"
    #: the query without its form: where the local engine answers it, it must answer the form too
    base: str = ""


def _family(kind: str) -> str:
    return (
        "bool" if kind == "bool" else "time" if kind in ("time_ms", "time_us", "date") else "number"
    )


def _literal(kind: str, rng: np.random.Generator) -> str:
    if kind == "bool":
        return str(rng.choice(["TRUE", "FALSE"]))
    if kind.startswith("float"):
        return str(rng.choice(["1", "1.5", "0", "-0.0", "2", "0.1", "2.5e0"]))
    if kind.startswith("decimal"):
        return str(rng.choice(["1", "1.5", "2", "0.1", "1.50", "100000000000000000000.5"]))
    return str(rng.choice(["0", "1", "2", "3", str(2**53), "1.5", "9007199254740993.0"]))


#: conformance forms, one at most per query: FILTER reading a variable, a NULL truth value in
#: DEFINE, MATCH_NUMBER() inside a DEFINE aggregate, a column alias list on the clause
#: and WITH UNMATCHED ROWS (refused with an exclusion: every strategy must refuse it too)
FORMS = ["none", "filter", "null_define", "match_number_aggregate", "alias_list", "unmatched_rows"]

SHAPES = {
    # (pattern template over A B C D and any-row N, ALL MATCHES?)
    "skip": ("A N*? B", False),
    "skip3": ("A N*? B N*? C", False),
    "exclusion": ("A {- N* -} B {- N* -} C", False),
    "greedy_skip": ("A N* B", False),
    "repeated": ("A N*? B N*? A", False),
    "alternation": ("A N*? (B | C)", False),
    "alternation_same": ("A {- N* -} (B | B)", False),
    "alternation_mid": ("A N*? (B | C) N*? D", False),
    "group": ("A (N*? B) N*? C", False),
    "contiguous": ("A B+ C", False),
    "reluctant": ("A B*? C", False),
    "exact_n": ("A B{2} C", False),
    "one_n": ("A N*? B{1} N*? C", False),
    "plus_any_row": ("A N+? B", False),
    "permute": ("PERMUTE(A, B) C", False),
    "nested_group": ("(A B)+ C", False),
    "cer_seq": ("A B C", True),
    "cer_kleene": ("A B+ C", True),
    "cer_any_row": ("A N+? B", True),
    "cer_any_single": ("A N B", True),
    "cer_skip": ("A N* B C", True),
    "cer_alternation": ("A (B | C) D", True),
    "cer_permute": ("A PERMUTE(B, C)", True),
    "cer_negation": ("A ~D B", True),
    "cer_one_n": ("A B{1} C", True),
    "cer_group": ("A (B) C+", True),
    "cer_alt_first": ("(A | B) C", True),
}


def _far(
    world: World, far: np.random.Generator, var: str, first: str, v: str, all_matches: bool
) -> tuple[str, str]:
    """A DEFINE conjunct the strategies once refused (drawn from its own generator, so the other
    draws of a seed stay as they were): PREV/NEXT beyond the halo limit, FIRST/LAST with an
    offset, MATCH_NUMBER(); ("", "") when none is drawn."""
    if all_matches or world.value_types[0] == "bool" or far.random() >= 0.3:
        return "", ""
    kind = str(
        far.choice(
            ["prev", "next", "last_offset", "first_offset", "match_number"],
            p=[0.3, 0.3, 0.15, 0.1, 0.15],
        )
    )
    k = int(far.choice([1, 2, 3, 5]))
    if kind in ("prev", "next"):
        nav, op = ("PREV", ">=") if kind == "prev" else ("NEXT", "<=")
        return (
            f"({nav}({var}.{v}, {k}) IS NULL OR {var}.{v} {op} {nav}({var}.{v}, {k}))",
            f"{kind} {'beyond' if k > world.halo_limit else 'within'} the halo limit",
        )
    if kind == "match_number":
        return f"MATCH_NUMBER() <= {k}", "MATCH_NUMBER() in DEFINE"
    nav, of = ("LAST", var) if kind == "last_offset" else ("FIRST", first)
    return f"{nav}({of}.{v}, {k}) IS NULL", f"{nav}(x, n) in DEFINE"


def draw_query(
    world: World, rng: np.random.Generator, far: np.random.Generator | None = None
) -> Drawn:
    shape = str(rng.choice(list(SHAPES)))
    pattern, all_matches = SHAPES[shape]
    variables = [v for v in "ABCD" if v in pattern.replace("PERMUTE", "")]
    nm = world.names
    features = [shape]

    def col(logical: str, var: str | None = None) -> str:
        name = _case(rng, nm[logical])  # the query may spell the column in any case
        return f"{var}.{name}" if var else name

    defines = []
    for i, var in enumerate(variables):
        pick = rng.random()
        if pick < 0.7:
            parts = [f"{col('type', var)} = '{var}'"]
        elif pick < 0.8:
            parts = [f"{col('type', var)} IN ('{var}', 'N')"]
        elif pick < 0.9:
            parts = [f"lower({col('type', var)}) = '{var.lower()}'"]
            features.append("string_function")
        else:
            parts = [f"{col('type', var)} LIKE '{var}%'"]
            features.append("like")
        if rng.random() < 0.35:
            logical = str(rng.choice(["v", "w"]))
            kind = world.value_types[0 if logical == "v" else 1]
            op = str(
                rng.choice(
                    ["=", "<>", "<", ">=", "IS NULL", "IS NOT NULL"]
                    if _family(kind) == "number"
                    else ["IS NULL", "IS NOT NULL"]
                    if _family(kind) == "time"
                    else ["=", "IS NULL"]
                )
            )
            parts.append(
                f"{col(logical, var)} {op}"
                if "NULL" in op
                else f"{col(logical, var)} {op} {_literal(kind, rng)}"
            )
            features.append("literal")
        if i and rng.random() < 0.4:
            other = variables[int(rng.integers(0, i))]
            a, b = str(rng.choice(["v", "w"])), str(rng.choice(["v", "w"]))
            ka, kb = (world.value_types[0 if x == "v" else 1] for x in (a, b))
            if _family(ka) != _family(
                kb
            ):  # mostly comparable pairs (a few refusals are drawn elsewhere)
                b = a
            parts.append(f"{col(a, var)} = {col(b, other)}")
            features.append("equality")
        if (
            "|" in pattern and var in ("B", "C") and rng.random() < 0.3
        ):  # an alternative reading the other
            other = "C" if var == "B" else "B"
            parts.append(f"({col('v', var)} = {col('v', other)} OR {col('v', other)} IS NULL)")
            features.append("alternative_reads_alternative")
        if (
            i and rng.random() < 0.15 and world.value_types[0] != "bool"
        ):  # numbers and times both order
            other = variables[int(rng.integers(0, i))]
            parts.append(f"{col('v', var)} > {col('v', other)}")
            features.append("cross_inequality")
        if not all_matches and rng.random() < 0.1 and world.value_types[0] != "bool":
            parts.append(f"{col('v', var)} >= PREV({col('v', var)})")
            features.append("prev")
        if far is not None:
            extra, what = _far(world, far, var, variables[0], _case(far, nm["v"]), all_matches)
            if extra:
                parts.append(extra)
                features.append(f"{FAR}{what}")
        defines.append(f"{var} AS {' AND '.join(parts)}")
    window = int(rng.choice([1, 3, 8]))
    if world.time_type == "int64":
        within = f"WITHIN {window}"
    elif world.time_type == "date32":
        within = f"WITHIN INTERVAL '{window}' DAY"
    else:
        within = f"WITHIN INTERVAL '{window}' SECOND"
    ts = col("ts")
    measures = [f"FIRST({variables[0]}.{ts}) AS first_ts", f"LAST({variables[-1]}.{ts}) AS last_ts"]
    if rng.random() < 0.5:
        measures.append("MATCH_NUMBER() AS mn")
    if rng.random() < 0.3:
        measures.append("CLASSIFIER() AS cls")
    subset = ""
    if len(variables) >= 2 and rng.random() < 0.2:
        subset = f"SUBSET U = ({variables[0]}, {variables[1]}) "
        measures.append(f"LAST(U.{ts}) AS last_u, count(U.*) AS n_u")
        features.append("subset")
    if not all_matches and rng.random() < 0.3:
        measures.append(f"count(*) AS rows_in_match, LAST({variables[0]}.{col('v')}) AS last_v")
    partition = f"PARTITION BY {col('g')} " if rng.random() < 0.3 else ""
    if partition:
        features.append("partition_by")
    if all_matches:
        head = "ALL MATCHES"
    else:
        rows = "ALL ROWS PER MATCH" if rng.random() < 0.15 else "ONE ROW PER MATCH"
        skip = str(
            rng.choice(
                [
                    "PAST LAST ROW",
                    "TO NEXT ROW",
                    f"TO LAST {variables[-1]}",
                    f"TO FIRST {variables[-1]}",
                ]
            )
        )
        head = f"{rows} AFTER MATCH SKIP {skip}"
        features.append(rows.split()[0].lower() + "_rows")
    if not all_matches and rows == "ALL ROWS PER MATCH":
        measures = [m for m in measures if "count(*)" not in m]
    form, alias = str(rng.choice(FORMS, p=[0.55, 0.1, 0.1, 0.1, 0.1, 0.05])), ""
    base = (
        f"SELECT * FROM events MATCH_RECOGNIZE ({partition}ORDER BY {ts} MEASURES "
        f"{', '.join(measures)} {head} PATTERN ({pattern}) {within} {subset}DEFINE "
        f"{', '.join(defines)})"
    )
    if (
        form == "filter"
    ):  # the arguments choose the rows; FILTER reads a variable (or the row itself)
        last = variables[-1]
        measures.append(
            str(
                rng.choice(
                    [
                        f"count(*) FILTER (WHERE {col('v', last)} IS NOT NULL) AS n_f",
                        f"count({last}.*) FILTER (WHERE {col('w')} IS NULL) AS n_f",
                    ]
                )
            )
        )
    elif form == "null_define":  # (c OR NULL) is true exactly where c is
        defines[-1] = f"{variables[-1]} AS ({defines[-1].split(' AS ', 1)[1]}) OR NULL"
    elif form == "match_number_aggregate":
        if all_matches:  # MATCH_NUMBER() in DEFINE is SQL semantics only
            form = "none"
        else:
            defines[-1] += " AND max(MATCH_NUMBER()) = MATCH_NUMBER()"
    elif form == "alias_list":  # renames the leading columns (DuckDB's rule; values unchanged)
        alias = " AS mr(c1, c2)"
    elif form == "unmatched_rows":
        if all_matches:
            form = "none"
        else:
            head = head.replace(rows, "ALL ROWS PER MATCH WITH UNMATCHED ROWS")
            measures = [m for m in measures if "count(*)" not in m]
    sql = (
        f"SELECT * FROM events MATCH_RECOGNIZE ({partition}ORDER BY {ts} MEASURES "
        f"{', '.join(measures)} {head} PATTERN ({pattern}) {within} {subset}DEFINE "
        f"{', '.join(defines)}){alias}"
    )
    return Drawn(sql, shape, features, form, base)


# ------------------------------------------------------------------ comparing


def _norm(value: object) -> object:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else (0.0 if value == 0 else value)
    if isinstance(value, decimal.Decimal):
        return value.normalize()
    return value


def rows_of(table: pa.Table) -> list[tuple[object, ...]]:
    hidden = [c for c in table.column_names if c.startswith("__")]
    table = table.drop(hidden) if hidden else table
    return sorted((tuple(_norm(v) for v in r.values()) for r in table.to_pylist()), key=repr)


Outcome = tuple[str, Any]  # ("rows", sorted rows) or ("refused", error class name)


def outcome(fn: Callable[[], pa.Table]) -> Outcome:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "rows", rows_of(fn())
    except DfsCerError as exc:
        return "refused", f"{type(exc).__name__}: {exc}"


def _same(expected: Outcome, got: Outcome) -> bool:
    if expected[0] == "refused":
        return got[0] == "refused"
    return got == expected


class Runner:
    """Runs worlds and their queries, collecting a :class:`Report`."""

    def __init__(
        self,
        report: Report,
        queries_per_world: int = 6,
        strategies: list[str] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.report = report
        self.queries_per_world = queries_per_world
        self.strategies = strategies or list(STRATEGIES)
        self.log = log or (lambda _: None)

    def _finding(self, world: World, what: str, sql: str, expected: Outcome, got: object) -> None:
        self.report.findings.append(
            f"{what}\n  {world.describe()}\n  sql: {sql}\n  expected: "
            f"{str(expected)[:600]}\n  got: {str(got)[:600]}"
        )
        self.log(f"FINDING {what}: {sql}")

    def _compare(
        self, world: World, what: str, sql: str, expected: Outcome, fn: Callable[[], pa.Table]
    ) -> None:
        self.report.cases += 1
        try:
            got: object = outcome(fn)
        except Exception:
            got = "crash: " + traceback.format_exc(limit=-4)
        if isinstance(got, tuple) and _same(expected, got):
            if expected[0] == "refused":
                self.report.agreed_refusals += 1
            return
        self._finding(world, what, sql, expected, got)

    def run_world(self, world: World) -> None:
        rng = np.random.default_rng(world.seed + 1_000_003)
        far = np.random.default_rng(world.seed + 2_000_003)
        world.halo_limit = int(far.choice([10_000, 2, 1], p=[0.3, 0.35, 0.35]))
        drawn = [draw_query(world, rng, far) for _ in range(self.queries_per_world)]
        copies_rng = np.random.default_rng(world.seed + 7_000_004)
        drawn = [over_copies(world, d, copies_rng) for d in drawn]
        full = world.table if world.late is None else pa.concat_tables([world.table, world.late])
        with tempfile.TemporaryDirectory(prefix="dfs-cer-fuzz-") as tmp:
            root = Path(tmp)
            pq.write_table(world.table, root / "events.parquet")
            manifests = shard(
                str(root / "events.parquet"),
                world.nodes,
                str(root / "nodes"),
                partitioning=world.partitioning,
                time_column=world.names["ts"],
                type_column=world.names["type"],
                batch_rows=64,
                event_key=world.event_key,
            )
            world.empty_nodes = sum(1 for m in manifests if m.rows == 0)
            self._csv_input(world, root)
            self._duplicate_input(world)
            # its own generator: the other draws of the world stay what they were
            world.budget = (
                "tight" if np.random.default_rng(world.seed + 77).random() < 0.4 else "default"
            )
            # the nodes' halo limit, lowered: the compute node learns it at open
            env = {"DFS_CER__STORAGE__HALO_LIMIT": str(world.halo_limit)}
            if world.budget == "tight":
                env["DFS_CER__STORAGE__QUERY_WORK_BYTES"] = "256"
            cluster = LocalCluster(
                [str(root / "nodes" / f"node-{i:02d}") for i in range(world.nodes)], env=env
            ).start()
            try:
                saved = (
                    self._before_late(world, drawn, cluster, root) if world.late is not None else {}
                )
                if world.late is not None:
                    pq.write_table(world.late, root / "late.parquet")
                    shard(
                        str(root / "late.parquet"),
                        world.nodes,
                        str(root / "nodes"),
                        partitioning=world.partitioning,
                        time_column=world.names["ts"],
                        type_column=world.names["type"],
                        batch_rows=64,
                        append=True,
                        event_key=world.event_key,
                    )
                self._queries(world, drawn, full, cluster, rng, saved, root)
                self._node_work(world, cluster)
            finally:
                cluster.stop()
                cluster.tmp.cleanup()

    def _csv_input(self, world: World, root: Path) -> None:
        """Some worlds' events also as CSV, read in tiny blocks (a late value must still type its
        column): empty fields (NULL; a quoted empty text is ''), NaN and -0, a non-integral value
        only in the last row, sometimes a stray 'abc' (a clear error naming row, column and value;
        accepted with the column declared text). The shard sets must equal the parquet world's."""
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv

        from dfs_cer.io import csvfiles
        from dfs_cer.io.csvtypes import CsvError
        from dfs_cer.io.files import filesystem_for
        from dfs_cer.io.shard import read_manifest

        rng = np.random.default_rng(world.seed + 2_000_003)
        n = world.table.num_rows
        if n < 5 or rng.random() >= 0.3:
            self.report.count("csv input", "no")
            return
        names, nulls = world.names, rng.random(n) < 0.15
        w = rng.integers(-3, 4, n).astype(np.float64)
        w[rng.random(n) < 0.1] = rng.choice([np.nan, -0.0])
        w[-1] = 0.5  # the only non-integral value: the column is float64 from the last block
        w_nulls = nulls[::-1].copy()
        w_nulls[-1] = False
        g = np.array(rng.choice(["x", "", "y"], n), object)
        typed = pa.table(
            {
                names["ts"]: pa.array(np.cumsum(rng.integers(0, 3, n))),
                names["type"]: world.table.column(names["type"]).cast(pa.string()),
                names["v"]: pa.array(rng.integers(-5, 5, n), mask=nulls),
                names["w"]: pa.array(w, mask=w_nulls),
                names["g"]: pa.array(g, mask=rng.random(n) < 0.1),
            }
        )
        pq.write_table(typed, root / "typed.parquet")
        stray = int(rng.integers(n)) if rng.random() < 0.5 else None
        # text that pyarrow's cast alone reads as a number: integers past int64 (a rounded float
        # once), hex ('0x1f', int once): a text column in the parquet world, so one in the CSV's
        spelled = str(rng.choice(["none", "past int64", "hex"]))
        self.report.count("csv number-like text", spelled)
        if spelled != "none":
            digits = rng.integers(0, 10**6, n)
            like = [
                f"12345678901234{d:06d}" if spelled == "past int64" else f"0x{d:x}" for d in digits
            ]
            typed = typed.append_column("csv_like", pa.array(like, pa.string()))
            pq.write_table(typed, root / "typed.parquet")
        text = typed
        if stray is not None:
            v = pc.cast(typed.column(names["v"]), pa.string()).to_pylist()
            v[stray] = "abc"
            text = typed.set_column(2, names["v"], pa.array(v, pa.string()))
        pacsv.write_csv(text, root / "typed.csv")
        options: dict[str, Any] = {
            "partitioning": world.partitioning,
            "time_column": names["ts"],
            "type_column": names["type"],
            "batch_rows": 64,
        }

        def stored(where: str) -> Outcome:
            schema = read_manifest(filesystem_for(str(root / where / "node-00")))["schema"]
            files = sorted((root / where).glob("node-*/*.parquet"))
            return "rows", (schema, rows_of(pa.concat_tables(pq.read_table(f) for f in files)))

        self.report.cases += 1
        block, csvfiles.BLOCK = csvfiles.BLOCK, 256
        try:
            if stray is not None:
                self.report.count("csv input", "stray value refused")
                try:
                    shard(str(root / "typed.csv"), world.nodes, str(root / "csv-bad"), **options)
                    self._finding(
                        world,
                        "csv input: a stray 'abc' was accepted",
                        "shard typed.csv",
                        ("refused", ""),
                        "shard sets written",
                    )
                except CsvError as exc:
                    if f"row {stray + 1:,}, column {names['v']}: 'abc'" not in str(exc):
                        self._finding(
                            world,
                            "csv input: the error does not name row, column and value",
                            "shard typed.csv",
                            ("refused", f"row {stray + 1}"),
                            str(exc),
                        )
                shard(
                    str(root / "typed.csv"),
                    world.nodes,
                    str(root / "csv"),
                    column_types={names["v"]: pa.string()},
                    **options,
                )
                typed = typed.set_column(2, names["v"], text.column(2))
                pq.write_table(typed, root / "typed.parquet")
            else:
                self.report.count("csv input", "same as parquet")
                shard(str(root / "typed.csv"), world.nodes, str(root / "csv"), **options)
            shard(str(root / "typed.parquet"), world.nodes, str(root / "parquet"), **options)
            expected, got = stored("parquet"), stored("csv")
            if expected != got:
                self._finding(
                    world,
                    "csv input differs from the parquet world",
                    "shard typed.csv",
                    expected,
                    got,
                )
        except Exception:
            self._finding(
                world,
                "csv input crash",
                "shard typed.csv",
                ("rows", "?"),
                traceback.format_exc(limit=-4),
            )
        finally:
            csvfiles.BLOCK = block

    def _node_work(self, world: World, cluster: LocalCluster) -> None:
        """Every node gave back what its queries' work charged (calls that stopped included)."""
        from dfs_cer.transport.client import StorageClient

        for endpoint in cluster.endpoints:
            client = StorageClient(endpoint, cluster.token, timeout=30)
            try:
                stats = client.action("stats")[0]
            finally:
                client.close()
            self.report.count(
                "node work", "stopped or fell back" if stats.get("stopped") else "within bounds"
            )
            if stats.get("work_bytes"):
                self.report.cases += 1
                self._finding(
                    world, "node work not given back", "", ("rows", "work_bytes 0"), stats
                )

    def _duplicate_input(self, world: World) -> None:
        """A clause input joining a table that shares the type column: refused naming it whatever
        the input's form (DuckDB renames a relation's second column of one name, ``type_1``, so a
        CTE or a wrapper around the input once hid it)."""
        rng = np.random.default_rng(world.seed + 3_000_017)
        ts, kind = (f'"{world.names[k]}"' for k in ("ts", "type"))
        form, keyed = (
            str(rng.choice(["subquery", "cte", "subquery over a cte"])),
            bool(rng.random() < 0.5),
        )
        self.report.count("duplicate input form", f"{form}{', computed key' if keyed else ''}")
        join = (
            f"SELECT * FROM t JOIN {'v AS u' if form == 'subquery over a cte' else 'u'} ON "
            f"t.{kind} = u.{kind}"
        )
        clause = (
            f"MATCH_RECOGNIZE ({f'PARTITION BY {ts} IS NULL ' if keyed else ''}ORDER BY {ts} "
            f"MEASURES A.{ts} AS at ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
        )
        sql = {
            "subquery": f"SELECT * FROM ({join}) {clause}",
            "cte": f"WITH j AS ({join}) SELECT * FROM j {clause}",
            "subquery over a cte": f"WITH v AS (SELECT * FROM u) SELECT * FROM ({join}) {clause}",
        }[form]
        other = world.table.select([world.names["type"]])
        self.report.cases += 1
        try:
            got: object = outcome(
                lambda: match_recognize(None, sql, tables={"t": world.table, "u": other})
            )
        except Exception:
            got = "crash: " + traceback.format_exc(limit=-4)
        if not isinstance(got, tuple) or f"two columns named {world.names['type']}" not in str(
            got[1]
        ):
            self._finding(
                world,
                "an input with a column twice was not refused naming it",
                sql,
                ("refused", f"two columns named {world.names['type']}"),
                got,
            )

    def _dimensions(self, world: World, d: Drawn) -> None:
        r = self.report
        r.count("time type", world.time_type)
        for k in world.value_types:
            r.count("value type", k)
        r.count("string type", world.string_type)
        r.count("layout", f"{world.partitioning}x{world.nodes}")
        r.count("empty storage nodes", world.empty_nodes)
        r.count(
            "column case", "as data" if all(n.islower() for n in world.names.values()) else "mixed"
        )
        r.count("late files", "yes" if world.late is not None else "no")
        r.count("node work bound", world.budget)
        r.count("halo limit", world.halo_limit)
        r.count("event copies", world.copies)
        if world.copies_across:
            r.count("event copies", "across partitions")
        if world.copies_split:
            r.count("event copies", "key not in the shards")
        for f in d.features:
            if f.startswith(FAR):
                r.count("once refused", f.removeprefix(FAR))
            else:
                r.count("query feature" if f != d.shape else "pattern shape", f)
        r.count("conformance form", d.form)

    def _queries(
        self,
        world: World,
        drawn: list[Drawn],
        full: pa.Table,
        cluster: LocalCluster,
        rng: np.random.Generator,
        saved: dict[int, Any],
        root: Path,
    ) -> None:
        expected = {}
        opts = world.options()
        for i, d in enumerate(drawn):
            self._dimensions(world, d)
            try:
                expected[i] = outcome(functools.partial(match_recognize, full, d.sql, **opts))
            except Exception:
                self.report.cases += 1
                self._finding(
                    world,
                    "local engine crash",
                    d.sql,
                    ("rows", "?"),
                    traceback.format_exc(limit=-4),
                )
                continue
            if (
                d.form not in ("none", "unmatched_rows")
                and expected[i][0] == "refused"
                and outcome(functools.partial(match_recognize, full, d.base, **opts))[0] == "rows"
            ):
                self.report.cases += 1
                self._finding(
                    world,
                    f"the local engine refuses the {d.form} form",
                    d.sql,
                    ("rows", "?"),
                    expected[i],
                )
            filtered = "input_filter_over_copies" in d.features
            got_ids: dict[str, list[int | None]] = {}
            for name in self.strategies:
                model = str(rng.choice(COST_MODELS))
                self.report.count("strategy", name)

                def run(
                    name: str = name,
                    model: str = model,
                    sql: str = d.sql,
                    filtered: bool = filtered,
                    ids: dict[str, list[int | None]] = got_ids,
                ) -> pa.Table:
                    if filtered:  # the clause's input filter goes to the nodes
                        return pull_statement(
                            name,
                            parse_statement(sql),
                            cluster.endpoints,
                            cluster.token,
                            cost_model=model,
                            **opts,
                        ).table
                    result = pull(
                        name, sql, cluster.endpoints, cluster.token, cost_model=model, **opts
                    )
                    if result.relation is None:  # (node-side matching gives no match ids)
                        ids[name] = sorted_ids(match_pulled(result, outer=False, match_ids=True))
                    return match_pulled(result)

                self._compare(world, f"{name} (cost model {model})", d.sql, expected[i], run)
            if expected[i][0] == "rows" and got_ids:
                self._match_ids(world, d, full, got_ids)
            if i in saved:
                self._since_run(world, d, expected[i], saved[i], cluster, root)
            if (
                "input_filter_over_copies" not in d.features
            ):  # (the split takes a clause, not a statement)
                self._spark_split(world, d, full, np.random.default_rng((world.seed, i, 71)))
            self._closed_while_matching(world, d, full, np.random.default_rng((world.seed, i, 73)))
        answered = [
            i
            for i in expected
            if expected[i][0] == "rows" and "input_filter_over_copies" not in drawn[i].features
        ]
        if len(answered) >= 2:  # several queries in one scan
            group = [int(x) for x in rng.choice(answered, min(3, len(answered)), replace=False)]
            name = str(rng.choice(["pull_all", "push_down", "dfs", "naive_dfs"]))
            self.report.count("several queries", f"{name} x{len(group)}")
            sqls = [drawn[i].sql for i in group]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = pull_many(
                        name, sqls, cluster.endpoints, cluster.token, **world.options()
                    )
                tables: list[pa.Table] | None = [match_pulled(r) for r in result.results]
            except Exception:
                tables = None
                self.report.cases += 1
                self._finding(
                    world,
                    f"pull_many {name} crash",
                    " ; ".join(sqls),
                    ("rows", "?"),
                    traceback.format_exc(limit=-4),
                )
            for k, i in enumerate(group):
                if tables is not None:
                    self._compare(
                        world,
                        f"pull_many {name} query {k}",
                        drawn[i].sql,
                        expected[i],
                        functools.partial(tables.__getitem__, k),
                    )

    def _match_ids(
        self, world: World, d: Drawn, full: pa.Table, got: dict[str, list[int | None]]
    ) -> None:
        """Every strategy's match ids equal the local engine's (they name the match, not the
        rows a strategy happened to pull)."""
        from dfs_cer.config import QueryConfig
        from dfs_cer.match.cer.engine import run_cer
        from dfs_cer.match.rowpattern.engine import run_row_pattern
        from dfs_cer.query import analyze, parse

        opts = world.options()
        try:
            config = QueryConfig(
                event_key=tuple(opts.get("event_key", ())), dedup=opts.get("dedup", True)
            )
            analysis = analyze(parse(d.sql), full.schema, config)
            engine = run_cer if analysis.query.recognize.all_matches else run_row_pattern
            want = sorted_ids(engine(full, analysis, match_ids=True).table)
        except DfsCerError:
            return
        for name, ids in got.items():
            self.report.cases += 1
            self.report.count("match ids", "compared")
            if ids != want:
                self._finding(
                    world,
                    f"{name}: match ids differ from the local engine's",
                    d.sql,
                    ("ids", want[:8]),
                    ids[:8],
                )

    def _closed_while_matching(
        self, world: World, d: Drawn, full: pa.Table, rng: np.random.Generator
    ) -> None:
        """The row-pattern VM (a node's node-side matching) under a query work closed at a random
        moment: the local engine's rows exactly, or a stop soon after the close."""
        import threading

        from dfs_cer.errors import WorkCancelledError
        from dfs_cer.match.rowpattern.engine import run_row_pattern
        from dfs_cer.query import analyze, parse
        from dfs_cer.work import Work

        try:
            analysis = analyze(parse(d.sql), full.schema)
            if analysis.query.recognize.all_matches:
                return
            plain = run_row_pattern(full, analysis).table
        except Exception:  # subqueries, refusals: the strategies' comparisons cover them
            return
        work = Work("fuzz")
        delay = float(rng.choice([0.001, 0.05, 1.0]))
        timer = threading.Timer(delay, work.cancel, ["its compute node closed it"])
        timer.start()
        began = time.monotonic()
        self.report.cases += 1
        try:
            got = run_row_pattern(full, analysis, work=work).table
            self.report.count("closed while matching", "finished exactly")
            if rows_of(got) != rows_of(
                plain
            ):  # (as every comparison: NaN equals NaN, Table.equals says not)
                self._finding(
                    world,
                    "row-pattern VM under a work",
                    d.sql,
                    ("rows", plain.num_rows),
                    got.num_rows,
                )
        except WorkCancelledError:
            self.report.count("closed while matching", "stopped")
            if time.monotonic() - began > delay + 2.0:
                self._finding(
                    world,
                    "row-pattern VM ran on after its query was closed",
                    d.sql,
                    ("stop", f"{delay + 2.0:.3f}s"),
                    f"{time.monotonic() - began:.3f}s",
                )
        finally:
            timer.cancel()

    def _before_late(
        self, world: World, drawn: list[Drawn], cluster: LocalCluster, root: Path
    ) -> dict[int, Any]:
        """Saved runs of the first queries before the late files arrive (``--save-run``)."""
        from dfs_cer.strategies.incremental import run_and_save

        saved = {}
        for i, d in enumerate(drawn[:2]):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    saved[i] = run_and_save(
                        d.sql,
                        cluster.endpoints,
                        cluster.token,
                        strategy="dfs",
                        runs_dir=root / "runs",
                        **world.options(),
                    ).record.run_id
            except DfsCerError:
                continue
        return saved

    def _since_run(
        self,
        world: World,
        d: Drawn,
        expected: Outcome,
        run_id: str,
        cluster: LocalCluster,
        root: Path,
    ) -> None:
        from dfs_cer.local import run_outer
        from dfs_cer.query import parse
        from dfs_cer.strategies.incremental import run_and_save

        self.report.count("late files", "since_run")

        def again() -> pa.Table:
            result = run_and_save(
                "", cluster.endpoints, cluster.token, runs_dir=root / "runs", since_run=run_id
            )
            return run_outer(parse(d.sql), result.matches)

        self._compare(world, "incremental re-run (--since-run)", d.sql, expected, again)

    def _spark_split(
        self, world: World, d: Drawn, full: pa.Table, rng: np.random.Generator
    ) -> None:
        """The query (or a variant with ``^``/``$``, an optional whole pattern, WITH UNMATCHED ROWS)
        on the Spark split: the executors' chunk planner over a few time chunks at drawn cuts (or
        groups of partitions, or one chunk), matched as :func:`dfs_cer.match.chunked.run_split`
        matches them in one process, against the local engine."""
        variant, sql = "as drawn", d.sql
        if "ALL MATCHES" not in sql and rng.random() < 0.6:
            variant = str(
                rng.choice(["anchor_start", "anchor_end", "anchor_both", "optional", "unmatched"])
            )
            head, rest = sql.split("PATTERN (", 1)
            body, tail = rest.rsplit(") WITHIN", 1)
            body = {
                "anchor_start": f"^ {body}",
                "anchor_end": f"{body} $",
                "anchor_both": f"^ {body} $",
                "optional": f"({body})?",
            }.get(variant, body)
            if variant == "unmatched":
                head = head.replace("ONE ROW PER MATCH", "ALL ROWS PER MATCH").replace(
                    "ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"
                )
                head = ", ".join(m for m in head.split(", ") if "count(*)" not in m)
            sql = f"{head}PATTERN ({body}) WITHIN{tail}"
        self.report.count("spark split query", variant)
        expected = outcome(lambda: match_recognize(full, sql))
        mode: list[str] = []

        def split() -> pa.Table:
            from dfs_cer.config import QueryConfig
            from dfs_cer.events.identity import row_hashes
            from dfs_cer.events.time import time_values
            from dfs_cer.local import run_outer
            from dfs_cer.match.chunked import run_split
            from dfs_cer.plan.chunks import NEG, plan_chunks
            from dfs_cer.query import analyze, parse
            from dfs_cer.spark.distributed import engine_output

            query = parse(sql)
            analysis = analyze(query, full.schema, QueryConfig())
            ts_col = analysis.query.recognize.order_by[0].column
            valid = full.filter(full.column(ts_col).is_valid())
            ts = time_values(valid, ts_col) if valid.num_rows else np.zeros(0, np.int64)
            first, last = (int(ts.min()), int(ts.max())) if ts.size else (0, 0)
            plan = plan_chunks(
                analysis,
                mins=[first],
                maxs=[last],
                rows=[max(1, ts.size)],
                chunks=4,
                nulls=full.num_rows - valid.num_rows,
            )
            mode.append(plan.mode)
            if plan.mode == "time":
                cuts = (
                    np.unique(rng.choice(ts, int(rng.integers(1, 16)))) if ts.size else ts
                )  # edges at rows
                plan = dataclasses.replace(plan, starts=np.array([NEG, *cuts], np.int64))
                relation = run_split(full, analysis, plan)[0]
            else:  # groups of whole partitions (by hash), or one chunk
                parts = analysis.query.recognize.partition_by
                group = (
                    (row_hashes(full, list(parts)) % np.uint64(3)).astype(np.int64)
                    if parts and plan.mode == "partition"
                    else np.zeros(full.num_rows, np.int64)
                )
                relation = pa.concat_tables(
                    [
                        engine_output(full.filter(pa.array(group == k)), analysis, None)
                        for k in range(3)
                    ]
                )
            return run_outer(query, relation)

        self._compare(world, "spark split (time chunks)", sql, expected, split)
        self.report.count(
            "spark split",
            f"{mode[0] if mode else 'refused'}"
            f"{' + anchors' if variant.startswith('anchor') else ''}"
            f"{' + match_number' if 'MATCH_NUMBER' in sql else ''}",
        )


def run(
    seeds: range, queries_per_world: int = 6, log: Callable[[str], None] | None = None
) -> Report:
    """Fuzz the worlds of ``seeds``; never raises for a finding (they are in the report)."""
    report = Report()
    began = time.perf_counter()
    runner = Runner(report, queries_per_world, log=log)
    for seed in seeds:
        world = draw_world(seed)
        try:
            runner.run_world(world)
        except Exception:
            report.cases += 1
            report.findings.append(
                f"world failed\n  {world.describe()}\n  {traceback.format_exc(limit=-4)}"
            )
        if log:
            log(f"seed {seed}: {report.cases} comparisons, {len(report.findings)} findings")
    report.seconds = time.perf_counter() - began
    return report
