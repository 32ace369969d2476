"""Row-local filters of a ``MATCH_RECOGNIZE`` clause's input, pushed to the storage nodes.

``FROM (SELECT * FROM t WHERE amount > 100 AND city = 'Oslo') MATCH_RECOGNIZE (...)``
matches over the rows of ``t`` that pass the condition: the others do not exist for the clause
(PREV/NEXT skip them, contiguous patterns run across them). Such a condition reads one row at a
time, so each storage node can drop those rows before anything else: before candidates, halo
rows and every pull. The compute node recognises the shape (:func:`pushable_input`), sends the
condition's SQL text at ``open``; the node parses it back into the expression model
(:func:`parse_input_filter`) and converts it exactly into an Arrow expression
(:func:`input_filter_expression`) or refuses with the code :data:`INPUT_FILTER` (the compute
node then reads the table whole, as for any other subquery, and names why in the trace).

Only a subset is pushed: the forms whose meaning is the same in the embedded engine that
computes the subquery elsewhere (DuckDB) and in Arrow's kernels, for every value: comparisons
of columns and literals, AND/OR/NOT, IS [NOT] NULL, IN, BETWEEN, LIKE, ``length`` and date and
timestamp literals. Everything else keeps the subquery on the compute node, because the engines
differ on some values: arithmetic (DuckDB widens integers where Arrow's checked kernels fail on
overflow; ``inf - inf`` is a NaN DuckDB orders above every number), ``trim`` (Arrow strips every
kind of white space, DuckDB spaces), ``upper``/``lower`` (different Unicode tables), division,
casts, CASE and other functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from dfs_cer.errors import QueryValidationError
from dfs_cer.query.arrow_filter import TEMPORAL_LITERALS
from dfs_cer.query.convert import Converter
from dfs_cer.query.expr import (
    MAX_DEPTH,
    Between,
    BinaryOp,
    Cast,
    Column,
    Expr,
    Function,
    InList,
    IsNull,
    Like,
    Literal,
    UnaryOp,
    depth,
    to_sql,
    transform,
    walk,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

#: the error code a storage node refuses an input filter with (the compute node falls back)
INPUT_FILTER = "input-filter"
#: the longest condition text a node accepts
MAX_TEXT = 64 * 1024
#: operators pushed as they are: both engines agree on them for every value
_OPERATORS = frozenset({"AND", "OR", "=", "<>", "<", "<=", ">", ">="})
#: unary functions both engines compute alike for every value
_FUNCTIONS = frozenset({"length"})
#: the longest LIKE pattern pushed (a long pattern of many ``%`` costs a node CPU per row)
MAX_LIKE = 256
#: the most digits of a pushed number literal (DuckDB reads longer ones as DOUBLE)
MAX_DIGITS = 18
#: the temporal literal forms both engines read alike
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
#: the clauses of a SELECT that keep the rows of its one table one by one
_ROW_LOCAL = frozenset({"expressions", "from", "from_", "where"})


def _refuse(message: str) -> QueryValidationError:
    return QueryValidationError(
        message,
        clause="input filter",
        code=INPUT_FILTER,
        hint="the input is computed on the compute node instead",
    )


def pushable_input(select: exp.Expression, names: set[str]) -> tuple[str, str] | None:
    """``(table, condition)`` when ``select`` is ``SELECT * FROM table [AS a] WHERE condition``
    over a table not among ``names`` (the statement's CTEs and relations; lower case) with a
    condition :func:`row_local` accepts, else None. The condition comes back as SQL text with
    column qualifiers (the table's name or alias) removed."""
    if not isinstance(select, exp.Select) or any(
        v for k, v in select.args.items() if k not in _ROW_LOCAL
    ):
        return None
    star = select.expressions[0] if len(select.expressions) == 1 else None
    if not isinstance(star, exp.Star) or any(star.args.values()):  # * EXCLUDE / REPLACE / RENAME
        return None
    source = select.args.get("from_") or select.args.get("from")
    where = select.args.get("where")
    if source is None or where is None or not isinstance(source.this, exp.Table):
        return None
    table = source.this
    alias = table.args.get("alias")
    # the table itself, perhaps renamed: no column list, sample, time travel, hints or joins
    if (
        not isinstance(table.this, exp.Identifier)
        or any(v for k, v in table.args.items() if k not in ("this", "alias"))
        or (alias is not None and alias.args.get("columns"))
        or table.name.lower() in names
    ):
        return None
    own = {table.alias_or_name.lower()}  # with an alias, only the alias names the table (as in SQL)
    condition = where.this.copy()
    for column in condition.find_all(exp.Column):
        if column.table:
            if column.table.lower() not in own or column.args.get("db"):
                return None
            column.set("table", None)
    if any(
        isinstance(n, exp.Subquery | exp.Select | exp.Window | exp.AggFunc)
        for n in condition.walk()
    ):
        return None
    text = condition.sql(dialect="duckdb")
    try:
        row_local(parse_input_filter(text))
    except QueryValidationError:
        return None
    return table.name, text


def parse_input_filter(text: str) -> Expr:
    """The condition ``text`` (one SQL boolean expression over the table's columns) as an
    expression, or a :class:`QueryValidationError` with code :data:`INPUT_FILTER`."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise _refuse(
            f"the input filter must be one SQL condition of at most {MAX_TEXT} characters"
        )
    try:
        tree = sqlglot.parse_one(f"SELECT {text}", read="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError) as exc:
        raise _refuse(f"the input filter does not parse ({str(exc)[:200]})") from None
    if (
        not isinstance(tree, exp.Select)
        or len(tree.expressions) != 1
        or any(v for k, v in tree.args.items() if k != "expressions")
    ):
        raise _refuse("the input filter must be one condition, not a query")
    try:
        condition = Converter("input filter").convert(tree.expressions[0])
    except RecursionError:
        raise _refuse("the input filter is nested too deeply") from None
    except QueryValidationError as exc:
        raise _refuse(exc.message) from None
    except Exception as exc:  # an unsupported construct: the converter's own error
        raise _refuse(str(exc)) from None
    return row_local(condition)


def row_local(condition: Expr) -> Expr:
    """``condition`` when every node of it is in the pushed subset, else the error naming the
    first one that is not."""
    if depth(condition) > MAX_DEPTH:
        raise _refuse("the input filter is nested too deeply")
    for n in walk(condition):
        if isinstance(n, Column):
            if n.variable is not None:
                raise _refuse(
                    f"the input filter reads {n.variable}.{n.name}: only the table's own columns"
                )
        elif isinstance(n, BinaryOp):
            if n.op not in _OPERATORS:
                raise _refuse(f"the operator {n.op} is not pushed to storage nodes")
        elif isinstance(n, Function):
            if n.name not in _FUNCTIONS or len(n.args) != 1:
                raise _refuse(f"the function {n.name} is not pushed to storage nodes")
        elif isinstance(n, Cast):
            to = n.to.upper()
            form = _DATE if to == "DATE" else _TIMESTAMP
            if not (
                to in TEMPORAL_LITERALS
                and isinstance(n.operand, Literal)
                and isinstance(n.operand.value, str)
                and form.fullmatch(n.operand.value.strip())
            ):
                raise _refuse(
                    f"CAST to {n.to} is not pushed to storage nodes (only DATE 'YYYY-MM-DD' and "
                    "TIMESTAMP 'YYYY-MM-DD hh:mm:ss[.ffffff]' literals)"
                )
        elif isinstance(n, UnaryOp):
            if n.op != "NOT" and not isinstance(n.operand, Literal):
                raise _refuse(f"the operator {n.op} is not pushed to storage nodes (arithmetic)")
        elif isinstance(n, Literal):
            _literal(n)
        elif isinstance(n, Like):
            if (
                isinstance(n.pattern, Literal)
                and isinstance(n.pattern.value, str)
                and len(n.pattern.value) > MAX_LIKE
            ):
                raise _refuse(
                    f"a LIKE pattern longer than {MAX_LIKE} "
                    "characters is not pushed to storage nodes"
                )
        elif not isinstance(n, IsNull | InList | Between):
            raise _refuse(f"{type(n).__name__} is not pushed to storage nodes")
    return condition


def _literal(n: Literal) -> None:
    value = n.value
    if isinstance(value, float):
        raise _refuse(
            f"the DOUBLE literal {value!r} is not pushed to storage nodes (write it as a decimal)"
        )
    if isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > MAX_DIGITS:
        raise _refuse(
            f"the number {value} is not pushed to storage nodes (more than {MAX_DIGITS} digits)"
        )
    if type(value).__name__ == "Decimal" and len(value.as_tuple().digits) > MAX_DIGITS:  # type: ignore[union-attr]
        raise _refuse(
            f"the number {value} is not pushed to storage nodes (more than {MAX_DIGITS} digits)"
        )


def input_filter_expression(condition: Expr, schema: pa.Schema) -> pc.Expression:
    """``condition`` over data of ``schema`` as an exact Arrow expression (a row passes exactly
    when the condition is TRUE), or the :data:`INPUT_FILTER` error naming what does not
    convert (an unknown column, types Arrow cannot compare, a form outside the subset)."""
    import pyarrow as pa

    from dfs_cer.query.arrow_filter import is_fully_pushable, to_arrow_filter
    from dfs_cer.query.bind import resolve_column

    row_local(condition)
    try:
        bound = transform(
            condition,
            lambda n: (
                Column(resolve_column(n.name, schema, "input filter"))
                if isinstance(n, Column)
                else None
            ),
        )
    except QueryValidationError as exc:
        raise _refuse(exc.message) from None
    for n in walk(bound):
        if isinstance(n, Column):
            dtype = schema.field(n.name).type
            if pa.types.is_dictionary(dtype):
                dtype = dtype.value_type
            if not (
                pa.types.is_integer(dtype)
                or pa.types.is_floating(dtype)
                or pa.types.is_decimal(dtype)
                or pa.types.is_string(dtype)
                or pa.types.is_large_string(dtype)
                or pa.types.is_boolean(dtype)
                or pa.types.is_date(dtype)
                or (pa.types.is_timestamp(dtype) and dtype.tz is None)
            ):
                raise _refuse(
                    f"column {n.name} is of type {dtype}, which the storage nodes do not filter "
                    "(numbers, strings, booleans, dates and timestamps without a time zone)"
                )
    try:  # types the kernels cannot compare refuse here, not halfway through a scan
        if not is_fully_pushable(bound, schema):
            raise _refuse(
                f"the input filter {to_sql(bound)} does not "
                "convert exactly to the storage nodes' kernels"
            )
        out = to_arrow_filter(bound, schema)
        assert out is not None
        schema.empty_table().filter(out)
    except pa.ArrowException as exc:
        raise _refuse(
            f"the input filter {to_sql(bound)} cannot be evaluated on these columns ({exc})"
        ) from None
    return out


def nan_columns(condition: Expr, schema: pa.Schema, has_nan: Callable[[str], bool]) -> None:
    """Refuse ``condition`` when a floating-point column it reads holds NaN (``has_nan(name)``):
    the embedded engine orders NaN above every number (``f > 5`` is TRUE for it) where Arrow's
    kernels never match it, so only NaN-free columns are filtered on the nodes."""
    import pyarrow as pa

    from dfs_cer.query.bind import resolve_column

    for name in sorted({n.name for n in walk(condition) if isinstance(n, Column)}):
        column = resolve_column(name, schema, "input filter")
        dtype = schema.field(column).type
        if pa.types.is_dictionary(dtype):
            dtype = dtype.value_type
        if pa.types.is_floating(dtype) and has_nan(column):
            raise _refuse(
                f"column {column} holds NaN, which SQL engines order above every number and "
                "Arrow's kernels never match"
            )
