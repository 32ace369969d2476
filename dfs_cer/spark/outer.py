"""The SQL around MATCH_RECOGNIZE on Spark SQL, bounded as on the embedded engine
(:mod:`dfs_cer.outer`): the query's deadline and the limit on one string.

Spark runs a statement when an action asks for its rows, so the statement dfs-cer hands back is
computed first (:func:`computed`: a local checkpoint on the executors) under a job tag that a
timer cancels at the query's deadline (what is left of ``strategy.query_timeout_seconds`` or the
``timeout`` option); a subquery a clause reads is collected under the same tag (:func:`within`).
Its string-building calls are guarded as on DuckDB (:mod:`dfs_cer.query.bounds`, with
``raise_error``). Its memory is Spark's: operators spill or fail within the executors' heap.
Past the deadline or the string limit the query stops with an
:class:`~dfs_cer.errors.OuterQueryLimitError`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dfs_cer.errors import OuterQueryLimitError
from dfs_cer.query.bounds import bound_strings, limit_message, string_limit

if TYPE_CHECKING:
    from dfs_cer.config import Config, StrategyConfig

#: how often the jobs of a block past its deadline are cancelled again (one it starts later too)
CANCEL_EVERY_SECONDS = 0.5


def deadline_of(timeout: float | None = None, config: StrategyConfig | None = None) -> float:
    """The deadline (``time.monotonic()``) of a query starting now with ``timeout`` seconds
    (None: ``config``'s ``query_timeout_seconds``, by default the loaded settings')."""
    from dfs_cer.config import load_config
    from dfs_cer.strategies.base import check_limits

    return time.monotonic() + check_limits(config or load_config().strategy, timeout)


def guarded(spark: Any, sql: str, config: Config | None = None) -> str:
    """Checked Spark SQL with its string-building calls bounded (``query.outer_memory_limit`` of
    ``config``, by default the loaded settings'), its columns named as before (``spark``
    analyses the original to name them)."""
    from dfs_cer.config import load_config

    limit = string_limit((config or load_config()).query.outer_memory_limit)
    return bound_strings(sql, "spark", limit, lambda query: spark.sql(query).columns)


@contextlib.contextmanager
def within(spark: Any, deadline: float | None) -> Iterator[None]:
    """Spark jobs started in the block run under a job tag cancelled at ``deadline``
    (``time.monotonic()``; None: no deadline); past it, or past a string guard, the block ends
    with an :class:`OuterQueryLimitError`."""
    if deadline is None:
        with _translated(None):
            yield
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise _late(0.0)
    context = spark.sparkContext
    tag = f"dfs_cer_outer_{uuid.uuid4().hex}"
    interrupt = context.getLocalProperty("spark.job.interruptOnCancel")
    done, fired = threading.Event(), threading.Event()

    def cancel() -> None:  # again and again: a job the block starts after the deadline too
        if done.wait(left):
            return
        fired.set()
        while True:
            context.cancelJobsWithTag(tag)
            if done.wait(CANCEL_EVERY_SECONDS):
                return

    context.addJobTag(tag)
    context.setInterruptOnCancel(True)  # tasks stop between rows, or at their next interrupt check
    threading.Thread(target=cancel, name=tag, daemon=True).start()
    try:
        with _translated(lambda: _late(left) if fired.is_set() else None):
            yield
    finally:
        done.set()
        context.removeJobTag(tag)
        context.setLocalProperty("spark.job.interruptOnCancel", interrupt)


def computed(spark: Any, frame: Any, deadline: float | None) -> Any:
    """``frame`` computed now, by ``deadline`` (its rows kept on the executors)."""
    with within(spark, deadline):
        return frame.localCheckpoint(eager=True)


@contextlib.contextmanager
def _translated(late: Any) -> Iterator[None]:
    try:
        yield
    except OuterQueryLimitError:
        raise
    except Exception as exc:
        error = late() if late is not None else None
        if error is not None:
            raise error from None
        message = limit_message(str(exc))
        if message is not None:
            raise OuterQueryLimitError(f"the SQL around MATCH_RECOGNIZE: {message}") from None
        raise


def _late(left: float) -> OuterQueryLimitError:
    return OuterQueryLimitError(
        "the SQL around MATCH_RECOGNIZE ran past the query's deadline on Spark and its jobs were "
        f"cancelled (it had {max(0.0, left):.1f} s of strategy.query_timeout_seconds / the "
        "timeout option left); make it cheaper (fewer or narrower joins, a filter, a LIMIT) or "
        "give the query more time"
    )
