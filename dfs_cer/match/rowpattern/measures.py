"""MEASURES over matched rows, vectorised.

Matches come from the VM as flattened rows (match id, row, label, excluded). Every measure is
evaluated for every output row at once: leaves (column references, navigation, CLASSIFIER(),
MATCH_NUMBER(), aggregates) become position or value arrays computed with segmented scans over
the flattened rows; pyarrow evaluates the rest of the expression.

Semantics: RUNNING at an output row sees the match up to that row; FINAL sees the whole match;
ONE ROW PER MATCH evaluates at the last row, so RUNNING equals FINAL there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from dfs_cer.errors import MatchError, UnsupportedFeatureError
from dfs_cer.match.arrow_eval import _broadcast, evaluate
from dfs_cer.match.columns import column_of
from dfs_cer.match.rowpattern import aggregates
from dfs_cer.query.expr import (
    Aggregate,
    Classifier,
    Column,
    Expr,
    MatchNumber,
    Navigation,
    NavKind,
    Semantics,
    Star,
    to_sql,
    walk,
)
from dfs_cer.query.numeric import to_double


@njit(cache=True)
def _running_last(flags: np.ndarray, rows: np.ndarray, seg_first: np.ndarray) -> np.ndarray:
    """Per flattened row: the latest row at or before it in its match with ``flags`` set (-1:
    none)."""
    out = np.empty(rows.shape[0], np.int64)
    cur = -1
    for i in range(rows.shape[0]):
        if seg_first[i]:
            cur = -1
        if flags[i]:
            cur = rows[i]
        out[i] = cur
    return out


@njit(cache=True)
def _running_count(flags: np.ndarray, seg_first: np.ndarray) -> np.ndarray:
    out = np.empty(flags.shape[0], np.int64)
    c = 0
    for i in range(flags.shape[0]):
        if seg_first[i]:
            c = 0
        if flags[i]:
            c += 1
        out[i] = c
    return out


@njit(cache=True)
def _running_agg(
    values: np.ndarray, valid: np.ndarray, seg_first: np.ndarray, kind: int
) -> tuple[np.ndarray, np.ndarray]:
    """kind 0 sum, 1 min, 2 max, 3 count of valid; returns (value, has_value)."""
    out = np.empty(values.shape[0], np.float64)
    has = np.zeros(values.shape[0], np.bool_)
    acc = 0.0
    seen = False
    cnt = 0
    for i in range(values.shape[0]):
        if seg_first[i]:
            acc, seen, cnt = 0.0, False, 0
        if valid[i]:
            v = values[i]
            if kind == 0:
                acc += v
            elif kind == 1:
                acc = v if not seen or v < acc else acc
            elif kind == 2:
                acc = v if not seen or v > acc else acc
            cnt += 1
            seen = True
        out[i] = np.float64(cnt) if kind == 3 else acc
        has[i] = seen
    return out, has


@njit(cache=True)
def _running_int(
    values: np.ndarray, valid: np.ndarray, seg_first: np.ndarray, kind: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Exact running sum (kind 0), min (1) or max (2) of int64 values; the flag says a sum
    overflowed int64 (SQL raises an error there)."""
    out = np.zeros(values.shape[0], np.int64)
    has = np.zeros(values.shape[0], np.bool_)
    acc = np.int64(0)
    seen = False
    overflow = False
    for i in range(values.shape[0]):
        if seg_first[i]:
            acc, seen = np.int64(0), False
        if valid[i]:
            v = values[i]
            if kind == 0:
                total = acc + v
                if (v > 0 and total < acc) or (v < 0 and total > acc):
                    overflow = True
                acc = total
            elif kind == 1:
                acc = v if not seen or v < acc else acc
            else:
                acc = v if not seen or v > acc else acc
            seen = True
        out[i] = acc
        has[i] = seen
    return out, has, overflow


@dataclass
class MatchRows:
    """The VM's output plus the sorted table it refers to."""

    table: pa.Table
    labels: tuple[str, ...]
    members: np.ndarray  # (names, V)
    names: dict[str, int]
    part_bounds: np.ndarray  # partition boundaries
    row_part: np.ndarray  # partition index of every table row
    m_start: np.ndarray
    m_end: np.ndarray
    m_part: np.ndarray
    r_match: np.ndarray
    r_row: np.ndarray
    r_label: np.ndarray
    r_excl: np.ndarray

    @property
    def match_number(self) -> np.ndarray:
        """MATCH_NUMBER() of every match: 1, 2, ... within each partition."""
        n = self.m_start.size
        if n == 0:
            return np.zeros(0, np.int64)
        new_part = np.ones(n, bool)
        new_part[1:] = self.m_part[1:] != self.m_part[:-1]
        idx = np.arange(n)
        base = np.maximum.accumulate(np.where(new_part, idx, 0))
        return idx - base + 1


