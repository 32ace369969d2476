"""Typed, frozen settings.

Sources, later ones winning:

1. the defaults of the dataclasses below (``conf/default.toml`` documents the same values);
2. TOML files given explicitly (``load_config(paths=...)``, the CLI's ``--config``) or named by
   the ``DFS_CER_CONFIG`` environment variable;
3. environment variables ``DFS_CER__SECTION__KEY=value``, e.g.
   ``DFS_CER__STORAGE__MEMORY_BUDGET=1GiB``.

The merged result is validated once and frozen; deep code receives a :class:`Config` (or one of
its sections) as an argument and never reads ``os.environ`` itself.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tomllib
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from dfs_cer.errors import ConfigError
from dfs_cer.options import Compression, CostModel, Kleene, OnLimit, Strategy, TimeUnit

ENV_PREFIX = "DFS_CER__"
ENV_CONFIG_FILE = "DFS_CER_CONFIG"


@dataclass(frozen=True, slots=True)
class QueryConfig:
    """Front-end settings."""

    #: unit of an integer ORDER BY column when a WITHIN interval is given (epoch seconds, ms, ...)
    integer_time_unit: TimeUnit = "s"
    #: dialect used to render the outer SELECT for the embedded engine and Spark SQL
    outer_dialect: str = "duckdb"
    #: columns that identify an event (with its time); empty: the whole row identifies it.
    #: Rows tied on ORDER BY are matched in (event key, other columns) order.
    event_key: tuple[str, ...] = ()
    #: drop duplicate events (same ORDER BY time and event key) before matching
    dedup: bool = True
    #: the most memory the SQL around MATCH_RECOGNIZE may take on the embedded engine (its joins,
    #: sorts, aggregates and its result; nothing spills to disk), and, divided by 2,048 (rows a
    #: batch), the longest string one of its string functions may build
    outer_memory_limit: int = 1024**3

    def __post_init__(self) -> None:
        _check(self, "query")


@dataclass(frozen=True, slots=True)
class StrategyConfig:
    """Compute-node pull strategy settings."""

    #: the pull strategy of ``dfs-cer query`` without --strategy
    default: Strategy = "dfs"
    cost_model: CostModel = "adaptive"
    beta_sample_events: int = 5000
    calibration_file: str = "conf/calibration.json"
    #: seconds one call to a storage node may take (a hung node fails the query after this)
    call_timeout_seconds: float = 30.0
    #: seconds a whole query may take, every round trip included (``--timeout``)
    query_timeout_seconds: float = 300.0
    #: seconds each node gets to confirm ``close`` (best effort: state expires on its TTL anyway)
    close_timeout_seconds: float = 2.0
    #: seconds a query waits for room on every storage node at once (all-or-none admission)
    admission_wait_seconds: float = 60.0
    #: how pulled events travel: one Arrow IPC stream with zstd or lz4 buffer compression
    #: (string columns of few distinct values dictionary-encoded), or ``none`` (uncompressed,
    #: the paper's comparison); traces count the bytes that crossed the network
    transfer_compression: Compression = "zstd"
    #: the most rows PREV/NEXT may reach beyond the pulled rows on either side (at most the
    #: protocol's 10,000): a query reaching further pulls every row (a fallback in the trace)
    halo_limit: int = 10_000

    def __post_init__(self) -> None:
        _check(self, "strategy")


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """Storage node settings."""

    host: str = "127.0.0.1"
    port: int = 8815
    memory_budget: int = 2 * 1024**3
    cache_bytes: int = 1024**3
    #: load the cached rows and build the value indexes before the node reports ready (else on
    #: the first query, which then pays for them)
    preload: bool = True
    #: load the query handlers, the SQL parser and the compiled filter kernels before the node
    #: reports ready (the first query then runs at full speed; about 150 MB more per node at
    #: rest); else the first query call loads them
    warm_up: bool = False
    admission_wait_seconds: float = 30.0
    state_ttl_seconds: float = 600.0
    max_message_bytes: int = 256 * 1024**2
    s3_endpoint: str = ""
    s3_region: str = "us-east-1"
    #: seconds to connect to S3 / of silence on a connection before the call fails
    s3_connect_timeout_seconds: float = 2.0
    s3_request_timeout_seconds: float = 5.0
    #: transient S3 errors are retried until this many seconds have passed (permanent ones,
    #: such as access denied or no such bucket, fail at once)
    s3_retry_seconds: float = 10.0
    #: ``dfs-cer calibrate`` output whose per-engine beta (seconds per event) the node reports
    #: for node-side matching ("" = the built-in estimate)
    calibration_file: str = ""
    #: the most CPU seconds one query may spend matching on this node (else the compute pulls)
    match_cpu_budget_seconds: float = 5.0
    #: node-side work (push-pull matching, node-side matching, halo pulls) running at once; more
    #: waits for a slot (checking its deadline). Control calls (reserve, release, close, health,
    #: stats) take none and never wait behind it. 0: one per CPU core
    work_threads: int = 0
    #: the most bytes one query's node-side work (partial matches, matches) may hold at once;
    #: past it push-pull's filter keeps every candidate and node-side matching is pulled instead
    #: (0: whatever the memory budget has free)
    query_work_bytes: int = 0
    #: the most character steps (LIKE pattern size x characters of the rows) an input filter may
    #: cost one node; a costlier one is refused and computed on the compute node
    filter_cost_limit: int = 2_000_000_000
    #: the most rows a halo request may reach here (at most the protocol's 10,000), reported at
    #: open: the compute node pulls every row for a query reaching further
    halo_limit: int = 10_000

    def __post_init__(self) -> None:
        _check(self, "storage")


@dataclass(frozen=True, slots=True)
class TablesConfig:
    """Tables served in place (``iceberg://CATALOG/NAMESPACE.TABLE``, ``hive:PATH``)."""

    #: the embedded Iceberg catalog ``iceberg://local/...``: a SQL catalog on this database
    #: (other catalog names come from pyiceberg's own configuration: ~/.pyiceberg.yaml or
    #: PYICEBERG_CATALOG__NAME__URI=...)
    catalog_uri: str = "sqlite:///.dfs-cer/catalog.db"
    #: where the embedded catalog writes new tables (a local directory or s3://bucket/prefix)
    warehouse: str = ".dfs-cer/warehouse"
    #: where storage nodes keep each table's file-to-node assignment (written once, then read)
    assignments_dir: str = ".dfs-cer/tables"

    def __post_init__(self) -> None:
        _check(self, "tables")


@dataclass(frozen=True, slots=True)
class MatcherConfig:
    """Matching engine settings."""

    max_matches: int = 10_000_000
    on_limit: OnLimit = "error"
    kleene: Kleene = "all"
    #: the most thread steps (a live match attempt at a row) the row-pattern engine takes in one
    #: run before it ends the query with an error naming the partition (about a minute of work)
    max_steps: int = 1_000_000_000
    #: the most seconds the row-pattern engine spends matching one partition (and as many again
    #: per million rows of it) before it ends the query with an error naming the partition: a
    #: runaway pattern ends within seconds, work that grows with the rows is left to finish
    max_seconds: float = 10.0

    def __post_init__(self) -> None:
        _check(self, "matcher")


@dataclass(frozen=True, slots=True)
class Config:
    """All settings, one frozen section per concern."""

    query: QueryConfig = field(default_factory=QueryConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    matcher: MatcherConfig = field(default_factory=MatcherConfig)
    tables: TablesConfig = field(default_factory=TablesConfig)

    def __post_init__(self) -> None:
        for name, cls in _section_types().items():
            value = getattr(self, name)
            if not isinstance(value, cls):
                raise ConfigError(
                    f"config section {name} must be a {cls.__name__}, got {value!r}; build it "
                    f"as {cls.__name__}(...) or load it with load_config()"
                )

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict of every setting (for ``dfs-cer config`` and tests)."""
        return {f.name: dataclasses.asdict(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def with_values(
        self, values: Mapping[str, Mapping[str, Any]], origin: str = "the arguments"
    ) -> Config:
        """These settings with ``values`` (``{section: {key: value}}``, raw values as a TOML file
        or the environment gives them, or typed ones) applied over them, converted and checked
        as :func:`load_config` does: what a front door's explicit arguments make of a Config.
        A value of None is an argument not given (no setting takes None).

        Raises:
            ConfigError: naming an unknown section or key (``origin`` says where it came
                from), or the key, the bad value and what is expected.
        """
        merged: dict[str, dict[str, Any]] = {}
        _merge(merged, values, origin)
        sections = {
            name: dataclasses.replace(getattr(self, name), **given)
            for name, changes in merged.items()
            if (given := {k: v for k, v in changes.items() if v is not None})
        }
        return dataclasses.replace(self, **sections) if sections else self


_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "kib": 1024,
    "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
    "t": 1000**4, "tb": 1000**4, "tib": 1024**4,
}  # fmt: skip
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_BYTE_KEYS = {
    "memory_budget",
    "cache_bytes",
    "max_message_bytes",
    "network_probe_bytes",
    "query_work_bytes",
    "outer_memory_limit",
}


def parse_size(value: object, key: str = "size") -> int:
    """Parse ``2GiB``, ``512 MB``, ``1048576`` into bytes."""
    if isinstance(value, bool):
        raise ConfigError(f"conf key {key} must be a size such as 2GiB, got {value!r}")
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(str(value))
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ConfigError(f"conf key {key} must be a size such as 2GiB or 512MB, got {value!r}")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def _convert(key: str, raw: object, annotation: Any) -> Any:
    """Convert ``raw`` (TOML value or environment string) to the field's declared type."""
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        if raw not in choices:
            raise ConfigError(
                f"conf key {key} must be one of {', '.join(map(str, choices))}, got {raw!r}"
            )
        return raw
    if origin is tuple:  # a list of strings: TOML array, or comma-separated in the environment
        items = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"conf key {key} must be a list of column names, got {raw!r}")
        return tuple(i.strip() for i in items if i.strip())
    if origin in (Union, types.UnionType):
        raise ConfigError(f"conf key {key}: union types are not supported")  # pragma: no cover
    name = key.rsplit(".", 1)[-1]
    if annotation is int and name in _BYTE_KEYS:
        return parse_size(raw, key)
    if annotation is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"conf key {key} must be true or false, got {raw!r}")
    if annotation is int:
        if isinstance(raw, bool):
            raise ConfigError(f"conf key {key} must be an integer, got {raw!r}")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and not raw.is_integer():
            raise ConfigError(f"conf key {key} must be an integer, got {raw!r}")
        try:
            return int(str(raw).replace("_", "")) if isinstance(raw, str) else int(raw)  # type: ignore[call-overload]
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"conf key {key} must be an integer, got {raw!r}") from None
    if annotation is float:
        if isinstance(raw, bool):
            raise ConfigError(f"conf key {key} must be a number, got {raw!r}")
        try:
            return float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(f"conf key {key} must be a number, got {raw!r}") from None
    if annotation is str:
        if not isinstance(raw, str | int | float) or isinstance(raw, bool):
            raise ConfigError(f"conf key {key} must be a string, got {raw!r}")
        return str(raw)
    raise ConfigError(f"conf key {key} has an unsupported type {annotation!r}")  # pragma: no cover


