"""A bound on the strings the SQL around MATCH_RECOGNIZE builds.

The engines bound the outer query's joins, sorts, aggregates and result by memory (DuckDB's
``memory_limit``; a JVM's heap), and its time by the query's deadline, which stops a query
between batches of rows. Neither reaches inside one function call: DuckDB builds a call's string
outside its memory accounting, and ``lpad('', 2000000000, 'x')`` takes 2 GB and more than a minute
(folded as a constant before the query even starts) before anything can stop it. So every call
that can build a string longer than its arguments together, or as long as them all, gets a guard
that fails before the call when the string could be longer than ``limit`` characters (``L``).
The functions whose result length an argument sets get the guard on that argument, so that a
constant call fails before it is folded::

    lpad(s, n, c)           -> lpad(s, CASE WHEN n > L THEN error(..) ELSE n END, c)
    repeat(s, n)            -> repeat(s, CASE WHEN len(s) * n > L THEN error(..) ELSE n END)
    replace(s, f, t)        -> replace(s, f, CASE WHEN len(s) * (len(t) + 1) > L THEN .. ELSE t END)
    regexp_replace(s, p, t) -> .. CASE WHEN (len(s) + 1) * (2 * len(t) + 1) > L THEN .. ELSE t END

and concatenations (``a || b || c``, ``concat``, ``concat_ws``: each of their parts bounded, their
length is that of the parts, which a query can name many times) a guard around the whole::

    a || b || c             -> CASE WHEN len(a) + len(b) + len(c) > L THEN .. ELSE a || b || c END

(``error`` on DuckDB, ``raise_error`` on Spark; ``len`` is the length of the value as text, NULL
as 0; a NULL elsewhere passes as before.) A call whose literals keep it within the limit
(``lpad(code, 8, '0')``, ``'a' || 'b'``), or whose replacement is a literal no longer than what it
replaces (``replace(s, 'ab', 'c')``, ``regexp_replace(s, p, '')``), is left as written. A guard
repeats the arguments it measures, so guarded calls nest at most :data:`MAX_NESTED` deep (deeper:
compute the inner value in a CTE). Every string a query builds is then at most ``L`` characters.

:func:`limit_message` finds a guard's message in the error an engine raised with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlglot
from sqlglot import exp

from dfs_cer.errors import QueryValidationError

#: guarded calls inside guarded calls, at most (each level repeats the arguments it measures)
MAX_NESTED = 4
#: rows DuckDB computes at a time: a batch of strings of the limit's length fills the memory limit
BATCH_ROWS = 2048
#: starts every guard's message, so the engine's error can be told from others
MARKER = "dfs-cer outer limit: "
#: ends every guard's message
_FIX = "or raise query.outer_memory_limit"
_SIZED = (exp.Pad, exp.Repeat, exp.Replace, exp.RegexpReplace)
_JOINED = (exp.DPipe, exp.Concat, exp.ConcatWs)


def string_limit(memory_limit: int) -> int:
    """The longest string (characters) one call may build under ``query.outer_memory_limit``."""
    return max(1, memory_limit // BATCH_ROWS)


def limit_message(text: str) -> str | None:
    """The guard's message in an engine's error text, or None when the error is not a guard's."""
    at = text.find(MARKER)
    if at < 0:
        return None
    message = text[at + len(MARKER) :]
    end = message.find(_FIX)
    return message[: end + len(_FIX)] if end >= 0 else message.strip()


