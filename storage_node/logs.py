"""What a storage node logs about each Flight call (on :mod:`dfs_cer.logs`' handler, with the
query id on every line).

A call's start and end at DEBUG (with the peer and the seconds it took); its error once, where
the server hands it to gRPC: at INFO when the client recovers by itself (a cache miss: it sends
the interval set again; an unknown query: it opens it again), at ERROR with the traceback for a
node bug (an internal error), else at WARNING.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pyarrow.flight as flight

from dfs_cer.errors import CacheMissError, UnknownQueryError
from dfs_cer.logs import query_scope

log = logging.getLogger("storage_node.calls")

#: a Flight server method: (self, context, request, ...)
F = TypeVar("F", bound=Callable[..., Any])

#: errors a client recovers from by itself (logged at INFO, not WARNING)
ROUTINE = (CacheMissError, UnknownQueryError)


def error_level(exc: BaseException) -> int:
    if isinstance(exc, flight.FlightInternalError):
        return logging.ERROR
    return logging.INFO if isinstance(exc.__cause__, ROUTINE) else logging.WARNING


def _peer(context: Any) -> str:
    try:
        return str(context.peer())
    except Exception:  # a test's stand-in context, or a call already gone
        return "?"


def logged_call(kind: str) -> Callable[[F], F]:
    """Log one Flight server method's calls: ``kind``, or the action's type for DoAction."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Any, context: Any, request: Any, *rest: Any) -> Any:
            name = getattr(request, "type", None) or kind
            with query_scope():
                began = time.perf_counter()
                log.debug("%s from %s", name, _peer(context))
                try:
                    result = method(self, context, request, *rest)
                except flight.FlightError as exc:
                    level = error_level(exc)
                    log.log(
                        level,
                        "%s failed: %s",
                        name,
                        exc,
                        exc_info=exc.__cause__ if level >= logging.ERROR else None,
                    )
                    raise
                log.debug("%s done in %.3f s", name, time.perf_counter() - began)
                return result

        return cast(F, call)

    return wrap
