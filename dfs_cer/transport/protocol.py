"""The compute node / storage node control protocol, defined once for both sides.

Every message carries :data:`VERSION` in its framing (:mod:`dfs_cer.transport.messages`); a
node and a client of different versions refuse each other's messages with a clear error
instead of misreading them. The query lifecycle (``reserve``, ``release``, ``open``, ``close``)
travels as the frozen request types below, built by the client and parsed, with every field
checked, by the node (``open`` with an :func:`arrival` is admitted or refused at once, as
``reserve`` would: one round trip); columns the node adds to pulled tables are named here
only (the error codes a node attaches to Flight errors are its errors' own:
:mod:`dfs_cer.transport.codes`).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from dfs_cer.errors import ProtocolError

#: bumped whenever a message changes shape
VERSION = 3

# ---------------------------------------------------------------- wire column names
#: ``pull_variable``: the node's row number of each pulled row (push-pull uploads refer to it)
ROW_ID = "__dfs_cer_row_id"
#: ``pull_group``: bit mask of the group's queries that asked for each row
MEMBERS = "__dfs_cer_members"
#: ``pull_times``: index of the requested interval each row falls in
SEGMENT = "__dfs_cer_interval"
#: ``pull_range`` with a halo: TRUE on rows pulled only for PREV/NEXT to read (not matchable)
HALO = "__dfs_cer_halo"
#: ``pull_halo``: the time column of the points table (partition columns, then this)
POINT_TIME = "__t"
#: ``pull_halo``: optional per-point rows before / after (each at most the request's halo)
POINT_BEFORE = "__before"
POINT_AFTER = "__after"

#: seconds a node keeps an opened query's state past the compute node's deadline for it
#: (the lease the client sends with ``open``): a query whose close never arrives holds nothing
#: beyond it
LEASE_GRACE_SECONDS = 10.0

QUERY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def query_id(value: object, action: str) -> str:
    if not (isinstance(value, str) and QUERY_ID.fullmatch(value)):
        raise ProtocolError(
            f"action {action}: query_id must be 1 to 64 letters, digits, '-' or '_', "
            f"got {str(value)[:80]!r}"
        )
    return value


def _seconds(value: object, name: str, action: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ProtocolError(
            f"action {action}: {name} must be a positive number of seconds, got {value!r}"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class Reserve:
    """Ask for room for a query about to open; ``arrival`` (the client's wall clock, seconds)
    orders the waiting queries on every node alike."""

    query_id: str
    arrival: float

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Reserve:
        return cls(
            query_id(header.get("query_id"), "reserve"),
            _seconds(header.get("arrival"), "arrival", "reserve"),
        )


@dataclass(frozen=True, slots=True)
class Release:
    """Give back what a query holds on the node without closing it: a reservation, or the state
    of an ``open`` admitted there while another node refused it. With ``arrival`` (the one its
    ``open`` carried) the query keeps its place in the node's line; it opens again later."""

    query_id: str
    arrival: float | None = None

    def header(self) -> dict[str, Any]:
        out: dict[str, Any] = {"query_id": self.query_id}
        return out if self.arrival is None else {**out, "arrival": self.arrival}

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Release:
        raw = header.get("arrival")
        return cls(
            query_id(header.get("query_id"), "release"),
            None if raw is None else _seconds(raw, "arrival", "release"),
        )


@dataclass(frozen=True, slots=True)
class Close:
    """Drop everything the node holds for the query (best effort, idempotent)."""

    query_id: str

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Close:
        return cls(query_id(header.get("query_id"), "close"))


def arrival(header: dict[str, Any]) -> float | None:
    """``open``'s arrival: with one, the node admits the query at once or refuses it (``reserve``
    merged into ``open``, ordered by arrival as :class:`Reserve`); None: it waits for room."""
    value = header.get("arrival")
    return None if value is None else _seconds(value, "arrival", "open")


def lease(header: dict[str, Any]) -> float | None:
    """``open``'s lease: the compute node's seconds left for the query (None: none sent)."""
    value = header.get("lease_seconds")
    return None if value is None else _seconds(value, "lease_seconds", "open")


# ---------------------------------------------------------------- the filter round trips

ROLES = ("head", "tail", "middle")
TIS_FORMATS = ("swf", "intervals", "slices")
FILTER_FORMATS = ("wjf", "keyset")


def _get(header: dict[str, Any], name: str, kind: type | tuple[type, ...], action: str) -> Any:
    value = header.get(name)
    if value is None or isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ProtocolError(f"action {action}: field {name!r} is missing or of the wrong type")
    return value


#: the largest window (in the time column's units) a request may name: any int64 (a WITHIN as
#: wide as the type; node-side time arithmetic saturates, :mod:`dfs_cer.events.saturate`)
MAX_WINDOW = 2**63 - 1


def _window(header: dict[str, Any], action: str) -> int:
    value = _get(header, "window", int, action)
    if not 0 <= value <= MAX_WINDOW:
        raise ProtocolError(f"action {action}: window must be in 0..2**63-1, got {value}")
    return int(value)


def _one_of(value: object, choices: tuple[str, ...], name: str, action: str) -> str:
    if value not in choices:
        raise ProtocolError(
            f"action {action}: {name} must be one of {', '.join(choices)}, got {value!r}"
        )
    return str(value)


@dataclass(frozen=True, slots=True)
class Intervals:
    """Eq. 1 intervals around a variable's candidates (the first variable of DFS)."""

    query_id: str
    variable: str
    role: str
    window: int

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Intervals:
        a = "intervals"
        return cls(
            query_id(header.get("query_id"), a),
            _get(header, "variable", str, a),
            _one_of(header.get("role"), ROLES, "role", a),
            _window(header, a),
        )


@dataclass(frozen=True, slots=True)
class Build:
    """One window-wise join filter (or exact key set) over a processed variable's column."""

    variable: str
    column: str
    window: int
    kind: int
    format: str = "wjf"
    bits: int = 0
    hashes: int = 0
    seed: int = 0

    @classmethod
    def parse(cls, b: object) -> Build:
        a = "wjf"
        if not isinstance(b, dict):
            raise ProtocolError("action wjf: each build must be an object")
        fmt = _one_of(b.get("format", "wjf"), FILTER_FORMATS, "format", a)
        sized = fmt == "wjf"
        return cls(
            _get(b, "variable", str, a),
            _get(b, "column", str, a),
            _window(b, a),
            _get(b, "kind", int, a),
            fmt,
            _get(b, "bits", int, a) if sized else 0,
            _get(b, "hashes", int, a) if sized else 0,
            int(_get(b, "seed", int, a)) if "seed" in b else 0,
        )


@dataclass(frozen=True, slots=True)
class Wjf:
    """Build join filters; blob 0 (when sent) is the current interval set, cached for ``verify``."""

    query_id: str
    builds: tuple[Build, ...]
    tis: str = "swf"

    def header(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "builds": [asdict(b) for b in self.builds],
            "tis": self.tis,
        }

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Wjf:
        a = "wjf"
        return cls(
            query_id(header.get("query_id"), a),
            tuple(Build.parse(b) for b in _get(header, "builds", list, a)),
            _one_of(header.get("tis", "swf"), TIS_FORMATS, "tis", a),
        )


@dataclass(frozen=True, slots=True)
class Probe:
    """Probe a join filter (blob ``blob``) with a column of the verified variable."""

    column: str
    direction: int
    blob: int
    format: str = "wjf"

    @classmethod
    def parse(cls, p: object) -> Probe:
        a = "verify"
        if not isinstance(p, dict):
            raise ProtocolError("action verify: each probe must be an object")
        return cls(
            _get(p, "column", str, a),
            _get(p, "direction", int, a),
            _get(p, "blob", int, a),
            _one_of(p.get("format", "wjf"), FILTER_FORMATS, "format", a),
        )


@dataclass(frozen=True, slots=True)
class Verify:
    """Keep a variable's candidates inside the interval set (blob 0, or the one cached by the
    preceding ``wjf`` when ``cached_swf``) that pass every probe; reply with refresh tags."""

    query_id: str
    variable: str
    role: str
    window: int
    probes: tuple[Probe, ...] = ()
    tis: str = "swf"
    cached_swf: bool = False

    def header(self) -> dict[str, Any]:
        out = {
            "query_id": self.query_id,
            "variable": self.variable,
            "role": self.role,
            "window": self.window,
            "probes": [asdict(p) for p in self.probes],
            "tis": self.tis,
        }
        return {**out, "cached_swf": True} if self.cached_swf else out

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Verify:
        a = "verify"
        return cls(
            query_id(header.get("query_id"), a),
            _get(header, "variable", str, a),
            _one_of(header.get("role"), ROLES, "role", a),
            _window(header, a),
            tuple(Probe.parse(p) for p in _get(header, "probes", list, a)),
            _one_of(header.get("tis", "swf"), TIS_FORMATS, "tis", a),
            bool(header.get("cached_swf", False)),
        )


@dataclass(frozen=True, slots=True)
class Gather:
    """One variable whose candidate points a ``collect`` asks for, with the columns to hash
    (each with the :class:`~dfs_cer.filters.KeyKind` it is compared as)."""

    variable: str
    hashed: tuple[tuple[str, int], ...] = ()

    def wire(self) -> list[Any]:
        return [self.variable, [list(h) for h in self.hashed]] if self.hashed else [self.variable]

    @classmethod
    def parse(cls, g: object) -> Gather:
        a = "collect"
        if not isinstance(g, list) or not 1 <= len(g) <= 2 or not isinstance(g[0], str):
            raise ProtocolError(f"action {a}: each variable must be [name, [[column, kind]...]]")
        hashed = g[1] if len(g) == 2 else []
        if not isinstance(hashed, list) or len(hashed) > 16:
            raise ProtocolError(f"action {a}: at most 16 hashed columns per variable")
        pairs = []
        for h in hashed:
            if (
                not isinstance(h, list)
                or len(h) != 2
                or not isinstance(h[0], str)
                or isinstance(h[1], bool)
                or not isinstance(h[1], int)
            ):
                raise ProtocolError(f"action {a}: a hashed column must be [column, kind]")
            pairs.append((h[0], h[1]))
        return cls(g[0], tuple(pairs))


@dataclass(frozen=True, slots=True)
class Collect:
    """Reply with the candidate points (:class:`~dfs_cer.filters.points.Points`) of each
    variable in ``gather``, on the grid ``base`` + k * ``quantum``, value hashes ``bits`` wide.
    With ``runs`` (blob 0: :class:`~dfs_cer.filters.points.SliceRuns`) the node first keeps
    only the candidates of those variables inside them (and remembers that)."""

    query_id: str
    base: int
    quantum: int
    gather: tuple[Gather, ...]
    bits: int = 8
    runs: bool = False

    def header(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query_id": self.query_id,
            "base": self.base,
            "q": self.quantum,
            "vars": [g.wire() for g in self.gather],
        }
        if self.bits != 8:
            out["bits"] = self.bits
        if self.runs:
            out["runs"] = 1
        return out

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Collect:
        a = "collect"
        gather = _get(header, "vars", list, a)
        if not 1 <= len(gather) <= 64:
            raise ProtocolError(f"action {a}: 1 to 64 variables, got {len(gather)}")
        quantum = _get(header, "q", int, a)
        base = _get(header, "base", int, a)
        if not 0 < quantum < 2**63 or not -(2**63) <= base < 2**63:
            raise ProtocolError(f"action {a}: quantum {quantum} or base {base} out of range")
        bits = header.get("bits", 8)
        if isinstance(bits, bool) or not isinstance(bits, int) or not 4 <= bits <= 16:
            raise ProtocolError(f"action {a}: bits must be 4 to 16, got {bits!r}")
        return cls(
            query_id(header.get("query_id"), a),
            base,
            quantum,
            tuple(Gather.parse(g) for g in gather),
            bits,
            bool(header.get("runs", 0)),
        )


#: a push_pull request's bounds when it names none (the matcher settings' defaults)
FILTER_MAX_MATCHES = 10_000_000
FILTER_MAX_STEPS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class PushPull:
    """Push-pull: keep ``variable``'s candidates that complete a match with the events uploaded
    for the ``processed`` variables. The node's matching of the projected pattern stops at the
    compute node's match limit and step budget (``matcher.max_matches``, ``matcher.max_steps``);
    then it keeps every candidate and says why (the compute node falls back to push-down)."""

    query_id: str
    variable: str
    processed: tuple[str, ...]
    max_matches: int = FILTER_MAX_MATCHES
    max_steps: int = FILTER_MAX_STEPS

    def header(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "variable": self.variable,
            "processed": list(self.processed),
            # the defaults travel as nothing (a request's bytes as they were)
            **({"max_matches": self.max_matches} if self.max_matches != FILTER_MAX_MATCHES else {}),
            **({"max_steps": self.max_steps} if self.max_steps != FILTER_MAX_STEPS else {}),
        }

    @classmethod
    def parse(cls, header: dict[str, Any]) -> PushPull:
        a = "push_pull"
        processed = _get(header, "processed", list, a)
        if not all(isinstance(p, str) for p in processed):
            raise ProtocolError("action push_pull: processed must list variable names")
        limit = (
            _get(header, "max_matches", int, a) if "max_matches" in header else FILTER_MAX_MATCHES
        )
        if not 0 < limit <= 10**9:
            raise ProtocolError(f"action {a}: max_matches must be in 1..10**9, got {limit}")
        steps = _get(header, "max_steps", int, a) if "max_steps" in header else FILTER_MAX_STEPS
        if not 0 < steps <= 10**15:
            raise ProtocolError(f"action {a}: max_steps must be in 1..10**15, got {steps}")
        return cls(
            query_id(header.get("query_id"), a),
            _get(header, "variable", str, a),
            tuple(processed),
            int(limit),
            int(steps),
        )


@dataclass(frozen=True, slots=True)
class Upload:
    """DoPut: a processed variable's events (push-pull)."""

    query_id: str
    variable: str

    def header(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, header: dict[str, Any]) -> Upload:
        return cls(
            query_id(header.get("query_id"), "upload"), _get(header, "variable", str, "upload")
        )


#: the most rows PREV/NEXT may reach on either side (a query's largest physical offset)
MAX_HALO = 10_000


@dataclass(frozen=True, slots=True)
class Halo:
    """Ask a ``pull_range`` (every row inside closed time intervals) or a ``pull_halo`` (around
    per-partition points) for the ``before``/``after`` rows next to them in the matcher's
    canonical order: by PARTITION BY, ORDER BY, then ``event_key`` and the other columns,
    duplicates dropped when ``dedup``."""

    query_id: str
    kind: str
    before: int
    after: int
    event_key: tuple[str, ...]
    dedup: bool
    #: ``pull_halo``: leave out the rows this node shipped in the query's final pull or push-down
    skip_shipped: bool = False
    #: the final ``pull`` (with ``tis``) or ``pull_pushdown`` itself: the node holds whole
    #: PARTITION BY groups, so it adds its candidates' neighbours (marked :data:`HALO`) at once
    tis: str | None = None

    def header(self) -> dict[str, Any]:
        tis = (
            {"tis": "intervals"}
            if self.kind == "pull_range"
            else {"tis": self.tis}
            if self.tis
            else {}
        )
        skip = {"skip_shipped": True} if self.skip_shipped else {}
        return {
            "query_id": self.query_id,
            "kind": self.kind,
            "halo": [self.before, self.after],
            "event_key": list(self.event_key),
            "dedup": self.dedup,
            **tis,
            **skip,
        }

    @classmethod
    def parse(cls, header: dict[str, Any], limit: int = MAX_HALO) -> Halo:
        """``limit``: the most rows this node serves on either side (at most :data:`MAX_HALO`)."""
        kind = _one_of(
            header.get("kind"), ("pull_range", "pull_halo", "pull", "pull_pushdown"), "kind", "pull"
        )
        reach = _get(header, "halo", list, kind)
        if len(reach) != 2 or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= limit for r in reach
        ):
            raise ProtocolError(
                f"action {kind}: halo must be [before, after] rows, each in 0..{limit}"
            )
        key = _get(header, "event_key", list, kind)
        if len(key) > 64 or not all(isinstance(c, str) for c in key):
            raise ProtocolError(f"action {kind}: event_key must list column names")
        if kind == "pull_range" and header.get("tis") != "intervals":
            raise ProtocolError(
                "action pull_range: a halo needs the exact interval array (tis 'intervals')"
            )
        skip = header.get("skip_shipped", False)
        if not isinstance(skip, bool) or (skip and kind != "pull_halo"):
            raise ProtocolError(
                f"action {kind}: skip_shipped must be true or false (pull_halo only)"
            )
        tis = None
        if kind == "pull":
            tis = _one_of(header.get("tis"), TIS_FORMATS, "tis", kind)
        return cls(
            query_id(header.get("query_id"), kind),
            kind,
            int(reach[0]),
            int(reach[1]),
            tuple(key),
            _get(header, "dedup", bool, kind),
            skip,
            tis,
        )