def bound_strings(
    sql: str, dialect: str, limit: int, columns: Callable[[str], Sequence[str]] | None = None
) -> str:
    """``sql`` (one checked SELECT in ``dialect``) with every string-building call guarded (see
    the module); unchanged when no call needs a guard. ``columns`` (the engine's output names of
    a query, bound, not run) keeps the names of the columns a guard rewrote: the engine names
    an unaliased column by its expression, so each gets the name it had as an alias."""
    tree = sqlglot.parse_one(sql, read=dialect)
    calls = [
        node
        for node in tree.walk(bfs=False)
        if isinstance(node, _SIZED + _JOINED)
        and not (isinstance(node, exp.DPipe) and isinstance(node.parent, exp.DPipe))
        and not _within(node, limit)
    ]
    if not calls:
        return sql
    for node in calls:
        depth = sum(1 for up in _ancestors(node) if any(up is c for c in calls))
        if depth >= MAX_NESTED:
            raise QueryValidationError(
                f"the outer query nests {_name(node)} {depth + 1} deep in calls that build "
                f"strings (lpad, rpad, repeat, replace, regexp_replace, ||, concat; at most "
                f"{MAX_NESTED})",
                clause="SELECT",
                code="sandbox",
                hint="compute the inner value in a CTE and read it from there",
            )
    names = _names(tree, calls, dialect, columns) if columns is not None else []
    for node in reversed(calls):  # innermost first: an outer guard repeats the guarded inner ones
        _guard(node, dialect, limit)
    for select, index, name in names:
        projection = select.expressions[index]
        projection.replace(exp.alias_(projection.copy(), name, quoted=True))
    return tree.sql(dialect=dialect)


def _names(
    tree: exp.Expr,
    calls: Sequence[exp.Expr],
    dialect: str,
    columns: Callable[[str], Sequence[str]],
) -> list[tuple[exp.Select, int, str]]:
    """The engine's names of the unaliased projections a guard will rewrite, where the names
    are seen (the statement's, a CTE's, a derived table's), by binding the original query."""
    touched = {id(node) for call in calls for node in [call, *_ancestors(call)]}
    out = []
    for select in tree.find_all(exp.Select):
        items = select.expressions
        rewritten = [
            i
            for i, p in enumerate(items)
            if id(p) in touched and not isinstance(p, exp.Alias) and not _is_star(p)
        ]
        query = _standalone(tree, select, dialect) if rewritten else None
        if query is None:
            continue
        try:
            names = list(columns(query))
        except Exception:  # a derived table reading its neighbours: its names as they come
            continue
        stars = [i for i, p in enumerate(items) if _is_star(p)]
        for i in rewritten:
            if not stars or i < stars[0]:
                at = i
            elif len(stars) == 1:  # after the one star: counted from the end
                at = len(names) - (len(items) - i)
            else:
                continue
            if 0 <= at < len(names):
                out.append((select, i, names[at]))
    return out


def _is_star(node: exp.Expr) -> bool:
    return isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.is_star)


def _standalone(tree: exp.Expr, select: exp.Select, dialect: str) -> str | None:
    """A query whose output names are ``select``'s (None where its names are not seen: a scalar
    or IN subquery, a later member of a set operation)."""
    scope: exp.Expr = select
    while isinstance(scope.parent, exp.Union | exp.Intersect | exp.Except):
        if scope is not scope.parent.this:
            return None
        scope = scope.parent
    if scope is tree:
        return tree.sql(dialect=dialect)
    top = tree.args.get("with_") or tree.args.get("with")
    ctes = top.sql(dialect=dialect) + " " if isinstance(top, exp.With) else ""
    if isinstance(scope.parent, exp.CTE):
        name = exp.to_identifier(scope.parent.alias_or_name).sql(dialect=dialect)
        return f"{ctes}SELECT * FROM {name}"
    if isinstance(scope.parent, exp.Subquery) and isinstance(
        scope.parent.parent, exp.From | exp.Join
    ):
        return f"{ctes}SELECT * FROM ({scope.sql(dialect=dialect)})"
    return None


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    out = []
    up = node.parent
    while up is not None:
        out.append(up)
        up = up.parent
    return out


def _name(node: exp.Expr) -> str:
    if isinstance(node, exp.Pad):
        return "lpad()" if node.args.get("is_left") else "rpad()"
    names: dict[type[exp.Expr], str] = {
        exp.Repeat: "repeat()",
        exp.Replace: "replace()",
        exp.DPipe: "||",
        exp.Concat: "concat()",
        exp.ConcatWs: "concat_ws()",
    }
    return names.get(type(node), "regexp_replace()")


def _text(node: exp.Expr | None) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def _number(node: exp.Expr | None) -> float | None:
    return float(node.this) if isinstance(node, exp.Literal) and node.is_number else None


