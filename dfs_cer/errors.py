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


class ConfigError(DfsCerError):
    """A configuration key holds a value of the wrong type or outside its range."""

    exit_code = 2


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
        return (_rebuild_query_error, (type(self), self.message, self.clause, self.position, self.hint, self.code))


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



class StorageError(DfsCerError):
    """A shard or object could not be read or written."""


class ProtocolError(DfsCerError):
    """A storage node or compute node received a malformed or unexpected message."""


class MatchError(DfsCerError):
    """Matching failed at run time (e.g. AFTER MATCH SKIP would not move forward)."""


class MatchLimitError(DfsCerError):
    """Matching produced more results than ``max_matches`` allows."""




class WorkCancelledError(DfsCerError):
    """A query's work stopped: its deadline passed or it was closed (the compute node gave up)."""


class WorkMemoryError(DfsCerError):
    """A query's work would take more memory than its storage node can grant it."""