#: the time budget of node-side matching a ``pull_matches`` request leaves out (the default of
#: ``matcher.max_seconds``)
MATCH_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class NodeMatch:
    """``pull_matches``: match on the node (it holds whole PARTITION BY groups) and return the
    MATCH_RECOGNIZE relation, with the compute node's event key, dedup, match limit, step and
    time budgets (``matcher.max_steps``, ``matcher.max_seconds``: past either the node ends the
    query with ``match-budget``; a request without ``max_seconds`` gets the default) and
    Kleene+ output of ALL MATCHES (``matcher.kleene``; a header without it: every subset)."""

    query_id: str
    event_key: tuple[str, ...]
    dedup: bool
    max_matches: int
    on_limit: str
    max_steps: int
    kleene: str = "all"
    max_seconds: float = MATCH_SECONDS

    def header(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "kind": "pull_matches",
            "event_key": list(self.event_key),
            "dedup": self.dedup,
            "max_matches": self.max_matches,
            "on_limit": self.on_limit,
            "max_steps": self.max_steps,
            "kleene": self.kleene,
            "max_seconds": self.max_seconds,
        }

    @classmethod
    def parse(cls, header: dict[str, Any]) -> NodeMatch:
        a = "pull_matches"
        key = _get(header, "event_key", list, a)
        if len(key) > 64 or not all(isinstance(c, str) for c in key):
            raise ProtocolError(f"action {a}: event_key must list column names")
        limit = _get(header, "max_matches", int, a)
        if not 0 < limit <= 10**9:
            raise ProtocolError(f"action {a}: max_matches must be in 1..10**9, got {limit}")
        steps = _get(header, "max_steps", int, a)
        if not 0 < steps <= 10**15:
            raise ProtocolError(f"action {a}: max_steps must be in 1..10**15, got {steps}")
        seconds = header.get("max_seconds", MATCH_SECONDS)
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 < seconds <= 10**6
        ):
            raise ProtocolError(f"action {a}: max_seconds must be in (0, 10**6], got {seconds!r}")
        return cls(
            query_id(header.get("query_id"), a),
            tuple(key),
            _get(header, "dedup", bool, a),
            int(limit),
            _one_of(header.get("on_limit"), ("error", "truncate"), "on_limit", a),
            int(steps),
            _one_of(header.get("kleene", "all"), ("all", "maximal"), "kleene", a),
            float(seconds),
        )
