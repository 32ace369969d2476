"""A pull as a value: what :func:`dfs_cer.strategies.pull` is asked, checked once, immutable.

Built by :meth:`PullRequest.of` (the keywords ``pull`` takes) and refined like pyiceberg's
``TableScan``: :meth:`~PullRequest.update`, :meth:`~PullRequest.with_options` and the other
``with_...`` methods return a new request and leave the one they were called on as it was.
:func:`dfs_cer.strategies.pull.run` runs one; every strategy takes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from dfs_cer.config import DEFAULT_CONFIG, Config, StrategyConfig, load_config
from dfs_cer.errors import ConfigError
from dfs_cer.options import STRATEGIES
from dfs_cer.query import Query
from dfs_cer.strategies.options import PullOptions


@dataclass(frozen=True, slots=True)
class PullRequest:
    """Run ``strategy`` for ``query`` against the storage nodes at ``endpoints`` (the keywords
    are those of :func:`dfs_cer.strategies.pull`, which documents them). ``config``: every
    setting in force (the query's, the strategy's, the matcher's for what the nodes match and
    what :func:`dfs_cer.strategies.matching.match_pulled` does with the result); the fields
    before it are the query settings resolved (the arguments given, else the config's)."""

    strategy: str
    query: Query
    endpoints: tuple[str, ...]
    token: str = field(repr=False)
    integer_time_unit: str = "s"
    #: columns identifying an event; None: the storage nodes' shard sets say
    event_key: tuple[str, ...] | None = None
    dedup: bool = True
    #: restrict the query to these inclusive time ranges (an incremental re-run)
    time_ranges: tuple[tuple[int, int], ...] | None = None
    #: seconds for the whole query (None: ``strategy.query_timeout_seconds``)
    timeout: float | None = None
    config: Config = DEFAULT_CONFIG
    #: a row-local condition every node applies to its rows first (SQL text; None: none)
    input_filter: str | None = None
    defer: bool = False
    defer_min_rows: int = 0
    #: the table snapshot every node reads (tables served in place; None: the current one)
    snapshot: int | None = None
    options: PullOptions = field(default_factory=PullOptions)

    @classmethod
    def of(
        cls,
        name: str,
        query: Query | str,
        endpoints: Sequence[str],
        token: str,
        *,
        integer_time_unit: str | None = None,
        event_key: Sequence[str] | None = None,
        dedup: bool | None = None,
        time_ranges: Sequence[tuple[int, int]] | None = None,
        timeout: float | None = None,
        config: Config | StrategyConfig | None = None,
        input_filter: str | None = None,
        defer: bool = False,
        defer_min_rows: int = 0,
        snapshot: int | None = None,
        **options: Any,
    ) -> PullRequest:
        """The request ``pull(name, query, endpoints, token, ...)`` makes, checked in the order
        ``pull`` always checked it: the strategy's name, the options, the time limits, the query.
        Settings not given as arguments come from ``config`` (None: :func:`load_config`, the
        ``DFS_CER_CONFIG`` file and ``DFS_CER__*`` variables over the defaults; a
        :class:`StrategyConfig` replaces the strategy section of that)."""
        from dfs_cer.strategies.base import check_limits, resolve_query

        if name not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
        settings = settings_of(config)
        if dedup is not None and not isinstance(dedup, bool):
            raise ConfigError(f"dedup must be True or False, got {dedup!r}")
        if isinstance(event_key, str):  # one column named as a string
            event_key = (event_key,)
        checked = PullOptions.parse(
            {
                "cost_model": settings.strategy.cost_model,
                "calibration_file": settings.strategy.calibration_file or None,
                **options,
            }
        )
        check_limits(settings.strategy, timeout)
        if event_key is None and settings.query.event_key:
            event_key = settings.query.event_key
        return cls(
            name,
            resolve_query(query),
            tuple(endpoints),
            token,
            settings.query.integer_time_unit if integer_time_unit is None else integer_time_unit,
            None if event_key is None else tuple(event_key),
            settings.query.dedup if dedup is None else dedup,
            None if time_ranges is None else tuple((int(a), int(b)) for a, b in time_ranges),
            timeout,
            settings,
            input_filter,
            defer,
            defer_min_rows,
            None if snapshot is None else int(snapshot),
            checked,
        )

    @property
    def settings(self) -> StrategyConfig:
        """The strategy settings in force."""
        return self.config.strategy

    def update(self, **changes: Any) -> PullRequest:
        """A new request with ``changes`` (fields of this type) applied."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ConfigError(
                f"unknown pull request field{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(unknown)}; the fields are {', '.join(sorted(names))}"
            )
        return replace(self, **changes)

    def with_options(self, **options: Any) -> PullRequest:
        """A new request with these strategy options (checked) over the current ones."""
        current = {f.name: getattr(self.options, f.name) for f in fields(self.options)}
        return replace(self, options=PullOptions.parse({**current, **options}))

    def with_query(self, query: Query) -> PullRequest:
        return replace(self, query=query)

    def with_time_ranges(self, ranges: Sequence[tuple[int, int]] | None) -> PullRequest:
        return replace(
            self, time_ranges=None if ranges is None else tuple((int(a), int(b)) for a, b in ranges)
        )

    def with_snapshot(self, snapshot: int | None) -> PullRequest:
        return replace(self, snapshot=None if snapshot is None else int(snapshot))


def settings_of(config: Config | StrategyConfig | None) -> Config:
    """Every setting a pull runs with: ``config``; None: :func:`load_config` (the
    ``DFS_CER_CONFIG`` file and ``DFS_CER__*`` variables over the defaults); a
    :class:`StrategyConfig` (what ``pull`` took before it took a whole :class:`Config`) in place
    of the strategy section of that."""
    if isinstance(config, Config):
        return config
    if config is None:
        return load_config()
    if isinstance(config, StrategyConfig):
        return replace(load_config(), strategy=config)
    raise ConfigError(
        f"config must be a dfs_cer.config.Config (or a StrategyConfig), got {config!r}"
    )
