"""Situations on a node: derived fragments (``situations``) and the rows inside per-partition
time intervals (the ``pull_times`` pull, for situations' measures)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dfs_cer.errors import DfsCerError, ProtocolError
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import SEGMENT
from storage_node.actions.base import Family, Reply, int_times, ipc_stream, table_blob
from storage_node.rows import take

if TYPE_CHECKING:
    from dfs_cer.situations.model import SituationQuery


class SituationActions(Family):
    """``situations`` and ``pull_times``."""

    def situations(self, header: dict[str, Any], blobs: list[bytes]) -> Reply:
        """Situation fragments of the shard set, read within a reservation like any read (a
        query naming another table than this node's log is refused first)."""
        from dfs_cer.query.names import check_table
        from dfs_cer.situations import parse_situations

        try:
            query = parse_situations(field(header, "sql", str, "situations"))
        except DfsCerError as exc:
            raise ProtocolError(f"action situations: not a situation query ({exc})") from None
        check_table(query.table, self.node.store.name)
        return self.node.admitted("situations", lambda: self._situations(header, query))

    def _situations(self, header: dict[str, Any], query: SituationQuery) -> Reply:
        """Situation fragments of this shard set (see dfs_cer.situations.fragments): runs of
        every symbol's condition per time block, and each block's first time. Only shard sets
        partitioned by time hold whole blocks; others answer ``derived: false``."""
        from dfs_cer.events.time import time_values
        from dfs_cer.io.shard import window_units
        from dfs_cer.query.expr import Navigation, walk
        from dfs_cer.situations.fragments import block_fragments
        from dfs_cer.situations.run import column_name, condition_masks, sorted_rows

        self.node.store.refresh()
        manifest = self.node.store.manifest
        if manifest.get("partitioning") != "time":
            return {
                "derived": False,
                "reason": f"the shard set is partitioned by {manifest.get('partitioning')}, "
                "not time: a node does not hold whole time blocks (re-shard with --partitioning "
                "time to derive situations on the storage nodes)",
            }, []
        if not self.node.relies(header, "situations"):
            return {
                "derived": False,
                "reason": f"a storage node is one of {manifest.get('nodes')} of its shard set, "
                f"the query runs on {header.get('nodes')}: its time blocks may lie on other "
                "nodes too",
            }, []
        if any(isinstance(n, Navigation) for sit in query.situations for n in walk(sit.condition)):
            return {
                "derived": False,
                "reason": "PREV/NEXT in a condition reads rows of the neighbouring block",
            }, []
        table = self.node.store.sorted_rows(self.node.current())
        rows, part, bounds = sorted_rows(table, query, tuple(manifest.get("event_key") or ()), True)
        order = column_name(rows, query.order_by)
        if order != self.node.store.time_column:
            return {
                "derived": False,
                "reason": f"the shards are blocked by {self.node.store.time_column}, "
                f"the query orders by {order}",
            }, []
        n = rows.num_rows
        ts = time_values(rows, order) if n else np.zeros(0, np.int64)
        dtype = rows.schema.field(order).type
        units = window_units(dtype)
        masks = condition_masks(
            rows, query, bounds[part] if n else part, bounds[part + 1] if n else part
        )
        partition = [column_name(rows, c) for c in query.partition_by]
        fragments, blocks = block_fragments(rows, partition, ts, units, masks)
        return {
            "derived": True,
            "layout": self.node.layout(),
            "fragments": fragments.num_rows,
            "blocks": blocks.num_rows,
            "rows": n,
        }, [
            ipc_stream(fragments),
            ipc_stream(blocks),
            self.node.store.schema.serialize().to_pybytes(),
        ]

    def pull_times(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        """Rows inside per-partition time intervals, read within a reservation like any read."""
        return self.node.admitted("pull_times", lambda: self._pull_times(header, blobs))

    def _pull_times(self, header: dict[str, Any], blobs: list[bytes]) -> pa.Table:
        """Rows whose partition key and time fall in one of the intervals of an Arrow table
        ``(partition columns..., __lo, __hi)`` (inclusive, disjoint per partition), with only
        the ``columns`` asked for."""
        from dfs_cer.local import sandboxed_duckdb

        intervals = table_blob(blobs, "pull_times", "interval table")
        table = self.node.store.sorted_rows(self.node.current())
        columns = header.get("columns") or table.column_names
        if (
            not isinstance(columns, list)
            or any(c not in table.column_names for c in columns)
            or len(set(columns)) != len(columns)
        ):
            raise ProtocolError(
                f"pull_times: columns must name distinct columns of {table.column_names}"
            )
        keys = [c for c in intervals.column_names if c not in ("__lo", "__hi", "__k")]
        if any(k not in table.column_names for k in keys) or not {"__lo", "__hi", "__k"} <= set(
            intervals.column_names
        ):
            raise ProtocolError(
                "pull_times: the interval table needs partition columns, __lo, __hi and __k"
            )
        ts = int_times(table.column(self.node.store.time_column))
        con = sandboxed_duckdb()
        try:
            con.register("iv", intervals)
            # disjoint per partition: each row comes back at most once (no output of rows x
            # intervals)
            by = ", ".join(f'"{k}"' for k in keys) or "NULL"
            overlaps = con.execute(
                f"SELECT count(*) FROM (SELECT __lo, lag(__hi) OVER (PARTITION BY {by} ORDER BY "
                "__lo) AS prev FROM iv) WHERE prev >= __lo"
            ).fetchall()[0][0]
            if overlaps:
                raise ProtocolError(
                    f"pull_times: {overlaps} intervals overlap others of their partition; send "
                    "disjoint intervals"
                )
            con.register(
                "r",
                table.select(keys)
                .append_column("__t", pa.array(ts))
                .append_column("__i", pa.array(np.arange(table.num_rows, dtype=np.int64))),
            )
            on = " AND ".join(
                [f'r."{k}" IS NOT DISTINCT FROM iv."{k}"' for k in keys]
                + ["r.__t BETWEEN iv.__lo AND iv.__hi"]
            )
            got = con.sql(
                f"SELECT r.__i, iv.__k FROM r JOIN iv ON {on} ORDER BY r.__i"
            ).fetchnumpy()
        finally:
            con.close()
        rows = np.asarray(got["__i"], np.int64)
        # each row says which interval it came from (rows of different intervals were not adjacent)
        return take(table.select(columns), rows, self.node.current()).append_column(
            SEGMENT, pa.array(np.asarray(got["__k"], np.int64))
        )