@functools.cache
def _section_types() -> dict[str, type[Any]]:
    hints = get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def _merge(target: dict[str, dict[str, Any]], source: Mapping[str, Any], origin: str) -> None:
    sections = _section_types()
    for section, values in source.items():
        if section not in sections:
            raise ConfigError(
                f"unknown config section [{section}] in {origin}; "
                f"known sections: {', '.join(sorted(sections))}"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"config section [{section}] in {origin} must be a table")
        known = {f.name for f in dataclasses.fields(sections[section])}
        for key, value in values.items():
            norm = key.replace("-", "_")
            if norm not in known:
                raise ConfigError(
                    f"unknown conf key {section}.{key} in {origin}; "
                    f"known keys: {', '.join(sorted(known))}"
                )
            target.setdefault(section, {})[norm] = value


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].split("__")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(
                f"environment variable {name} must look like DFS_CER__SECTION__KEY, "
                "e.g. DFS_CER__STORAGE__PORT=8815"
            )
        out.setdefault(parts[0].lower(), {})[parts[1].lower()] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def build_config(values: Mapping[str, Mapping[str, Any]]) -> Config:
    """Validate a nested mapping of raw values into a frozen :class:`Config`."""
    return DEFAULT_CONFIG.with_values(values, "the settings")


@functools.cache
def _hints(name: str) -> dict[str, Any]:
    """The field types of the settings section ``name``."""
    return get_type_hints(_section_types()[name])


