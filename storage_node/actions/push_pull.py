"""Push-pull on a node: the compute node uploads processed variables' events (DoPut ``upload``),
the node keeps the candidates that complete a match with them (``push_pull``), and sends one
variable's candidates with their row ids (the ``pull_variable`` pull)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import MatchBudgetError, MatchLimitError, ProtocolError, WorkMemoryError
from dfs_cer.transport.protocol import ROW_ID, PushPull, Upload
from dfs_cer.work import Work
from storage_node.actions.base import Family, Reply, ship
from storage_node.rows import take
from storage_node.state import QueryState


class PushPullActions(Family):
    """``upload``, ``push_pull`` and ``pull_variable``."""

    def upload(self, header: dict[str, Any], table: pa.Table) -> None:
        """DoPut: the compute node sends a processed variable's events (push-pull)."""
        request = Upload.parse(header)
        state = self.node.registry.get(request.query_id)
        name = self.node.variable(state, request.variable, "upload")
        if table.schema.names != state.table.schema.names:
            raise ProtocolError(
                f"upload: columns {table.schema.names} differ from the shards' "
                f"{state.table.schema.names}"
            )
        previous = state.uploads.get(name)
        state.uploads[name] = table if previous is None else pa.concat_tables([previous, table])
        self.node.registry.account(state)  # the uploads count against the memory budget

    def push_pull(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Keep the requested variable's candidates that complete a match of the pattern projected
        on the processed variables and itself, with the uploaded events (skip-till-any-match)."""
        from dfs_cer.match.push_pull import filter_by_projection, time_unit

        request = PushPull.parse(header)
        state = self.node.registry.get(request.query_id)
        name = self.node.variable(state, request.variable, "push_pull")
        processed = list(request.processed)
        missing = [p for p in processed if p not in state.uploads]
        if missing:
            raise ProtocolError(f"push_pull: no events uploaded for {missing}")
        rows = state.candidates[name]
        before = rows.size
        unfiltered: dict[str, str] = {}
        with self.node.working(state.query_id) as work:
            try:
                keep = filter_by_projection(
                    state.analysis.query,
                    name,
                    take(state.table, rows, work),
                    {p: state.uploads[p] for p in processed},
                    work,
                    request.max_matches,
                    request.max_steps,
                    integer_time_unit=time_unit(state.analysis),
                )
            except (
                WorkMemoryError,
                MatchLimitError,
                MatchBudgetError,
            ) as exc:  # a bound of the filter's work: it only narrows, keeping every candidate
                # is exact (the compute node falls back to push-down and says why)
                keep = np.ones(rows.size, bool)
                unfiltered["unfiltered"] = str(exc)
        state.candidates[name] = rows[keep]
        return {"before": int(before), "survivors": int(keep.sum()), **unfiltered}, []

    def pull_variable(
        self, state: QueryState, header: dict[str, Any], blobs: list[bytes], work: Work
    ) -> pa.Table:
        """One variable's current candidates, with their row ids (:data:`ROW_ID`)."""
        name = self.node.variable(state, header, "pull_variable")
        rows = state.candidates[name]
        ship(state, rows)
        return take(state.table, rows, work).append_column(ROW_ID, pa.array(rows))
