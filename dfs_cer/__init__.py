"""dfs-cer: offline complex event recognition over event logs in object or block storage.

``dfs_cer.parse(sql)`` turns a ``MATCH_RECOGNIZE`` query into a frozen :class:`Query`;
``dfs_cer.analyze(query, schema)`` classifies its conditions for the pull strategies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfs_cer.errors import DfsCerError, QueryError

if TYPE_CHECKING:
    import pyarrow

    __version__: str

    from dfs_cer.config import Config
    from dfs_cer.query import Analysis, Query, analyze, parse

#: names this package exports from :mod:`dfs_cer.query`, imported on first use: ``import
#: dfs_cer.config`` (a storage node, a Spark executor) does not load the SQL parser
_QUERY_NAMES = frozenset({"Analysis", "Query", "analyze", "parse"})


def __getattr__(name: str) -> object:
    if name == "__version__":  # read on first use: importlib.metadata costs a command's start-up
        globals()[name] = value = _version()
        return value
    if name in _QUERY_NAMES:
        import dfs_cer.query

        value = getattr(dfs_cer.query, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dfs_cer' has no attribute {name!r}")


def match_recognize(table: pyarrow.Table, sql: str, **options: object) -> pyarrow.Table:
    """Evaluate a whole ``SELECT ... MATCH_RECOGNIZE`` query over an Arrow table in process
    (see :func:`dfs_cer.local.match_recognize` for the options)."""
    from dfs_cer.local import match_recognize as run

    return run(table, sql, **options)  # type: ignore[arg-type]


def match_situations(
    table: pyarrow.Table, sql: str, *, config: Config | None = None, **options: object
) -> pyarrow.Table:
    """Evaluate a ``SELECT ... FROM t SITUATIONS (...)`` query (situations and Allen
    relations) over an Arrow table in process (see :mod:`dfs_cer.situations`). ``config``: the
    settings (default :func:`~dfs_cer.config.load_config`); ``integer_time_unit``, ``event_key``
    and ``dedup`` given win over its ``query`` section."""
    from dfs_cer.config import load_config
    from dfs_cer.situations import match_situations as run

    names = ("integer_time_unit", "event_key", "dedup")
    settings = (config or load_config()).with_values(
        {"query": {k: options.pop(k, None) for k in names}}, "match_situations' arguments"
    )
    query = settings.query
    return run(
        table,
        sql,
        integer_time_unit=query.integer_time_unit,
        event_key=query.event_key,
        dedup=query.dedup,
        config=settings,
        **options,
    )


def _version() -> str:
    """The installed distribution's version (the one version literal is pyproject.toml's)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dfs-cer")
    except PackageNotFoundError:  # pragma: no cover  (a source tree that was never installed)
        return "0+unknown"


__all__ = [
    "Analysis",
    "DfsCerError",
    "Query",
    "QueryError",
    "__version__",
    "analyze",
    "match_recognize",
    "match_situations",
    "parse",
]
