"""The embedded engine that runs the SQL around MATCH_RECOGNIZE, sandboxed and bounded.

An outer query (and a subquery or CTE a clause reads) runs on an in-memory DuckDB that reads only
the relations registered on it (:func:`sandboxed_duckdb`: no file, network, extension or settings
access; the allow-lists of :mod:`dfs_cer.query.sandbox` are checked first) and that is bounded:

- in time, by the query's deadline (what is left of ``strategy.query_timeout_seconds`` or
  ``--timeout``): a timer interrupts the engine there, between batches of rows;
- in memory, by ``query.outer_memory_limit`` for the engine's joins, sorts, aggregates and CTEs
  (nothing spills to disk), and by as much again for the result, read batch by batch;
- in the one string a call builds (:mod:`dfs_cer.query.bounds`): ``lpad``, ``rpad``, ``repeat``,
  ``replace`` and ``regexp_replace`` fail before they start past ``outer_memory_limit / 2048``
  characters, which DuckDB would allocate outside its memory accounting.

Past any of them the query stops with an :class:`~dfs_cer.errors.OuterQueryLimitError` naming the
bound and how to move it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dfs_cer.config import Config
from dfs_cer.errors import OuterQueryLimitError
from dfs_cer.query.bounds import bound_strings, limit_message, string_limit
from dfs_cer.query.sandbox import check_outer

if TYPE_CHECKING:
    import duckdb

#: rows of the result read at a time (its bytes are counted batch by batch)
RESULT_BATCH_ROWS = 65_536


def sandboxed_duckdb(memory_limit: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reads only the relations registered on it: no file, network or
    extension access, and its settings locked (see dfs_cer.query.sandbox). With
    ``memory_limit`` (bytes), its operators hold at most that much and never spill to disk."""
    import duckdb

    config: dict[str, Any] = {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if memory_limit is not None:
        config.update(memory_limit=f"{int(memory_limit)}B", temp_directory="")
    config["lock_configuration"] = True  # last: locks what came before
    return duckdb.connect(config=config)


def deadline_of(config: Config, started: float | None = None) -> float:
    """The deadline (``time.monotonic()``) of a query that started at ``started`` (now when None)
    under ``strategy.query_timeout_seconds``."""
    return (time.monotonic() if started is None else started) + (
        config.strategy.query_timeout_seconds
    )


class OuterEngine:
    """One bounded, sandboxed DuckDB for a statement's outer SQL (a context manager): register
    relations, then read checked queries with :meth:`table`, until ``deadline``
    (``time.monotonic()``; None: ``strategy.query_timeout_seconds`` from now), within
    ``query.outer_memory_limit``."""

    def __init__(
        self, config: Config, deadline: float | None = None, dialect: str = "duckdb"
    ) -> None:
        self.memory_limit = config.query.outer_memory_limit
        self.deadline = deadline_of(config) if deadline is None else deadline
        self.dialect = dialect
        self.left = self.deadline - time.monotonic()  # what was left when the engine started
        self._fired = threading.Event()
        self._timer: threading.Timer | None = None
        self.con: duckdb.DuckDBPyConnection | None = None

    def __enter__(self) -> OuterEngine:
        self.con = sandboxed_duckdb(self.memory_limit)
        con = self.con

        def stop() -> None:
            self._fired.set()
            con.interrupt()

        self._timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.con is not None:
            self.con.close()

    def register(self, name: str, table: pa.Table) -> None:
        assert self.con is not None
        self.con.register(name, table)

    def prepared(self, sql: str, relations: Iterable[str]) -> str:
        """``sql`` after the sandbox's check, with its string-building calls bounded."""
        check_outer(sql, relations, self.dialect)
        con = self.con
        assert con is not None
        return bound_strings(
            sql,
            self.dialect,
            string_limit(self.memory_limit),
            lambda query: con.sql(query).columns,  # bound, not run: the names a guard keeps
        )

    def columns(self, sql: str, relations: Iterable[str]) -> list[str]:
        """The column names of a checked query, bound but not run."""
        con = self.con
        assert con is not None
        prepared = self.prepared(sql, relations)
        return list(self._run(lambda: con.sql(prepared).columns))

    def table(self, sql: str, relations: Iterable[str]) -> pa.Table:
        """The result of a checked query reading only ``relations``, within the bounds."""
        prepared = self.prepared(sql, relations)
        return self._run(lambda: self._read(prepared))

    def _read(self, sql: str) -> pa.Table:
        assert self.con is not None
        relation = self.con.sql(sql)
        reader = (
            relation.to_arrow_reader(RESULT_BATCH_ROWS)
            if hasattr(relation, "to_arrow_reader")
            else relation.fetch_record_batch(RESULT_BATCH_ROWS)
        )
        batches, size = [], 0
        for batch in reader:
            size += batch.nbytes
            if size > self.memory_limit:
                raise self._memory("its result")
            batches.append(batch)
        return pa.Table.from_batches(batches, reader.schema)

    def _run(self, work: Any) -> Any:
        import duckdb

        if self._fired.is_set() or time.monotonic() >= self.deadline:
            raise self._late()
        try:
            return work()
        except (duckdb.Error, pa.ArrowException, OSError) as exc:
            # the result's stream reports the engine's errors as Arrow's (an OSError)
            text = str(exc)
            if self._fired.is_set() and (
                isinstance(exc, duckdb.InterruptException) or "INTERRUPT Error" in text
            ):
                raise self._late() from None
            if isinstance(exc, duckdb.OutOfMemoryException) or "Out of Memory Error" in text:
                raise self._memory("its joins, sorts and aggregates") from None
            message = limit_message(text)
            if message is not None:
                raise OuterQueryLimitError(f"the SQL around MATCH_RECOGNIZE: {message}") from None
            if isinstance(exc, duckdb.Error):
                raise
            raise duckdb.Error(text) from exc

    def _late(self) -> OuterQueryLimitError:
        return OuterQueryLimitError(
            "the SQL around MATCH_RECOGNIZE ran past the query's deadline and was stopped (it had "
            f"{max(0.0, self.left):.1f} s of strategy.query_timeout_seconds / --timeout left); "
            "make it cheaper (fewer or narrower joins, a filter, a LIMIT) or give the query "
            "more time"
        )

    def _memory(self, what: str) -> OuterQueryLimitError:
        return OuterQueryLimitError(
            f"the SQL around MATCH_RECOGNIZE needed more than query.outer_memory_limit "
            f"({self.memory_limit / 1024**2:,.0f} MiB) for {what}; make it smaller (fewer or "
            "narrower joins, a filter, a LIMIT) or raise query.outer_memory_limit (e.g. "
            "DFS_CER__QUERY__OUTER_MEMORY_LIMIT=4GiB)"
        )
