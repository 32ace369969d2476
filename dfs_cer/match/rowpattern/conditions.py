"""DEFINE conditions for the row-pattern VM.

Each variable's condition is split on its top-level ANDs into

- *row-local* conjuncts: they read only the current row, possibly through physical navigation
  (``B.price > PREV(B.price)``). They become one boolean mask per variable, computed over whole
  columns with pyarrow before the VM runs (the VM sees labels, not rows);
- *dependent* conjuncts: they read rows matched to other variables (``M.district =
  B.district``, ``C.price < FIRST(B.price)``), running aggregates (``sum(B.x) < 10``,
  ``count(U.*)``) or labels (``PREV(CLASSIFIER()) = 'A'``). They compile to a small postfix
  program that the VM evaluates for a thread, only where the mask already says yes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dfs_cer.errors import MatchError, UnsupportedFeatureError
from dfs_cer.events.time import time_ints
from dfs_cer.match.arrow_eval import evaluate_mask
from dfs_cer.match.columns import column_of
from dfs_cer.match.rowpattern.exact import RankSpace, is_wide
from dfs_cer.query.expr import (
    Aggregate,
    Between,
    BinaryOp,
    Case,
    Classifier,
    Column,
    Expr,
    Function,
    InList,
    IntervalLiteral,
    IsNull,
    Literal,
    MatchNumber,
    Navigation,
    NavKind,
    Star,
    UnaryOp,
    conjuncts,
    to_sql,
    walk,
)
from dfs_cer.query.model import MatchRecognize, WindowUnit, exact_duration
from dfs_cer.query.numeric import convert, is_exact, to_double

# condition program opcodes
(
    C_CONST,
    C_COL,
    C_ADD,
    C_SUB,
    C_MUL,
    C_DIV,
    C_MOD,
    C_NEG,
    C_CMP,
    C_AND,
    C_OR,
    C_NOT,
    C_ISNULL,
    C_AGG,
    C_CLS,
    C_MNUM,
    C_COALESCE,
    C_CASE,
    C_FUNC,
) = range(19)
#: numeric functions the VM evaluates over navigated values (others are hoisted into columns)
VM_FUNCTIONS = {"abs": 0, "sign": 1, "floor": 2, "ceil": 3}
_AGGREGATES = {"count": 0, "sum": 1, "avg": 2, "min": 3, "max": 4}
#: the statistics of a running aggregate each function reads (bits: 1 count, 2 sum, 4 min, 8 max)
STAT_BITS = {0: 1, 1: 2, 2: 1 | 2, 3: 4, 4: 8}
_CMP = {"=": 0, "<>": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
_ARITH = {"+": C_ADD, "-": C_SUB, "*": C_MUL, "/": C_DIV, "%": C_MOD}
K_INT, K_FLOAT, K_BOOL, K_NULL = 0, 1, 2, 3
UNIVERSAL = -1
_PER_SECOND = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}


def _row_local(e: Expr, variable: str) -> bool:
    """Reads only the current row (directly or through PREV/NEXT)?"""

    def ok(x: Expr, inside_physical: bool) -> bool:
        if isinstance(x, Aggregate | Classifier | MatchNumber | Star):
            return False
        if isinstance(x, Column):
            return x.variable in (None, variable)
        if isinstance(x, Navigation):
            if x.kind == NavKind.FIRST:
                return False
            if x.kind == NavKind.LAST:
                return x.offset == 0 and ok(x.operand, inside_physical)
            return ok(x.operand, True)
        from dfs_cer.query.expr import children

        return all(ok(c, inside_physical) for c in children(x))

    return ok(e, False)


@dataclass
class ColumnStore:
    """Numeric copies of the columns dependent conditions read (strings as order-preserving
    codes)."""

    icols: list[np.ndarray] = field(default_factory=list)
    inull: list[np.ndarray] = field(default_factory=list)
    fcols: list[np.ndarray] = field(default_factory=list)
    fnull: list[np.ndarray] = field(default_factory=list)
    index: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (kind, slot)
    dictionary: pa.Array | None = None
    # string column -> its codes in ``dictionary`` (encoded once by prepare_strings)
    string_codes: dict[str, np.ndarray] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    wide: dict[str, bool] = field(default_factory=dict)  # columns beyond int64 / 15 digits


@dataclass
class Conditions:
    masks: np.ndarray  # (V, n) bool
    dependent: np.ndarray  # (V,) bool
    code: np.ndarray  # (k, 7) int64: op, a, b, c, d, e, f
    code_start: np.ndarray  # (V + 1,) offsets into code
    const_i: np.ndarray
    const_f: np.ndarray
    const_kind: np.ndarray
    icols: np.ndarray  # (ni, n) int64
    inull: np.ndarray
    fcols: np.ndarray  # (nf, n) float64
    fnull: np.ndarray
    members: np.ndarray  # (V + S, V) bool: rows labelled which variables count for a name
    deep_navigation: bool  # logical offsets > 0: the VM keeps full paths distinct
    #: (2, V + S) bool: names whose first (row 0) / last (row 1) matched position dependent code
    #: reads (FIRST(x.c) / x.c or LAST(x.c)); the VM keys thread equivalence on only those
    relevant: np.ndarray
    #: (A, 4) int64: the running aggregates dependent code reads, one per (column slot, kind,
    #: name): slot, kind (-1 counts rows), name id and the statistics read (a bit each: 1 count,
    #: 2 sum, 4 min, 8 max); the C_AGG code's field 5 is its row
    accumulators: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))


def _column_array(table: pa.Table, name: str) -> pa.Array:
    col = table.column(column_of(table, name))
    if isinstance(col, pa.ChunkedArray):  # one chunk: itself (combining it would copy it)
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def shifted(arr: pa.Array, offset: int, part_start: np.ndarray, part_end: np.ndarray) -> pa.Array:
    """``arr`` moved by ``offset`` rows within each partition (NULL where it leaves the
    partition)."""
    n = len(arr)
    idx = np.arange(n) + offset
    valid = (idx >= part_start) & (idx < part_end)
    kind = arr.type
    numeric = pa.types.is_integer(kind) or pa.types.is_float32(kind) or pa.types.is_float64(kind)
    if numeric and n and abs(offset) < n:  # the values moved in numpy, NULLs as a mask
        values = (arr.fill_null(0) if arr.null_count else arr).to_numpy(zero_copy_only=False)
        out = np.empty(n, values.dtype)
        nulls = ~valid
        if offset >= 0:
            out[: n - offset] = values[offset:]
        else:
            out[-offset:] = values[: n + offset]
        if arr.null_count:
            was = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)
            moved = np.zeros(n, bool)
            if offset >= 0:
                moved[: n - offset] = was[offset:]
            else:
                moved[-offset:] = was[: n + offset]
            nulls |= moved
        out[nulls] = 0
        return pa.array(out, type=kind, mask=nulls)
    taken = arr.take(pa.array(np.where(valid, idx, 0)))
    return pc.if_else(pa.array(valid), taken, pa.scalar(None, arr.type))


class ConditionCompiler:
    def __init__(
        self,
        mr: MatchRecognize,
        labels: tuple[str, ...],
        table: pa.Table,
        part_start: np.ndarray,
        part_end: np.ndarray,
        time_unit: str | None,
    ) -> None:
        self.mr = mr
        self.labels = labels
        self.table = table
        self.part_start = part_start
        self.part_end = part_end
        self.time_unit = time_unit
        self.names = {name: i for i, name in enumerate(labels)}
        for i, s in enumerate(mr.subsets):
            self.names[s.name] = len(labels) + i
        self.store = ColumnStore()
        self.code: list[list[int]] = []
        self.const_i: list[int] = []
        self.const_f: list[float] = []
        self.const_kind: list[int] = []
        self.deep = False
        self.relevant = np.zeros((2, len(self.names)), bool)
        self.label_base = -1  # const index of the first label's string code (CLASSIFIER)
        #: (slot, kind, name id) -> [index, statistics read]: the running aggregates
        self.accumulators: dict[tuple[int, int, int], list[int]] = {}
        #: how the comparison being emitted reads numbers: None (int64 / double), "double"
        #: (wide numbers as doubles, next to an approximate operand) or "rank" (exact codes)
        self.mode: str | None = None
        self.ranks: RankSpace | None = None

    # ---------------------------------------------------------------- masks

    def _resolve(self, variable: str) -> Callable[[Expr], pa.Array]:
        def resolve(x: Expr) -> pa.Array:
            if isinstance(x, Column):
                return _column_array(self.table, x.name)
            if isinstance(x, Navigation):
                if x.kind == NavKind.LAST:
                    return (
                        resolve(x.operand)
                        if isinstance(x.operand, Column | Navigation)
                        else evaluate_any(x.operand, resolve, len(self.table))
                    )
                step = -x.offset if x.kind == NavKind.PREV else x.offset
                inner = evaluate_any(x.operand, resolve, len(self.table))
                return shifted(inner, step, self.part_start, self.part_end)
            raise AssertionError(type(x).__name__)

        return resolve

    def mask(self, variable: str, parts: list[Expr]) -> np.ndarray:
        n = len(self.table)
        out = np.ones(n, bool)
        resolve = self._resolve(variable)
        for part in parts:
            out &= np.asarray(evaluate_mask(part, resolve, n).to_numpy(zero_copy_only=False), bool)
        return out

    # ---------------------------------------------------------------- dependent programs

    def _const(self, value: object) -> int:
        if value is None:
            self.const_kind.append(K_NULL)
            self.const_i.append(0)
            self.const_f.append(0.0)
        elif isinstance(value, bool):
            self.const_kind.append(K_BOOL)
            self.const_i.append(int(value))
            self.const_f.append(float(value))
        elif isinstance(value, Decimal) or (
            isinstance(value, int) and not -(2**63) <= value < 2**63
        ):  # exact for comparisons up to 15 digits (wider ones are ranked)
            self.const_kind.append(K_FLOAT)
            self.const_i.append(0)
            self.const_f.append(float(value))
        elif isinstance(value, int):
            self.const_kind.append(K_INT)
            self.const_i.append(value)
            self.const_f.append(float(value))
        elif isinstance(value, float):
            self.const_kind.append(K_FLOAT)
            self.const_i.append(0)
            self.const_f.append(value)
        else:
            raise TypeError(type(value))
        return len(self.const_kind) - 1

    def _string_code(self, value: str) -> int:
        assert self.store.dictionary is not None
        return int(pc.index_in(pa.scalar(value), value_set=self.store.dictionary).as_py())

    def prepare_strings(self, dependent: list[Expr]) -> None:
        """One sorted dictionary for every string column and constant the dependent code reads,
        so codes compare like the strings. Each column is hashed once (dictionary-encoded); its
        codes are its dictionary's places in the merged sorted dictionary."""
        encoded: dict[str, pa.DictionaryArray] = {}
        values = []
        for e in dependent:
            for x in walk(e):
                if isinstance(x, Column) and x.name not in encoded:
                    arr = _column_array(self.table, x.name)
                    value_type = (
                        arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
                    )
                    if not (pa.types.is_string(value_type) or pa.types.is_large_string(value_type)):
                        continue
                    if not pa.types.is_dictionary(arr.type):
                        arr = pc.dictionary_encode(arr)
                    encoded[x.name] = arr
                    values.append(pc.cast(arr.dictionary, pa.string()))
                elif isinstance(x, Literal) and isinstance(x.value, str):
                    values.append(pa.array([x.value], pa.string()))
        if any(isinstance(x, Classifier) for e in dependent for x in walk(e)):
            values.append(pa.array(list(self.labels), pa.string()))
        if not values:
            return
        merged = pa.chunked_array(values).combine_chunks()
        self.store.dictionary = pc.unique(merged).sort()
        for name, arr in encoded.items():
            places = pc.index_in(arr.dictionary, value_set=self.store.dictionary)
            remap = np.append(np.asarray(places.fill_null(0).to_numpy(zero_copy_only=False)), 0)
            indices = arr.indices.fill_null(-1) if arr.indices.null_count else arr.indices
            # a NULL row reads code 0 (its null flag is what the program tests)
            self.store.string_codes[name] = remap[np.asarray(indices.to_numpy(), np.int64)]

    # ---------------------------------------------------------------- exact numbers

    def _wide(self, name: str) -> bool:
        if name not in self.store.wide:
            self.store.wide[name] = is_wide(_column_array(self.table, name).type)
        return self.store.wide[name]

    def _compare_mode(self, left: Expr, right: Expr, clause: str) -> str | None:
        """How ``left <op> right`` reads numbers (see ``self.mode``)."""
        columns = [x.name for side in (left, right) for x in walk(side) if isinstance(x, Column)]
        types = [_column_array(self.table, c).type for c in columns]
        literals = [x.value for side in (left, right) for x in walk(side) if isinstance(x, Literal)]
        simple = all(_simple_operand(side) for side in (left, right))
        if (
            simple
            and any(pa.types.is_float32(t) for t in types)
            and not any(pa.types.is_float64(t) for t in types)
            and not any(isinstance(v, float) for v in literals)
            and any(_exact_literal(v) for v in literals) | any(is_exact(t) for t in types)
        ):
            return "real"  # REAL next to an exact number compares as REAL (Trino, DuckDB)
        huge = any(_wide_literal(v) for v in literals)
        if not huge and not any(self._wide(c) for c in columns):
            return None
        approximate = any(pa.types.is_floating(t) for t in types) or any(
            isinstance(v, float) for v in literals
        )
        if approximate:
            return "double"  # SQL compares exact with approximate numbers as doubles
        if all(_simple_operand(side) for side in (left, right)):
            return "rank"
        # computed operands: the VM's arithmetic is in doubles (a documented approximation)
        return "double"

    def prepare_ranks(self, dependent: list[tuple[str, Expr]]) -> None:
        """One rank space for every column and integer literal of the comparisons that read wide
        numbers exactly (dfs_cer.match.rowpattern.exact)."""
        columns: dict[str, pa.Array] = {}
        literals: list[int | Decimal] = []
        for variable, e in dependent:
            for left, right in _comparisons(e):
                if self._compare_mode(left, right, f"DEFINE {variable}") != "rank":
                    continue
                for x in (*walk(left), *walk(right)):
                    if isinstance(x, Column):
                        columns[x.name] = _column_array(self.table, x.name)
                    elif isinstance(x, Literal) and _exact_literal(x.value):
                        literals.append(x.value)  # type: ignore[arg-type]
        if columns:
            self.ranks = RankSpace(list(columns.values()), literals)

    def _column_slot(self, name: str, mode: str | None = None) -> tuple[int, int]:
        wide = self._wide(name)
        key = (
            name
            if mode is None
            or (mode == "double" and not wide)
            or (mode == "real" and not is_exact(_column_array(self.table, name).type))
            else f"{name}\x00{mode}"
        )
        if key in self.store.index:
            return self.store.index[key]
        arr = _column_array(self.table, name)
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)
        if mode == "real" and is_exact(
            arr.type
        ):  # as the REAL it is compared as, held exactly in a double
            real = convert(arr, arr.type, pa.float32())
            self.store.fcols.append(
                np.asarray(
                    pc.cast(real, pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False),
                    np.float64,
                )
            )
            self.store.fnull.append(nulls)
            self.store.index[key] = (K_FLOAT, len(self.store.fcols) - 1)
            return self.store.index[key]
        if mode == "rank":
            assert self.ranks is not None
            self.store.icols.append(self.ranks.codes(arr))
            self.store.inull.append(nulls)
            self.store.index[key] = (K_INT, len(self.store.icols) - 1)
            return self.store.index[key]
        if (
            name in self.store.string_codes
            or pa.types.is_string(arr.type)
            or pa.types.is_large_string(arr.type)
        ):
            codes = self.store.string_codes.get(name)
            if codes is None:
                assert self.store.dictionary is not None
                found = pc.index_in(arr, value_set=self.store.dictionary).fill_null(0)
                codes = np.asarray(found.to_numpy(zero_copy_only=False), np.int64)
            self.store.icols.append(codes)
            self.store.inull.append(nulls)
            slot = (K_INT, len(self.store.icols) - 1)
        elif pa.types.is_floating(arr.type) or pa.types.is_decimal(arr.type) or wide:
            vals = to_double(arr).fill_null(0.0).to_numpy(zero_copy_only=False)
            self.store.fcols.append(np.asarray(vals, np.float64))
            self.store.fnull.append(nulls)
            slot = (K_FLOAT, len(self.store.fcols) - 1)
        elif (
            pa.types.is_integer(arr.type)
            or pa.types.is_boolean(arr.type)
            or pa.types.is_temporal(arr.type)
        ):
            if pa.types.is_timestamp(arr.type) or pa.types.is_date(arr.type):
                # every time value in one unit, so columns of different units compare (and
                # INTERVALs add) as the instants they are
                vals = self._in_time_unit(arr, name)
            else:
                vals = pc.cast(arr, pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
            self.store.icols.append(np.asarray(vals, np.int64))
            self.store.inull.append(nulls)
            slot = (K_INT, len(self.store.icols) - 1)
        else:
            raise UnsupportedFeatureError(
                f"column {name} of type {arr.type} cannot be compared across variables",
                clause="DEFINE",
                code="unsupported",
            )
        self.store.index[key] = slot
        return slot

    def prepare_time_unit(self, dependent: list[Expr]) -> None:
        """The unit time values take in the programs: the finest of the timestamp columns they
        read and of the INTERVALs added to them (``INTERVAL '0.5' SECOND`` is 500 ms: in
        seconds, ``B.ts < A.ts + INTERVAL '0.5' SECOND`` would read ``B.ts < A.ts``), else the
        ORDER BY column's."""
        units = [
            _column_array(self.table, x.name).type.unit
            for e in dependent
            for x in walk(e)
            if isinstance(x, Column)
            and pa.types.is_timestamp(_column_array(self.table, x.name).type)
        ]
        if units:
            units += [
                exact[1]
                for e in dependent
                for x in walk(e)
                if isinstance(x, IntervalLiteral)
                and (exact := exact_duration(x.value, x.unit)) is not None
            ]
            self.time_unit = max(units, key=lambda u: _PER_SECOND[u])

    def _in_time_unit(self, arr: pa.Array, name: str) -> np.ndarray:
        unit = self.time_unit or "s"
        values = time_ints(arr.fill_null(0) if arr.null_count else arr)
        factor = (
            _PER_SECOND[unit] * 86400
            if pa.types.is_date(arr.type)
            else _PER_SECOND[unit] // _PER_SECOND[arr.type.unit]
        )
        if (
            factor == 0
        ):  # a finer column than the program's unit cannot happen (the finest is chosen)
            raise AssertionError(f"{name}: {arr.type} in {unit}")
        limit = np.iinfo(np.int64).max // factor
        if values.size and (values.max() > limit or values.min() < -limit):
            raise MatchError(
                f"time values of {name} do not fit 64 bits in {unit}; compare it with columns of "
                "its own unit"
            )
        self.store.units[name] = unit
        return np.asarray(values, np.int64) * factor

    def _interval(self, x: IntervalLiteral) -> int:
        unit = self.time_unit or "s"
        per_second = {
            "s": Decimal(1),
            "ms": Decimal(1000),
            "us": Decimal(10**6),
            "ns": Decimal(10**9),
        }[unit]
        amount = Decimal(x.value) * WindowUnit(x.unit).seconds * per_second
        return self._const(int(amount))

    def emit(self, e: Expr, variable: str, nav: tuple[int, int, int, int] | None = None) -> None:
        """Postfix code for ``e``; ``nav`` = (name id, logical kind, logical offset, physical
        offset)."""
        clause = f"DEFINE {variable}"
        if isinstance(e, Literal):
            if isinstance(e.value, str):
                self.code.append([C_CONST, self._const(self._string_code(e.value)), 0, 0, 0, 0, 0])
            elif (
                self.mode == "real"
                and isinstance(e.value, int | Decimal)
                and not isinstance(e.value, bool)
            ):
                real = pc.cast(pa.scalar(str(e.value)), pa.float32())  # correctly rounded to REAL
                self.code.append([C_CONST, self._const(float(real.as_py())), 0, 0, 0, 0, 0])
            elif (
                self.mode == "rank"
                and isinstance(e.value, int | Decimal)
                and not isinstance(e.value, bool)
            ):
                assert self.ranks is not None
                self.code.append([C_CONST, self._const(self.ranks.code(e.value)), 0, 0, 0, 0, 0])
            else:
                self.code.append([C_CONST, self._const(e.value), 0, 0, 0, 0, 0])
        elif isinstance(e, IntervalLiteral):
            self.code.append([C_CONST, self._interval(e), 0, 0, 0, 0, 0])
        elif isinstance(e, Column):
            kind, slot = self._column_slot(e.name, self.mode)
            if nav is None:
                name_id = UNIVERSAL if e.variable is None else self.names[e.variable]
                nav = (name_id, 0, 0, 0)
            elif nav[0] == -2:  # inside navigation without a qualifier yet
                nav = (
                    UNIVERSAL if e.variable is None else self.names[e.variable],
                    nav[1],
                    nav[2],
                    nav[3],
                )
            if nav[0] >= 0:  # FIRST reads the first position, x.c and LAST(x.c) the last
                self.relevant[0 if nav[1] == 1 else 1, nav[0]] = True
            self.code.append([C_COL, slot, kind, nav[0], nav[1], nav[2], nav[3]])
        elif isinstance(e, Aggregate):
            self._aggregate(e, clause)
        elif isinstance(e, MatchNumber):
            self.code.append([C_MNUM, 0, 0, 0, 0, 0, 0])
        elif isinstance(e, Function) and e.name == "coalesce":
            for a in e.args:
                self.emit(a, variable)
            self.code.append([C_COALESCE, len(e.args), 0, 0, 0, 0, 0])
        elif isinstance(e, Function) and e.name in VM_FUNCTIONS and len(e.args) == 1:
            self.emit(e.args[0], variable)
            self.code.append([C_FUNC, VM_FUNCTIONS[e.name], 0, 0, 0, 0, 0])
        elif isinstance(e, Case):
            for w in e.whens:
                self.emit(
                    w.condition if e.operand is None else BinaryOp("=", e.operand, w.condition),
                    variable,
                )
                self.emit(w.result, variable)
            self.emit(e.default if e.default is not None else Literal(None), variable)
            self.code.append([C_CASE, len(e.whens), 0, 0, 0, 0, 0])
        elif isinstance(e, Classifier):
            self._classifier(e, nav)
        elif isinstance(e, Navigation):
            # PREV/NEXT (physical) over FIRST/LAST (logical) over a column or CLASSIFIER(): one
            # position (name, logical kind, logical offset, physical step) whatever the target
            logical, loffset, physical = 0, 0, 0
            inner: Expr = e
            if e.kind.physical:
                physical = -e.offset if e.kind == NavKind.PREV else e.offset
                inner = e.operand
            if isinstance(inner, Navigation):
                logical = 0 if inner.kind == NavKind.LAST else 1
                loffset = inner.offset
                inner = inner.operand
            if isinstance(inner, Classifier):
                self._classifier(inner, (-2, logical, loffset, physical))
            elif isinstance(inner, Column):
                self.deep = self.deep or loffset > 0
                self.emit(inner, variable, (-2, logical, loffset, physical))
            else:
                raise UnsupportedFeatureError(
                    f"navigation over an expression ({to_sql(e)}) in a condition that refers to "
                    "other variables",
                    clause=clause,
                    hint="navigate a single column, e.g. PREV(B.price)",
                    code="unsupported",
                )
        elif isinstance(e, BinaryOp):
            if e.op in ("AND", "OR"):
                self.emit(e.left, variable)
                self.emit(e.right, variable)
                self.code.append([C_AND if e.op == "AND" else C_OR, 0, 0, 0, 0, 0, 0])
            elif e.op in _CMP:
                outer, self.mode = self.mode, self._compare_mode(e.left, e.right, clause)
                try:
                    self.emit(e.left, variable)
                    self.emit(e.right, variable)
                finally:
                    self.mode = outer
                self.code.append([C_CMP, _CMP[e.op], 0, 0, 0, 0, 0])
            elif e.op in _ARITH:
                self.emit(e.left, variable)
                self.emit(e.right, variable)
                self.code.append([_ARITH[e.op], 0, 0, 0, 0, 0, 0])
            else:
                raise UnsupportedFeatureError(
                    f"operator {e.op} in a condition that refers to other variables",
                    clause=clause,
                    code="unsupported",
                )
        elif isinstance(e, UnaryOp):
            self.emit(e.operand, variable)
            self.code.append([C_NOT if e.op == "NOT" else C_NEG, 0, 0, 0, 0, 0, 0])
        elif isinstance(e, IsNull):
            self.emit(e.operand, variable)
            self.code.append([C_ISNULL, int(e.negated), 0, 0, 0, 0, 0])
        elif isinstance(e, Between):
            self.emit(
                BinaryOp(
                    "AND", BinaryOp(">=", e.operand, e.low), BinaryOp("<=", e.operand, e.high)
                ),
                variable,
            )
            if e.negated:
                self.code.append([C_NOT, 0, 0, 0, 0, 0, 0])
        elif isinstance(e, InList):
            first = True
            for item in e.items:
                self.emit(BinaryOp("=", e.operand, item), variable)
                if not first:
                    self.code.append([C_OR, 0, 0, 0, 0, 0, 0])
                first = False
            if e.negated:
                self.code.append([C_NOT, 0, 0, 0, 0, 0, 0])
        else:
            raise UnsupportedFeatureError(
                f"{to_sql(e)} in a condition that refers to other pattern variables is not "
                "supported yet",
                clause=clause,
                hint="conditions across variables support columns, FIRST/LAST/PREV/NEXT, "
                "arithmetic, comparisons, AND/OR/NOT, IS NULL, IN and BETWEEN",
                code="unsupported",
            )

    def _aggregate(self, e: Aggregate, clause: str) -> None:
        """Running aggregate over the thread's matched rows (the current row included)."""
        func = _AGGREGATES.get(e.name)
        if func is None or e.distinct:
            raise UnsupportedFeatureError(
                f"aggregate {to_sql(e)} in DEFINE",
                clause=clause,
                code="unsupported",
                hint="supported: count, sum, avg, min, max without DISTINCT",
            )
        if e.name == "count" and (not e.args or isinstance(e.args[0], Star)):
            target = e.args[0].variable if e.args and isinstance(e.args[0], Star) else None
            slot, kind = 0, -1
        elif len(e.args) == 1 and isinstance(e.args[0], Column):
            column = e.args[0]
            arr = _column_array(self.table, column.name)
            numeric = (
                pa.types.is_integer(arr.type)
                or pa.types.is_floating(arr.type)
                or pa.types.is_decimal(arr.type)
            )
            if e.name != "count" and not numeric:
                raise UnsupportedFeatureError(
                    f"aggregate {to_sql(e)} over a {arr.type} column",
                    clause=clause,
                    hint="sum, avg, min and max take numeric columns",
                    code="unsupported",
                )
            kind, slot = self._column_slot(column.name)
            target = column.variable
        else:
            raise UnsupportedFeatureError(
                f"aggregate {to_sql(e)}: only one column argument is supported",
                clause=clause,
                hint="write e.g. sum(B.price) or count(B.*)",
                code="unsupported",
            )
        # the VM keeps the aggregate per thread, updated row by row: threads are keyed on its
        # value, not on their paths
        name_id = UNIVERSAL if target is None else self.names[target]
        acc = self.accumulators.setdefault((slot, kind, name_id), [len(self.accumulators), 0])
        acc[1] |= STAT_BITS[func]
        self.code.append([C_AGG, slot, kind, name_id, func, acc[0], 0])

    def _classifier(self, e: Classifier, nav: tuple[int, int, int, int] | None) -> None:
        """Label (as a string code) of the row a (navigated) CLASSIFIER points at."""
        if self.label_base < 0:
            codes = [self._string_code(name) for name in self.labels]
            self.label_base = len(self.const_kind)
            for code in codes:
                self._const(code)
        logical, loffset, physical = (0, 0, 0) if nav is None else nav[1:]
        name_id = UNIVERSAL if e.variable is None else self.names[e.variable]
        self.deep = True
        self.code.append([C_CLS, name_id, logical, loffset, physical, self.label_base, 0])


def _exact_literal(value: object) -> bool:
    return isinstance(value, Decimal) or (isinstance(value, int) and not isinstance(value, bool))


def _wide_literal(value: object) -> bool:
    """An exact literal a double would not compare exactly: integers beyond int64, decimals of
    more than 15 digits."""
    if isinstance(value, Decimal):
        return len(value.as_tuple().digits) > 15
    return isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63


def _simple_operand(e: Expr) -> bool:
    """A column (possibly navigated) or an exact / NULL literal: rank codes can stand for it."""
    while isinstance(e, Navigation):
        e = e.operand
    return isinstance(e, Column) or (
        isinstance(e, Literal) and (e.value is None or _exact_literal(e.value))
    )


def _comparisons(e: Expr) -> list[tuple[Expr, Expr]]:
    """Operand pairs of every comparison in ``e`` (IN and BETWEEN as the VM expands them)."""
    out: list[tuple[Expr, Expr]] = []
    for x in walk(e):
        if isinstance(x, BinaryOp) and x.op in _CMP:
            out.append((x.left, x.right))
        elif isinstance(x, InList):
            out += [(x.operand, item) for item in x.items]
        elif isinstance(x, Between):
            out += [(x.operand, x.low), (x.operand, x.high)]
    return out


def evaluate_any(e: Expr, resolve: Callable[[Expr], pa.Array], length: int) -> pa.Array:
    from dfs_cer.match.arrow_eval import _broadcast, evaluate

    return _broadcast(evaluate(e, resolve, length), length)


def compile_conditions(
    mr: MatchRecognize,
    labels: tuple[str, ...],
    table: pa.Table,
    part_start: np.ndarray,
    part_end: np.ndarray,
    time_unit: str | None,
) -> Conditions:
    """Masks and dependent programs for every pattern variable over the (sorted) table."""
    comp = ConditionCompiler(mr, labels, table, part_start, part_end, time_unit)
    n = len(table)
    masks = np.ones((len(labels), n), bool)
    dependent_parts: dict[str, list[Expr]] = {}
    for v, name in enumerate(labels):
        d = mr.definition(name)
        parts = [] if d is None else conjuncts(d.condition)
        local = [p for p in parts if _row_local(p, name)]
        dependent_parts[name] = [p for p in parts if not _row_local(p, name)]
        masks[v] = comp.mask(name, local)
    comp.prepare_strings([p for ps in dependent_parts.values() for p in ps])
    comp.prepare_ranks([(name, p) for name, ps in dependent_parts.items() for p in ps])
    comp.prepare_time_unit([p for ps in dependent_parts.values() for p in ps])
    starts = [0]
    for name in labels:
        for part in dependent_parts[name]:
            before = len(comp.code)
            comp.emit(part, name)
            if before != starts[-1] and len(comp.code) > before:
                comp.code.append([C_AND, 0, 0, 0, 0, 0, 0])
        starts.append(len(comp.code))
    members = np.zeros((len(comp.names), len(labels)), bool)
    for v in range(len(labels)):
        members[v, v] = True
    for i, s in enumerate(mr.subsets):
        for m in s.variables:
            members[len(labels) + i, labels.index(m)] = True
    store = comp.store

    def stack(cols: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.stack(cols) if cols else np.zeros((0, n), dtype)

    accumulators = np.array(
        [[slot, kind, name, stats] for (slot, kind, name), (_, stats) in comp.accumulators.items()],
        np.int64,
    ).reshape(-1, 4)
    return Conditions(
        masks=masks,
        dependent=np.array([bool(dependent_parts[name]) for name in labels], bool),
        code=np.array(comp.code, np.int64).reshape(-1, 7),
        code_start=np.array(starts, np.int64),
        const_i=np.array(comp.const_i or [0], np.int64),
        const_f=np.array(comp.const_f or [0.0], np.float64),
        const_kind=np.array(comp.const_kind or [K_NULL], np.int64),
        icols=stack(store.icols, np.int64),
        inull=stack(store.inull, bool),
        fcols=stack(store.fcols, np.float64),
        fnull=stack(store.fnull, bool),
        members=members,
        deep_navigation=comp.deep,
        relevant=comp.relevant,
        accumulators=accumulators,
    )


def row_masks(
    mr: MatchRecognize,
    parts: dict[str, tuple[Expr, ...]],
    table: pa.Table,
    part_start: np.ndarray,
    part_end: np.ndarray,
    time_unit: str | None,
) -> dict[str, np.ndarray]:
    """One mask per variable: its row-local conjuncts ``parts`` (physical navigation allowed)
    over the sorted ``table``, navigation bounded by ``part_start``/``part_end`` per row, exactly
    as :func:`compile_conditions` evaluates them (NULL is false)."""
    labels = tuple(dict.fromkeys(v.variable for v in mr.definitions))
    comp = ConditionCompiler(mr, labels, table, part_start, part_end, time_unit)
    out = {}
    for name, conj in parts.items():
        if any(not _row_local(p, name) for p in conj):
            raise AssertionError(f"{name}: a conjunct reads more than the current row")
        out[name] = comp.mask(name, list(conj))
    return out
