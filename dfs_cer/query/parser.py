"""SQL text -> :class:`~dfs_cer.query.root.Query`.

sqlglot tokenizes the whole statement and parses every expression (select list, MEASURES,
DEFINE conditions, PARTITION BY / ORDER BY, the outer WHERE and ORDER BY). The clause structure
of ``MATCH_RECOGNIZE ( ... )`` is read here, token by token, because sqlglot does not know the
whole SQL:2016 clause (SUBSET, WITH UNMATCHED ROWS, RUNNING/FINAL prefixes) nor dfs-cer's
extensions (``WITHIN``, ``ALL MATCHES``); the PATTERN text goes to
:func:`dfs_cer.pattern.parser.parse_pattern`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

from dfs_cer.errors import (
    QueryError,
    QuerySyntaxError,
    QueryValidationError,
    SourcePosition,
    UnsupportedFeatureError,
)
from dfs_cer.pattern.parser import parse_pattern
from dfs_cer.query.convert import Converter, normalize_unit
from dfs_cer.query.expr import Expr, distribute_navigation
from dfs_cer.query.input_columns import duplicate_in_sql
from dfs_cer.query.input_filter import pushable_input
from dfs_cer.query.model import (
    AfterMatchSkip,
    Definition,
    MatchRecognize,
    Measure,
    OuterQuery,
    RowsPerMatch,
    SkipTo,
    SortItem,
    Subset,
    Window,
    WindowUnit,
)
from dfs_cer.query.root import Query
from dfs_cer.query.source import Fragment, FragmentBuilder, SourceText
from dfs_cer.query.statement import INPUT, OUTER_DIALECT, RELATION, Part, Statement, alias_list

# clause keywords in the order the standard requires them
_CLAUSES: list[tuple[str, tuple[str, ...]]] = [
    ("PARTITION BY", ("PARTITION", "BY")),
    ("ORDER BY", ("ORDER", "BY")),
    ("MEASURES", ("MEASURES",)),
    ("ONE ROW PER MATCH", ("ONE", "ROW", "PER", "MATCH")),
    ("ALL ROWS PER MATCH", ("ALL", "ROWS", "PER", "MATCH")),
    ("ALL MATCHES", ("ALL", "MATCHES")),
    ("AFTER MATCH SKIP", ("AFTER", "MATCH", "SKIP")),
    ("INITIAL", ("INITIAL",)),
    ("SEEK", ("SEEK",)),
    ("PATTERN", ("PATTERN",)),
    ("WITHIN", ("WITHIN",)),
    ("SUBSET", ("SUBSET",)),
    ("DEFINE", ("DEFINE",)),
]
_RANK = {
    "PARTITION BY": 0, "ORDER BY": 1, "MEASURES": 2, "ONE ROW PER MATCH": 3,
    "ALL ROWS PER MATCH": 3, "ALL MATCHES": 4, "AFTER MATCH SKIP": 5, "INITIAL": 6, "SEEK": 6,
    "PATTERN": 7, "WITHIN": 8, "SUBSET": 9, "DEFINE": 10,
}  # fmt: skip
_SEMANTICS_WORDS = {"RUNNING": "DFSCER_RUNNING", "FINAL": "DFSCER_FINAL"}
_FROM_ITEM_START = (TokenType.FROM, TokenType.JOIN, TokenType.COMMA)


#: calendar units a WITHIN window may use (not interval literals in expressions)
_CALENDAR_UNITS = {"MONTH": "MONTH", "MONTHS": "MONTH", "YEAR": "YEAR", "YEARS": "YEAR"}


@dataclass
class ClauseParser:
    name: str
    keyword_index: int
    first: int  # first content token
    last: int  # last content token (first - 1 when empty)


class QueryParser:
    def __init__(self, sql: str) -> None:
        if not isinstance(sql, str) or not sql.strip():
            raise QuerySyntaxError(
                "the query is empty",
                hint="pass SELECT ... FROM t MATCH_RECOGNIZE (...)",
                code="syntax",
            )
        self.src = SourceText(sql)
        self.toks = self.src.tokens
        #: PARTITION BY / ORDER BY expressions of the clause being parsed: column name -> expression
        self.computed: dict[str, exp.Expression] = {}

    # ------------------------------------------------------------------ helpers

    def word(self, i: int) -> str:
        return self.toks[i].text.upper() if i < len(self.toks) else ""

    def words_at(self, i: int, words: tuple[str, ...], end: int) -> int:
        """Number of tokens the keyword sequence ``words`` spans at ``i`` (0: no match)."""
        j, k = i, 0
        while k < len(words):
            if j > end:
                return 0
            parts = self.toks[j].text.upper().split()
            if tuple(parts) != words[k : k + len(parts)] or not parts:
                return 0
            k += len(parts)
            j += 1
        return j - i

    def pos(self, i: int) -> SourcePosition:
        return self.src.token_position(i)

    def syntax(
        self, message: str, i: int, clause: str | None = None, hint: str | None = None
    ) -> QuerySyntaxError:
        return QuerySyntaxError(
            message, clause=clause, position=self.pos(i), hint=hint, code="syntax"
        )

    def invalid(
        self, message: str, i: int, clause: str, hint: str | None = None, code: str = "invalid"
    ) -> QueryValidationError:
        return QueryValidationError(
            message, clause=clause, position=self.pos(i), hint=hint, code=code
        )

    def top_level(self, first: int, last: int) -> Iterator[int]:
        """Indices of the tokens in ``[first, last]`` outside any parentheses (not the
        parentheses themselves)."""
        depth = 0
        for i in range(first, last + 1):
            kind = self.toks[i].token_type
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
            elif depth == 0:
                yield i

    def split_commas(self, first: int, last: int) -> list[tuple[int, int]]:
        """Token ranges of the comma-separated items in ``[first, last]`` (depth 0 commas)."""
        items, start = [], first
        for i in self.top_level(first, last):
            if self.toks[i].token_type == TokenType.COMMA:
                items.append((start, i - 1))
                start = i + 1
        items.append((start, last))
        for a, b in items:
            if b < a:
                raise self.syntax(
                    "empty item in a comma-separated list",
                    a if a < len(self.toks) else b,
                    hint="remove the extra comma",
                )
        return items

    def fragment(
        self, first: int, last: int, prefix: str = "SELECT ", clause: str = "expression"
    ) -> Fragment:
        """Source text of tokens ``[first, last]`` with RUNNING/FINAL prefixes made into calls."""
        builder = FragmentBuilder(self.src)
        builder.synthetic(prefix, self.toks[first].start)
        edits: list[tuple[int, int, str]] = []
        for i in range(first, last + 1):
            wrapper = _SEMANTICS_WORDS.get(self.word(i))
            if wrapper and i > first and self.toks[i - 1].token_type == TokenType.DOT:
                continue  # a column named running/final
            bare = (
                i + 1 <= last
                and self.toks[i + 1].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
                and (i + 2 > last or self.toks[i + 2].token_type != TokenType.L_PAREN)
            )
            if wrapper and (
                bare or (i + 1 <= last and self.toks[i + 1].token_type == TokenType.L_PAREN)
            ):
                raise self.invalid(
                    f"{self.word(i)} applies to navigation functions, aggregates and CLASSIFIER, "
                    f"not to {self.src.text(i + 1, min(i + 3, last))!r}",
                    i,
                    clause,
                    f"write e.g. {self.word(i)} LAST(A.price)",
                    code="bad-semantics",
                )
            if wrapper and i + 2 <= last and self.toks[i + 2].token_type == TokenType.L_PAREN:
                close = self.src.matching_paren(i + 2)
                if (
                    close + 2 <= last
                    and self.word(close + 1) == "FILTER"
                    and self.toks[close + 2].token_type == TokenType.L_PAREN
                ):
                    close = self.src.matching_paren(close + 2)  # RUNNING sum(x) FILTER (WHERE ...)
                edits.append((self.toks[i].start, self.toks[i].end + 1, wrapper + "("))
                edits.append((self.toks[close].end + 1, self.toks[close].end + 1, ")"))
        edits.sort(key=lambda e: (e[0], e[1]))
        position = self.toks[first].start
        for start, end, text in edits:
            builder.copy(position, start)
            builder.synthetic(text, start)
            position = max(position, end)
        builder.copy(position, self.toks[last].end + 1)
        return builder.build()

    def parse_sql(
        self, fragment: Fragment, clause: str, dialect: str | None = None
    ) -> exp.Expression:
        try:
            parsed = sqlglot.parse_one(fragment.text, read=dialect)
        except ParseError as exc:
            err = exc.errors[0] if exc.errors else {}
            offset = _offset_of(fragment.text, err.get("line"), err.get("col"))
            position = (
                self.src.position(fragment.source_offset(offset)) if offset is not None else None
            )
            description = _friendly(err.get("description") or str(exc))
            raise QuerySyntaxError(
                f"cannot parse {clause}: {description}",
                clause=clause,
                position=position,
                code="syntax",
            ) from exc
        if not isinstance(parsed, exp.Expression):
            raise QuerySyntaxError(f"cannot parse {clause}", clause=clause, code="syntax")
        return parsed

    def expression(self, first: int, last: int, clause: str) -> Expr:
        select = self.parse_sql(self.fragment(first, last, clause=clause), clause)
        if (
            not isinstance(select, exp.Select)
            or len(select.expressions) != 1
            or select.args.get("from_")
        ):
            raise self.syntax(f"expected one expression in {clause}", first, clause)
        return Converter(clause, self.pos(first)).convert(select.expressions[0])

    def name_at(self, i: int, clause: str, what: str, canonical: bool = True) -> str:
        tok = self.toks[i] if i < len(self.toks) else None
        if (
            tok is None
            or tok.token_type
            in (
                TokenType.L_PAREN,
                TokenType.R_PAREN,
                TokenType.COMMA,
                TokenType.STRING,
                TokenType.NUMBER,
            )
            or not tok.text
        ):
            raise self.syntax(f"expected {what}", min(i, len(self.toks) - 1), clause)
        if tok.token_type == TokenType.IDENTIFIER:
            return tok.text
        if (
            not (tok.text[0].isalpha() or tok.text[0] == "_")
            or not tok.text.replace("_", "").isalnum()
        ):
            raise self.syntax(f"expected {what} but found {tok.text!r}", i, clause)
        return tok.text.upper() if canonical else tok.text

    # ------------------------------------------------------------------ top level

    def parse(self) -> Query:
        mr = [i for i, t in enumerate(self.toks) if t.text.upper() == "MATCH_RECOGNIZE"]
        if not mr:
            raise QuerySyntaxError(
                "the query has no MATCH_RECOGNIZE clause",
                hint="dfs-cer evaluates SELECT ... FROM <table> MATCH_RECOGNIZE (...)",
                code="no-match-recognize",
            )
        if len(mr) > 1:
            raise UnsupportedFeatureError(
                "more than one MATCH_RECOGNIZE in one query is not supported",
                position=self.pos(mr[1]),
                hint="run one query per pattern",
                code="unsupported",
            )
        m = mr[0]
        close, alias, after = self._parenthesised(m, "MATCH_RECOGNIZE")
        recognize = self._body(m + 2, close - 1, close)
        if self.computed:
            raise UnsupportedFeatureError(
                f"expressions in PARTITION BY / ORDER BY ({', '.join(self.computed)}) in a "
                "single-clause query",
                code="unsupported",
                hint="run it as a statement (dfs_cer.match_recognize / dfs-cer query)",
            )
        columns = self.alias_columns
        table, outer = self._outer(m, close, alias, after)
        return Query(
            table=table, recognize=recognize, alias=alias, outer=outer, alias_columns=columns
        )

    def _parenthesised(self, m: int, keyword: str) -> tuple[int, str | None, int]:
        """``KEYWORD ( ... ) [[AS] alias [(column, ...)]]`` at token ``m``: the closing paren, the
        alias and the first token after them (the column list is in ``self.alias_columns``)."""
        if m + 1 >= len(self.toks) or self.toks[m + 1].token_type != TokenType.L_PAREN:
            raise self.syntax(f"{keyword} must be followed by '('", m)
        close = self.src.matching_paren(m + 1)
        alias, after = self._alias(close + 1)
        self.alias_columns: tuple[str, ...] = ()
        if (
            alias is not None
            and after < len(self.toks)
            and self.toks[after].token_type == TokenType.L_PAREN
        ):
            end = self.src.matching_paren(after)
            names = []
            for first, last in self.split_commas(after + 1, end - 1):
                if first != last:
                    raise self.syntax(
                        "a column alias list holds plain column names, e.g. AS m(a, b)",
                        first,
                        "MATCH_RECOGNIZE",
                    )
                names.append(
                    self.name_at(first, "MATCH_RECOGNIZE", "a column name", canonical=False)
                )
            _no_duplicates(
                [n.lower() for n in names], "MATCH_RECOGNIZE", "column alias", self.pos(after)
            )
            self.alias_columns = tuple(names)
            after = end + 1
        return close, alias, after

    def _alias(self, i: int) -> tuple[str | None, int]:
        if i < len(self.toks) and self.toks[i].token_type == TokenType.ALIAS:
            return self.name_at(
                i + 1, "MATCH_RECOGNIZE", "an alias after AS", canonical=False
            ), i + 2
        if i < len(self.toks) and self.toks[i].token_type in (TokenType.VAR, TokenType.IDENTIFIER):
            return self.name_at(i, "MATCH_RECOGNIZE", "an alias", canonical=False), i + 1
        return None, i

    def _outer(self, m: int, close: int, alias: str | None, after: int) -> tuple[str, OuterQuery]:
        # the input table: FROM <name>[.<name>...] [[AS] alias] MATCH_RECOGNIZE
        if m > 0 and self.toks[m - 1].token_type == TokenType.R_PAREN:
            raise UnsupportedFeatureError(
                "a subquery as the input of MATCH_RECOGNIZE is not supported",
                position=self.pos(m - 1),
                hint="name a table (or register the data as one)",
                code="unsupported",
            )
        j = m - 1
        start = j
        while j >= 0 and self.toks[j].token_type != TokenType.FROM:
            j -= 1
        if j < 0:
            raise self.syntax("MATCH_RECOGNIZE must follow FROM <table>", m)
        name_toks = list(range(j + 1, start + 1))
        if not name_toks:
            raise self.syntax("FROM needs a table name before MATCH_RECOGNIZE", m)
        if self.toks[name_toks[0]].token_type == TokenType.L_PAREN:
            raise UnsupportedFeatureError(
                "a subquery as the input of MATCH_RECOGNIZE is not supported",
                position=self.pos(name_toks[0]),
                hint="name a table (or register the data as one)",
                code="unsupported",
            )
        table_end = name_toks[0]
        self.name_at(table_end, "FROM", "a table name")
        while table_end + 2 <= start and self.toks[table_end + 1].token_type == TokenType.DOT:
            table_end += 2
            self.name_at(table_end, "FROM", "a table name")
        rest = name_toks[name_toks.index(table_end) + 1 :]
        if rest and not (
            (
                len(rest) == 1
                and self.toks[rest[0]].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            )
            or (len(rest) == 2 and self.toks[rest[0]].token_type == TokenType.ALIAS)
        ):
            raise self.syntax(
                f"unexpected {self.toks[rest[0]].text!r} between the table and MATCH_RECOGNIZE",
                rest[0],
                "FROM",
            )
        table = ".".join(
            self.toks[t].text
            for t in range(name_toks[0], table_end + 1)
            if self.toks[t].token_type != TokenType.DOT
        )
        builder = FragmentBuilder(self.src)
        builder.copy(0, self.toks[table_end].end + 1)
        builder.synthetic(
            " AS __dfs_cer_matches" if alias is None else f' AS "{alias}"', self.toks[close].start
        )
        if after < len(self.toks):
            builder.synthetic(" ", self.toks[after].start)
            builder.copy(self.toks[after].start, len(self.src.sql))
        select = self.parse_sql(builder.build(), "SELECT", OUTER_DIALECT)
        if not isinstance(select, exp.Select):
            raise UnsupportedFeatureError(
                f"a {type(select).__name__.upper()} statement around MATCH_RECOGNIZE "
                "is not supported",
                hint="use SELECT ... FROM t MATCH_RECOGNIZE (...)",
                code="unsupported",
            )
        for key, label in (
            ("joins", "JOIN"),
            ("group", "GROUP BY"),
            ("having", "HAVING"),
            ("windows", "WINDOW"),
            ("qualify", "QUALIFY"),
            ("with_", "WITH"),
            ("with", "WITH"),
            ("laterals", "LATERAL"),
            ("offset", "OFFSET"),
        ):
            if select.args.get(key):
                raise UnsupportedFeatureError(
                    f"{label} around MATCH_RECOGNIZE is not supported",
                    clause="SELECT",
                    hint="aggregate or join the result DataFrame/table afterwards",
                    code="unsupported",
                )
        for e in select.find_all(exp.Subquery):
            raise UnsupportedFeatureError(
                f"subquery {e.sql()} in the outer query is not supported",
                clause="SELECT",
                code="unsupported",
            )
        items = tuple(e.sql(dialect=OUTER_DIALECT) for e in select.expressions)
        where = select.args.get("where")
        order = select.args.get("order")
        limit = select.args.get("limit")
        limit_value: int | None = None
        if limit is not None:
            value = limit.expression
            if not (
                isinstance(value, exp.Literal) and not value.is_string and str(value.this).isdigit()
            ):
                raise QueryValidationError(
                    f"LIMIT must be a non-negative integer, got {value.sql()}",
                    clause="LIMIT",
                    code="bad-limit",
                )
            limit_value = int(value.this)
        return table, OuterQuery(
            select=items,
            distinct=bool(select.args.get("distinct")),
            where=None if where is None else where.this.sql(dialect=OUTER_DIALECT),
            order_by=()
            if order is None
            else tuple(o.sql(dialect=OUTER_DIALECT) for o in order.expressions),
            limit=limit_value,
        )

    # ------------------------------------------------------------------ whole statements

    def _open_paren(self, close: int) -> int:
        depth = 0
        for i in range(close, -1, -1):
            if self.toks[i].token_type == TokenType.R_PAREN:
                depth += 1
            elif self.toks[i].token_type == TokenType.L_PAREN:
                depth -= 1
                if depth == 0:
                    return i
        raise self.syntax("unbalanced parentheses: ')' is never opened", close)

    def _input_alias(self, m: int) -> tuple[int, str | None, tuple[str, ...]]:
        """``[AS] alias (column, ...)`` ending before token ``m``: the token after the input
        relation, the alias and its columns. A plain ``[AS] alias`` only counts after a
        subquery (after a table name the table's tokens take it)."""
        toks = self.toks
        end, columns = m, tuple[str, ...]()
        if toks[m - 1].token_type == TokenType.R_PAREN:
            open_ = self._open_paren(m - 1)
            if open_ == 0 or toks[open_ - 1].token_type not in (
                TokenType.VAR,
                TokenType.IDENTIFIER,
            ):
                return m, None, ()  # ( subquery ) MATCH_RECOGNIZE
            names = []
            for first, last in self.split_commas(open_ + 1, m - 2):
                if first != last:
                    raise self.syntax(
                        "a column alias list holds plain column names, e.g. t(a, b)", first, "FROM"
                    )
                names.append(self.name_at(first, "FROM", "a column name", canonical=False))
            _no_duplicates([n.lower() for n in names], "FROM", "column alias", self.pos(open_))
            end, columns = open_, tuple(names)
        if toks[end - 1].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
            return m, None, ()
        alias = self.name_at(end - 1, "FROM", "an alias", canonical=False)
        before = end - 2 if end >= 2 and toks[end - 2].token_type == TokenType.ALIAS else end - 1
        if columns or (before > 0 and toks[before - 1].token_type == TokenType.R_PAREN):
            return before, alias, columns
        return m, None, ()

    def _clause_input(self, m: int) -> tuple[int, str | None, tuple[int, int], str | None]:
        """The input of the clause at ``m``: its first token, the table name (None for a
        subquery), the subquery's token range and, with a column alias list (``FROM (VALUES
        ...) t(id, value)``, ``FROM t AS x(a, b)``), the SQL of the renamed input."""
        toks = self.toks
        if m == 0:
            raise self.syntax("MATCH_RECOGNIZE must follow FROM <table>", m)
        end, alias, columns = self._input_alias(m)
        renamed = None
        if alias is not None:
            renamed = f"AS {exp.to_identifier(alias, quoted=True).sql()}{alias_list(columns)}"
            if toks[end - 1].token_type != TokenType.R_PAREN:  # FROM table alias (columns)
                start, table, _, _ = self._clause_input(end)
                return start, table, (-1, -1), renamed if columns else None
        if (
            toks[end - 1].token_type == TokenType.R_PAREN
        ):  # FROM ( subquery ) [alias] MATCH_RECOGNIZE
            start = self._open_paren(end - 1)
            if start + 1 > end - 2:
                raise self.syntax("an empty subquery before MATCH_RECOGNIZE", start)
            return start, None, (start + 1, end - 2), renamed if columns else None
        j = m - 1
        while j >= 0 and toks[j].token_type not in (
            *_FROM_ITEM_START,
            TokenType.L_PAREN,
            TokenType.R_PAREN,
        ):
            j -= 1
        if j < 0 or toks[j].token_type not in _FROM_ITEM_START:
            raise self.syntax(
                "MATCH_RECOGNIZE must follow FROM <table> (or JOIN <table>, or a subquery)", m
            )
        start = end = j + 1
        if start >= m:
            raise self.syntax("FROM needs a table name before MATCH_RECOGNIZE", m)
        self.name_at(end, "FROM", "a table name")
        while end + 2 < m and toks[end + 1].token_type == TokenType.DOT:
            end += 2
            self.name_at(end, "FROM", "a table name")
        rest = list(range(end + 1, m))
        if rest and not (
            (len(rest) == 1 and toks[rest[0]].token_type in (TokenType.VAR, TokenType.IDENTIFIER))
            or (len(rest) == 2 and toks[rest[0]].token_type == TokenType.ALIAS)
        ):
            raise self.syntax(
                f"unexpected {toks[rest[0]].text!r} between the table and MATCH_RECOGNIZE",
                rest[0],
                "FROM",
            )
        table = ".".join(
            toks[t].text for t in range(start, end + 1) if toks[t].token_type != TokenType.DOT
        )
        return start, table, (-1, -1), None

    def statement(self) -> Statement:
        toks = self.toks
        marks = [i for i, t in enumerate(toks) if t.text.upper() == "MATCH_RECOGNIZE"]
        if not marks:
            raise QuerySyntaxError(
                "the query has no MATCH_RECOGNIZE clause",
                hint="dfs-cer evaluates SELECT ... FROM <table> MATCH_RECOGNIZE (...)",
                code="no-match-recognize",
            )
        spans: list[tuple[int, int]] = []  # each clause's tokens, from its input through its alias
        found = []
        for m in marks:
            close, alias, after = self._parenthesised(m, "MATCH_RECOGNIZE")
            start, table, inner, renamed = self._clause_input(m)
            spans.append((start, after - 1))
            found.append((m, close, alias, inner, table, self.alias_columns, renamed))
        names = [RELATION.format(i) for i in range(len(found))]

        def splice(first: int, last: int) -> tuple[Fragment, list[str]]:
            """Tokens ``[first, last]`` with each outermost clause inside them
            replaced by its relation."""
            builder = FragmentBuilder(self.src)
            position = toks[first].start
            used: list[str] = []
            for i, (a, b) in enumerate(spans):
                if (
                    a < first
                    or b > last
                    or any(
                        first <= a2 <= a and b <= b2 <= last and (a2, b2) != (a, b)
                        for a2, b2 in spans
                    )
                ):
                    continue
                builder.copy(position, toks[a].start)
                alias, columns = found[i][2], found[i][5]
                builder.synthetic(
                    f'{names[i]} AS "{alias}"{alias_list(columns)}' if alias else names[i],
                    toks[a].start,
                )
                position = toks[b].end + 1
                used.append(names[i])
            builder.copy(position, toks[last].end + 1)
            return builder.build(), used

        fragment, _ = splice(0, len(toks) - 1)
        outer = self.parse_sql(fragment, "SELECT", OUTER_DIALECT)
        if not isinstance(outer, exp.Select | exp.Union | exp.Intersect | exp.Except):
            raise UnsupportedFeatureError(
                f"a {type(outer).__name__.upper()} statement around MATCH_RECOGNIZE "
                "is not supported",
                hint="use SELECT ... FROM t MATCH_RECOGNIZE (...)",
                code="unsupported",
            )
        top = outer.args.get("with_") or outer.args.get("with")
        ctes = {c.alias_or_name.lower() for c in (top.expressions if top is not None else [])}
        relations = {r.lower() for r in names}
        tables: list[str] = []

        def note_tables(tree: exp.Expression) -> list[str]:
            read: list[str] = []
            for t in tree.find_all(exp.Table):
                if not isinstance(
                    t.this, exp.Identifier
                ):  # a table function: the sandbox refuses it
                    continue
                if t.name.lower() not in relations | ctes and t.name not in read:
                    read.append(t.name)
            tables.extend(r for r in read if r not in tables)
            return read

        parts = []
        for i, (m, close, _alias, (first, last), table, _columns, renamed) in enumerate(found):
            self.computed = {}
            recognize = self._body(m + 2, close - 1, close)
            input_sql: str | None = None
            ctes_sql = ""  # the statement's CTEs the input reads, in front of it (WITH ... )
            depends: list[str] = []
            reads: list[str] = []
            pushed: tuple[str, str] | None = None
            read = [*(s.column for s in recognize.order_by), *recognize.partition_by]
            read = [c for c in read if c not in self.computed]
            if table is None:  # a subquery
                inner_fragment, depends = splice(first, last)
                tree = self.parse_sql(inner_fragment, "FROM", OUTER_DIALECT)
                if (twice := duplicate_in_sql(tree, read)) is not None:
                    raise twice
                pushed = pushable_input(tree, relations | ctes)
                input_sql = tree.sql(dialect=OUTER_DIALECT)
                if top is not None and any(
                    t.name.lower() in ctes for t in tree.find_all(exp.Table)
                ):
                    # the subquery reads the statement's CTEs: it carries their definitions (as the
                    # query itself, not a relation it reads: DuckDB renames a relation's
                    # second id id_1)
                    ctes_sql, input_sql = with_ctes(top, tree)
                    input_sql = ctes_sql + input_sql
                    depends = [r for r in names if r in input_sql]
                    tree = exp.maybe_parse(input_sql, dialect=OUTER_DIALECT)
                reads = note_tables(tree)
            elif table.lower() in ctes:  # a common table expression of the statement
                assert top is not None
                body = next(
                    c.this for c in top.expressions if c.alias_or_name.lower() == table.lower()
                )
                ctes_sql, input_sql = with_ctes(top, body)  # the CTE's query itself (see above)
                input_sql = ctes_sql + input_sql
                depends = [r for r in names if r in input_sql]
                reads = note_tables(exp.maybe_parse(input_sql, dialect=OUTER_DIALECT))
                if (twice := duplicate_in_sql(body, read)) is not None:
                    raise twice
                pushed = pushable_input(body, relations | ctes)
            elif table not in tables and not self.computed and renamed is None:
                tables.append(table)
            if renamed is not None:  # the input's columns renamed: FROM (VALUES ...) t(id, value)
                source = (
                    f"({input_sql[len(ctes_sql) :]})"
                    if input_sql is not None
                    else exp.to_identifier(str(table)).sql()
                )
                input_sql = f"{ctes_sql}SELECT * FROM {source} {renamed}"
                if table is not None and table.lower() not in ctes:
                    reads = note_tables(exp.maybe_parse(input_sql, dialect=OUTER_DIALECT))
                pushed = None
            columns_sql = input_sql
            if (
                self.computed
            ):  # PARTITION BY / ORDER BY expressions: columns computed over the input
                # the CTEs stay in front: a WITH inside a subquery is refused by the sandbox
                source = (
                    f"({input_sql[len(ctes_sql) :]})"
                    if input_sql is not None
                    else exp.to_identifier(str(table)).sql()
                )
                keys = ", ".join(
                    f"{e.sql(dialect=OUTER_DIALECT)} AS {exp.to_identifier(name).sql()}"
                    for name, e in self.computed.items()
                )
                input_sql = (
                    f"{ctes_sql}SELECT *, {keys} FROM {source} AS "
                    f"{exp.to_identifier(f'__dfs_cer_keys_{i}').sql()}"
                )
                if table is not None and table.lower() not in ctes and table not in reads:
                    reads = [*reads, table]
            query = Query(
                table=INPUT.format(i) if input_sql is not None else str(table),
                recognize=recognize,
                outer=OuterQuery(),
            )
            parts.append(
                Part(
                    names[i],
                    query,
                    input_sql,
                    tuple(depends),
                    tuple(reads),
                    None if self.computed else pushed,
                    columns_sql if self.computed else None,
                )
            )
        _drop_unused_ctes(
            outer
        )  # a CTE only a clause read as its input (the clause is spliced out)
        outer_tables = note_tables(outer)
        simple = False
        if len(parts) == 1 and parts[0].input_sql is None:
            try:
                self.parse()
                simple = True
            except UnsupportedFeatureError:
                pass
        return Statement(
            outer.sql(dialect=OUTER_DIALECT),
            tuple(parts),
            tuple(tables),
            tuple(outer_tables),
            simple,
        )

    # ------------------------------------------------------------------ MATCH_RECOGNIZE body

    def _clauses(self, first: int, last: int, close: int) -> list[ClauseParser]:
        found: list[ClauseParser] = []
        depth = 0
        i = first
        while i <= last:
            kind = self.toks[i].token_type
            if depth == 0:
                hit = None
                for name, words in _CLAUSES:
                    n = self.words_at(i, words, last)
                    if n:
                        hit = (name, n)
                        break
                if hit:
                    if found:
                        found[-1].last = i - 1
                    name, n = hit
                    found.append(ClauseParser(name, i, i + n, last))
                    if name == "PATTERN":
                        lp = i + n
                        if lp > last or self.toks[lp].token_type != TokenType.L_PAREN:
                            raise self.syntax("PATTERN must be followed by '('", i, "PATTERN")
                        rp = self.src.matching_paren(lp)
                        found[-1].first, found[-1].last = lp, rp
                        i = rp + 1
                        if i <= last:
                            found.append(ClauseParser("(after PATTERN)", i, i, last))
                        continue
                    i += n
                    continue
                if not found:
                    raise self.syntax(
                        f"unexpected {self.toks[i].text!r} at the start of MATCH_RECOGNIZE",
                        i,
                        "MATCH_RECOGNIZE",
                        "the clauses are PARTITION BY, ORDER BY, MEASURES, ONE ROW/ALL ROWS "
                        "PER MATCH, AFTER MATCH SKIP, PATTERN, SUBSET, DEFINE",
                    )
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
            i += 1
        clauses = [c for c in found if c.name != "(after PATTERN)" or c.first <= c.last]
        for c in clauses:
            if c.name == "(after PATTERN)":
                raise self.syntax(
                    f"unexpected {self.toks[c.first].text!r} after PATTERN (...)",
                    c.first,
                    "PATTERN",
                    "WITHIN, SUBSET or DEFINE may follow PATTERN",
                )
        seen: dict[str, ClauseParser] = {}
        for c in clauses:
            rank_name = (
                "ROWS PER MATCH"
                if c.name in ("ONE ROW PER MATCH", "ALL ROWS PER MATCH")
                else c.name
            )
            if rank_name in seen:
                raise self.syntax(f"{c.name} appears twice", c.keyword_index, c.name)
            for other in seen.values():
                if _RANK[other.name] > _RANK[c.name]:
                    raise self.syntax(
                        f"{c.name} must come before {other.name}",
                        c.keyword_index,
                        c.name,
                        "order: PARTITION BY, ORDER BY, MEASURES, ROWS PER MATCH, AFTER "
                        "MATCH SKIP, PATTERN [WITHIN], SUBSET, DEFINE",
                    )
            seen[rank_name] = c
        if not clauses:
            raise self.syntax(
                "MATCH_RECOGNIZE ( ) is empty",
                close,
                "MATCH_RECOGNIZE",
                "it needs at least PATTERN (and ORDER BY <time column>)",
            )
        return clauses

    def _body(self, first: int, last: int, close: int) -> MatchRecognize:
        clauses = {c.name: c for c in self._clauses(first, last, close)}
        if "PATTERN" not in clauses:
            raise self.syntax(
                "MATCH_RECOGNIZE needs a PATTERN clause",
                close,
                "MATCH_RECOGNIZE",
                "add e.g. PATTERN (A B)",
            )
        if "ORDER BY" not in clauses and "WITHIN" in clauses:
            raise self.syntax(
                "WITHIN needs ORDER BY <time column>",
                close,
                "MATCH_RECOGNIZE",
                "a window is measured along the first ORDER BY column: add ORDER BY ts",
            )
        if "SEEK" in clauses:
            raise UnsupportedFeatureError(
                "SEEK is not supported",
                clause="SEEK",
                position=self.pos(clauses["SEEK"].keyword_index),
                hint="remove it: MATCH_RECOGNIZE in FROM matches INITIAL",
                code="unsupported",
            )
        for name in ("INITIAL", "ALL MATCHES"):
            c = clauses.get(name)
            if c is not None and c.first <= c.last:
                raise self.syntax(
                    f"unexpected {self.toks[c.first].text!r} after {name}", c.first, name
                )

        pattern_clause = clauses["PATTERN"]
        lp, rp = pattern_clause.first, pattern_clause.last
        text_start = self.toks[lp].end + 1
        pattern = parse_pattern(
            self.src.sql[text_start : self.toks[rp].start],
            lambda off: self.src.position(text_start + off),
        )
        rows, all_matches = self._rows_per_match(clauses)
        measures = tuple(
            dataclasses.replace(m, expr=distribute_navigation(m.expr))
            for m in self._measures(clauses.get("MEASURES"))
        )
        definitions = tuple(
            dataclasses.replace(d, condition=distribute_navigation(d.condition))
            for d in self._definitions(clauses.get("DEFINE"))
        )
        return MatchRecognize(
            order_by=self._order_by(clauses["ORDER BY"]) if "ORDER BY" in clauses else (),
            pattern=pattern,
            partition_by=self._partition_by(clauses.get("PARTITION BY")),
            measures=measures,
            rows_per_match=rows,
            all_matches=all_matches,
            after_match_skip=self._after_match_skip(clauses.get("AFTER MATCH SKIP")),
            window=self._within(clauses.get("WITHIN")),
            subsets=self._subsets(clauses.get("SUBSET")),
            definitions=definitions,
        )

    def _require_content(self, c: ClauseParser) -> None:
        if c.last < c.first:
            raise self.syntax(f"{c.name} is empty", c.keyword_index, c.name)

    def _partition_by(self, c: ClauseParser | None) -> tuple[str, ...]:
        if c is None:
            return ()
        self._require_content(c)
        names = []
        for a, b in self.split_commas(c.first, c.last):
            tree = self.parse_sql(
                self.fragment(a, b, clause="PARTITION BY"), "PARTITION BY", OUTER_DIALECT
            )
            item = (
                tree.expressions[0]
                if isinstance(tree, exp.Select) and len(tree.expressions) == 1
                else None
            )
            if isinstance(item, exp.Column) and not item.args.get(
                "db"
            ):  # x or t.x (the input's own column)
                names.append(str(item.this.this))
            elif item is not None and not isinstance(item, exp.Alias | exp.Star):
                names.append(self._computed_key(item, a, "PARTITION BY"))
            else:
                raise self.invalid(
                    f"PARTITION BY takes columns or expressions of the input's columns, got "
                    f"{self.src.text(a, b)!r}",
                    a,
                    "PARTITION BY",
                    code="bad-partition",
                )
        _no_duplicates(names, "PARTITION BY", "column", self.pos(c.first))
        return tuple(names)

    def _computed_key(self, e: exp.Expression, at: int, clause: str) -> str:
        """An expression in PARTITION BY / ORDER BY: a column of that name computed over the
        clause's input (the statement adds it; see :meth:`statement`)."""
        if any(
            isinstance(n, exp.AggFunc | exp.Window | exp.Subquery | exp.Select) for n in e.walk()
        ):
            raise self.invalid(
                f"{clause} takes expressions of one row's columns, got {e.sql()!r}",
                at,
                clause,
                code="bad-key",
            )
        text = e.sql(dialect=OUTER_DIALECT)
        self.computed.setdefault(text, e)
        return text

    def _order_by(self, c: ClauseParser) -> tuple[SortItem, ...]:
        self._require_content(c)
        items = []
        for a, b in self.split_commas(c.first, c.last):
            words = [self.word(i) for i in range(a, b + 1)]
            nulls_first: bool | None = None
            if "NULLS" in words:
                k = words.index("NULLS")
                if k + 1 >= len(words) or words[k + 1] not in ("FIRST", "LAST"):
                    raise self.syntax("NULLS must be followed by FIRST or LAST", a + k, "ORDER BY")
                nulls_first = words[k + 1] == "FIRST"
            select = self.parse_sql(
                self.fragment(a, b, "SELECT 1 ORDER BY ", "ORDER BY"), "ORDER BY", OUTER_DIALECT
            )
            ordered = select.args["order"].expressions[0]
            column = ordered.this
            if isinstance(column, exp.Column) and not column.args.get("db"):  # x or t.x
                name = str(column.this.this)
            elif isinstance(column, exp.Star | exp.Literal):
                raise self.invalid(
                    f"ORDER BY takes columns or expressions of the input's columns, got "
                    f"{self.src.text(a, b)!r}",
                    a,
                    "ORDER BY",
                    code="bad-order",
                )
            else:
                name = self._computed_key(column, a, "ORDER BY")
            items.append(SortItem(name, bool(ordered.args.get("desc")), nulls_first))
        _no_duplicates([i.column for i in items], "ORDER BY", "column", self.pos(c.first))
        return tuple(items)

    def _measures(self, c: ClauseParser | None) -> tuple[Measure, ...]:
        if c is None:
            return ()
        self._require_content(c)
        measures = []
        for a, b in self.split_commas(c.first, c.last):
            select = self.parse_sql(self.fragment(a, b, clause="MEASURES"), "MEASURES")
            if not isinstance(select, exp.Select) or len(select.expressions) != 1:
                raise self.syntax("expected one measure", a, "MEASURES")
            item = select.expressions[0]
            if not isinstance(item, exp.Alias):
                raise self.invalid(
                    f"measure {self.src.text(a, b)!r} needs a name",
                    a,
                    "MEASURES",
                    "write <expression> AS <name>",
                    code="unnamed-measure",
                )
            expr = Converter("MEASURES", self.pos(a)).convert(item.this)
            measures.append(Measure(expr, str(item.args["alias"].this)))
        _no_duplicates([m.name.lower() for m in measures], "MEASURES", "measure", self.pos(c.first))
        return tuple(measures)

    def _rows_per_match(self, clauses: dict[str, ClauseParser]) -> tuple[RowsPerMatch, bool]:
        all_matches = "ALL MATCHES" in clauses
        one = clauses.get("ONE ROW PER MATCH")
        if one is not None:
            if one.first <= one.last:
                raise self.syntax(
                    f"unexpected {self.toks[one.first].text!r} after ONE ROW PER MATCH",
                    one.first,
                    one.name,
                )
            return RowsPerMatch.ONE_ROW, all_matches
        c = clauses.get("ALL ROWS PER MATCH")
        if c is None:
            return RowsPerMatch.ONE_ROW, all_matches
        words = " ".join(self.word(i) for i in range(c.first, c.last + 1))
        options = {
            "": RowsPerMatch.ALL_ROWS_SHOW_EMPTY,
            "SHOW EMPTY MATCHES": RowsPerMatch.ALL_ROWS_SHOW_EMPTY,
            "OMIT EMPTY MATCHES": RowsPerMatch.ALL_ROWS_OMIT_EMPTY,
            "WITH UNMATCHED ROWS": RowsPerMatch.ALL_ROWS_WITH_UNMATCHED,
        }
        if words not in options:
            raise self.syntax(
                f"unexpected {words!r} after ALL ROWS PER MATCH",
                c.first,
                c.name,
                "use SHOW EMPTY MATCHES, OMIT EMPTY MATCHES or WITH UNMATCHED ROWS",
            )
        return options[words], all_matches

    def _after_match_skip(self, c: ClauseParser | None) -> AfterMatchSkip:
        if c is None:
            return AfterMatchSkip()
        words = [self.word(i) for i in range(c.first, c.last + 1)]
        hint = "use PAST LAST ROW, TO NEXT ROW, TO FIRST <var>, TO LAST <var> or TO <var>"
        if words == ["PAST", "LAST", "ROW"]:
            return AfterMatchSkip(SkipTo.PAST_LAST_ROW)
        if words == ["TO", "NEXT", "ROW"]:
            return AfterMatchSkip(SkipTo.NEXT_ROW)
        if len(words) == 3 and words[:2] in (["TO", "FIRST"], ["TO", "LAST"]):
            to = SkipTo.FIRST if words[1] == "FIRST" else SkipTo.LAST
            return AfterMatchSkip(to, self.name_at(c.first + 2, c.name, "a pattern variable"))
        if len(words) == 2 and words[0] == "TO":
            return AfterMatchSkip(
                SkipTo.LAST, self.name_at(c.first + 1, c.name, "a pattern variable")
            )
        at = c.first if c.first <= c.last else c.keyword_index
        raise self.syntax(
            f"unexpected AFTER MATCH SKIP {' '.join(words)!r}".replace("  ", " "), at, c.name, hint
        )

    def _within(self, c: ClauseParser | None) -> Window | None:
        if c is None:
            return None
        self._require_content(c)
        toks = self.toks[c.first : c.last + 1]
        hint = (
            "write WITHIN INTERVAL '30' MINUTE, WITHIN '30' MINUTE or WITHIN <number> (ORDER "
            "BY column units)"
        )
        if toks and toks[0].token_type == TokenType.INTERVAL:
            toks = toks[1:]
        if (
            not toks
            or toks[0].token_type not in (TokenType.STRING, TokenType.NUMBER)
            or len(toks) > 2
        ):
            raise self.syntax(
                f"cannot read the window {self.src.text(c.first, c.last)!r}",
                c.first,
                "WITHIN",
                hint,
            )
        value_text = toks[0].text.strip()
        unit_text = toks[1].text if len(toks) == 2 else None
        if unit_text is None and toks[0].token_type == TokenType.STRING and " " in value_text:
            value_text, unit_text = value_text.split(None, 1)
        try:
            amount = Decimal(value_text)
        except InvalidOperation:
            raise self.syntax(
                f"window value {value_text!r} is not a number", c.first, "WITHIN", hint
            ) from None
        if not amount.is_finite() or amount <= 0:
            raise self.invalid(
                f"the window must be positive, got {value_text}",
                c.first,
                "WITHIN",
                code="bad-window",
            )
        unit: WindowUnit | None = None
        if unit_text is not None:
            name = normalize_unit(unit_text) or _CALENDAR_UNITS.get(unit_text.upper())
            if name is None:
                raise self.syntax(
                    f"unknown window unit {unit_text!r}",
                    c.first,
                    "WITHIN",
                    "use MILLISECOND, SECOND, MINUTE, HOUR, DAY, MONTH or YEAR",
                )
            unit = WindowUnit(name)
            if unit.calendar and amount != amount.to_integral_value():
                raise self.invalid(
                    f"a window of {value_text} {unit.value.lower()}s is not a whole number of "
                    f"calendar {unit.value.lower()}s",
                    c.first,
                    "WITHIN",
                    code="bad-window",
                )
        elif toks[0].token_type == TokenType.STRING:
            raise self.syntax(f"the window {value_text!r} needs a unit", c.first, "WITHIN", hint)
        return Window(value_text, unit)

    def _subsets(self, c: ClauseParser | None) -> tuple[Subset, ...]:
        if c is None:
            return ()
        self._require_content(c)
        subsets = []
        for a, b in self.split_commas(c.first, c.last):
            name = self.name_at(a, "SUBSET", "a subset name")
            if (
                a + 2 > b
                or self.toks[a + 1].token_type != TokenType.EQ
                or self.toks[a + 2].token_type != TokenType.L_PAREN
                or self.toks[b].token_type != TokenType.R_PAREN
            ):
                raise self.syntax(
                    f"cannot read SUBSET {self.src.text(a, b)!r}",
                    a,
                    "SUBSET",
                    "write SUBSET U = (A, B)",
                )
            members = []
            for x, y in self.split_commas(a + 3, b - 1):
                if x != y:
                    raise self.syntax(
                        f"expected a pattern variable, got {self.src.text(x, y)!r}", x, "SUBSET"
                    )
                members.append(self.name_at(x, "SUBSET", "a pattern variable"))
            subsets.append(Subset(name, tuple(members)))
        return tuple(subsets)

    def _definitions(self, c: ClauseParser | None) -> tuple[Definition, ...]:
        if c is None:
            return ()
        self._require_content(c)
        definitions = []
        for a, b in self.split_commas(c.first, c.last):
            name = self.name_at(a, "DEFINE", "a pattern variable")
            if a + 2 > b or self.toks[a + 1].token_type != TokenType.ALIAS:
                raise self.syntax(
                    f"cannot read the definition {self.src.text(a, b)!r}",
                    a,
                    "DEFINE",
                    "write DEFINE A AS <condition>",
                )
            definitions.append(Definition(name, self.expression(a + 2, b, f"DEFINE {name}")))
        return tuple(definitions)


def _drop_unused_ctes(outer: exp.Expression) -> None:
    """Remove the common table expressions nothing in ``outer`` reads any more (each clause
    that read one as its input is a relation now); the engine need not compute them."""
    while True:
        top = outer.args.get("with_") or outer.args.get("with")
        if top is None:
            return
        read = {
            t.name.lower()
            for t in outer.find_all(exp.Table)
            if not any(
                isinstance(a, exp.CTE) and a.alias_or_name.lower() == t.name.lower()
                for a in _ancestors(t)
            )
        }
        unused = [c for c in top.expressions if c.alias_or_name.lower() not in read]
        if not unused:
            return
        for c in unused:
            c.pop()
        if not top.expressions:
            top.pop()


def _ancestors(e: exp.Expression) -> Iterator[Any]:
    node = e.parent
    while node is not None:
        yield node
        node = node.parent


def _offset_of(text: str, line: object, col: object) -> int | None:
    if not isinstance(line, int) or not isinstance(col, int):
        return None
    lines = text.split("\n")
    if line < 1 or line > len(lines):
        return None
    return sum(len(x) + 1 for x in lines[: line - 1]) + max(0, col - 1)


def _friendly(description: str) -> str:
    """sqlglot's parser messages, reworded for people writing SQL."""
    missing = re.match(
        r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>", description
    )
    if missing:
        return (
            f"incomplete expression: the {missing.group(2).upper()} is missing its "
            f"{missing.group(1)}"
        )
    return description.rstrip(".")


def with_ctes(top: exp.With, query: exp.Expression) -> tuple[str, str]:
    """``query`` (a clause's input) and the statement's CTEs ``top`` to put in front of it (``WITH
    ... ``): the query itself at the top of the statement, so the engine yields its columns as they
    are (a column twice stays twice, for the input check to name it); a query with a WITH of its
    own, as a subquery."""
    ctes = f"{top.sql(dialect=OUTER_DIALECT)} "
    if query.args.get("with_") or query.args.get("with") or not isinstance(query, exp.Query):
        return ctes, f"SELECT * FROM ({query.sql(dialect=OUTER_DIALECT)}) AS __dfs_cer_sub"
    return ctes, query.sql(dialect=OUTER_DIALECT)


def _no_duplicates(names: list[str], clause: str, what: str, position: SourcePosition) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise QueryValidationError(
                f"{what} {n} appears twice in {clause}",
                clause=clause,
                position=position,
                hint=f"remove the duplicate {what}",
                code="duplicate",
            )
        seen.add(n)


def parse(sql: str) -> Query:
    """Parse ``SELECT ... FROM t MATCH_RECOGNIZE (...) [AS m] [WHERE ...] [ORDER BY ...]
    [LIMIT n]``.

    The result is validated (variables, navigation, clause rules) by
    :func:`dfs_cer.query.validate.validate` before it is returned.

    Raises:
        QueryError: a :class:`QuerySyntaxError`, :class:`QueryValidationError` or
            :class:`UnsupportedFeatureError` naming the clause, the position and the fix.
    """
    from dfs_cer.query.validate import validate

    try:
        query = QueryParser(sql).parse()
    except QueryError:
        raise
    except RecursionError:
        raise QuerySyntaxError("the query is nested too deeply", code="syntax") from None
    validate(query)
    return query


def parse_statement(sql: str) -> Statement:
    """Split a statement into its MATCH_RECOGNIZE clauses (each parsed and validated like
    :func:`parse`'s) and the SQL around them, which reads each clause's relation by name
    (:mod:`dfs_cer.query.statement`).

    Raises:
        QueryError: a syntax or validation error naming the clause, the position and the fix.
    """
    from dfs_cer.query.validate import validate

    try:
        statement = QueryParser(sql).statement()
    except QueryError:
        raise
    except RecursionError:
        raise QuerySyntaxError("the query is nested too deeply", code="syntax") from None
    for part in statement.parts:
        validate(part.query)
    return statement
