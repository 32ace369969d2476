"""Logging setup shared by the ``dfs-cer`` command and the storage nodes.

Standard :mod:`logging`, quiet by default (``WARNING``; ``--log-level`` changes it), on stderr
and only for dfs-cer's own loggers (``dfs_cer.*``, ``storage_node.*``): what a command prints
on stdout is its output and never goes through here. Every line carries the query id of the
call it belongs to (``-`` outside a query), from a context variable the storage node sets per
call (:func:`query_scope`, :func:`set_query_id`) and a filter that copies it onto each record.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LEVEL = "WARNING"
LOGGERS = ("dfs_cer", "storage_node")
NO_QUERY = "-"
FORMAT = "%(asctime)s %(levelname)s %(name)s [query %(query_id)s] %(message)s"

_query_id: contextvars.ContextVar[str] = contextvars.ContextVar(
    "dfs_cer_query_id", default=NO_QUERY
)


class QueryIdFilter(logging.Filter):
    """Puts the current call's query id on every record (``%(query_id)s``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.query_id = _query_id.get()
        return True


def current_query_id() -> str:
    return _query_id.get()


def set_query_id(query_id: str) -> None:
    """The query the current call works for, once its request names it (inside
    :func:`query_scope`)."""
    _query_id.set(query_id)


@contextmanager
def query_scope(query_id: str = NO_QUERY) -> Iterator[None]:
    """Lines logged inside carry ``query_id`` (or the one :func:`set_query_id` names later);
    the previous id is back on exit."""
    token = _query_id.set(query_id)
    try:
        yield
    finally:
        _query_id.reset(token)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (tests and click's runner swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


_HANDLER = _Stderr()
_HANDLER.addFilter(QueryIdFilter())
_HANDLER.setFormatter(logging.Formatter(FORMAT))


def configure(level: str = DEFAULT_LEVEL) -> None:
    """Send dfs-cer's loggers at ``level`` and above to stderr (once, however often called)."""
    name = level.upper()
    if name not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    for logger_name in LOGGERS:
        logger = logging.getLogger(logger_name)
        logger.setLevel(name)
        if _HANDLER not in logger.handlers:
            logger.addHandler(_HANDLER)