class MeasureEvaluator:
    """Evaluates measure expressions for a set of output rows.

    ``out_match`` is the match of each output row; ``out_flat`` the flattened row index it
    stands at (RUNNING semantics), or -1 for an empty match.
    """

    def __init__(self, rows: MatchRows, out_match: np.ndarray, out_flat: np.ndarray) -> None:
        self.rows = rows
        self.out_match = out_match
        self.out_flat = out_flat
        self.n = out_match.size
        m = rows.m_start.size
        # flattened-row index range of every match
        counts = rows.m_end - rows.m_start
        self.flat_start = (
            np.concatenate([[0], np.cumsum(counts)[:-1]]) if m else np.zeros(0, np.int64)
        )
        self.flat_last = self.flat_start + counts - 1  # -1 relative for empty matches
        self.seg_first = np.zeros(rows.r_row.size, bool)
        nonempty = counts > 0
        self.seg_first[self.flat_start[nonempty]] = True
        self._cache: dict[tuple[object, ...], np.ndarray] = {}

    # ---------------------------------------------------------------- positions

    def _final_flat(self) -> np.ndarray:
        """Flattened index of the last row of each output row's match (-1 if empty)."""
        m = self.out_match
        counts = self.rows.m_end[m] - self.rows.m_start[m]
        return np.where(counts > 0, self.flat_last[m], -1)

    def _at(self, semantics: Semantics | None) -> np.ndarray:
        return self._final_flat() if semantics is Semantics.FINAL else self.out_flat

    def _flags(self, name: str | None) -> np.ndarray:
        if name is None:
            return np.ones(self.rows.r_row.size, bool)
        members = self.rows.members[self.rows.names[name]]
        return members[self.rows.r_label]

    def _running_last(self, name: str | None) -> np.ndarray:
        key = ("last", name)
        if key not in self._cache:
            self._cache[key] = _running_last(self._flags(name), self.rows.r_row, self.seg_first)
        return self._cache[key]

    def _count(self, name: str | None) -> np.ndarray:
        key = ("count", name)
        if key not in self._cache:
            self._cache[key] = _running_count(self._flags(name), self.seg_first)
        return self._cache[key]

    def _name_rows(self, name: str | None) -> tuple[np.ndarray, np.ndarray]:
        """Rows labelled ``name`` in flattened order, and the index of each match's first one."""
        key = ("rows", name)
        if key not in self._cache:
            flags = self._flags(name)
            rows = self.rows.r_row[flags]
            matches = self.rows.r_match[flags]
            start = np.searchsorted(matches, np.arange(self.rows.m_start.size))
            self._cache[key] = rows
            self._cache[("rows_start", name)] = start
        return self._cache[key], self._cache[("rows_start", name)]

    def position(
        self, name: str | None, logical: NavKind, offset: int, semantics: Semantics | None
    ) -> np.ndarray:
        """Row (index into the sorted table) a logical navigation points at, -1 for none."""
        at = self._at(semantics)
        valid = at >= 0
        safe = np.where(valid, at, 0)
        count = np.where(valid, self._count(name)[safe] if self.rows.r_row.size else 0, 0)
        rows, start = self._name_rows(name)
        m = self.out_match
        k = count - 1 - offset if logical == NavKind.LAST else np.where(offset < count, offset, -1)
        ok = valid & (k >= 0) & (k < count)
        idx = np.where(ok, (start[m] if m.size else m) + np.where(ok, k, 0), 0)
        return np.where(ok, rows[idx] if rows.size else -1, -1)

    def _physical(self, pos: np.ndarray, step: int) -> np.ndarray:
        if step == 0:
            return pos
        target = pos + step
        part = self.rows.row_part[np.where(pos >= 0, pos, 0)] if pos.size else pos
        lo = self.rows.part_bounds[part]
        hi = self.rows.part_bounds[part + 1]
        return np.where((pos >= 0) & (target >= lo) & (target < hi), target, -1)

    def _take(self, column: str, pos: np.ndarray) -> pa.Array:
        table = self.rows.table
        arr = table.column(column_of(table, column)).combine_chunks()
        taken = arr.take(pa.array(np.where(pos >= 0, pos, 0)))
        return pc.if_else(pa.array(pos >= 0), taken, pa.scalar(None, arr.type))

    def _label_at(self, pos: np.ndarray, semantics: Semantics | None) -> np.ndarray:
        """Label id of row ``pos`` in each output row's match, -1 outside the match. MEASURES see
        the complete match, so a row past the current one has its label (as Trino:
        ``NEXT(CLASSIFIER())`` on the first row of ``A B+`` is ``B``)."""
        m = self.out_match
        valid = (pos >= 0) & (pos >= self.rows.m_start[m]) & (pos < self.rows.m_end[m])
        lab = np.full(self.n, -1)
        if valid.any():
            lab[valid] = self.rows.r_label[self._flat_of(pos[valid], m[valid])]
        return lab

    def _labels(self, lab: np.ndarray) -> pa.Array:
        names = pa.array(list(self.rows.labels), pa.string())
        if len(names) == 0:  # a pattern without variables (PATTERN (())): no row has a label
            return pa.nulls(len(lab), pa.string())
        return pc.if_else(
            pa.array(lab >= 0),
            names.take(pa.array(np.where(lab >= 0, lab, 0))),
            pa.scalar(None, pa.string()),
        )

    # ---------------------------------------------------------------- leaves

    def leaf(self, x: Expr) -> pa.Array:
        if isinstance(x, Column):
            return self._take(x.name, self.position(x.variable, NavKind.LAST, 0, None))
        if isinstance(x, Navigation):
            semantics = x.semantics
            if x.kind.physical:
                step = -x.offset if x.kind == NavKind.PREV else x.offset
                inner = x.operand
                if isinstance(inner, Navigation):
                    semantics = semantics or inner.semantics
                    logical, loff, col = inner.kind, inner.offset, inner.operand
                else:
                    logical, loff, col = NavKind.LAST, 0, inner
            else:
                step, logical, loff, col = 0, x.kind, x.offset, x.operand
            if isinstance(col, Classifier):
                semantics = semantics or col.semantics
                pos = self._physical(self.position(col.variable, logical, loff, semantics), step)
                return self._labels(self._label_at(pos, semantics))
            if not isinstance(col, Column):
                raise UnsupportedFeatureError(
                    f"navigation over an expression ({to_sql(x)}) in MEASURES",
                    clause="MEASURES",
                    hint="navigate a single column or CLASSIFIER()",
                    code="unsupported",
                )
            pos = self._physical(self.position(col.variable, logical, loff, semantics), step)
            return self._take(col.name, pos)
        if isinstance(x, Classifier):
            pos_flat = self._at(x.semantics)
            if x.variable is None:
                valid = pos_flat >= 0
                lab = np.where(
                    valid,
                    self.rows.r_label[np.where(valid, pos_flat, 0)]
                    if self.rows.r_label.size
                    else 0,
                    -1,
                )
            else:
                row = self.position(x.variable, NavKind.LAST, 0, x.semantics)
                valid = row >= 0
                # label of that row within its match: find it in the flattened rows
                lab = np.full(self.n, -1)
                if valid.any():
                    flat = self._flat_of(row[valid], self.out_match[valid])
                    lab[valid] = self.rows.r_label[flat]
            return self._labels(lab)
        if isinstance(x, MatchNumber):
            return pa.array(
                self.rows.match_number[self.out_match] if self.n else np.zeros(0, np.int64)
            )
        if isinstance(x, Aggregate):
            return self._aggregate(x)
        raise UnsupportedFeatureError(
            f"{to_sql(x)} in MEASURES", clause="MEASURES", code="unsupported"
        )

    def _flat_of(self, rows: np.ndarray, matches: np.ndarray) -> np.ndarray:
        return self.flat_start[matches] + (rows - self.rows.m_start[matches])

    def _flat_values(self, e: Expr) -> pa.Array:
        """``e`` evaluated at every flattened row (as the row of an aggregate's argument)."""
        key = ("flat", e)
        if key not in self._cache:
            rows = self.rows
            size = rows.r_row.size

            def leaf(x: Expr) -> pa.Array:
                # X.col / CLASSIFIER(X) read the row where it is mapped to X, NULL elsewhere (the
                # arguments run over X's rows anyway; a FILTER may name X over all rows)
                if isinstance(x, Column):
                    at = (
                        rows.r_row
                        if x.variable is None
                        else np.where(self._flags(x.variable), rows.r_row, -1)
                    )
                    return self._take(x.name, at)
                if isinstance(x, Classifier):
                    lab = (
                        rows.r_label
                        if x.variable is None
                        else np.where(self._flags(x.variable), rows.r_label, -1)
                    )
                    return self._labels(lab) if size else pa.array([], pa.string())
                if isinstance(x, MatchNumber):
                    return pa.array(
                        rows.match_number[rows.r_match] if size else np.zeros(0, np.int64)
                    )
                raise UnsupportedFeatureError(
                    f"{to_sql(x)} inside an aggregate", clause="MEASURES", code="unsupported"
                )

            self._cache[key] = _broadcast(evaluate(e, leaf, size), size)
        return self._cache[key]

    def _aggregate(self, agg: Aggregate) -> pa.Array:
        # the rows of the one variable the arguments name (validated); FILTER only tests them
        names = {
            n.variable
            for a in agg.args
            for n in walk(a)
            if isinstance(n, Column | Star | Classifier)
        }
        name = next(iter(names)) if names else None
        flags = self._flags(name)
        if agg.filter is not None:
            test = self._flat_values(agg.filter)
            flags = flags & np.asarray(
                pc.fill_null(test, False).to_numpy(zero_copy_only=False), bool
            )
        at = self._at(agg.semantics)
        valid_at = at >= 0
        safe = np.where(valid_at, at, 0)
        star = not agg.args or isinstance(agg.args[0], Star)
        if agg.name == "count" and star:
            counts = _running_count(flags, self.seg_first)
            return pa.array(np.where(valid_at, counts[safe] if counts.size else 0, 0), pa.int64())
        values = self._flat_values(agg.args[0])
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if agg.distinct:
            keep = aggregates.first_occurrences(self.rows.r_match, values, np.nonzero(flags)[0])
            flags = np.zeros_like(flags)
            flags[keep] = True
        not_null = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
        if agg.name in ("array_agg", "string_agg"):
            included = flags if agg.name == "array_agg" else flags & not_null
            items = values if agg.name == "array_agg" else pc.cast(values, pa.string())
            lists, _ = aggregates.prefix_lists(
                items, np.nonzero(included)[0], self.out_match, at, self.flat_start
            )
            if agg.name == "array_agg":
                return lists
            separator = agg.args[1].value if len(agg.args) > 1 else ","  # type: ignore[attr-defined]
            return pc.binary_join(lists, separator)
        valid = flags & not_null
        if agg.name in ("count", "count_if"):
            if agg.name == "count_if":
                if values.type != pa.bool_():
                    raise MatchError(
                        f"count_if takes a condition, got {values.type}: {to_sql(agg)}"
                    )
                valid = valid & np.asarray(
                    values.fill_null(False).to_numpy(zero_copy_only=False), bool
                )
            counts = _running_count(valid, self.seg_first)
            return pa.array(np.where(valid_at, counts[safe] if counts.size else 0, 0), pa.int64())
        if agg.name in ("any_value", "min_by", "max_by", "bool_and", "bool_or"):
            return self._picked(agg, values, flags, valid, at)
        if agg.name in ("stddev", "variance", "stddev_pop", "var_pop"):
            return self._spread(agg, values, valid, valid_at, safe)
        exact = self._exact_aggregate(agg, values, valid, valid_at, safe)
        if exact is not None:
            return exact
        if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
            raise UnsupportedFeatureError(
                f"aggregate {agg.name} over {values.type}: {to_sql(agg)}",
                clause="MEASURES",
                code="unsupported",
                hint="sum and avg take integers or doubles (CAST decimals AS DOUBLE)",
            )
        numbers = np.asarray(
            to_double(values).fill_null(0.0).to_numpy(zero_copy_only=False), np.float64
        )
        kinds = {"sum": 0, "min": 1, "max": 2, "avg": 0}
        acc, has = _running_agg(numbers, valid, self.seg_first, kinds[agg.name])
        got = np.where(valid_at, acc[safe] if acc.size else 0.0, 0.0)
        present = valid_at & (has[safe] if has.size else False)
        if agg.name == "avg":
            cnt, _ = _running_agg(numbers, valid, self.seg_first, 3)
            c = np.where(valid_at, cnt[safe] if cnt.size else 0.0, 0.0)
            got = np.where(c > 0, got / np.where(c > 0, c, 1), 0.0)
        return pa.array(got, mask=~present)

    def _picked(
        self, agg: Aggregate, values: pa.Array, flags: np.ndarray, valid: np.ndarray, at: np.ndarray
    ) -> pa.Array:
        """any_value, min_by / max_by (the first row on ties), bool_and / bool_or."""
        valid_at = at >= 0
        safe = np.where(valid_at, at, 0)
        if agg.name in ("bool_and", "bool_or"):
            if values.type != pa.bool_():
                raise MatchError(f"{agg.name} takes a condition, got {values.type}: {to_sql(agg)}")
            keys = np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), np.int64)
            pick = aggregates.running_pick(
                keys, valid, self.seg_first, 1 if agg.name == "bool_and" else 2
            )
        elif agg.name == "any_value":
            pick = aggregates.running_pick(np.zeros(valid.size, np.int64), valid, self.seg_first, 0)
        else:
            by = self._flat_values(agg.args[1])
            if pa.types.is_dictionary(by.type):
                by = by.dictionary_decode()
            by_valid = flags & np.asarray(by.is_valid().to_numpy(zero_copy_only=False), bool)
            ranks = (
                np.asarray(
                    pc.rank(by, sort_keys="ascending", tiebreaker="dense").to_numpy(
                        zero_copy_only=False
                    ),
                    np.int64,
                )
                if len(by)
                else np.zeros(0, np.int64)
            )
            pick = aggregates.running_pick(
                ranks, by_valid, self.seg_first, 1 if agg.name == "min_by" else 2
            )
        chosen = np.where(valid_at, pick[safe] if pick.size else -1, -1)
        taken = (
            values.take(pa.array(np.where(chosen >= 0, chosen, 0)))
            if len(values)
            else pa.nulls(chosen.size, values.type)
        )
        return pc.if_else(pa.array(chosen >= 0), taken, pa.scalar(None, values.type))

    def _spread(
        self,
        agg: Aggregate,
        values: pa.Array,
        valid: np.ndarray,
        valid_at: np.ndarray,
        safe: np.ndarray,
    ) -> pa.Array:
        """stddev / variance (samples) and stddev_pop / var_pop, as DOUBLE."""
        if not (
            pa.types.is_integer(values.type)
            or pa.types.is_floating(values.type)
            or pa.types.is_decimal(values.type)
        ):
            raise MatchError(f"{agg.name} takes numbers, got {values.type}: {to_sql(agg)}")
        numbers = np.asarray(
            to_double(values).fill_null(0.0).to_numpy(zero_copy_only=False), np.float64
        )
        cnt, _, m2 = aggregates.running_moments(numbers, valid, self.seg_first)
        c = np.where(valid_at, cnt[safe] if cnt.size else 0, 0)
        s = np.where(valid_at, m2[safe] if m2.size else 0.0, 0.0)
        sample = agg.name in ("stddev", "variance")
        denominator = c - 1 if sample else c
        present = denominator > 0 if sample else c > 0
        var = np.where(present, s / np.where(denominator > 0, denominator, 1), 0.0)
        out = np.sqrt(np.maximum(var, 0.0)) if agg.name.startswith("stddev") else var
        return pa.array(out, pa.float64(), mask=~present)

    def _exact_aggregate(
        self,
        agg: Aggregate,
        values: pa.Array,
        valid: np.ndarray,
        valid_at: np.ndarray,
        safe: np.ndarray,
    ) -> pa.Array | None:
        """min / max of any orderable column (in its own type) and sum of integers, exactly;
        None for the aggregates the float path computes."""
        if agg.name in ("min", "max") and not pa.types.is_floating(values.type):
            # running min/max of dense ranks, mapped back to the values: exact for uint64,
            # decimals, strings and timestamps alike
            ranks = (
                np.asarray(
                    pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy(
                        zero_copy_only=False
                    ),
                    np.int64,
                )
                - 1
            )
            acc, has, _ = _running_int(ranks, valid, self.seg_first, 1 if agg.name == "min" else 2)
            present = valid_at & (has[safe] if has.size else False)
            distinct = pc.unique(values.filter(pc.is_valid(values))).sort()
            picked = (
                distinct.take(pa.array(np.where(present, acc[safe] if acc.size else 0, 0)))
                if len(distinct)
                else pa.nulls(len(present), values.type)
            )
            return pc.if_else(pa.array(present), picked, pa.scalar(None, values.type))
        if agg.name == "sum" and pa.types.is_integer(values.type):
            if pa.types.is_uint64(values.type) and (pc.max(values).as_py() or 0) >= 2**63:
                raise MatchError(
                    f"sum({to_sql(agg.args[0])}) over uint64 values above 2**63 overflows BIGINT"
                )
            ints = np.asarray(
                pc.cast(values, pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64
            )
            acc, has, overflow = _running_int(ints, valid, self.seg_first, 0)
            if overflow:
                raise MatchError(f"{to_sql(agg)} overflows BIGINT (more than 2**63 - 1 in a match)")
            present = valid_at & (has[safe] if has.size else False)
            return pa.array(
                np.where(present, acc[safe] if acc.size else 0, 0), pa.int64(), mask=~present
            )
        return None

    def evaluate(self, e: Expr) -> pa.Array:
        return _broadcast(evaluate(e, self.leaf, self.n), self.n)
