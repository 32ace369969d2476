"""Parser for situation queries (TPStream's language as a SQL clause)::

    SELECT ... FROM <table> SITUATIONS (
      [PARTITION BY col, ...] ORDER BY time_col
      DEFINE A AS <condition> [AT LEAST d | AT MOST d | BETWEEN d1 AND d2], ...
      PATTERN A overlaps B AND (B overlaps C OR B meets C) AND A before C
      [WITHIN d]
      [MEASURES avg(B.speed) AS avg_speed, count(A.*) AS n, ...]
    ) [AS m] [WHERE ...] [ORDER BY ...] [LIMIT n]

Durations ``d`` are ``INTERVAL '5' SECOND`` (``'5' SECOND``) or a bare number in the time
column's units. In PATTERN, ``;`` is TPStream's alternative (it binds tighter than AND:
``A meets B; A overlaps B AND C during B``), ``OR`` the usual one (looser than AND); after
distributing, every clause must relate one pair of situations. Relations: before, after,
meets, met_by, overlaps, overlapped_by, starts, started_by, during, contains, finishes,
finished_by, equals (``met by`` etc. also read; ``equal`` for equals).
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from dfs_cer.errors import QuerySyntaxError, QueryValidationError, UnsupportedFeatureError
from dfs_cer.query.expr import Aggregate, Column, Navigation, NavKind, Star, walk
from dfs_cer.query.model import Window
from dfs_cer.query.parser import ClauseParser, QueryParser
from dfs_cer.query.statement import alias_list
from dfs_cer.situations.allen import INVERSE, RELATIONS
from dfs_cer.situations.model import AGGREGATES, Constraint, Measure, Situation, SituationQuery

CLAUSES = ("PARTITION BY", "ORDER BY", "DEFINE", "PATTERN", "WITHIN", "MEASURES")
RELATION = "{relation}"

Tree = (
    tuple[str, object, object] | tuple[str, str, str]
)  # ("and"|"or", l, r) or ("rel", "A r", "B")


class _SituationParser(QueryParser):
    def parse_situations(self) -> SituationQuery:
        at = [i for i, t in enumerate(self.toks) if t.text.upper() == "SITUATIONS"]
        if not at:
            raise QuerySyntaxError(
                "the query has no SITUATIONS clause",
                hint="write SELECT ... FROM <table> SITUATIONS (DEFINE ... PATTERN ...)",
                code="syntax",
            )
        m = at[0]
        close, alias, after = self._parenthesised(m, "SITUATIONS")
        j = m - 1
        while j >= 0 and self.toks[j].token_type != TokenType.FROM:
            j -= 1
        if j < 0 or j == m - 1:
            raise self.syntax("SITUATIONS must follow FROM <table>", m)
        table = self.src.text(j + 1, m - 1).strip()
        outer = (
            self.src.sql[: self.toks[j + 1].start]
            + RELATION
            + (" AS " + f'"{alias}"' + alias_list(self.alias_columns) if alias else "")
            + (" " + self.src.sql[self.toks[after].start :] if after < len(self.toks) else "")
        )
        clauses = self._situation_clauses(m + 2, close - 1)
        for required in ("ORDER BY", "DEFINE", "PATTERN"):
            if required not in clauses:
                raise self.syntax(f"SITUATIONS needs {required}", m, required)
        situations = self._defines(clauses["DEFINE"])
        names = {s.name for s in situations}
        constraints = self._pattern(clauses["PATTERN"], names)
        used = {n for c in constraints for n in (c.left, c.right)}
        unused = sorted(names - used)
        if unused and len(names) > 1:
            raise self.invalid(
                f"situation(s) {', '.join(unused)} appear in no PATTERN relation",
                clauses["PATTERN"].keyword_index,
                "PATTERN",
                "relate every defined situation to another one",
            )
        order = self._columns(clauses["ORDER BY"], "ORDER BY")
        if len(order) != 1:
            raise self.invalid(
                "SITUATIONS orders by one time column", clauses["ORDER BY"].first, "ORDER BY"
            )
        window = self._within(clauses.get("WITHIN"))
        measures = self._situation_measures(clauses.get("MEASURES"), names)
        partition = (
            tuple(self._columns(clauses["PARTITION BY"], "PARTITION BY"))
            if "PARTITION BY" in clauses
            else ()
        )
        return SituationQuery(
            table,
            alias,
            partition,
            order[0],
            tuple(situations),
            tuple(constraints),
            window,
            tuple(measures),
            outer,
        )

    # ------------------------------------------------------------------ clauses

    def _situation_clauses(self, first: int, last: int) -> dict[str, ClauseParser]:
        marks: list[tuple[int, str, int]] = []
        for i in self.top_level(first, last):
            for name in CLAUSES:
                n = self.words_at(i, tuple(name.split()), last)
                if n and not any(m[0] <= i < m[0] + m[2] for m in marks):
                    if name == "ORDER BY" and any(c == "DEFINE" for _, c, _ in marks):
                        continue  # ORDER BY after DEFINE belongs to no clause here
                    marks.append((i, name, n))
                    break
        if not marks or marks[0][0] != first:
            raise self.syntax(
                "expected PARTITION BY, ORDER BY, DEFINE, PATTERN, WITHIN or MEASURES", first
            )
        out: dict[str, ClauseParser] = {}
        for k, (i, name, n) in enumerate(marks):
            end = marks[k + 1][0] - 1 if k + 1 < len(marks) else last
            if name in out:
                raise self.syntax(f"{name} appears twice", i, name)
            out[name] = ClauseParser(name, i, i + n, end)
            if end < i + n:
                raise self.syntax(f"{name} is empty", i, name)
        return out

    def _columns(self, c: ClauseParser, clause: str) -> list[str]:
        names = []
        for a, b in self.split_commas(c.first, c.last):
            if a != b:
                raise self.syntax(f"expected a column name, got {self.src.text(a, b)!r}", a, clause)
            names.append(self.name_at(a, clause, "a column name", canonical=False))
        return names

    def _duration(self, first: int, last: int, clause: str) -> Window:
        window = self._within(ClauseParser(clause, first, first, last))
        assert window is not None
        return window

    def _defines(self, c: ClauseParser) -> list[Situation]:
        out = []
        for a, b in self.split_commas(c.first, c.last):
            name = self.name_at(a, "DEFINE", "a situation name")
            if self.word(a + 1) != "AS":
                raise self.syntax(
                    f"expected AS after {name}", a + 1, "DEFINE", "write A AS <condition>"
                )
            end = b
            low = high = None
            for k in range(a + 2, b + 1):
                if self.word(k) == "AT" and self.word(k + 1) in ("LEAST", "MOST"):
                    d = self._duration(k + 2, b, "DEFINE")
                    low, high = (d, None) if self.word(k + 1) == "LEAST" else (None, d)
                    end = k - 1
                    break
                if (
                    self.word(k) == "BETWEEN"
                    and k > a + 2
                    and self._duration_between(k, b)
                    and self._closes_condition(a + 2, k - 1)
                ):
                    and_at = next(x for x in range(k + 1, b + 1) if self.word(x) == "AND")
                    low = self._duration(k + 1, and_at - 1, "DEFINE")
                    high = self._duration(and_at + 1, b, "DEFINE")
                    end = k - 1
                    break
            if end < a + 2:
                raise self.syntax(f"situation {name} needs a condition", a, "DEFINE")
            condition = self.expression(a + 2, end, f"DEFINE {name}")
            for node in walk(condition):
                if isinstance(node, Aggregate):
                    raise UnsupportedFeatureError(
                        f"aggregates in the condition of {name}",
                        clause="DEFINE",
                        hint="a situation's condition reads one row at a time",
                        code="unsupported",
                    )
                if isinstance(node, Column) and node.variable not in (None, name):
                    raise UnsupportedFeatureError(
                        f"{name}'s condition reads {node.variable}.{node.name}",
                        clause="DEFINE",
                        hint="conditions read the row's own columns",
                        code="unsupported",
                    )
            if (
                low is not None
                and high is not None
                and _amount(low) > _amount(high)
                and low.unit == high.unit
            ):
                raise QueryValidationError(
                    f"{name}: BETWEEN {low.value} AND {high.value} is empty",
                    clause="DEFINE",
                    code="bad-duration",
                )
            out.append(Situation(name, condition, low, high))
        names = [s.name for s in out]
        if len(set(names)) != len(names):
            raise self.invalid("a situation is defined twice", c.first, "DEFINE")
        return out

    def _closes_condition(self, first: int, last: int) -> bool:
        """Is ``BETWEEN`` after tokens ``[first, last]`` a duration (``speed > 70 BETWEEN 4 AND
        30``) rather than SQL's ``x BETWEEN a AND b`` on the last operand (``x > 0 AND speed
        BETWEEN 60 AND 80``)? A duration follows a whole predicate: a comparison, IS NULL, IN,
        LIKE, NOT, a nested BETWEEN, or a parenthesised condition (``(a) BETWEEN 4 AND 30`` for a
        boolean column)."""
        if (
            self.toks[first].token_type == TokenType.L_PAREN
            and self.src.matching_paren(first) == last
        ):
            return True
        try:
            e = self.expression(first, last, "DEFINE")
        except (QuerySyntaxError, QueryValidationError, UnsupportedFeatureError):
            return False
        return _predicate(e)

    def _duration_between(self, k: int, b: int) -> bool:
        """``BETWEEN d AND d`` closing the definition (not a BETWEEN inside the condition)."""
        words = [self.word(x) for x in range(k + 1, b + 1)]
        if "AND" not in words:
            return False
        tail = [x for x in range(k + 1, b + 1)]
        and_at = tail[words.index("AND")]
        try:
            self._duration(k + 1, and_at - 1, "DEFINE")
            self._duration(and_at + 1, b, "DEFINE")
        except (QuerySyntaxError, QueryValidationError):
            return False
        return True

    # ------------------------------------------------------------------ PATTERN

    def _pattern(self, c: ClauseParser, names: set[str]) -> list[Constraint]:
        self._at = c.first
        self._end = c.last
        tree = self._or()
        if self._at <= self._end:
            raise self.syntax(
                f"unexpected {self.toks[self._at].text!r} in PATTERN", self._at, "PATTERN"
            )
        clauses = _cnf(tree)
        out: dict[tuple[str, str], set[str]] = {}
        order: list[tuple[str, str]] = []
        for clause in clauses:
            pairs = set()
            rels = set()
            for left, rel, right in clause:
                for n in (left, right):
                    if n not in names:
                        raise self.invalid(
                            f"PATTERN relates {n}, which DEFINE does not define",
                            c.first,
                            "PATTERN",
                            f"situations: {', '.join(sorted(names))}",
                        )
                if left == right:
                    raise self.invalid(
                        f"{left} {rel} {right} relates a situation to itself", c.first, "PATTERN"
                    )
                if (left, right) > (right, left):
                    left, rel, right = right, INVERSE[rel], left
                pairs.add((left, right))
                rels.add(rel)
            if len(pairs) != 1:
                raise UnsupportedFeatureError(
                    "an alternative between relations of different pairs of situations",
                    clause="PATTERN",
                    hint="OR (or ;) may only join relations of the same two situations, e.g. A "
                    "meets B; A overlaps B",
                    code="unsupported",
                )
            pair = pairs.pop()
            if pair in out:
                out[pair] &= rels  # two constraints on one pair: both hold
            else:
                out[pair] = rels
                order.append(pair)
        return [Constraint(a, b, tuple(r for r in RELATIONS if r in out[(a, b)])) for a, b in order]

    def _or(self) -> Tree:
        left = self._and()
        while self._at <= self._end and self.word(self._at) == "OR":
            self._at += 1
            left = ("or", left, self._and())
        return left

    def _and(self) -> Tree:
        left = self._alt()
        while self._at <= self._end and self.word(self._at) == "AND":
            self._at += 1
            left = ("and", left, self._alt())
        return left

    def _alt(self) -> Tree:
        left = self._atom()
        while self._at <= self._end and self.toks[self._at].token_type == TokenType.SEMICOLON:
            self._at += 1
            left = ("or", left, self._atom())
        return left

    def _atom(self) -> Tree:
        i = self._at
        if i > self._end:
            raise self.syntax(
                "PATTERN ends too early", self._end, "PATTERN", "write e.g. A before B"
            )
        if self.toks[i].token_type == TokenType.L_PAREN:
            close = self.src.matching_paren(i)
            end = self._end
            self._at, self._end = i + 1, close - 1
            tree = self._or()
            if self._at <= self._end:
                raise self.syntax(
                    f"unexpected {self.toks[self._at].text!r} in PATTERN", self._at, "PATTERN"
                )
            self._at, self._end = close + 1, end
            return tree
        left = self.name_at(i, "PATTERN", "a situation name")
        rel, n = self._relation(i + 1)
        right = self.name_at(i + 1 + n, "PATTERN", f"a situation name after {rel}")
        self._at = i + 2 + n
        return ("rel", f"{left} {rel}", right)

    def _relation(self, i: int) -> tuple[str, int]:
        word = self.word(i).lower()
        two = f"{word}_{self.word(i + 1).lower()}"
        if two in RELATIONS:
            return two, 2
        word = {"equal": "equals"}.get(word, word)
        if word in RELATIONS:
            return word, 1
        raise self.syntax(
            f"unknown relation {self.word(i)!r}",
            min(i, len(self.toks) - 1),
            "PATTERN",
            f"relations: {', '.join(RELATIONS)}",
        )

    # ------------------------------------------------------------------ MEASURES

    def _situation_measures(self, c: ClauseParser | None, names: set[str]) -> list[Measure]:
        if c is None:
            return []
        out = []
        for a, b in self.split_commas(c.first, c.last):
            if b < a + 2 or self.word(b - 1) != "AS":
                raise self.syntax("a measure needs a name: agg(X.column) AS name", a, "MEASURES")
            name = self.name_at(b, "MEASURES", "a measure name", canonical=False)
            e = self.expression(a, b - 2, "MEASURES")
            arg: object
            if (
                isinstance(e, Navigation)
                and e.kind in (NavKind.FIRST, NavKind.LAST)
                and e.offset == 0
            ):
                func, arg = (
                    e.kind.value.lower(),
                    e.operand,
                )  # FIRST(X.col) / LAST(X.col): the run's first/last row
            else:
                func = str(getattr(e, "name", "")).lower()
                args: tuple[object, ...] = tuple(getattr(e, "args", ()))
                arg = args[0] if len(args) == 1 else None
            if func not in AGGREGATES or not isinstance(arg, Column | Star):
                raise UnsupportedFeatureError(
                    f"measure {self.src.text(a, b - 2)!r}",
                    clause="MEASURES",
                    hint=f"write {' / '.join(AGGREGATES)}(X.column) AS name",
                    code="unsupported",
                )
            if arg.variable not in names:
                raise self.invalid(
                    f"measure {name} needs a situation: write {func}(X.column) with X one of "
                    f"{', '.join(sorted(names))}",
                    a,
                    "MEASURES",
                )
            column = arg.name if isinstance(arg, Column) else None
            if column is None and func != "count":
                raise self.invalid(
                    f"{func}(X.*) is not an aggregate; use count(X.*)", a, "MEASURES"
                )
            out.append(Measure(name, func, arg.variable, column))
        return out


def _predicate(e: object) -> bool:
    from dfs_cer.query.expr import Between, BinaryOp, InList, IsNull, Like, Literal, UnaryOp

    if isinstance(e, BinaryOp):
        if e.op in ("AND", "OR"):
            return _predicate(e.right)
        return e.op in ("=", "<>", "<", "<=", ">", ">=")
    if isinstance(e, UnaryOp):
        return e.op == "NOT"
    if isinstance(e, Literal):
        return isinstance(e.value, bool)
    return isinstance(e, IsNull | InList | Between | Like)


def _amount(w: Window) -> float:
    return float(w.amount)


def _cnf(tree: Tree) -> list[list[tuple[str, str, str]]]:
    kind = tree[0]
    if kind == "rel":
        left, rel = str(tree[1]).split(" ")
        return [[(left, rel, str(tree[2]))]]
    a, b = _cnf(tree[1]), _cnf(tree[2])  # type: ignore[arg-type]
    if kind == "and":
        return a + b
    return [x + y for x in a for y in b]


def parse_situations(sql: str) -> SituationQuery:
    """Parse ``SELECT ... FROM t SITUATIONS (...)`` (see the module docstring)."""
    return _SituationParser(sql).parse_situations()
