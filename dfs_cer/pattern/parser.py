"""Parser for the text of a ``PATTERN ( ... )`` clause (sqlglot keeps it as raw text).

Grammar (ISO/IEC 9075-2 row pattern, as Trino accepts it)::

    pattern      := alternation
    alternation  := concat ('|' concat)*
    concat       := quantified+
    quantified   := primary quantifier?
    primary      := NAME | '~' NAME | '(' pattern? ')' | '^' | '$' | '{-' pattern '-}'
                  | PERMUTE '(' pattern (',' pattern)* ')'
    quantifier   := ('*' | '+' | '?' | '{' n '}' | '{' n? ',' m? '}') '?'?

``~NAME`` (negation) is a CER extension evaluated only under ALL MATCHES. Unquoted names are
upper-cased (SQL identifiers are case-insensitive); quoted names keep their case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dfs_cer.errors import QuerySyntaxError, QueryValidationError, SourcePosition
from dfs_cer.pattern.ir import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    EmptyPattern,
    Exclusion,
    Label,
    Negation,
    Permutation,
    Quantified,
    RowPattern,
)

PositionOf = Callable[[int], SourcePosition | None]


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # NAME NUMBER ( ) | , {- -} { } * + ? ^ $ PERMUTE EOF
    text: str
    offset: int


def _no_position(_: int) -> SourcePosition | None:
    return None


def _lex(text: str, position_of: PositionOf) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "{":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] == "-":
                toks.append(_Tok("{-", "{-", i))
                i = j + 1
            else:
                toks.append(_Tok("{", "{", i))
                i += 1
            continue
        if c == "-":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] == "}":
                toks.append(_Tok("-}", "-}", i))
                i = j + 1
                continue
            raise _error(
                f"unexpected '-' at {text[i : i + 10]!r}",
                i,
                position_of,
                "exclusion is written {- ... -}",
            )
        if c in "()|,}*+?^$~":
            toks.append(_Tok(c, c, i))
            i += 1
            continue
        if c.isdigit():
            j = i
            while j < n and text[j].isdigit():
                j += 1
            toks.append(_Tok("NUMBER", text[i:j], i))
            i = j
            continue
        if c == '"':
            j = i + 1
            buf = []
            while True:
                if j >= n:
                    raise _error(
                        "unterminated quoted variable name",
                        i,
                        position_of,
                        'close the name with a double quote (")',
                    )
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(text[j])
                j += 1
            if not buf:
                raise _error("empty quoted variable name", i, position_of, "name the variable")
            toks.append(_Tok("NAME", "".join(buf), i))
            i = j + 1
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            k = j
            while k < n and text[k].isspace():
                k += 1
            if word.upper() == "PERMUTE" and k < n and text[k] == "(":
                toks.append(_Tok("PERMUTE", word, i))
            else:
                toks.append(_Tok("NAME", word.upper(), i))
            i = j
            continue
        raise _error(
            f"unexpected character {c!r}",
            i,
            position_of,
            "PATTERN allows variable names, ( ) | , ^ $ {- -} PERMUTE and quantifiers * + ? {n,m}",
        )
    toks.append(_Tok("EOF", "", n))
    return toks


def _error(
    message: str, offset: int, position_of: PositionOf, hint: str | None = None
) -> QuerySyntaxError:
    return QuerySyntaxError(
        message, clause="PATTERN", position=position_of(offset), hint=hint, code="pattern-syntax"
    )


def _zero_upper_bound(text: str, offset: int, position_of: PositionOf) -> QueryValidationError:
    # ISO/IEC 19075-5 (as Trino): a quantifier's upper bound is at least 1; {0} would match nothing
    return QueryValidationError(
        f"the quantifier {text} has upper bound 0: a pattern quantifier's upper bound "
        "must be at least 1",
        clause="PATTERN",
        position=position_of(offset),
        hint="drop the element, or write ? ({0,1}) to make it optional",
        code="bad-quantifier",
    )


class _Parser:
    def __init__(self, text: str, position_of: PositionOf) -> None:
        self.position_of = position_of
        self.toks = _lex(text, position_of)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self, kind: str | None = None) -> _Tok:
        tok = self.toks[self.i]
        if kind is not None and tok.kind != kind:
            shown = tok.text or "end of pattern"
            raise _error(f"expected {kind!r} but found {shown!r}", tok.offset, self.position_of)
        self.i += 1
        return tok

    def parse(self) -> RowPattern:
        if self.peek().kind == "EOF":
            return EmptyPattern()
        result = self.alternation()
        tok = self.peek()
        if tok.kind != "EOF":
            raise _error(
                f"unexpected {tok.text!r}",
                tok.offset,
                self.position_of,
                "check the parentheses of the pattern",
            )
        return result

    def alternation(self) -> RowPattern:
        items = [self.concatenation()]
        while self.peek().kind == "|":
            self.take("|")
            items.append(self.concatenation())
        return items[0] if len(items) == 1 else Alternation(tuple(items))

    def concatenation(self) -> RowPattern:
        items: list[RowPattern] = []
        while self.peek().kind in ("NAME", "(", "^", "$", "{-", "PERMUTE", "~"):
            items.append(self.quantified())
        if not items:
            tok = self.peek()
            shown = tok.text or "end of pattern"
            raise _error(
                f"expected a pattern element but found {shown!r}",
                tok.offset,
                self.position_of,
                "an empty pattern is written ()",
            )
        return items[0] if len(items) == 1 else Concatenation(tuple(items))

    def quantified(self) -> RowPattern:
        primary = self.primary()
        tok = self.peek()
        if tok.kind not in ("*", "+", "?", "{"):
            return primary
        if isinstance(primary, Negation):
            raise _error("a negated variable cannot be quantified", tok.offset, self.position_of)
        lo, hi = self.quantifier()
        greedy = True
        if self.peek().kind == "?":
            self.take("?")
            greedy = False
        nxt = self.peek()
        if nxt.kind in ("*", "+", "?", "{"):
            raise _error(
                f"unexpected quantifier {nxt.text!r} after a quantifier",
                nxt.offset,
                self.position_of,
                "wrap the quantified part in parentheses, e.g. (A*)*",
            )
        return Quantified(primary, lo, hi, greedy)

    def quantifier(self) -> tuple[int, int | None]:
        tok = self.take()
        if tok.kind == "*":
            return 0, None
        if tok.kind == "+":
            return 1, None
        if tok.kind == "?":
            return 0, 1
        # '{' n? (',' m?)? '}'
        lo: int | None = None
        hi: int | None = None
        if self.peek().kind == "NUMBER":
            lo = int(self.take().text)
        if self.peek().kind == ",":
            self.take(",")
            if self.peek().kind == "NUMBER":
                hi = int(self.take().text)
            close = self.take("}")
            lo_v = 0 if lo is None else lo
            if hi is not None and hi < lo_v:
                raise _error(
                    f"quantifier {{{lo_v},{hi}}} has its upper bound below its lower bound",
                    close.offset,
                    self.position_of,
                )
            if hi == 0:
                raise _zero_upper_bound(
                    f"{{{'' if lo is None else lo},0}}", close.offset, self.position_of
                )
            return lo_v, hi
        close = self.take("}")
        if lo is None:
            raise _error(
                "empty quantifier {}",
                close.offset,
                self.position_of,
                "write {n}, {n,}, {,m} or {n,m}",
            )
        if lo == 0:
            raise _zero_upper_bound("{0}", close.offset, self.position_of)
        return lo, lo

    def primary(self) -> RowPattern:
        tok = self.take()
        if tok.kind == "NAME":
            return Label(tok.text)
        if tok.kind == "~":
            name = self.take()
            if name.kind != "NAME":
                raise _error(
                    "~ negates one pattern variable, e.g. A ~B C", tok.offset, self.position_of
                )
            return Negation(Label(name.text))
        if tok.kind == "^":
            return Anchor(AnchorKind.PARTITION_START)
        if tok.kind == "$":
            return Anchor(AnchorKind.PARTITION_END)
        if tok.kind == "(":
            if self.peek().kind == ")":
                self.take(")")
                return EmptyPattern()
            inner = self.alternation()
            self.take(")")
            return inner
        if tok.kind == "{-":
            inner = self.alternation()
            self.take("-}")
            return Exclusion(inner)
        if tok.kind == "PERMUTE":
            self.take("(")
            items = [self.alternation()]
            while self.peek().kind == ",":
                self.take(",")
                items.append(self.alternation())
            self.take(")")
            return Permutation(tuple(items))
        raise _error(f"unexpected {tok.text or 'end of pattern'!r}", tok.offset, self.position_of)


def parse_pattern(text: str, position_of: PositionOf = _no_position) -> RowPattern:
    """Parse the text inside ``PATTERN ( ... )``.

    Args:
        text: the pattern text without the enclosing parentheses.
        position_of: maps an offset in ``text`` to a position in the user's SQL, for errors.

    Raises:
        QuerySyntaxError: naming the offending token and its position.
    """
    return _Parser(text, position_of).parse()
