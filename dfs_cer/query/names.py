"""The log's name: what ``FROM`` must say to read the storage nodes' rows.

``dfs-cer shard`` names the log it writes after its input (``ticks.parquet`` is ``ticks``; an
Iceberg table or a Hive prefix by the table's own name), or as ``--name`` says; storage nodes
serving a table in place name it the same way. A query's ``FROM`` (and any table its statement
reads that the caller did not register) must name that log: names compare as SQL identifiers
do in DuckDB and Trino, case-insensitively (quoted or not). Shard sets written before logs had
names are not checked (:func:`unchecked_note`).

Pure: no I/O; storage nodes and the compute node check with the same function.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from dfs_cer.errors import QueryValidationError, StorageError
from dfs_cer.query.expr import format_column_name

#: the code a query naming another table than the nodes' log is refused with
UNKNOWN_TABLE = "unknown-table"
#: the longest name a log may have
MAX_NAME = 128


def name_problem(name: str) -> str | None:
    """What keeps ``name`` from naming a log (None: nothing): it must not be empty, hold a dot
    (``FROM a.b`` reads table ``b`` of schema ``a``) or a control character, or be too long."""
    if not name.strip():
        return "it is empty"
    if "." in name:
        return "it holds a dot (FROM a.b reads table b of schema a)"
    if len(name) > MAX_NAME:
        return f"it is longer than {MAX_NAME} characters"
    if any(ord(c) < 32 for c in name):
        return "it holds a control character"
    return None


def same_name(asked: str, served: str) -> bool:
    """Does ``FROM asked`` name the log ``served``? (Case-insensitively, as SQL identifiers.)"""
    return asked.casefold() == served.casefold()


def shown(name: str) -> str:
    """``name`` as a query writes it (quoted when it is not a plain identifier)."""
    return format_column_name(name)


def check_table(asked: str, served: str | None, registered: Sequence[str] = ()) -> None:
    """Refuse ``FROM asked`` unless it names the log ``served`` (None: a log written without a
    name, not checked); ``registered`` are the caller's other tables, suggested too."""
    if served is None or same_name(asked, served):
        return
    others = [t for t in registered if not same_name(t, served)]
    close = difflib.get_close_matches(asked.casefold(), [t.casefold() for t in others], n=2)
    suggestions = [shown(served), *(shown(t) for t in others if t.casefold() in close)]
    raise QueryValidationError(
        f"table {shown(asked)} does not exist: the storage nodes serve the log {shown(served)}",
        clause="FROM",
        hint=f"did you mean {' or '.join(suggestions)}? (register other tables with --table "
        "NAME=FILE, or tables= in Python)",
        code=UNKNOWN_TABLE,
    )


def one_log(names: Sequence[str | None], where: Sequence[str]) -> str | None:
    """The one log nodes ``where`` serve (their ``names``; None: a node whose log has no name):
    an error naming two nodes that serve differently named logs."""
    named = [(n, w) for n, w in zip(names, where, strict=True) if n is not None]
    for name, node in named[1:]:
        if not same_name(name, named[0][0]):
            raise StorageError(
                f"the storage nodes serve different logs: {shown(named[0][0])} "
                f"({named[0][1]}) and {shown(name)} ({node}); serve one log's shard sets together "
                "(dfs-cer shard --name names the log a shard set holds)",
                code="mixed-logs",
            )
    return named[0][0] if named else None


def unchecked_note(asked: str) -> str:
    """The note of a query over shard sets written without a name."""
    return (
        f"the storage nodes' shard sets were written without a log name, so FROM {shown(asked)} "
        "is not checked against it (re-shard with dfs-cer shard, which names the log, to have "
        "it checked)"
    )