def _check(section: Any, name: str) -> None:
    """Convert and check every field of ``section`` (the settings section ``name``) in place:
    each section's ``__post_init__`` calls it, so a value is checked once, the same way, whether
    it came from a file, the environment or a constructor call."""
    for key, annotation in _hints(name).items():
        value = getattr(section, key)
        converted = _convert(f"{name}.{key}", value, annotation)
        if converted is not value:
            object.__setattr__(section, key, converted)
    _RANGES[name](section)


def _positive(name: str, key: str, value: float, fix: str) -> None:
    if not value > 0:
        raise ConfigError(f"conf key {name}.{key} must be positive, got {value}; {fix}")


#: the longest any ``*_seconds`` setting may be (about 116 days): timers and deadlines past the
#: platform's (``threading.TIMEOUT_MAX``, gRPC's) would fail in a thread of their own
MAX_SECONDS = 10**7


def _seconds(section: Any, name: str) -> None:
    for key in section.__dataclass_fields__:
        if key.endswith("_seconds") and not 0 < getattr(section, key) <= MAX_SECONDS:
            raise ConfigError(
                f"conf key {name}.{key} must be a positive number of seconds, at most "
                f"{MAX_SECONDS:,} (about 116 days), got {getattr(section, key)}; e.g. the default "
                f"{_section_types()[name].__dataclass_fields__[key].default}"
            )


