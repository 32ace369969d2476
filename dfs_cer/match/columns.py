"""Columns of the events by the names an analysis bound (dfs_cer.query.bind): exact lookups; and
the matchers' string options, checked where a matcher starts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dfs_cer.errors import MatchError
from dfs_cer.transport.protocol import HALO  # the wire name, defined once

__all__ = ["HALO", "check_choice", "column_of", "split_halo"]


def column_of(table: pa.Table, name: str) -> str:
    """``name`` as a column of ``table``: the analysis bound every name to the schema's spelling
    (dfs_cer.query.bind), so it is looked up exactly."""
    if name in table.column_names:
        return name
    raise MatchError(
        f"column {name!r} is not a column of the events ({', '.join(table.column_names)}); analyze "
        "the query with the events' schema (analyze(query, table.schema)) so its names are bound"
    )


def check_choice(value: object, choices: tuple[str, ...], name: str) -> None:
    if value not in choices:
        from dfs_cer.errors import ConfigError

        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def split_halo(table: pa.Table) -> tuple[pa.Table, np.ndarray | None]:
    """``table`` without the :data:`HALO` column, and the column as a bool array (None: no column).

    The column marks *halo* rows: rows pulled only so that PREV/NEXT read the right neighbours.
    Navigation reads them; no match contains them, except as rows a skip variable
    (``{- N* -}``) absorbs between pattern variables."""
    if HALO not in table.column_names:
        return table, None
    col = table.column(HALO)
    flags = np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), bool)
    return table.drop([HALO]), flags
