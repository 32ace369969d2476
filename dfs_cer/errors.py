"""One error hierarchy for dfs-cer.

Every error a user can trigger derives from :class:`DfsCerError`. Messages name the rule
that was broken, the offending value, and the fix, e.g.
``pattern variable B is defined twice in DEFINE; remove one of the definitions``.
"""

from __future__ import annotations

from dataclasses import dataclass


class DfsCerError(Exception):
    """Root of every error raised by dfs-cer on bad input or a failed dependency."""

    #: exit code the CLI uses when this error reaches it
    exit_code: int = 1
    #: stable machine-readable code the error travels with from a storage node to the compute
    #: node (Flight ``extra_info``); every class raised on a node names its own
    code: str = "error"


class ConfigError(DfsCerError):
    """A configuration key holds a value of the wrong type or outside its range."""

    exit_code = 2
    code = "config"


@dataclass(frozen=True, slots=True)
class SourcePosition:
    """A 1-based line and column in the SQL text the user gave."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


class QueryError(DfsCerError):
    """A query the front end cannot accept.

    Attributes:
        clause: the clause the problem is in (``PATTERN``, ``DEFINE``, ...), when known.
        position: where in the SQL text, when known.
        hint: how to fix it.
        code: a stable machine-readable code, e.g. ``undefined-variable``.
    """

    exit_code = 2
    #: the default; each instance carries its own (``undefined-variable``, ``input-filter``, ...)
    code = "invalid-query"

    def __init__(
        self,
        message: str,
        *,
        clause: str | None = None,
        position: SourcePosition | None = None,
        hint: str | None = None,
        code: str = "invalid-query",
    ) -> None:
        self.message = message
        self.clause = clause
        self.position = position
        self.hint = hint
        self.code = code
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.clause:
            where.append(self.clause)
        if self.position:
            where.append(str(self.position))
        text = f"{self.message}" + (f" (in {', '.join(where)})" if where else "")
        if self.hint:
            text += f"; {self.hint}"
        return text

    def __reduce__(self) -> tuple[object, ...]:
        # keyword-only constructor: pickle through a helper so errors cross process borders
        return (
            _rebuild_query_error,
            (type(self), self.message, self.clause, self.position, self.hint, self.code),
        )


def _rebuild_query_error(
    cls: type[QueryError],
    message: str,
    clause: str | None,
    position: SourcePosition | None,
    hint: str | None,
    code: str,
) -> QueryError:
    return cls(message, clause=clause, position=position, hint=hint, code=code)


class QuerySyntaxError(QueryError):
    """The SQL text does not parse."""


class QueryValidationError(QueryError):
    """The query parses but breaks a rule of row pattern recognition."""


class UnsupportedFeatureError(QueryError):
    """The query uses a construct dfs-cer does not (yet) evaluate."""


class FilterFormatError(DfsCerError):
    """A serialized filter is truncated, corrupted or of an unknown format version."""

    code = "filter-format"


class StorageError(DfsCerError):
    """A shard or object could not be read or written."""

    code = "storage"

    def __init__(self, *args: object, code: str | None = None) -> None:
        super().__init__(*args)
        if code is not None:  # a more precise code than the class's (e.g. SNAPSHOT_BUSY)
            self.code = code


#: a storage node serves running queries on another snapshot of the table than the one a query
#: asks for (a StorageError's code; the compute node tries the query again shortly)
SNAPSHOT_BUSY = "snapshot-busy"


class ProtocolError(DfsCerError):
    """A storage node or compute node received a malformed or unexpected message."""

    code = "protocol"


class MatchError(DfsCerError):
    """Matching failed at run time (e.g. AFTER MATCH SKIP would not move forward)."""

    code = "match"


class MatchBudgetError(MatchError):
    """Matching one partition took more thread steps than ``matcher.max_steps`` allows (a
    pattern whose work grows faster than its rows, over a long partition)."""

    code = "match-budget"


class MatchLimitError(DfsCerError):
    """Matching produced more results than ``max_matches`` allows."""

    code = "match-limit"


class WorkCancelledError(DfsCerError):
    """A query's work stopped: its deadline passed or it was closed (the compute node gave up)."""

    code = "work-cancelled"


class WorkMemoryError(DfsCerError):
    """A query's work would take more memory than its storage node can grant it."""

    code = "work-memory"


class OuterQueryLimitError(DfsCerError):
    """The SQL around MATCH_RECOGNIZE ran past the query's deadline or needed more than its memory
    limit (``query.outer_memory_limit``), or a string function in it was asked for a string past
    the limit on one string: the message names which and how to change it."""

    code = "outer-limit"


class AdmissionError(DfsCerError):
    """The storage node's memory budget cannot take another query now."""

    code = "admission"


class UnknownQueryError(DfsCerError):
    """No state for this query id (never opened, closed, or expired): the compute node re-opens
    the query once (a restarted node)."""

    code = "unknown-query"


class CacheMissError(DfsCerError):
    """A call referred to a blob the node no longer caches (it restarted): the compute node
    sends it again."""

    code = "cache-miss"
