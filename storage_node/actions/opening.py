"""How ``open`` reads a query's rows on a node: the query, its event key, the rows each
variable may take (through the value indexes when it can), the input filter's checks, and what
the reply tells the compute node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from dfs_cer.config import QueryConfig
from dfs_cer.errors import DfsCerError, ProtocolError
from dfs_cer.io.shard import schema_digest
from dfs_cer.query import Analysis, Query, analyze, parse
from dfs_cer.query.arrow_filter import to_arrow_filter
from dfs_cer.query.expr import Column, walk
from dfs_cer.query.names import check_table
from dfs_cer.transport.messages import field
from dfs_cer.transport.protocol import LEASE_GRACE_SECONDS, MAX_HALO, lease
from storage_node.actions.base import Family, matching_rows, union_rows
from storage_node.rows import take
from storage_node.state import QueryState


class Opener(Family):
    """The helpers of ``open`` (the lifecycle family builds on them)."""

    def _query(
        self, header: dict[str, Any], action: str, navigation: bool = False, layout: bool = True
    ) -> tuple[Analysis, str]:
        """The request's query (checked to read this node's log, before any row is read) bound
        to the shard set's schema; with ``navigation``, its PREV/NEXT conditions checked here
        when the layout (which the query may rely on: ``layout``) lets this node."""
        qid = field(header, "query_id", str, action)
        try:
            if "sql" in header:  # canonical SQL text: a fraction of the model's JSON on the wire
                query = parse(field(header, "sql", str, action))
            else:
                query = Query.from_json(field(header, "query", str, action))
        except DfsCerError as exc:
            raise ProtocolError(
                f"action {action}: the query is not a valid query ({exc})"
            ) from None
        except RecursionError:
            raise ProtocolError(f"action {action}: the query is nested too deeply") from None
        except (ValueError, OverflowError) as exc:  # e.g. an integer literal of thousands of digits
            raise ProtocolError(
                f"action {action}: the query is not a valid query ({exc})"
            ) from None
        check_table(query.table, self.node.store.name)
        unit = header.get("integer_time_unit", "s")
        if unit not in ("s", "ms", "us", "ns"):
            raise ProtocolError(
                f"action {action}: integer_time_unit must be s, ms, us or ns, got {unit!r}"
            )
        config = QueryConfig(integer_time_unit=unit)
        analysis = analyze(query, self.node.store.schema, config)
        if navigation and self._navigation_mode(analysis, layout) is not None:
            analysis = analyze(query, self.node.store.schema, config, navigation_on_nodes=True)
        return analysis, qid

    def _navigation_mode(self, analysis: Analysis, layout: bool = True) -> str | None:
        """How this node can check PREV/NEXT conditions alone: ``partitions`` (it holds whole
        PARTITION BY groups), ``time`` (whole time windows of a shard set partitioned by the
        query's ORDER BY column) or None (random shards: the neighbours are anywhere; or a query
        that may not rely on the layout, ``layout`` False)."""
        mr = analysis.query.recognize
        if mr.all_matches or mr.order_by[0].descending or not layout:
            return None
        if self.node.local(analysis):
            return "partitions"
        if (
            self.node.store.manifest.get("partitioning") == "time"
            and analysis.order_column == self.node.store.time_column
        ):
            return "time"
        return None

    def _event_key(self, header: dict[str, Any], schema: pa.Schema) -> tuple[list[str], bool]:
        """The event key and dedup the compute node matches with (open's header, else the
        manifest's key), the key spelled as this node's columns."""
        from dfs_cer.query.bind import resolve_column

        key = header.get("event_key", self.node.store.manifest.get("event_key") or [])
        if not isinstance(key, list) or len(key) > 64 or any(not isinstance(c, str) for c in key):
            raise ProtocolError(
                f"open: event_key must list columns of this node's rows, got {key!r}"
            )
        try:  # spelled as the compute node's analysis resolves them (exact, else case-insensitive)
            key = [resolve_column(c, schema, "event key") for c in key]
        except DfsCerError as exc:
            raise ProtocolError(
                f"open: event_key must list columns of this node's rows ({exc})"
            ) from None
        dedup = header.get("dedup", True)
        if not isinstance(dedup, bool):
            raise ProtocolError(f"open: dedup must be true or false, got {dedup!r}")
        return key, dedup

    def _navigation_candidates(
        self,
        table: pa.Table,
        analysis: Analysis,
        header: dict[str, Any],
        candidates: dict[str, np.ndarray],
        layout: bool = True,
    ) -> dict[str, np.ndarray]:
        """Narrow each variable's candidates by its PREV/NEXT conjuncts, checked over this node's
        rows in the matcher's order (the event key and dedup the compute node matches with)."""
        from dfs_cer.io.shard import window_units
        from dfs_cer.match.rowpattern.navigation import navigation_masks

        mode = self._navigation_mode(analysis, layout)
        if mode is None or not any(v.navigating for v in analysis.variables):
            return candidates
        key, dedup = self._event_key(header, table.schema)
        self.node.check()
        masks = navigation_masks(
            table,
            analysis,
            key,
            dedup,
            mode,
            window_units(table.schema.field(self.node.store.time_column).type),
        )
        self.node.check()
        return {
            name: rows[masks[name][rows]] if name in masks else rows
            for name, rows in candidates.items()
        }

    def _candidates(
        self, table: pa.Table, analysis: Analysis, shared: dict[str, np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        """Rows of ``table`` each variable's independent condition accepts; ``shared`` caches them
        by condition across the queries of a group (identical conditions are evaluated once)."""
        indexed: pa.Table | None = None
        out: dict[str, np.ndarray] = {}
        for v in analysis.variables:
            if v.any_row:
                continue
            expr = to_arrow_filter(v.independent, table.schema)
            key = "TRUE" if expr is None else str(expr)
            if shared is not None and key in shared:
                out[v.name] = shared[key]
                continue
            if expr is None:
                rows = np.arange(table.num_rows, dtype=np.int64)
            else:
                if indexed is None:
                    indexed = table.append_column(
                        "__row", pa.array(np.arange(table.num_rows, dtype=np.int64))
                    )
                col = ds.dataset(indexed).to_table(filter=expr, columns=["__row"]).column("__row")
                rows = np.asarray(col.to_numpy(), np.int64)
            out[v.name] = rows
            if shared is not None:
                shared[key] = rows
        return out

    def _info(self, state: QueryState, bounds: bool = False) -> dict[str, Any]:
        """``open``'s reply for one query, before :meth:`OpenReply.lean` drops its defaults:
        each variable's candidates' first and last time only when asked (``bounds``), the
        matching calibration only where the nodes may match (whole partitions), the halo limit
        only below the protocol's, the row width to a tenth of a byte."""
        info = {}
        for name, rows in state.candidates.items():
            t = state.ts[rows]
            counts = {"count": int(rows.size)}
            info[name] = (
                {**counts, "min_ts": int(t.min()), "max_ts": int(t.max())}
                if bounds and t.size
                else counts
            )
        table = state.table
        # a group's table holds every row; report what this query alone would have scanned
        scanned = int(union_rows(state).size) if state.grouped else table.num_rows
        local = self.node.local(state.analysis, state.layout)
        return {
            "rows": scanned,
            "variables": info,
            "min_ts": self.node.store.manifest.get("min_ts"),
            "max_ts": self.node.store.manifest.get("max_ts"),
            "total_rows": self.node.store.manifest.get("rows"),
            "held_bytes": state.size_in_bytes(),
            "event_key": list(self.node.store.manifest.get("event_key") or []),
            "row_bytes": round(table.nbytes / table.num_rows, 1) if table.num_rows else 0.0,
            "schema_digest": schema_digest(self.node.store.schema),
            "data_digest": self.node.store.data_digest,
            "local_partitions": local,
            **(
                {"beta": self.node.betas, "match_cpu_budget": self.node.cpu_budget} if local else {}
            ),
            "time_column": self.node.store.time_column,
            **self.node.store.served_snapshot(),
            "navigation_on_node": state.navigation,
            "halo_limit": self.node.halo_limit if self.node.halo_limit < MAX_HALO else None,
            "table": self.node.store.name,
            "layout": self.node.layout(),
        }

    def _copies_whole(self, analysis: Analysis, key: list[str], layout: bool = True) -> bool:
        """Does this node hold every copy of each event it holds one of (rows equal in the
        query's partition, ORDER BY column and event ``key``)? Only then is the copy it keeps
        the copy the matcher keeps; else the compute node fetches each candidate's copies from
        every node. Never when the query may not rely on the layout (``layout`` False)."""
        manifest = self.node.store.manifest
        if not layout:
            return False
        if manifest.get("nodes") == 1:
            return True
        mr = analysis.query.recognize
        shared = {
            c.lower() for c in [*key, *mr.partition_by, analysis.order_column]
        }  # columns copies share
        how = manifest.get("partitioning")
        placed_by = {
            "time": [self.node.store.time_column],  # by time window
            "random": [self.node.store.time_column, *manifest.get("event_key", [])]
            if manifest.get("event_key")
            else None,  # by a hash of time and the shard set's key, else round robin
            "type": [manifest.get("type_column")],
        }.get(str(how))
        return placed_by is not None and all(
            isinstance(c, str) and c.lower() in shared for c in placed_by
        )

    def _indexed_rows(self, analysis: Analysis, filt: Any) -> tuple[pa.Table, np.ndarray] | None:
        """The node's rows by time and the positions of those passing ``filt`` (the union of the
        variables' independent conditions), found through the value indexes: only the rows of
        the values each variable's equality names are tested. None when some variable has no
        equality on an indexed column (the caller scans every row)."""
        from storage_node.index import equality, int_range

        parts: list[np.ndarray] = []
        rows: pa.Table | None = None
        for v in analysis.variables:
            if v.any_row:
                return None
            found = equality(v.independent, self.node.store.schema)
            if found is None:
                return None
            bounded = int_range(v.independent, self.node.store.schema, found[0])
            projected = (
                self.node.store.projection(found[0], bounded[0]) if bounded is not None else None
            )
            if (
                bounded is not None and projected is not None
            ):  # the value's rows inside the range only
                if parts and projected[0] is not rows:
                    return None
                rows = projected[0]
                parts.append(projected[2].rows(projected[1].codes(found[1]), bounded[1]))
                continue
            indexed = self.node.store.value_index(found[0])
            if indexed is None or (parts and indexed[0] is not rows):
                return None
            rows = indexed[0]
            parts.append(indexed[1].rows(found[1]))
        if rows is None:
            return None
        narrowed = np.sort(np.concatenate(parts), kind="stable")  # sorted runs: a merge
        if narrowed.size > 1:
            narrowed = narrowed[np.concatenate(([True], narrowed[1:] != narrowed[:-1]))]
        needed = sorted(
            {
                n.name
                for v in analysis.variables
                if v.independent is not None
                for n in walk(v.independent)
                if isinstance(n, Column)
            }
            & set(rows.column_names)
        )
        # only the columns the filter reads
        probe = take(rows.select(needed), narrowed, self.node.current())
        return rows, narrowed[matching_rows(probe, filt)]

    def _input_filter(self, header: dict[str, Any]) -> tuple[Any, Any]:
        """The open's ``input_filter`` (a row-local SQL condition) and its exact dataset filter
        over this node's rows, or (None, None); a condition outside the pushed subset, or one
        this node's columns cannot evaluate, is refused with the code the compute node falls
        back on."""
        raw = header.get("input_filter")
        if raw is None:
            return None, None
        from dfs_cer.query.input_filter import input_filter_expression, parse_input_filter

        condition = parse_input_filter(raw)
        return condition, input_filter_expression(condition, self.node.store.schema)

    def _filter_cost(self, condition: Any) -> None:
        """Refuse the input filter when its LIKE patterns would cost this node more than
        ``storage.filter_cost_limit`` character steps over its rows (the compute node then
        computes the input itself; see dfs_cer.query.filter_cost)."""
        import pyarrow.compute as pc

        from dfs_cer.errors import QueryValidationError
        from dfs_cer.query.bind import resolve_column
        from dfs_cer.query.filter_cost import check_like_size, filter_cost
        from dfs_cer.query.input_filter import INPUT_FILTER

        check_like_size(condition)
        seen: dict[str, tuple[int, int]] = {}

        def lengths(name: str) -> tuple[int, int]:
            if name not in seen:
                column = resolve_column(name, self.node.store.schema, "input filter")
                values = self.node.store.scan(
                    None, columns=[column], work=self.node.current()
                ).column(column)
                if pa.types.is_dictionary(
                    values.type
                ):  # what the filter reads: the decoded strings
                    values = values.cast(values.type.value_type)
                chars = (
                    pc.utf8_length(values)
                    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
                    else pa.array([], pa.int64())
                )
                seen[name] = (int(pc.sum(chars).as_py() or 0), int(pc.max(chars).as_py() or 0))
            return seen[name]

        cost = filter_cost(condition, lengths)
        if cost > self.node.filter_cost_limit:
            raise QueryValidationError(
                f"the input filter's LIKE patterns would cost this node about {cost:,} character "
                "steps over its rows, more than "
                f"storage.filter_cost_limit={self.node.filter_cost_limit:,}",
                clause="input filter",
                code=INPUT_FILTER,
                hint="the input is computed on the compute node instead",
            )

    def _no_nan(self, condition: Any) -> None:
        """Refuse the input filter when a floating-point column it reads holds NaN here (one
        scan of that column, of its NaN rows only)."""
        import pyarrow.compute as pc

        from dfs_cer.query.input_filter import nan_columns

        nan_columns(
            condition,
            self.node.store.schema,
            lambda c: self.node.store.scan(pc.is_nan(pc.field(c)), columns=[c]).num_rows > 0,
        )


def any_of(filters: list[Any]) -> Any:
    out = filters[0]
    for f in filters[1:]:
        out = out | f
    return out


def canonical_copies(table: pa.Table, analysis: Analysis, key: list[str]) -> np.ndarray:
    """Sorted indices of ``table``'s rows the matcher keeps when it drops copies of an event (same
    partition, ORDER BY values and event key): the first in its order. Copies of an event lie
    on one node (shards place them by time and key, by type or by time window), so only that
    copy may be a candidate: another copy passing a condition would stand for the event."""
    from dfs_cer.events.order import sort_and_partition

    mr = analysis.query.recognize
    order_by = (
        [(analysis.order_column, False)]
        if mr.all_matches
        else [(s.column, s.descending, bool(s.nulls_first)) for s in mr.order_by]
    )
    return np.sort(
        sort_and_partition(table, tuple(mr.partition_by), order_by, None, tuple(key), True)[2]
    )


def expiry(header: dict[str, Any]) -> float | None:
    """When an opened query's state expires: the compute node's time left for the query from
    now, plus a grace (None without one: the idle TTL only)."""
    import time

    seconds = lease(header)
    return None if seconds is None else time.monotonic() + seconds + LEASE_GRACE_SECONDS


def time_ranges(raw: object) -> np.ndarray | None:
    """``[[lo, hi], ...]`` (inclusive, in the time column's integer units) from an open header."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
        isinstance(r, list)
        and len(r) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
        and r[0] <= r[1]
        for r in raw
    ):
        raise ProtocolError(
            "action open: time_ranges must be a list of [lo, hi] integer pairs with lo <= hi"
        )
    return np.array(raw, np.int64).reshape(-1, 2)