def _halo(section: Any, name: str) -> None:
    if not 0 <= section.halo_limit <= 10_000:
        raise ConfigError(
            f"conf key {name}.halo_limit must be in 0..10000 (the protocol's halo limit), "
            f"got {section.halo_limit}; lower it, or leave it out for 10000"
        )


def _query_ranges(query: QueryConfig) -> None:
    if query.outer_memory_limit < 16 * 1024**2:
        raise ConfigError(
            "conf key query.outer_memory_limit must be at least 16MiB, got "
            f"{query.outer_memory_limit}; e.g. the default 1GiB"
        )
    if query.outer_dialect != "duckdb":
        from sqlglot.dialects.dialect import Dialects

        known = sorted(d.value for d in Dialects if d.value)
        if query.outer_dialect not in known:
            raise ConfigError(
                f"conf key query.outer_dialect must be a SQL dialect ({', '.join(known)}), got "
                f"{query.outer_dialect!r}; the embedded engine reads duckdb"
            )


def _strategy_ranges(strategy: StrategyConfig) -> None:
    _seconds(strategy, "strategy")
    _halo(strategy, "strategy")
    _positive(
        "strategy",
        "beta_sample_events",
        strategy.beta_sample_events,
        "dfs-cer calibrate times the engines on this many events (e.g. 5000)",
    )


def _storage_ranges(storage: StorageConfig) -> None:
    if not 0 < storage.port < 65536:
        raise ConfigError(f"conf key storage.port must be in 1..65535, got {storage.port}")
    if storage.memory_budget <= 0:
        raise ConfigError(
            f"conf key storage.memory_budget must be positive, got {storage.memory_budget}"
        )
    if storage.work_threads < 0 or storage.filter_cost_limit <= 0 or storage.query_work_bytes < 0:
        raise ConfigError(
            "conf keys storage.work_threads (0: one per CPU core), storage.filter_cost_limit (> "
            f"0) and storage.query_work_bytes (0: no limit) got {storage.work_threads}, "
            f"{storage.filter_cost_limit} and {storage.query_work_bytes}"
        )
    _seconds(storage, "storage")
    if storage.max_message_bytes <= 0 or storage.cache_bytes < 0:
        raise ConfigError(
            "conf keys storage.max_message_bytes must be positive and storage.cache_bytes at "
            f"least 0, got {storage.max_message_bytes} and {storage.cache_bytes}"
        )
    _halo(storage, "storage")


def _matcher_ranges(matcher: MatcherConfig) -> None:
    _positive(
        "matcher",
        "max_steps",
        matcher.max_steps,
        "it bounds every engine run (there is no unbounded run): raise it, e.g. 10000000000, "
        "or leave it out for the default 1000000000",
    )
    _positive(
        "matcher",
        "max_matches",
        matcher.max_matches,
        "it bounds the matches one query returns: give a positive number, e.g. the default "
        "10000000 (matcher.on_limit = truncate keeps the first ones instead of failing)",
    )
    if not 0 < matcher.max_seconds <= 10**6:  # NaN fails too
        raise ConfigError(
            f"conf key matcher.max_seconds must be a positive, finite number of seconds (at most "
            f"1000000), got {matcher.max_seconds}; it bounds the time one partition may take "
            "(there is no unbounded run): raise it, e.g. 60, or leave it out for the default 10"
        )


_RANGES: dict[str, Callable[[Any], None]] = {
    "query": _query_ranges,
    "strategy": _strategy_ranges,
    "storage": _storage_ranges,
    "tables": lambda _: None,
    "matcher": _matcher_ranges,
}


def load_config(
    paths: tuple[str | Path, ...] = (),
    env: Mapping[str, str] | None = None,
) -> Config:
    """Load settings from TOML files and ``DFS_CER__*`` environment overrides.

    Args:
        paths: TOML files applied in order over the built-in defaults.
        env: the environment to read (``os.environ`` when None). Only this function reads it.

    Raises:
        ConfigError: naming the key, the bad value and what is expected.
    """
    environ = os.environ if env is None else env
    merged: dict[str, dict[str, Any]] = {}
    files = [Path(p) for p in paths]
    if environ.get(ENV_CONFIG_FILE):
        files.append(Path(environ[ENV_CONFIG_FILE]))
    for path in files:
        _merge(merged, _read_toml(path), str(path))
    _merge(merged, _env_overrides(environ), "the environment")
    return build_config(merged)


DEFAULT_CONFIG = Config()