def _within(node: exp.Expr, limit: int) -> bool:
    """Do the call's literals alone keep its result within ``limit`` characters?"""
    if isinstance(node, _JOINED):
        return all(isinstance(p, exp.Literal) for p in _leaves(node))  # as long as the text
    if isinstance(node, exp.Pad):
        n = _number(node.args.get("expression"))
        return n is not None and n <= limit
    if isinstance(node, exp.Repeat):
        s, n = _text(node.this), _number(node.args.get("times"))
        return s is not None and n is not None and len(s) * n <= limit
    s, what, to = _text(node.this), _text(node.expression), _text(node.args.get("replacement"))
    if to is None:
        return False
    if s is not None and (len(s) + 1) * (2 * len(to) + 1) <= limit:
        return True
    if isinstance(node, exp.Replace):
        return to == "" or (what is not None and len(what) > 0 and len(to) <= len(what))
    return to == ""  # a pattern may match the empty string at every position


def _leaves(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.DPipe):
        return [*_leaves(node.this), *_leaves(node.expression)]
    return list(node.expressions) if isinstance(node, exp.Concat | exp.ConcatWs) else [node]


def _double(value: exp.Expr) -> exp.Expr:
    return exp.TryCast(this=value.copy(), to=exp.DataType.build("double"))


def _length(value: exp.Expr) -> exp.Expr:
    """Characters of ``value`` as a double (a list or blob by its text: no shorter)."""
    text = exp.Cast(this=value.copy(), to=exp.DataType.build("text"))
    return _double(exp.Anonymous(this="length", expressions=[text]))


def _sum(values: list[exp.Expr]) -> exp.Expr:
    zero = exp.Literal.number(0)
    total: exp.Expr = exp.Coalesce(this=_length(values[0]), expressions=[zero])
    for value in values[1:]:
        total = exp.Add(
            this=total, expression=exp.Coalesce(this=_length(value), expressions=[zero])
        )
    return total


def _size(node: exp.Expr) -> exp.Expr:
    """The most characters the call can build, as an expression over its arguments."""
    one = exp.Literal.number(1)
    if isinstance(node, _JOINED):
        parts = _leaves(node)
        if isinstance(node, exp.ConcatWs):  # the separator comes between each two
            count = exp.Literal.number(len(parts) - 1)
            return exp.Add(
                this=_sum(parts[1:]), expression=exp.Mul(this=_sum(parts[:1]), expression=count)
            )
        return _sum(parts)
    if isinstance(node, exp.Pad):
        return _double(node.args["expression"])
    if isinstance(node, exp.Repeat):
        return exp.Mul(this=_length(node.this), expression=_double(node.args["times"]))
    s, to = _length(node.this), _length(node.args["replacement"])
    if isinstance(node, exp.Replace):
        return exp.Mul(this=s, expression=exp.Paren(this=exp.Add(this=to, expression=one)))
    twice = exp.Mul(this=exp.Literal.number(2), expression=to)
    return exp.Mul(
        this=exp.Paren(this=exp.Add(this=s, expression=one)),
        expression=exp.Paren(this=exp.Add(this=twice, expression=one)),
    )


def _guard(node: exp.Expr, dialect: str, limit: int) -> None:
    """Put the check of the length the call would build before the call: on the argument that
    sets the length, else around the call."""
    message = (
        f"{MARKER}{_name(node)} would build a string longer than {limit:,} characters, the "
        f"longest one call may build (query.outer_memory_limit / 2,048): shorten it, {_FIX}"
    )
    fail = exp.Anonymous(
        this="raise_error" if dialect == "spark" else "error",
        expressions=[exp.Literal.string(message)],
    )
    check = exp.case().when(exp.GT(this=_size(node), expression=exp.Literal.number(limit)), fail)
    if isinstance(node, _JOINED):
        node.replace(check.else_(node.copy()))
        return
    keys: dict[type[exp.Expr], str] = {exp.Pad: "expression", exp.Repeat: "times"}
    key = keys.get(type(node), "replacement")
    node.set(key, check.else_(node.args[key].copy()))
